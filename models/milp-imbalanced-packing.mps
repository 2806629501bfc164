NAME        
ROWS
 N  Obj     
 G  r0      
 G  r1      
COLUMNS
    c0        Obj       1000
    c0        r0        1
    c1        Obj       1000
    c1        r1        1
    MARK0000  'MARKER'                 'INTORG'
    c2        Obj       0.34000000000000002
    c2        r0        2
    c2        r1        2
    c3        Obj       0.34000000000000002
    c3        r0        1
    c3        r1        2
    c4        Obj       0.17000000000000001
    c4        r0        1
    c5        Obj       0.085000000000000006
    c5        r1        3
    c6        Obj       0.34000000000000002
    c6        r0        2
    c6        r1        3
    c7        Obj       0.34000000000000002
    c7        r0        1
    MARK0001  'MARKER'                 'INTEND'
RHS
    RHS_V     r0        3
    RHS_V     r1        4
BOUNDS
 LI BOUND     c2        0
 LI BOUND     c3        0
 LI BOUND     c4        0
 LI BOUND     c5        0
 LI BOUND     c6        0
 LI BOUND     c7        0
ENDATA

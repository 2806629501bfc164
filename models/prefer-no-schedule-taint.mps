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
    c2        Obj       0.40000000000000002
    c2        r0        2
    c2        r1        1
    c3        Obj       0.40000000000000002
    c3        r0        2
    c4        Obj       0.40000000000000002
    c4        r1        1
    MARK0001  'MARKER'                 'INTEND'
RHS
    RHS_V     r0        2
    RHS_V     r1        1
BOUNDS
 LI BOUND     c2        0
 LI BOUND     c3        0
 LI BOUND     c4        0
ENDATA

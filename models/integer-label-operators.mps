NAME        
ROWS
 N  Obj     
 G  r0      
 G  r1      
 G  r2      
 G  r3      
COLUMNS
    c0        Obj       1000
    c0        r0        1
    c1        Obj       1000
    c1        r1        1
    c2        Obj       1000
    c2        r2        1
    c3        Obj       1000
    c3        r3        1
    MARK0000  'MARKER'                 'INTORG'
    c4        Obj       14.4
    c4        r0        1
    c5        Obj       14.4
    c5        r1        1
    c6        Obj       0.40000000000000002
    c6        r2        1
    c7        Obj       0.40000000000000002
    c7        r3        1
    MARK0001  'MARKER'                 'INTEND'
RHS
    RHS_V     r0        1
    RHS_V     r1        1
    RHS_V     r2        1
    RHS_V     r3        1
BOUNDS
 LI BOUND     c4        0
 LI BOUND     c5        0
 LI BOUND     c6        0
 LI BOUND     c7        0
ENDATA

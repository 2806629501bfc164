NAME        
ROWS
 N  Obj     
 G  r0      
 G  r1      
 G  r2      
COLUMNS
    c0        Obj       1000
    c0        r0        1
    c1        Obj       1000
    c1        r1        1
    c2        Obj       1000
    c2        r2        1
    MARK0000  'MARKER'                 'INTORG'
    c3        Obj       0.40000000000000002
    c3        r0        1
    c3        r1        1
    c3        r2        1
    c4        Obj       0.40000000000000002
    c4        r0        1
    c5        Obj       0.40000000000000002
    c5        r1        1
    c6        Obj       0.40000000000000002
    c6        r2        1
    MARK0001  'MARKER'                 'INTEND'
RHS
    RHS_V     r0        1
    RHS_V     r1        1
    RHS_V     r2        1
BOUNDS
 LI BOUND     c3        0
 LI BOUND     c4        0
 LI BOUND     c5        0
 LI BOUND     c6        0
ENDATA

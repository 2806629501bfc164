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
    c2        Obj       1.5
    c2        r0        1
    c3        Obj       0.59999999999999998
    c3        r1        1
    MARK0001  'MARKER'                 'INTEND'
RHS
    RHS_V     r0        1
    RHS_V     r1        1
BOUNDS
 LI BOUND     c2        0
 LI BOUND     c3        0
ENDATA

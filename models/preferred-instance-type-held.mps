NAME        
ROWS
 N  Obj     
 G  r0      
COLUMNS
    c0        Obj       1000
    c0        r0        1
    MARK0000  'MARKER'                 'INTORG'
    c1        Obj       0.90000000000000002
    c1        r0        1
    c2        Obj       0.80000000000000004
    c2        r0        1
    MARK0001  'MARKER'                 'INTEND'
RHS
    RHS_V     r0        1
BOUNDS
 LI BOUND     c1        0
 LI BOUND     c2        0
ENDATA

NAME        
ROWS
 N  Obj     
 G  r0      
 G  r1      
 L  r2      
 G  r3      
 L  r4      
COLUMNS
    c0        Obj       1000
    c0        r0        1
    c1        r1        -1
    c1        r2        -1
    c1        r3        -1
    c1        r4        -1
    MARK0000  'MARKER'                 'INTORG'
    c2        Obj       0.40000000000000002
    c2        r0        2
    c2        r3        2
    c2        r4        2
    c3        Obj       0.40000000000000002
    c3        r0        2
    c3        r1        2
    c3        r2        2
    MARK0001  'MARKER'                 'INTEND'
RHS
    RHS_V     r0        4
    RHS_V     r2        1
    RHS_V     r4        1
BOUNDS
 LI BOUND     c2        0
 LI BOUND     c3        0
ENDATA

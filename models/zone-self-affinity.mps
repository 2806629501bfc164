NAME        
ROWS
 N  Obj     
 G  r0      
 L  r1      
 L  r2      
 L  r3      
 L  r4      
COLUMNS
    c0        Obj       1000
    c0        r0        1
    MARK0000  'MARKER'                 'INTORG'
    c1        r2        -3
    c1        r1        1
    c2        r3        -3
    c2        r1        1
    c3        r4        -3
    c3        r1        1
    c4        Obj       14.4
    c4        r0        3
    c4        r2        3
    c5        Obj       0.40000000000000002
    c5        r0        1
    c5        r2        1
    MARK0001  'MARKER'                 'INTEND'
RHS
    RHS_V     r0        3
    RHS_V     r1        1
BOUNDS
 BV BOUND     c1      
 BV BOUND     c2      
 BV BOUND     c3      
 LI BOUND     c4        0
 LI BOUND     c5        0
ENDATA

NAME        
ROWS
 N  Obj     
 G  r0      
 L  r1      
COLUMNS
    c0        Obj       1000
    c0        r0        1
    MARK0000  'MARKER'                 'INTORG'
    c1        r0        2
    c1        r1        1
    c2        Obj       0.40000000000000002
    c2        r0        1
    c3        Obj       0.80000000000000004
    c3        r0        3
    c4        Obj       0.80000000000000004
    c4        r0        1
    c5        Obj       14.4
    c5        r0        1
    MARK0001  'MARKER'                 'INTEND'
RHS
    RHS_V     r0        3
    RHS_V     r1        1
BOUNDS
 BV BOUND     c1      
 LI BOUND     c2        0
 LI BOUND     c3        0
 LI BOUND     c4        0
 LI BOUND     c5        0
ENDATA

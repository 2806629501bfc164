NAME        
ROWS
 N  Obj     
 G  r0      
 G  r1      
 L  r2      
COLUMNS
    c0        Obj       1000
    c0        r0        1
    c1        Obj       1000
    c1        r1        1
    MARK0000  'MARKER'                 'INTORG'
    c2        Obj       0.40000000000000002
    c2        r1        1
    c2        r2        2
    c3        Obj       0.80000000000000004
    c3        r0        1
    c3        r2        4
    c4        Obj       0.80000000000000004
    c4        r0        1
    c4        r1        1
    c4        r2        4
    c5        Obj       0.80000000000000004
    c5        r0        1
    c5        r1        1
    c5        r2        4
    c6        Obj       0.80000000000000004
    c6        r0        1
    c6        r1        1
    c6        r2        4
    c7        Obj       0.80000000000000004
    c7        r0        1
    c7        r1        1
    c7        r2        4
    c8        Obj       0.80000000000000004
    c8        r0        1
    c8        r1        1
    c8        r2        4
    MARK0001  'MARKER'                 'INTEND'
RHS
    RHS_V     r0        1
    RHS_V     r1        1
    RHS_V     r2        2
BOUNDS
 LI BOUND     c2        0
 LI BOUND     c3        0
 LI BOUND     c4        0
 LI BOUND     c5        0
 LI BOUND     c6        0
 LI BOUND     c7        0
 LI BOUND     c8        0
ENDATA

NAME        
ROWS
 N  Obj     
 G  r0      
 L  r1      
 G  r2      
 L  r3      
 G  r4      
 L  r5      
 G  r6      
 L  r7      
COLUMNS
    c0        Obj       1000
    c0        r0        1
    c1        r2        -1
    c1        r3        -1
    c1        r4        -1
    c1        r5        -1
    c1        r6        -1
    c1        r7        -1
    MARK0000  'MARKER'                 'INTORG'
    c2        Obj       0.40000000000000002
    c2        r0        2
    c2        r4        2
    c2        r5        2
    c3        Obj       0.40000000000000002
    c3        r0        2
    c3        r6        2
    c3        r7        2
    c4        r0        2
    c4        r1        1
    c4        r2        2
    c4        r3        2
    c5        Obj       0.80000000000000004
    c5        r0        2
    c5        r4        2
    c5        r5        2
    c6        Obj       14.4
    c6        r0        2
    c6        r4        2
    c6        r5        2
    c7        Obj       0.80000000000000004
    c7        r0        2
    c7        r6        2
    c7        r7        2
    c8        Obj       14.4
    c8        r0        2
    c8        r6        2
    c8        r7        2
    MARK0001  'MARKER'                 'INTEND'
RHS
    RHS_V     r0        4
    RHS_V     r1        1
    RHS_V     r2        -2
    RHS_V     r5        1
    RHS_V     r7        1
BOUNDS
 LI BOUND     c2        0
 LI BOUND     c3        0
 BV BOUND     c4      
 LI BOUND     c5        0
 LI BOUND     c6        0
 LI BOUND     c7        0
 LI BOUND     c8        0
ENDATA

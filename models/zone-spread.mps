NAME        
ROWS
 N  Obj     
 G  r0      
 G  r1      
 L  r2      
 G  r3      
 L  r4      
 G  r5      
 L  r6      
COLUMNS
    c0        Obj       1000
    c0        r0        1
    c1        r1        -1
    c1        r2        -1
    c1        r3        -1
    c1        r4        -1
    c1        r5        -1
    c1        r6        -1
    MARK0000  'MARKER'                 'INTORG'
    c2        Obj       0.40000000000000002
    c2        r0        2
    c2        r1        2
    c2        r2        2
    c3        Obj       0.40000000000000002
    c3        r0        1
    c3        r3        1
    c3        r4        1
    c4        Obj       0.40000000000000002
    c4        r0        1
    c4        r5        1
    c4        r6        1
    c5        Obj       0.40000000000000002
    c5        r0        2
    c5        r3        2
    c5        r4        2
    c6        Obj       0.40000000000000002
    c6        r0        2
    c6        r5        2
    c6        r6        2
    c7        Obj       0.80000000000000004
    c7        r0        2
    c7        r1        2
    c7        r2        2
    c8        Obj       14.4
    c8        r0        2
    c8        r1        2
    c8        r2        2
    c9        Obj       0.80000000000000004
    c9        r0        2
    c9        r3        2
    c9        r4        2
    c10       Obj       14.4
    c10       r0        2
    c10       r3        2
    c10       r4        2
    c11       Obj       0.80000000000000004
    c11       r0        2
    c11       r5        2
    c11       r6        2
    c12       Obj       14.4
    c12       r0        2
    c12       r5        2
    c12       r6        2
    MARK0001  'MARKER'                 'INTEND'
RHS
    RHS_V     r0        4
    RHS_V     r2        1
    RHS_V     r4        1
    RHS_V     r6        1
BOUNDS
 LI BOUND     c2        0
 LI BOUND     c3        0
 LI BOUND     c4        0
 LI BOUND     c5        0
 LI BOUND     c6        0
 LI BOUND     c7        0
 LI BOUND     c8        0
 LI BOUND     c9        0
 LI BOUND     c10       0
 LI BOUND     c11       0
 LI BOUND     c12       0
ENDATA

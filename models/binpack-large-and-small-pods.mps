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
    c2        Obj       0.80000000000000004
    c2        r0        2
    c2        r1        1
    c3        Obj       0.80000000000000004
    c3        r0        2
    c3        r1        1
    c4        Obj       0.80000000000000004
    c4        r0        2
    c4        r1        1
    c5        Obj       0.80000000000000004
    c5        r0        2
    c5        r1        1
    c6        Obj       0.80000000000000004
    c6        r0        2
    c6        r1        1
    c7        Obj       0.80000000000000004
    c7        r0        2
    c7        r1        1
    c8        Obj       0.80000000000000004
    c8        r0        2
    c8        r1        1
    c9        Obj       0.80000000000000004
    c9        r0        2
    c9        r1        1
    c10       Obj       0.80000000000000004
    c10       r0        2
    c10       r1        1
    c11       Obj       0.80000000000000004
    c11       r0        2
    c11       r1        1
    c12       Obj       0.40000000000000002
    c12       r0        1
    c13       Obj       0.40000000000000002
    c13       r1        5
    MARK0001  'MARKER'                 'INTEND'
RHS
    RHS_V     r0        20
    RHS_V     r1        10
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
 LI BOUND     c13       0
ENDATA

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
    c9        Obj       0.40000000000000002
    c9        r1        1
    c9        r2        2
    c10       Obj       0.80000000000000004
    c10       r0        1
    c10       r2        4
    c11       Obj       0.80000000000000004
    c11       r0        1
    c11       r2        4
    c12       Obj       2.7999999999999998
    c12       r0        1
    c12       r1        1
    c12       r2        4
    c13       Obj       2.7999999999999998
    c13       r0        1
    c13       r1        1
    c13       r2        4
    c14       Obj       14.4
    c14       r0        1
    c14       r1        1
    c14       r2        16
    c15       Obj       14.4
    c15       r0        1
    c15       r1        1
    c15       r2        16
    c16       Obj       0.40000000000000002
    c16       r1        1
    c16       r2        2
    c17       Obj       0.40000000000000002
    c17       r1        1
    c17       r2        2
    c18       Obj       0.80000000000000004
    c18       r0        1
    c18       r2        4
    c19       Obj       0.80000000000000004
    c19       r0        1
    c19       r2        4
    c20       Obj       2.7999999999999998
    c20       r0        1
    c20       r1        1
    c20       r2        4
    c21       Obj       2.7999999999999998
    c21       r0        1
    c21       r1        1
    c21       r2        4
    c22       Obj       14.4
    c22       r0        1
    c22       r1        1
    c22       r2        16
    c23       Obj       14.4
    c23       r0        1
    c23       r1        1
    c23       r2        16
    c24       Obj       0.40000000000000002
    c24       r1        1
    c24       r2        2
    c25       Obj       0.80000000000000004
    c25       r0        1
    c25       r2        4
    c26       Obj       2.7999999999999998
    c26       r0        1
    c26       r1        1
    c26       r2        4
    c27       Obj       14.4
    c27       r0        1
    c27       r1        1
    c27       r2        16
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
 LI BOUND     c9        0
 LI BOUND     c10       0
 LI BOUND     c11       0
 LI BOUND     c12       0
 LI BOUND     c13       0
 LI BOUND     c14       0
 LI BOUND     c15       0
 LI BOUND     c16       0
 LI BOUND     c17       0
 LI BOUND     c18       0
 LI BOUND     c19       0
 LI BOUND     c20       0
 LI BOUND     c21       0
 LI BOUND     c22       0
 LI BOUND     c23       0
 LI BOUND     c24       0
 LI BOUND     c25       0
 LI BOUND     c26       0
 LI BOUND     c27       0
ENDATA

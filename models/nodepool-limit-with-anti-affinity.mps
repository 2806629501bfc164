NAME        
ROWS
 N  Obj     
 G  r0      
 L  r1      
COLUMNS
    c0        Obj       1000
    c0        r0        1
    MARK0000  'MARKER'                 'INTORG'
    c1        Obj       0.40000000000000002
    c1        r0        1
    c1        r1        2
    c2        Obj       0.40000000000000002
    c2        r0        1
    c2        r1        2
    c3        Obj       0.80000000000000004
    c3        r0        1
    c3        r1        4
    c4        Obj       0.80000000000000004
    c4        r0        1
    c4        r1        4
    c5        Obj       0.80000000000000004
    c5        r0        1
    c5        r1        4
    c6        Obj       0.80000000000000004
    c6        r0        1
    c6        r1        4
    c7        Obj       2.7999999999999998
    c7        r0        1
    c7        r1        4
    c8        Obj       2.7999999999999998
    c8        r0        1
    c8        r1        4
    c9        Obj       14.4
    c9        r0        1
    c9        r1        16
    c10       Obj       0.40000000000000002
    c10       r0        1
    c10       r1        2
    c11       Obj       0.40000000000000002
    c11       r0        1
    c11       r1        2
    c12       Obj       0.80000000000000004
    c12       r0        1
    c12       r1        4
    c13       Obj       0.80000000000000004
    c13       r0        1
    c13       r1        4
    c14       Obj       0.80000000000000004
    c14       r0        1
    c14       r1        4
    c15       Obj       0.80000000000000004
    c15       r0        1
    c15       r1        4
    c16       Obj       2.7999999999999998
    c16       r0        1
    c16       r1        4
    c17       Obj       2.7999999999999998
    c17       r0        1
    c17       r1        4
    c18       Obj       0.40000000000000002
    c18       r0        1
    c18       r1        2
    c19       Obj       0.80000000000000004
    c19       r0        1
    c19       r1        4
    c20       Obj       0.80000000000000004
    c20       r0        1
    c20       r1        4
    c21       Obj       2.7999999999999998
    c21       r0        1
    c21       r1        4
    c22       Obj       14.4
    c22       r0        1
    c22       r1        16
    MARK0001  'MARKER'                 'INTEND'
RHS
    RHS_V     r0        2
    RHS_V     r1        3
BOUNDS
 LI BOUND     c1        0
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
ENDATA

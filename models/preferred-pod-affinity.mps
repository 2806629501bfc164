NAME        
ROWS
 N  Obj     
 G  r0      
 G  r1      
 G  r2      
 G  r3      
COLUMNS
    c0        Obj       1000
    c0        r0        1
    c1        Obj       1000
    c1        r1        1
    c2        Obj       1000
    c2        r2        1
    c3        Obj       1000
    c3        r3        1
    MARK0000  'MARKER'                 'INTORG'
    c4        Obj       0.80000000000000004
    c4        r0        1
    c4        r1        1
    c4        r3        1
    c5        Obj       0.80000000000000004
    c5        r0        1
    c5        r1        1
    c5        r3        1
    c6        Obj       0.90000000000000002
    c6        r1        1
    c6        r2        1
    c7        Obj       0.40000000000000002
    c7        r0        1
    c8        Obj       0.41500000000000004
    c8        r1        3
    c9        Obj       0.90000000000000002
    c9        r2        1
    c10       Obj       1.3999999999999999
    c10       r3        2
    c11       Obj       0.80000000000000004
    c11       r0        2
    c11       r1        1
    c11       r2        1
    c11       r3        1
    c12       Obj       0.80000000000000004
    c12       r0        2
    c12       r1        1
    c12       r2        1
    c12       r3        1
    c13       Obj       0.80000000000000004
    c13       r0        2
    c13       r1        1
    c13       r2        1
    c13       r3        1
    c14       Obj       0.40000000000000002
    c14       r1        1
    c14       r2        1
    c14       r3        1
    c15       Obj       0.40000000000000002
    c15       r1        1
    c15       r2        1
    c15       r3        1
    c16       Obj       0.40000000000000002
    c16       r1        1
    c16       r2        1
    c16       r3        1
    c17       Obj       0.40000000000000002
    c17       r0        1
    c17       r3        1
    c18       Obj       0.40000000000000002
    c18       r0        1
    c18       r3        1
    c19       Obj       0.40000000000000002
    c19       r0        1
    c19       r3        1
    c20       Obj       0.40000000000000002
    c20       r0        1
    c20       r2        1
    c20       r3        1
    c21       Obj       0.40000000000000002
    c21       r0        1
    c21       r2        1
    c21       r3        1
    c22       Obj       0.40000000000000002
    c22       r0        1
    c22       r2        1
    c22       r3        1
    MARK0001  'MARKER'                 'INTEND'
RHS
    RHS_V     r0        2
    RHS_V     r1        3
    RHS_V     r2        1
    RHS_V     r3        2
BOUNDS
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

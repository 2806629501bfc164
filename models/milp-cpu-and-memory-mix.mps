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
    c2        Obj       0.38400000000000001
    c2        r0        2
    c2        r1        3
    c3        Obj       0.252
    c3        r0        1
    c3        r1        3
    c4        Obj       0.17000000000000001
    c4        r0        1
    c5        Obj       0.126
    c5        r1        3
    c6        Obj       0.38400000000000001
    c6        r0        2
    c6        r1        5
    c7        Obj       0.192
    c7        r0        1
    c7        r1        2
    c8        Obj       0.34000000000000002
    c8        r0        2
    c8        r1        2
    c9        Obj       0.17000000000000001
    c9        r0        1
    c9        r1        1
    c10       Obj       0.192
    c10       r0        1
    c10       r1        1
    c11       Obj       0.096000000000000002
    c11       r1        1
    c12       Obj       0.252
    c12       r0        1
    c12       r1        1
    c13       Obj       0.126
    c13       r1        1
    c14       Obj       0.34000000000000002
    c14       r0        1
    c14       r1        1
    c15       Obj       0.38400000000000001
    c15       r0        1
    c15       r1        1
    c16       Obj       0.504
    c16       r0        1
    c16       r1        1
    MARK0001  'MARKER'                 'INTEND'
RHS
    RHS_V     r0        3
    RHS_V     r1        6
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
ENDATA

NAME        
ROWS
 N  Obj     
 G  r0      
 G  r1      
 G  r2      
 G  r3      
 G  r4      
 L  r5      
 G  r6      
 L  r7      
 G  r8      
 L  r9      
 G  r10     
 L  r11     
 G  r12     
 L  r13     
COLUMNS
    c0        Obj       1000
    c0        r0        1
    c1        Obj       1000
    c1        r1        1
    c2        Obj       1000
    c2        r2        1
    c3        Obj       1000
    c3        r3        1
    c4        r4        -1
    c4        r5        -1
    c4        r6        -1
    c4        r7        -1
    c4        r8        -1
    c4        r9        -1
    c4        r10       -1
    c4        r11       -1
    c4        r12       -1
    c4        r13       -1
    MARK0000  'MARKER'                 'INTORG'
    c5        Obj       0.27156480000000005
    c5        r0        6
    c5        r1        1
    c6        Obj       0.073120320000000003
    c6        r1        1
    c6        r2        1
    c7        Obj       0.073120320000000003
    c7        r1        1
    c7        r2        1
    c8        Obj       0.03027972
    c8        r1        1
    c8        r3        1
    c8        r4        1
    c8        r5        1
    c9        Obj       0.029942099999999999
    c9        r3        2
    c9        r6        2
    c9        r7        2
    c10       Obj       0.020285999999999998
    c10       r3        1
    c10       r8        1
    c10       r9        1
    c11       Obj       0.020285999999999998
    c11       r3        1
    c11       r10       1
    c11       r11       1
    c12       Obj       0.020285999999999998
    c12       r3        1
    c12       r12       1
    c12       r13       1
    c13       Obj       0.13552739999999999
    c13       r0        3
    c14       Obj       0.029942099999999999
    c14       r1        1
    c15       Obj       0.03444792
    c15       r2        1
    c16       Obj       0.03027972
    c16       r3        3
    c16       r4        3
    c16       r5        3
    c17       Obj       0.27156480000000005
    c17       r0        5
    c17       r1        1
    c17       r2        2
    c17       r3        6
    c17       r8        6
    c17       r9        6
    c18       Obj       0.27156480000000005
    c18       r0        5
    c18       r1        1
    c18       r2        2
    c18       r3        6
    c18       r10       6
    c18       r11       6
    c19       Obj       0.27156480000000005
    c19       r0        5
    c19       r1        1
    c19       r2        2
    c19       r3        6
    c19       r12       6
    c19       r13       6
    c20       Obj       0.27156480000000005
    c20       r0        5
    c20       r1        1
    c20       r2        2
    c20       r3        6
    c20       r6        6
    c20       r7        6
    c21       Obj       0.073120320000000003
    c21       r2        1
    c21       r3        6
    c21       r8        6
    c21       r9        6
    c22       Obj       0.073120320000000003
    c22       r2        1
    c22       r3        6
    c22       r10       6
    c22       r11       6
    c23       Obj       0.073120320000000003
    c23       r2        1
    c23       r3        6
    c23       r12       6
    c23       r13       6
    c24       Obj       0.17926271999999999
    c24       r0        1
    c24       r1        1
    c24       r2        2
    c24       r3        6
    c24       r8        6
    c24       r9        6
    c25       Obj       0.17926271999999999
    c25       r0        1
    c25       r1        1
    c25       r2        2
    c25       r3        6
    c25       r10       6
    c25       r11       6
    c26       Obj       0.17926271999999999
    c26       r0        1
    c26       r1        1
    c26       r2        2
    c26       r3        6
    c26       r12       6
    c26       r13       6
    c27       Obj       0.27156480000000005
    c27       r0        6
    c27       r1        1
    c27       r2        2
    c27       r3        3
    c27       r4        3
    c27       r5        3
    c28       Obj       0.15934464000000001
    c28       r0        1
    c28       r1        1
    c28       r2        1
    c28       r3        6
    c28       r8        6
    c28       r9        6
    c29       Obj       0.15934464000000001
    c29       r0        1
    c29       r1        1
    c29       r2        1
    c29       r3        6
    c29       r10       6
    c29       r11       6
    c30       Obj       0.15934464000000001
    c30       r0        1
    c30       r1        1
    c30       r2        1
    c30       r3        6
    c30       r12       6
    c30       r13       6
    c31       Obj       0.0646119
    c31       r3        6
    c31       r8        6
    c31       r9        6
    c32       Obj       0.0646119
    c32       r3        6
    c32       r10       6
    c32       r11       6
    c33       Obj       0.0646119
    c33       r3        6
    c33       r12       6
    c33       r13       6
    c34       Obj       0.13552739999999999
    c34       r0        1
    c34       r1        1
    c34       r3        6
    c34       r8        6
    c34       r9        6
    c35       Obj       0.13552739999999999
    c35       r0        1
    c35       r1        1
    c35       r3        6
    c35       r10       6
    c35       r11       6
    c36       Obj       0.13552739999999999
    c36       r0        1
    c36       r1        1
    c36       r3        6
    c36       r12       6
    c36       r13       6
    c37       Obj       0.17926271999999999
    c37       r0        1
    c37       r1        1
    c37       r2        2
    c37       r3        6
    c37       r6        6
    c37       r7        6
    c38       Obj       0.37425024000000001
    c38       r0        5
    c38       r1        1
    c38       r2        2
    c38       r3        6
    c38       r8        6
    c38       r9        6
    c39       Obj       0.37425024000000001
    c39       r0        5
    c39       r1        1
    c39       r2        2
    c39       r3        6
    c39       r10       6
    c39       r11       6
    c40       Obj       0.37425024000000001
    c40       r0        5
    c40       r1        1
    c40       r2        2
    c40       r3        6
    c40       r12       6
    c40       r13       6
    c41       Obj       0.15934464000000001
    c41       r0        1
    c41       r1        1
    c41       r2        1
    c41       r3        6
    c41       r6        6
    c41       r7        6
    c42       Obj       0.073120320000000003
    c42       r1        1
    c42       r3        5
    c42       r6        5
    c42       r7        5
    c43       Obj       0.03027972
    c43       r3        3
    c43       r8        3
    c43       r9        3
    c44       Obj       0.03027972
    c44       r3        3
    c44       r10       3
    c44       r11       3
    c45       Obj       0.03027972
    c45       r3        3
    c45       r12       3
    c45       r13       3
    c46       Obj       0.03444792
    c46       r3        3
    c46       r8        3
    c46       r9        3
    c47       Obj       0.03444792
    c47       r3        3
    c47       r10       3
    c47       r11       3
    c48       Obj       0.03444792
    c48       r3        3
    c48       r12       3
    c48       r13       3
    c49       Obj       0.073120320000000003
    c49       r1        1
    c49       r2        2
    c49       r3        2
    c49       r4        2
    c49       r5        2
    c50       Obj       0.15934464000000001
    c50       r0        3
    c50       r1        1
    c50       r2        1
    c51       Obj       0.0646119
    c51       r1        1
    c51       r3        4
    c51       r6        4
    c51       r7        4
    c52       Obj       0.13552739999999999
    c52       r0        1
    c52       r1        1
    c52       r3        6
    c52       r6        6
    c52       r7        6
    c53       Obj       0.37425024000000001
    c53       r0        5
    c53       r1        1
    c53       r2        2
    c53       r3        6
    c53       r6        6
    c53       r7        6
    c54       Obj       0.13552739999999999
    c54       r0        3
    c54       r1        1
    c54       r3        1
    c54       r4        1
    c54       r5        1
    c55       Obj       0.03027972
    c55       r1        1
    c55       r3        1
    c55       r6        1
    c55       r7        1
    c56       Obj       0.029942099999999999
    c56       r3        2
    c56       r8        2
    c56       r9        2
    c57       Obj       0.029942099999999999
    c57       r3        2
    c57       r10       2
    c57       r11       2
    c58       Obj       0.029942099999999999
    c58       r3        2
    c58       r12       2
    c58       r13       2
    c59       Obj       0.03444792
    c59       r1        1
    c59       r3        1
    c59       r6        1
    c59       r7        1
    c60       Obj       0.0646119
    c60       r0        1
    c60       r1        1
    c60       r3        1
    c60       r4        1
    c60       r5        1
    c61       Obj       0.17926271999999999
    c61       r0        2
    c61       r1        1
    c61       r2        2
    c61       r3        3
    c61       r4        3
    c61       r5        3
    c62       Obj       0.27156480000000005
    c62       r0        6
    c62       r1        1
    c62       r2        2
    c62       r3        3
    c62       r6        3
    c62       r7        3
    c63       Obj       0.27156480000000005
    c63       r0        6
    c63       r1        1
    c63       r2        2
    c64       Obj       0.073120320000000003
    c64       r0        1
    c64       r1        1
    c64       r2        1
    c65       Obj       0.073120320000000003
    c65       r0        1
    c65       r1        1
    c65       r2        1
    c66       Obj       0.073120320000000003
    c66       r0        1
    c66       r1        1
    c66       r2        1
    c67       Obj       0.073120320000000003
    c67       r0        1
    c67       r1        1
    c67       r2        1
    c68       Obj       0.073120320000000003
    c68       r0        1
    c68       r1        1
    c68       r2        1
    c69       Obj       0.13552739999999999
    c69       r0        3
    c69       r1        1
    c69       r3        1
    c69       r8        1
    c69       r9        1
    c70       Obj       0.13552739999999999
    c70       r0        3
    c70       r1        1
    c70       r3        1
    c70       r10       1
    c70       r11       1
    c71       Obj       0.13552739999999999
    c71       r0        3
    c71       r1        1
    c71       r3        1
    c71       r12       1
    c71       r13       1
    c72       Obj       0.13552739999999999
    c72       r0        3
    c72       r1        1
    c72       r3        1
    c72       r6        1
    c72       r7        1
    c73       Obj       0.0646119
    c73       r0        1
    c73       r1        1
    c73       r3        1
    c73       r8        1
    c73       r9        1
    c74       Obj       0.0646119
    c74       r0        1
    c74       r1        1
    c74       r3        1
    c74       r10       1
    c74       r11       1
    c75       Obj       0.0646119
    c75       r0        1
    c75       r1        1
    c75       r3        1
    c75       r12       1
    c75       r13       1
    c76       Obj       0.13552739999999999
    c76       r0        3
    c76       r1        1
    c77       Obj       0.03027972
    c77       r1        1
    c77       r3        1
    c77       r8        1
    c77       r9        1
    c78       Obj       0.03027972
    c78       r1        1
    c78       r3        1
    c78       r10       1
    c78       r11       1
    c79       Obj       0.03027972
    c79       r1        1
    c79       r3        1
    c79       r12       1
    c79       r13       1
    c80       Obj       0.0646119
    c80       r0        1
    c80       r1        1
    c80       r3        1
    c80       r6        1
    c80       r7        1
    c81       Obj       0.0646119
    c81       r0        1
    c81       r1        1
    c82       Obj       0.13552739999999999
    c82       r0        2
    c82       r1        1
    c82       r3        5
    c82       r4        5
    c82       r5        5
    c83       Obj       0.13552739999999999
    c83       r0        2
    c83       r1        1
    c83       r3        5
    c83       r6        5
    c83       r7        5
    c84       Obj       0.13552739999999999
    c84       r0        2
    c84       r1        1
    c84       r3        5
    c84       r8        5
    c84       r9        5
    c85       Obj       0.13552739999999999
    c85       r0        2
    c85       r1        1
    c85       r3        5
    c85       r10       5
    c85       r11       5
    c86       Obj       0.13552739999999999
    c86       r0        2
    c86       r1        1
    c86       r3        5
    c86       r12       5
    c86       r13       5
    c87       Obj       0.073120320000000003
    c87       r1        1
    c87       r2        1
    c87       r3        4
    c87       r4        4
    c87       r5        4
    c88       Obj       0.073120320000000003
    c88       r1        1
    c88       r2        1
    c88       r3        4
    c88       r6        4
    c88       r7        4
    c89       Obj       0.073120320000000003
    c89       r1        1
    c89       r2        1
    c89       r3        4
    c89       r8        4
    c89       r9        4
    c90       Obj       0.073120320000000003
    c90       r1        1
    c90       r2        1
    c90       r3        4
    c90       r10       4
    c90       r11       4
    c91       Obj       0.073120320000000003
    c91       r1        1
    c91       r2        1
    c91       r3        4
    c91       r12       4
    c91       r13       4
    c92       Obj       0.03444792
    c92       r1        1
    c92       r3        1
    c92       r4        1
    c92       r5        1
    c93       Obj       0.020285999999999998
    c93       r3        1
    c93       r4        1
    c93       r5        1
    c94       Obj       0.028150000000000001
    c94       r3        1
    c94       r4        1
    c94       r5        1
    c95       Obj       0.15934464000000001
    c95       r0        2
    c95       r1        1
    c95       r2        1
    c95       r3        4
    c95       r4        4
    c95       r5        4
    c96       Obj       0.089020000000000002
    c96       r1        1
    c97       Obj       0.10055
    c97       r1        1
    c97       r3        1
    c97       r4        1
    c97       r5        1
    c98       Obj       0.13197
    c98       r1        1
    c98       r3        1
    c98       r4        1
    c98       r5        1
    c99       Obj       0.37425024000000001
    c99       r0        6
    c99       r1        1
    c99       r2        2
    c99       r3        3
    c99       r4        3
    c99       r5        3
    c100      Obj       0.029942099999999999
    c100      r1        1
    c101      Obj       0.020285999999999998
    c101      r3        1
    c101      r6        1
    c101      r7        1
    c102      Obj       0.028150000000000001
    c102      r3        1
    c102      r6        1
    c102      r7        1
    c103      Obj       0.15934464000000001
    c103      r0        2
    c103      r1        1
    c103      r2        1
    c103      r3        4
    c103      r6        4
    c103      r7        4
    c104      Obj       0.17926271999999999
    c104      r0        2
    c104      r1        1
    c104      r2        2
    c104      r3        3
    c104      r6        3
    c104      r7        3
    c105      Obj       0.089020000000000002
    c105      r1        1
    c106      Obj       0.10055
    c106      r1        1
    c106      r3        1
    c106      r6        1
    c106      r7        1
    c107      Obj       0.13197
    c107      r1        1
    c107      r3        1
    c107      r6        1
    c107      r7        1
    c108      Obj       0.27156480000000005
    c108      r0        6
    c108      r1        1
    c108      r2        2
    c108      r3        3
    c108      r8        3
    c108      r9        3
    c109      Obj       0.03444792
    c109      r1        1
    c109      r3        1
    c109      r8        1
    c109      r9        1
    c110      Obj       0.029942099999999999
    c110      r1        1
    c111      Obj       0.028150000000000001
    c111      r3        1
    c111      r8        1
    c111      r9        1
    c112      Obj       0.15934464000000001
    c112      r0        2
    c112      r1        1
    c112      r2        1
    c112      r3        4
    c112      r8        4
    c112      r9        4
    c113      Obj       0.17926271999999999
    c113      r0        2
    c113      r1        1
    c113      r2        2
    c113      r3        3
    c113      r8        3
    c113      r9        3
    c114      Obj       0.089020000000000002
    c114      r1        1
    c115      Obj       0.10055
    c115      r1        1
    c115      r3        1
    c115      r8        1
    c115      r9        1
    c116      Obj       0.27156480000000005
    c116      r0        6
    c116      r1        1
    c116      r2        2
    c116      r3        3
    c116      r10       3
    c116      r11       3
    c117      Obj       0.03444792
    c117      r1        1
    c117      r3        1
    c117      r10       1
    c117      r11       1
    c118      Obj       0.029942099999999999
    c118      r1        1
    c119      Obj       0.028150000000000001
    c119      r3        1
    c119      r10       1
    c119      r11       1
    c120      Obj       0.15934464000000001
    c120      r0        2
    c120      r1        1
    c120      r2        1
    c120      r3        4
    c120      r10       4
    c120      r11       4
    c121      Obj       0.17926271999999999
    c121      r0        2
    c121      r1        1
    c121      r2        2
    c121      r3        3
    c121      r10       3
    c121      r11       3
    c122      Obj       0.089020000000000002
    c122      r1        1
    c123      Obj       0.10055
    c123      r1        1
    c123      r3        1
    c123      r10       1
    c123      r11       1
    c124      Obj       0.27156480000000005
    c124      r0        6
    c124      r1        1
    c124      r2        2
    c124      r3        3
    c124      r12       3
    c124      r13       3
    c125      Obj       0.03444792
    c125      r1        1
    c125      r3        1
    c125      r12       1
    c125      r13       1
    c126      Obj       0.029942099999999999
    c126      r1        1
    c127      Obj       0.028150000000000001
    c127      r3        1
    c127      r12       1
    c127      r13       1
    c128      Obj       0.15934464000000001
    c128      r0        2
    c128      r1        1
    c128      r2        1
    c128      r3        4
    c128      r12       4
    c128      r13       4
    c129      Obj       0.17926271999999999
    c129      r0        2
    c129      r1        1
    c129      r2        2
    c129      r3        3
    c129      r12       3
    c129      r13       3
    c130      Obj       0.089020000000000002
    c130      r1        1
    c131      Obj       0.10055
    c131      r1        1
    c131      r3        1
    c131      r12       1
    c131      r13       1
    MARK0001  'MARKER'                 'INTEND'
RHS
    RHS_V     r0        6
    RHS_V     r1        4
    RHS_V     r2        2
    RHS_V     r3        6
    RHS_V     r5        1
    RHS_V     r7        1
    RHS_V     r9        1
    RHS_V     r11       1
    RHS_V     r13       1
BOUNDS
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
 LI BOUND     c28       0
 LI BOUND     c29       0
 LI BOUND     c30       0
 LI BOUND     c31       0
 LI BOUND     c32       0
 LI BOUND     c33       0
 LI BOUND     c34       0
 LI BOUND     c35       0
 LI BOUND     c36       0
 LI BOUND     c37       0
 LI BOUND     c38       0
 LI BOUND     c39       0
 LI BOUND     c40       0
 LI BOUND     c41       0
 LI BOUND     c42       0
 LI BOUND     c43       0
 LI BOUND     c44       0
 LI BOUND     c45       0
 LI BOUND     c46       0
 LI BOUND     c47       0
 LI BOUND     c48       0
 LI BOUND     c49       0
 LI BOUND     c50       0
 LI BOUND     c51       0
 LI BOUND     c52       0
 LI BOUND     c53       0
 LI BOUND     c54       0
 LI BOUND     c55       0
 LI BOUND     c56       0
 LI BOUND     c57       0
 LI BOUND     c58       0
 LI BOUND     c59       0
 LI BOUND     c60       0
 LI BOUND     c61       0
 LI BOUND     c62       0
 LI BOUND     c63       0
 LI BOUND     c64       0
 LI BOUND     c65       0
 LI BOUND     c66       0
 LI BOUND     c67       0
 LI BOUND     c68       0
 LI BOUND     c69       0
 LI BOUND     c70       0
 LI BOUND     c71       0
 LI BOUND     c72       0
 LI BOUND     c73       0
 LI BOUND     c74       0
 LI BOUND     c75       0
 LI BOUND     c76       0
 LI BOUND     c77       0
 LI BOUND     c78       0
 LI BOUND     c79       0
 LI BOUND     c80       0
 LI BOUND     c81       0
 LI BOUND     c82       0
 LI BOUND     c83       0
 LI BOUND     c84       0
 LI BOUND     c85       0
 LI BOUND     c86       0
 LI BOUND     c87       0
 LI BOUND     c88       0
 LI BOUND     c89       0
 LI BOUND     c90       0
 LI BOUND     c91       0
 LI BOUND     c92       0
 LI BOUND     c93       0
 LI BOUND     c94       0
 LI BOUND     c95       0
 LI BOUND     c96       0
 LI BOUND     c97       0
 LI BOUND     c98       0
 LI BOUND     c99       0
 LI BOUND     c100      0
 LI BOUND     c101      0
 LI BOUND     c102      0
 LI BOUND     c103      0
 LI BOUND     c104      0
 LI BOUND     c105      0
 LI BOUND     c106      0
 LI BOUND     c107      0
 LI BOUND     c108      0
 LI BOUND     c109      0
 LI BOUND     c110      0
 LI BOUND     c111      0
 LI BOUND     c112      0
 LI BOUND     c113      0
 LI BOUND     c114      0
 LI BOUND     c115      0
 LI BOUND     c116      0
 LI BOUND     c117      0
 LI BOUND     c118      0
 LI BOUND     c119      0
 LI BOUND     c120      0
 LI BOUND     c121      0
 LI BOUND     c122      0
 LI BOUND     c123      0
 LI BOUND     c124      0
 LI BOUND     c125      0
 LI BOUND     c126      0
 LI BOUND     c127      0
 LI BOUND     c128      0
 LI BOUND     c129      0
 LI BOUND     c130      0
 LI BOUND     c131      0
ENDATA

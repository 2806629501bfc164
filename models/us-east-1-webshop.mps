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
    c16       Obj       0.029942099999999999
    c16       r3        2
    c16       r4        2
    c16       r5        2
    c17       Obj       0.27156480000000005
    c17       r0        6
    c17       r1        1
    c17       r2        2
    c17       r3        2
    c17       r10       2
    c17       r11       2
    c18       Obj       0.27156480000000005
    c18       r0        6
    c18       r1        1
    c18       r2        2
    c18       r3        2
    c18       r8        2
    c18       r9        2
    c19       Obj       0.27156480000000005
    c19       r0        6
    c19       r1        1
    c19       r2        2
    c19       r3        2
    c19       r12       2
    c19       r13       2
    c20       Obj       0.27156480000000005
    c20       r0        6
    c20       r1        1
    c20       r2        2
    c20       r3        2
    c20       r6        2
    c20       r7        2
    c21       Obj       0.27156480000000005
    c21       r0        6
    c21       r1        1
    c21       r2        2
    c21       r3        2
    c21       r4        2
    c21       r5        2
    c22       Obj       0.073120320000000003
    c22       r1        1
    c22       r2        2
    c22       r3        2
    c22       r10       2
    c22       r11       2
    c23       Obj       0.073120320000000003
    c23       r1        1
    c23       r2        2
    c23       r3        2
    c23       r8        2
    c23       r9        2
    c24       Obj       0.073120320000000003
    c24       r1        1
    c24       r2        2
    c24       r3        2
    c24       r12       2
    c24       r13       2
    c25       Obj       0.073120320000000003
    c25       r1        1
    c25       r2        2
    c25       r3        2
    c25       r6        2
    c25       r7        2
    c26       Obj       0.17926271999999999
    c26       r0        2
    c26       r1        1
    c26       r2        2
    c26       r3        2
    c26       r10       2
    c26       r11       2
    c27       Obj       0.17926271999999999
    c27       r0        2
    c27       r1        1
    c27       r2        2
    c27       r3        2
    c27       r8        2
    c27       r9        2
    c28       Obj       0.17926271999999999
    c28       r0        2
    c28       r1        1
    c28       r2        2
    c28       r3        2
    c28       r12       2
    c28       r13       2
    c29       Obj       0.17926271999999999
    c29       r0        2
    c29       r1        1
    c29       r2        2
    c29       r3        2
    c29       r6        2
    c29       r7        2
    c30       Obj       0.073120320000000003
    c30       r1        1
    c30       r2        2
    c30       r3        2
    c30       r4        2
    c30       r5        2
    c31       Obj       0.15934464000000001
    c31       r0        2
    c31       r1        1
    c31       r2        1
    c31       r3        2
    c31       r10       2
    c31       r11       2
    c32       Obj       0.15934464000000001
    c32       r0        2
    c32       r1        1
    c32       r2        1
    c32       r3        2
    c32       r8        2
    c32       r9        2
    c33       Obj       0.15934464000000001
    c33       r0        2
    c33       r1        1
    c33       r2        1
    c33       r3        2
    c33       r12       2
    c33       r13       2
    c34       Obj       0.15934464000000001
    c34       r0        3
    c34       r1        1
    c34       r2        1
    c35       Obj       0.13552739999999999
    c35       r0        3
    c35       r1        1
    c35       r3        1
    c35       r4        1
    c35       r5        1
    c36       Obj       0.15934464000000001
    c36       r0        2
    c36       r1        1
    c36       r2        1
    c36       r3        2
    c36       r6        2
    c36       r7        2
    c37       Obj       0.13552739999999999
    c37       r0        2
    c37       r1        1
    c37       r3        2
    c37       r10       2
    c37       r11       2
    c38       Obj       0.13552739999999999
    c38       r0        2
    c38       r1        1
    c38       r3        2
    c38       r8        2
    c38       r9        2
    c39       Obj       0.13552739999999999
    c39       r0        2
    c39       r1        1
    c39       r3        2
    c39       r12       2
    c39       r13       2
    c40       Obj       0.029942099999999999
    c40       r3        2
    c40       r10       2
    c40       r11       2
    c41       Obj       0.029942099999999999
    c41       r3        2
    c41       r8        2
    c41       r9        2
    c42       Obj       0.029942099999999999
    c42       r3        2
    c42       r12       2
    c42       r13       2
    c43       Obj       0.03027972
    c43       r3        2
    c43       r10       2
    c43       r11       2
    c44       Obj       0.03027972
    c44       r3        2
    c44       r8        2
    c44       r9        2
    c45       Obj       0.03027972
    c45       r3        2
    c45       r12       2
    c45       r13       2
    c46       Obj       0.37425024000000001
    c46       r0        6
    c46       r1        1
    c46       r2        2
    c46       r3        2
    c46       r10       2
    c46       r11       2
    c47       Obj       0.37425024000000001
    c47       r0        6
    c47       r1        1
    c47       r2        2
    c47       r3        2
    c47       r8        2
    c47       r9        2
    c48       Obj       0.37425024000000001
    c48       r0        6
    c48       r1        1
    c48       r2        2
    c48       r3        2
    c48       r12       2
    c48       r13       2
    c49       Obj       0.03444792
    c49       r3        2
    c49       r10       2
    c49       r11       2
    c50       Obj       0.03444792
    c50       r3        2
    c50       r8        2
    c50       r9        2
    c51       Obj       0.03444792
    c51       r3        2
    c51       r12       2
    c51       r13       2
    c52       Obj       0.0646119
    c52       r0        1
    c52       r1        1
    c52       r3        1
    c52       r4        1
    c52       r5        1
    c53       Obj       0.0646119
    c53       r1        1
    c53       r3        2
    c53       r10       2
    c53       r11       2
    c54       Obj       0.0646119
    c54       r1        1
    c54       r3        2
    c54       r8        2
    c54       r9        2
    c55       Obj       0.0646119
    c55       r1        1
    c55       r3        2
    c55       r12       2
    c55       r13       2
    c56       Obj       0.13552739999999999
    c56       r0        2
    c56       r1        1
    c56       r3        2
    c56       r6        2
    c56       r7        2
    c57       Obj       0.17926271999999999
    c57       r0        2
    c57       r1        1
    c57       r2        2
    c57       r3        2
    c57       r4        2
    c57       r5        2
    c58       Obj       0.03027972
    c58       r1        1
    c58       r3        1
    c58       r12       1
    c58       r13       1
    c59       Obj       0.03027972
    c59       r1        1
    c59       r3        1
    c59       r6        1
    c59       r7        1
    c60       Obj       0.03027972
    c60       r1        1
    c60       r3        1
    c60       r8        1
    c60       r9        1
    c61       Obj       0.03027972
    c61       r1        1
    c61       r3        1
    c61       r10       1
    c61       r11       1
    c62       Obj       0.03444792
    c62       r1        1
    c62       r3        1
    c62       r12       1
    c62       r13       1
    c63       Obj       0.03444792
    c63       r1        1
    c63       r3        1
    c63       r6        1
    c63       r7        1
    c64       Obj       0.03444792
    c64       r1        1
    c64       r3        1
    c64       r8        1
    c64       r9        1
    c65       Obj       0.03444792
    c65       r1        1
    c65       r3        1
    c65       r10       1
    c65       r11       1
    c66       Obj       0.073120320000000003
    c66       r0        1
    c66       r2        1
    c66       r3        2
    c66       r4        2
    c66       r5        2
    c67       Obj       0.073120320000000003
    c67       r0        1
    c67       r2        1
    c67       r3        2
    c67       r6        2
    c67       r7        2
    c68       Obj       0.073120320000000003
    c68       r0        1
    c68       r2        1
    c68       r3        2
    c68       r8        2
    c68       r9        2
    c69       Obj       0.073120320000000003
    c69       r0        1
    c69       r2        1
    c69       r3        2
    c69       r10       2
    c69       r11       2
    c70       Obj       0.073120320000000003
    c70       r0        1
    c70       r2        1
    c70       r3        2
    c70       r12       2
    c70       r13       2
    c71       Obj       0.03444792
    c71       r1        1
    c71       r3        1
    c71       r4        1
    c71       r5        1
    c72       Obj       0.020285999999999998
    c72       r3        1
    c72       r4        1
    c72       r5        1
    c73       Obj       0.028150000000000001
    c73       r3        1
    c73       r4        1
    c73       r5        1
    c74       Obj       0.15934464000000001
    c74       r0        3
    c74       r2        1
    c74       r3        2
    c74       r4        2
    c74       r5        2
    c75       Obj       0.27156480000000005
    c75       r0        5
    c75       r1        1
    c75       r2        2
    c75       r3        2
    c75       r4        2
    c75       r5        2
    c76       Obj       0.17926271999999999
    c76       r0        3
    c76       r2        1
    c76       r3        2
    c76       r4        2
    c76       r5        2
    c77       Obj       0.089020000000000002
    c77       r3        2
    c77       r4        2
    c77       r5        2
    c78       Obj       0.10055
    c78       r1        1
    c78       r3        1
    c78       r4        1
    c78       r5        1
    c79       Obj       0.0646119
    c79       r0        1
    c79       r1        1
    c79       r3        1
    c79       r6        1
    c79       r7        1
    c80       Obj       0.13552739999999999
    c80       r0        3
    c80       r1        1
    c80       r3        1
    c80       r6        1
    c80       r7        1
    c81       Obj       0.020285999999999998
    c81       r3        1
    c81       r6        1
    c81       r7        1
    c82       Obj       0.028150000000000001
    c82       r3        1
    c82       r6        1
    c82       r7        1
    c83       Obj       0.15934464000000001
    c83       r0        3
    c83       r2        1
    c83       r3        2
    c83       r6        2
    c83       r7        2
    c84       Obj       0.27156480000000005
    c84       r0        5
    c84       r1        1
    c84       r2        2
    c84       r3        2
    c84       r6        2
    c84       r7        2
    c85       Obj       0.17926271999999999
    c85       r0        3
    c85       r2        1
    c85       r3        2
    c85       r6        2
    c85       r7        2
    c86       Obj       0.089020000000000002
    c86       r3        2
    c86       r6        2
    c86       r7        2
    c87       Obj       0.0646119
    c87       r0        1
    c87       r1        1
    c87       r3        1
    c87       r8        1
    c87       r9        1
    c88       Obj       0.13552739999999999
    c88       r0        3
    c88       r1        1
    c88       r3        1
    c88       r8        1
    c88       r9        1
    c89       Obj       0.028150000000000001
    c89       r3        1
    c89       r8        1
    c89       r9        1
    c90       Obj       0.15934464000000001
    c90       r0        3
    c90       r2        1
    c90       r3        2
    c90       r8        2
    c90       r9        2
    c91       Obj       0.27156480000000005
    c91       r0        5
    c91       r1        1
    c91       r2        2
    c91       r3        2
    c91       r8        2
    c91       r9        2
    c92       Obj       0.17926271999999999
    c92       r0        3
    c92       r2        1
    c92       r3        2
    c92       r8        2
    c92       r9        2
    c93       Obj       0.089020000000000002
    c93       r3        2
    c93       r8        2
    c93       r9        2
    c94       Obj       0.10055
    c94       r1        1
    c94       r3        1
    c94       r8        1
    c94       r9        1
    c95       Obj       0.0646119
    c95       r0        1
    c95       r1        1
    c95       r3        1
    c95       r10       1
    c95       r11       1
    c96       Obj       0.13552739999999999
    c96       r0        3
    c96       r1        1
    c96       r3        1
    c96       r10       1
    c96       r11       1
    c97       Obj       0.028150000000000001
    c97       r3        1
    c97       r10       1
    c97       r11       1
    c98       Obj       0.15934464000000001
    c98       r0        3
    c98       r2        1
    c98       r3        2
    c98       r10       2
    c98       r11       2
    c99       Obj       0.27156480000000005
    c99       r0        5
    c99       r1        1
    c99       r2        2
    c99       r3        2
    c99       r10       2
    c99       r11       2
    c100      Obj       0.17926271999999999
    c100      r0        3
    c100      r2        1
    c100      r3        2
    c100      r10       2
    c100      r11       2
    c101      Obj       0.089020000000000002
    c101      r3        2
    c101      r10       2
    c101      r11       2
    c102      Obj       0.10055
    c102      r1        1
    c102      r3        1
    c102      r10       1
    c102      r11       1
    c103      Obj       0.0646119
    c103      r0        1
    c103      r1        1
    c103      r3        1
    c103      r12       1
    c103      r13       1
    c104      Obj       0.13552739999999999
    c104      r0        3
    c104      r1        1
    c104      r3        1
    c104      r12       1
    c104      r13       1
    c105      Obj       0.028150000000000001
    c105      r3        1
    c105      r12       1
    c105      r13       1
    c106      Obj       0.15934464000000001
    c106      r0        3
    c106      r2        1
    c106      r3        2
    c106      r12       2
    c106      r13       2
    c107      Obj       0.27156480000000005
    c107      r0        5
    c107      r1        1
    c107      r2        2
    c107      r3        2
    c107      r12       2
    c107      r13       2
    c108      Obj       0.17926271999999999
    c108      r0        3
    c108      r2        1
    c108      r3        2
    c108      r12       2
    c108      r13       2
    c109      Obj       0.089020000000000002
    c109      r3        2
    c109      r12       2
    c109      r13       2
    c110      Obj       0.10055
    c110      r1        1
    c110      r3        1
    c110      r12       1
    c110      r13       1
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
ENDATA

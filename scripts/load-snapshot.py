#!/usr/bin/env python3
"""Writes the load benchmark's cluster (benches/load.rs) as one snapshot YAML, for `joiner solve`.

usage: scripts/load-snapshot.py NODES BOUND PENDING > big.yaml   (the bench uses 5000 40000 10000)
The pending pods repeat src/workload.rs diverse(PENDING, 42) with the same SplitMix64 draws."""
import sys
M=(1<<64)-1
class R:
    def __init__(s,x): s.x=x
    def next(s):
        s.x=(s.x+0x9E3779B97F4A7C15)&M; z=s.x
        z=((z^(z>>30))*0xBF58476D1CE4E5B9)&M
        z=((z^(z>>27))*0x94D049BB133111EB)&M
        return z^(z>>31)
    def pick(s,a): return a[s.next()%len(a)]
nodes,bound,pending=map(int,sys.argv[1:4])
Z=["us-east-1a","us-east-1b","us-east-1c","us-east-1d","us-east-1e","us-east-1f"]
out=[]
out.append("""apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: default}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements: [{key: kubernetes.io/arch, operator: In, values: [amd64]}]
""")
for n in range(nodes):
    name="node-%05d"%n; z=Z[n%6]
    out.append(f"""apiVersion: v1
kind: Node
metadata: {{name: {name}, labels: {{kubernetes.io/hostname: {name}, kubernetes.io/os: linux, kubernetes.io/arch: amd64, node.kubernetes.io/instance-type: m5.2xlarge, topology.kubernetes.io/zone: {z}, topology.kubernetes.io/region: us-east-1, eks.amazonaws.com/nodegroup: base}}}}
spec: {{providerID: "aws:///{z}/i-{n:017x}"}}
status:
  capacity: {{cpu: 7910m, memory: 30000Mi, pods: "58"}}
  allocatable: {{cpu: 7910m, memory: 30000Mi, pods: "58"}}
  conditions: [{{type: Ready, status: "True", reason: KubeletReady}}]
""")
for i in range(bound):
    node="node-%05d"%((i//8)%max(nodes,1))
    out.append(f"""apiVersion: v1
kind: Pod
metadata: {{name: base-{i:06d}, namespace: default, uid: b-{i}, labels: {{app: base-{i%50}}}}}
spec: {{nodeName: {node}, containers: [{{name: c, image: app, resources: {{requests: {{cpu: 985m, memory: 3600Mi}}}}}}]}}
status: {{phase: Running}}
""")
r=R(42); names=["generic","zone-spread","host-spread","zone-affinity","host-anti"]
CPU=["100m","250m","500m","1","1500m"]; MEM=["100Mi","256Mi","512Mi","1Gi","2Gi","4Gi"]
for i in range(pending):
    kind=min(i*5//max(pending,1),4)
    app=names[4] if kind==4 else f"{names[kind]}-{i%10}"
    cpu=r.pick(CPU); mem=r.pick(MEM)
    d=f"""apiVersion: v1
kind: Pod
metadata: {{name: {app}-{i}, namespace: default, uid: uid-{i:06d}, labels: {{app: {app}}}}}
spec:
  containers: [{{name: c, image: app, resources: {{requests: {{cpu: {cpu}, memory: {mem}}}}}}}]
"""
    key={1:"topology.kubernetes.io/zone",2:"kubernetes.io/hostname"}.get(kind)
    if key: d+=f"  topologySpreadConstraints: [{{maxSkew: 1, topologyKey: {key}, whenUnsatisfiable: DoNotSchedule, labelSelector: {{matchLabels: {{app: {app}}}}}}}]\n"
    if kind==3: d+=f"  affinity: {{podAffinity: {{requiredDuringSchedulingIgnoredDuringExecution: [{{topologyKey: topology.kubernetes.io/zone, labelSelector: {{matchLabels: {{app: {app}}}}}}}]}}}}\n"
    if kind==4: d+=f"  affinity: {{podAntiAffinity: {{requiredDuringSchedulingIgnoredDuringExecution: [{{topologyKey: kubernetes.io/hostname, labelSelector: {{matchLabels: {{app: {app}}}}}}}]}}}}\n"
    d+="status: {phase: Pending}\n"
    out.append(d)
print("---\n".join(out))

//! EBS attach limits and ephemeral storage in planning, each on a case with a hand-computed answer:
//! more volume pods than a new node's attach limit open a second node although CPU and memory
//! would fit one; an existing node whose CSINode allows two attachments, both taken, gets no third
//! volume pod; a pod asking for more ephemeral storage than the default 20Gi root volume fits only
//! when the EC2NodeClass maps a larger one. Plans are checked with `joiner::verify` too.
//!
//! The catalog is the bundled us-east-1 one, the NodePool limited to on-demand m5.large
//! ($0.096/h in us-east-1a; 2 vCPUs, 8 GiB, 3 ENIs, Nitro, no instance store). Its attach limit,
//! as `catalog::ebs` derives it: 28 shared slots - 2 network interfaces - 1 root volume = 25.
//!
//! Run with `cargo test --release --test volume_attach`.

use std::fmt::Write;
use std::time::Duration;

use joiner::catalog::Catalog;
use joiner::domain::volume::ebs_attach_resource;
use joiner::domain::{ClusterSnapshot, Quantity};
use joiner::optimizer::{self, Plan, SolveSettings, Strategy, UnschedulableReason};
use joiner::snapshot::parse_snapshot;

const STRATEGIES: [Strategy; 2] = [Strategy::Milp, Strategy::Greedy];
const ZONE: &str = "us-east-1a";
const M5_LARGE_ON_DEMAND: f64 = 0.096;
const M5_LARGE_ATTACH_LIMIT: usize = 25;

fn catalog() -> Catalog {
    Catalog::bundled("us-east-1").expect("bundled catalog")
}

fn solve(snap: &ClusterSnapshot, strategy: Strategy) -> Plan {
    let settings = SolveSettings {
        strategy,
        time_limit: Duration::from_secs(20),
        ..SolveSettings::default()
    };
    let catalog = catalog();
    let plan = optimizer::solve(snap, &catalog, &settings).expect("solve");
    if let Err(v) = joiner::verify::verify(snap, &catalog, &plan) {
        panic!("{strategy:?}: the plan does not verify: {v:?}\n{plan:#?}");
    }
    plan
}

fn parse(text: &str) -> ClusterSnapshot {
    parse_snapshot(text, "volume_attach test").unwrap_or_else(|e| panic!("{e}\n{text}"))
}

/// An EC2NodeClass (with `spec_extra` added to its spec), a NodePool of on-demand m5.large in
/// us-east-1a, and the EBS StorageClass.
fn cluster(spec_extra: &str) -> String {
    format!(
        "apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {{name: default}}
spec:
  role: KarpenterNodeRole-test
  amiSelectorTerms:
  - {{alias: al2023@latest}}
  subnetSelectorTerms:
  - tags: {{karpenter.sh/discovery: test}}
  securityGroupSelectorTerms:
  - tags: {{karpenter.sh/discovery: test}}
{spec_extra}---
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {{name: general}}
spec:
  template:
    spec:
      nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}}
      requirements:
      - {{key: node.kubernetes.io/instance-type, operator: In, values: [m5.large]}}
      - {{key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}}
      - {{key: topology.kubernetes.io/zone, operator: In, values: [{ZONE}]}}
---
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {{name: gp3}}
provisioner: ebs.csi.aws.com
volumeBindingMode: WaitForFirstConsumer
"
    )
}

/// A pod of 10m CPU and 32Mi; on `node` and Running when given, else Pending. With `volume`, it
/// mounts its own claim `data-NAME`, bound to an EBS volume in us-east-1a.
fn pod(out: &mut String, name: &str, node: Option<&str>, volume: bool, extra_requests: &str) {
    if volume {
        write!(
            out,
            "---
apiVersion: v1
kind: PersistentVolume
metadata: {{name: pv-{name}}}
spec:
  capacity: {{storage: 10Gi}}
  accessModes: [ReadWriteOnce]
  storageClassName: gp3
  claimRef: {{namespace: default, name: data-{name}}}
  csi: {{driver: ebs.csi.aws.com, volumeHandle: vol-{name}}}
  nodeAffinity:
    required:
      nodeSelectorTerms:
      - matchExpressions:
        - {{key: topology.kubernetes.io/zone, operator: In, values: [{ZONE}]}}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {{name: data-{name}, namespace: default}}
spec:
  accessModes: [ReadWriteOnce]
  storageClassName: gp3
  volumeName: pv-{name}
  resources: {{requests: {{storage: 10Gi}}}}
status: {{phase: Bound}}
"
        )
        .unwrap();
    }
    let node_name = node
        .map(|n| format!("  nodeName: {n}\n"))
        .unwrap_or_default();
    let phase = if node.is_some() { "Running" } else { "Pending" };
    let volumes = if volume {
        format!(
            "    volumeMounts: [{{name: data, mountPath: /data}}]\n  volumes:\n  - name: data\n    \
             persistentVolumeClaim: {{claimName: data-{name}}}\n"
        )
    } else {
        String::new()
    };
    write!(
        out,
        "---
apiVersion: v1
kind: Pod
metadata:
  name: {name}
  namespace: default
  ownerReferences:
  - {{apiVersion: apps/v1, kind: StatefulSet, name: db, uid: uid-db, controller: true}}
spec:
{node_name}  containers:
  - name: app
    image: registry.example.com/app:1.0
    resources:
      requests: {{cpu: 10m, memory: 32Mi{extra_requests}}}
{volumes}status:
  phase: {phase}
"
    )
    .unwrap();
}

fn unschedulable(plan: &Plan) -> Vec<(&str, UnschedulableReason)> {
    plan.unschedulable
        .iter()
        .map(|u| (u.pod.as_str(), u.reason))
        .collect()
}

fn assert_cost(plan: &Plan, expected: f64, label: &str) {
    assert!(
        (plan.cost_per_hour - expected).abs() < 1e-9,
        "{label}: cost {} != {expected}\n{plan:#?}",
        plan.cost_per_hour
    );
}

#[test]
fn m5_large_attaches_25_volumes() {
    let catalog = catalog();
    let m5 = catalog
        .instance_types
        .iter()
        .find(|t| t.name == "m5.large")
        .expect("m5.large");
    let limit = m5.allocatable(None).get(&ebs_attach_resource());
    assert_eq!(limit, Quantity::from_units(M5_LARGE_ATTACH_LIMIT as i64));
}

#[test]
fn more_volume_pods_than_the_attach_limit_open_a_second_node() {
    // 27 pods of 10m/32Mi: 270m and 864Mi fit one m5.large (1930m, 6903Mi, 29 pods), but each
    // has its own EBS volume and an m5.large attaches 25: two nodes, 25 + 2 pods, $0.192/h
    let mut text = cluster("");
    for i in 0..27 {
        pod(&mut text, &format!("db-{i}"), None, true, "");
    }
    let snap = parse(&text);
    for strategy in STRATEGIES {
        let plan = solve(&snap, strategy);
        let label = format!("{strategy:?}");
        assert!(plan.unschedulable.is_empty(), "{label}: {plan:#?}");
        let mut sizes: Vec<usize> = plan.nodes.iter().map(|n| n.pods.len()).collect();
        sizes.sort();
        assert_eq!(sizes.len(), 2, "{label}: {plan:#?}");
        assert!(
            sizes.iter().all(|s| *s <= M5_LARGE_ATTACH_LIMIT),
            "{label}: {sizes:?}"
        );
        assert_eq!(sizes.iter().sum::<usize>(), 27, "{label}");
        assert!(plan.nodes.iter().all(|n| n.instance_type == "m5.large"));
        assert_cost(&plan, 2.0 * M5_LARGE_ON_DEMAND, &label);
    }
}

#[test]
fn as_many_volume_pods_as_the_attach_limit_share_one_node() {
    // the control for the test above: 25 volume pods take one m5.large
    let mut text = cluster("");
    for i in 0..M5_LARGE_ATTACH_LIMIT {
        pod(&mut text, &format!("db-{i}"), None, true, "");
    }
    for strategy in STRATEGIES {
        let plan = solve(&parse(&text), strategy);
        assert_eq!(plan.nodes.len(), 1, "{strategy:?}: {plan:#?}");
        assert_cost(&plan, M5_LARGE_ON_DEMAND, &format!("{strategy:?}"));
    }
}

/// A running m5.large in us-east-1a whose CSINode allows two EBS attachments.
fn existing_node(out: &mut String) {
    out.push_str(
        "---
apiVersion: v1
kind: Node
metadata:
  name: ip-10-0-1-10.ec2.internal
  labels:
    karpenter.sh/nodepool: general
    karpenter.sh/capacity-type: on-demand
    node.kubernetes.io/instance-type: m5.large
    topology.kubernetes.io/zone: us-east-1a
    topology.kubernetes.io/region: us-east-1
    kubernetes.io/arch: amd64
    kubernetes.io/os: linux
    kubernetes.io/hostname: ip-10-0-1-10.ec2.internal
    karpenter.sh/initialized: \"true\"
    karpenter.sh/registered: \"true\"
spec: {providerID: 'aws:///us-east-1a/i-0dc951a7ed1c022eb'}
status:
  capacity: {cpu: \"2\", memory: 8Gi, pods: \"29\"}
  allocatable: {cpu: 1930m, memory: 6903Mi, pods: \"29\"}
  conditions:
  - {type: Ready, status: \"True\"}
---
apiVersion: storage.k8s.io/v1
kind: CSINode
metadata: {name: ip-10-0-1-10.ec2.internal}
spec:
  drivers:
  - {name: ebs.csi.aws.com, nodeID: i-0dc951a7ed1c022eb, allocatable: {count: 2}}
",
    );
}

#[test]
fn a_node_with_its_attachments_taken_gets_no_further_volume_pod() {
    // db-0 and db-1 run on the node with a volume each, its CSINode's limit of 2; pending db-2
    // (with a volume) needs a new m5.large ($0.096/h) while web (without one) fits the node
    let mut text = cluster("");
    existing_node(&mut text);
    let node = "ip-10-0-1-10.ec2.internal";
    pod(&mut text, "db-0", Some(node), true, "");
    pod(&mut text, "db-1", Some(node), true, "");
    pod(&mut text, "db-2", None, true, "");
    pod(&mut text, "web", None, false, "");
    let snap = parse(&text);
    for strategy in STRATEGIES {
        let plan = solve(&snap, strategy);
        let label = format!("{strategy:?}");
        assert!(plan.unschedulable.is_empty(), "{label}: {plan:#?}");
        let destinations = plan.destinations();
        assert_eq!(destinations.get("default/web"), Some(&node), "{label}");
        assert_ne!(destinations.get("default/db-2"), Some(&node), "{label}");
        assert_eq!(plan.nodes.len(), 1, "{label}: {plan:#?}");
        assert_eq!(plan.nodes[0].pods, ["default/db-2"], "{label}");
        assert_cost(&plan, M5_LARGE_ON_DEMAND, &label);
    }
}

#[test]
fn with_a_free_attachment_the_node_takes_the_volume_pod() {
    // the control for the test above: with db-1 gone, db-2 takes the node's second attachment
    let mut text = cluster("");
    existing_node(&mut text);
    let node = "ip-10-0-1-10.ec2.internal";
    pod(&mut text, "db-0", Some(node), true, "");
    pod(&mut text, "db-2", None, true, "");
    for strategy in STRATEGIES {
        let plan = solve(&parse(&text), strategy);
        assert_eq!(
            plan.destinations().get("default/db-2"),
            Some(&node),
            "{strategy:?}: {plan:#?}"
        );
        assert!(plan.nodes.is_empty(), "{strategy:?}");
    }
}

const ROOT_100GI: &str = "  blockDeviceMappings:
  - deviceName: /dev/xvda
    rootVolume: true
    ebs: {volumeSize: 100Gi, volumeType: gp3}
";

#[test]
fn ephemeral_storage_beyond_the_default_root_needs_a_larger_root_volume() {
    // scratch asks for 50Gi of ephemeral storage. The default 20Gi root leaves 17Gi (1Gi
    // kube-reserved, 2Gi for eviction): unschedulable. A 100Gi root leaves 100 - 1 - 10 = 89Gi:
    // one m5.large, $0.096/h.
    for (spec, fits) in [("", false), (ROOT_100GI, true)] {
        let mut text = cluster(spec);
        pod(
            &mut text,
            "scratch",
            None,
            false,
            ", ephemeral-storage: 50Gi",
        );
        let snap = parse(&text);
        for strategy in STRATEGIES {
            let plan = solve(&snap, strategy);
            let label = format!("{strategy:?}, root 100Gi: {fits}");
            if fits {
                assert!(plan.unschedulable.is_empty(), "{label}: {plan:#?}");
                assert_eq!(plan.nodes.len(), 1, "{label}");
                assert_eq!(
                    plan.nodes[0].allocatable["ephemeral-storage"], "89Gi",
                    "{label}"
                );
                assert_cost(&plan, M5_LARGE_ON_DEMAND, &label);
            } else {
                assert!(plan.nodes.is_empty(), "{label}: {plan:#?}");
                assert_eq!(
                    unschedulable(&plan),
                    [("default/scratch", UnschedulableReason::LargerThanAnyType)],
                    "{label}"
                );
            }
        }
    }
}

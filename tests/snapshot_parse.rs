//! Reading whole snapshots as `kubectl get ... -o yaml` prints them, through the public API.

use joiner::domain::{ClusterSnapshot, Quantity};
use joiner::snapshot::{load_snapshot, parse_snapshot, SnapshotError};
use proptest::prelude::*;

/// One object of every kind joiner reads, in the shape kubectl prints (quoted quantities, status).
const OBJECTS: [&str; 9] = [
    r#"apiVersion: v1
kind: Pod
metadata:
  name: web-1
  namespace: shop
  uid: 0b7c
  labels: {app: web, pod-template-hash: 7d9f}
  creationTimestamp: "2024-06-01T12:00:00Z"
  ownerReferences:
  - {apiVersion: apps/v1, kind: ReplicaSet, name: web-7d9f, uid: r1, controller: true, blockOwnerDeletion: true}
spec:
  containers:
  - name: web
    image: nginx
    resources:
      requests: {cpu: 250m, memory: 256Mi}
      limits: {memory: 512Mi}
  topologySpreadConstraints:
  - maxSkew: 1
    topologyKey: topology.kubernetes.io/zone
    whenUnsatisfiable: ScheduleAnyway
    labelSelector: {matchLabels: {app: web}}
    matchLabelKeys: [pod-template-hash]
  tolerations:
  - {key: node.kubernetes.io/not-ready, operator: Exists, effect: NoExecute, tolerationSeconds: 300}
status:
  phase: Pending
  conditions:
  - {type: PodScheduled, status: "False", reason: Unschedulable}
"#,
    r#"apiVersion: v1
kind: Node
metadata:
  name: ip-10-0-1-5.ec2.internal
  labels:
    karpenter.sh/nodepool: default
    node.kubernetes.io/instance-type: m5.large
    topology.kubernetes.io/zone: us-east-1a
spec:
  providerID: aws:///us-east-1a/i-0abc
status:
  capacity: {cpu: "2", memory: 7934460Ki, pods: "29", ephemeral-storage: 20959212Ki}
  allocatable: {cpu: 1930m, memory: 7244284Ki, pods: "29"}
  conditions:
  - {type: Ready, status: "True", reason: KubeletReady}
"#,
    r#"apiVersion: apps/v1
kind: DaemonSet
metadata: {name: kube-proxy, namespace: kube-system}
spec:
  selector: {matchLabels: {k8s-app: kube-proxy}}
  template:
    metadata: {labels: {k8s-app: kube-proxy}}
    spec:
      priorityClassName: system-node-critical
      tolerations: [{operator: Exists}]
      containers:
      - name: kube-proxy
        resources: {requests: {cpu: 100m}}
"#,
    r#"apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: web, namespace: shop}
spec:
  maxUnavailable: 1
  selector: {matchLabels: {app: web}}
status: {currentHealthy: 3, desiredHealthy: 2, disruptionsAllowed: 1, expectedPods: 3}
"#,
    r#"apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: default}
spec:
  template:
    metadata:
      labels: {team: shop}
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
      - {key: karpenter.sh/capacity-type, operator: In, values: [spot, on-demand]}
      - {key: karpenter.k8s.aws/instance-cpu, operator: Gt, values: ["1"]}
      - {key: node.kubernetes.io/instance-type, operator: Exists, minValues: 3}
      taints:
      - {key: dedicated, value: shop, effect: NoSchedule}
  limits: {cpu: 1000, memory: 1000Gi}
"#,
    r#"apiVersion: karpenter.sh/v1
kind: NodeClaim
metadata:
  name: default-x7k2p
  labels: {karpenter.sh/nodepool: default}
spec:
  nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
  requirements:
  - {key: node.kubernetes.io/instance-type, operator: In, values: [m5.large]}
status:
  nodeName: ip-10-0-1-5.ec2.internal
  providerID: aws:///us-east-1a/i-0abc
  capacity: {cpu: "2", memory: 7934460Ki, pods: "29"}
  allocatable: {cpu: 1930m, memory: 7244284Ki, pods: "29"}
"#,
    r#"apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: default}
spec:
  amiSelectorTerms: [{alias: al2023@latest}]
  role: KarpenterNodeRole
  kubelet:
    maxPods: 110
    systemReserved: {cpu: 100m, memory: 100Mi}
    evictionHard: {memory.available: 5%, nodefs.available: 10%}
"#,
    r#"apiVersion: v1
kind: ConfigMap
metadata: {name: joiner-cost-weights, namespace: kube-system}
data:
  preferNoSchedule: "0.2"
"#,
    r#"apiVersion: v1
kind: Service
metadata: {name: web, namespace: shop}
spec: {ports: [{port: 80}]}
"#,
];

fn multi_document() -> String {
    OBJECTS.iter().map(|o| format!("---\n{o}")).collect()
}

/// The same objects as one `kind: List`, as `kubectl get a,b,c -o yaml` prints them.
fn as_list() -> String {
    let mut out =
        String::from("apiVersion: v1\nkind: List\nmetadata:\n  resourceVersion: \"\"\nitems:\n");
    for o in OBJECTS {
        for (i, line) in o.lines().enumerate() {
            out.push_str(if i == 0 { "- " } else { "  " });
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

fn parse(text: &str) -> ClusterSnapshot {
    parse_snapshot(text, "snapshot.yaml").unwrap_or_else(|e| panic!("{e}"))
}

fn error(text: &str) -> String {
    parse_snapshot(text, "snapshot.yaml")
        .unwrap_err()
        .to_string()
}

#[test]
fn every_kind_is_read() {
    let s = parse(&multi_document());
    assert_eq!(
        (
            s.pods.len(),
            s.nodes.len(),
            s.daemonsets.len(),
            s.pdbs.len(),
            s.nodepools.len(),
            s.node_claims.len(),
            s.node_classes.len()
        ),
        (1, 1, 1, 1, 1, 1, 1)
    );
    let pod = &s.pods[0];
    assert!(pod.is_pending());
    assert_eq!(pod.key(), "shop/web-1");
    assert_eq!(pod.requests().get("memory"), Quantity::from_mib(256));
    assert_eq!(
        pod.constraints.spread[0].selector.match_labels["pod-template-hash"],
        "7d9f"
    );
    assert_eq!(s.nodes[0].nodepool(), Some("default"));
    assert_eq!(s.nodepools[0].requirements.len(), 3);
    assert_eq!(s.nodepools[0].limits.get("cpu"), Quantity::from_units(1000));
    assert_eq!(
        s.node_class(s.nodepools[0].node_class.as_deref())
            .and_then(|c| c.kubelet.max_pods),
        Some(110)
    );
    assert_eq!(s.weights.prefer_no_schedule, 0.2);
    assert_eq!(s.warnings, ["skipped v1 Service shop/web: kind not used"]);
}

#[test]
fn list_and_multi_document_read_the_same() {
    assert_eq!(parse(&as_list()), parse(&multi_document()));
}

#[test]
fn nodepool_defaults() {
    let d = &parse(OBJECTS[4]).nodepools[0];
    assert_eq!(d.weight, 0);
    assert_eq!(
        d.disruption.consolidation_policy.as_str(),
        "WhenEmptyOrUnderutilized"
    );
    assert_eq!(d.disruption.consolidate_after.as_deref(), Some("0s"));
    assert_eq!(d.disruption.budgets.len(), 1);
    assert_eq!(d.disruption.budgets[0].nodes, "10%");
    assert_eq!(d.labels["team"], "shop");
}

#[test]
fn errors_name_object_and_field() {
    let cases = [
        (
            OBJECTS[0].replace("cpu: 250m", "cpu: abc"),
            "Pod shop/web-1: spec.containers[0].resources.requests.cpu: malformed quantity \"abc\"",
        ),
        (
            OBJECTS[4].replace("operator: Gt", "operator: Near"),
            "NodePool default: spec.template.spec.requirements[1].operator: unknown operator \"Near\"",
        ),
        (
            OBJECTS[4].replace("effect: NoSchedule", "effect: NoPlacement"),
            "NodePool default: spec.template.spec.taints[0].effect: unknown taint effect \"NoPlacement\"",
        ),
        (
            OBJECTS[1].replace("spec:\n", "spec:\n  taints: [{key: a, effect: Maybe}]\n"),
            "Node ip-10-0-1-5.ec2.internal: spec.taints[0].effect: unknown taint effect \"Maybe\"",
        ),
        (
            OBJECTS[7].replace("preferNoSchedule", "preferNoSchedul"),
            "ConfigMap kube-system/joiner-cost-weights: data.preferNoSchedul: unknown key \"preferNoSchedul\"",
        ),
    ];
    for (text, expected) in cases {
        assert_eq!(error(&text), expected);
    }
}

#[test]
fn broken_yaml_names_origin_document_and_line() {
    let text = format!(
        "{}---\n{}",
        OBJECTS[0],
        OBJECTS[1].replace("spec:\n", "spec: [\n")
    );
    let e = error(&text);
    assert!(
        e.starts_with("snapshot.yaml: document 2: malformed yaml: "),
        "{e}"
    );
    assert!(e.contains("line"), "{e}");
    assert!(matches!(
        parse_snapshot(&text, "x").unwrap_err(),
        SnapshotError::Yaml { document: 2, .. }
    ));
}

#[test]
fn load_reads_files_and_reports_missing_ones() {
    let path = std::env::temp_dir().join(format!("joiner-snapshot-{}.yaml", std::process::id()));
    std::fs::write(&path, multi_document()).unwrap();
    let loaded = load_snapshot(&path);
    let _ = std::fs::remove_file(&path);
    assert_eq!(loaded.unwrap(), parse(&multi_document()));
    let e = load_snapshot(std::path::Path::new("/nonexistent/snapshot.yaml")).unwrap_err();
    assert!(
        e.to_string()
            .starts_with("cannot read /nonexistent/snapshot.yaml: "),
        "{e}"
    );
}

/// A text edit applied to a valid snapshot.
#[derive(Debug, Clone)]
enum Edit {
    Delete { at: usize, len: usize },
    Insert { at: usize, text: String },
    Replace { at: usize, ch: char },
}

fn edit() -> impl Strategy<Value = Edit> {
    let snippet = prop_oneof![
        Just(": ".to_string()),
        Just("\n- ".to_string()),
        Just("---\n".to_string()),
        Just("{".to_string()),
        Just("[".to_string()),
        Just("&a ".to_string()),
        Just("*a".to_string()),
        Just("!!binary ".to_string()),
        Just("-1".to_string()),
        Just("99999999999999999999".to_string()),
        Just("Ei".to_string()),
        Just("  ".to_string()),
        Just("<<: ".to_string()),
        "\\PC{0,8}",
    ];
    prop_oneof![
        (any::<usize>(), 1usize..40).prop_map(|(at, len)| Edit::Delete { at, len }),
        (any::<usize>(), snippet).prop_map(|(at, text)| Edit::Insert { at, text }),
        (any::<usize>(), any::<char>()).prop_map(|(at, ch)| Edit::Replace { at, ch }),
    ]
}

fn apply(text: &str, edits: &[Edit]) -> String {
    let mut chars: Vec<char> = text.chars().collect();
    for e in edits {
        let n = chars.len().max(1);
        match e {
            Edit::Delete { at, len } => {
                let start = at % n;
                let end = (start + len).min(chars.len());
                if start < end {
                    chars.drain(start..end);
                }
            }
            Edit::Insert { at, text } => {
                let at = (at % n).min(chars.len());
                chars.splice(at..at, text.chars());
            }
            Edit::Replace { at, ch } => {
                if let Some(c) = chars.get_mut(at % n) {
                    *c = *ch;
                }
            }
        }
    }
    chars.into_iter().collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn never_panics_on_arbitrary_text(text in "\\PC{0,300}") {
        let _ = parse_snapshot(&text, "fuzz");
    }

    #[test]
    fn never_panics_on_yamlish_text(text in "([a-z]{1,6}|:|-|\n|  |\\{|\\}|\\[|\\]|,|'|\"|[0-9]{1,4}|&a|\\*a|---\n){0,80}") {
        let _ = parse_snapshot(&text, "fuzz");
    }

    #[test]
    fn never_panics_on_mutated_snapshots(list in any::<bool>(), edits in prop::collection::vec(edit(), 1..6)) {
        let base = if list { as_list() } else { multi_document() };
        let _ = parse_snapshot(&apply(&base, &edits), "fuzz");
    }
}

#[test]
fn adversarial_inputs_fail_cleanly() {
    let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
    let deep_map = "a: ".repeat(10_000);
    let laughs = "a: &a [x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\nc: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]\n\
                  d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c]\ne: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d]\nf: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e]\n\
                  g: &g [*f, *f, *f, *f, *f, *f, *f, *f, *f]\nh: &h [*g, *g, *g, *g, *g, *g, *g, *g, *g]\ni: [*h, *h, *h, *h, *h, *h, *h, *h, *h]\n";
    let nested_lists = format!(
        "{}{}",
        "{apiVersion: v1, kind: List, items: [".repeat(200),
        "]}".repeat(200)
    );
    for text in [
        deep.as_str(),
        deep_map.as_str(),
        laughs,
        nested_lists.as_str(),
        "\u{feff}",
        "\0",
        "- - -",
        "!!binary aGVsbG8=",
    ] {
        let _ = parse_snapshot(text, "adversarial");
    }
}

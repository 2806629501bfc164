//! Unit tests of the dispatcher and the pod conversion.

use super::*;
use crate::domain::{Operator, Pod, Quantity, WhenUnsatisfiable};

fn parse(text: &str) -> ClusterSnapshot {
    parse_snapshot(text, "test.yaml").unwrap_or_else(|e| panic!("{e}"))
}

fn err(text: &str) -> String {
    parse_snapshot(text, "test.yaml").unwrap_err().to_string()
}

/// A pod whose spec is `spec` (a YAML block indented by two spaces).
fn pod(spec: &str) -> Pod {
    let text = format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: p, namespace: ns, labels: {{app: a, hash: h1}}}}\nspec:\n{spec}"
    );
    std::sync::Arc::unwrap_or_clone(parse(&text).pods.remove(0))
}

/// Parses a pod with this spec and returns the error.
fn pod_err(spec: &str) -> String {
    err(&format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: p}}\nspec:\n{spec}"
    ))
}

fn cpu(p: &Pod) -> i64 {
    p.requests().get("cpu").milli()
}

#[test]
fn documents_and_lists_mix() {
    let s = parse(
        "---\napiVersion: v1\nkind: Node\nmetadata: {name: n1}\n---\n---\n\
         apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: Node, metadata: {name: n2}}\n\
         - apiVersion: v1\n  kind: NodeList\n  items: [{apiVersion: v1, kind: Node, metadata: {name: n3}}]\n",
    );
    let names: Vec<&str> = s.nodes.iter().map(|n| n.name.as_str()).collect();
    assert_eq!(names, ["n1", "n2", "n3"]);
    assert!(s.warnings.is_empty());
}

#[test]
fn empty_input_is_an_empty_snapshot() {
    assert_eq!(parse(""), ClusterSnapshot::default());
    assert_eq!(parse("---\n---\n"), ClusterSnapshot::default());
}

#[test]
fn unknown_kinds_and_versions_warn() {
    let s = parse(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web, namespace: default}\n---\n\
         apiVersion: karpenter.sh/v1beta1\nkind: NodePool\nmetadata: {name: old}\n---\n\
         apiVersion: v1\nkind: ConfigMap\nmetadata: {name: other, namespace: kube-system}\ndata: {x: y}\n",
    );
    assert_eq!(
        s.warnings,
        [
            "skipped apps/v1 Deployment default/web: kind not used",
            "skipped karpenter.sh/v1beta1 NodePool old: apiVersion not supported (joiner reads karpenter.sh/v1 NodePool)",
        ]
    );
}

#[test]
fn documents_that_are_not_objects_fail() {
    assert_eq!(
        err("just a string\n"),
        "test.yaml: document 1: not a kubernetes object (expected a mapping with apiVersion and kind)"
    );
    assert_eq!(
        err("---\n{}\n---\nfoo: bar\n"),
        "test.yaml: document 1: object without apiVersion and kind"
    );
    assert_eq!(
        err("apiVersion: v1\nkind: List\nitems: [{apiVersion: v1, kind: Node, metadata: {name: a}}, 3]\n"),
        "test.yaml: document 1: items[1]: not a kubernetes object (expected a mapping with apiVersion and kind)"
    );
}

#[test]
fn broken_yaml_names_document_and_line() {
    let e =
        err("apiVersion: v1\nkind: Node\nmetadata: {name: a}\n---\napiVersion: v1\nkind: [Node\n");
    assert!(
        e.starts_with("test.yaml: document 2: malformed yaml: "),
        "{e}"
    );
    assert!(e.contains("line"), "{e}");
}

#[test]
fn typed_errors_name_the_field() {
    let e = err("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers: [{name: c, ports: [{containerPort: x}]}]\n");
    assert!(
        e.starts_with("Pod default/p: spec.containers[0].ports[0].containerPort: invalid type"),
        "{e}"
    );
}

#[test]
fn app_containers_sum_and_pods_slot_is_added() {
    let p = pod("  containers:\n  - {name: a, resources: {requests: {cpu: 100m, memory: 64Mi}}}\n  - {name: b, resources: {requests: {cpu: 200m}}}\n");
    assert_eq!(cpu(&p), 300);
    assert_eq!(p.requests().get("memory"), Quantity::from_mib(64));
    assert_eq!(p.requests().get("pods"), Quantity::from_units(1));
}

#[test]
fn init_containers_take_the_element_wise_max() {
    let p = pod(r#"
  initContainers:
  - {name: i, resources: {requests: {cpu: '2', memory: 10Mi}}}
  containers:
  - {name: a, resources: {requests: {cpu: 500m, memory: 1Gi}}}
"#);
    assert_eq!(cpu(&p), 2000);
    assert_eq!(p.requests().get("memory"), Quantity::from_mib(1024));
}

#[test]
fn sidecars_add_to_apps_and_to_later_init_containers() {
    // sidecar 300m runs beside the app (500m) and beside init container `late` (1000m).
    let p = pod(r#"
  initContainers:
  - {name: early, resources: {requests: {cpu: 700m}}}
  - {name: side, restartPolicy: Always, resources: {requests: {cpu: 300m}}}
  - {name: late, resources: {requests: {cpu: '1'}}}
  containers:
  - {name: a, resources: {requests: {cpu: 500m}}}
"#);
    assert_eq!(cpu(&p), 1300);
    let p = pod(r#"
  initContainers:
  - {name: side, restartPolicy: Always, resources: {requests: {cpu: 300m}}}
  containers:
  - {name: a, resources: {requests: {cpu: 500m}}}
"#);
    assert_eq!(cpu(&p), 800);
}

#[test]
fn overhead_and_limits_as_requests() {
    let p = pod(
        "  overhead: {cpu: 250m}\n  containers:\n  - name: a\n    resources:\n      limits: {cpu: '1', memory: 2Gi}\n      requests: {memory: 1Gi}\n",
    );
    assert_eq!(cpu(&p), 1250);
    assert_eq!(p.requests().get("memory"), Quantity::from_mib(1024));
}

#[test]
fn pod_level_resources_replace_the_aggregate() {
    let p = pod("  resources: {requests: {cpu: '3'}}\n  containers:\n  - {name: a, resources: {requests: {cpu: '1', memory: 1Gi}}}\n");
    assert_eq!(cpu(&p), 3000);
    assert_eq!(p.requests().get("memory"), Quantity::from_mib(1024));
}

#[test]
fn quantity_errors_name_object_and_field() {
    let e = err("apiVersion: v1\nkind: Pod\nmetadata: {name: web-1, namespace: default}\nspec:\n  containers:\n  - {name: c, resources: {requests: {cpu: abc}}}\n");
    assert_eq!(
        e,
        "Pod default/web-1: spec.containers[0].resources.requests.cpu: malformed quantity \"abc\""
    );
    let e = err("apiVersion: v1\nkind: Pod\nmetadata: {name: w}\nspec:\n  initContainers: [{name: i, resources: {limits: {memory: -1Gi}}}]\n  containers: []\n");
    assert_eq!(
        e,
        "Pod default/w: spec.initContainers[0].resources.limits.memory: negative quantity \"-1Gi\""
    );
}

#[test]
fn node_selector_and_affinity() {
    let p = pod(r#"
  nodeSelector: {beta.kubernetes.io/arch: arm64}
  containers: []
  affinity:
    nodeAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
        nodeSelectorTerms:
        - matchExpressions: [{key: topology.kubernetes.io/zone, operator: In, values: [a, b]}]
        - matchFields: [{key: metadata.name, operator: In, values: [n1]}]
        - {}
      preferredDuringSchedulingIgnoredDuringExecution:
      - {weight: 5, preference: {matchExpressions: [{key: karpenter.sh/capacity-type, operator: In, values: [spot]}]}}
      - {weight: 0, preference: {matchExpressions: [{key: x, operator: Exists}]}}
      - {weight: 3, preference: {}}
"#);
    let c = &p.constraints;
    assert_eq!(c.node_selector[0].key, "kubernetes.io/arch");
    assert_eq!(c.node_affinity.terms.len(), 3);
    assert_eq!(c.node_affinity.terms[1][0].key, "kubernetes.io/hostname");
    assert_eq!(c.node_affinity.terms[2][0].key, NEVER_MATCH_KEY);
    assert_eq!(c.preferred_node_affinity.len(), 1);
    assert_eq!(c.preferred_node_affinity[0].weight, 5);
}

#[test]
fn unknown_operator_names_the_path() {
    let e = pod_err(
        r#"
  containers: []
  affinity:
    nodeAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
        nodeSelectorTerms: [{matchExpressions: [{key: k, operator: Near}]}]
"#,
    );
    assert_eq!(
        e,
        "Pod default/p: spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].operator: unknown operator \"Near\""
    );
}

#[test]
fn tolerations_convert_and_validate() {
    let p = pod(
        "  containers: []\n  tolerations:\n  - {operator: Exists}\n  - {key: gpu, value: 'true', effect: NoSchedule}\n",
    );
    let t = &p.constraints.tolerations;
    assert!(t[0].key.is_none() && t[0].exists && t[0].effect.is_none());
    assert!(!t[1].exists && t[1].value == "true" && t[1].effect.is_some());
    let e = pod_err("  containers: []\n  tolerations: [{key: a, effect: Never}]\n");
    assert_eq!(
        e,
        "Pod default/p: spec.tolerations[0].effect: unknown taint effect \"Never\""
    );
}

#[test]
fn spread_merges_match_label_keys_and_defaults() {
    let p = pod(r#"
  containers: []
  topologySpreadConstraints:
  - maxSkew: 1
    topologyKey: topology.kubernetes.io/zone
    whenUnsatisfiable: DoNotSchedule
    labelSelector: {matchLabels: {app: a}}
    matchLabelKeys: [hash, missing]
    minDomains: 3
  - {maxSkew: 2, topologyKey: kubernetes.io/hostname, whenUnsatisfiable: ScheduleAnyway}
"#);
    let s = &p.constraints.spread;
    assert_eq!(
        s[0].selector.match_labels.get("hash").map(String::as_str),
        Some("h1")
    );
    assert!(!s[0].selector.match_labels.contains_key("missing"));
    assert_eq!(s[0].min_domains, Some(3));
    assert_eq!(s[0].when_unsatisfiable, WhenUnsatisfiable::DoNotSchedule);
    assert_eq!(s[1].when_unsatisfiable, WhenUnsatisfiable::ScheduleAnyway);
    assert_eq!(s[1].selector.match_expressions[0].key, NEVER_MATCH_KEY);
    assert!(!s[1].selector.matches(&p.labels));
}

#[test]
fn pod_affinity_terms() {
    let p = pod(r#"
  containers: []
  affinity:
    podAntiAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
      - topologyKey: kubernetes.io/hostname
        labelSelector: {matchExpressions: [{key: app, operator: In, values: [a]}]}
        mismatchLabelKeys: [hash]
      - {topologyKey: kubernetes.io/hostname, namespaceSelector: {}}
      preferredDuringSchedulingIgnoredDuringExecution:
      - {weight: 10, podAffinityTerm: {topologyKey: z, labelSelector: {}, namespaces: [x, y]}}
    podAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
      - {topologyKey: z, labelSelector: {matchLabels: {db: 'yes'}}, namespaceSelector: {matchLabels: {team: t}}}
"#);
    let c = &p.constraints;
    let anti = &c.pod_anti_affinity;
    assert_eq!(
        anti[0].selector.match_expressions[1].operator,
        Operator::NotIn
    );
    assert!(!anti[0].all_namespaces && anti[0].namespaces.is_empty());
    assert!(anti[1].all_namespaces);
    assert_eq!(anti[1].selector.match_expressions[0].key, NEVER_MATCH_KEY);
    assert_eq!(c.preferred_pod_anti_affinity[0].term.namespaces, ["x", "y"]);
    assert!(c.pod_affinity[0].all_namespaces);
}

#[test]
fn host_ports_default_protocol() {
    let p = pod("  containers:\n  - {name: a, ports: [{containerPort: 80, hostPort: 8080}, {containerPort: 81}]}\n");
    assert_eq!(p.constraints.host_ports.len(), 1);
    assert_eq!(
        (
            p.constraints.host_ports[0].port,
            p.constraints.host_ports[0].protocol.as_str()
        ),
        (8080, "TCP")
    );
}

#[test]
fn pod_identity_and_annotations() {
    let s = parse(
        r#"
apiVersion: v1
kind: Pod
metadata:
  name: p
  uid: u1
  creationTimestamp: "2024-01-02T03:04:05Z"
  annotations: {controller.kubernetes.io/pod-deletion-cost: '-5', karpenter.sh/do-not-disrupt: 'true'}
  ownerReferences:
  - {apiVersion: v1, kind: Other, name: o, uid: x}
  - {apiVersion: apps/v1, kind: ReplicaSet, name: rs, uid: y, controller: true}
spec: {containers: [], priority: 100, nodeName: n1}
"#,
    );
    let p = &s.pods[0];
    assert_eq!(
        (
            p.namespace.as_str(),
            p.uid.as_str(),
            p.priority,
            p.deletion_cost
        ),
        ("default", "u1", 100, -5)
    );
    assert_eq!(p.do_not_disrupt.as_deref(), Some("true"));
    assert_eq!(
        (p.owner_kind.as_deref(), p.owner_name.as_deref()),
        (Some("ReplicaSet"), Some("rs"))
    );
    assert_eq!(p.created.as_deref(), Some("2024-01-02T03:04:05Z"));
    assert_eq!(p.node_name.as_deref(), Some("n1"));
    let e = err("apiVersion: v1\nkind: Pod\nmetadata: {name: p, annotations: {controller.kubernetes.io/pod-deletion-cost: high}}\nspec: {containers: []}\n");
    assert_eq!(
        e,
        "Pod default/p: metadata.annotations[\"controller.kubernetes.io/pod-deletion-cost\"]: \"high\" is not a 32-bit integer"
    );
}

#[test]
fn pending_terminal_and_terminating() {
    let s = parse(
        "apiVersion: v1\nkind: PodList\nitems:\n\
         - {apiVersion: v1, kind: Pod, metadata: {name: pending}, spec: {containers: []}, status: {phase: Pending}}\n\
         - {apiVersion: v1, kind: Pod, metadata: {name: bound}, spec: {containers: [], nodeName: n}, status: {phase: Running}}\n\
         - {apiVersion: v1, kind: Pod, metadata: {name: done}, spec: {containers: []}, status: {phase: Succeeded}}\n\
         - {apiVersion: v1, kind: Pod, metadata: {name: failed, namespace: x}, spec: {containers: [], nodeName: n}, status: {phase: Failed}}\n\
         - {apiVersion: v1, kind: Pod, metadata: {name: going, deletionTimestamp: '2024-01-01T00:00:00Z'}, spec: {containers: []}}\n\
         - {apiVersion: v1, kind: Pod, metadata: {name: ds-pod, ownerReferences: [{apiVersion: apps/v1, kind: DaemonSet, name: d, uid: u, controller: true}]}, spec: {containers: []}}\n",
    );
    let pending: Vec<&str> = s.pending_pods().map(|p| p.name.as_str()).collect();
    assert_eq!(pending, ["pending"]);
    let flags: Vec<(bool, bool)> = s.pods.iter().map(|p| (p.terminal, p.terminating)).collect();
    assert_eq!(
        flags,
        [
            (false, false),
            (false, false),
            (true, false),
            (true, false),
            (false, true),
            (false, false)
        ]
    );
    assert!(s.pods[1].occupies_node() && !s.pods[3].occupies_node());
}

#[test]
fn daemonset_template_becomes_pod_constraints() {
    let s = parse(
        r#"
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: agent, namespace: kube-system}
spec:
  selector: {matchLabels: {app: agent}}
  template:
    metadata: {labels: {app: agent}}
    spec:
      tolerations: [{operator: Exists}]
      containers: [{name: a, resources: {requests: {cpu: 50m, memory: 32Mi}}}]
"#,
    );
    let d = &s.daemonsets[0];
    assert_eq!(
        (d.namespace.as_str(), d.name.as_str()),
        ("kube-system", "agent")
    );
    assert_eq!(d.pod.requests.get("cpu"), Quantity::from_milli(50));
    assert_eq!(d.pod.labels["app"], "agent");
    assert_eq!(d.pod.namespace, "kube-system");
    let e = err("apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: d}\nspec:\n  selector: {}\n  template:\n    spec:\n      containers: [{name: a, resources: {requests: {cpu: x1}}}]\n");
    assert_eq!(e, "DaemonSet default/d: spec.template.spec.containers[0].resources.requests.cpu: unknown suffix in quantity \"x1\"");
}

#[test]
fn weights_config_map_applies_and_typos_fail() {
    let s = parse("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: joiner-cost-weights, namespace: kube-system}\ndata: {unschedulablePod: '500'}\n");
    assert_eq!(s.weights.unschedulable_pod, 500.0);
    let e = err("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: joiner-cost-weights, namespace: kube-system}\ndata: {unschedulablePods: '500'}\n");
    assert_eq!(
        e,
        "ConfigMap kube-system/joiner-cost-weights: data.unschedulablePods: unknown key \"unschedulablePods\""
    );
}

#[test]
fn nodepool_errors_read_like_the_brief() {
    let e = err(r#"
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: default}
spec:
  template:
    spec:
      requirements:
      - {key: a, operator: In, values: [x]}
      - {key: b, operator: Exists}
      - {key: c, operator: Near, values: [x]}
"#);
    assert_eq!(
        e,
        "NodePool default: spec.template.spec.requirements[2].operator: unknown operator \"Near\""
    );
}

#[test]
fn integers_beyond_64_bits_name_their_object_inside_lists_and_tags() {
    let e = err("apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: Node, metadata: {name: n1}}\n\
                 - apiVersion: v1\n  kind: Node\n  metadata: {name: n2}\n  status: {capacity: {pods: !big -99999999999999999999}}\n");
    assert!(e.starts_with("Node n2: status.capacity.pods: integer -99999999999999999999 does not fit in 64 bits at line 8"), "{e}");
    // a key beyond 64 bits cannot be walked either: serde_yaml_ng's message stands
    let e = err(
        "apiVersion: v1\nkind: Node\nmetadata: {name: n1, labels: {99999999999999999999: x}}\n",
    );
    assert!(
        e.starts_with("test.yaml: document 1: malformed yaml:"),
        "{e}"
    );
}

#[test]
fn the_same_object_twice_is_an_error_but_not_across_kinds_or_namespaces() {
    let e = err("apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: a}\n---\n\
                 apiVersion: v1\nkind: List\nitems: [{apiVersion: karpenter.sh/v1, kind: NodePool, metadata: {name: a}}]\n");
    assert_eq!(
        e,
        "NodePool a: metadata.name: duplicate object, first read from document 1"
    );
    let s = parse(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: []}\n---\n\
         apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: other}\nspec: {containers: []}\n---\n\
         apiVersion: v1\nkind: Node\nmetadata: {name: p}\n",
    );
    assert_eq!((s.pods.len(), s.nodes.len()), (2, 1));
    // live objects: a copy that cannot be read leaves its place to the next one
    let bad: Value = serde_yaml_ng::from_str(
        "{apiVersion: v1, kind: Node, metadata: {name: n}, status: {allocatable: {cpu: '-1'}}}",
    )
    .unwrap();
    let good: Value =
        serde_yaml_ng::from_str("{apiVersion: v1, kind: Node, metadata: {name: n}}").unwrap();
    let (s, errors) = from_values([bad, good.clone(), good], "cluster");
    assert_eq!(s.nodes.len(), 1);
    assert_eq!(errors.len(), 2, "{errors:?}");
    assert_eq!(
        errors[1].to_string(),
        "Node n: metadata.name: duplicate object, first read from document 2"
    );
}

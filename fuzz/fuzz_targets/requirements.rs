//! Requirements and selectors: node selectors, required node affinity with every operator, label
//! selectors of spreads and pod (anti-)affinity, and tolerations, built from fuzzed keys, operators
//! and values. They go through the snapshot reader and the planner, and every requirement that
//! validates must obey the operators' algebra (NotIn is the complement of In, DoesNotExist of Exists).
#![no_main]

use arbitrary::Arbitrary;
use joiner::domain::{Labels, Requirement};
use libfuzzer_sys::fuzz_target;
use serde_yaml_ng::{Mapping, Value};

#[path = "common.rs"]
mod common;

const OPERATORS: [&str; 9] = [
    "In",
    "NotIn",
    "Exists",
    "DoesNotExist",
    "Gt",
    "Lt",
    "Gte",
    "Lte",
    "Near",
];
const KEYS: [&str; 6] = [
    "topology.kubernetes.io/zone",
    "kubernetes.io/arch",
    "karpenter.sh/capacity-type",
    "karpenter.k8s.aws/instance-cpu",
    "node.kubernetes.io/instance-type",
    "app",
];

#[derive(Debug, Arbitrary)]
struct Req {
    key: (u8, String),
    operator: u8,
    values: Vec<String>,
}

#[derive(Debug, Arbitrary)]
struct Input {
    node_selector: Vec<(u8, String)>,
    terms: Vec<Vec<Req>>,
    selector: Vec<Req>,
    spread_key: u8,
    max_skew: i32,
    tolerations: Vec<(String, u8, String)>,
    labels: Vec<(u8, String)>,
}

fn key((pick, free): &(u8, String)) -> String {
    KEYS.get(*pick as usize)
        .map_or_else(|| free.clone(), |k| k.to_string())
}

fn expression(r: &Req) -> Value {
    let mut m = Mapping::new();
    m.insert("key".into(), key(&r.key).into());
    m.insert(
        "operator".into(),
        OPERATORS[r.operator as usize % OPERATORS.len()].into(),
    );
    m.insert(
        "values".into(),
        Value::Sequence(r.values.iter().map(|v| v.clone().into()).collect()),
    );
    Value::Mapping(m)
}

fn check_algebra(r: &Req, labels: &Labels) {
    let (k, values) = (key(&r.key), r.values.clone());
    let req = |op: &str| Requirement::new(&k, op, values.clone(), None);
    if let (Ok(is_in), Ok(not_in)) = (req("In"), req("NotIn")) {
        assert_ne!(
            is_in.matches(labels),
            not_in.matches(labels),
            "In and NotIn {k} {values:?} on {labels:?}"
        );
    }
    if let (Ok(ex), Ok(dne)) = (req("Exists"), req("DoesNotExist")) {
        assert_ne!(
            ex.matches(labels),
            dne.matches(labels),
            "Exists and DoesNotExist {k} on {labels:?}"
        );
    }
}

fuzz_target!(|input: Input| {
    let labels: Labels = input
        .labels
        .iter()
        .map(|l| (key(&(l.0, l.1.clone())), l.1.clone()))
        .collect();
    for r in input.terms.iter().flatten().chain(&input.selector) {
        check_algebra(r, &labels);
    }
    let terms: Vec<Value> = input
        .terms
        .iter()
        .map(|t| {
            Value::Mapping(
                [(
                    "matchExpressions".into(),
                    Value::Sequence(t.iter().map(expression).collect()),
                )]
                .into_iter()
                .collect(),
            )
        })
        .collect();
    let selector: Value = Value::Mapping(
        [
            (
                "matchExpressions".into(),
                Value::Sequence(input.selector.iter().map(expression).collect()),
            ),
            (
                "matchLabels".into(),
                Value::Mapping(
                    labels
                        .iter()
                        .map(|(k, v)| (k.clone().into(), v.clone().into()))
                        .collect(),
                ),
            ),
        ]
        .into_iter()
        .collect(),
    );
    let tolerations: Vec<Value> = input
        .tolerations
        .iter()
        .map(|(k, op, effect)| {
            let op = if op % 2 == 0 { "Equal" } else { "Exists" };
            serde_yaml_ng::from_str(&format!(
                "{{key: {k:?}, operator: {op}, effect: {effect:?}}}"
            ))
            .unwrap_or(Value::Null)
        })
        .collect();
    let spread_key = [
        "topology.kubernetes.io/zone",
        "kubernetes.io/hostname",
        "karpenter.sh/capacity-type",
    ][input.spread_key as usize % 3];
    let pod = serde_yaml_ng::to_string(&serde_yaml_ng::from_str::<Value>(&format!(
        "{{apiVersion: v1, kind: Pod, metadata: {{name: p, namespace: default, labels: {{app: web}}}}, spec: {{containers: [{{name: c, resources: {{requests: {{cpu: 100m}}}}}}]}}, status: {{phase: Pending}}}}"
    ))
    .map(|mut v| {
        let spec = &mut v["spec"];
        spec["nodeSelector"] = Value::Mapping(input.node_selector.iter().map(|l| (key(l).into(), l.1.clone().into())).collect());
        spec["affinity"] = serde_yaml_ng::from_str("{nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {}}, podAntiAffinity: {requiredDuringSchedulingIgnoredDuringExecution: []}}").expect("yaml");
        spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"] = Value::Sequence(terms);
        spec["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"] =
            Value::Sequence(vec![Value::Mapping([("topologyKey".into(), "kubernetes.io/hostname".into()), ("labelSelector".into(), selector.clone())].into_iter().collect())]);
        spec["topologySpreadConstraints"] = Value::Sequence(vec![Value::Mapping(
            [("maxSkew".into(), input.max_skew.into()), ("topologyKey".into(), spread_key.into()), ("whenUnsatisfiable".into(), "DoNotSchedule".into()), ("labelSelector".into(), selector)].into_iter().collect(),
        )]);
        spec["tolerations"] = Value::Sequence(tolerations);
        v
    })
    .expect("pod template"))
    .expect("yaml");
    let nodepool = "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: default}\nspec: {template: {spec: {nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}, requirements: []}}}\n";
    let Ok(snapshot) =
        joiner::snapshot::parse_snapshot(&format!("{nodepool}---\n{pod}"), "fuzz.yaml")
    else {
        return;
    };
    common::plan(snapshot, common::catalog());
});

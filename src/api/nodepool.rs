//! `karpenter.sh/v1 NodePool`: a template for the nodes joiner may launch (labels, taints,
//! requirements, node class, lifetime), how they may be disrupted, and capacity limits.

// kube-derive's `printcolumn(...)` lists repeat `type_ = "string"`, which clippy mistakes for
// duplicated attributes.
#![allow(clippy::duplicated_attributes)]

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::Taint;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::common::{
    deserialize_conditions, parse_nillable_duration, quantity_map_schema, DurationError,
    NodeClassReference, NodeSelectorRequirementWithMinValues, DURATION_PATTERN,
    NILLABLE_DURATION_PATTERN, REQUIREMENT_COMPARISON_ONE_INTEGER, REQUIREMENT_IN_NEEDS_VALUES,
    REQUIREMENT_MIN_VALUES_FIT,
};

/// NodePool condition: the NodePool passed validation.
pub const NODEPOOL_VALIDATION_SUCCEEDED: &str = "ValidationSucceeded";
/// NodePool condition: the referenced node class exists and is Ready.
pub const NODEPOOL_NODE_CLASS_READY: &str = "NodeClassReady";
/// NodePool condition: recent launches registered as nodes (false after repeated failures).
pub const NODEPOOL_NODE_REGISTRATION_HEALTHY: &str = "NodeRegistrationHealthy";

/// Desired state of a NodePool.
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "karpenter.sh",
    version = "v1",
    kind = "NodePool",
    derive = "PartialEq",
    plural = "nodepools",
    category = "karpenter",
    status = "NodePoolStatus",
    doc = "A template for the nodes an autoscaler may launch, with disruption rules and capacity limits.",
    printcolumn(
        name = "NodeClass",
        type_ = "string",
        json_path = ".spec.template.spec.nodeClassRef.name"
    ),
    printcolumn(name = "Nodes", type_ = "string", json_path = ".status.nodes"),
    printcolumn(
        name = "Ready",
        type_ = "string",
        json_path = r#".status.conditions[?(@.type=="Ready")].status"#
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    ),
    printcolumn(
        name = "Weight",
        type_ = "integer",
        json_path = ".spec.weight",
        priority = 1
    ),
    printcolumn(
        name = "CPU",
        type_ = "string",
        json_path = ".status.resources.cpu",
        priority = 1
    ),
    printcolumn(
        name = "Memory",
        type_ = "string",
        json_path = ".status.resources.memory",
        priority = 1
    )
)]
#[serde(rename_all = "camelCase")]
pub struct NodePoolSpec {
    /// What every NodeClaim launched from this pool starts from.
    pub template: NodeClaimTemplate,
    /// When and how fast nodes of this pool may be disrupted.
    #[serde(default)]
    pub disruption: Disruption,
    /// Upper bounds on the summed capacity of the pool's nodes (`cpu`, `memory`, `nodes`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "quantity_map_schema")]
    pub limits: Option<BTreeMap<String, Quantity>>,
    /// Pools with higher weight are tried first; unset counts as 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 100))]
    pub weight: Option<i32>,
}

/// Labels and annotations put on NodeClaims and nodes launched from a pool.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct TemplateMetadata {
    /// Labels every node of the pool gets; they also act as `In [value]` requirements.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(
        validation = Rule::new(r#"self.all(k, k in ["karpenter.sh/capacity-type", "karpenter.sh/nodepool"] || !k.find("^([^/]+)").endsWith("karpenter.sh"))"#).message(r#"label keys in the "karpenter.sh" domain are reserved"#),
        validation = Rule::new(r#"self.all(k, k != "karpenter.sh/nodepool")"#).message(r#"the "karpenter.sh/nodepool" label is set by the autoscaler"#),
        validation = Rule::new(r#"self.all(k, k != "kubernetes.io/hostname")"#).message(r#"the "kubernetes.io/hostname" label is reserved"#)
    )]
    pub labels: Option<BTreeMap<String, String>>,
    /// Annotations every node of the pool gets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<BTreeMap<String, String>>,
}

/// The NodeClaim template of a pool.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
pub struct NodeClaimTemplate {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<TemplateMetadata>,
    pub spec: NodeClaimTemplateSpec,
}

/// The NodeClaim spec fields a pool sets (resource requests come from the pods, not the pool).
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct NodeClaimTemplateSpec {
    /// Taints every node of the pool carries; pods must tolerate them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub taints: Vec<Taint>,
    /// Taints present only while a node starts up (removed by a daemon); pods need not tolerate
    /// them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub startup_taints: Vec<Taint>,
    /// Node selector requirements every node of the pool satisfies.
    #[schemars(length(max = 100))]
    #[x_kube(
        validation = Rule::new(REQUIREMENT_IN_NEEDS_VALUES).message("requirements with operator 'In' need at least one value"),
        validation = Rule::new(REQUIREMENT_COMPARISON_ONE_INTEGER).message("requirements with operator 'Gt', 'Lt', 'Gte' or 'Lte' take exactly one non-negative integer value"),
        validation = Rule::new(REQUIREMENT_MIN_VALUES_FIT).message("requirements with 'minValues' need at least that many values"),
        validation = Rule::new(r#"self.all(r, r.key != "karpenter.sh/nodepool")"#).message(r#"the "karpenter.sh/nodepool" key is set by the autoscaler"#),
        merge_strategy = ListMerge::Atomic
    )]
    pub requirements: Vec<NodeSelectorRequirementWithMinValues>,
    /// The provider node class (for joiner, an EC2NodeClass).
    #[x_kube(
        validation = Rule::new("self.group == oldSelf.group").message("nodeClassRef.group cannot change"),
        validation = Rule::new("self.kind == oldSelf.kind").message("nodeClassRef.kind cannot change")
    )]
    pub node_class_ref: NodeClassReference,
    /// Longest time a node may take to drain once its deletion starts; unset waits forever.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = DURATION_PATTERN))]
    pub termination_grace_period: Option<String>,
    /// Lifetime after which a node is replaced, or `Never`.
    #[serde(default = "default_expire_after")]
    #[schemars(regex(pattern = NILLABLE_DURATION_PATTERN))]
    pub expire_after: String,
}

fn default_expire_after() -> String {
    "720h".to_string()
}

/// Which nodes consolidation may remove or replace.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum ConsolidationPolicy {
    /// Only nodes without workload pods.
    WhenEmpty,
    /// Empty nodes and nodes whose pods fit elsewhere or on a cheaper node.
    #[default]
    WhenEmptyOrUnderutilized,
    /// As `WhenEmptyOrUnderutilized`, for moves whose share of the pool's savings is at least
    /// 1/`consolidationThreshold` of their share of the pool's disruption cost.
    Balanced,
}

/// The disruption methods a budget can be limited to.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum DisruptionReason {
    Underutilized,
    Empty,
    Drifted,
}

/// Disruption settings of a pool.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
#[x_kube(
    validation = Rule::new("!has(self.consolidationThreshold) || self.consolidationPolicy == 'Balanced'").message("'consolidationThreshold' needs 'consolidationPolicy: Balanced'")
)]
pub struct Disruption {
    /// How long a node must go without pod changes before consolidation considers it, or `Never`.
    #[serde(default = "default_consolidate_after")]
    #[schemars(regex(pattern = NILLABLE_DURATION_PATTERN))]
    pub consolidate_after: String,
    /// Which nodes consolidation may touch.
    #[serde(default)]
    pub consolidation_policy: ConsolidationPolicy,
    /// Under `Balanced`, k: a move passes when its share of the pool's disruption cost is at most
    /// k times its share of the pool's cost savings; 2 when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new("self > 0.0").message("consolidationThreshold must be positive"))]
    pub consolidation_threshold: Option<f64>,
    /// Caps on how many nodes may be disrupting at once; the smallest active cap wins.
    #[serde(default = "default_budgets")]
    #[schemars(length(max = 50))]
    #[x_kube(
        validation = Rule::new("self.all(b, has(b.schedule) == has(b.duration))").message("'schedule' and 'duration' must be set together"),
        merge_strategy = ListMerge::Atomic
    )]
    pub budgets: Vec<Budget>,
}

impl Default for Disruption {
    fn default() -> Self {
        Disruption {
            consolidate_after: default_consolidate_after(),
            consolidation_policy: ConsolidationPolicy::default(),
            consolidation_threshold: None,
            budgets: default_budgets(),
        }
    }
}

fn default_consolidate_after() -> String {
    "0s".to_string()
}

fn default_budgets() -> Vec<Budget> {
    vec![Budget {
        nodes: default_budget_nodes(),
        schedule: None,
        duration: None,
        reasons: None,
    }]
}

fn default_budget_nodes() -> String {
    "10%".to_string()
}

/// A limit on concurrent disruptions, optionally active only in a cron window.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Budget {
    /// Node count (`5`) or percentage of the pool's nodes (`10%`, rounded up).
    #[serde(default = "default_budget_nodes")]
    #[schemars(regex(pattern = r"^((100|[0-9]{1,2})%|[0-9]+)$"))]
    pub nodes: String,
    /// Cron expression (UTC) at which the budget becomes active; unset means always active.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(
        pattern = r"^(@(annually|yearly|monthly|weekly|daily|midnight|hourly))|((.+)\s(.+)\s(.+)\s(.+)\s(.+))$"
    ))]
    pub schedule: Option<String>,
    /// How long the budget stays active after each schedule hit (hours and minutes only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^((([0-9]+(h|m))|([0-9]+h[0-9]+m))(0s)?)$"))]
    pub duration: Option<String>,
    /// The disruption methods the budget applies to; unset means all of them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 50))]
    pub reasons: Option<Vec<DisruptionReason>>,
}

/// Observed state of a NodePool.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct NodePoolStatus {
    /// Summed capacity of the pool's nodes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "quantity_map_schema")]
    pub resources: Option<BTreeMap<String, Quantity>>,
    /// Number of nodes the pool currently owns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nodes: Option<i64>,
    /// The node class generation the pool last checked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_class_observed_generation: Option<i64>,
    /// Current conditions (`Ready`, `NodeClassReady`, `ValidationSucceeded`, ...).
    #[serde(
        default,
        deserialize_with = "deserialize_conditions",
        skip_serializing_if = "Vec::is_empty"
    )]
    #[x_kube(merge_strategy = ListMerge::Map(vec!["type".into()]))]
    pub conditions: Vec<Condition>,
}

impl NodePool {
    /// The template's `expireAfter`; `None` for `Never`.
    pub fn expire_after(&self) -> Result<Option<Duration>, DurationError> {
        parse_nillable_duration(&self.spec.template.spec.expire_after)
    }

    /// The disruption `consolidateAfter`; `None` for `Never`.
    pub fn consolidate_after(&self) -> Result<Option<Duration>, DurationError> {
        parse_nillable_duration(&self.spec.disruption.consolidate_after)
    }

    /// The weight, with unset meaning 0 as Karpenter does.
    pub fn weight(&self) -> i32 {
        self.spec.weight.unwrap_or(0)
    }
}

super::common::has_conditions!(NodePool, NodePoolStatus);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::common::HasConditions;
    use crate::api::common::RequirementOperator;

    const MINIMAL: &str = r#"
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: default}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
      - {key: karpenter.sh/capacity-type, operator: In, values: [spot]}
"#;

    #[test]
    fn minimal_nodepool_gets_karpenter_defaults() {
        let np: NodePool = serde_yaml_ng::from_str(MINIMAL).expect("minimal NodePool reads");
        assert_eq!(np.spec.template.spec.expire_after, "720h");
        assert_eq!(np.spec.disruption.consolidate_after, "0s");
        assert_eq!(
            np.spec.disruption.consolidation_policy,
            ConsolidationPolicy::WhenEmptyOrUnderutilized
        );
        assert_eq!(np.spec.disruption.budgets.len(), 1);
        assert_eq!(np.spec.disruption.budgets[0].nodes, "10%");
        assert_eq!(np.expire_after(), Ok(Some(Duration::from_secs(720 * 3600))));
        assert_eq!(np.consolidate_after(), Ok(Some(Duration::ZERO)));
        assert_eq!(np.weight(), 0);
        assert_eq!(
            np.spec.template.spec.requirements[0].operator,
            RequirementOperator::In
        );
    }

    #[test]
    fn budget_without_nodes_defaults_to_ten_percent() {
        let text = MINIMAL.to_string() + "  disruption:\n    budgets:\n    - {reasons: [Empty]}\n";
        let np: NodePool = serde_yaml_ng::from_str(&text).expect("NodePool reads");
        assert_eq!(np.spec.disruption.budgets[0].nodes, "10%");
        assert_eq!(
            np.spec.disruption.budgets[0].reasons,
            Some(vec![DisruptionReason::Empty])
        );
    }

    #[test]
    fn full_nodepool_round_trips() {
        let text = r#"
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: full}
spec:
  template:
    metadata:
      labels: {team: a}
      annotations: {note: x}
    spec:
      taints: [{key: gpu, value: "true", effect: NoSchedule}]
      startupTaints: [{key: init, effect: NoExecute}]
      requirements:
      - {key: node.kubernetes.io/instance-type, operator: In, values: [m5.large, m5.xlarge], minValues: 2}
      - {key: karpenter.k8s.aws/instance-cpu, operator: Gt, values: ["3"]}
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      expireAfter: Never
      terminationGracePeriod: 48h
  disruption:
    consolidateAfter: 1m
    consolidationPolicy: WhenEmpty
    budgets:
    - {nodes: "0", schedule: "0 9 * * mon-fri", duration: 8h, reasons: [Underutilized, Drifted]}
    - {nodes: "5"}
  limits: {cpu: "1000", memory: 1000Gi}
  weight: 50
status:
  resources: {cpu: "4"}
  nodes: 2
  nodeClassObservedGeneration: 3
  conditions:
  - {type: Ready, status: "True", reason: Ready, message: "", lastTransitionTime: "2026-01-01T00:00:00Z"}
"#;
        let np: NodePool = serde_yaml_ng::from_str(text).expect("full NodePool reads");
        assert_eq!(np.expire_after(), Ok(None));
        assert!(np.is_condition_true("Ready"));
        let json = serde_json::to_value(&np).expect("NodePool serializes");
        let back: NodePool = serde_json::from_value(json.clone()).expect("NodePool reads back");
        assert_eq!(back, np);
        assert_eq!(
            json["spec"]["template"]["spec"]["startupTaints"][0]["key"],
            "init"
        );
        assert_eq!(
            json["spec"]["disruption"]["budgets"][0]["schedule"],
            "0 9 * * mon-fri"
        );
    }
}

//! `karpenter.sh/v1 NodeClaim`: one requested node. The autoscaler creates it with the candidate
//! instance types as requirements; the launch controller fills in the status as the instance is
//! launched, registers as a node and becomes ready.

// kube-derive's `printcolumn(...)` lists repeat `type_ = "string"`, which clippy mistakes for
// duplicated attributes.
#![allow(clippy::duplicated_attributes)]

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::Taint;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::common::{
    deserialize_conditions, parse_nillable_duration, quantity_map_schema, DurationError,
    NodeClassReference, NodeSelectorRequirementWithMinValues, DURATION_PATTERN,
    NILLABLE_DURATION_PATTERN, REQUIREMENT_COMPARISON_ONE_INTEGER, REQUIREMENT_IN_NEEDS_VALUES,
    REQUIREMENT_MIN_VALUES_FIT,
};

/// NodeClaim condition: the cloud instance was created.
pub const NODECLAIM_LAUNCHED: &str = "Launched";
/// NodeClaim condition: a Node object for the instance joined the cluster.
pub const NODECLAIM_REGISTERED: &str = "Registered";
/// NodeClaim condition: the node is ready, startup taints are gone and resources are reported.
pub const NODECLAIM_INITIALIZED: &str = "Initialized";
/// NodeClaim condition: the node no longer matches its NodePool or node class.
pub const NODECLAIM_DRIFTED: &str = "Drifted";
/// NodeClaim condition: the node has gone `consolidateAfter` without pod changes.
pub const NODECLAIM_CONSOLIDATABLE: &str = "Consolidatable";
/// NodeClaim condition: the node's pods have been evicted during termination.
pub const NODECLAIM_DRAINED: &str = "Drained";
/// NodeClaim condition: volume attachments to the node are gone during termination.
pub const NODECLAIM_VOLUMES_DETACHED: &str = "VolumesDetached";
/// NodeClaim condition: the cloud instance is being terminated.
pub const NODECLAIM_INSTANCE_TERMINATING: &str = "InstanceTerminating";
/// NodeClaim condition: the NodeClaim, Node and instance agree with each other.
pub const NODECLAIM_CONSISTENT_STATE_FOUND: &str = "ConsistentStateFound";
/// NodeClaim condition: why the node is being disrupted (its reason is the method).
pub const NODECLAIM_DISRUPTION_REASON: &str = "DisruptionReason";

/// Desired state of a NodeClaim. Immutable once created, as in Karpenter: a different node means a
/// new NodeClaim.
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "karpenter.sh",
    version = "v1",
    kind = "NodeClaim",
    derive = "PartialEq",
    plural = "nodeclaims",
    category = "karpenter",
    status = "NodeClaimStatus",
    doc = "A request for one node: its candidate instance types, taints, node class and lifetime.",
    printcolumn(
        name = "Type",
        type_ = "string",
        json_path = r".metadata.labels.node\.kubernetes\.io/instance-type"
    ),
    printcolumn(
        name = "Capacity",
        type_ = "string",
        json_path = r".metadata.labels.karpenter\.sh/capacity-type"
    ),
    printcolumn(
        name = "Zone",
        type_ = "string",
        json_path = r".metadata.labels.topology\.kubernetes\.io/zone"
    ),
    printcolumn(name = "Node", type_ = "string", json_path = ".status.nodeName"),
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
        name = "ImageID",
        type_ = "string",
        json_path = ".status.imageID",
        priority = 1
    ),
    printcolumn(
        name = "ID",
        type_ = "string",
        json_path = ".status.providerID",
        priority = 1
    ),
    printcolumn(
        name = "NodePool",
        type_ = "string",
        json_path = r".metadata.labels.karpenter\.sh/nodepool",
        priority = 1
    ),
    printcolumn(
        name = "NodeClass",
        type_ = "string",
        json_path = ".spec.nodeClassRef.name",
        priority = 1
    ),
    printcolumn(
        name = "Drifted",
        type_ = "string",
        json_path = r#".status.conditions[?(@.type=="Drifted")].status"#,
        priority = 1
    )
)]
#[x_kube(validation = Rule::new("self == oldSelf").message("a NodeClaim's spec cannot change"))]
#[serde(rename_all = "camelCase")]
pub struct NodeClaimSpec {
    /// Taints the node carries.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub taints: Vec<Taint>,
    /// Taints present only while the node starts up.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub startup_taints: Vec<Taint>,
    /// Requirements the launched instance must satisfy; instance type and capacity type usually
    /// list every acceptable candidate, cheapest chosen at launch.
    #[schemars(length(max = 100))]
    #[x_kube(
        validation = Rule::new(REQUIREMENT_IN_NEEDS_VALUES).message("requirements with operator 'In' need at least one value"),
        validation = Rule::new(REQUIREMENT_COMPARISON_ONE_INTEGER).message("requirements with operator 'Gt', 'Lt', 'Gte' or 'Lte' take exactly one non-negative integer value"),
        validation = Rule::new(REQUIREMENT_MIN_VALUES_FIT).message("requirements with 'minValues' need at least that many values"),
        merge_strategy = ListMerge::Atomic
    )]
    pub requirements: Vec<NodeSelectorRequirementWithMinValues>,
    /// Resources the node must have room for (pod requests plus daemonset overhead).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<ResourceRequests>,
    /// The provider node class.
    pub node_class_ref: NodeClassReference,
    /// Longest time the node may take to drain once deletion starts; unset waits forever.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = DURATION_PATTERN))]
    pub termination_grace_period: Option<String>,
    /// Lifetime after which the node is replaced, or `Never`.
    #[serde(default = "default_expire_after")]
    #[schemars(regex(pattern = NILLABLE_DURATION_PATTERN))]
    pub expire_after: String,
}

fn default_expire_after() -> String {
    "720h".to_string()
}

/// The resources a NodeClaim asks for.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct ResourceRequests {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "quantity_map_schema")]
    pub requests: Option<BTreeMap<String, Quantity>>,
}

/// Observed state of a NodeClaim.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct NodeClaimStatus {
    /// Name of the Node registered for this claim.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_name: Option<String>,
    /// The cloud provider's id of the instance (`aws:///<zone>/<instance-id>`).
    #[serde(
        rename = "providerID",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub provider_id: Option<String>,
    /// The image the instance was launched from.
    #[serde(rename = "imageID", default, skip_serializing_if = "Option::is_none")]
    pub image_id: Option<String>,
    /// Resources of the instance.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "quantity_map_schema")]
    pub capacity: Option<BTreeMap<String, Quantity>>,
    /// Resources available to pods (capacity minus reservations and eviction thresholds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "quantity_map_schema")]
    pub allocatable: Option<BTreeMap<String, Quantity>>,
    /// Current conditions (`Launched`, `Registered`, `Initialized`, `Ready`, ...).
    #[serde(
        default,
        deserialize_with = "deserialize_conditions",
        skip_serializing_if = "Vec::is_empty"
    )]
    #[x_kube(merge_strategy = ListMerge::Map(vec!["type".into()]))]
    pub conditions: Vec<Condition>,
    /// When a pod last scheduled to or left the node; consolidation waits `consolidateAfter` from
    /// it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_pod_event_time: Option<Time>,
}

impl NodeClaim {
    /// The claim's `expireAfter`; `None` for `Never`.
    pub fn expire_after(&self) -> Result<Option<Duration>, DurationError> {
        parse_nillable_duration(&self.spec.expire_after)
    }

    /// The NodePool that owns this claim, from its `karpenter.sh/nodepool` label.
    pub fn nodepool(&self) -> Option<&str> {
        self.metadata
            .labels
            .as_ref()?
            .get(crate::domain::labels::NODEPOOL)
            .map(String::as_str)
    }

    /// The node name once registered.
    pub fn node_name(&self) -> Option<&str> {
        self.status.as_ref()?.node_name.as_deref()
    }

    /// The provider id once launched.
    pub fn provider_id(&self) -> Option<&str> {
        self.status.as_ref()?.provider_id.as_deref()
    }
}

super::common::has_conditions!(NodeClaim, NodeClaimStatus);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::common::HasConditions;

    fn at(seconds: i64) -> Time {
        Time(k8s_openapi::jiff::Timestamp::from_second(seconds).expect("valid timestamp"))
    }

    #[test]
    fn minimal_nodeclaim_gets_defaults() {
        let text = r#"
apiVersion: karpenter.sh/v1
kind: NodeClaim
metadata: {name: default-abc12}
spec:
  nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
  requirements:
  - {key: karpenter.sh/nodepool, operator: In, values: [default]}
"#;
        let nc: NodeClaim = serde_yaml_ng::from_str(text).expect("minimal NodeClaim reads");
        assert_eq!(nc.spec.expire_after, "720h");
        assert_eq!(nc.expire_after(), Ok(Some(Duration::from_secs(720 * 3600))));
        assert!(nc.status.is_none() && nc.condition(NODECLAIM_LAUNCHED).is_none());
    }

    #[test]
    fn full_nodeclaim_round_trips() {
        let text = r#"
apiVersion: karpenter.sh/v1
kind: NodeClaim
metadata:
  name: default-abc12
  labels: {karpenter.sh/nodepool: default}
spec:
  taints: [{key: gpu, effect: NoSchedule}]
  startupTaints: [{key: init, value: "1", effect: NoExecute}]
  requirements:
  - {key: node.kubernetes.io/instance-type, operator: In, values: [m5.large, c5.large], minValues: 1}
  resources: {requests: {cpu: 1500m, memory: 2Gi, pods: "3"}}
  nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
  expireAfter: 24h
  terminationGracePeriod: 1h
status:
  nodeName: ip-10-0-0-1.ec2.internal
  providerID: aws:///us-east-1a/i-0123456789abcdef0
  imageID: ami-0123456789abcdef0
  capacity: {cpu: "2", memory: 8Gi}
  allocatable: {cpu: 1930m, memory: 7Gi}
  lastPodEventTime: "2026-01-01T00:05:00Z"
  conditions:
  - {type: Launched, status: "True", reason: Launched, message: "", lastTransitionTime: "2026-01-01T00:00:00Z"}
"#;
        let nc: NodeClaim = serde_yaml_ng::from_str(text).expect("full NodeClaim reads");
        assert_eq!(nc.nodepool(), Some("default"));
        assert_eq!(
            nc.provider_id(),
            Some("aws:///us-east-1a/i-0123456789abcdef0")
        );
        let json = serde_json::to_value(&nc).expect("NodeClaim serializes");
        assert_eq!(
            json["status"]["providerID"],
            "aws:///us-east-1a/i-0123456789abcdef0"
        );
        let back: NodeClaim = serde_json::from_value(json).expect("NodeClaim reads back");
        assert_eq!(back, nc);
    }

    #[test]
    fn set_condition_through_the_trait_creates_status() {
        let mut nc = NodeClaim::new(
            "x",
            NodeClaimSpec {
                taints: vec![],
                startup_taints: vec![],
                requirements: vec![],
                resources: None,
                node_class_ref: NodeClassReference {
                    group: "karpenter.k8s.aws".into(),
                    kind: "EC2NodeClass".into(),
                    name: "default".into(),
                },
                termination_grace_period: None,
                expire_after: default_expire_after(),
            },
        );
        assert!(nc.set_condition(NODECLAIM_LAUNCHED, true, "Launched", "", at(5)));
        assert!(!nc.set_condition(NODECLAIM_LAUNCHED, true, "Launched", "", at(9)));
        assert!(nc.is_condition_true(NODECLAIM_LAUNCHED));
        assert_eq!(
            nc.condition(NODECLAIM_LAUNCHED)
                .map(|c| c.last_transition_time.clone()),
            Some(at(5))
        );
    }
}

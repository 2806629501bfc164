//! Pods as the decision core sees them: effective requests and the scheduling constraints that
//! restrict where they may run. Built from API objects by `crate::snapshot`.

use std::sync::Arc;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::labels::{
    tolerates_all, LabelSelector, Labels, NodeSelector, Requirement, Taint, Toleration,
};
use super::resources::Resources;
use super::volume::PodVolume;

/// `namespace/name`, the identity used in plans.
pub type PodKey = String;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum WhenUnsatisfiable {
    DoNotSchedule,
    ScheduleAnyway,
}

/// Whether a topology spread takes a node property into account when it decides which nodes
/// count (`nodeAffinityPolicy`, `nodeTaintsPolicy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum NodeInclusionPolicy {
    /// Only nodes the pod could use by that property count.
    Honor,
    /// Every node counts.
    Ignore,
}

impl NodeInclusionPolicy {
    /// Kubernetes' default for `nodeAffinityPolicy`.
    pub fn affinity_default() -> NodeInclusionPolicy {
        NodeInclusionPolicy::Honor
    }

    /// Kubernetes' default for `nodeTaintsPolicy`.
    pub fn taints_default() -> NodeInclusionPolicy {
        NodeInclusionPolicy::Ignore
    }

    pub fn honors(self) -> bool {
        self == NodeInclusionPolicy::Honor
    }
}

/// A topology spread constraint, with `matchLabelKeys` already merged into the selector.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct TopologySpread {
    pub max_skew: u32,
    pub topology_key: String,
    pub when_unsatisfiable: WhenUnsatisfiable,
    pub selector: LabelSelector,
    pub min_domains: Option<u32>,
    /// Honor: only nodes matching the pod's nodeSelector and required node affinity (not its
    /// volumes' selectors) are domains and have their pods counted.
    #[serde(default = "NodeInclusionPolicy::affinity_default")]
    pub node_affinity_policy: NodeInclusionPolicy,
    /// Honor: nodes with a NoSchedule or NoExecute taint the pod does not tolerate are left out.
    #[serde(default = "NodeInclusionPolicy::taints_default")]
    pub node_taints_policy: NodeInclusionPolicy,
}

impl TopologySpread {
    /// Whether a node with `labels` and `taints` counts for this spread of a pod with constraints
    /// `owner`: kube-scheduler's node inclusion policies.
    pub fn counts_node(&self, owner: &PodConstraints, labels: &Labels, taints: &[Taint]) -> bool {
        // the pod's own nodeSelector and required affinity: its volumes' selectors do not count
        let affinity_ok = !self.node_affinity_policy.honors()
            || (owner.node_selector.iter().all(|r| r.matches(labels))
                && owner.node_affinity.matches(labels));
        let taints_ok =
            !self.node_taints_policy.honors() || tolerates_all(&owner.tolerations, taints);
        affinity_ok && taints_ok
    }
}

/// A pod (anti-)affinity term. `namespaces` is already resolved: empty with `all_namespaces` false
/// means the pod's own namespace.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct PodAffinityTerm {
    pub selector: LabelSelector,
    pub namespaces: Vec<String>,
    pub all_namespaces: bool,
    pub topology_key: String,
}

impl PodAffinityTerm {
    /// Whether this term (written on a pod in `own_namespace`) selects `other`.
    pub fn selects(&self, own_namespace: &str, other: &Pod) -> bool {
        let ns_ok = self.all_namespaces
            || if self.namespaces.is_empty() {
                other.namespace == own_namespace
            } else {
                self.namespaces.iter().any(|n| n == &other.namespace)
            };
        ns_ok && self.selector.matches(&other.labels)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Weighted<T> {
    pub weight: i32,
    pub term: T,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct HostPort {
    pub ip: String,
    pub port: u16,
    pub protocol: String,
}

impl HostPort {
    /// Two host ports collide when port and protocol match and the IPs overlap (empty or 0.0.0.0 is
    /// all).
    pub fn conflicts(&self, other: &HostPort) -> bool {
        let wild = |ip: &str| ip.is_empty() || ip == "0.0.0.0";
        self.port == other.port
            && self.protocol == other.protocol
            && (wild(&self.ip) || wild(&other.ip) || self.ip == other.ip)
    }
}

/// Everything that decides where a pod may run, separate from its identity so identical pods
/// (replicas of one Deployment) compare equal and form one class.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct PodConstraints {
    pub namespace: String,
    pub labels: Labels,
    pub requests: Resources,
    pub node_selector: Vec<Requirement>,
    pub node_affinity: NodeSelector,
    pub preferred_node_affinity: Vec<Weighted<Vec<Requirement>>>,
    pub tolerations: Vec<Toleration>,
    pub spread: Vec<TopologySpread>,
    pub pod_affinity: Vec<PodAffinityTerm>,
    pub pod_anti_affinity: Vec<PodAffinityTerm>,
    pub preferred_pod_affinity: Vec<Weighted<PodAffinityTerm>>,
    pub preferred_pod_anti_affinity: Vec<Weighted<PodAffinityTerm>>,
    pub host_ports: Vec<HostPort>,
    /// The node selectors its volumes impose (a bound volume's node affinity, an unbound claim's
    /// allowed topologies), each to be matched. Kept apart from `node_affinity`: topology spread's
    /// `nodeAffinityPolicy` counts domains by the pod's own affinity only.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub volume_requirements: Vec<NodeSelector>,
    /// Why its volumes cannot be resolved (a missing claim, class or volume): the pod is
    /// unschedulable while this is set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume_error: Option<String>,
}

impl PodConstraints {
    /// nodeSelector, required node affinity and the volumes' node selectors together.
    pub fn node_matches(&self, labels: &Labels) -> bool {
        self.node_selector.iter().all(|r| r.matches(labels))
            && self.node_affinity.matches(labels)
            && self.volume_requirements.iter().all(|s| s.matches(labels))
    }

    /// Required node affinity and the volumes' node selectors as one selector: the terms of each
    /// ANDed (a cross product of the terms).
    pub fn required_terms(&self) -> NodeSelector {
        let mut all = self.node_affinity.clone();
        for sel in &self.volume_requirements {
            all = all.and(sel);
        }
        all
    }
}

/// The priority of `system-cluster-critical`; `system-node-critical` is above it.
pub const CRITICAL_PRIORITY: i32 = 2_000_000_000;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Pod {
    pub namespace: String,
    pub name: String,
    pub uid: String,
    /// Labels and constraints are shared, not copied, by clones of the pod: every decision step
    /// clones the cluster's pods (the snapshot from the controller's caches, the provisioning view,
    /// disruption what-ifs) and never changes either.
    #[serde(with = "shared")]
    pub labels: Arc<Labels>,
    #[serde(with = "shared")]
    pub constraints: Arc<PodConstraints>,
    /// `spec.nodeName`, when bound.
    pub node_name: Option<String>,
    /// Succeeded or Failed.
    pub terminal: bool,
    /// Has a deletionTimestamp.
    pub terminating: bool,
    pub owner_kind: Option<String>,
    pub owner_name: Option<String>,
    pub priority: i32,
    /// `controller.kubernetes.io/pod-deletion-cost`.
    pub deletion_cost: i32,
    /// `karpenter.sh/do-not-disrupt` as written (`"true"` or a duration).
    pub do_not_disrupt: Option<String>,
    /// RFC 3339 creation time, for Karpenter's ordering tie-break.
    pub created: Option<String>,
    /// RFC 3339 `status.startTime`: a `do-not-disrupt` duration runs from here.
    #[serde(default)]
    pub started: Option<String>,
    /// A static pod's mirror (`kubernetes.io/config.mirror`): it cannot be evicted or rescheduled.
    #[serde(default)]
    pub mirror: bool,
    /// The volumes it mounts through claims; their needs are resolved into `constraints`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub volumes: Vec<PodVolume>,
}

impl Pod {
    /// A pod built in code (benchmarks, simulated clusters, tests): namespace and labels from its
    /// constraints, unbound, unowned, everything else at Kubernetes' defaults.
    pub fn new(name: impl Into<String>, constraints: PodConstraints) -> Pod {
        Pod {
            namespace: constraints.namespace.clone(),
            name: name.into(),
            uid: String::new(),
            labels: Arc::new(constraints.labels.clone()),
            constraints: Arc::new(constraints),
            node_name: None,
            terminal: false,
            terminating: false,
            owner_kind: None,
            owner_name: None,
            priority: 0,
            deletion_cost: 0,
            do_not_disrupt: None,
            created: None,
            started: None,
            mirror: false,
            volumes: vec![],
        }
    }

    /// The same pod with a controller owner.
    pub fn owned_by(mut self, kind: &str, name: &str) -> Pod {
        self.owner_kind = Some(kind.to_string());
        self.owner_name = Some(name.to_string());
        self
    }

    pub fn key(&self) -> PodKey {
        format!("{}/{}", self.namespace, self.name)
    }

    pub fn requests(&self) -> &Resources {
        &self.constraints.requests
    }

    pub fn is_daemonset_pod(&self) -> bool {
        self.owner_kind.as_deref() == Some("DaemonSet")
    }

    /// Unbound, not terminal, not terminating and not a DaemonSet pod: joiner must find it a node.
    pub fn is_pending(&self) -> bool {
        self.node_name.is_none() && !self.terminal && !self.terminating && !self.is_daemonset_pod()
    }

    /// Whether evicting it moves it elsewhere: bound, not terminal, not a DaemonSet or mirror pod.
    /// Terminating pods are on their way out already (Karpenter keeps StatefulSet ones, which
    /// come back under the same name).
    pub fn is_reschedulable(&self) -> bool {
        self.node_name.is_some()
            && !self.terminal
            && !self.is_daemonset_pod()
            && !self.mirror
            && (!self.terminating || self.owner_kind.as_deref() == Some("StatefulSet"))
    }

    /// At system-cluster-critical or system-node-critical priority: drains move such pods last.
    pub fn is_critical(&self) -> bool {
        self.priority >= CRITICAL_PRIORITY
    }

    /// Bound and still holding room on its node.
    pub fn occupies_node(&self) -> bool {
        self.node_name.is_some() && !self.terminal
    }
}

/// Serde for an `Arc` as for its contents (serde's own needs its `rc` feature, and turning that on
/// would rebuild every crate that uses serde).
mod shared {
    use super::*;

    pub fn serialize<T: Serialize, S: Serializer>(
        value: &Arc<T>,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        T::serialize(value, serializer)
    }

    pub fn deserialize<'de, T: Deserialize<'de>, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Arc<T>, D::Error> {
        T::deserialize(deserializer).map(Arc::new)
    }
}

/// Serde for a list of `Arc`s as for a list of their contents.
pub(crate) mod shared_list {
    use super::*;

    pub fn serialize<T: Serialize, S: Serializer>(
        values: &[Arc<T>],
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(values.iter().map(|v| &**v))
    }

    pub fn deserialize<'de, T: Deserialize<'de>, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Vec<Arc<T>>, D::Error> {
        Vec::<T>::deserialize(deserializer).map(|v| v.into_iter().map(Arc::new).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::labels::TaintEffect;

    const SPREAD_JSON: &str = r#"{"max_skew": 1, "topology_key": "topology.kubernetes.io/zone",
        "when_unsatisfiable": "DoNotSchedule",
        "selector": {"match_labels": {}, "match_expressions": []}, "min_domains": null}"#;

    fn in_values(key: &str, value: &str) -> Requirement {
        Requirement::new(key, "In", vec![value.to_string()], None).expect("valid requirement")
    }

    #[test]
    fn a_spread_written_before_the_policies_loads_with_kubernetes_defaults() {
        let s: TopologySpread = serde_json::from_str(SPREAD_JSON).expect("loads");
        assert_eq!(s.node_affinity_policy, NodeInclusionPolicy::Honor);
        assert_eq!(s.node_taints_policy, NodeInclusionPolicy::Ignore);
    }

    #[test]
    fn the_policies_decide_which_nodes_count() {
        let mut s: TopologySpread = serde_json::from_str(SPREAD_JSON).expect("loads");
        let owner = PodConstraints {
            node_selector: vec![in_values("team", "web")],
            // a volume's zone is no part of the pod's own affinity
            volume_requirements: vec![NodeSelector {
                terms: vec![vec![in_values("topology.kubernetes.io/zone", "a")]],
            }],
            ..Default::default()
        };
        let web: Labels = [("team".to_string(), "web".to_string())].into();
        let other: Labels = [("team".to_string(), "other".to_string())].into();
        let taint = Taint {
            key: "dedicated".into(),
            value: "db".into(),
            effect: TaintEffect::NoSchedule,
        };
        let tainted = [taint];
        assert!(s.counts_node(&owner, &web, &tainted));
        assert!(!s.counts_node(&owner, &other, &[]));
        s.node_affinity_policy = NodeInclusionPolicy::Ignore;
        s.node_taints_policy = NodeInclusionPolicy::Honor;
        assert!(s.counts_node(&owner, &other, &[]));
        assert!(!s.counts_node(&owner, &web, &tainted));
    }
}

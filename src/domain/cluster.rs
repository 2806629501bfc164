//! The cluster objects other than pods: nodes, NodeClaims, NodePools, EC2NodeClasses, DaemonSets,
//! PodDisruptionBudgets and joiner's cost weights, collected into one [`ClusterSnapshot`].

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::labels::{LabelSelector, Labels, Requirement, Taint};
use super::pod::{Pod, PodConstraints};
use super::resources::Resources;
use super::weights::CostWeights;

/// A node that exists (registered with the API server).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Node {
    pub name: String,
    pub labels: Labels,
    pub taints: Vec<Taint>,
    pub capacity: Resources,
    pub allocatable: Resources,
    /// `spec.unschedulable` (cordoned).
    pub unschedulable: bool,
    pub ready: bool,
    pub provider_id: Option<String>,
    pub created: Option<String>,
    pub annotations: Labels,
    /// Has a deletionTimestamp.
    #[serde(default)]
    pub deleting: bool,
}

impl Node {
    /// A registered, Ready, schedulable node without taints (builders and tests).
    pub fn new(name: &str, labels: Labels, capacity: Resources, allocatable: Resources) -> Node {
        Node {
            name: name.to_string(),
            labels,
            taints: vec![],
            capacity,
            allocatable,
            unschedulable: false,
            ready: true,
            provider_id: None,
            created: None,
            annotations: Labels::new(),
            deleting: false,
        }
    }

    pub fn nodepool(&self) -> Option<&str> {
        self.labels.get(super::labels::NODEPOOL).map(String::as_str)
    }
}

/// A Karpenter NodeClaim (launched or in flight).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeClaim {
    pub name: String,
    pub nodepool: Option<String>,
    pub labels: Labels,
    pub requirements: Vec<Requirement>,
    pub node_name: Option<String>,
    pub provider_id: Option<String>,
    pub capacity: Resources,
    pub allocatable: Resources,
    pub deleting: bool,
    /// RFC 3339 creation time: expiration runs from here.
    #[serde(default)]
    pub created: Option<String>,
    /// Condition `Initialized` is True.
    #[serde(default)]
    pub initialized: bool,
    /// Condition `Drifted` is True (set by Karpenter for drift joiner cannot see, e.g. an AMI).
    #[serde(default)]
    pub drifted: bool,
    /// `status.lastPodEventTime`: consolidateAfter runs from here.
    #[serde(default)]
    pub last_pod_event: Option<String>,
    /// `spec.expireAfter` as written (`720h`, `Never`).
    #[serde(default)]
    pub expire_after: Option<String>,
    /// The `karpenter.sh/nodepool-hash` annotation: the NodePool template hash it was launched
    /// from.
    #[serde(default)]
    pub nodepool_hash: Option<String>,
}

/// Which nodes consolidation may remove or replace (`spec.disruption.consolidationPolicy`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ConsolidationPolicy {
    /// Only nodes without workload pods.
    WhenEmpty,
    /// Any node whose pods fit elsewhere or on a cheaper node, for any positive saving.
    #[default]
    WhenEmptyOrUnderutilized,
    /// As `WhenEmptyOrUnderutilized`, but a move must save at least `1/k` of its NodePool's cost
    /// for each unit share of the NodePool's disruption cost it causes (k is
    /// [`Disruption::consolidation_threshold`]).
    Balanced,
}

impl ConsolidationPolicy {
    pub const ALL: [ConsolidationPolicy; 3] = [
        ConsolidationPolicy::WhenEmpty,
        ConsolidationPolicy::WhenEmptyOrUnderutilized,
        ConsolidationPolicy::Balanced,
    ];

    /// The name as written in a NodePool.
    pub fn as_str(self) -> &'static str {
        match self {
            ConsolidationPolicy::WhenEmpty => "WhenEmpty",
            ConsolidationPolicy::WhenEmptyOrUnderutilized => "WhenEmptyOrUnderutilized",
            ConsolidationPolicy::Balanced => "Balanced",
        }
    }

    /// The policy of that name, if any.
    pub fn parse(name: &str) -> Option<ConsolidationPolicy> {
        Self::ALL.into_iter().find(|p| p.as_str() == name)
    }
}

impl std::fmt::Display for ConsolidationPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Karpenter's default `consolidationThreshold` (k) under `Balanced`.
pub const DEFAULT_CONSOLIDATION_THRESHOLD: f64 = 2.0;

/// The disruption block of a NodePool, kept for the disruption decisions.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Disruption {
    pub consolidation_policy: ConsolidationPolicy,
    /// `consolidationThreshold` (k) as written; only set under `Balanced`, where absent means
    /// [`DEFAULT_CONSOLIDATION_THRESHOLD`].
    #[serde(default)]
    pub consolidation_threshold: Option<f64>,
    /// `consolidateAfter` as written (`30s`, `Never`).
    pub consolidate_after: Option<String>,
    pub budgets: Vec<Budget>,
}

impl Disruption {
    /// k when the policy is `Balanced`, `None` under the other policies.
    pub fn balanced_threshold(&self) -> Option<f64> {
        (self.consolidation_policy == ConsolidationPolicy::Balanced).then(|| {
            self.consolidation_threshold
                .unwrap_or(DEFAULT_CONSOLIDATION_THRESHOLD)
        })
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Budget {
    pub nodes: String,
    pub reasons: Vec<String>,
    pub schedule: Option<String>,
    pub duration: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodePool {
    pub name: String,
    /// nil is 0; higher weights are tried first.
    pub weight: i32,
    pub requirements: Vec<Requirement>,
    pub labels: Labels,
    pub taints: Vec<Taint>,
    pub startup_taints: Vec<Taint>,
    /// `spec.limits`, including `nodes` when set.
    pub limits: Resources,
    pub node_class: Option<String>,
    pub expire_after: Option<String>,
    /// `spec.template.spec.terminationGracePeriod` as written: how long a drain may be held back
    /// (PodDisruptionBudgets, do-not-disrupt) before the node's pods are deleted; `None` waits.
    #[serde(default)]
    pub termination_grace_period: Option<String>,
    pub disruption: Disruption,
    /// The `karpenter.sh/nodepool-hash` annotation: the hash of the current template. A NodeClaim
    /// carrying another hash has drifted.
    #[serde(default)]
    pub hash: Option<String>,
}

impl NodePool {
    /// A NodePool with no requirements, labels, taints or limits: every offering of the catalog.
    pub fn unconstrained(name: &str) -> NodePool {
        NodePool {
            name: name.into(),
            weight: 0,
            requirements: vec![],
            labels: Labels::new(),
            taints: vec![],
            startup_taints: vec![],
            limits: Resources::new(),
            node_class: None,
            expire_after: None,
            termination_grace_period: None,
            disruption: Disruption::default(),
            hash: None,
        }
    }
}

/// The kubelet settings of an EC2NodeClass that change allocatable.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct KubeletSettings {
    pub max_pods: Option<u32>,
    pub pods_per_core: Option<u32>,
    pub kube_reserved: Resources,
    pub system_reserved: Resources,
    /// `evictionHard` signals as written (`memory.available: 5%` or `500Mi`).
    pub eviction_hard: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NodeClass {
    pub name: String,
    pub kubelet: KubeletSettings,
    /// Zones its subnets are in (`status.subnets`), when resolved: nodes can only launch there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zones: Option<Vec<String>>,
    /// Size of the volume the kubelet's root filesystem, and so ephemeral storage, lives on, when
    /// the class's block device mappings or AMI family decide it; None is Karpenter's default
    /// (20Gi), which catalogs state per type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ephemeral_volume: Option<super::Quantity>,
    /// `instanceStorePolicy: RAID0`: on types with NVMe instance store, ephemeral storage is the
    /// whole array.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub instance_store_raid0: bool,
    /// EBS volumes a node is launched with besides its root volume; each takes an attachment
    /// slot that claims cannot use.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub launch_data_volumes: u32,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// A DaemonSet, reduced to the pod its template would create on each matching node.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DaemonSet {
    pub namespace: String,
    pub name: String,
    pub pod: PodConstraints,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PodDisruptionBudget {
    pub namespace: String,
    pub name: String,
    pub selector: LabelSelector,
    pub min_available: Option<String>,
    pub max_unavailable: Option<String>,
    /// `status.disruptionsAllowed`, when the controller has reported it.
    pub disruptions_allowed: Option<i32>,
}

impl PodDisruptionBudget {
    /// A `minAvailable` or `maxUnavailable` value as a pod count: an integer, or a percentage of
    /// `total` rounded up (as the disruption controller rounds). None when it is neither.
    pub fn count_of(value: &str, total: usize) -> Option<usize> {
        match value.strip_suffix('%') {
            Some(pct) => pct
                .parse::<usize>()
                .ok()
                .map(|pct| (total * pct).div_ceil(100)),
            None => value.parse::<usize>().ok(),
        }
    }
}

/// Everything the decision core reads about a cluster, free of API types.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ClusterSnapshot {
    /// Pods and nodes are shared, not copied, by clones of the snapshot (the provisioning view,
    /// disruption what-ifs) and with the controller's caches: a change to one copies that one
    /// (`Arc::make_mut`).
    #[serde(with = "super::pod::shared_list")]
    pub pods: Vec<Arc<Pod>>,
    #[serde(with = "super::pod::shared_list")]
    pub nodes: Vec<Arc<Node>>,
    pub node_claims: Vec<NodeClaim>,
    pub nodepools: Vec<NodePool>,
    pub node_classes: Vec<NodeClass>,
    pub daemonsets: Vec<DaemonSet>,
    pub pdbs: Vec<PodDisruptionBudget>,
    /// PersistentVolumes, claims, StorageClasses and CSINode limits.
    #[serde(default, skip_serializing_if = "super::volume::Storage::is_empty")]
    pub storage: super::volume::Storage,
    pub weights: CostWeights,
    /// Objects skipped while reading, one line each.
    pub warnings: Vec<String>,
}

impl ClusterSnapshot {
    pub fn pending_pods(&self) -> impl Iterator<Item = &Pod> {
        self.pods.iter().map(|p| &**p).filter(|p| p.is_pending())
    }

    pub fn node_class(&self, name: Option<&str>) -> Option<&NodeClass> {
        name.and_then(|n| self.node_classes.iter().find(|c| c.name == n))
    }

    /// The EC2NodeClass `pool` references when the snapshot lacks it: no node can be launched for
    /// such a pool (Karpenter's NodeClassReady=False), so it gets none planned. A snapshot without
    /// any EC2NodeClass (an offline what-if, a synthetic workload) is taken to have left them out,
    /// not to lack them, and its pools are planned as if their classes existed.
    pub fn missing_node_class<'p>(&self, pool: &'p NodePool) -> Option<&'p str> {
        let name = pool.node_class.as_deref()?;
        (!self.node_classes.is_empty() && self.node_class(Some(name)).is_none()).then_some(name)
    }
}

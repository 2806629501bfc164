//! Plans are values: what to launch, where each pending pod goes, what cannot be placed and why,
//! and how good the answer is. The JSON form is documented in docs/plan.md.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::catalog::CapacityType;

/// Which algorithm produced a plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Strategy {
    /// Column generation over node patterns, then a HiGHS integer solve.
    Milp,
    /// Karpenter's first-fit-decreasing heuristic, the baseline.
    Greedy,
}

/// An offering a node may be launched as.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OfferingRef {
    pub instance_type: String,
    pub zone: String,
    pub capacity_type: CapacityType,
    pub price: f64,
}

/// A node to launch.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NewNode {
    pub id: String,
    pub nodepool: String,
    pub instance_type: String,
    pub zone: String,
    pub capacity_type: CapacityType,
    pub price: f64,
    pub labels: BTreeMap<String, String>,
    /// Node allocatable (capacity less system reservations; DaemonSet pods not subtracted), as
    /// quantity strings.
    pub allocatable: BTreeMap<String, String>,
    pub pods: Vec<String>,
    /// Other offerings that hold the same pods, cheapest first, for the executor's fallback.
    pub fallbacks: Vec<OfferingRef>,
}

/// Pending pods bound to a node that already exists.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExistingPlacement {
    pub node: String,
    pub pods: Vec<String>,
}

/// Why a pod cannot be placed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum UnschedulableReason {
    /// No NodePool and offering satisfy its requirements and tolerations.
    NoCompatibleOffering,
    /// It needs more than the largest compatible instance type offers.
    LargerThanAnyType,
    /// NodePool limits leave no room for it.
    NodepoolLimit,
    /// Topology spread or pod (anti-)affinity cannot be met.
    Topology,
    /// A host port it needs is taken on every candidate node.
    HostPort,
    /// NodePool minValues cannot be met.
    MinValues,
    /// The solver left it unplaced within its limits.
    SolverLimit,
    /// Its volumes cannot be resolved (a missing claim, class or volume), or no node in the zones
    /// they allow can take it.
    Volume,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Unschedulable {
    pub pod: String,
    pub reason: UnschedulableReason,
    pub message: String,
}

/// How a plan was obtained: `solver.status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PlanStatus {
    /// Within the gap target of the certified lower bound.
    Optimal,
    /// The time limit cut the search; the plan is feasible.
    TimeLimit,
    /// The search ended without certifying the gap target.
    Feasible,
    /// The greedy strategy's plan.
    Greedy,
    /// The greedy baseline's plan, made because the MILP failed.
    FallbackGreedy,
}

impl PlanStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            PlanStatus::Optimal => "optimal",
            PlanStatus::TimeLimit => "time-limit",
            PlanStatus::Feasible => "feasible",
            PlanStatus::Greedy => "greedy",
            PlanStatus::FallbackGreedy => "fallback-greedy",
        }
    }
}

impl std::fmt::Display for PlanStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How the plan was obtained and how far from optimal it may be.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SolverReport {
    pub status: PlanStatus,
    pub seconds: f64,
    pub pod_classes: usize,
    pub variables: usize,
    pub constraints: usize,
    /// (objective - lower_bound) / objective.
    pub gap: f64,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    pub strategy: Strategy,
    pub nodes: Vec<NewNode>,
    pub existing: Vec<ExistingPlacement>,
    pub unschedulable: Vec<Unschedulable>,
    /// Sum of the new nodes' prices, $/h.
    pub cost_per_hour: f64,
    /// Cost plus preference penalties (not counting unplaced pods), $/h.
    pub objective: f64,
    /// A certified lower bound on the objective of any plan that places the same pods.
    pub lower_bound: f64,
    pub solver: SolverReport,
    /// The zones the plan fixes for volumes not yet provisioned (WaitForFirstConsumer claims):
    /// each is created where its first pod's node is.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub volumes: Vec<VolumeZone>,
}

/// An unbound claim whose volume the plan places in a zone.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct VolumeZone {
    /// `namespace/name` of the PersistentVolumeClaim.
    pub claim: String,
    /// The pod whose node decides it.
    pub pod: String,
    pub zone: String,
}

impl Plan {
    /// Where the plan puts each pod: a new node's id or an existing node's name.
    pub fn destinations(&self) -> BTreeMap<&str, &str> {
        let new = self
            .nodes
            .iter()
            .flat_map(|n| n.pods.iter().map(move |p| (p.as_str(), n.id.as_str())));
        let existing = self
            .existing
            .iter()
            .flat_map(|e| e.pods.iter().map(move |p| (p.as_str(), e.node.as_str())));
        new.chain(existing).collect()
    }
}

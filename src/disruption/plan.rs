//! Disruption plans are values, like provisioning plans: which nodes to delete, what to launch in
//! their place, where each evicted pod goes, what it saves and costs, and which nodes may not be
//! touched and why. The JSON form is documented in docs/disruption.md.

use serde::{Deserialize, Serialize};

use super::budget::Reason;
use super::DisruptionStrategy;
use crate::optimizer::NewNode;

/// One pod leaving a deleted node. `to` is an existing node's name or a launched node's id.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Move {
    pub pod: String,
    pub from: String,
    pub to: String,
}

/// Nodes deleted together with the nodes launched for their pods. Actions are independent: the
/// executor may carry out any subset, in any order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Action {
    pub reason: Reason,
    pub delete: Vec<String>,
    pub launch: Vec<NewNode>,
    pub moves: Vec<Move>,
    /// Hourly price of the deleted nodes less that of the launched ones, $/h.
    pub savings_per_hour: f64,
    /// The disruption cost of evicting the pods and draining the nodes, in the objective's $/h
    /// units.
    pub disruption_cost: f64,
}

/// A node that is not disrupted for a reason other than "keeping it is cheaper".
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Blocked {
    pub node: String,
    pub reason: String,
}

/// Disruptions a NodePool's budgets allow for a reason at decision time.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BudgetUse {
    pub nodepool: String,
    pub reason: Reason,
    pub allowed: usize,
    pub planned: usize,
}

/// How a disruption plan was decided: `solver.status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DisruptionStatus {
    /// The hourly cost after is within the gap target of the certified lower bound.
    Optimal,
    /// The time limit cut the selection model short.
    TimeLimit,
    /// Decided without certifying the gap target.
    Feasible,
    /// The Karpenter-faithful strategy's plan.
    Baseline,
    /// No node was a candidate for any disruption.
    NoCandidates,
    /// The selection model failed and Karpenter's consolidation rules decided instead.
    FallbackBaseline,
}

impl DisruptionStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            DisruptionStatus::Optimal => "optimal",
            DisruptionStatus::TimeLimit => "time-limit",
            DisruptionStatus::Feasible => "feasible",
            DisruptionStatus::Baseline => "baseline",
            DisruptionStatus::NoCandidates => "no-candidates",
            DisruptionStatus::FallbackBaseline => "fallback-baseline",
        }
    }
}

impl std::fmt::Display for DisruptionStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How the plan was decided and how good it is.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DisruptionReport {
    pub status: DisruptionStatus,
    /// The strategy that decided the plan (`baseline` when the MILP fell back to it).
    pub strategy: DisruptionStrategy,
    pub seconds: f64,
    pub candidates: usize,
    pub pod_classes: usize,
    pub variables: usize,
    pub constraints: usize,
    /// Relative gap of the selection model's integer solve, when one ran.
    pub mip_gap: Option<f64>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DisruptionPlan {
    pub actions: Vec<Action>,
    /// Hourly price of every node in the snapshot, $/h.
    pub cost_before_per_hour: f64,
    /// Hourly price once every action is carried out, $/h.
    pub cost_after_per_hour: f64,
    pub savings_per_hour: f64,
    /// Sum of the actions' disruption costs.
    pub disruption_cost: f64,
    /// A certified lower bound on the hourly price of any cluster that keeps the nodes that may not
    /// be disrupted and runs every pod that runs now, whatever the budgets allow.
    pub lower_bound: f64,
    pub blocked: Vec<Blocked>,
    pub budgets: Vec<BudgetUse>,
    /// SHA-256 over the inputs the plan was decided on (see docs/disruption.md); the executor
    /// recomputes it after its validation delay and drops the plan when it changed.
    pub fingerprint: String,
    pub solver: DisruptionReport,
}

impl DisruptionPlan {
    pub fn evictions(&self) -> usize {
        self.actions.iter().map(|a| a.moves.len()).sum()
    }

    pub fn deleted_nodes(&self) -> usize {
        self.actions.iter().map(|a| a.delete.len()).sum()
    }
}

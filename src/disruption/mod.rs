//! Disruption decisions: which running nodes to delete or replace, and with what, on the same
//! formulation as provisioning.
//!
//! Flow: `candidates` reads every managed node (price, pods, eviction cost, drift, expiry, what
//! blocks it) and `budget` the NodePools' disruption budgets at `now`. Expired nodes are taken
//! unconditionally; empty and drifted nodes within their budgets next. The remaining consolidation
//! candidates go to `model`, a mixed-integer program that keeps or removes each of them at once
//! (m->n, including one node split into several). The cluster that the chosen removals leave is
//! then planned by the provisioning core (`crate::optimizer`), which enforces every scheduling
//! rule, and `actions` turns that plan into independent actions. `baseline` is Karpenter's own
//! consolidation, the yardstick; `edit` applies decisions to snapshots. Everything here is pure: a
//! snapshot, a catalog and a clock in, a [`DisruptionPlan`] out.

pub mod actions;
pub mod balanced;
pub mod baseline;
pub mod budget;
pub mod candidates;
pub mod edit;
pub mod fingerprint;
mod held;
pub mod model;
pub mod plan;
pub mod timing;

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use crate::catalog::Catalog;
use crate::domain::ClusterSnapshot;
use crate::optimizer::{SolveSettings, SolverFault, Strategy};

use budget::BudgetTable;
pub use budget::Reason;
use candidates::{Candidates, NodeInfo};
pub use plan::{
    Action, Blocked, BudgetUse, DisruptionPlan, DisruptionReport, DisruptionStatus, Move,
};
use timing::Timestamp;

/// Which decision procedure to run.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize, clap::ValueEnum,
)]
#[serde(rename_all = "lowercase")]
pub enum DisruptionStrategy {
    /// The global selection model, then the provisioning core for the chosen removals.
    Milp,
    /// Karpenter's emptiness, multi-node and single-node consolidation.
    Baseline,
}

#[derive(Debug, Clone, PartialEq)]
pub struct DisruptionSettings {
    pub strategy: DisruptionStrategy,
    /// The decision's clock: budgets' schedules, consolidateAfter, expiry and do-not-disrupt read
    /// it.
    pub now: Timestamp,
    /// Limit for the whole decision.
    pub time_limit: Duration,
    pub gap: f64,
    pub threads: u32,
    /// A spot node is replaced by spot capacity only when at least this many cheaper spot instance
    /// types could be launched (Karpenter: 15).
    pub spot_to_spot_min_types: usize,
    /// Whether consolidation may replace spot nodes with spot capacity at all (Karpenter's
    /// SpotToSpotConsolidation feature gate); off, such a replacement is refused.
    pub spot_to_spot: bool,
    pub max_fallbacks: usize,
    /// Whether to compute the certified lower bound. Without it the plan's `lower_bound` is 0 and
    /// its status is never `optimal`; the simulator skips it to spend its time on decisions.
    pub lower_bound: bool,
    /// A HiGHS failure to inject into every solve of the decision (fault-injection tests).
    pub fault: Option<SolverFault>,
    /// Room that voluntary consolidation leaves free for workloads expected back at a recent
    /// peak (`recallMinutes`; the caller's trend knows them). Empty holds nothing.
    pub held: crate::domain::Resources,
}

impl DisruptionSettings {
    pub fn new(now: Timestamp) -> Self {
        DisruptionSettings {
            strategy: DisruptionStrategy::Milp,
            now,
            time_limit: Duration::from_secs(5),
            gap: 0.01,
            threads: 1,
            spot_to_spot_min_types: 15,
            spot_to_spot: true,
            max_fallbacks: 20,
            lower_bound: true,
            fault: None,
            held: crate::domain::Resources::new(),
        }
    }

    /// The provisioning solve's settings for `seconds`.
    pub(crate) fn solve(&self, seconds: f64, strategy: Strategy) -> SolveSettings {
        SolveSettings {
            strategy,
            time_limit: Duration::from_secs_f64(seconds.max(0.2)),
            gap: self.gap,
            threads: self.threads,
            max_fallbacks: self.max_fallbacks,
            // disruption reports its own bound; the provisioning bound of a sub-problem is not
            // needed
            lower_bound: false,
            fault: self.fault,
            searches: 1,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum DisruptionError {
    #[error("invalid settings: {0}")]
    Settings(String),
    #[error(transparent)]
    Optimizer(#[from] crate::optimizer::OptimizerError),
    /// The selection model failed (HiGHS error, no solution in time); `consolidate` falls back.
    #[error("selection model: {0}")]
    Solver(#[from] crate::optimizer::milp::MilpError),
}

/// The nodes every strategy starts from: forced and budgeted removals decided before consolidation.
pub(crate) struct Triage<'a> {
    pub cands: &'a Candidates,
    /// Removed regardless of consolidation, with the reason.
    pub forced: Vec<(&'a NodeInfo, Reason)>,
    /// Candidates for Underutilized consolidation.
    pub open: Vec<&'a NodeInfo>,
    /// Underutilized disruptions each pool still allows.
    pub underutilized: BTreeMap<String, usize>,
    pub blocked: Vec<Blocked>,
    pub budgets: Vec<BudgetUse>,
    /// The Balanced NodePools' thresholds and totals.
    pub balanced: balanced::Balanced,
}

/// Plans the disruptions for `snapshot`.
pub fn consolidate(
    snapshot: &ClusterSnapshot,
    catalog: &Catalog,
    settings: &DisruptionSettings,
) -> Result<DisruptionPlan, DisruptionError> {
    if settings.time_limit.is_zero() || !(0.0..1.0).contains(&settings.gap) || settings.threads == 0
    {
        return Err(DisruptionError::Settings(
            "time limit, gap in [0, 1) and threads >= 1 are required".into(),
        ));
    }
    let start = Instant::now();
    let cands = Candidates::build(snapshot, catalog, settings.now);
    // joiner lets a new node settle before consolidating it; Karpenter's baseline does not
    let settle = (settings.strategy == DisruptionStrategy::Milp)
        .then(|| Duration::from_secs_f64(snapshot.weights.settle_minutes.max(0.0) * 60.0))
        .filter(|d| !d.is_zero());
    let triage = triage(snapshot, &cands, settings.now, settle);
    let mut plan = match settings.strategy {
        DisruptionStrategy::Milp => {
            match actions::decide(snapshot, catalog, settings, &triage, start) {
                Err(DisruptionError::Solver(e)) => {
                    tracing::warn!(error = %e, "selection model failed; falling back to karpenter's consolidation");
                    let mut plan = baseline::decide(snapshot, catalog, settings, &triage, start)?;
                    plan.solver.status = DisruptionStatus::FallbackBaseline;
                    plan.solver.notes.insert(0, format!("selection model failed ({e}); karpenter's consolidation decided instead"));
                    plan
                }
                other => other?,
            }
        }
        DisruptionStrategy::Baseline => {
            baseline::decide(snapshot, catalog, settings, &triage, start)?
        }
    };
    plan.fingerprint = fingerprint::of(snapshot, catalog, &plan);
    plan.solver.seconds = start.elapsed().as_secs_f64();
    Ok(plan)
}

/// Expired nodes go unconditionally; then, pool by pool and within budgets, empty nodes (most
/// expensive first) and drifted nodes (empty first, then oldest). What is left and allowed is open
/// to consolidation. A node disrupted for one reason uses up the budget of every other reason.
/// With `settle`, a node younger than it is left out of consolidation (empty or underutilized).
fn triage<'a>(
    snapshot: &ClusterSnapshot,
    cands: &'a Candidates,
    now: Timestamp,
    settle: Option<Duration>,
) -> Triage<'a> {
    let table = BudgetTable::build(snapshot, now);
    let mut blocked = cands.unmanaged.clone();
    if let Some(settle) = settle {
        for n in cands
            .nodes
            .iter()
            .filter(|n| settling(n, settle) && !n.expired)
        {
            blocked.push(Blocked {
                node: n.name.clone(),
                reason: format!(
                    "launched {} min ago, settling for settleMinutes {}",
                    n.age.unwrap_or_default().as_secs() / 60,
                    settle.as_secs_f64() / 60.0
                ),
            });
        }
    }
    let mut forced: Vec<(&NodeInfo, Reason)> = Vec::new();
    let mut taken: BTreeMap<String, usize> = BTreeMap::new();
    let mut planned: BTreeMap<(String, Reason), usize> = BTreeMap::new();
    for n in cands.nodes.iter().filter(|n| n.expired) {
        forced.push((n, Reason::Expired));
        *taken.entry(n.pool.clone()).or_default() += 1;
    }
    let gone = |forced: &Vec<(&NodeInfo, Reason)>, n: &NodeInfo| {
        forced.iter().any(|(f, _)| f.name == n.name)
    };
    let settled = |n: &NodeInfo| settle.is_none_or(|s| !settling(n, s));
    let mut empty: Vec<&NodeInfo> = cands
        .nodes
        .iter()
        .filter(|n| {
            n.block.is_none() && n.consolidatable && n.empty() && n.drift.is_none() && settled(n)
        })
        .collect();
    empty.sort_by(|a, b| b.price.total_cmp(&a.price).then(a.name.cmp(&b.name)));
    let mut drifted: Vec<&NodeInfo> = cands
        .nodes
        .iter()
        .filter(|n| n.block.is_none() && n.drift.is_some())
        .collect();
    drifted.sort_by_key(|n| {
        (
            !n.empty(),
            snapshot.nodes[n.node].created.clone(),
            n.name.clone(),
        )
    });
    for (list, reason) in [(empty, Reason::Empty), (drifted, Reason::Drifted)] {
        for n in list {
            if gone(&forced, n) {
                continue;
            }
            let used = taken.get(&n.pool).copied().unwrap_or(0);
            if table.allowed(&n.pool, reason)
                > used + planned.get(&(n.pool.clone(), reason)).copied().unwrap_or(0)
            {
                *planned.entry((n.pool.clone(), reason)).or_default() += 1;
                forced.push((n, reason));
            } else {
                blocked.push(Blocked {
                    node: n.name.clone(),
                    reason: format!(
                        "nodepool {} budget allows no more {} disruptions",
                        n.pool,
                        reason.as_str()
                    ),
                });
            }
        }
        for ((pool, _), c) in std::mem::take(&mut planned) {
            *taken.entry(pool).or_default() += c;
        }
    }
    let mut underutilized = BTreeMap::new();
    let mut open = Vec::new();
    for n in &cands.nodes {
        if gone(&forced, n) || blocked.iter().any(|b| b.node == n.name) {
            continue;
        }
        if let Some(why) = &n.block {
            blocked.push(Blocked {
                node: n.name.clone(),
                reason: why.clone(),
            });
            continue;
        }
        if !n.consolidatable {
            blocked.push(Blocked {
                node: n.name.clone(),
                reason: "consolidation policy or consolidateAfter does not allow it yet".into(),
            });
            continue;
        }
        let allowed = table
            .allowed(&n.pool, Reason::Underutilized)
            .saturating_sub(taken.get(&n.pool).copied().unwrap_or(0));
        if allowed == 0 {
            blocked.push(Blocked {
                node: n.name.clone(),
                reason: format!(
                    "nodepool {} budget allows no more Underutilized disruptions",
                    n.pool
                ),
            });
            continue;
        }
        underutilized.insert(n.pool.clone(), allowed);
        open.push(n);
    }
    blocked.sort();
    let budgets = table
        .entries()
        .map(|(pool, reason, allowed)| BudgetUse {
            nodepool: pool.to_string(),
            reason,
            allowed,
            planned: 0,
        })
        .collect();
    Triage {
        cands,
        forced,
        open,
        underutilized,
        blocked,
        budgets,
        balanced: balanced::Balanced::build(snapshot, cands),
    }
}

/// Whether `n` launched less than `settle` ago (a node of unknown age has settled).
fn settling(n: &NodeInfo, settle: Duration) -> bool {
    n.drift.is_none() && n.age.is_some_and(|a| a < settle)
}

/// Pods that were pending before the decision: they are the provisioner's, not consolidation's.
pub(crate) fn without_pending(snapshot: &ClusterSnapshot) -> ClusterSnapshot {
    let mut out = snapshot.clone();
    out.pods.retain(|p| !p.is_pending());
    out
}

/// The snapshot with `nodes` still present but their reschedulable pods unbound.
pub(crate) fn unbound_on(snapshot: &ClusterSnapshot, nodes: &BTreeSet<String>) -> ClusterSnapshot {
    let mut out = snapshot.clone();
    for p in &mut out.pods {
        if p.node_name.as_ref().is_some_and(|n| nodes.contains(n)) && p.is_reschedulable() {
            std::sync::Arc::make_mut(p).node_name = None;
        }
    }
    out
}

/// The plan for `actions`: cost figures, the budgets they use (expiry is not budgeted), blocks
/// sorted once. `lower_bound` is capped at the cost before and floored to the printed precision.
pub(crate) fn assemble(
    cost_before: f64,
    t: &Triage<'_>,
    actions: Vec<Action>,
    mut blocked: Vec<Blocked>,
    lower_bound: f64,
    solver: DisruptionReport,
) -> DisruptionPlan {
    let savings: f64 = actions.iter().map(|a| a.savings_per_hour).sum();
    let mut budgets = t.budgets.clone();
    for a in actions.iter().filter(|a| a.reason != Reason::Expired) {
        for node in &a.delete {
            let pool = t.cands.find(node).map(|n| n.pool.as_str());
            if let Some(b) = budgets
                .iter_mut()
                .find(|b| Some(b.nodepool.as_str()) == pool && b.reason == a.reason)
            {
                b.planned += 1;
            }
        }
    }
    blocked.sort();
    blocked.dedup();
    DisruptionPlan {
        cost_before_per_hour: round6(cost_before),
        cost_after_per_hour: round6(cost_before - savings),
        savings_per_hour: round6(savings),
        disruption_cost: round6(actions.iter().map(|a| a.disruption_cost).sum()),
        lower_bound: (lower_bound.min(cost_before) * 1e6).floor() / 1e6,
        actions,
        blocked,
        budgets,
        fingerprint: String::new(),
        solver,
    }
}

/// One action deleting `nodes` with no replacement (all empty nodes go in one, as in Karpenter).
pub(crate) fn delete_only(reason: Reason, nodes: &[&NodeInfo]) -> Action {
    let mut delete: Vec<String> = nodes.iter().map(|n| n.name.clone()).collect();
    delete.sort();
    Action {
        reason,
        savings_per_hour: round6(nodes.iter().map(|n| n.price).sum()),
        disruption_cost: round6(nodes.iter().map(|n| n.disruption_cost).sum()),
        delete,
        launch: vec![],
        moves: vec![],
    }
}

/// Distinct spot instance types cheaper than `below` that a launch could use: itself and its
/// fallbacks. Karpenter replaces spot with spot only when there are enough of them.
pub(crate) fn cheaper_spot_types(launch: &crate::optimizer::NewNode, below: f64) -> usize {
    use crate::catalog::CapacityType::Spot;
    let own =
        (launch.capacity_type == Spot).then_some((launch.instance_type.as_str(), launch.price));
    let fallbacks = launch
        .fallbacks
        .iter()
        .filter(|f| f.capacity_type == Spot)
        .map(|f| (f.instance_type.as_str(), f.price));
    own.into_iter()
        .chain(fallbacks)
        .filter(|(_, p)| *p < below)
        .map(|(n, _)| n)
        .collect::<BTreeSet<&str>>()
        .len()
}

/// Hourly price of every node in the snapshot.
pub fn cluster_cost(snapshot: &ClusterSnapshot, catalog: &Catalog) -> f64 {
    snapshot
        .nodes
        .iter()
        .map(|n| crate::optimizer::problem::node_price(n, catalog))
        .sum()
}

pub(crate) fn round6(x: f64) -> f64 {
    // + 0.0 turns a rounded -0.0 into 0.0, which prints without a sign
    (x * 1e6).round() / 1e6 + 0.0
}

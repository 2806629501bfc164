//! The certified lower bound of a provisioning plan. The decision solves without it, so that
//! launches start as soon as the plan is known; once they are under way, the same problem (the
//! same view of the cluster, the same catalog with the offerings out of capacity masked) is solved
//! again with the bound, on a thread of its own and within its own time limit, and the plan's gap
//! to that bound is reported. One bound runs at a time: a plan made while one runs goes
//! uncertified.

use std::collections::BTreeSet;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::catalog::Catalog;
use crate::domain::ClusterSnapshot;
use crate::optimizer::{self, Plan, SolveSettings, Strategy};

/// What the provisioner reports about each plan's cost.
#[derive(Debug, Clone, PartialEq)]
pub enum ProvisioningCost {
    /// A plan was made: its new nodes' hourly price and its objective (price plus preference
    /// penalties), $/h.
    Planned { cost_per_hour: f64, objective: f64 },
    /// The plan's certified bound: no plan placing the same pods has a smaller objective.
    /// `gap` is (objective - bound) / objective, 0 for a plan with nothing to buy.
    Certified {
        objective: f64,
        bound: f64,
        gap: f64,
        seconds: f64,
    },
    /// No bound for the plan.
    Uncertified(Uncertified),
}

/// Why a plan got no bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Uncertified {
    /// The bound of an earlier plan was still being computed.
    Busy,
    /// The bound's solve placed other pods than the plan, so its bound is not the plan's.
    OtherPods,
    /// The bound's solve failed or computed no bound.
    Failed,
}

impl Uncertified {
    pub fn as_str(self) -> &'static str {
        match self {
            Uncertified::Busy => "busy",
            Uncertified::OtherPods => "other-pods",
            Uncertified::Failed => "failed",
        }
    }
}

type Report = Arc<dyn Fn(ProvisioningCost) + Send + Sync>;

/// Computes provisioning plans' bounds off the decision thread and hands every report to its
/// receiver (the in-cluster host's metrics).
#[derive(Clone)]
pub struct Certifier {
    time_limit: Duration,
    report: Report,
    running: Arc<AtomicBool>,
}

impl Certifier {
    /// Bounds solved within `time_limit` each; `report` is called from the decision thread for
    /// plans and from the bound's thread for bounds.
    pub fn new(
        time_limit: Duration,
        report: impl Fn(ProvisioningCost) + Send + Sync + 'static,
    ) -> Certifier {
        Certifier {
            time_limit,
            report: Arc::new(report),
            running: Arc::new(AtomicBool::new(false)),
        }
    }

    pub(in crate::controller) fn planned(&self, plan: &Plan) {
        (self.report)(ProvisioningCost::Planned {
            cost_per_hour: plan.cost_per_hour,
            objective: plan.objective,
        });
    }

    /// Starts the bound of `todo` on its own thread, unless one is running.
    pub(in crate::controller) fn spawn(&self, todo: PlanToCertify) {
        if self.running.swap(true, Ordering::SeqCst) {
            (self.report)(ProvisioningCost::Uncertified(Uncertified::Busy));
            return;
        }
        let me = self.clone();
        let spawned = std::thread::Builder::new()
            .name("bound".into())
            .spawn(move || {
                let limit = me.time_limit;
                // a panic in the solver must not leave the flag set for good
                let outcome = std::panic::catch_unwind(AssertUnwindSafe(|| todo.certify(limit)))
                    .unwrap_or(ProvisioningCost::Uncertified(Uncertified::Failed));
                me.running.store(false, Ordering::SeqCst);
                (me.report)(outcome);
            });
        if spawned.is_err() {
            self.running.store(false, Ordering::SeqCst);
            (self.report)(ProvisioningCost::Uncertified(Uncertified::Failed));
        }
    }
}

/// A plan's problem, kept for its bound.
pub(in crate::controller) struct PlanToCertify {
    view: ClusterSnapshot,
    catalog: Catalog,
    settings: SolveSettings,
    objective: f64,
    unplaced: BTreeSet<String>,
}

impl PlanToCertify {
    /// `plan` as solved from `view` and `catalog` with `settings` (before headroom is stripped).
    pub(in crate::controller) fn of(
        plan: &Plan,
        view: ClusterSnapshot,
        catalog: Catalog,
        settings: SolveSettings,
    ) -> PlanToCertify {
        PlanToCertify {
            view,
            catalog,
            settings,
            objective: plan.objective,
            unplaced: plan.unschedulable.iter().map(|u| u.pod.clone()).collect(),
        }
    }

    fn certify(self, limit: Duration) -> ProvisioningCost {
        let started = Instant::now();
        let settings = SolveSettings {
            strategy: Strategy::Milp,
            time_limit: limit,
            lower_bound: true,
            ..self.settings
        };
        let bounded = match optimizer::solve(&self.view, &self.catalog, &settings) {
            Ok(p) => p,
            Err(e) => {
                tracing::debug!(error = %e, "provisioning bound not computed");
                return ProvisioningCost::Uncertified(Uncertified::Failed);
            }
        };
        let unplaced: BTreeSet<String> = bounded
            .unschedulable
            .iter()
            .map(|u| u.pod.clone())
            .collect();
        if unplaced != self.unplaced {
            return ProvisioningCost::Uncertified(Uncertified::OtherPods);
        }
        if let Some(why) = bounded
            .solver
            .notes
            .iter()
            .find(|n| n.starts_with("no lower bound"))
        {
            tracing::debug!(why = %why, "provisioning bound not computed");
            return ProvisioningCost::Uncertified(Uncertified::Failed);
        }
        ProvisioningCost::Certified {
            objective: self.objective,
            bound: bounded.lower_bound,
            gap: gap(self.objective, bounded.lower_bound),
            seconds: started.elapsed().as_secs_f64(),
        }
    }
}

/// The relative gap of `objective` to `bound`: 0 when there is nothing to pay.
fn gap(objective: f64, bound: f64) -> f64 {
    if objective > 0.0 {
        ((objective - bound) / objective).clamp(0.0, 1.0)
    } else {
        0.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_gap_is_relative_to_the_plan_and_zero_for_a_free_plan() {
        assert!((gap(2.0, 1.5) - 0.25).abs() < 1e-12);
        assert_eq!(gap(0.0, 0.0), 0.0);
        // a bound a rounding above the plan is no negative gap
        assert_eq!(gap(1.0, 1.0 + 1e-9), 0.0);
    }
}

//! `joiner simulate`: a discrete-event simulation of a cluster run by joiner, on a virtual clock.
//!
//! A [`scenario::Scenario`] (cluster objects, workloads over time, scripted capacity shortages and
//! interruptions) drives `engine`, which keeps an event queue, the workloads and an in-memory
//! cluster, and runs the real [`crate::controller::Controller`] against it: the same provisioning
//! batches, launches, interruption handling and disruption commands, calling the same decisions
//! (`optimizer::solve`, `disruption::consolidate`), through the same two traits (the cluster, and
//! [`crate::cloud::CloudProvider`] implemented by the simulated cloud with scripted insufficient
//! capacity and seeded spot interruptions). A kube-scheduler stand-in (`binder`) binds pending pods
//! to registered nodes with room, honouring each pod's volumes (the zone its PersistentVolume is in,
//! the node's EBS attach limit). What happened is summarised in `report`, checked by `invariants`,
//! and `charts` draws it.

pub mod binder;
pub mod charts;
pub mod engine;
pub mod invariants;
pub mod report;
pub mod scenario;
pub mod suite;

use serde::{Deserialize, Serialize};

use crate::disruption::DisruptionStrategy;
use crate::optimizer::Strategy;

pub use report::{Report, RunReport};
pub use scenario::Scenario;

#[derive(Debug, thiserror::Error)]
pub enum SimError {
    /// A scenario file that cannot be used: the message names the file and the field.
    #[error("scenario {0}")]
    Scenario(String),
    #[error("decision: {0}")]
    Decision(String),
    #[error(transparent)]
    Chart(#[from] charts::ChartError),
    #[error("cannot write {path}: {message}")]
    Write { path: String, message: String },
}

/// The decision procedures a run uses, provisioning and disruption together.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, clap::ValueEnum,
)]
#[serde(rename_all = "lowercase")]
pub enum SimStrategy {
    /// joiner: the MILP provisioning core and the global disruption model.
    Milp,
    /// Karpenter's behaviour: first-fit-decreasing provisioning and its consolidation passes.
    Greedy,
}

impl SimStrategy {
    pub fn as_str(self) -> &'static str {
        match self {
            SimStrategy::Milp => "milp",
            SimStrategy::Greedy => "greedy",
        }
    }

    pub(crate) fn provisioning(self) -> Strategy {
        match self {
            SimStrategy::Milp => Strategy::Milp,
            SimStrategy::Greedy => Strategy::Greedy,
        }
    }

    pub(crate) fn disruption(self) -> DisruptionStrategy {
        match self {
            SimStrategy::Milp => DisruptionStrategy::Milp,
            SimStrategy::Greedy => DisruptionStrategy::Baseline,
        }
    }
}

/// Runs `scenario` once with `strategy`. `progress` is told the fraction of virtual time done.
pub fn run(
    scenario: &Scenario,
    strategy: SimStrategy,
    seed: u64,
    progress: &mut dyn FnMut(f64),
) -> Result<RunReport, SimError> {
    run_keeping(scenario, strategy, seed, None, progress).map(|(report, _)| report)
}

/// Runs `scenario` once with `strategy`, keeping a copy of the cluster at the first sample at or
/// after every multiple of `keep_every` seconds (none when None): (seconds, cluster).
pub fn run_keeping(
    scenario: &Scenario,
    strategy: SimStrategy,
    seed: u64,
    keep_every: Option<f64>,
    progress: &mut dyn FnMut(f64),
) -> Result<(RunReport, Vec<(f64, crate::domain::ClusterSnapshot)>), SimError> {
    let started = std::time::Instant::now();
    let mut world = engine::World::new(scenario, strategy, seed);
    if let Some(every) = keep_every {
        world.keep_every(every);
    }
    world.run(progress)?;
    let report = world.report(started.elapsed().as_secs_f64());
    Ok((report, std::mem::take(&mut world.kept)))
}

//! The day suite (`joiner simulate --suite DIR`): every scenario file of a directory run with
//! three strategies in one process (joiner; Karpenter with the scenario's consolidation policies;
//! Karpenter with every `WhenEmptyOrUnderutilized` NodePool set to `Balanced`), their figures side
//! by side with ratios against Karpenter, and per scenario the certified lower bound of re-packing
//! the pods running at each hourly sample from scratch, which the chart draws dashed under the
//! three cost lines. A file that cannot be read is reported with its field; the others still run.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::catalog::Catalog;
use crate::domain::{ClusterSnapshot, ConsolidationPolicy, Pod, WhenUnsatisfiable};
use crate::optimizer::{SolveSettings, Strategy};

use super::report::{RunReport, Summary};
use super::{Scenario, SimError, SimStrategy};

/// Seconds between the samples the re-packing bound is computed at.
pub const BOUND_EVERY: f64 = 3600.0;
/// Wall-clock limit of each bound's solve, seconds.
pub const BOUND_TIME_LIMIT: f64 = 1.0;

/// The three strategies of the suite.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SuiteStrategy {
    /// joiner: the MILP provisioning core and the global disruption model.
    Joiner,
    /// Karpenter, each NodePool with the consolidation policy the scenario gives it.
    Karpenter,
    /// Karpenter with every `WhenEmptyOrUnderutilized` NodePool set to `Balanced`.
    KarpenterBalanced,
}

impl SuiteStrategy {
    pub const ALL: [SuiteStrategy; 3] = [
        SuiteStrategy::Joiner,
        SuiteStrategy::Karpenter,
        SuiteStrategy::KarpenterBalanced,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            SuiteStrategy::Joiner => "joiner",
            SuiteStrategy::Karpenter => "karpenter",
            SuiteStrategy::KarpenterBalanced => "karpenter-balanced",
        }
    }

    fn sim(self) -> SimStrategy {
        match self {
            SuiteStrategy::Joiner => SimStrategy::Milp,
            SuiteStrategy::Karpenter | SuiteStrategy::KarpenterBalanced => SimStrategy::Greedy,
        }
    }

    /// The scenario as this strategy runs it.
    fn scenario(self, sc: &Scenario) -> Scenario {
        let mut sc = sc.clone();
        if self == SuiteStrategy::KarpenterBalanced {
            for np in &mut sc.cluster.nodepools {
                if np.disruption.consolidation_policy
                    == ConsolidationPolicy::WhenEmptyOrUnderutilized
                {
                    np.disruption.consolidation_policy = ConsolidationPolicy::Balanced;
                }
            }
        }
        sc
    }
}

/// A figure of joiner's and of Karpenter Balanced's run over Karpenter's; None where Karpenter's
/// figure is 0.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Ratios {
    /// Against whose run: `joiner` or `karpenter-balanced`.
    pub strategy: String,
    pub total_cost: Option<f64>,
    pub cost_per_served_pod_hour: Option<f64>,
    pub pending_pod_hours: Option<f64>,
    pub pods_evicted: Option<f64>,
    pub instances_launched: Option<f64>,
    pub peak_nodes: Option<f64>,
    pub short_lived_nodes: Option<f64>,
}

/// The re-packing bound at one sample.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BoundSample {
    pub hours: f64,
    /// Pods running in joiner's run at the sample (DaemonSet pods not counted).
    pub pods: usize,
    /// $/h no set of new nodes can beat for those pods; None when the solve failed.
    pub cost_per_hour: Option<f64>,
}

/// One scenario of the suite: the three runs (series included), ratios and the bound.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DayResult {
    pub file: String,
    pub scenario: String,
    pub description: String,
    pub hours: f64,
    pub seed: u64,
    /// In the order joiner, karpenter, karpenter-balanced; `strategy` names each.
    pub runs: Vec<RunReport>,
    /// joiner's and karpenter-balanced's figures over karpenter's.
    pub ratios: Vec<Ratios>,
    pub bound_every_seconds: f64,
    pub bound_time_limit_seconds: f64,
    pub bound: Vec<BoundSample>,
    /// Wall-clock seconds the bound's solves took on this machine.
    pub bound_wall_seconds: f64,
    /// The chart written for this scenario, when one was.
    #[serde(default)]
    pub chart: Option<String>,
}

/// A scenario file that could not be run, and why (the message names the file and field).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SuiteFailure {
    pub file: String,
    pub error: String,
}

/// What `joiner simulate --suite` prints with `-o json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SuiteReport {
    /// One entry per scenario file and seed.
    pub scenarios: Vec<DayResult>,
    pub failed: Vec<SuiteFailure>,
    /// Per scenario file, joiner's target ratios over the seeds it ran with (`--seeds`).
    #[serde(default)]
    pub over_seeds: Vec<SeedSummary>,
}

/// One of joiner's figures over a baseline's, across the seeds of one scenario. Every figure here
/// is better lower, so the worst seed is the highest.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Spread {
    pub median: Option<f64>,
    pub worst: Option<f64>,
    /// Seeds where the baseline's figure is 0 and joiner's is not: a miss no ratio expresses, left
    /// out of the median and the worst. Where both are 0 the ratio counts as 1.
    pub over_zero: usize,
}

impl Spread {
    fn of(pairs: impl Iterator<Item = (f64, f64)>) -> Spread {
        let mut over_zero = 0;
        let mut ratios: Vec<f64> = pairs
            .filter_map(|(run, base)| match ratio(run, base) {
                None if run == 0.0 => Some(1.0),
                None => {
                    over_zero += 1;
                    None
                }
                some => some,
            })
            .collect();
        ratios.sort_by(f64::total_cmp);
        Spread {
            median: (!ratios.is_empty()).then(|| super::report::nearest_rank(&ratios, 0.5)),
            worst: ratios.last().copied(),
            over_zero,
        }
    }
}

/// joiner's figures against the targets, for one scenario file over its seeds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SeedSummary {
    pub file: String,
    pub scenario: String,
    pub seeds: Vec<u64>,
    /// $ per served pod-hour over Karpenter's.
    pub cost_per_served_pod_hour: Spread,
    /// Pods evicted over Karpenter Balanced's.
    pub pods_evicted_vs_balanced: Spread,
    /// Instances launched over Karpenter's.
    pub instances_launched: Spread,
    /// Pending pod-hours over Karpenter's.
    pub pending_pod_hours: Spread,
}

/// Groups the days by file (in first-seen order) and sums up joiner's ratios over their seeds.
pub fn over_seeds(days: &[DayResult]) -> Vec<SeedSummary> {
    let mut files: Vec<&str> = vec![];
    for d in days {
        if !files.contains(&d.file.as_str()) {
            files.push(&d.file);
        }
    }
    files
        .into_iter()
        .map(|file| {
            let runs: Vec<&DayResult> = days.iter().filter(|d| d.file == file).collect();
            let spread = |f: fn(&Summary) -> f64, base: usize| {
                Spread::of(
                    runs.iter()
                        .map(|d| (f(&d.runs[0].summary), f(&d.runs[base].summary))),
                )
            };
            SeedSummary {
                file: file.to_string(),
                scenario: runs[0].scenario.clone(),
                seeds: runs.iter().map(|d| d.seed).collect(),
                cost_per_served_pod_hour: spread(|s| s.cost_per_served_pod_hour, 1),
                pods_evicted_vs_balanced: spread(|s| s.pods_evicted as f64, 2),
                instances_launched: spread(|s| s.instances_launched as f64, 1),
                pending_pod_hours: spread(|s| s.pending_pod_hours, 1),
            }
        })
        .collect()
}

/// The scenario files of `dir` (`*.yaml`, `*.yml`), in name order.
pub fn scenario_files(dir: &Path) -> Result<Vec<PathBuf>, SimError> {
    let entries = std::fs::read_dir(dir)
        .map_err(|e| SimError::Scenario(format!("suite {}: {e}", dir.display())))?;
    let mut files: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_file())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml" || x == "yml"))
        .collect();
    files.sort();
    if files.is_empty() {
        return Err(SimError::Scenario(format!(
            "suite {}: no scenario file (*.yaml) in it",
            dir.display()
        )));
    }
    Ok(files)
}

/// Runs one scenario with the three strategies and computes the bound series from joiner's run.
/// `progress` is told the strategy and the fraction of virtual time done.
pub fn run_day(
    sc: &Scenario,
    file: &str,
    seed: u64,
    progress: &mut dyn FnMut(SuiteStrategy, f64),
) -> Result<DayResult, SimError> {
    let mut runs = Vec::new();
    let mut kept = Vec::new();
    for s in SuiteStrategy::ALL {
        let scenario = s.scenario(sc);
        let keep = (s == SuiteStrategy::Joiner).then_some(BOUND_EVERY);
        let (mut run, snaps) =
            super::run_keeping(&scenario, s.sim(), seed, keep, &mut |f| progress(s, f))?;
        run.strategy = s.as_str().to_string();
        runs.push(run);
        if s == SuiteStrategy::Joiner {
            kept = snaps;
        }
    }
    let started = std::time::Instant::now();
    let bound = kept
        .iter()
        .map(|(at, snap)| bound_sample(*at, snap, &sc.catalog))
        .collect();
    let bound_wall_seconds = started.elapsed().as_secs_f64();
    let ratios = [&runs[0], &runs[2]]
        .iter()
        .map(|r| ratios(&r.strategy, &r.summary, &runs[1].summary))
        .collect();
    Ok(DayResult {
        file: file.to_string(),
        scenario: sc.name.clone(),
        description: sc.description.clone(),
        hours: sc.duration / 3600.0,
        seed,
        runs,
        ratios,
        bound_every_seconds: BOUND_EVERY,
        bound_time_limit_seconds: BOUND_TIME_LIMIT,
        bound,
        bound_wall_seconds,
        chart: None,
    })
}

fn bound_sample(at: f64, snap: &ClusterSnapshot, catalog: &Catalog) -> BoundSample {
    let pods = repack_snapshot(snap);
    BoundSample {
        hours: at / 3600.0,
        pods: pods.pods.len(),
        cost_per_hour: repack_bound(&pods, catalog, BOUND_TIME_LIMIT).ok(),
    }
}

/// The cluster's running workload pods, pending again, with no node and no claim: the problem of
/// buying their capacity from scratch. Preferences (preferred affinities, ScheduleAnyway spreads)
/// are dropped and the weights that price anything but dollars (preferences, PreferNoSchedule
/// taints, the spot interruption surcharge, the launch charge) set to 0, so the optimizer's bound is a bound on the
/// capacity's price alone.
pub fn repack_snapshot(snap: &ClusterSnapshot) -> ClusterSnapshot {
    let mut out = snap.clone();
    out.nodes.clear();
    out.node_claims.clear();
    let w = &mut out.weights;
    w.preferred_node_affinity = 0.0;
    w.preferred_pod_affinity = 0.0;
    w.preferred_pod_anti_affinity = 0.0;
    w.schedule_anyway_skew = 0.0;
    w.prefer_no_schedule = 0.0;
    w.spot_interruption_band = 0.0;
    w.node_launch = 0.0;
    out.pods = snap
        .pods
        .iter()
        .filter(|p| p.node_name.is_some() && !p.is_daemonset_pod() && !p.terminal)
        .map(|p| std::sync::Arc::new(without_preferences(p)))
        .collect();
    out
}

fn without_preferences(p: &Pod) -> Pod {
    let mut pod = p.clone();
    pod.node_name = None;
    let c = std::sync::Arc::make_mut(&mut pod.constraints);
    c.preferred_node_affinity.clear();
    c.preferred_pod_affinity.clear();
    c.preferred_pod_anti_affinity.clear();
    c.spread
        .retain(|s| s.when_unsatisfiable != WhenUnsatisfiable::ScheduleAnyway);
    pod
}

/// The optimizer's certified lower bound, $/h, on new capacity for the pending pods of `snap`
/// (every pod is pending in a [`repack_snapshot`]), with `time_limit` seconds for the solve.
pub fn repack_bound(
    snap: &ClusterSnapshot,
    catalog: &Catalog,
    time_limit: f64,
) -> Result<f64, String> {
    if snap.pods.is_empty() {
        return Ok(0.0);
    }
    let settings = SolveSettings {
        strategy: Strategy::Milp,
        time_limit: Duration::from_secs_f64(time_limit),
        lower_bound: true,
        ..Default::default()
    };
    crate::optimizer::solve(snap, catalog, &settings)
        .map(|plan| plan.lower_bound)
        .map_err(|e| e.to_string())
}

fn ratio(a: f64, b: f64) -> Option<f64> {
    (b != 0.0).then(|| a / b)
}

/// `run`'s figures over Karpenter's (`base`).
pub fn ratios(strategy: &str, run: &Summary, base: &Summary) -> Ratios {
    let n = |v: usize| v as f64;
    Ratios {
        strategy: strategy.to_string(),
        total_cost: ratio(run.total_cost, base.total_cost),
        cost_per_served_pod_hour: ratio(
            run.cost_per_served_pod_hour,
            base.cost_per_served_pod_hour,
        ),
        pending_pod_hours: ratio(run.pending_pod_hours, base.pending_pod_hours),
        pods_evicted: ratio(n(run.pods_evicted), n(base.pods_evicted)),
        instances_launched: ratio(n(run.instances_launched), n(base.instances_launched)),
        peak_nodes: ratio(n(run.peak_nodes), n(base.peak_nodes)),
        short_lived_nodes: ratio(n(run.short_lived_nodes), n(base.short_lived_nodes)),
    }
}

#[cfg(test)]
mod tests {
    use super::Spread;

    #[test]
    fn a_spread_takes_the_median_and_the_highest_and_counts_misses_over_zero() {
        let s =
            Spread::of([(1.0, 2.0), (3.0, 2.0), (2.0, 2.0), (0.0, 0.0), (4.0, 0.0)].into_iter());
        // ratios 0.5, 1.5, 1.0 and 1.0 (both 0); 4 over 0 is counted apart
        assert_eq!((s.median, s.worst, s.over_zero), (Some(1.0), Some(1.5), 1));
        let none = Spread::of([(1.0, 0.0)].into_iter());
        assert_eq!((none.median, none.worst, none.over_zero), (None, None, 1));
    }
}

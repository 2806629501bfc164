//! What a simulation run measured: the summary table's figures, the time series the charts draw,
//! and the JSON report that holds both. Figures are computed once here from the run's raw records.

use serde::{Deserialize, Serialize};

/// p50 / p95 / p99 of a sample (nearest-rank), all zero for an empty sample.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Percentiles {
    pub p50: f64,
    pub p95: f64,
    pub p99: f64,
}

impl Percentiles {
    pub fn of(values: &[f64]) -> Percentiles {
        let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
        if v.is_empty() {
            return Percentiles::default();
        }
        v.sort_by(f64::total_cmp);
        Percentiles {
            p50: nearest_rank(&v, 0.50),
            p95: nearest_rank(&v, 0.95),
            p99: nearest_rank(&v, 0.99),
        }
    }
}

/// The `q` quantile (0..=1) of ascending, non-empty `sorted` by the nearest-rank method.
pub fn nearest_rank(sorted: &[f64], q: f64) -> f64 {
    sorted[((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len()) - 1]
}

/// The cluster at one instant of virtual time.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    /// Hours since the start of the run.
    pub hours: f64,
    /// Sum of the hourly prices of every instance that is billed (booting ones included), $/h.
    pub cost_per_hour: f64,
    /// Instances that are billed (booting and registered).
    pub nodes: usize,
    /// Pods that exist and are not bound to a node.
    pub pending_pods: usize,
}

/// The summary table's row for one strategy.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// Dollars billed over the whole run (instance-seconds times price).
    pub total_cost: f64,
    /// `total_cost` over the run's length in hours, $/h.
    pub average_cost_per_hour: f64,
    pub peak_nodes: usize,
    pub final_nodes: usize,
    /// Seconds from a pod's creation (or eviction) to its binding, over every binding in the run.
    pub pending_seconds: Percentiles,
    /// Pods that were bound at least once.
    pub pods_started: usize,
    /// Pods evicted by disruption (consolidation, drift, expiry) and by interruption drains.
    pub pods_evicted: usize,
    /// Of `pods_evicted`, the pods of nodes a spot interruption took.
    #[serde(default)]
    pub pods_evicted_by_interruption: usize,
    /// Spot interruption warnings acted on.
    pub interruptions_handled: usize,
    /// Launches that hit insufficient capacity on at least one offering.
    pub ice_events: usize,
    pub instances_launched: usize,
    pub instances_terminated: usize,
    /// Disruption commands carried out / dropped at validation.
    pub disruptions_executed: usize,
    pub disruptions_abandoned: usize,
    /// Solver calls (provisioning and disruption) and their wall-clock seconds.
    pub solves: usize,
    pub solver_seconds: Percentiles,
    /// Solves whose answer was cut by a time limit (valid, but not proven within the gap).
    pub time_limited_solves: usize,
    /// Pods pending at the end that no offering of any NodePool can hold.
    pub unschedulable_pods: usize,
    /// Pods pending at the end that could run somewhere (still waiting for capacity).
    pub pending_at_end: usize,
    /// Hours workload pods spent pending, summed over pods (waits still open at the end included).
    #[serde(default)]
    pub pending_pod_hours: f64,
    /// Hours workload pods spent bound to a node, summed over pods (DaemonSet pods not counted).
    #[serde(default)]
    pub served_pod_hours: f64,
    /// `total_cost` over `served_pod_hours`, $ per pod-hour (0 when nothing was served).
    #[serde(default)]
    pub cost_per_served_pod_hour: f64,
    /// Nodes terminated during the run that lived less than their NodePool's consolidateAfter
    /// plus 10 minutes, from launch to deletion.
    #[serde(default)]
    pub short_lived_nodes: usize,
    /// Distinct (pod, node, volume) placements seen during the run with the pod on a node its
    /// bound volume's node affinity rules out (its volume in another zone): 0 unless a decision,
    /// the binder or the provisioner is wrong.
    #[serde(default)]
    pub volume_zone_violations: usize,
}

/// How long a node must live not to count as short-lived: its NodePool's consolidateAfter
/// (0 when absent or `Never`) plus this, seconds.
pub const SHORT_LIVED_MARGIN: f64 = 600.0;

/// Nodes whose lifetime (seconds) is below their NodePool's consolidateAfter (`threshold`,
/// seconds, 0 for a NodePool it does not know) plus [`SHORT_LIVED_MARGIN`].
pub fn short_lived(lifetimes: &[(String, f64)], threshold: impl Fn(&str) -> f64) -> usize {
    lifetimes
        .iter()
        .filter(|(pool, lived)| *lived < threshold(pool) + SHORT_LIVED_MARGIN)
        .count()
}

/// One strategy's run: its summary and the series the charts are drawn from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunReport {
    /// `milp` or `greedy`.
    pub strategy: String,
    pub scenario: String,
    pub seed: u64,
    pub hours: f64,
    pub summary: Summary,
    pub series: Vec<Sample>,
    /// Wall-clock seconds the run took on this machine.
    pub wall_seconds: f64,
}

/// The file `--out DIR/report.json` holds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    pub scenario: String,
    pub seed: u64,
    pub runs: Vec<RunReport>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_lived_nodes_are_below_consolidate_after_plus_ten_minutes() {
        let lifetimes: Vec<(String, f64)> = [
            ("general", 599.0),  // below 0 + 600
            ("general", 600.0),  // exactly the threshold: not short-lived
            ("batch", 1799.0),   // below 1200 + 600
            ("batch", 1800.0),   // not
            ("unknown", 30.0),   // an unknown pool counts from 0
            ("general", 7200.0), // not
        ]
        .into_iter()
        .map(|(p, s)| (p.to_string(), s))
        .collect();
        let threshold = |pool: &str| if pool == "batch" { 1200.0 } else { 0.0 };
        assert_eq!(short_lived(&lifetimes, threshold), 3);
        assert_eq!(short_lived(&[], threshold), 0);
    }

    #[test]
    fn percentiles_are_nearest_rank() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(
            Percentiles::of(&v),
            Percentiles {
                p50: 50.0,
                p95: 95.0,
                p99: 99.0
            }
        );
        assert_eq!(
            Percentiles::of(&[7.0]),
            Percentiles {
                p50: 7.0,
                p95: 7.0,
                p99: 7.0
            }
        );
        assert_eq!(Percentiles::of(&[]), Percentiles::default());
        let waits = [41.0, 0.0, 0.0, 82.0, 0.0, 41.0, 0.0, 0.0, 0.0, 0.0, 3600.0];
        assert_eq!(
            Percentiles::of(&waits),
            Percentiles {
                p50: 0.0,
                p95: 3600.0,
                p99: 3600.0
            },
            "11 waits: rank ceil(0.95 * 11) = 11 is the longest"
        );
        let twenty: Vec<f64> = (0..20).map(|i| if i < 19 { 0.0 } else { 41.0 }).collect();
        assert_eq!(
            (Percentiles::of(&twenty).p95, Percentiles::of(&twenty).p99),
            (0.0, 41.0),
            "20 waits, 19 of them 0: p95 is rank 19 (a 0), p99 rank 20 (the 41)"
        );
        assert_eq!(
            Percentiles::of(&[3.0, f64::NAN, 1.0, 2.0]).p50,
            2.0,
            "NaN is left out, order does not matter"
        );
    }
}

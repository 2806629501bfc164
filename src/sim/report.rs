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
        let rank = |q: f64| v[((q * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1];
        Percentiles {
            p50: rank(0.50),
            p95: rank(0.95),
            p99: rank(0.99),
        }
    }
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
        assert_eq!(
            Percentiles::of(&[3.0, f64::NAN, 1.0, 2.0]).p50,
            2.0,
            "NaN is left out, order does not matter"
        );
    }
}

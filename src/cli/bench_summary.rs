//! `joiner bench`'s summary over seeds: for one mix and pod count, the median, p90 and worst
//! certified gap, how many plans were proven optimal, and the MILP's cost and objective against
//! greedy's (median and worst, and how many seeds came out dearer than greedy).

use serde::Serialize;

use joiner::optimizer::PlanStatus;

use super::bench_cmd::{Case, Mix};

/// One mix and pod count over its seeds.
#[derive(Debug, Clone, Serialize)]
pub(super) struct Summary {
    pub mix: Mix,
    pub pods: usize,
    pub seeds: usize,
    pub classes_median: f64,
    pub gap_median: f64,
    pub gap_p90: f64,
    pub gap_worst: f64,
    /// Plans whose status is optimal (gap within the solver's target).
    pub proven: usize,
    pub milp_seconds_median: f64,
    pub milp_seconds_worst: f64,
    /// MILP cost / greedy cost.
    pub cost_ratio_median: f64,
    pub cost_ratio_worst: f64,
    /// MILP objective / greedy objective (what the MILP minimises).
    pub objective_ratio_worst: f64,
    /// Seeds whose MILP objective is above greedy's.
    pub dearer_than_greedy: usize,
}

/// The `q` quantile (0..=1) of `values` by the nearest-rank method; NaN when empty.
pub(super) fn quantile(values: &[f64], q: f64) -> f64 {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| !x.is_nan()).collect();
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    joiner::sim::report::nearest_rank(&v, q)
}

/// The summary of `cases`, all of one mix and pod count.
pub(super) fn summarise(cases: &[Case]) -> Summary {
    let of = |f: fn(&Case) -> f64| cases.iter().map(f).collect::<Vec<f64>>();
    let gaps = of(|c| c.gap);
    let seconds = of(|c| c.milp_seconds);
    let ratios = of(|c| c.cost_ratio);
    let objective = of(|c| c.milp_objective / c.greedy_objective.max(1e-9));
    let worst = |v: &[f64]| quantile(v, 1.0);
    Summary {
        mix: cases.first().map_or(Mix::Diverse, |c| c.mix),
        pods: cases.first().map_or(0, |c| c.pods),
        seeds: cases.len(),
        classes_median: quantile(&of(|c| c.pod_classes as f64), 0.5),
        gap_median: quantile(&gaps, 0.5),
        gap_p90: quantile(&gaps, 0.9),
        gap_worst: worst(&gaps),
        proven: cases
            .iter()
            .filter(|c| c.status == PlanStatus::Optimal)
            .count(),
        milp_seconds_median: quantile(&seconds, 0.5),
        milp_seconds_worst: worst(&seconds),
        cost_ratio_median: quantile(&ratios, 0.5),
        cost_ratio_worst: worst(&ratios),
        objective_ratio_worst: worst(&objective),
        dearer_than_greedy: objective.iter().filter(|r| **r > 1.0 + 1e-9).count(),
    }
}

/// The summaries as a table.
pub(super) fn table(summaries: &[Summary]) -> String {
    let mut out = format!(
        "\n{:>11} {:>6} {:>5} {:>7} {:>7} {:>7} {:>7} {:>6} {:>7} {:>7} {:>7} {:>7} {:>7} {:>6}\n",
        "mix",
        "pods",
        "seeds",
        "classes",
        "gap%med",
        "gap%p90",
        "gap%max",
        "proven",
        "s_med",
        "s_max",
        "m/g_med",
        "m/g_max",
        "obj_max",
        "dearer"
    );
    for s in summaries {
        out += &format!(
            "{:>11} {:>6} {:>5} {:>7.0} {:>7.2} {:>7.2} {:>7.2} {:>6} {:>7.2} {:>7.2} {:>7.3} \
             {:>7.3} {:>7.3} {:>6}\n",
            s.mix.name(),
            s.pods,
            s.seeds,
            s.classes_median,
            s.gap_median * 100.0,
            s.gap_p90 * 100.0,
            s.gap_worst * 100.0,
            s.proven,
            s.milp_seconds_median,
            s.milp_seconds_worst,
            s.cost_ratio_median,
            s.cost_ratio_worst,
            s.objective_ratio_worst,
            s.dearer_than_greedy
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::quantile;

    #[test]
    fn quantiles_are_nearest_rank() {
        let v = [5.0, 1.0, 3.0, 2.0, 4.0];
        assert_eq!(quantile(&v, 0.5), 3.0);
        assert_eq!(quantile(&v, 0.9), 5.0);
        assert_eq!(quantile(&v, 1.0), 5.0);
        assert_eq!(quantile(&v, 0.0), 1.0);
        let ten: Vec<f64> = (1..=10).map(f64::from).collect();
        assert_eq!(quantile(&ten, 0.9), 9.0);
        assert!(quantile(&[], 0.5).is_nan());
    }
}

//! HiGHS's integer program over the patterns a column generation left (the restricted master),
//! started from a rounding of its LP: how many nodes of each pattern to buy so that every pod is
//! placed at least cost. The relaxation's candidate (`lift.rs`) asks it where no zone rule is left
//! to settle (a problem whose zones were pinned first, `pin.rs`): the zone program it replaces
//! there may leave pods unplaced (each valued at twice its LP dual), which the greedy repair then
//! places a few to a node, dearly. Patterns are picked as for the full model's integer solve: those
//! the LP uses, those the start uses, and those nearly pricing in ([`kept`]).

use std::collections::BTreeMap;

use highs::{HighsModelStatus, Sense};

use super::super::problem::Problem;
use super::super::SolveSettings;
use super::columns::Bin;
use super::master::{AuxKind, Master};
use super::{bins, build_lp, configure, run, Generation, MIP_ALL_COLUMNS, MIP_REDUCED_COST};

/// What the integer program bought: copies per pattern of the generation, and whether HiGHS
/// proved them optimal (within the gap target) over the patterns it saw.
pub struct Bought {
    pub copies: Vec<u32>,
    pub proven: bool,
}

/// Copies of `generated`'s patterns placing `demand[k]` pods of each class of `p` at least cost,
/// from `start` (copies per pattern, every pod placed), within `seconds`. None when HiGHS returns
/// no answer in time or the problem has rows a start cannot be given for.
pub fn copies(p: &Problem, demand: &[u32], generated: &Generation, start: &[u32], settings: &SolveSettings, seconds: f64) -> Option<Bought> {
    let all_bins = bins(p);
    let bin_index: BTreeMap<Bin, usize> = all_bins.iter().enumerate().map(|(i, b)| (b.bin, i)).collect();
    let master = Master::build(p, demand, &all_bins);
    // a start needs a value for every auxiliary column; only unplaced pods have an obvious one
    if !master.aux.iter().all(|a| matches!(a.kind, AuxKind::Unplaced(_))) {
        return None;
    }
    let kept = kept(generated, start);
    let columns: Vec<_> = kept.iter().map(|&i| generated.columns[i].clone()).collect();
    let mut model = build_lp(p, &master, &all_bins, &bin_index, &columns, true).optimise(Sense::Minimise);
    let mut placed = vec![0u32; demand.len()];
    for &i in &kept {
        for &(k, n) in &generated.columns[i].counts {
            placed[k] += n * start[i];
        }
    }
    let mut values: Vec<f64> = master.aux.iter().map(|a| if let AuxKind::Unplaced(k) = a.kind { f64::from(demand[k].saturating_sub(placed[k])) } else { 0.0 }).collect();
    values.extend(kept.iter().map(|&i| f64::from(start[i])));
    // HiGHS checks the start and ignores it if it is infeasible: a hint, never a constraint
    let _ = model.try_set_solution(Some(&values), None, None, None);
    configure(&mut model, settings, seconds);
    model.set_option("mip_rel_gap", settings.gap);
    let solved = run(model, settings, "restricted master mip").ok()?;
    if solved.primal_solution_status() != highs::HighsSolutionStatus::Feasible {
        return None;
    }
    let solution = solved.get_solution();
    let offset = master.aux.len();
    let mut copies = vec![0u32; generated.columns.len()];
    for (j, &i) in kept.iter().enumerate() {
        copies[i] = solution.columns()[offset + j].round().max(0.0) as u32;
    }
    // HiGHS sometimes reports an optimum it found in its presolved space while handing back the start
    // (at 100 pods of the diverse mix, zones pinned, 0.5 s: "optimal" at 0.3843 $/h with the start's
    // 0.4071 as the solution): the answer is what it hands back, and only proven when the two agree
    let cost: f64 = kept.iter().map(|&i| generated.columns[i].cost * f64::from(copies[i])).sum::<f64>()
        + master.aux.iter().zip(solution.columns()).map(|(a, v)| a.cost * v).sum::<f64>();
    let agrees = (cost - solved.objective_value()).abs() <= 1e-6 * (1.0 + cost.abs());
    let proven = solved.status() == HighsModelStatus::Optimal && agrees;
    tracing::debug!(proven, agrees, patterns = kept.len(), objective = solved.objective_value(), cost, "restricted master's integer program");
    Some(Bought { copies, proven })
}

/// Indices of the patterns the program sees: those the LP or the start uses, then the rest by
/// reduced cost (under the LP's pod prices) relative to cost, while within the full model's
/// [`MIP_REDUCED_COST`] and, all told, its [`MIP_ALL_COLUMNS`] (HiGHS's presolve and root cut
/// rounds do not watch the clock, and grow with the columns).
fn kept(generated: &Generation, start: &[u32]) -> Vec<usize> {
    let reduced = |i: usize| {
        let c = &generated.columns[i];
        let collects: f64 = c.counts.iter().map(|&(k, n)| f64::from(n) * generated.pod_prices[k]).sum();
        (c.cost - collects) / c.cost.max(1e-9)
    };
    let n = generated.columns.len();
    let used = |i: usize| start[i] > 0 || generated.lp_values.get(i).is_some_and(|&v| v > 1e-9);
    let mut kept: Vec<usize> = (0..n).filter(|&i| used(i)).collect();
    let mut near: Vec<(f64, usize)> = (0..n).filter(|&i| !used(i)).map(|i| (reduced(i), i)).filter(|&(r, _)| r <= MIP_REDUCED_COST).collect();
    near.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    let room = MIP_ALL_COLUMNS.saturating_sub(kept.len());
    kept.extend(near.into_iter().take(room).map(|(_, i)| i));
    kept.sort_unstable();
    kept
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::optimizer::milp::{columns_and_bound, primal, relax, Unproven};

    #[test]
    fn the_integer_program_places_every_pod_for_no_more_than_its_start() {
        let p = Problem::build(&crate::workload::generic(150, 9), &crate::optimizer::fixtures::tiny_catalog());
        let demand: Vec<u32> = p.classes.iter().map(|c| c.demand() as u32).collect();
        let relaxed = relax::Relaxed { problem: p.clone(), of_class: (0..p.classes.len()).collect(), demand: demand.clone() };
        let settings = SolveSettings { time_limit: std::time::Duration::from_secs(2), lower_bound: false, ..Default::default() };
        let generated = columns_and_bound(&p, &settings, &relaxed.seed(), &demand, Unproven::Large).expect("the lp solves");
        let values: Vec<f64> = generated.pod_prices.iter().map(|v| v.max(primal::MIN_POD_VALUE)).collect();
        let start = primal::cover_counts(&generated.columns, &generated.lp_values, 0, &demand, &values);
        let bought = copies(&p, &demand, &generated, &start, &settings, 2.0).expect("the start is an answer");
        let cost = |copies: &[u32]| generated.columns.iter().zip(copies).map(|(c, &n)| c.cost * f64::from(n)).sum::<f64>();
        let mut placed = vec![0u32; demand.len()];
        for (c, &n) in generated.columns.iter().zip(&bought.copies) {
            for &(k, m) in &c.counts {
                placed[k] += m * n;
            }
        }
        assert!(placed.iter().zip(&demand).all(|(got, want)| got >= want), "{placed:?} against {demand:?}");
        assert!(cost(&bought.copies) <= cost(&start) + 1e-9, "{} against the start's {}", cost(&bought.copies), cost(&start));
        // the lp bounds every integer answer
        let lp: f64 = generated.columns.iter().zip(&generated.lp_values).map(|(c, v)| c.cost * v).sum();
        assert!(lp <= cost(&bought.copies) + 1e-6);
    }
}

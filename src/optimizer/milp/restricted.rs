//! HiGHS's integer program over the patterns a column generation left (the restricted master),
//! started from a rounding of its LP: how many nodes of each pattern to buy so that every pod is
//! placed at least cost. The relaxation's candidate (`lift.rs`) asks it where no zone rule is left
//! to settle (a problem whose zones were pinned first, `pin.rs`): the zone program it replaces
//! there may leave pods unplaced (each valued at twice its LP dual), which the greedy repair then
//! places a few to a node, dearly. Patterns are picked as for the full model's integer solve: those
//! the LP uses, those the start uses, and those nearly pricing in ([`kept`]). When the whole
//! program does not prove its answer in time, a smaller one buys only what the LP's copies rounded
//! down leave ([`residual`]), and the cheaper answer is kept.

use std::collections::BTreeMap;

use highs::{HighsModelStatus, Sense};

use super::super::highs_options::SolverOptions;
use super::super::problem::Problem;
use super::super::SolveSettings;
use super::columns::{Bin, BinInfo, Column};
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
///
/// When the whole program does not prove its answer within [`WHOLE_SHARE`] of the time, the LP's
/// copies rounded down are kept and a smaller program buys only what they leave ([`residual`]);
/// the cheaper answer is kept.
pub fn copies(
    p: &Problem,
    demand: &[u32],
    generated: &Generation,
    start: &[u32],
    settings: &SolveSettings,
    seconds: f64,
) -> Option<Bought> {
    let began = std::time::Instant::now();
    let kept = kept(generated, start);
    let cost = |copies: &[u32]| {
        generated
            .columns
            .iter()
            .zip(copies)
            .map(|(c, &n)| c.cost * f64::from(n))
            .sum::<f64>()
    };
    let columns: Vec<_> = kept.iter().map(|&i| generated.columns[i].clone()).collect();
    let at: Vec<u32> = kept.iter().map(|&i| start[i]).collect();
    let bins = bins(p);
    let (bought, proven) = integer(
        p,
        &bins,
        demand,
        &columns,
        &at,
        settings,
        seconds * WHOLE_SHARE,
    )?;
    let mut copies = vec![0u32; generated.columns.len()];
    for (j, &i) in kept.iter().enumerate() {
        copies[i] = bought[j];
    }
    tracing::debug!(
        proven,
        patterns = kept.len(),
        cost = cost(&copies),
        "restricted master's integer program"
    );
    if proven {
        return Some(Bought { copies, proven });
    }
    match residual(
        p,
        &bins,
        demand,
        generated,
        (&kept, &columns),
        settings,
        seconds - began.elapsed().as_secs_f64(),
    ) {
        Some(fixed) if cost(&fixed) < cost(&copies) - 1e-9 => {
            tracing::debug!(cost = cost(&fixed), "restricted master's residual program");
            Some(Bought {
                copies: fixed,
                proven: false,
            })
        }
        _ => Some(Bought { copies, proven }),
    }
}

/// The share of the time the whole integer program gets before the residual one may try.
const WHOLE_SHARE: f64 = 0.6;

/// The LP's copies rounded down, plus the copies an integer program over the same patterns buys
/// for the pods they leave (copies per pattern of `generated`, every pod placed); None where the
/// two parts could together break a rule the residual program does not see (NodePool limits, an
/// existing node), when nothing is left or HiGHS has no answer. With thousands of pods the whole
/// program's copies run to dozens per pattern and HiGHS stays far from its bound (at 10,000 pods
/// of the diverse mix, zones pinned, 39.84 $/h after 3.2 s against an LP of 38.68), while the pods
/// the rounding leaves are a few hundred.
fn residual(
    p: &Problem,
    bins: &[BinInfo],
    demand: &[u32],
    generated: &Generation,
    (kept, columns): (&[usize], &[Column]),
    settings: &SolveSettings,
    seconds: f64,
) -> Option<Vec<u32>> {
    if p.pools.iter().any(|pool| pool.remaining.is_some()) {
        return None;
    }
    let floors: Vec<u32> = generated
        .lp_values
        .iter()
        .map(|&v| super::primal::round_down(v).max(0.0) as u32)
        .chain(std::iter::repeat(0))
        .take(generated.columns.len())
        .collect();
    let mut left: Vec<i64> = demand.iter().map(|&d| i64::from(d)).collect();
    for (c, &n) in generated.columns.iter().zip(&floors) {
        if n > 0 && matches!(c.bin, Bin::Existing(_)) {
            return None;
        }
        for &(k, m) in &c.counts {
            left[k] -= i64::from(m) * i64::from(n);
        }
    }
    let left: Vec<u32> = left.iter().map(|&l| l.max(0) as u32).collect();
    if left.iter().all(|&l| l == 0) {
        return Some(floors);
    }
    let values: Vec<f64> = generated
        .pod_prices
        .iter()
        .map(|v| v.max(super::primal::MIN_POD_VALUE))
        .collect();
    let start = super::primal::cover_counts(columns, &[], 0, &left, &values);
    let (bought, _) = integer(p, bins, &left, columns, &start, settings, seconds)?;
    let mut copies = floors;
    for (j, &i) in kept.iter().enumerate() {
        copies[i] += bought[j];
    }
    Some(copies)
}

/// HiGHS's integer program over `columns` placing `demand[k]` pods of each class, from `start`
/// (copies per column, every pod placed): copies per column and whether HiGHS proved them optimal.
/// Where HiGHS hands back the start under an objective it does not have, the rest of the time goes
/// to a solve without presolve, and the cheaper answer is kept: at 100 pods of the diverse mix
/// (zones pinned, 10 s) the candidate's residual program then bought 0.3869 $/h where it had kept
/// the start's 0.3954.
fn integer(
    p: &Problem,
    bins: &[BinInfo],
    demand: &[u32],
    columns: &[Column],
    start: &[u32],
    settings: &SolveSettings,
    seconds: f64,
) -> Option<(Vec<u32>, bool)> {
    let bin_index: BTreeMap<Bin, usize> =
        bins.iter().enumerate().map(|(i, b)| (b.bin, i)).collect();
    let master = Master::build(p, demand, bins);
    // a start needs a value for every auxiliary column; only unplaced pods have an obvious one
    if !master
        .aux
        .iter()
        .all(|a| matches!(a.kind, AuxKind::Unplaced(_)))
    {
        return None;
    }
    let mut placed = vec![0u32; demand.len()];
    for (c, &n) in columns.iter().zip(start) {
        for &(k, m) in &c.counts {
            placed[k] += m * n;
        }
    }
    let mut values: Vec<f64> = master
        .aux
        .iter()
        .map(|a| {
            if let AuxKind::Unplaced(k) = a.kind {
                f64::from(demand[k].saturating_sub(placed[k]))
            } else {
                0.0
            }
        })
        .collect();
    values.extend(start.iter().map(|&n| f64::from(n)));
    let began = std::time::Instant::now();
    let first = solve_once(
        p,
        &master,
        (bins, &bin_index),
        columns,
        &values,
        settings,
        (seconds, false),
    )?;
    let left = seconds - began.elapsed().as_secs_f64();
    if first.agrees || left < MIN_RETRY_SECONDS {
        return Some((first.copies, first.proven));
    }
    // HiGHS handed back the start under an objective it does not have (see `solve_once`): its
    // presolve is what goes wrong, so the rest of the time goes to a solve without it
    match solve_once(
        p,
        &master,
        (bins, &bin_index),
        columns,
        &values,
        settings,
        (left, true),
    ) {
        Some(second)
            if second.cost < first.cost - 1e-9
                || (second.proven && second.cost <= first.cost + 1e-9) =>
        {
            Some((second.copies, second.proven))
        }
        _ => Some((first.copies, first.proven)),
    }
}

/// The least time left worth a second solve without presolve, seconds.
const MIN_RETRY_SECONDS: f64 = 0.05;

/// One answer of HiGHS's integer program: copies per column, whether proven optimal, whether its
/// objective is that of the copies it handed back, and their cost.
struct Answer {
    copies: Vec<u32>,
    proven: bool,
    agrees: bool,
    cost: f64,
}

/// HiGHS's integer program over `columns` from the start `values` (aux columns, then copies),
/// within `seconds`, with or without presolve.
fn solve_once(
    p: &Problem,
    master: &Master,
    (bins, bin_index): (&[BinInfo], &BTreeMap<Bin, usize>),
    columns: &[Column],
    values: &[f64],
    settings: &SolveSettings,
    (seconds, presolve_off): (f64, bool),
) -> Option<Answer> {
    let mut model = build_lp(p, master, bins, bin_index, columns, true).optimise(Sense::Minimise);
    // HiGHS checks the start and ignores it if it is infeasible: a hint, never a constraint
    let _ = model.try_set_solution(Some(values), None, None, None);
    let options = SolverOptions {
        mip_rel_gap: Some(settings.gap),
        presolve: presolve_off.then_some(false),
        ..SolverOptions::default()
    };
    configure(&mut model, settings, seconds.max(0.01), options);
    let solved = run(model, settings, "restricted master mip").ok()?;
    if !crate::optimizer::highs_options::has_feasible_point(&solved) {
        return None;
    }
    let solution = solved.get_solution();
    let offset = master.aux.len();
    let copies: Vec<u32> = (0..columns.len())
        .map(|j| solution.columns()[offset + j].round().max(0.0) as u32)
        .collect();
    // HiGHS sometimes reports an optimum it found in its presolved space while handing back the
    // start (at 100 pods of the diverse mix, zones pinned, 0.5 s: "optimal" at 0.3843 $/h with the
    // start's 0.4071 as the solution; at 10 s, 0.3508 with the start's 0.3954, below the LP's
    // 0.3738): the answer is what it hands back, and only proven when the two agree
    let cost: f64 = columns
        .iter()
        .zip(&copies)
        .map(|(c, &n)| c.cost * f64::from(n))
        .sum::<f64>()
        + master
            .aux
            .iter()
            .zip(solution.columns())
            .map(|(a, v)| a.cost * v)
            .sum::<f64>();
    let agrees = (cost - solved.objective_value()).abs() <= 1e-6 * (1.0 + cost.abs());
    let proven = solved.status() == HighsModelStatus::Optimal && agrees;
    tracing::debug!(
        proven,
        agrees,
        objective = solved.objective_value(),
        cost,
        presolve_off,
        "restricted integer program"
    );
    Some(Answer {
        copies,
        proven,
        agrees,
        cost,
    })
}

/// Indices of the patterns the program sees: those the LP or the start uses, then the rest by
/// reduced cost (under the LP's pod prices) relative to cost, while within the full model's
/// [`MIP_REDUCED_COST`] and, all told, its [`MIP_ALL_COLUMNS`] (HiGHS's presolve and root cut
/// rounds do not watch the clock, and grow with the columns).
fn kept(generated: &Generation, start: &[u32]) -> Vec<usize> {
    let reduced = |i: usize| {
        let c = &generated.columns[i];
        let collects: f64 = c
            .counts
            .iter()
            .map(|&(k, n)| f64::from(n) * generated.pod_prices[k])
            .sum();
        (c.cost - collects) / c.cost.max(1e-9)
    };
    let n = generated.columns.len();
    let used = |i: usize| start[i] > 0 || generated.lp_values.get(i).is_some_and(|&v| v > 1e-9);
    let mut kept: Vec<usize> = (0..n).filter(|&i| used(i)).collect();
    let mut near: Vec<(f64, usize)> = (0..n)
        .filter(|&i| !used(i))
        .map(|i| (reduced(i), i))
        .filter(|&(r, _)| r <= MIP_REDUCED_COST)
        .collect();
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
        let p = Problem::build(
            &crate::workload::generic(150, 9),
            &crate::optimizer::fixtures::tiny_catalog(),
        );
        let demand: Vec<u32> = p.classes.iter().map(|c| c.demand() as u32).collect();
        let relaxed = relax::Relaxed {
            problem: p.clone(),
            of_class: (0..p.classes.len()).collect(),
            demand: demand.clone(),
        };
        let settings = SolveSettings {
            time_limit: std::time::Duration::from_secs(2),
            lower_bound: false,
            ..Default::default()
        };
        let generated = columns_and_bound(&p, &settings, &relaxed.seed(), &demand, Unproven::Large)
            .expect("the lp solves");
        let values: Vec<f64> = generated
            .pod_prices
            .iter()
            .map(|v| v.max(primal::MIN_POD_VALUE))
            .collect();
        let start = primal::cover_counts(
            &generated.columns,
            &generated.lp_values,
            0,
            &demand,
            &values,
        );
        let bought = copies(&p, &demand, &generated, &start, &settings, 2.0)
            .expect("the start is an answer");
        let cost = |copies: &[u32]| {
            generated
                .columns
                .iter()
                .zip(copies)
                .map(|(c, &n)| c.cost * f64::from(n))
                .sum::<f64>()
        };
        let mut placed = vec![0u32; demand.len()];
        for (c, &n) in generated.columns.iter().zip(&bought.copies) {
            for &(k, m) in &c.counts {
                placed[k] += m * n;
            }
        }
        assert!(
            placed.iter().zip(&demand).all(|(got, want)| got >= want),
            "{placed:?} against {demand:?}"
        );
        assert!(
            cost(&bought.copies) <= cost(&start) + 1e-9,
            "{} against the start's {}",
            cost(&bought.copies),
            cost(&start)
        );
        // the lp bounds every integer answer
        let lp: f64 = generated
            .columns
            .iter()
            .zip(&generated.lp_values)
            .map(|(c, v)| c.cost * v)
            .sum();
        assert!(lp <= cost(&bought.copies) + 1e-6);
        // the residual program keeps the lp's copies rounded down and places every pod too
        let kept = kept(&generated, &start);
        let columns: Vec<_> = kept.iter().map(|&i| generated.columns[i].clone()).collect();
        let fixed = residual(
            &p,
            &bins(&p),
            &demand,
            &generated,
            (&kept, &columns),
            &settings,
            2.0,
        )
        .expect("no limits, no existing nodes");
        let mut placed = vec![0u32; demand.len()];
        for ((c, &n), &v) in generated
            .columns
            .iter()
            .zip(&fixed)
            .zip(&generated.lp_values)
        {
            assert!(
                n >= primal::round_down(v) as u32,
                "{n} copies of a pattern the lp bought {v} of"
            );
            for &(k, m) in &c.counts {
                placed[k] += m * n;
            }
        }
        assert!(
            placed.iter().zip(&demand).all(|(got, want)| got >= want),
            "{placed:?} against {demand:?}"
        );
        assert!(lp <= cost(&fixed) + 1e-6);
    }
}

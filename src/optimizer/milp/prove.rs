//! A bin's pricing knapsack as a small integer program for HiGHS, for the bins the depth-first
//! search (`exact`) could not settle within its node budget. Those are mostly large nodes that hold
//! hundreds of small pods of a few dozen classes: branching on counts from the most down explodes
//! there, while HiGHS's cuts and LP bound close them in a few milliseconds.
//!
//! The program is the node's rules written as rows: fit per resource, hostname spread caps (after
//! the pods an existing node already has), per-class caps, and classes that may not share a node
//! (one indicator per class, at most one of each conflicting pair). Its answer serves twice: a
//! proven optimum settles the bin for column generation (its pattern enters the LP when it prices
//! in), and HiGHS's dual bound, proven or not, caps what any pattern of the bin can collect for
//! Farley's ratio.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use highs::{HighsModelStatus, RowProblem, Sense};

use super::super::highs_options::SolverOptions;
use super::super::problem::Problem;
use super::columns::{host_counts, valid, BinInfo, NodeRules};

/// The most HiGHS may spend on one bin's knapsack. Open bins are few once the greedy fill has
/// stopped finding patterns (4 of 99 on 200 generic pods, settled in a few milliseconds each).
pub const BIN_SECONDS: f64 = 0.05;

/// What HiGHS said about one bin's knapsack.
#[derive(Debug, Clone, PartialEq)]
pub struct Knapsack {
    /// No pattern of the bin collects more than this (value less the bin's per-pod penalties).
    pub upper: f64,
    /// The best pattern found (classes ascending), valid under the node's rules, and what it
    /// collects.
    pub best: Vec<(usize, u32)>,
    pub best_value: f64,
    /// Whether `best` is proven optimal (then `upper` is `best_value`, up to tolerances).
    pub proven: bool,
}

/// Solves the bin's knapsack: maximise Σ n_k (value[k] − penalty_k) over patterns of at most
/// `limit[k]` pods per class that obey the node's rules. `existing_host` holds the pods of each
/// hostname spread group already on the node. None when HiGHS fails or gives no usable bound.
pub fn solve(
    p: &Problem,
    rules: &NodeRules,
    bin: &BinInfo,
    value: &[f64],
    limit: &[u32],
    existing_host: &[(usize, i64)],
    time: Duration,
) -> Option<Knapsack> {
    solve_within(p, rules, bin, value, limit, existing_host, time, None)
}

/// [`solve`] within what is left before `until`, and at most [`BIN_SECONDS`]; None when no time is
/// left or HiGHS gives no answer.
pub fn until(
    p: &Problem,
    rules: &NodeRules,
    bin: &BinInfo,
    value: &[f64],
    limit: &[u32],
    existing_host: &[(usize, i64)],
    until: Instant,
) -> Option<Knapsack> {
    let left = until
        .saturating_duration_since(Instant::now())
        .as_secs_f64()
        .min(BIN_SECONDS);
    (left > 1e-3)
        .then(|| {
            solve(
                p,
                rules,
                bin,
                value,
                limit,
                existing_host,
                Duration::from_secs_f64(left),
            )
        })
        .flatten()
}

/// [`solve`], stopped after `max_nodes` branch-and-bound nodes when given (tests stop it short).
#[allow(clippy::too_many_arguments)]
fn solve_within(
    p: &Problem,
    rules: &NodeRules,
    bin: &BinInfo,
    value: &[f64],
    limit: &[u32],
    existing_host: &[(usize, i64)],
    time: Duration,
    max_nodes: Option<i32>,
) -> Option<Knapsack> {
    let host_left: Vec<i64> = rules
        .host_caps
        .iter()
        .zip(host_counts(rules, existing_host))
        .map(|((_, cap, _), used)| cap - used)
        .collect();
    let items = items(p, rules, bin, value, limit, &host_left);
    if items.is_empty() {
        return Some(Knapsack {
            upper: 0.0,
            best: vec![],
            best_value: 0.0,
            proven: true,
        });
    }
    let mut pb = RowProblem::default();
    let cols: Vec<highs::Col> = items
        .iter()
        .map(|&(_, w, ub)| pb.add_integer_column(w, 0.0..=f64::from(ub)))
        .collect();
    for (d, &room) in bin.room.iter().enumerate() {
        let row: Vec<(highs::Col, f64)> = items
            .iter()
            .zip(&cols)
            .filter(|((k, _, _), _)| p.classes[*k].req[d] > 0)
            .map(|((k, _, _), &c)| (c, p.classes[*k].req[d] as f64))
            .collect();
        if !row.is_empty() {
            pb.add_row(..=room.max(0) as f64, row);
        }
    }
    for (hi, (members, _, _)) in rules.host_caps.iter().enumerate() {
        let row: Vec<(highs::Col, f64)> = items
            .iter()
            .zip(&cols)
            .filter(|((k, _, _), _)| members.contains(k))
            .map(|(_, &c)| (c, 1.0))
            .collect();
        if row.len() > 1 {
            pb.add_row(..=host_left[hi].max(0) as f64, row);
        }
    }
    // classes that may not share a node: an indicator per class that has a conflict among the items
    let position: BTreeMap<usize, usize> = items
        .iter()
        .enumerate()
        .map(|(i, &(k, _, _))| (k, i))
        .collect();
    let mut used: BTreeMap<usize, highs::Col> = BTreeMap::new();
    for &(a, b) in &rules.conflicts {
        let (Some(&ia), Some(&ib)) = (position.get(&a), position.get(&b)) else {
            continue;
        };
        let mut indicator = |i: usize| {
            *used.entry(i).or_insert_with(|| {
                let z = pb.add_integer_column(0.0, 0.0..=1.0);
                pb.add_row(..=0.0, [(cols[i], 1.0), (z, -f64::from(items[i].2))]);
                z
            })
        };
        let (za, zb) = (indicator(ia), indicator(ib));
        pb.add_row(..=1.0, [(za, 1.0), (zb, 1.0)]);
    }
    let mut model = pb.optimise(Sense::Maximise);
    SolverOptions {
        quiet: true,
        threads: Some(1),
        random_seed: Some(0),
        time_limit: Some(time.as_secs_f64().max(0.001)),
        mip_rel_gap: Some(1e-9),
        mip_abs_gap: Some(1e-9),
        mip_max_nodes: max_nodes,
        ..SolverOptions::default()
    }
    .apply(&mut model);
    let solved = model.try_solve().ok()?;
    let status = solved.status();
    let has_point = crate::optimizer::highs_options::has_feasible_point(&solved);
    let dual = solved
        .double_info_value(c"mip_dual_bound")
        .ok()
        .filter(|d| d.is_finite());
    let (best, best_value) = if has_point {
        pattern(
            p,
            rules,
            bin,
            &items,
            solved.get_solution().columns(),
            &host_left,
        )
    } else {
        (vec![], 0.0)
    };
    let proven = status == HighsModelStatus::Optimal;
    // the solve's tolerances (feasibility 1e-7 per row) could let its bound sit a hair low
    let slack = |u: f64| u + 1e-9 * u.abs() + 1e-9;
    let upper = match (proven, dual) {
        (true, _) => slack(solved.objective_value().max(best_value)),
        (false, Some(d)) if d >= best_value => slack(d),
        _ => return None,
    };
    Some(Knapsack {
        upper,
        proven: proven && best_value >= upper - 1e-6 * upper.abs() - 1e-8,
        best,
        best_value,
    })
}

/// The classes worth packing: (class, value less penalty, most pods of it the node may hold).
fn items(
    p: &Problem,
    rules: &NodeRules,
    bin: &BinInfo,
    value: &[f64],
    limit: &[u32],
    host_left: &[i64],
) -> Vec<(usize, f64, u32)> {
    let mut out = Vec::new();
    for &(k, pen) in &bin.classes {
        let w = value[k] - pen;
        let mut ub = limit[k].min(rules.per_node_cap[k]);
        for (r, a) in p.classes[k].req.iter().zip(&bin.room) {
            if *r > 0 {
                ub = ub.min((*a / *r).max(0) as u32);
            }
        }
        for &hi in &rules.host_groups_of[k] {
            ub = ub.min(host_left[hi].max(0) as u32);
        }
        if w > 1e-9 && ub > 0 {
            out.push((k, w, ub));
        }
    }
    out
}

/// HiGHS's point rounded to whole pods, and what it collects; empty when rounding broke a rule.
fn pattern(
    p: &Problem,
    rules: &NodeRules,
    bin: &BinInfo,
    items: &[(usize, f64, u32)],
    x: &[f64],
    host_left: &[i64],
) -> (Vec<(usize, u32)>, f64) {
    let counts: Vec<(usize, u32)> = items
        .iter()
        .zip(x)
        .map(|(&(k, _, _), &v)| (k, v.round().max(0.0) as u32))
        .filter(|&(_, n)| n > 0)
        .collect();
    let host_ok = rules
        .host_caps
        .iter()
        .enumerate()
        .all(|(hi, (members, _, _))| {
            counts
                .iter()
                .filter(|(k, _)| members.contains(k))
                .map(|&(_, n)| i64::from(n))
                .sum::<i64>()
                <= host_left[hi]
        });
    if !host_ok || !valid(p, rules, bin, &counts) {
        return (vec![], 0.0);
    }
    let worth = counts
        .iter()
        .map(|&(k, n)| items.iter().find(|i| i.0 == k).map_or(0.0, |i| i.1) * f64::from(n))
        .sum();
    (counts, worth)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::Catalog;
    use crate::optimizer::milp::{bins, exact};

    fn worth(bin: &BinInfo, value: &[f64], counts: &[(usize, u32)]) -> f64 {
        counts
            .iter()
            .map(|&(k, n)| {
                (value[k] - bin.classes.iter().find(|c| c.0 == k).map_or(0.0, |c| c.1))
                    * f64::from(n)
            })
            .sum()
    }

    #[test]
    fn highs_finds_the_pattern_the_settled_search_finds() {
        let catalog = crate::optimizer::fixtures::tiny_catalog();
        let mut checked = 0;
        for seed in 0..12u64 {
            // anti-affinity cliques, hostname spread groups and conflicts, as in the exact search's
            // test
            let p = Problem::build(&crate::workload::diverse(14, seed), &catalog);
            let rules = NodeRules::build(&p);
            let limit: Vec<u32> = p.classes.iter().map(|c| c.demand() as u32).collect();
            let mut rng = crate::workload::Rng(seed);
            for bin in bins(&p) {
                let value: Vec<f64> = (0..p.classes.len())
                    .map(|_| rng.unit() * 0.04 - 0.005)
                    .collect();
                let want = exact::pack_exact(&p, &rules, &bin, &value, &limit, &[], 0.0, 1_000_000)
                    .expect("settles");
                let got = solve(
                    &p,
                    &rules,
                    &bin,
                    &value,
                    &limit,
                    &[],
                    Duration::from_secs(5),
                )
                .expect("highs answers");
                assert!(got.proven, "seed {seed}: not proven");
                assert!(
                    (got.best_value - worth(&bin, &value, &want)).abs() < 1e-9,
                    "seed {seed}: highs {got:?} vs search {want:?}"
                );
                assert!(
                    (got.best_value - worth(&bin, &value, &got.best)).abs() < 1e-12
                        && got.upper >= got.best_value
                );
                checked += usize::from(got.best_value > 0.0 && got.best.len() > 1);
            }
        }
        assert!(
            checked >= 10,
            "only {checked} bins with a mixed pattern worth something"
        );
    }

    /// A diverse 200-pod problem, values roughly in proportion to size as duals are (on large
    /// nodes many patterns come close), and the first bins the depth-first search leaves open, with
    /// the best pattern it found in each.
    type Open = (
        Problem,
        NodeRules,
        Vec<u32>,
        Vec<f64>,
        Vec<(BinInfo, Vec<(usize, u32)>)>,
    );

    fn open_bins() -> Open {
        let catalog = Catalog::bundled("us-east-1").expect("bundled catalog");
        let p = Problem::build(&crate::workload::diverse(200, 5), &catalog);
        let rules = NodeRules::build(&p);
        let limit: Vec<u32> = p.classes.iter().map(|c| c.demand() as u32).collect();
        let mut rng = crate::workload::Rng(7);
        let value: Vec<f64> = p
            .classes
            .iter()
            .map(|c| (c.req[0] as f64 * 1e-5 + c.req[1] as f64 * 2e-12) * (0.8 + 0.4 * rng.unit()))
            .collect();
        let open = bins(&p)
            .into_iter()
            .filter_map(|bin| {
                let (found, settled) =
                    exact::pack_best(&p, &rules, &bin, &value, &limit, &[], 0.0, 20_000);
                (!settled).then_some((bin, found))
            })
            .take(4)
            .collect();
        (p, rules, limit, value, open)
    }

    #[test]
    fn highs_settles_large_bins_the_search_leaves_open() {
        let (p, rules, limit, value, open) = open_bins();
        assert!(!open.is_empty(), "the search settled every bin");
        for (bin, found) in &open {
            let got = solve(&p, &rules, bin, &value, &limit, &[], Duration::from_secs(5))
                .expect("highs answers");
            assert!(got.proven, "{:?}: not proven: {got:?}", bin.bin);
            assert!(
                got.best_value >= worth(bin, &value, found) - 1e-9,
                "{:?}: highs {} below the search's {}",
                bin.bin,
                got.best_value,
                worth(bin, &value, found)
            );
            assert!(valid(&p, &rules, bin, &got.best) && got.upper >= got.best_value);
        }
    }

    #[test]
    fn a_cut_short_solve_still_bounds_the_best_pattern() {
        let (p, rules, limit, value, open) = open_bins();
        let mut cut_short = 0;
        for (bin, _) in &open {
            let full = solve(&p, &rules, bin, &value, &limit, &[], Duration::from_secs(5))
                .expect("highs answers");
            // a bound from a solve stopped after its first node is no lower than the optimum
            if let Some(short) = solve_within(
                &p,
                &rules,
                bin,
                &value,
                &limit,
                &[],
                Duration::from_secs(5),
                Some(1),
            ) {
                assert!(
                    short.upper >= full.best_value - 1e-9,
                    "{:?}: {} below {}",
                    bin.bin,
                    short.upper,
                    full.best_value
                );
                cut_short += usize::from(!short.proven);
            }
        }
        assert!(
            cut_short > 0,
            "every short solve was proven or gave nothing"
        );
    }
}

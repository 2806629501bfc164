//! Primal heuristics: turn the column-generation LP into integer node counts fast. Rounding down
//! keeps what the LP is sure of; the residual cover then adds whole patterns by value per dollar
//! under the LP duals; diving re-solves the LP with rounded patterns fixed. The caller replays
//! every candidate and keeps the cheapest, so a heuristic may be rough but never unsafe.

use std::collections::BTreeMap;
use std::time::Instant;

use highs::HighsModelStatus;

use super::super::highs_options::{Simplex, SolverOptions};
use super::super::problem::Problem;
use super::super::SolveSettings;
use super::columns::{column_cost, Bin, BinInfo, Column};
use super::configure;
use super::master::Master;

/// An LP's values rounded down, and rounded down with the residual covered by whole patterns (pods
/// valued at their demand row's dual, at most what a node of their own costs); `tag` names the LP.
#[allow(clippy::too_many_arguments)]
pub fn rounded(
    p: &Problem,
    master: &Master,
    columns: &[Column],
    values: &[f64],
    duals: &[f64],
    demand: &[u32],
    alone: &[f64],
    tag: &str,
) -> Vec<(String, Vec<(Column, u32)>)> {
    let offset = master.aux.len();
    let down = nodes_of(columns, values, offset, round_down);
    let pod_value = pod_values(p, master, duals, alone);
    vec![
        (
            format!("{tag}-round-cover"),
            round_and_cover(columns, values, offset, demand, &pod_value),
        ),
        (format!("{tag}-round-down"), down),
    ]
}

/// What the cover counts a pod of each class worth: its demand row's dual, at most what a node of
/// its own costs (`alone`), and never nothing.
pub fn pod_values(p: &Problem, master: &Master, duals: &[f64], alone: &[f64]) -> Vec<f64> {
    (0..p.classes.len())
        .map(|k| {
            master
                .demand_dual(duals, k)
                .max(0.0)
                .min(alone[k])
                .max(MIN_POD_VALUE)
        })
        .collect()
}

/// What the cover counts a pod worth at least, $/h: a class whose LP dual is zero still wants its
/// pods placed.
pub(super) const MIN_POD_VALUE: f64 = 1e-6;

/// The patterns an LP's values (aux variables first, from `offset` the patterns) give at least one
/// node once rounded, with their node counts.
pub fn nodes_of(
    columns: &[Column],
    values: &[f64],
    offset: usize,
    round: fn(f64) -> f64,
) -> Vec<(Column, u32)> {
    columns
        .iter()
        .enumerate()
        .filter_map(|(i, c)| {
            let n = round(values.get(offset + i).copied().unwrap_or(0.0));
            (n >= 1.0).then(|| (c.clone(), n as u32))
        })
        .collect()
}

/// Rounds the LP down, then covers the residual demand with the generated patterns, best value per
/// unit cost first (value of a pod = its demand row's dual, or what a node of its own costs).
pub fn round_and_cover(
    columns: &[Column],
    lp: &[f64],
    offset: usize,
    demand: &[u32],
    pod_value: &[f64],
) -> Vec<(Column, u32)> {
    let counts = cover_counts(columns, lp, offset, demand, pod_value);
    columns
        .iter()
        .zip(counts)
        .filter(|(_, n)| *n > 0)
        .map(|(c, n)| (c.clone(), n))
        .collect()
}

/// [`round_and_cover`]'s copies of each pattern, in the order of `columns`.
pub fn cover_counts(
    columns: &[Column],
    lp: &[f64],
    offset: usize,
    demand: &[u32],
    pod_value: &[f64],
) -> Vec<u32> {
    let mut counts: Vec<u32> = (0..columns.len())
        .map(|j| round_down(lp.get(offset + j).copied().unwrap_or(0.0)) as u32)
        .collect();
    let mut residual: Vec<i64> = demand.iter().map(|&d| i64::from(d)).collect();
    for (j, c) in columns.iter().enumerate() {
        for &(k, n) in &c.counts {
            residual[k] -= i64::from(n) * i64::from(counts[j]);
        }
    }
    loop {
        let mut best: Option<(f64, usize)> = None;
        for (j, c) in columns.iter().enumerate() {
            let value: f64 = c
                .counts
                .iter()
                .map(|&(k, n)| residual[k].clamp(0, i64::from(n)) as f64 * pod_value[k])
                .sum();
            // an infinite cost marks a pattern the caller rules out
            if value <= 0.0 || !c.cost.is_finite() {
                continue;
            }
            let ratio = value / c.cost.max(1e-9);
            if best.is_none_or(|(r, _)| ratio > r) {
                best = Some((ratio, j));
            }
        }
        let Some((_, j)) = best else { break };
        counts[j] += 1;
        for &(k, n) in &columns[j].counts {
            residual[k] -= i64::from(n);
        }
    }
    counts
}

/// What a dive committed, and what it leaves.
pub struct Dived {
    /// Whole nodes committed, each pattern trimmed to the pods still wanted when it was taken.
    pub nodes: Vec<(Column, u32)>,
    /// The last LP's values, over the demand the committed nodes leave.
    pub values: Vec<f64>,
    /// Pods per class the committed nodes leave.
    pub residual: Vec<u32>,
    pub steps: usize,
}

/// The problem a dive works on: the LP's model and what its rows and columns mean.
pub struct DiveInput<'a> {
    pub p: &'a Problem,
    pub master: &'a Master,
    pub bins: &'a [BinInfo],
    pub bin_index: &'a BTreeMap<Bin, usize>,
    pub columns: &'a [Column],
    pub demand: &'a [u32],
}

/// Residual diving: commits whole nodes of the patterns the LP uses (every whole node it already
/// uses, else one node of its most used pattern), trims each to the pods still wanted, moves every
/// row's bounds by what the committed nodes contribute, and re-solves from the previous basis,
/// until no pod is left or time is up. Surplus pods never enter the rows: fixing pattern counts
/// instead (the earlier dive) made zone-spread rows demand ever more nodes to balance pods no plan
/// would place ($412/h against an LP of $26 on the scale-in benchmark).
pub fn dive(
    mut model: highs::Model,
    settings: &SolveSettings,
    input: &DiveInput<'_>,
    until: f64,
    start: Instant,
) -> Dived {
    let DiveInput {
        p,
        master,
        bins,
        bin_index,
        columns,
        demand,
    } = *input;
    let offset = master.aux.len();
    let mut bounds: Vec<(f64, f64)> = master.rows.iter().map(|r| (r.lower, r.upper)).collect();
    let mut out = Dived {
        nodes: Vec::new(),
        values: Vec::new(),
        residual: demand.to_vec(),
        steps: 0,
    };
    while start.elapsed().as_secs_f64() < until && out.residual.iter().any(|&r| r > 0) {
        out.steps += 1;
        let warm = SolverOptions::warm_lp(Simplex::Dual);
        configure(
            &mut model,
            settings,
            settings.time_limit.as_secs_f64(),
            warm,
        );
        let Ok(solved) = super::run(model, settings, "dive lp") else {
            break;
        };
        if solved.status() != HighsModelStatus::Optimal {
            tracing::trace!(status = ?solved.status(), "dive lp failed");
            break;
        }
        out.values = solved.get_solution().columns().to_vec();
        tracing::trace!(
            step = out.steps,
            objective = solved.objective_value(),
            left = out.residual.iter().sum::<u32>(),
            "dive step"
        );
        model = solved.into();
        let x = |j: usize| out.values.get(offset + j).copied().unwrap_or(0.0);
        // a pattern is worth committing when it is not an existing node's fixed load and still
        // holds a wanted pod (the LP may keep one for its rows alone)
        let residual = &out.residual;
        let open = |j: usize| {
            bins[bin_index[&columns[j].bin]].preload.is_empty()
                && columns[j].counts.iter().any(|&(k, _)| residual[k] > 0)
        };
        let mut take: Vec<(usize, u32)> = (0..columns.len())
            .filter(|&j| open(j) && x(j) >= 1.0 - 1e-6)
            .map(|j| (j, round_down(x(j)) as u32))
            .collect();
        if take.is_empty() {
            // one node of the pattern the LP uses most (weighting by the pods still wanted in it
            // did worse on the scale-in benchmark: $26.65/h against $26.57/h)
            let most = (0..columns.len())
                .filter(|&j| open(j) && x(j) > 1e-6)
                .max_by(|&a, &b| x(a).total_cmp(&x(b)).then(b.cmp(&a)));
            take.extend(most.map(|j| (j, 1)));
        }
        if take.is_empty() {
            break;
        }
        let mut moved: BTreeMap<usize, f64> = BTreeMap::new();
        for (j, n) in take {
            let c = &columns[j];
            let bin = &bins[bin_index[&c.bin]];
            for _ in 0..n {
                let trimmed: Vec<(usize, u32)> = c
                    .counts
                    .iter()
                    .map(|&(k, m)| (k, m.min(out.residual[k])))
                    .filter(|&(_, m)| m > 0)
                    .collect();
                if trimmed.is_empty() {
                    break;
                }
                for &(k, m) in &trimmed {
                    out.residual[k] -= m;
                }
                for (r, a) in master.coefficients(p, bin, &trimmed) {
                    *moved.entry(r).or_default() += a;
                }
                let cost = column_cost(p, bin, &trimmed);
                out.nodes.push((
                    Column {
                        bin: c.bin,
                        counts: trimmed,
                        cost,
                    },
                    1,
                ));
            }
        }
        for (r, a) in moved {
            let (lo, hi) = &mut bounds[r];
            *lo -= a;
            *hi -= a;
            // SAFETY: the pointer comes from a live HiGHS model and `r` is one of its rows
            unsafe {
                highs_sys::Highs_changeRowBounds(model.as_mut_ptr(), r as i32, *lo, *hi);
            }
        }
    }
    out
}

pub fn round_near(x: f64) -> f64 {
    x.round()
}

pub fn round_up(x: f64) -> f64 {
    (x - 1e-6).ceil()
}

pub fn round_down(x: f64) -> f64 {
    (x + 1e-6).floor()
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use highs::Sense;

    use super::*;
    use crate::domain::labels::ZONE;
    use crate::optimizer::milp::{bins, build_lp};

    /// Three pods of one Deployment spread over two zones (maxSkew 1) and a type that holds two.
    fn spread_of_three() -> Problem {
        crate::optimizer::fixtures::zone_spread(3)
    }

    #[test]
    fn the_dive_commits_only_wanted_pods_and_keeps_the_spread_balanced() {
        let p = spread_of_three();
        assert_eq!(p.classes.len(), 1);
        let demand = vec![3u32];
        let bins = bins(&p);
        let index: BTreeMap<Bin, usize> =
            bins.iter().enumerate().map(|(i, b)| (b.bin, i)).collect();
        let master = Master::build(&p, &demand, &bins);
        // one and two pods per node in each zone: the LP takes 0.75 of each two-pod node
        let columns: Vec<Column> = bins
            .iter()
            .flat_map(|b| {
                [1u32, 2].map(|n| Column {
                    bin: b.bin,
                    counts: vec![(0, n)],
                    cost: column_cost(&p, b, &[(0, n)]),
                })
            })
            .collect();
        let model = build_lp(&p, &master, &bins, &index, &columns, false).optimise(Sense::Minimise);
        let input = DiveInput {
            p: &p,
            master: &master,
            bins: &bins,
            bin_index: &index,
            columns: &columns,
            demand: &demand,
        };
        let settings = SolveSettings::default();
        let d = dive(model, &settings, &input, 60.0, Instant::now());
        assert_eq!(d.residual, vec![0]);
        // two nodes, one per zone, holding the three pods: no surplus pod drove the spread rows
        // to ask for more (fixing a two-pod pattern's count gave its fourth pod a place to count)
        assert_eq!(d.nodes.len(), 2, "{:?}", d.nodes);
        let pods: u32 = d
            .nodes
            .iter()
            .map(|(c, n)| c.counts.iter().map(|&(_, m)| m).sum::<u32>() * n)
            .sum();
        assert_eq!(pods, 3);
        let zones: BTreeSet<&String> = d
            .nodes
            .iter()
            .map(|(c, _)| &bins[index[&c.bin]].labels(&p)[ZONE])
            .collect();
        assert_eq!(zones.len(), 2);
    }
}

//! Closing the gap where the patterns that could still matter are few: reduced-cost enumeration.
//!
//! A certified pattern LP (exact pricing found no improving pattern) comes with duals `y` under which
//! every pattern `j` has reduced cost `rc_j >= 0` (to pricing's tolerance). Any integer point of
//! the master, so every plan that places all pods, costs at least `L(y) + sum rc_j x_j`, where
//! `L(y)` is the dual objective ([`dual_floor`]). A plan cheaper than a target `U` therefore uses
//! only patterns with `rc_j < U - L(y)`. Where those are few, [`patterns_below`] lists all of them
//! (a depth-first search per bin over its classes, under the same single-node rules as the
//! pricers, cut where even the best fill of the room left cannot bring the reduced cost under the
//! gap), and HiGHS's integer program over them alone ([`solve`]) finds the cheapest plan below `U`
//! if there is one. Its dual bound `D` then bounds every plan: a plan either costs `U` or more, or
//! is a point of that program, so the optimum is at least `min(U, D)`. This holds for any `U`:
//! where the best plan so far leaves too many patterns below it, [`close`] picks a lower level,
//! and a program that finds nothing below that level proves the level a bound.
//!
//! Data flow: `mod.rs` keeps the certified LP's duals; `optimizer::decide` asks [`close`] after the
//! neighbourhood search, with the chosen plan's objective as `U`, and reports the bound when it
//! beats the LP's (`optimizer::closing`). The program's answer is not planned from: see there.

use std::collections::BTreeMap;
use std::time::Instant;

use highs::{HighsModelStatus, Sense};

use super::super::highs_options::{has_feasible_point, SolverOptions};
use super::super::problem::Problem;
use super::super::SolveSettings;
use super::columns::{column_cost, host_counts, knapsack_size, Bin, BinInfo, Column, NodeRules};
use super::master::Master;
use super::{build_lp, configure, existing_host, run, Model_};
use super::{exact, lagrange};

/// At most this many patterns go into one program: with the cut-off at its level, HiGHS settled
/// programs of up to 3,000 patterns of the small bench mix within a few tenths of a second, where
/// without the cut-off programs of 1,800 patterns ran 3 s past their limit.
pub const MAX_PATTERNS: usize = 3_000;
/// Search nodes the enumeration may visit over all bins before it gives up.
const MAX_SEARCH_NODES: usize = 1_000_000;
/// A program is not started with less than this many seconds left: HiGHS's presolve and root
/// node do not watch the clock.
const MIN_PROGRAM_SECONDS: f64 = 0.1;
/// The integer program stops within this relative gap (the certificate's "proven optimal" is 0.1%).
const MIP_GAP: f64 = 1e-4;

/// What [`close`] found.
pub struct Closed {
    /// A lower bound on every plan that places all pods: `min(U, D)` made safe for tolerances.
    pub bound: f64,
    /// The objective of the program's answer, when it found one.
    pub objective: Option<f64>,
    /// How many patterns the program held.
    pub patterns: usize,
    /// The target the patterns were enumerated below: the best plan's objective, or a lower one
    /// where that left too many.
    pub target: f64,
    /// Whether HiGHS proved its answer within [`MIP_GAP`].
    pub proven: bool,
}

/// The dual objective `L(y)` of the master at `duals`, less what aux variables with negative
/// reduced cost could take off: every point of the master costs at least this plus the reduced
/// costs of its patterns. `None` when a row or aux variable makes it unbounded below (a dual on an
/// infinite side, a negative reduced cost on an unbounded aux variable).
pub fn dual_floor(master: &Master, duals: &[f64]) -> Option<f64> {
    let mut total = 0.0;
    for (r, &y) in master.rows.iter().zip(duals) {
        let side = if y > 0.0 { r.lower } else { r.upper };
        if y.abs() <= ZERO {
            continue;
        }
        if !side.is_finite() {
            tracing::debug!(row = ?r.kind, dual = y, "dual on an infinite side");
            return None;
        }
        total += y * side;
    }
    for a in &master.aux {
        let rc = a.cost - a.rows.iter().map(|&(r, c)| duals[r] * c).sum::<f64>();
        let at = if rc < 0.0 { a.upper } else { a.lower };
        if rc.abs() <= ZERO {
            continue;
        }
        if !at.is_finite() {
            tracing::debug!(aux = ?a.kind, rc, "negative reduced cost on an unbounded variable");
            return None;
        }
        total += rc * at;
    }
    Some(total)
}

/// Duals and reduced costs within this of zero are the LP's tolerance: they count as zero (the
/// caller's slack covers what they could add up to).
const ZERO: f64 = 1e-9;

/// Why [`patterns_below`] gave up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// More patterns than the caller's limit are below the gap.
    Patterns,
    /// The search visited [`MAX_SEARCH_NODES`] nodes.
    Nodes,
    /// The deadline passed.
    Time,
}

/// Every pattern of every bin whose reduced cost under `duals` is below `gap`, unless there are
/// more than `max_patterns` of them or the search ran out of nodes or time.
#[allow(clippy::too_many_arguments)]
pub fn patterns_below(
    p: &Problem,
    rules: &NodeRules,
    master: &Master,
    bins: &[BinInfo],
    duals: &[f64],
    demand: &[u32],
    gap: f64,
    (max_patterns, deadline): (usize, Instant),
) -> Result<Vec<Column>, Stop> {
    let mut out = Vec::new();
    let mut nodes = 0usize;
    for b in bins {
        let values = master.pod_values(p, b, duals);
        let bin_dual = master.bin_dual(p, b, duals);
        let base_counts = b.with_preload(&[]);
        let base_gain: f64 = base_counts
            .iter()
            .map(|&(k, n)| values[k] * f64::from(n))
            .sum();
        // reduced cost of the pattern holding only the preload; each pod of class k added takes
        // `values[k] - penalty` off it
        let base = column_cost(p, b, &base_counts) - bin_dual - base_gain;
        let mut items: Vec<Item<'_>> = b
            .classes
            .iter()
            .filter(|&&(k, _)| demand[k] > 0)
            .map(|&(k, pen)| Item {
                class: k,
                worth: values[k] - pen,
                most: demand[k].min(rules.per_node_cap[k]),
                req: &p.classes[k].req,
            })
            .collect();
        // the densest first: the bound on what the rest can add is then tighter deeper down
        let density = |e: &Item<'_>| e.worth / knapsack_size(e.req, &b.room).max(1e-12);
        items.sort_by(|x, y| {
            density(y)
                .total_cmp(&density(x))
                .then(x.class.cmp(&y.class))
        });
        let triples: Vec<(usize, f64, u32)> =
            items.iter().map(|e| (e.class, e.worth, e.most)).collect();
        let (lambda, gains) = exact::lagrange_parts(p, rules, b, &triples);
        let mut search = Search {
            rules,
            items: &items,
            best_rest: best_rest(&items, &b.room),
            lambda: &lambda,
            gains: &gains,
            floor: base - gap,
            counts: Vec::new(),
            found: Vec::new(),
            nodes: 0,
            max_nodes: MAX_SEARCH_NODES - nodes,
            blocked: vec![0; p.classes.len()],
        };
        let host = host_counts(rules, &existing_host(p, rules, b));
        search.dive(0, b.room.clone(), host, 0.0);
        nodes += search.nodes;
        if search.nodes > search.max_nodes {
            return Err(Stop::Nodes);
        }
        if Instant::now() > deadline {
            return Err(Stop::Time);
        }
        for counts in search.found {
            let counts = b.with_preload(&counts);
            if counts.is_empty() {
                continue;
            }
            let cost = column_cost(p, b, &counts);
            out.push(Column {
                bin: b.bin,
                counts,
                cost,
            });
        }
        if out.len() > max_patterns {
            return Err(Stop::Patterns);
        }
    }
    Ok(out)
}

/// One class of a bin: what a pod of it takes off the reduced cost, and how many one node holds.
struct Item<'a> {
    class: usize,
    worth: f64,
    most: u32,
    req: &'a [i64],
}

/// Per position, per resource, the largest worth per unit of that resource among the items from
/// there on (0 at least: an item of negative worth is never forced in).
fn best_rest(items: &[Item<'_>], room: &[i64]) -> Vec<Vec<f64>> {
    let mut out = vec![vec![0.0f64; room.len()]; items.len() + 1];
    for i in (0..items.len()).rev() {
        let (head, tail) = out.split_at_mut(i + 1);
        for ((slot, next), &r) in head[i].iter_mut().zip(&tail[0]).zip(items[i].req) {
            let per = if r > 0 {
                items[i].worth / r as f64
            } else if items[i].worth > 0.0 {
                f64::INFINITY
            } else {
                0.0
            };
            *slot = next.max(per);
        }
    }
    out
}

struct Search<'a> {
    rules: &'a NodeRules,
    items: &'a [Item<'a>],
    best_rest: Vec<Vec<f64>>,
    /// The Lagrangian bound's resource prices and its item part from each position on
    /// (`exact::lagrange_parts`).
    lambda: &'a [f64],
    gains: &'a [f64],
    /// Patterns worth more than this enter.
    floor: f64,
    counts: Vec<(usize, u32)>,
    found: Vec<Vec<(usize, u32)>>,
    nodes: usize,
    max_nodes: usize,
    /// How many chosen classes conflict with each class.
    blocked: Vec<u32>,
}

impl Search<'_> {
    fn dive(&mut self, i: usize, room: Vec<i64>, host_used: Vec<i64>, value: f64) {
        self.nodes += 1;
        if self.nodes > self.max_nodes {
            return;
        }
        if i == self.items.len() {
            if value > self.floor {
                self.found.push(self.counts.clone());
            }
            return;
        }
        // what the rest can add at most: the room of each resource at its best worth per unit
        let rest = room
            .iter()
            .zip(&self.best_rest[i])
            .map(|(&a, &w)| if w > 0.0 { a.max(0) as f64 * w } else { 0.0 })
            .fold(f64::INFINITY, f64::min)
            .min(lagrange::price(self.lambda, &room) + self.gains[i]);
        if value + rest <= self.floor {
            return;
        }
        let e = &self.items[i];
        let k = e.class;
        let mut most = if self.blocked[k] > 0 { 0 } else { e.most };
        for (r, a) in e.req.iter().zip(&room) {
            if *r > 0 {
                most = most.min((*a / *r).max(0) as u32);
            }
        }
        for &hi in &self.rules.host_groups_of[k] {
            most = most.min((self.rules.host_caps[hi].1 - host_used[hi]).max(0) as u32);
        }
        for n in 1..=most {
            let left: Vec<i64> = room
                .iter()
                .zip(e.req)
                .map(|(a, r)| a - r * i64::from(n))
                .collect();
            let mut used = host_used.clone();
            for &hi in &self.rules.host_groups_of[k] {
                used[hi] += i64::from(n);
            }
            for &j in &self.rules.conflicts_of[k] {
                self.blocked[j] += 1;
            }
            self.counts.push((k, n));
            self.dive(i + 1, left, used, value + e.worth * f64::from(n));
            self.counts.pop();
            for &j in &self.rules.conflicts_of[k] {
                self.blocked[j] -= 1;
            }
        }
        self.dive(i + 1, room, host_used, value);
    }
}

/// HiGHS's integer program over `columns` within `seconds`, cut off at `upper` (only plans below it
/// are asked for): whether it settled, the columns' values of its answer, and its dual bound
/// (`upper` itself when it proved that no point of the program is below `upper`).
fn solve(
    p: &Problem,
    settings: &SolveSettings,
    (master, bins): (&Master, &[BinInfo]),
    columns: &[Column],
    (upper, seconds): (f64, f64),
) -> Option<(bool, Option<Vec<f64>>, f64)> {
    let bin_index: BTreeMap<Bin, usize> =
        bins.iter().enumerate().map(|(i, b)| (b.bin, i)).collect();
    let mip = build_lp(p, master, bins, &bin_index, columns, true);
    let mut model = mip.optimise(Sense::Minimise);
    let options = SolverOptions {
        mip_rel_gap: Some(MIP_GAP),
        ..SolverOptions::default()
    };
    configure(&mut model, settings, seconds, options);
    // branches that cannot go below the target are cut: the program only has to find a plan
    // below it or prove there is none, not to rank the dearer ones
    model.set_option("objective_bound", upper);
    let solved = run(model, settings, "highs exact mip").ok()?;
    match solved.status() {
        HighsModelStatus::Infeasible => return Some((true, None, upper)),
        HighsModelStatus::Optimal | HighsModelStatus::ReachedTimeLimit => {}
        _ => return None,
    }
    let dual = solved.double_info_value(c"mip_dual_bound").ok()?;
    let proven = solved.status() == HighsModelStatus::Optimal;
    let values = has_feasible_point(&solved).then(|| solved.get_solution().columns().to_vec());
    dual.is_finite().then_some((proven, values, dual))
}

/// Reduced-cost enumeration below `target` (the best plan's objective) and the integer program
/// over what it lists, within `seconds`, repeated while it proves more. Each round picks a level
/// between what is proven and the target: the target itself, or, where more than
/// [`MAX_PATTERNS`] patterns are below it, the level halfway down, halved again until they are
/// few enough. The program over the patterns below a level, cut off there, either finds a plan
/// below it, which is then the cheapest there is, or proves the level a bound, and the next round
/// starts from it. `Err` says why not even one program was solved (`None` inside: the LP's duals
/// give no finite dual objective, or HiGHS gave no answer).
pub fn close(
    p: &Problem,
    settings: &SolveSettings,
    model: &Model_,
    (duals, demand): (&[f64], &[u32]),
    target: f64,
    seconds: f64,
) -> Result<Closed, Option<Stop>> {
    let start = Instant::now();
    let end = start + std::time::Duration::from_secs_f64(seconds);
    let floor = dual_floor(&model.master, duals).ok_or(None)?;
    // pricing's tolerance leaves each pattern up to 1e-7 below zero: a node's worth per pod
    let slack = 1e-7 * (1.0 + p.total_pods() as f64) + 1e-9 * target.abs();
    let rules = NodeRules::build(p);
    let pods = p.total_pods() as f64;
    let mut proven_below = floor;
    // the lowest level known to have too many patterns below it: a later round starts halfway
    // to it instead of at the target
    let mut crowded = f64::INFINITY;
    let mut closed: Option<Closed> = None;
    loop {
        let now = Instant::now();
        // the enumeration may take half of what is left; the program gets the rest
        let deadline = now + end.saturating_duration_since(now) / 2;
        let mut level = if crowded < target {
            proven_below + (crowded - proven_below) / 2.0
        } else {
            target
        };
        let columns = loop {
            match patterns_below(
                p,
                &rules,
                &model.master,
                &model.bins,
                duals,
                demand,
                level - floor + slack,
                (MAX_PATTERNS, deadline),
            ) {
                Ok(columns) => break Ok(columns),
                // a step below the certificate's own precision is not worth a program
                Err(Stop::Patterns | Stop::Nodes)
                    if (level - proven_below) / 2.0 > MIP_GAP * level.abs() =>
                {
                    crowded = crowded.min(level);
                    level = proven_below + (level - proven_below) / 2.0;
                }
                Err(stop) => break Err(stop),
            }
        };
        let columns = match columns {
            Ok(columns) => columns,
            Err(stop) => return closed.ok_or(Some(stop)),
        };
        // HiGHS may overrun its limit in its root node: a quarter of what is left stays in hand
        let left = 0.75 * end.saturating_duration_since(Instant::now()).as_secs_f64();
        let answer = (left >= MIN_PROGRAM_SECONDS)
            .then(|| {
                solve(
                    p,
                    settings,
                    (&model.master, &model.bins),
                    &columns,
                    (level, left),
                )
            })
            .flatten();
        let Some((settled, values, dual)) = answer else {
            return closed.ok_or(if left >= MIN_PROGRAM_SECONDS {
                None
            } else {
                Some(Stop::Time)
            });
        };
        let objective = values.as_ref().map(|v| {
            let costs = model.master.aux.iter().map(|a| a.cost);
            costs
                .chain(columns.iter().map(|c| c.cost))
                .zip(v)
                .map(|(c, x)| c * x)
                .sum::<f64>()
        });
        let round = Closed {
            objective: objective.or(closed.as_ref().and_then(|c| c.objective)),
            bound: super::safe_pattern_bound(dual.min(level), pods),
            target: level,
            patterns: columns.len(),
            proven: settled,
        };
        // another round only where this one proved its level with nothing below it (a plan it
        // found at or above the level says nothing below it), short of the target
        let below = objective.is_some_and(|o| o < level);
        let again = settled && !below && level < target - MIP_GAP * target.abs();
        proven_below = level;
        closed = Some(round);
        if !again || Instant::now() >= end {
            return closed.ok_or(None);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::optimizer::milp::{bins, columns::valid};

    /// Every valid pattern of `bin` (counts up to the demand, under the single-node rules and the
    /// hostname spread caps), by exhaustive enumeration.
    fn every_pattern(
        p: &Problem,
        rules: &NodeRules,
        bin: &BinInfo,
        demand: &[u32],
    ) -> Vec<Vec<(usize, u32)>> {
        let mut out = vec![vec![]];
        for &(k, _) in &bin.classes {
            let fit = p.classes[k]
                .req
                .iter()
                .zip(&bin.room)
                .filter(|(r, _)| **r > 0)
                .map(|(r, a)| (a / r).max(0) as u32)
                .min()
                .unwrap_or(u32::MAX);
            let most = demand[k].min(fit).min(rules.per_node_cap[k]);
            out = out
                .into_iter()
                .flat_map(|counts: Vec<(usize, u32)>| {
                    (0..=most).map(move |n| {
                        let mut c = counts.clone();
                        if n > 0 {
                            c.push((k, n));
                        }
                        c
                    })
                })
                .collect();
        }
        out.retain(|counts| {
            let host_ok = rules.host_caps.iter().all(|(members, cap, _)| {
                let n: i64 = counts
                    .iter()
                    .filter(|(k, _)| members.contains(k))
                    .map(|&(_, n)| i64::from(n))
                    .sum();
                n <= *cap
            });
            !counts.is_empty() && host_ok && valid(p, rules, bin, counts)
        });
        out
    }

    #[test]
    fn the_enumeration_lists_exactly_the_patterns_below_the_gap() {
        let catalog = crate::optimizer::fixtures::tiny_catalog();
        let mut listed = 0;
        for seed in 0..8u64 {
            // anti-affinity cliques, hostname spread groups and zone spreads, so every rule the
            // search enforces is met somewhere
            let p = Problem::build(&crate::workload::diverse(12, seed), &catalog);
            let demand: Vec<u32> = p.classes.iter().map(|c| c.demand() as u32).collect();
            let all = bins(&p);
            let rules = NodeRules::build(&p);
            let master = Master::build(&p, &demand, &all);
            let mut rng = crate::workload::Rng(seed);
            // duals of either sign: the listing must hold whatever the LP answered
            let duals: Vec<f64> = (0..master.rows.len())
                .map(|_| rng.unit() * 0.05 - 0.01)
                .collect();
            // the reduced cost as the master itself counts it, row by row
            let reduced = |b: &BinInfo, counts: &[(usize, u32)]| {
                column_cost(&p, b, counts)
                    - master
                        .coefficients(&p, b, counts)
                        .iter()
                        .map(|&(r, v)| duals[r] * v)
                        .sum::<f64>()
            };
            let mut want = Vec::new();
            let mut costs = Vec::new();
            for b in &all {
                for counts in every_pattern(&p, &rules, b, &demand) {
                    costs.push(reduced(b, &counts));
                    want.push((b.bin, counts));
                }
            }
            // a gap that lets in about a quarter of the patterns, away from any pattern's own cost
            let mut sorted = costs.clone();
            sorted.sort_by(f64::total_cmp);
            let i = sorted.len() / 4;
            let gap = (sorted[i] + sorted[i + 1]) / 2.0;
            let mut want: Vec<_> = want
                .into_iter()
                .zip(&costs)
                .filter(|(_, &rc)| rc < gap)
                .map(|(w, _)| w)
                .collect();
            let far = Instant::now() + std::time::Duration::from_secs(60);
            let got = patterns_below(
                &p,
                &rules,
                &master,
                &all,
                &duals,
                &demand,
                gap,
                (usize::MAX, far),
            )
            .expect("settles");
            let mut got: Vec<_> = got.into_iter().map(|c| (c.bin, c.counts)).collect();
            want.sort();
            got.sort();
            assert_eq!(got, want, "seed {seed}");
            listed += got.len();
        }
        assert!(listed >= 50, "only {listed} patterns listed over the seeds");
    }

    #[test]
    fn too_many_patterns_below_the_gap_stop_the_listing() {
        let p = Problem::build(
            &crate::workload::diverse(12, 1),
            &crate::optimizer::fixtures::tiny_catalog(),
        );
        let demand: Vec<u32> = p.classes.iter().map(|c| c.demand() as u32).collect();
        let all = bins(&p);
        let master = Master::build(&p, &demand, &all);
        // every pod worth a dollar: every pattern is far below any gap
        let duals = vec![1.0; master.rows.len()];
        let far = Instant::now() + std::time::Duration::from_secs(60);
        let rules = NodeRules::build(&p);
        let listed = patterns_below(&p, &rules, &master, &all, &duals, &demand, 1.0, (5, far));
        assert_eq!(listed.err(), Some(Stop::Patterns));
    }
}

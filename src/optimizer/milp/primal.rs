//! Primal heuristics: turn the column-generation LP into integer node counts fast. Rounding down
//! keeps what the LP is sure of; the residual cover then adds whole patterns by value per dollar
//! under the LP duals; diving re-solves the LP with rounded patterns fixed. The caller replays every
//! candidate and keeps the cheapest, so a heuristic may be rough but never unsafe.

use std::time::Instant;

use highs::HighsModelStatus;

use super::super::problem::Problem;
use super::super::SolveSettings;
use super::columns::Column;
use super::master::Master;
use super::configure;

/// An LP's values rounded down, and rounded down with the residual covered by whole patterns (pods
/// valued at their demand row's dual, at most what a node of their own costs); `tag` names the LP.
#[allow(clippy::too_many_arguments)]
pub fn rounded(p: &Problem, master: &Master, columns: &[Column], values: &[f64], duals: &[f64], demand: &[u32], alone: &[f64], tag: &str) -> Vec<(String, Vec<(Column, u32)>)> {
    let offset = master.aux.len();
    let down = nodes_of(columns, values, offset, round_down);
    let pod_value: Vec<f64> = (0..p.classes.len()).map(|k| master.demand_dual(duals, k).max(0.0).min(alone[k]).max(1e-6)).collect();
    vec![(format!("{tag}-round-cover"), round_and_cover(columns, values, offset, demand, &pod_value)), (format!("{tag}-round-down"), down)]
}

/// The patterns an LP's values (aux variables first, from `offset` the patterns) give at least one
/// node once rounded, with their node counts.
pub fn nodes_of(columns: &[Column], values: &[f64], offset: usize, round: fn(f64) -> f64) -> Vec<(Column, u32)> {
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
pub fn round_and_cover(columns: &[Column], lp: &[f64], offset: usize, demand: &[u32], pod_value: &[f64]) -> Vec<(Column, u32)> {
    let mut counts: Vec<u32> = (0..columns.len()).map(|j| round_down(lp.get(offset + j).copied().unwrap_or(0.0)) as u32).collect();
    let mut residual: Vec<i64> = demand.iter().map(|&d| i64::from(d)).collect();
    for (j, c) in columns.iter().enumerate() {
        for &(k, n) in &c.counts {
            residual[k] -= i64::from(n) * i64::from(counts[j]);
        }
    }
    loop {
        let mut best: Option<(f64, usize)> = None;
        for (j, c) in columns.iter().enumerate() {
            let value: f64 = c.counts.iter().map(|&(k, n)| residual[k].clamp(0, i64::from(n)) as f64 * pod_value[k]).sum();
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
    columns.iter().zip(counts).filter(|(_, n)| *n > 0).map(|(c, n)| (c.clone(), n)).collect()
}

/// Diving: fixes the lower bound of every pattern the LP already uses at least once, or when none is
/// new, rounds up the most used fractional patterns, and re-solves from the previous basis, until the
/// LP is integral or time is up. Returns the last LP's values (round them up: covering rows stay
/// covered, and the replay drops surplus pods) and the number of steps.
pub fn dive(mut model: highs::Model, settings: &SolveSettings, offset: usize, patterns: usize, until: f64, start: Instant) -> (Vec<f64>, usize) {
    let mut fixed = vec![0.0f64; patterns];
    let mut values: Vec<f64> = Vec::new();
    let mut steps = 0;
    // every step fixes at least one more node, so this many steps always suffice; the cap keeps the
    // dive from depending on the clock when the LP stalls
    let max_steps = patterns + 1;
    while start.elapsed().as_secs_f64() < until && steps < max_steps {
        steps += 1;
        configure(&mut model, settings, settings.time_limit.as_secs_f64());
        model.set_option("presolve", "off");
        model.set_option("simplex_strategy", 1);
        let Ok(solved) = super::run(model, settings, "dive lp") else { break };
        if solved.status() != HighsModelStatus::Optimal {
            break;
        }
        values = solved.get_solution().columns().to_vec();
        model = solved.into();
        let x = |j: usize| values.get(offset + j).copied().unwrap_or(0.0);
        let mut changed = false;
        for (j, f) in fixed.iter_mut().enumerate() {
            let floor = (x(j) + 1e-6).floor();
            if floor > *f {
                *f = floor;
                changed = true;
                set_lower(&mut model, offset + j, floor);
            }
        }
        let mut fractional: Vec<(usize, f64)> = (0..patterns).map(|j| (j, x(j) - (x(j) + 1e-6).floor())).filter(|&(_, fr)| fr > 1e-6).collect();
        if fractional.is_empty() {
            break;
        }
        if !changed {
            fractional.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
            for &(j, _) in fractional.iter().take((fractional.len() / 8).max(1)) {
                fixed[j] = (x(j) - 1e-6).ceil();
                set_lower(&mut model, offset + j, fixed[j]);
            }
        }
    }
    (values, steps)
}

fn set_lower(model: &mut highs::Model, col: usize, lower: f64) {
    // SAFETY: the pointer comes from a live HiGHS model and `col` is one of its columns
    unsafe {
        highs_sys::Highs_changeColBounds(model.as_mut_ptr(), col as i32, lower, f64::INFINITY);
    }
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

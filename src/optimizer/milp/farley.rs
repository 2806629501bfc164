//! A certified bound from a column-generation LP that has not (provably) converged: Farley's ratio.
//!
//! Let π be the restricted master's optimal duals and z its value. If every pattern j of every bin
//! satisfies π·a_j ≤ r·c_j for some r ≥ 1, then π/r is feasible for the dual of the full master
//! (all patterns), so z/r bounds the full LP and with it every plan. For a bin of cost c > 0, r ≥
//! (bin dual + the most any pattern can collect under π) / c suffices; a bin of cost 0 (an existing
//! node that stays anyway) must be proven to have no improving pattern at all. The "most a pattern
//! can collect" is bounded from above by the Lagrangian bound (`lagrange`), which relaxes fit into
//! resource prices and keeps only per-node caps, so the ratio is safe without solving any knapsack;
//! a settled exact knapsack, or else HiGHS's bound on the bin's knapsack (`prove`), tightens it
//! where the Lagrangian bound alone would raise r.

use std::time::Instant;

use super::super::problem::Problem;
use super::columns::{BinInfo, NodeRules};
use super::lagrange::{self, Item};
use super::master::Master;

/// The smallest safe r ≥ 1, or None when a zero-cost bin may still hold an improving pattern.
/// `exact(bin, values, floor)` is the most a pattern of the bin collects (or `floor`, when none
/// collects more) when a settled exact knapsack knows it (bins whose patterns carry no penalty),
/// else None. Gives up (None) once `deadline` has passed.
#[allow(clippy::too_many_arguments)]
pub fn ratio<'b>(
    p: &Problem,
    rules: &NodeRules,
    master: &Master,
    bins: impl IntoIterator<Item = &'b BinInfo>,
    duals: &[f64],
    limit: &[u32],
    deadline: Instant,
    exact: impl Fn(&BinInfo, &[f64], f64) -> Option<f64>,
) -> Option<f64> {
    let mut r: f64 = 1.0;
    for b in bins {
        if Instant::now() > deadline {
            return None;
        }
        let values = master.pod_values(p, b, duals);
        // the preload is in every pattern of the bin: its value is fixed like the bin's own duals
        let fixed = master.bin_dual(p, b, duals)
            + b.preload
                .iter()
                .map(|&(k, n)| values[k] * f64::from(n))
                .sum::<f64>();
        if b.cost > 1e-12 {
            // penalties only raise a pattern's cost, so leaving them out keeps the ratio safe
            let fractional = collect_bound(p, rules, b, |k, _| values[k], limit);
            let penalty_free = b.classes.iter().all(|&(_, pen)| pen == 0.0);
            let most = if penalty_free && (fixed + fractional) / b.cost > r {
                exact(b, &values, r * b.cost - fixed).unwrap_or(fractional)
            } else {
                fractional
            };
            r = r.max((fixed + most) / b.cost);
        } else {
            let most = collect_bound(p, rules, b, |k, pen| values[k] - pen, limit);
            if fixed + most > 1e-7 {
                return None;
            }
        }
    }
    Some(r)
}

/// An upper bound on Σ n_k·w_k over patterns of the bin: the Lagrangian bound with the shared
/// caps kept (see `lagrange`).
fn collect_bound(
    p: &Problem,
    rules: &NodeRules,
    b: &BinInfo,
    w: impl Fn(usize, f64) -> f64,
    limit: &[u32],
) -> f64 {
    let items: Vec<Item<'_>> = b
        .classes
        .iter()
        .filter_map(|&(k, pen)| {
            let value = w(k, pen);
            let count = f64::from(limit[k].min(rules.per_node_cap[k]));
            (value > 0.0 && count > 0.0).then(|| Item {
                req: &p.classes[k].req,
                value,
                count,
                set: rules.shared_of[k],
            })
        })
        .collect();
    lagrange::minimise(&b.room, &items, &rules.shared_cap).0
}

/// The most a pattern of `b` collects under `values`, or `floor` when none collects more, when the
/// exact knapsack settles it, else HiGHS's bound on it (the `exact` of [`ratio`]).
/// HiGHS gets `seconds` on a bin the search leaves open.
pub(super) fn exact_gain(
    p: &Problem,
    rules: &NodeRules,
    b: &BinInfo,
    values: &[f64],
    limit: &[u32],
    floor: f64,
    seconds: f64,
) -> Option<f64> {
    let host = super::existing_host(p, rules, b);
    let Some(counts) =
        super::exact::pack_exact(p, rules, b, values, limit, &host, floor, FARLEY_EXACT_NODES)
    else {
        // HiGHS's dual bound caps the bin even when it does not prove its optimum in time
        return super::prove::solve(
            p,
            rules,
            b,
            values,
            limit,
            &host,
            std::time::Duration::from_secs_f64(seconds),
        )
        .map(|k| k.upper.max(floor));
    };
    // the preload's value is counted by the caller with the bin's fixed part
    Some(
        counts
            .iter()
            .map(|&(k, n)| values[k] * f64::from(n))
            .sum::<f64>()
            .max(floor),
    )
}

/// Search nodes the Farley ratio's exact knapsack may spend per bin: it runs on every bin once, at
/// the end, so it gets a tenth of the pricer's budget (the relaxations stand in when it gives up).
const FARLEY_EXACT_NODES: usize = 2_000;

//! A certified bound from a column-generation LP that has not (provably) converged: Farley's ratio.
//!
//! Let π be the restricted master's optimal duals and z its value. If every pattern j of every bin
//! satisfies π·a_j ≤ r·c_j for some r ≥ 1, then π/r is feasible for the dual of the full master
//! (all patterns), so z/r bounds the full LP and with it every plan. For a bin of cost c > 0,
//! r ≥ (bin dual + the most any pattern can collect under π) / c suffices; a bin of cost 0 (an
//! existing node that stays anyway) must be proven to have no improving pattern at all. The "most a
//! pattern can collect" is bounded from above by a fractional knapsack in each resource alone, which
//! relaxes fit, per-node caps and conflicts, so the ratio is safe without solving any knapsack.

use super::super::problem::Problem;
use super::columns::{BinInfo, NodeRules};
use super::master::Master;

/// The smallest safe r ≥ 1, or None when a zero-cost bin may still hold an improving pattern.
/// `exact(bin, values)` is the most a pattern of the bin collects when a settled exact knapsack
/// knows it (bins whose patterns carry no penalty), else None.
pub fn ratio(p: &Problem, rules: &NodeRules, master: &Master, bins: &[BinInfo], duals: &[f64], limit: &[u32], exact: impl Fn(&BinInfo, &[f64]) -> Option<f64>) -> Option<f64> {
    let mut r: f64 = 1.0;
    for b in bins {
        let values = master.pod_values(p, b, duals);
        // the preload is in every pattern of the bin: its value is fixed like the bin's own duals
        let fixed = master.bin_dual(p, b, duals) + b.preload.iter().map(|&(k, n)| values[k] * f64::from(n)).sum::<f64>();
        if b.cost > 1e-12 {
            // penalties only raise a pattern's cost, so leaving them out keeps the ratio safe
            let fractional = collect_bound(p, rules, b, |k, _| values[k], limit);
            let penalty_free = b.classes.iter().all(|&(_, pen)| pen == 0.0);
            let most = if penalty_free && (fixed + fractional) / b.cost > r { exact(b, &values).unwrap_or(fractional) } else { fractional };
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

/// An upper bound on Σ n_k·w_k over patterns of the bin: the smallest, over resources, of the
/// fractional knapsack in that resource alone.
fn collect_bound(p: &Problem, rules: &NodeRules, b: &BinInfo, w: impl Fn(usize, f64) -> f64, limit: &[u32]) -> f64 {
    let items: Vec<(usize, f64, f64)> = b
        .classes
        .iter()
        .filter_map(|&(k, pen)| {
            let v = w(k, pen);
            let n = f64::from(limit[k].min(rules.per_node_cap[k]));
            (v > 0.0 && n > 0.0).then_some((k, v, n))
        })
        .collect();
    let all: f64 = items.iter().map(|(_, v, n)| v * n).sum();
    let mut best = all;
    for (d, &room) in b.room.iter().enumerate() {
        let mut by_density: Vec<(f64, f64, f64)> = items
            .iter()
            .filter(|(k, ..)| p.classes[*k].req[d] > 0)
            .map(|&(k, v, n)| (v / p.classes[k].req[d] as f64, p.classes[k].req[d] as f64, v * n))
            .collect();
        // classes that use none of this resource are not limited by it
        let free: f64 = items.iter().filter(|(k, ..)| p.classes[*k].req[d] <= 0).map(|(_, v, n)| v * n).sum();
        by_density.sort_by(|a, b| b.0.total_cmp(&a.0));
        let mut left = room.max(0) as f64;
        let mut got = free;
        for (density, size, total) in by_density {
            let take = (total / density).min(left); // resource used by taking all of this class
            got += take * density;
            left -= take;
            let _ = size;
            if left <= 0.0 {
                break;
            }
        }
        best = best.min(got);
    }
    best.min(lagrangian_bound(p, b, &items))
}

/// Weak LP duality for the knapsack: for any resource prices λ ≥ 0,
/// Σ_d λ_d·room_d + Σ_k n_k·max(0, w_k − λ·req_k) bounds what a pattern collects. The prices are
/// searched on a small grid: the bin's cost split over cpu, memory and pods, scaled.
fn lagrangian_bound(p: &Problem, b: &BinInfo, items: &[(usize, f64, f64)]) -> f64 {
    let dims = b.room.len().min(3);
    if dims == 0 || b.cost <= 0.0 || b.room[..dims].iter().any(|&r| r <= 0) {
        return f64::INFINITY;
    }
    const STEPS: usize = 8;
    let mut best = f64::INFINITY;
    for a in 0..=STEPS {
        for m in 0..=(STEPS - a) {
            let share = [a as f64, m as f64, (STEPS - a - m) as f64].map(|x| x / STEPS as f64);
            for scale in [0.5, 0.7, 0.85, 1.0, 1.2, 1.5, 2.0] {
                let lambda: Vec<f64> = (0..dims).map(|d| scale * share[d] * b.cost / b.room[d] as f64).collect();
                let mut ub = scale * b.cost * share[..dims].iter().sum::<f64>();
                for &(k, w, n) in items {
                    let price: f64 = (0..dims).map(|d| lambda[d] * p.classes[k].req[d].max(0) as f64).sum();
                    ub += n * (w - price).max(0.0);
                }
                best = best.min(ub);
            }
        }
    }
    best
}

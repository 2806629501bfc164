//! Residual patterns for the integer solve. Column generation stops when no pattern prices in at
//! the LP's duals, and the patterns it leaves are those a fractional answer wants: nodes packed
//! full. An integer answer also needs nodes for what whole copies of those patterns leave over,
//! and none of those priced in, so HiGHS's integer program over the generated patterns alone can
//! be far above the LP (a 4-class batch of 200 pods: $2.21/h against an LP of $1.02/h).
//!
//! Here every bin is packed once more under the same duals, each class capped at its residual:
//! its demand less what the LP's patterns, rounded down, already hold. The best pattern of each
//! bin joins the integer solve, whatever its reduced cost.

use std::collections::{BTreeMap, BTreeSet};

use crate::domain::labels::ZONE;

use super::super::problem::Problem;
use super::columns::{column_cost, valid, Bin, BinInfo, Column, NodeRules};
use super::exact;
use super::master::Master;

/// Search nodes the exact search may spend per bin on a residual pattern; an unsettled search
/// still answers a valid pattern.
const RESIDUAL_NODES: usize = 5_000;

/// Per class, its demand less the pods the LP's patterns hold in whole copies.
pub(super) fn residual_demand(
    columns: &[Column],
    values: &[f64],
    offset: usize,
    demand: &[u32],
) -> Vec<u32> {
    let mut left: Vec<u32> = demand.to_vec();
    for (c, x) in columns.iter().zip(values.iter().skip(offset)) {
        let copies = (x + 1e-6).floor().max(0.0) as u32;
        for &(k, n) in &c.counts {
            left[k] = left[k].saturating_sub(n.saturating_mul(copies));
        }
    }
    left
}

/// The best pattern of each new-node bin for the residual `limit` under `duals`, those not among
/// `columns` yet; per zone only the [`PER_ZONE`] of least reduced cost, so that the integer
/// program stays small enough to finish.
#[allow(clippy::too_many_arguments)]
pub(super) fn residual_columns(
    p: &Problem,
    rules: &NodeRules,
    master: &Master,
    bins: &[BinInfo],
    columns: &[Column],
    duals: &[f64],
    limit: &[u32],
) -> Vec<Column> {
    if limit.iter().all(|&n| n == 0) {
        return Vec::new();
    }
    let mut seen: BTreeSet<(Bin, Vec<(usize, u32)>)> =
        columns.iter().map(|c| (c.bin, c.counts.clone())).collect();
    let mut per_zone: BTreeMap<&str, Vec<(f64, Column)>> = BTreeMap::new();
    for b in bins.iter().filter(|b| b.preload.is_empty()) {
        let Bin::New { .. } = b.bin else { continue };
        let values = master.pod_values(p, b, duals);
        let host = super::existing_host(p, rules, b);
        let (counts, _) = exact::pack_best(p, rules, b, &values, limit, &host, 0.0, RESIDUAL_NODES);
        if counts.is_empty()
            || !valid(p, rules, b, &counts)
            || !seen.insert((b.bin, counts.clone()))
        {
            continue;
        }
        let cost = column_cost(p, b, &counts);
        let gain: f64 = counts.iter().map(|&(k, n)| values[k] * f64::from(n)).sum();
        let rc = cost - master.bin_dual(p, b, duals) - gain;
        let zone = b.labels(p).get(ZONE).map_or("", String::as_str);
        per_zone.entry(zone).or_default().push((
            rc,
            Column {
                bin: b.bin,
                counts,
                cost,
            },
        ));
    }
    per_zone
        .into_values()
        .flat_map(|mut found| {
            found.sort_by(|a, b| a.0.total_cmp(&b.0));
            found.into_iter().take(PER_ZONE).map(|(_, c)| c)
        })
        .collect()
}

/// Residual patterns kept per zone.
const PER_ZONE: usize = 8;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_residual_is_what_whole_copies_leave() {
        let col = |counts: Vec<(usize, u32)>| Column {
            bin: Bin::Existing(0),
            counts,
            cost: 1.0,
        };
        let columns = [col(vec![(0, 3), (1, 2)]), col(vec![(1, 5)])];
        // one aux variable first; 2.6 copies of the first pattern hold 6 and 4, 0.9 of the
        // second hold none
        let values = [7.0, 2.6, 0.9];
        assert_eq!(residual_demand(&columns, &values, 1, &[10, 5]), vec![4, 1]);
        // more than the demand in whole copies leaves nothing, never less than nothing
        assert_eq!(
            residual_demand(&columns, &[0.0, 4.0, 0.0], 1, &[10, 5]),
            vec![0, 0]
        );
    }
}

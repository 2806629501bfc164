//! The bins column generation prices: each existing node, and each new offering with the classes
//! it may hold. Offerings another of the same pool, zone and capacity type dominates are dropped;
//! [`bins_for`] narrows the list to the classes a sub-problem places.

use std::collections::BTreeMap;

use super::super::problem::Problem;
use super::columns::{Bin, BinInfo};

/// Bins the pricer considers: existing nodes and new offerings, dominated offerings dropped.
pub fn bins(p: &Problem) -> Vec<BinInfo> {
    bins_pruned(p, false)
}

/// [`bins`] with dominated offerings dropped across zones too, when no rule of `p` compares a label
/// other than the hostname across nodes (the relaxation of `relax.rs`): there a node's zone
/// matters only through which classes it serves, so of two offerings alike in pool and capacity
/// type, one with at least the other's room and classes at no more cost serves every pattern of
/// the other at no more cost, and the LP over what is kept has the same optimum. Otherwise as
/// [`bins`].
pub fn bins_across_zones(p: &Problem) -> Vec<BinInfo> {
    bins_pruned(p, p.topology.keys().is_empty())
}

fn bins_pruned(p: &Problem, across_zones: bool) -> Vec<BinInfo> {
    let mut out = Vec::new();
    for (e, n) in p.existing.iter().enumerate() {
        let classes: Vec<(usize, f64)> = (0..p.classes.len())
            .filter(|&k| p.classes[k].existing.contains(&e))
            .map(|k| (k, p.preference_penalty(k, &n.labels, &n.taints)))
            .collect();
        // a node that must keep its own pods offers only the room they leave
        let room = p.room_after_home(e);
        if !classes.is_empty() || !n.home.is_empty() {
            out.push(BinInfo {
                bin: Bin::Existing(e),
                room,
                cost: n.keep_cost,
                classes,
                preload: n.home.clone(),
            });
        }
    }
    let mut by_offering: BTreeMap<(usize, usize), Vec<usize>> = BTreeMap::new();
    for (k, c) in p.classes.iter().enumerate() {
        for &so in &c.offerings {
            by_offering.entry(so).or_default().push(k);
        }
    }
    let mut news: Vec<BinInfo> = by_offering
        .into_iter()
        .map(|((s, o), ks)| {
            let off = p.offering(s, o);
            let classes = ks
                .into_iter()
                .map(|k| (k, p.preference_penalty(k, &off.labels, &p.shapes[s].taints)))
                .collect();
            BinInfo {
                bin: Bin::New {
                    shape: s,
                    offering: o,
                },
                room: off.alloc.clone(),
                cost: off.cost,
                classes,
                preload: vec![],
            }
        })
        .collect();
    prune_dominated(p, &mut news, across_zones);
    out.extend(news);
    out
}

/// `all` (this problem's [`bins`]) narrowed to the classes with demand: a sub-problem of a few
/// classes prices far fewer pairs, and more offerings are dominated among them.
pub fn bins_for(p: &Problem, all: &[BinInfo], demand: &[u32]) -> Vec<BinInfo> {
    let mut out = Vec::new();
    let mut news = Vec::new();
    for b in all {
        let classes: Vec<(usize, f64)> = b
            .classes
            .iter()
            .copied()
            .filter(|&(k, _)| demand[k] > 0)
            .collect();
        let narrowed = BinInfo {
            classes,
            ..b.clone()
        };
        match b.bin {
            Bin::Existing(_) if !narrowed.classes.is_empty() || !b.preload.is_empty() => {
                out.push(narrowed)
            }
            Bin::New { .. } if !narrowed.classes.is_empty() => news.push(narrowed),
            _ => {}
        }
    }
    prune_dominated(p, &mut news, false);
    out.extend(news);
    out
}

/// Drops an offering when another in the same pool, zone and capacity type has at least its room,
/// serves a superset of its classes at no more penalty, and costs no more. Pools with limits keep
/// everything (a bigger node uses more of the limit). `across_zones`: zones are not told apart.
fn prune_dominated(p: &Problem, bins: &mut Vec<BinInfo>, across_zones: bool) {
    let mut groups: BTreeMap<(usize, String, crate::catalog::CapacityType), Vec<usize>> =
        BTreeMap::new();
    for (i, b) in bins.iter().enumerate() {
        if let Bin::New { shape, offering } = b.bin {
            let o = p.offering(shape, offering);
            let zone = if across_zones {
                String::new()
            } else {
                o.zone.clone()
            };
            groups
                .entry((p.shapes[shape].pool, zone, o.capacity_type))
                .or_default()
                .push(i);
        }
    }
    let mut keep = vec![true; bins.len()];
    for ((pool, ..), mut members) in groups {
        if p.pools[pool].remaining.is_some() || !p.pools[pool].min_values.is_empty() {
            continue;
        }
        // cheapest first; a bin can only be dominated by one at least as cheap, earlier in this
        // order
        members.sort_by(|&a, &b| bins[a].cost.total_cmp(&bins[b].cost).then(a.cmp(&b)));
        let mut kept: Vec<usize> = Vec::new();
        for &i in &members {
            let dominated = kept.iter().any(|&j| {
                bins[j].room.iter().zip(&bins[i].room).all(|(x, y)| x >= y)
                    && serves_superset(&bins[j], &bins[i])
            });
            if dominated {
                keep[i] = false;
            } else {
                kept.push(i);
            }
        }
    }
    let mut i = 0;
    bins.retain(|_| {
        i += 1;
        keep[i - 1]
    });
}

/// Whether `a` serves every class `b` serves at no higher penalty (class lists are ascending).
pub(crate) fn serves_superset(a: &BinInfo, b: &BinInfo) -> bool {
    let mut it = a.classes.iter().peekable();
    b.classes.iter().all(|(k, pen)| {
        while it.peek().is_some_and(|(j, _)| j < k) {
            it.next();
        }
        it.peek().is_some_and(|(j, q)| j == k && q <= pen)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::optimizer::fixtures::{two_zone_catalog, zone_spread};

    /// Whether `kept` holds a bin that serves every pattern of `b` at no more cost.
    fn covered(p: &Problem, kept: &[BinInfo], b: &BinInfo) -> bool {
        let key = |x: &BinInfo| match x.bin {
            Bin::New { shape, offering } => Some((
                p.shapes[shape].pool,
                p.offering(shape, offering).capacity_type,
            )),
            Bin::Existing(_) => None,
        };
        kept.iter().any(|k| {
            key(k) == key(b)
                && k.cost <= b.cost
                && k.room.iter().zip(&b.room).all(|(x, y)| x >= y)
                && serves_superset(k, b)
        })
    }

    #[test]
    fn offerings_alike_but_for_their_zone_collapse_only_where_no_rule_reads_the_zone() {
        // the diverse mix's zone rules keep z1 and z2 apart in its menu; its relaxation drops them,
        // and there the two zones offer the same node at the same price
        let full = Problem::build(&crate::workload::diverse(50, 5), &two_zone_catalog());
        assert_eq!(bins(&full).len(), 2, "one bin per zone");
        assert_eq!(
            bins_across_zones(&full).len(),
            2,
            "zone rules keep the zones apart"
        );
        let relaxed = super::super::relax::relax(&full, false).0;
        let (all, merged) = (bins(&relaxed), bins_across_zones(&relaxed));
        assert_eq!(all.len(), 2);
        assert_eq!(merged.len(), 1, "one bin for both zones");
        assert!(all.iter().all(|b| covered(&relaxed, &merged, b)));
        let spread = zone_spread(4);
        assert_eq!(
            bins_across_zones(&spread)
                .iter()
                .map(|b| b.bin)
                .collect::<Vec<_>>(),
            bins(&spread).iter().map(|b| b.bin).collect::<Vec<_>>()
        );
    }
}

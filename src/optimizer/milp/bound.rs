//! A certified lower bound: the LP relaxation of the aggregated model. Nodes of each bin are a
//! continuous count, pods are spread over bins, and a bin's pods must fit in its node count times
//! its room in every resource, with per-node caps (hostname anti-affinity, hostname spread, host
//! ports) scaled by the node count, and dual-feasible-function cuts per bin and resource so that
//! pods above half (a third, a quarter) of a node cannot share it fractionally. Every plan that
//! places the same pods is feasible for this LP, so its optimum bounds every such plan's objective
//! from below.
//!
//! Zone-level rules are left out (dropping rows only lowers the optimum), which lets the LP merge
//! what only those rules tell apart: bins of any zone and capacity type are pruned by dominance
//! within their NodePool, and classes with the same requests, bins, penalties and anti-affinity
//! clique become one row. That keeps the LP to a few thousand columns at 10,000 pods.

use std::collections::{BTreeMap, BTreeSet};

use highs::{ColProblem, HighsModelStatus, Sense};

use crate::domain::labels::HOSTNAME;

use super::super::highs_options::SolverOptions;
use super::super::problem::Problem;
use super::columns::{Bin, BinInfo, NodeRules};
use super::SolverError;

/// One row of the bound: classes merged because the bound cannot tell them apart.
struct Group {
    demand: f64,
    req: Vec<i64>,
    /// Sum of the members' per-node caps (`None`: uncapped).
    cap: Option<f64>,
    clique: Option<usize>,
    /// (bin, penalty) over the kept bins.
    bins: Vec<(usize, f64)>,
}

/// The bound for placing `demand[k]` pods of each class, or why there is none.
pub fn lower_bound(
    p: &Problem,
    bins: &[BinInfo],
    demand: &[u32],
    seconds: f64,
) -> Result<f64, SolverError> {
    if demand.iter().all(|&d| d == 0) {
        return Ok(0.0);
    }
    let rules = NodeRules::build(p);
    let kept = prune_across_zones(p, bins);
    let groups = merge_classes(p, bins, &kept, demand, &rules);
    // HiGHS rejects huge matrix values (memory is in milli-bytes): scale each resource by the
    // largest room
    let scale: Vec<f64> = (0..p.dims.len())
        .map(|d| {
            kept.iter()
                .map(|&b| bins[b].room[d] as f64)
                .fold(1.0, f64::max)
        })
        .collect();
    let mut pb = ColProblem::default();
    let demand_rows: Vec<highs::Row> = groups.iter().map(|g| pb.add_row(g.demand..)).collect();
    let mut cap_rows: BTreeMap<(usize, usize), highs::Row> = BTreeMap::new(); // (bin, dim)
    let mut clique_rows: BTreeMap<(usize, usize), highs::Row> = BTreeMap::new(); // (bin, clique)

    // per group and bin, the row x <= cap * n, remembered per bin for the node column's
    // coefficient
    let mut per_class_rows: Vec<Vec<Option<highs::Row>>> = Vec::new();
    let mut node_caps: BTreeMap<usize, Vec<(highs::Row, f64)>> = BTreeMap::new();
    for g in &groups {
        let mut rows = Vec::new();
        for &(b, _) in &g.bins {
            for d in 0..p.dims.len() {
                if g.req[d] > 0 {
                    cap_rows.entry((b, d)).or_insert_with(|| pb.add_row(..=0.0));
                }
            }
            if let Some(c) = g.clique {
                clique_rows
                    .entry((b, c))
                    .or_insert_with(|| pb.add_row(..=0.0));
            }
            rows.push(g.cap.map(|cap| {
                let r = pb.add_row(..=0.0);
                node_caps.entry(b).or_default().push((r, -cap));
                r
            }));
        }
        per_class_rows.push(rows);
    }
    let dff = dff_rows(&mut pb, bins, &kept, &groups);
    let mut limit_rows: Vec<(usize, String, highs::Row)> = Vec::new();
    for (pi, pool) in p.pools.iter().enumerate() {
        for (name, left) in pool.remaining.iter().flat_map(|r| r.iter()) {
            limit_rows.push((pi, name.to_string(), pb.add_row(..=left.as_f64().max(0.0))));
        }
    }
    for (i, &b) in kept.iter().enumerate() {
        let info = &bins[b];
        let mut f: Vec<(highs::Row, f64)> = (0..p.dims.len())
            .filter_map(|d| {
                cap_rows
                    .get(&(i, d))
                    .map(|&r| (r, -(info.room[d] as f64) / scale[d]))
            })
            .collect();
        f.extend(
            clique_rows
                .iter()
                .filter(|((bb, _), _)| *bb == i)
                .map(|(_, &r)| (r, -1.0)),
        );
        f.extend(node_caps.get(&i).into_iter().flatten().copied());
        f.extend(dff.range((i, 0, 0)..(i + 1, 0, 0)).map(|(_, &r)| (r, -1.0)));
        if let Bin::New { shape, .. } = info.bin {
            let s = &p.shapes[shape];
            for (pi, name, r) in &limit_rows {
                if *pi == s.pool {
                    f.push((
                        *r,
                        if name == "nodes" {
                            1.0
                        } else {
                            s.capacity.get(name).as_f64()
                        },
                    ));
                }
            }
        }
        let upper = if matches!(info.bin, Bin::Existing(_)) {
            1.0
        } else {
            f64::INFINITY
        };
        pb.add_column(info.cost, 0.0..=upper, f);
    }
    for (gi, g) in groups.iter().enumerate() {
        for (j, &(b, pen)) in g.bins.iter().enumerate() {
            let mut f: Vec<(highs::Row, f64)> = vec![(demand_rows[gi], 1.0)];
            f.extend(
                (0..p.dims.len())
                    .filter(|&d| g.req[d] > 0)
                    .map(|d| (cap_rows[&(b, d)], g.req[d] as f64 / scale[d])),
            );
            if let Some(c) = g.clique {
                f.push((clique_rows[&(b, c)], 1.0));
            }
            if let Some(r) = per_class_rows[gi][j] {
                f.push((r, 1.0));
            }
            for d in 0..p.dims.len() {
                for k in DFF_KS {
                    if let Some(&r) = dff.get(&(b, d, k)) {
                        let v = dff_value(g.req[d], bins[kept[b]].room[d], k);
                        if v > 0.0 {
                            f.push((r, v));
                        }
                    }
                }
            }
            pb.add_column(pen, 0.0.., f);
        }
    }
    let mut model = pb.optimise(Sense::Minimise);
    SolverOptions {
        quiet: true,
        threads: Some(1),
        time_limit: Some(seconds.max(0.1)),
        ..SolverOptions::default()
    }
    .apply(&mut model);
    let what = "bound lp";
    let solved = model
        .try_solve()
        .map_err(|status| SolverError::Run { what, status })?;
    if solved.status() != HighsModelStatus::Optimal {
        // only an optimal LP value is a bound; a time-limited primal point is not
        return Err(SolverError::NotOptimal {
            what,
            status: solved.status(),
        });
    }
    let value = solved.objective_value();
    // an LP solved to tolerance may sit a hair above its true optimum; step down so the bound stays
    // safe
    Ok((value * (1.0 - 1e-7) - 1e-7).max(0.0))
}

/// The dual-feasible functions u_k (Fekete and Schepers) the bound applies to each bin's resources.
const DFF_KS: [i64; 3] = [1, 2, 3];

/// u_k(req / room): the share of one node a pod is charged in the cut Σ u_k(x) y <= n. Any pods
/// that fit one node have u_k-shares summing to at most 1, so the cut holds for every integer plan;
/// it is stronger than the resource row where pods are large next to the node (two pods of 60% of a
/// node each need a node of their own, which the resource row alone lets them share at 1.2 nodes).
fn dff_value(req: i64, room: i64, k: i64) -> f64 {
    if req <= 0 || room <= 0 {
        return 0.0;
    }
    let scaled = (k + 1) as i128 * req as i128;
    if scaled % room as i128 == 0 {
        req as f64 / room as f64
    } else {
        (scaled / room as i128) as f64 / k as f64
    }
}

/// One cut row per (kept bin, resource, k) where some group's u_k-share exceeds its plain share of
/// the node (elsewhere the resource row already implies the cut).
fn dff_rows(
    pb: &mut ColProblem,
    bins: &[BinInfo],
    kept: &[usize],
    groups: &[Group],
) -> BTreeMap<(usize, usize, i64), highs::Row> {
    let mut out = BTreeMap::new();
    for g in groups {
        for &(b, _) in &g.bins {
            for (d, (&req, &room)) in g.req.iter().zip(&bins[kept[b]].room).enumerate() {
                for k in DFF_KS {
                    let plain = if room > 0 {
                        req as f64 / room as f64
                    } else {
                        0.0
                    };
                    if dff_value(req, room, k) > plain + 1e-9 {
                        out.entry((b, d, k)).or_insert_with(|| pb.add_row(..=0.0));
                    }
                }
            }
        }
    }
    out
}

/// Hostname anti-affinity rules whose members all repel each other (each member owns a rule
/// selecting the same members): at most one of them per node. Returns class -> clique id.
pub(super) fn anti_cliques(p: &Problem) -> BTreeMap<usize, usize> {
    let mut rules_of: BTreeMap<usize, BTreeSet<Vec<usize>>> = BTreeMap::new();
    for r in p
        .topology
        .affinities
        .iter()
        .filter(|r| r.anti && r.key == HOSTNAME)
    {
        let mut m = r.members.clone();
        m.sort_unstable();
        rules_of.entry(r.owner).or_default().insert(m);
    }
    let mut out = BTreeMap::new();
    let mut next = 0;
    let mut seen: BTreeSet<Vec<usize>> = BTreeSet::new();
    for sets in rules_of.values() {
        for m in sets {
            let clique = m.len() > 1
                && m.iter()
                    .all(|k| rules_of.get(k).is_some_and(|s| s.contains(m)));
            if clique && seen.insert(m.clone()) && m.iter().all(|k| !out.contains_key(k)) {
                for &k in m {
                    out.insert(k, next);
                }
                next += 1;
            }
        }
    }
    out
}

/// Indices of the bins the bound keeps: existing nodes, and new offerings not dominated within
/// their NodePool regardless of zone and capacity type (pools with limits keep all).
fn prune_across_zones(p: &Problem, bins: &[BinInfo]) -> Vec<usize> {
    let mut groups: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
    let mut out = Vec::new();
    for (i, b) in bins.iter().enumerate() {
        match b.bin {
            Bin::New { shape, .. } if p.pools[p.shapes[shape].pool].remaining.is_none() => {
                groups.entry(p.shapes[shape].pool).or_default().push(i)
            }
            _ => out.push(i),
        }
    }
    for mut members in groups.into_values() {
        members.sort_by(|&a, &b| bins[a].cost.total_cmp(&bins[b].cost).then(a.cmp(&b)));
        let mut kept: Vec<usize> = Vec::new();
        for i in members {
            let dominated = kept.iter().any(|&j| {
                bins[j].room.iter().zip(&bins[i].room).all(|(x, y)| x >= y)
                    && super::serves_superset(&bins[j], &bins[i])
            });
            if !dominated {
                kept.push(i);
            }
        }
        out.extend(kept);
    }
    out.sort_unstable();
    out
}

/// Classes merged by (requests, kept bins with penalties, clique); caps add up.
fn merge_classes(
    p: &Problem,
    bins: &[BinInfo],
    kept: &[usize],
    demand: &[u32],
    rules: &NodeRules,
) -> Vec<Group> {
    let mut of_class: Vec<Vec<(usize, u64)>> = vec![Vec::new(); p.classes.len()];
    for (i, &b) in kept.iter().enumerate() {
        for &(k, pen) in &bins[b].classes {
            of_class[k].push((i, pen.to_bits()));
        }
    }
    // (requests, (bin, penalty bits), clique): what the bound cannot tell apart
    type MergeKey = (Vec<i64>, Vec<(usize, u64)>, Option<usize>);
    let mut merged: BTreeMap<MergeKey, Group> = BTreeMap::new();
    for (k, list) in of_class.into_iter().enumerate() {
        if demand[k] == 0 {
            continue;
        }
        let clique = rules.cliques.get(&k).copied();
        let cap = rules.per_node_cap[k];
        let g = merged
            .entry((p.classes[k].req.clone(), list.clone(), clique))
            .or_insert_with(|| Group {
                demand: 0.0,
                req: p.classes[k].req.clone(),
                cap: Some(0.0),
                clique,
                bins: list
                    .iter()
                    .map(|&(b, pen)| (b, f64::from_bits(pen)))
                    .collect(),
            });
        g.demand += f64::from(demand[k]);
        g.cap = match (g.cap, cap) {
            (Some(c), n) if n != u32::MAX => Some(c + f64::from(n)),
            _ => None,
        };
    }
    merged.into_values().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every multiset of pods that fits a node has u_k-shares summing to at most 1 (the cut's
    /// validity), and a pod above half the node costs a whole node under u_1.
    #[test]
    fn pods_that_fit_one_node_never_charge_more_than_one_node() {
        let room = 1930;
        let mut rng = crate::workload::Rng(7);
        for _ in 0..2000 {
            let mut reqs = Vec::new();
            let mut used = 0;
            loop {
                let parts = 1 + rng.below(6);
                let r = 1 + rng.below(room as usize / parts) as i64;
                if used + r > room {
                    break;
                }
                used += r;
                reqs.push(r);
            }
            for k in DFF_KS {
                let total: f64 = reqs.iter().map(|&r| dff_value(r, room, k)).sum();
                assert!(total <= 1.0 + 1e-12, "k={k}: {reqs:?} charge {total}");
            }
        }
        assert_eq!(dff_value(1158, room, 1), 1.0);
        assert_eq!(dff_value(965, room, 1), 0.5);
        assert_eq!(dff_value(700, room, 2), 0.5);
        assert_eq!(dff_value(400, room, 1), 0.0);
    }
}

//! The menu: which offerings are worth considering at all. An offering is dominated when another
//! offering of the same NodePool, with the same value for every label a topology rule reads (zone,
//! capacity type, ...), costs no more, has at least its room in every resource, is accepted by
//! every label group that accepts it, carries no DaemonSet host port it lacks, and costs no class
//! more in preference penalties. Then every pod that fits the dominated offering fits the other one
//! too, so any plan using it stays feasible, and no dearer, with the other: greedy's launch choice
//! and the MILP optimum are unchanged while both look at a few hundred offerings instead of ten
//! thousand. Pools with limits or minValues keep everything (a bigger node uses more of a limit,
//! and minValues counts distinct types). Fallback lists still walk the whole catalog.

use std::collections::{BTreeMap, HashMap};

use crate::domain::CostWeights;

use super::problem::{preference_penalty, PodClass, PoolInfo, Shape};

type Offering = (usize, usize);

/// `dropped[s][o]`: whether offering `o` of shape `s` is dominated.
pub fn dominated(
    shapes: &[Shape],
    pools: &[PoolInfo],
    label_groups: &[Vec<Offering>],
    keys: &[String],
    classes: &[PodClass],
    weights: &CostWeights,
) -> Vec<Vec<bool>> {
    let mut dropped: Vec<Vec<bool>> = shapes
        .iter()
        .map(|s| vec![false; s.offerings.len()])
        .collect();
    // the label groups accepting each offering, interned so superset tests are memoised per pair
    let mut accepted: Vec<Vec<Vec<usize>>> = shapes
        .iter()
        .map(|s| vec![Vec::new(); s.offerings.len()])
        .collect();
    for (g, list) in label_groups.iter().enumerate() {
        for &(s, o) in list {
            accepted[s][o].push(g);
        }
    }
    let mut interned: HashMap<Vec<usize>, usize> = HashMap::new();
    let mut lists: Vec<Vec<usize>> = Vec::new();
    // (pool, the values of the topology keys) -> offerings with their label group
    type GroupKey<'a> = (usize, Vec<Option<&'a String>>);
    let mut groups: BTreeMap<GroupKey, Vec<(Offering, usize)>> = BTreeMap::new();
    for (s, shape) in shapes.iter().enumerate() {
        let pool = &pools[shape.pool];
        if pool.remaining.is_some() || !pool.min_values.is_empty() {
            continue;
        }
        for (o, off) in shape.offerings.iter().enumerate() {
            let gs = std::mem::take(&mut accepted[s][o]);
            if gs.is_empty() {
                continue; // no class can use it anyway
            }
            let id = *interned.entry(gs.clone()).or_insert_with(|| {
                lists.push(gs);
                lists.len() - 1
            });
            let domain = keys.iter().map(|key| off.labels.get(key)).collect();
            groups
                .entry((shape.pool, domain))
                .or_default()
                .push(((s, o), id));
        }
    }
    let preferring: Vec<&PodClass> = classes
        .iter()
        .filter(|c| !c.constraints.preferred_node_affinity.is_empty())
        .collect();
    let any_taints = shapes.iter().any(|s| !s.taints.is_empty());
    let penalties = |(s, o): Offering| -> Vec<f64> {
        if !any_taints && preferring.is_empty() {
            return vec![];
        }
        let labels = &shapes[s].offerings[o].labels;
        let scope: Box<dyn Iterator<Item = &PodClass>> = if any_taints {
            Box::new(classes.iter())
        } else {
            Box::new(preferring.iter().copied())
        };
        scope
            .map(|c| preference_penalty(&c.constraints, weights, labels, &shapes[s].taints))
            .collect()
    };
    let mut superset: HashMap<(usize, usize), bool> = HashMap::new();
    for mut members in groups.into_values() {
        let off = |(s, o): Offering| &shapes[s].offerings[o];
        members.sort_by(|a, b| off(a.0).cost.total_cmp(&off(b.0).cost).then(a.0.cmp(&b.0)));
        let mut kept: Vec<(Offering, usize, Vec<f64>)> = Vec::new();
        for (so, id) in members {
            let me = off(so);
            let pens = penalties(so);
            let is_dominated = kept.iter().any(|(other, oid, opens)| {
                let them = off(*other);
                them.alloc.iter().zip(&me.alloc).all(|(a, b)| a >= b)
                    && them.ds_ports.iter().all(|p| me.ds_ports.contains(p))
                    && opens.iter().zip(&pens).all(|(a, b)| a <= b)
                    && *superset
                        .entry((*oid, id))
                        .or_insert_with(|| is_superset(&lists[*oid], &lists[id]))
            });
            if is_dominated {
                dropped[so.0][so.1] = true;
            } else {
                kept.push((so, id, pens));
            }
        }
    }
    dropped
}

/// Whether ascending list `a` contains every element of ascending list `b`.
fn is_superset(a: &[usize], b: &[usize]) -> bool {
    let mut it = a.iter().peekable();
    b.iter().all(|x| {
        while it.peek().is_some_and(|y| *y < x) {
            it.next();
        }
        it.peek() == Some(&x)
    })
}

#[cfg(test)]
mod tests {
    use super::is_superset;

    #[test]
    fn superset_of_sorted_lists() {
        assert!(is_superset(&[1, 2, 3, 5], &[2, 5]));
        assert!(is_superset(&[1, 2], &[]));
        assert!(!is_superset(&[1, 3], &[2]));
        assert!(!is_superset(&[], &[0]));
    }
}

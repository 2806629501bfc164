//! The menu: which offerings are worth considering at all. An offering is dropped from every class's
//! candidate list when another offering of the same NodePool, with the same value for every label a
//! topology rule reads (zone, capacity type, ...), has at least its room in every resource, serves a
//! superset of its classes at no higher preference penalty, and costs no more. Any plan using the
//! dropped offering stays feasible, and no dearer, with the dominating one, so greedy's launch choice
//! and the MILP optimum are unchanged while both look at a few hundred offerings instead of ten
//! thousand. Pools with limits or minValues keep everything (a bigger node uses more of a limit, and
//! minValues counts distinct types). The full list stays on each class for the executor's fallbacks.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use crate::domain::labels::HOSTNAME;

use super::problem::Problem;

type Offering = (usize, usize);

/// Narrows every class's `offerings` to the non-dominated ones; `full_offerings` keeps the rest.
pub fn prune(p: &mut Problem) {
    let keys = topology_keys(p);
    // offerings numbered densely: shape s's offerings start at base[s]
    let base: Vec<usize> = p.shapes.iter().scan(0, |acc, s| {
        let b = *acc;
        *acc += s.offerings.len();
        Some(b)
    }).collect();
    let total = p.shapes.iter().map(|s| s.offerings.len()).sum::<usize>();
    let mut served_by: Vec<Vec<usize>> = vec![Vec::new(); total];
    for (k, c) in p.classes.iter().enumerate() {
        for &(s, o) in &c.offerings {
            served_by[base[s] + o].push(k);
        }
    }
    let served = p.shapes.iter().enumerate().flat_map(|(s, sh)| (0..sh.offerings.len()).map(move |o| (s, o))).zip(served_by).filter(|(_, ks)| !ks.is_empty());
    // intern class lists so superset tests are memoised per pair of distinct lists
    let mut interned: HashMap<Vec<usize>, usize> = HashMap::new();
    let mut lists: Vec<Vec<usize>> = Vec::new();
    let mut groups: BTreeMap<(usize, Vec<Option<String>>), Vec<(Offering, usize)>> = BTreeMap::new();
    for (so, ks) in served {
        let pool = p.shapes[so.0].pool;
        if p.pools[pool].remaining.is_some() || !p.pools[pool].min_values.is_empty() {
            continue;
        }
        let id = *interned.entry(ks.clone()).or_insert_with(|| {
            lists.push(ks);
            lists.len() - 1
        });
        let labels = &p.offering(so.0, so.1).labels;
        let domain = keys.iter().map(|key| labels.get(key).cloned()).collect();
        groups.entry((pool, domain)).or_default().push((so, id));
    }
    let preferring: Vec<usize> = (0..p.classes.len()).filter(|&k| has_preferences(p, k)).collect();
    let mut superset: HashMap<(usize, usize), bool> = HashMap::new();
    let mut dropped = vec![false; total];
    for members in groups.into_values() {
        let mut members = members;
        members.sort_by(|a, b| p.offering(a.0 .0, a.0 .1).cost.total_cmp(&p.offering(b.0 .0, b.0 .1).cost).then(a.0.cmp(&b.0)));
        let mut kept: Vec<(Offering, usize, Vec<f64>)> = Vec::new();
        for (so, id) in members {
            let room = &p.offering(so.0, so.1).alloc;
            let pens = penalties(p, so, &preferring);
            let dominated = kept.iter().any(|(other, oid, opens)| {
                p.offering(other.0, other.1).alloc.iter().zip(room).all(|(a, b)| a >= b)
                    && *superset.entry((*oid, id)).or_insert_with(|| is_superset(&lists[*oid], &lists[id]))
                    && opens.iter().zip(&pens).all(|(a, b)| a <= b)
            });
            if dominated {
                dropped[base[so.0] + so.1] = true;
            } else {
                kept.push((so, id, pens));
            }
        }
    }
    for c in &mut p.classes {
        c.full_offerings = c.offerings.clone();
        c.offerings.retain(|&(s, o)| !dropped[base[s] + o]);
    }
}

/// Label keys whose value some topology rule compares across nodes (hostname is unique per node).
fn topology_keys(p: &Problem) -> Vec<String> {
    let mut keys: BTreeSet<String> = p.topology.spreads.iter().map(|g| g.key.clone()).collect();
    keys.extend(p.topology.affinities.iter().map(|r| r.key.clone()));
    keys.remove(HOSTNAME);
    keys.into_iter().collect()
}

fn has_preferences(p: &Problem, k: usize) -> bool {
    !p.classes[k].constraints.preferred_node_affinity.is_empty() || p.shapes.iter().any(|s| !s.taints.is_empty())
}

/// Per-pod penalties of the preferring classes on this offering (a class not served counts as 0; the
/// superset test already excludes it).
fn penalties(p: &Problem, (s, o): Offering, preferring: &[usize]) -> Vec<f64> {
    let labels = &p.offering(s, o).labels;
    preferring.iter().map(|&k| p.preference_penalty(k, labels, &p.shapes[s].taints)).collect()
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

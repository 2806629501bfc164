//! A plan candidate from the relaxation (`relax.rs`): its pattern LP, rounded, with each relaxed
//! pod slot given back to a pod of the full problem.
//!
//! On Karpenter's diverse mix at 1,000 pods the full model's 600 classes keep column generation
//! far from converged when its share of a 10 s solve runs out (an LP of about 4.9 $/h), and its
//! roundings replay at 5.8 $/h or more; the relaxation's 60-odd classes reach an LP of about
//! 3.85 $/h within a second. Its patterns say which nodes to buy and how many pods of each request
//! go on each; the lifting chooses the pods. A slot of a merged class goes to the member class with
//! the most pods still unassigned, among those the node's own rules admit (hostname spread caps,
//! anti-affinity conflicts) and whose zone-affinity group is not yet bound to another domain
//! (ranking zone-affinity groups already bound to the node's domain first, and spreads short of
//! their share of it, replayed dearer: 4.72-4.80 $/h against 4.57 from the same LP). The
//! lifted patterns are then replayed like any other candidate: the replay checks every rule pod by
//! pod, and the greedy repair places what it refuses or what the rounding left out.

use std::collections::BTreeMap;

use super::super::problem::Problem;
use super::super::SolveSettings;
use super::columns::{Bin, Column, NodeRules};
use super::relax;

/// The candidate for placing `demand[k]` pods of each class of `p`, from a relaxation, its greedy
/// start and its column generation within `seconds` in all; None when the relaxation does not shrink
/// the problem (the full model's own LP is then as good), its LP fails or no time is left for it.
pub fn candidate(p: &Problem, demand: &[u32], settings: &SolveSettings, seconds: f64) -> Option<Vec<(Column, u32)>> {
    let began = std::time::Instant::now();
    let relaxed = relax::Relaxed::of(p, demand)?;
    let seed = relaxed.seed();
    let left = seconds - began.elapsed().as_secs_f64();
    if left < 0.05 {
        return None;
    }
    let settings = SolveSettings { time_limit: std::time::Duration::from_secs_f64(left), lower_bound: false, ..settings.clone() };
    let generated = super::columns_and_bound(&relaxed.problem, &settings, &seed, &relaxed.demand, true).ok()?;
    // the LP's copies rounded to the nearest: the replay's repair places what that leaves out (covering
    // every pod with the largest fractions bought 5.73 $/h of nodes for 1,000 pods of the diverse mix,
    // and replayed dearer)
    let chosen: Vec<(&Column, u32)> = generated
        .columns
        .iter()
        .zip(&generated.lp_values)
        .filter_map(|(c, &v)| {
            let n = (v + 0.5).floor();
            (n >= 1.0).then_some((c, n as u32))
        })
        .collect();
    Some(lift(p, &relaxed.of_class, demand, &chosen))
}

/// A lifted node: its bin and (class, pods), classes ascending.
type Pattern = (Bin, Vec<(usize, u32)>);

/// The relaxed patterns with their slots given to classes of `p` (see the module doc).
fn lift(p: &Problem, of_class: &[usize], demand: &[u32], chosen: &[(&Column, u32)]) -> Vec<(Column, u32)> {
    let rules = NodeRules::build(p);
    let mut members: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
    for (k, &r) in of_class.iter().enumerate() {
        if demand[k] > 0 {
            members.entry(r).or_default().push(k);
        }
    }
    let affinity_of = zone_affinity_rules(p);
    let mut bound_to: BTreeMap<usize, String> = BTreeMap::new();
    let mut left = demand.to_vec();
    let mut out: BTreeMap<Pattern, (f64, u32)> = BTreeMap::new();
    for (col, copies) in chosen {
        let labels = col.bin.labels(p);
        for _ in 0..*copies {
            let mut node: BTreeMap<usize, u32> = BTreeMap::new();
            let mut host = vec![0i64; rules.host_caps.len()];
            for &(rk, n) in &col.counts {
                for _ in 0..n {
                    let admits = |k: usize, node: &BTreeMap<usize, u32>, host: &[i64]| {
                        left[k] > 0
                            && node.get(&k).copied().unwrap_or(0) < rules.per_node_cap[k]
                            && rules.host_groups_of[k].iter().all(|&h| host[h] < rules.host_caps[h].1)
                            && rules.conflicts_of[k].iter().all(|j| !node.contains_key(j))
                            && affinity_of[k].iter().all(|(ri, key)| bound_to.get(ri).is_none_or(|d| labels.get(key) == Some(d)))
                    };
                    let Some(&k) = members.get(&rk).into_iter().flatten().filter(|&&k| admits(k, &node, &host)).max_by_key(|&&k| (left[k], std::cmp::Reverse(k))) else {
                        continue;
                    };
                    *node.entry(k).or_default() += 1;
                    left[k] -= 1;
                    for &h in &rules.host_groups_of[k] {
                        host[h] += 1;
                    }
                    for (ri, key) in &affinity_of[k] {
                        if let Some(d) = labels.get(key) {
                            bound_to.entry(*ri).or_insert_with(|| d.clone());
                        }
                    }
                }
            }
            if !node.is_empty() {
                out.entry((col.bin, node.into_iter().collect())).or_insert((col.cost, 0)).1 += 1;
            }
        }
    }
    out.into_iter().map(|((bin, counts), (cost, n))| (Column { bin, counts, cost }, n)).collect()
}

/// Per class: the zone-like required self-affinity rules it belongs to, with their keys.
fn zone_affinity_rules(p: &Problem) -> Vec<Vec<(usize, String)>> {
    let mut out = vec![Vec::new(); p.classes.len()];
    for (ri, r) in p.topology.affinities.iter().enumerate() {
        if !r.anti && !r.is_host() && r.self_selecting() && r.running.is_empty() {
            for &m in &r.members {
                out[m].push((ri, r.key.clone()));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lifted_patterns_hold_what_each_class_asks_at_most_and_keep_the_node_rules() {
        let catalog = crate::optimizer::fixtures::tiny_catalog();
        let p = Problem::build(&crate::workload::diverse(120, 4), &catalog);
        let demand: Vec<u32> = p.classes.iter().map(|c| c.demand() as u32).collect();
        let lifted = candidate(&p, &demand, &SolveSettings::default(), 2.0).expect("the relaxation merges the mix's classes");
        let rules = NodeRules::build(&p);
        let mut placed = vec![0u32; p.classes.len()];
        for (c, copies) in &lifted {
            let Bin::New { shape, offering } = c.bin else { panic!("no existing nodes here") };
            let room = &p.offering(shape, offering).alloc;
            for (d, &r) in room.iter().enumerate() {
                let used: i64 = c.counts.iter().map(|&(k, n)| p.classes[k].req[d] * i64::from(n)).sum();
                assert!(used <= r, "{c:?} overfills dimension {d}");
            }
            for &(k, n) in &c.counts {
                assert!(n <= rules.per_node_cap[k] && p.classes[k].offerings.contains(&(shape, offering)), "{c:?}: class {k}");
                assert!(rules.conflicts_of[k].iter().all(|j| c.counts.iter().all(|&(o, _)| o != *j)), "{c:?}: class {k} with a conflicting one");
                placed[k] += n * copies;
            }
            for (members, cap, _) in &rules.host_caps {
                let here: i64 = c.counts.iter().filter(|(k, _)| members.contains(k)).map(|&(_, n)| i64::from(n)).sum();
                assert!(here <= *cap, "{c:?}: hostname spread over its cap");
            }
        }
        assert!(placed.iter().zip(&demand).all(|(got, want)| got <= want));
        let total: u32 = demand.iter().sum();
        assert!(placed.iter().sum::<u32>() * 2 >= total, "only {} of {total} pods lifted", placed.iter().sum::<u32>());
        // what the rounding left out, and what the replay refuses, the repair places
        let (state, rejected) = super::super::replay(&p, &lifted);
        let (state, left) = crate::optimizer::greedy::repair(&p, state, &rejected);
        assert!(left.is_empty(), "{left:?}");
        assert_eq!((0..p.classes.len()).map(|k| state.placed_of(k) as u32).sum::<u32>(), total);
    }
}

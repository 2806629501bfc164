//! Preferred pod affinity and anti-affinity as penalties in the objective. A pod whose preferred
//! term is unmet costs the term's weight times the cost weight (`preferredPodAffinity`,
//! `preferredPodAntiAffinity`, $/h per unit of weight) for as long as it runs there.
//!
//! A term is met when the pod's domain (its node for the hostname key, the node's value of the key
//! otherwise) holds another pod the term selects, running or placed by the plan; an anti-affinity
//! term is met when it holds none. A node without the key meets anti-affinity and misses affinity,
//! as for the required terms. The hostname part depends only on one node's pods, so node patterns
//! carry it in their cost and the integer program weighs it exactly; the part on other keys depends
//! on the whole plan and is charged by [`penalty`], which every plan's score goes through.

use crate::domain::labels::HOSTNAME;
use crate::domain::Labels;

use super::problem::Problem;
use super::state::State;
use super::topology::PreferredRule;

/// $/h per pod of `r` left unmet.
pub fn rule_cost(p: &Problem, r: &PreferredRule) -> f64 {
    let per_weight = if r.anti {
        p.weights.preferred_pod_anti_affinity
    } else {
        p.weights.preferred_pod_affinity
    };
    f64::from(r.weight.max(0)) * per_weight
}

/// Whether the owner's pods in a domain with `members` matching pods (the owner's own counted, when
/// it matches) miss the term.
fn unmet(r: &PreferredRule, members: i64) -> bool {
    let others = members - i64::from(r.members.binary_search(&r.owner).is_ok());
    if r.anti {
        others > 0
    } else {
        others <= 0
    }
}

/// The hostname terms' penalty of one node: the pods `counts` (class, pods) on a node with
/// `labels`. Running pods count through the node's hostname, and so do running pods' own hostname
/// terms that these pods would break.
pub fn host_penalty(p: &Problem, labels: &Labels, counts: &[(usize, u32)]) -> f64 {
    let host = labels.get(HOSTNAME).map_or("", String::as_str);
    let mut total = 0.0;
    for s in p.topology.shunned.iter().filter(|s| s.is_host()) {
        if let Some(&w) = s.weight.get(host) {
            if counts
                .iter()
                .any(|&(k, n)| n > 0 && s.members.binary_search(&k).is_ok())
            {
                total += w as f64 * p.weights.preferred_pod_anti_affinity;
            }
        }
    }
    for &(owner, owners) in counts {
        for r in p
            .topology
            .owned_preferred(owner)
            .iter()
            .map(|&ri| &p.topology.preferred[ri])
            .filter(|r| r.is_host())
        {
            let members = r.running.get(host).copied().unwrap_or(0)
                + counts
                    .iter()
                    .filter(|(k, _)| r.members.binary_search(k).is_ok())
                    .map(|&(_, n)| i64::from(n))
                    .sum::<i64>();
            if unmet(r, members) {
                total += f64::from(owners) * rule_cost(p, r);
            }
        }
    }
    total
}

/// The whole plan's penalty for preferred pod terms: every node's hostname terms plus the terms on
/// other keys, judged against the plan's domain counts.
pub fn penalty(p: &Problem, state: &State<'_>) -> f64 {
    if !p.topology.has_preferred() {
        return 0.0;
    }
    let mut total = 0.0;
    let mut counts: Vec<(usize, u32)> = Vec::new();
    for n in state.nodes.iter().filter(|n| !n.placed.is_empty()) {
        counts.clear();
        counts.extend(
            n.placed
                .iter()
                .filter(|(_, &c)| c > 0)
                .map(|(&k, &c)| (k, c as u32)),
        );
        total += host_penalty(p, &n.labels, &counts);
    }
    total
        + zone_penalty(
            p,
            state,
            (0..p.topology.preferred.len()).filter(|&ri| !p.topology.preferred[ri].is_host()),
        )
        + shunned_zone_penalty(p, state)
}

/// What the plan's pods cost the running pods whose preferred anti-affinity on a zone-like key they
/// break: each such running pod's weight, once, when a pod it selects is placed in its domain.
pub fn shunned_zone_penalty(p: &Problem, state: &State<'_>) -> f64 {
    let mut total = 0;
    for s in p.topology.shunned.iter().filter(|s| !s.is_host()) {
        let reached: std::collections::BTreeSet<&String> = state
            .nodes
            .iter()
            .filter(|n| {
                n.placed
                    .iter()
                    .any(|(k, &c)| c > 0 && s.members.binary_search(k).is_ok())
            })
            .filter_map(|n| n.labels.get(&s.key))
            .collect();
        total += reached
            .into_iter()
            .filter_map(|d| s.weight.get(d))
            .sum::<i64>();
    }
    total as f64 * p.weights.preferred_pod_anti_affinity
}

/// The penalty of the zone-like rules `rules`, from the plan's per-domain counts.
pub fn zone_penalty(p: &Problem, state: &State<'_>, rules: impl IntoIterator<Item = usize>) -> f64 {
    let mut total = 0.0;
    for ri in rules {
        let r = &p.topology.preferred[ri];
        let (members, owners) = state.preferred_domains(ri);
        let missed: i64 = owners
            .iter()
            .filter(|(d, &n)| {
                n > 0
                    && match d {
                        None => !r.anti,
                        Some(d) => unmet(r, members.get(d).copied().unwrap_or(0)),
                    }
            })
            .map(|(_, &n)| n)
            .sum();
        total += missed as f64 * rule_cost(p, r);
    }
    total
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::domain::labels::ZONE;
    use crate::optimizer::topology::PreferredRule;

    fn problem_with(rules: Vec<PreferredRule>) -> Problem {
        let mut p = crate::optimizer::fixtures::zone_spread(2);
        p.topology.spreads.clear();
        p.topology.preferred_of = vec![Vec::new(); 2];
        p.topology.preferred_counting = vec![Vec::new(); 2];
        for (ri, r) in rules.iter().enumerate() {
            p.topology.preferred_of[r.owner].push(ri);
            for &m in &r.members {
                p.topology.preferred_counting[m].push(ri);
            }
        }
        p.topology.preferred = rules;
        p
    }

    fn rule(owner: usize, members: Vec<usize>, key: &str, anti: bool) -> PreferredRule {
        PreferredRule {
            owner,
            members,
            key: key.into(),
            anti,
            weight: 100,
            running: BTreeMap::new(),
        }
    }

    fn labels(pairs: &[(&str, &str)]) -> Labels {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn two_replicas_on_one_node_both_pay_their_preferred_anti_affinity() {
        let p = problem_with(vec![rule(0, vec![0], HOSTNAME, true)]);
        let node = labels(&[(HOSTNAME, "n1")]);
        let per_pod = 100.0 * p.weights.preferred_pod_anti_affinity;
        assert_eq!(host_penalty(&p, &node, &[(0, 1)]), 0.0);
        assert!((host_penalty(&p, &node, &[(0, 2)]) - 2.0 * per_pod).abs() < 1e-12);
    }

    #[test]
    fn preferred_affinity_is_met_by_a_running_pod_on_the_same_host_only() {
        let mut r = rule(0, vec![1], HOSTNAME, false);
        r.running.insert("n1".into(), 1);
        let p = problem_with(vec![r]);
        let per_pod = 100.0 * p.weights.preferred_pod_affinity;
        assert_eq!(
            host_penalty(&p, &labels(&[(HOSTNAME, "n1")]), &[(0, 3)]),
            0.0
        );
        assert!(
            (host_penalty(&p, &labels(&[(HOSTNAME, "n2")]), &[(0, 3)]) - 3.0 * per_pod).abs()
                < 1e-12
        );
        assert_eq!(
            host_penalty(&p, &labels(&[(HOSTNAME, "n2")]), &[(0, 3), (1, 1)]),
            0.0
        );
    }

    #[test]
    fn zonal_preferred_anti_affinity_charges_the_pods_that_share_a_zone() {
        let p = problem_with(vec![rule(0, vec![0], ZONE, true)]);
        let mut state = State::new(&p);
        let (a, b) = (state.open(0, 0), state.open(0, 0));
        state.place(0, a);
        assert_eq!(penalty(&p, &state), 0.0);
        // a second replica in the same zone, on another node: both miss the term
        state.place(0, b);
        let per_pod = 100.0 * p.weights.preferred_pod_anti_affinity;
        assert!((penalty(&p, &state) - 2.0 * per_pod).abs() < 1e-12);
    }
}

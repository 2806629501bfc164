//! Replaying a candidate: the chosen patterns become nodes of a fresh placement state and their
//! pods are placed one at a time through every rule, as kube-scheduler would check them. The
//! patterns only promise final counts; zone spread is checked at each step and zone affinity fixes
//! its domain with the first pod, so the order matters. Classes linked by a zone spread or zone
//! affinity rule are placed together: always the pod whose target domain holds the fewest matching
//! pods, and for a self-affinity group the domain most of its targets lie in first.

use std::collections::{BTreeMap, BTreeSet};

use super::super::problem::Problem;
use super::super::sets::DisjointSets;
use super::super::state::State;
use super::columns::{Bin, Column};

/// Replays chosen patterns into a fresh state; returns it with the pods (class, count) it did not
/// place: left unplaced by the MILP, or refused by a rule. Surplus pods a pattern carries are not
/// counted.
pub fn replay<'p>(p: &'p Problem, chosen: &[(Column, u32)]) -> (State<'p>, Vec<(usize, usize)>) {
    let mut state = State::new(p);
    let mut targets: Vec<Vec<(usize, u32)>> = vec![Vec::new(); p.classes.len()]; // per class: (node, count)
    for (col, n) in chosen {
        for _ in 0..*n {
            let node = match col.bin {
                Bin::Existing(e) => e,
                Bin::New { shape, offering } => {
                    if !state.can_open(shape, offering) {
                        continue;
                    }
                    state.open(shape, offering)
                }
            };
            for &(k, c) in &col.counts {
                targets[k].push((node, c));
            }
        }
    }
    let links = Links::build(p);
    let preferred = preferred_domains(p, &state, &targets);
    let mut placed = vec![0usize; p.classes.len()];
    for component in links.components() {
        loop {
            // the next pod: first those in an affinity group's chosen domain, then the emptiest
            // domain
            let pick = component
                .iter()
                .filter(|&&k| placed[k] < p.classes[k].demand())
                .flat_map(|&k| {
                    targets[k]
                        .iter()
                        .enumerate()
                        .filter(|(_, t)| t.1 > 0)
                        .map(move |(i, t)| (k, i, t.0))
                })
                .min_by_key(|&(k, i, node)| {
                    let off_domain = links.affinity[k].iter().any(|&ri| {
                        preferred[ri].as_ref().is_some_and(|d| {
                            state.node_domain(node, &p.topology.affinities[ri].key)
                                != Some(d.as_str())
                        })
                    });
                    let crowd: i64 = links.spreads[k]
                        .iter()
                        .map(|&g| state.domain_count(g, node))
                        .sum();
                    (off_domain, crowd, k, i)
                });
            let Some((k, i, node)) = pick else { break };
            if state.can_place(k, node).is_ok() {
                state.place(k, node);
                placed[k] += 1;
                targets[k][i].1 -= 1;
            } else {
                targets[k][i].1 = 0;
            }
        }
    }
    let left = (0..p.classes.len())
        .map(|k| (k, p.classes[k].demand().saturating_sub(placed[k])))
        .filter(|&(_, n)| n > 0)
        .collect();
    (state, left)
}

/// Which rules tie classes together in the replay.
struct Links {
    /// Per class: the distinct hard zone-like spread groups counting it (one per selector and key;
    /// each member of a deployment owns an identical copy).
    spreads: Vec<Vec<usize>>,
    /// Per class: its zone-like required self-affinity rules.
    affinity: Vec<Vec<usize>>,
    n: usize,
}

impl Links {
    fn build(p: &Problem) -> Links {
        let n = p.classes.len();
        let mut spreads = vec![Vec::new(); n];
        let mut seen: BTreeSet<(&str, &[usize])> = BTreeSet::new();
        for (gi, g) in p.topology.spreads.iter().enumerate() {
            if g.hard && !g.is_host() && seen.insert((g.key.as_str(), g.members.as_slice())) {
                for &m in &g.members {
                    spreads[m].push(gi);
                }
            }
        }
        let mut affinity = vec![Vec::new(); n];
        for (ri, r) in p.topology.affinities.iter().enumerate() {
            if !r.anti && !r.is_host() && r.self_selecting() {
                affinity[r.owner].push(ri);
            }
        }
        Links {
            spreads,
            affinity,
            n,
        }
    }

    /// Classes joined by a shared spread group or affinity rule, each list ascending, in order of
    /// their smallest class.
    fn components(&self) -> Vec<Vec<usize>> {
        let mut sets = DisjointSets::new(self.n);
        let mut first_of: BTreeMap<(bool, usize), usize> = BTreeMap::new();
        for k in 0..self.n {
            let keys = self.spreads[k]
                .iter()
                .map(|&g| (false, g))
                .chain(self.affinity[k].iter().map(|&r| (true, r)));
            for key in keys {
                sets.join(k, *first_of.entry(key).or_insert(k));
            }
        }
        let mut out: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
        for k in 0..self.n {
            out.entry(sets.root(k)).or_default().push(k);
        }
        out.into_values().collect()
    }
}

/// Per affinity rule: the domain a self-affinity group should start in when no member runs yet,
/// the one most of its members' targets lie in (ties to the smaller name).
fn preferred_domains(
    p: &Problem,
    state: &State<'_>,
    targets: &[Vec<(usize, u32)>],
) -> Vec<Option<String>> {
    p.topology
        .affinities
        .iter()
        .map(|r| {
            if r.anti || r.is_host() || !r.self_selecting() || !r.running.is_empty() {
                return None;
            }
            let mut votes: BTreeMap<&str, u64> = BTreeMap::new();
            for &m in &r.members {
                for &(node, c) in &targets[m] {
                    if let Some(d) = state.node_domain(node, &r.key) {
                        *votes.entry(d).or_insert(0) += u64::from(c);
                    }
                }
            }
            votes
                .into_iter()
                .max_by(|a, b| a.1.cmp(&b.1).then(b.0.cmp(a.0)))
                .map(|(d, _)| d.to_string())
        })
        .collect()
}

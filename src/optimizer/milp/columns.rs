//! Node patterns ("columns"): one node of a given bin (an offering, or an existing node) holding a
//! number of pods of each class, with the rules a single node must satisfy on its own (fit, host
//! ports, hostname spread and anti-affinity), and the knapsack pricer that proposes new patterns.

use std::collections::BTreeSet;

use crate::domain::labels::HOSTNAME;

use super::super::problem::{ports_conflict, Problem};

/// What a pattern is packed into.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Bin {
    New { shape: usize, offering: usize },
    Existing(usize),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Column {
    pub bin: Bin,
    /// (class, pods), classes ascending, counts > 0.
    pub counts: Vec<(usize, u32)>,
    /// Node cost plus preference penalties of its pods.
    pub cost: f64,
}

/// Per-bin facts the pricer and the master need.
#[derive(Debug, Clone)]
pub struct BinInfo {
    pub bin: Bin,
    pub room: Vec<i64>,
    pub cost: f64,
    /// Classes that may use this bin, with their per-pod preference penalty here.
    pub classes: Vec<(usize, f64)>,
    /// Pods every pattern of this bin holds besides what the pricer packs into `room` (an existing
    /// node's own pods when keeping it means keeping them).
    pub preload: Vec<(usize, u32)>,
}

impl Bin {
    /// The node's labels, read from the problem: a bin per offering is thousands of bins, and a
    /// copy of each offering's labels took 10 MB of a 10,000-pod solve.
    pub fn labels<'p>(&self, p: &'p Problem) -> &'p crate::domain::Labels {
        match *self {
            Bin::Existing(e) => &p.existing[e].labels,
            Bin::New { shape, offering } => &p.offering(shape, offering).labels,
        }
    }
}

impl BinInfo {
    /// The node's labels (see [`Bin::labels`]).
    pub fn labels<'p>(&self, p: &'p Problem) -> &'p crate::domain::Labels {
        self.bin.labels(p)
    }

    /// `counts` with the preload added (classes ascending).
    pub fn with_preload(&self, counts: &[(usize, u32)]) -> Vec<(usize, u32)> {
        let mut all: std::collections::BTreeMap<usize, u32> = counts.iter().copied().collect();
        for &(k, n) in &self.preload {
            *all.entry(k).or_default() += n;
        }
        all.into_iter().collect()
    }
}

/// Single-node rules, precomputed per class.
pub struct NodeRules {
    /// At most this many pods of the class on one node (host anti-affinity, host spread, self
    /// ports).
    pub per_node_cap: Vec<u32>,
    /// Pairs of classes that may not share a node.
    pub conflicts: BTreeSet<(usize, usize)>,
    /// Host spread groups: (members, cap) applied on every node.
    pub host_caps: Vec<(Vec<usize>, i64, usize)>,
    /// Per class: the classes it may not share a node with.
    pub conflicts_of: Vec<Vec<usize>>,
    /// Per class: indices into `host_caps` of the groups it belongs to.
    pub host_groups_of: Vec<Vec<usize>>,
    /// Per class: the set of classes it shares one per-node cap with in every pattern (a hostname
    /// anti-affinity clique, else a hostname spread group), for the knapsack bounds.
    pub shared_of: Vec<Option<usize>>,
    /// Per shared set: how many of its pods one node may hold.
    pub shared_cap: Vec<f64>,
    /// Class -> hostname anti-affinity clique (see `bound::anti_cliques`); the cliques are also
    /// the first shared sets.
    pub cliques: std::collections::BTreeMap<usize, usize>,
    /// Per class: whether a preferred hostname anti-affinity of its own selects the class, so that
    /// a second pod on the node costs a penalty the knapsack does not see.
    pub prefers_alone: Vec<bool>,
}

impl NodeRules {
    pub fn build(p: &Problem) -> NodeRules {
        let n = p.classes.len();
        let mut cap = vec![u32::MAX; n];
        let mut conflicts = BTreeSet::new();
        let mut host_caps = Vec::new();
        for (gi, g) in p
            .topology
            .spreads
            .iter()
            .enumerate()
            .filter(|(_, g)| g.hard && g.is_host())
        {
            host_caps.push((g.members.clone(), g.max_skew, gi));
            if g.members.contains(&g.owner) {
                cap[g.owner] = cap[g.owner].min(g.max_skew as u32);
            }
        }
        for g in p.topology.spreads.iter().filter(|g| g.hard && !g.is_host()) {
            if let Some(most) = domain_cap(p, g) {
                cap[g.owner] = cap[g.owner].min(most);
            }
        }
        for r in p
            .topology
            .affinities
            .iter()
            .filter(|r| r.anti && r.key == HOSTNAME)
        {
            for &m in &r.members {
                if m == r.owner {
                    cap[m] = cap[m].min(1);
                } else {
                    conflicts.insert((r.owner.min(m), r.owner.max(m)));
                }
            }
        }
        for (a, cap_a) in cap.iter_mut().enumerate() {
            let pa = &p.classes[a].constraints.host_ports;
            if pa.is_empty() {
                continue;
            }
            if ports_conflict(pa, pa) {
                *cap_a = (*cap_a).min(1);
            }
            for b in a + 1..n {
                if ports_conflict(pa, &p.classes[b].constraints.host_ports) {
                    conflicts.insert((a, b));
                }
            }
        }
        let mut conflicts_of = vec![Vec::new(); n];
        for &(a, b) in &conflicts {
            conflicts_of[a].push(b);
            conflicts_of[b].push(a);
        }
        let mut host_groups_of = vec![Vec::new(); n];
        for (hi, (members, _, _)) in host_caps.iter().enumerate() {
            for &m in members {
                host_groups_of[m].push(hi);
            }
        }
        let cliques = super::bound::anti_cliques(p);
        let (shared_of, shared_cap) = shared_caps(p, &host_caps, &cliques);
        let mut prefers_alone = vec![false; n];
        for r in p
            .topology
            .preferred
            .iter()
            .filter(|r| r.anti && r.is_host() && r.members.binary_search(&r.owner).is_ok())
        {
            prefers_alone[r.owner] = true;
        }
        NodeRules {
            per_node_cap: cap,
            conflicts,
            host_caps,
            conflicts_of,
            host_groups_of,
            shared_of,
            shared_cap,
            cliques,
            prefers_alone,
        }
    }

    fn conflict(&self, a: usize, b: usize) -> bool {
        a != b && self.conflicts.contains(&(a.min(b), a.max(b)))
    }
}

/// Classes whose pods share one per-node cap in every pattern, each class in at most one set, the
/// anti-affinity clique first: (set per class, cap per set).
fn shared_caps(
    p: &Problem,
    host_caps: &[(Vec<usize>, i64, usize)],
    cliques: &std::collections::BTreeMap<usize, usize>,
) -> (Vec<Option<usize>>, Vec<f64>) {
    let mut of = vec![None; p.classes.len()];
    let mut cap = vec![1.0; cliques.values().map(|&c| c + 1).max().unwrap_or(0)];
    for (&k, &c) in cliques {
        of[k] = Some(c);
    }
    for (members, skew, _) in host_caps {
        let id = cap.len();
        cap.push((*skew).max(0) as f64);
        for &m in members {
            of[m].get_or_insert(id);
        }
    }
    (of, cap)
}

/// The share of the bin's scarcest resource one pod of these requests takes (the knapsacks' size).
pub(super) fn knapsack_size(req: &[i64], room: &[i64]) -> f64 {
    req.iter()
        .zip(room)
        .map(|(r, a)| if *a > 0 { *r as f64 / *a as f64 } else { 0.0 })
        .fold(1e-6, f64::max)
}

/// Greedy multi-dimensional knapsack: fills the bin with the classes of highest value per unit of
/// its scarcest resource, honouring every single-node rule. `value[k]` is the dual value of one
/// pod.
pub fn pack(
    p: &Problem,
    rules: &NodeRules,
    bin: &BinInfo,
    value: &[f64],
    limit: &[u32],
    existing_host: &[(usize, i64)],
) -> Vec<(usize, u32)> {
    let mut items: Vec<(usize, f64, f64)> = bin
        .classes
        .iter()
        .filter_map(|&(k, pen)| {
            let w = value[k] - pen;
            if w <= 1e-9 || limit[k] == 0 {
                return None;
            }
            let size = knapsack_size(&p.classes[k].req, &bin.room);
            Some((k, w, size))
        })
        .collect();
    items.sort_by(|a, b| (b.1 / b.2).total_cmp(&(a.1 / a.2)).then(a.0.cmp(&b.0)));
    let mut room = bin.room.clone();
    let mut host_used = host_counts(rules, existing_host);
    let mut blocked = vec![false; p.classes.len()];
    let mut out: Vec<(usize, u32)> = Vec::new();
    for (k, _, _) in items {
        if blocked[k] {
            continue;
        }
        let req = &p.classes[k].req;
        let mut n = limit[k].min(rules.per_node_cap[k]);
        for (r, a) in req.iter().zip(&room) {
            if *r > 0 {
                n = n.min((*a / *r).max(0) as u32);
            }
        }
        for &hi in &rules.host_groups_of[k] {
            n = n.min((rules.host_caps[hi].1 - host_used[hi]).max(0) as u32);
        }
        if n == 0 {
            continue;
        }
        for (a, r) in room.iter_mut().zip(req) {
            *a -= r * i64::from(n);
        }
        for &hi in &rules.host_groups_of[k] {
            host_used[hi] += i64::from(n);
        }
        for &j in &rules.conflicts_of[k] {
            blocked[j] = true;
        }
        out.push((k, n));
    }
    out.sort();
    out
}

/// Per hostname spread group of `rules`, the matching pods the node already holds (`existing_host`
/// lists them by spread index; a new node holds none).
pub(super) fn host_counts(rules: &NodeRules, existing_host: &[(usize, i64)]) -> Vec<i64> {
    rules
        .host_caps
        .iter()
        .map(|(_, _, gi)| {
            existing_host
                .iter()
                .find(|(g, _)| g == gi)
                .map_or(0, |(_, c)| *c)
        })
        .collect()
}

/// Whether a pattern obeys the single-node rules (used on seed columns and after trimming).
pub fn valid(p: &Problem, rules: &NodeRules, bin: &BinInfo, counts: &[(usize, u32)]) -> bool {
    let mut used = vec![0i64; p.dims.len()];
    for &(k, n) in counts {
        if n > rules.per_node_cap[k] || !bin.classes.iter().any(|&(c, _)| c == k) {
            return false;
        }
        for (u, r) in used.iter_mut().zip(&p.classes[k].req) {
            *u += r * i64::from(n);
        }
    }
    let conflicts = counts
        .iter()
        .any(|&(a, _)| counts.iter().any(|&(b, _)| rules.conflict(a, b)));
    used.iter().zip(&bin.room).all(|(u, a)| u <= a) && !conflicts
}

/// The most new pods of a hard spread's owner one domain can take, so one node too, when the
/// owner counts towards its own spread. A pattern above it is never placed whole, and the LP used
/// such patterns to meet a zone's share with a fraction of a large node: 9 replicas spread over six
/// zones take at most 2 a zone, not 9 on one node.
fn domain_cap(p: &Problem, g: &super::super::topology::SpreadGroup) -> Option<u32> {
    if !g.members.contains(&g.owner) || g.eligible.is_empty() || g.max_skew < 0 {
        return None;
    }
    let running: Vec<i64> = g
        .eligible
        .iter()
        .map(|d| g.existing.get(d).copied().unwrap_or(0).max(0))
        .collect();
    let pending: i64 = g
        .members
        .iter()
        .map(|&m| p.classes[m].demand() as i64)
        .sum();
    let most = most_new_in_a_domain(&running, pending, g.max_skew, g.min_is_zero());
    Some(most.clamp(0, i64::from(u32::MAX)) as u32)
}

/// kube-scheduler puts a pod in domain d only while d's count, the pod included, is at most the
/// least count over the eligible domains plus the skew. Counts only grow while a plan is placed,
/// so when d takes its last pod its count is at most the final least count plus the skew, and
/// the least count is at most the mean of the other domains: with T the group's pods in the end
/// (`running` in the eligible domains plus every `pending` member) over D domains, d holds at
/// most (T + (D - 1) * skew) / D then. Where `minDomains` forces the least count to zero, the
/// skew alone bounds d. The new pods in d are that less d's running ones, so at most that less
/// the fewest any domain runs.
fn most_new_in_a_domain(running: &[i64], pending: i64, skew: i64, min_is_zero: bool) -> i64 {
    let least_running = running.iter().copied().min().unwrap_or(0);
    let most = if min_is_zero {
        skew
    } else {
        let domains = running.len().max(1) as i64;
        (running.iter().sum::<i64>() + pending + (domains - 1) * skew) / domains
    };
    most - least_running
}

/// A pattern's cost: the bin's, each pod's preference penalty there, and the node's preferred pod
/// terms (`counts` holds every pod of the node, a preload included).
pub fn column_cost(p: &Problem, bin: &BinInfo, counts: &[(usize, u32)]) -> f64 {
    let pods: f64 = counts
        .iter()
        .map(|&(k, n)| {
            bin.classes
                .iter()
                .find(|(c, _)| *c == k)
                .map_or(0.0, |(_, pen)| pen * f64::from(n))
        })
        .sum();
    let preferred = if !p.topology.has_preferred() {
        0.0
    } else {
        crate::optimizer::preferred::host_penalty(p, bin.labels(p), counts)
    };
    bin.cost + pods + preferred
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;
    use crate::optimizer::fixtures::zone_spread_priced;

    /// The most new pods any domain holds over every order kube-scheduler may place up to
    /// `pending` pods in, from `running`.
    fn most_placed(running: &[i64], pending: i64, skew: i64, min_is_zero: bool) -> i64 {
        let mut seen = BTreeSet::new();
        let mut stack = vec![running.to_vec()];
        let mut most = 0;
        while let Some(counts) = stack.pop() {
            if !seen.insert(counts.clone()) {
                continue;
            }
            let placed: i64 = counts.iter().zip(running).map(|(c, r)| c - r).sum();
            most = most.max(
                counts
                    .iter()
                    .zip(running)
                    .map(|(c, r)| c - r)
                    .max()
                    .unwrap_or(0),
            );
            if placed == pending {
                continue;
            }
            let least = if min_is_zero {
                0
            } else {
                *counts.iter().min().unwrap()
            };
            for d in 0..counts.len() {
                if counts[d] + 1 - least <= skew {
                    let mut next = counts.clone();
                    next[d] += 1;
                    stack.push(next);
                }
            }
        }
        most
    }

    #[test]
    fn no_placement_order_puts_more_new_pods_in_a_domain_than_the_cap() {
        let runnings: [&[i64]; 6] = [
            &[0, 0],
            &[0, 0, 0],
            &[2, 0, 1],
            &[3, 3, 0],
            &[0, 0, 0, 0],
            &[1, 4, 0, 2],
        ];
        for running in runnings {
            for skew in 1..=3 {
                for pending in 0..=9 {
                    for min_is_zero in [false, true] {
                        let placed = most_placed(running, pending, skew, min_is_zero);
                        let cap = most_new_in_a_domain(running, pending, skew, min_is_zero);
                        assert!(
                            placed <= cap.max(0),
                            "{running:?}, {pending} pending, skew {skew}, min zero \
                             {min_is_zero}: {placed} placed in a domain, cap {cap}"
                        );
                    }
                }
            }
        }
        // the cap is reached where the pods divide evenly: 12 over three empty zones, skew 1
        assert_eq!(most_placed(&[0, 0, 0], 12, 1, false), 4);
        assert_eq!(most_new_in_a_domain(&[0, 0, 0], 12, 1, false), 4);
    }

    #[test]
    fn a_hard_zone_spread_caps_its_owner_on_one_node() {
        let mut p = zone_spread_priced(12, &[("z1", 0.1), ("z2", 0.1), ("z3", 0.1)]);
        let k = p.topology.spreads[0].owner;
        assert_eq!(NodeRules::build(&p).per_node_cap[k], 4);
        // minDomains above the three zones: the least count is zero, the skew alone bounds a zone
        p.topology.spreads[0].min_domains = Some(4);
        assert_eq!(NodeRules::build(&p).per_node_cap[k], 1);
        // a spread that does not count its owner's pods caps nothing
        p.topology.spreads[0].members.clear();
        assert_eq!(NodeRules::build(&p).per_node_cap[k], u32::MAX);
    }
}

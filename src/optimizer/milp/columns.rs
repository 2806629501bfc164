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

impl BinInfo {
    /// The node's labels, read from the problem: a bin per offering is thousands of bins, and a
    /// copy of each offering's labels took 10 MB of a 10,000-pod solve.
    pub fn labels<'p>(&self, p: &'p Problem) -> &'p crate::domain::Labels {
        match self.bin {
            Bin::Existing(e) => &p.existing[e].labels,
            Bin::New { shape, offering } => &p.offering(shape, offering).labels,
        }
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
    /// At most this many pods of the class on one node (host anti-affinity, host spread, self ports).
    pub per_node_cap: Vec<u32>,
    /// Pairs of classes that may not share a node.
    pub conflicts: BTreeSet<(usize, usize)>,
    /// Host spread groups: (members, cap) applied on every node.
    pub host_caps: Vec<(Vec<usize>, i64, usize)>,
    /// Per class: the classes it may not share a node with.
    pub conflicts_of: Vec<Vec<usize>>,
    /// Per class: indices into `host_caps` of the groups it belongs to.
    pub host_groups_of: Vec<Vec<usize>>,
}

impl NodeRules {
    pub fn build(p: &Problem) -> NodeRules {
        let n = p.classes.len();
        let mut cap = vec![u32::MAX; n];
        let mut conflicts = BTreeSet::new();
        let mut host_caps = Vec::new();
        for (gi, g) in p.topology.spreads.iter().enumerate().filter(|(_, g)| g.hard && g.is_host()) {
            host_caps.push((g.members.clone(), g.max_skew, gi));
            if g.members.contains(&g.owner) {
                cap[g.owner] = cap[g.owner].min(g.max_skew as u32);
            }
        }
        for r in p.topology.affinities.iter().filter(|r| r.anti && r.key == HOSTNAME) {
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
        NodeRules { per_node_cap: cap, conflicts, host_caps, conflicts_of, host_groups_of }
    }

    fn conflict(&self, a: usize, b: usize) -> bool {
        a != b && self.conflicts.contains(&(a.min(b), a.max(b)))
    }
}

/// Greedy multi-dimensional knapsack: fills the bin with the classes of highest value per unit of its
/// scarcest resource, honouring every single-node rule. `value[k]` is the dual value of one pod.
pub fn pack(p: &Problem, rules: &NodeRules, bin: &BinInfo, value: &[f64], limit: &[u32], existing_host: &[(usize, i64)]) -> Vec<(usize, u32)> {
    let mut items: Vec<(usize, f64, f64)> = bin
        .classes
        .iter()
        .filter_map(|&(k, pen)| {
            let w = value[k] - pen;
            if w <= 1e-9 || limit[k] == 0 {
                return None;
            }
            let size = p.classes[k].req.iter().zip(&bin.room).map(|(r, a)| if *a > 0 { *r as f64 / *a as f64 } else { 0.0 }).fold(1e-6, f64::max);
            Some((k, w, size))
        })
        .collect();
    items.sort_by(|a, b| (b.1 / b.2).total_cmp(&(a.1 / a.2)).then(a.0.cmp(&b.0)));
    let mut room = bin.room.clone();
    let mut host_used: Vec<i64> = rules.host_caps.iter().map(|(_, _, gi)| existing_host.iter().find(|(g, _)| g == gi).map_or(0, |(_, c)| *c)).collect();
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
    let conflicts = counts.iter().any(|&(a, _)| counts.iter().any(|&(b, _)| rules.conflict(a, b)));
    used.iter().zip(&bin.room).all(|(u, a)| u <= a) && !conflicts
}

pub fn column_cost(bin: &BinInfo, counts: &[(usize, u32)]) -> f64 {
    bin.cost
        + counts
            .iter()
            .map(|&(k, n)| bin.classes.iter().find(|(c, _)| *c == k).map_or(0.0, |(_, pen)| pen * f64::from(n)))
            .sum::<f64>()
}

/// Exact bounded knapsack by depth-first branch and bound: the pattern of greatest total value
/// (`value[k]` less the bin's penalty, per pod) under the same single-node rules as [`pack`]. Returns
/// `None` when `max_nodes` search nodes did not settle it, so the caller knows the answer is not proven.
pub fn pack_exact(p: &Problem, rules: &NodeRules, bin: &BinInfo, value: &[f64], limit: &[u32], existing_host: &[(usize, i64)], max_nodes: usize) -> Option<Vec<(usize, u32)>> {
    let mut items: Vec<(usize, f64)> = bin
        .classes
        .iter()
        .filter_map(|&(k, pen)| {
            let w = value[k] - pen;
            (w > 1e-9 && limit[k] > 0).then_some((k, w))
        })
        .collect();
    let density = |&(k, w): &(usize, f64)| {
        let size = p.classes[k].req.iter().zip(&bin.room).map(|(r, a)| if *a > 0 { *r as f64 / *a as f64 } else { 0.0 }).fold(1e-6, f64::max);
        w / size
    };
    items.sort_by(|a, b| density(b).total_cmp(&density(a)).then(a.0.cmp(&b.0)));
    let dims = bin.room.len();
    // suffix maxima of value per unit of each resource: room_d times that bounds what is left
    let mut suffix = vec![vec![0.0f64; dims]; items.len() + 1];
    for i in (0..items.len()).rev() {
        let (k, w) = items[i];
        let (head, tail) = suffix.split_at_mut(i + 1);
        for ((slot, next), &r) in head[i].iter_mut().zip(&tail[0]).zip(&p.classes[k].req) {
            let per = if r > 0 { w / r as f64 } else { f64::INFINITY };
            *slot = next.max(per);
        }
    }
    let host_used: Vec<i64> = rules.host_caps.iter().map(|(_, _, gi)| existing_host.iter().find(|(g, _)| g == gi).map_or(0, |(_, c)| *c)).collect();
    let mut search = Search { p, rules, items: &items, suffix: &suffix, limit, best: 0.0, best_counts: vec![], counts: vec![], nodes: 0, max_nodes, blocked: vec![0; p.classes.len()] };
    search.dive(0, bin.room.clone(), host_used, 0.0);
    if search.nodes > search.max_nodes {
        return None;
    }
    let mut out = search.best_counts;
    out.sort();
    Some(out)
}

struct Search<'a> {
    p: &'a Problem,
    rules: &'a NodeRules,
    items: &'a [(usize, f64)],
    suffix: &'a [Vec<f64>],
    limit: &'a [u32],
    best: f64,
    best_counts: Vec<(usize, u32)>,
    counts: Vec<(usize, u32)>,
    nodes: usize,
    max_nodes: usize,
    /// How many chosen classes conflict with each class.
    blocked: Vec<u32>,
}

impl Search<'_> {
    fn dive(&mut self, i: usize, room: Vec<i64>, host_used: Vec<i64>, value: f64) {
        self.nodes += 1;
        if value > self.best + 1e-12 {
            self.best = value;
            self.best_counts = self.counts.clone();
        }
        if i == self.items.len() || self.nodes > self.max_nodes {
            return;
        }
        let bound = room.iter().enumerate().map(|(d, &a)| a.max(0) as f64 * self.suffix[i][d]).fold(f64::INFINITY, f64::min);
        if value + bound <= self.best + 1e-12 {
            return;
        }
        let (k, w) = self.items[i];
        let mut most = if self.blocked[k] > 0 { 0 } else { self.limit[k].min(self.rules.per_node_cap[k]) };
        for (r, a) in self.p.classes[k].req.iter().zip(&room) {
            if *r > 0 {
                most = most.min((*a / *r).max(0) as u32);
            }
        }
        for &hi in &self.rules.host_groups_of[k] {
            most = most.min((self.rules.host_caps[hi].1 - host_used[hi]).max(0) as u32);
        }
        for n in (1..=most).rev() {
            let left: Vec<i64> = room.iter().zip(&self.p.classes[k].req).map(|(a, r)| a - r * i64::from(n)).collect();
            let mut used = host_used.clone();
            for &hi in &self.rules.host_groups_of[k] {
                used[hi] += i64::from(n);
            }
            for &j in &self.rules.conflicts_of[k] {
                self.blocked[j] += 1;
            }
            self.counts.push((k, n));
            self.dive(i + 1, left, used, value + w * f64::from(n));
            self.counts.pop();
            for &j in &self.rules.conflicts_of[k] {
                self.blocked[j] -= 1;
            }
        }
        self.dive(i + 1, room, host_used, value);
    }
}

//! Placement state: nodes (existing and planned) with the classes placed on them, and the checks
//! that decide whether one more pod of a class may go on a node. Greedy placement and the replay of
//! MILP patterns both go through [`State::can_place`], so every plan honours the same rules.

use std::collections::BTreeMap;

use crate::domain::labels::{untolerated_soft_taints, HOSTNAME};
use crate::domain::{HostPort, Labels, Requirement, Resources, Taint, Toleration};

use super::plan::UnschedulableReason;
use super::problem::{fits, ports_conflict, within_limits, Problem};

/// Where a node comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeKind {
    Existing(usize),
    New { shape: usize, offering: usize },
}

#[derive(Debug, Clone)]
pub struct NodeState {
    pub kind: NodeKind,
    pub labels: Labels,
    pub free: Vec<i64>,
    pub ports: Vec<HostPort>,
    /// Class -> pods of it placed here by this plan.
    pub placed: BTreeMap<usize, usize>,
}

impl NodeState {
    pub fn hostname(&self) -> &str {
        self.labels.get(HOSTNAME).map_or("", String::as_str)
    }

    pub fn pod_count(&self) -> usize {
        self.placed.values().sum()
    }

    /// What its pods' preferred node terms and untolerated PreferNoSchedule taints cost here.
    pub fn preference_penalty(&self, p: &Problem) -> f64 {
        let taints = match self.kind {
            NodeKind::Existing(e) => &p.existing[e].taints,
            NodeKind::New { shape, .. } => &p.shapes[shape].taints,
        };
        self.placed
            .iter()
            .map(|(&k, &c)| c as f64 * p.preference_penalty(k, &self.labels, taints))
            .sum()
    }

    /// Pods placed here of the classes `members` (ascending).
    pub fn count_of(&self, members: &[usize]) -> i64 {
        self.placed
            .iter()
            .filter(|(m, _)| members.binary_search(m).is_ok())
            .map(|(_, &c)| c as i64)
            .sum()
    }
}

/// Preferences held as requirements while greedy placement places one pod: a rung of Karpenter's
/// relaxation ladder (`greedy::Ladder`), or of the optimizer start's shorter one.
/// [`State::can_place`] then refuses what a rung forbids on top of the hard rules.
#[derive(Debug, Clone, Default)]
pub struct Held<'p> {
    /// Preferred pod (anti-)affinity rules read as required terms.
    pub preferred: Vec<usize>,
    /// ScheduleAnyway spread groups read as DoNotSchedule.
    pub soft_spreads: Vec<usize>,
    /// Node-affinity terms the node's labels must meet: the required term still first in line and
    /// the heaviest preferred term not yet dropped.
    pub terms: Vec<&'p [Requirement]>,
    /// Whether an untolerated PreferNoSchedule taint refuses the node.
    pub soft_taints: bool,
    /// The offerings the pod may use on this rung when they are more than its class's menu
    /// (sorted): a held node term may need one the menu dropped as dominated.
    pub offerings: Option<std::sync::Arc<[(usize, usize)]>>,
}

impl Held<'_> {
    /// Whether a node with `labels` and `taints` meets the held node terms and soft taints.
    pub fn admits(&self, tolerations: &[Toleration], labels: &Labels, taints: &[Taint]) -> bool {
        self.terms
            .iter()
            .all(|t| t.iter().all(|r| r.matches(labels)))
            && !(self.soft_taints && untolerated_soft_taints(tolerations, taints) > 0)
    }
}

/// Per class, the topology rules its checks read, so a check does not scan every rule.
#[derive(Clone)]
struct ClassRules {
    own_spreads: Vec<Vec<usize>>,
    own_affinities: Vec<Vec<usize>>,
    /// Anti-affinity rules whose members include the class.
    repelled_by: Vec<Vec<usize>>,
    /// Per class: the zone-like preferred rules that count it.
    preferred_member_of: Vec<Vec<usize>>,
}

impl ClassRules {
    fn build(p: &Problem) -> ClassRules {
        let n = p.classes.len();
        let mut r = ClassRules {
            own_spreads: vec![vec![]; n],
            own_affinities: vec![vec![]; n],
            repelled_by: vec![vec![]; n],
            preferred_member_of: vec![vec![]; n],
        };
        for (of, rules) in r
            .preferred_member_of
            .iter_mut()
            .zip(&p.topology.preferred_counting)
        {
            *of = rules
                .iter()
                .copied()
                .filter(|&ri| !p.topology.preferred[ri].is_host())
                .collect();
        }
        for (gi, g) in p.topology.spreads.iter().enumerate() {
            r.own_spreads[g.owner].push(gi);
        }
        for (ri, a) in p.topology.affinities.iter().enumerate() {
            r.own_affinities[a.owner].push(ri);
            if a.anti {
                for &m in &a.members {
                    r.repelled_by[m].push(ri);
                }
            }
        }
        r
    }
}

#[derive(Clone)]
pub struct State<'p> {
    pub p: &'p Problem,
    pub nodes: Vec<NodeState>,
    /// Per zone-like spread group: domain -> matching pods (running + placed). Hostname groups keep
    /// only their running counts here.
    spread_counts: Vec<BTreeMap<String, i64>>,
    /// Per spread group: the fewest matching pods in any eligible domain (kept up to date by
    /// `place`).
    spread_min: Vec<i64>,
    /// Per affinity rule: domain -> member pods (running + placed).
    affinity_counts: Vec<BTreeMap<String, i64>>,
    /// Per zone-like affinity rule: domain -> pods of its owner class placed by this plan.
    owner_counts: Vec<BTreeMap<String, i64>>,
    /// Per zone-like preferred pod rule: domain -> member pods (running + placed).
    preferred_counts: Vec<BTreeMap<String, i64>>,
    /// Per zone-like preferred pod rule: domain (None: nodes without the key) -> its owner's pods
    /// placed by this plan.
    preferred_owners: Vec<BTreeMap<Option<String>, i64>>,
    /// Preferences [`Self::can_place`] also holds the pod to, as Karpenter does before it relaxes
    /// them (set by greedy placement, rung by rung; `None` everywhere else).
    pub held: Option<Held<'p>>,
    rules: ClassRules,
    /// Per pool: capacity of the nodes this plan launched.
    pool_used: Vec<Resources>,
    next_id: usize,
}

impl<'p> State<'p> {
    pub fn new(p: &'p Problem) -> State<'p> {
        let nodes = p
            .existing
            .iter()
            .enumerate()
            .map(|(i, n)| NodeState {
                kind: NodeKind::Existing(i),
                labels: n.labels.clone(),
                free: n.free.clone(),
                ports: n.ports.clone(),
                placed: BTreeMap::new(),
            })
            .collect();
        State {
            p,
            nodes,
            spread_counts: p
                .topology
                .spreads
                .iter()
                .map(|g| g.existing.clone())
                .collect(),
            spread_min: p
                .topology
                .spreads
                .iter()
                .map(|g| eligible_min(g, &g.existing))
                .collect(),
            affinity_counts: p
                .topology
                .affinities
                .iter()
                .map(|r| r.running.clone())
                .collect(),
            owner_counts: vec![BTreeMap::new(); p.topology.affinities.len()],
            preferred_counts: p
                .topology
                .preferred
                .iter()
                .map(|r| {
                    if r.is_host() {
                        BTreeMap::new()
                    } else {
                        r.running.clone()
                    }
                })
                .collect(),
            preferred_owners: vec![BTreeMap::new(); p.topology.preferred.len()],
            held: None,
            rules: ClassRules::build(p),
            pool_used: vec![Resources::new(); p.pools.len()],
            next_id: 0,
        }
    }

    /// Whether a new node of this offering fits the pool's remaining limits.
    pub fn can_open(&self, shape: usize, _offering: usize) -> bool {
        let s = &self.p.shapes[shape];
        self.room(s.pool)
            .is_none_or(|room| within_limits(&s.capacity, &room))
    }

    /// What `pool`'s limits leave for more nodes of this plan, over the resources the limits name
    /// (a resource no limit names is unlimited, as in Karpenter); None for a pool without limits.
    pub fn room(&self, pool: usize) -> Option<Resources> {
        let used = &self.pool_used[pool];
        self.p.pools[pool].remaining.as_ref().map(|rem| {
            let mut room = Resources::new();
            for (name, left) in rem.iter() {
                room.set(name, left.saturating_sub(used.get(name)));
            }
            room
        })
    }

    /// What one node of `shape` counts against its pool's limits: its capacity and one node.
    pub fn usage(&self, shape: usize) -> Resources {
        let mut cap = self.p.shapes[shape].capacity.clone();
        cap.set("nodes", crate::domain::Quantity::from_units(1));
        cap
    }

    /// Makes `pool` count `to` instead of `from` against its limits (a Karpenter NodeClaim holds
    /// its largest candidate's capacity, `greedy::Greedy::take_largest`).
    pub fn recount(&mut self, pool: usize, from: &Resources, to: &Resources) {
        let used = &mut self.pool_used[pool];
        used.sub(from);
        used.add(to);
    }

    /// Adds an empty planned node and returns its index.
    pub fn open(&mut self, shape: usize, offering: usize) -> usize {
        let cap = self.usage(shape);
        let s = &self.p.shapes[shape];
        let o = &s.offerings[offering];
        let mut labels = o.labels.clone();
        labels.insert(HOSTNAME.to_string(), format!("joiner-{:04}", self.next_id));
        self.next_id += 1;
        self.pool_used[s.pool].add(&cap);
        self.nodes.push(NodeState {
            kind: NodeKind::New { shape, offering },
            labels,
            free: o.alloc.clone(),
            ports: o.ds_ports.clone(),
            placed: BTreeMap::new(),
        });
        self.nodes.len() - 1
    }

    /// Removes the most recently opened node if it holds no pods (a failed trial).
    pub fn close_if_empty(&mut self, node: usize) {
        if node + 1 == self.nodes.len() && self.nodes[node].placed.is_empty() {
            if let NodeKind::New { shape, .. } = self.nodes[node].kind {
                let cap = self.usage(shape);
                self.pool_used[self.p.shapes[shape].pool].sub(&cap);
                self.nodes.pop();
                self.next_id -= 1;
            }
        }
    }

    fn class_allows(&self, k: usize, node: &NodeState) -> bool {
        let c = &self.p.classes[k];
        match node.kind {
            NodeKind::Existing(e) => c.existing.contains(&e),
            NodeKind::New { shape, offering } => self.offers(k, (shape, offering)),
        }
    }

    /// Whether class `k` may launch offering `o`: its menu, or the wider list a held rung brings.
    pub fn offers(&self, k: usize, o: (usize, usize)) -> bool {
        self.p.classes[k].on_menu(o) || self.held_widens(o)
    }

    /// Whether the held rung's wider list of offerings has `o`.
    pub fn held_widens(&self, o: (usize, usize)) -> bool {
        self.held
            .as_ref()
            .and_then(|h| h.offerings.as_deref())
            .is_some_and(|w| w.binary_search(&o).is_ok())
    }

    /// Checks every rule for one more pod of class `k` on `node`.
    pub fn can_place(&self, k: usize, node: usize) -> Result<(), UnschedulableReason> {
        let n = &self.nodes[node];
        let class = &self.p.classes[k];
        if !self.class_allows(k, n) {
            return Err(UnschedulableReason::NoCompatibleOffering);
        }
        if self.held.as_ref().is_some_and(|h| {
            !h.admits(&class.constraints.tolerations, &n.labels, self.taints_of(n))
        }) {
            return Err(UnschedulableReason::NoCompatibleOffering);
        }
        if !fits(&class.req, &n.free) {
            return Err(UnschedulableReason::LargerThanAnyType);
        }
        if ports_conflict(&class.constraints.host_ports, &n.ports) {
            return Err(UnschedulableReason::HostPort);
        }
        if !self.spread_ok(k, n)
            || !self.affinity_ok(k, n)
            || !self.inverse_ok(k, n)
            || !self.preferred_ok(k, n)
        {
            return Err(UnschedulableReason::Topology);
        }
        Ok(())
    }

    /// Whether spread group `gi` counts the pods on node `node` (its node inclusion policies).
    pub fn spread_counts_on(&self, gi: usize, node: usize) -> bool {
        let n = &self.nodes[node];
        self.p
            .topology
            .spread_counts_node(gi, &n.labels, self.taints_of(n))
    }

    fn taints_of(&self, n: &NodeState) -> &'p [Taint] {
        match n.kind {
            NodeKind::Existing(e) => &self.p.existing[e].taints,
            NodeKind::New { shape, .. } => &self.p.shapes[shape].taints,
        }
    }

    /// The preferred pod terms [`Self::held`] reads as required ones (none without a rung).
    fn preferred_ok(&self, k: usize, n: &NodeState) -> bool {
        let Some(held) = &self.held else { return true };
        held.preferred
            .iter()
            .map(|&ri| (ri, &self.p.topology.preferred[ri]))
            .all(|(ri, r)| {
                let here = if r.is_host() {
                    r.running.get(n.hostname()).copied().unwrap_or(0) + n.count_of(&r.members)
                } else {
                    match n.labels.get(&r.key) {
                        Some(d) => self.preferred_counts[ri].get(d).copied().unwrap_or(0),
                        None => return r.anti,
                    }
                };
                if r.anti {
                    return here == 0;
                }
                // as for a required term, the first pod of a group that selects itself may go
                // anywhere
                here > 0
                    || (r.members.binary_search(&k).is_ok()
                        && r.running.is_empty()
                        && self.placed_members(r) == 0)
            })
    }

    fn placed_members(&self, r: &super::topology::PreferredRule) -> usize {
        r.members.iter().map(|&m| self.placed_of(m)).sum()
    }

    /// The topology and host-port part of [`Self::can_place`] alone.
    pub fn rules_ok(&self, k: usize, node: usize) -> bool {
        let n = &self.nodes[node];
        !ports_conflict(&self.p.classes[k].constraints.host_ports, &n.ports)
            && self.spread_ok(k, n)
            && self.affinity_ok(k, n)
            && self.inverse_ok(k, n)
            && self.preferred_ok(k, n)
    }

    fn spread_ok(&self, k: usize, n: &NodeState) -> bool {
        self.rules.own_spreads[k]
            .iter()
            .map(|&gi| (gi, &self.p.topology.spreads[gi]))
            .filter(|(gi, g)| {
                g.hard
                    || self
                        .held
                        .as_ref()
                        .is_some_and(|h| h.soft_spreads.contains(gi))
            })
            .all(|(gi, g)| {
                let own = i64::from(g.members.binary_search(&k).is_ok());
                if g.is_host() {
                    // a new hostname can always be created, so the global minimum is zero
                    let existing = if g.existing.is_empty() {
                        0
                    } else {
                        g.existing.get(n.hostname()).copied().unwrap_or(0)
                    };
                    let here: i64 = n.count_of(&g.members) + existing;
                    return here + own <= g.max_skew;
                }
                let Some(d) = n.labels.get(&g.key) else {
                    return false;
                };
                let counts = &self.spread_counts[gi];
                let min = if g.min_is_zero() {
                    0
                } else {
                    self.spread_min[gi]
                };
                counts.get(d).copied().unwrap_or(0) + own - min <= g.max_skew
            })
    }

    fn affinity_ok(&self, k: usize, n: &NodeState) -> bool {
        self.rules.own_affinities[k]
            .iter()
            .map(|&ri| (ri, &self.p.topology.affinities[ri]))
            .all(|(ri, r)| {
                let counts = &self.affinity_counts[ri];
                // a hostname is one node: count its members from the node itself, not a map of
                // every host (and look the hostname up only where members run: string keys were a
                // fifth of the greedy start's time on 10,000 pods)
                let here = if r.is_host() {
                    let running = if r.running.is_empty() {
                        0
                    } else {
                        r.running.get(n.hostname()).copied().unwrap_or(0)
                    };
                    running + n.count_of(&r.members)
                } else {
                    let Some(d) = n.labels.get(&r.key) else {
                        return r.anti;
                    };
                    counts.get(d).copied().unwrap_or(0)
                };
                if r.anti {
                    return here == 0;
                }
                if here > 0 {
                    return true;
                }
                // a self-selecting group with no running member may start in one domain, only one
                r.self_selecting() && r.running.is_empty() && counts.values().all(|&v| v == 0)
            })
    }

    /// Pods already placed whose anti-affinity selects class `k` keep it out of their domain.
    fn inverse_ok(&self, k: usize, n: &NodeState) -> bool {
        self.rules.repelled_by[k]
            .iter()
            .map(|&ri| (ri, &self.p.topology.affinities[ri]))
            .all(|(ri, r)| {
                if r.is_host() {
                    return n.placed.get(&r.owner).is_none_or(|&c| c == 0);
                }
                n.labels
                    .get(&r.key)
                    .is_none_or(|d| self.owner_counts[ri].get(d).copied().unwrap_or(0) == 0)
            })
    }

    /// Places one pod of class `k` on `node` (the caller has checked [`Self::can_place`]).
    pub fn place(&mut self, k: usize, node: usize) {
        let req = &self.p.classes[k].req;
        let n = &mut self.nodes[node];
        for (f, r) in n.free.iter_mut().zip(req) {
            *f -= r;
        }
        n.ports
            .extend(self.p.classes[k].constraints.host_ports.iter().cloned());
        *n.placed.entry(k).or_insert(0) += 1;
        let host = n.hostname().to_string();
        // hostname groups are counted from the node itself (`spread_ok`), so only zone-like ones
        // here
        for (gi, g) in self.p.topology.spreads.iter().enumerate() {
            if !g.is_host()
                && g.members.binary_search(&k).is_ok()
                && self.spread_counts_on(gi, node)
            {
                if let Some(d) = self.nodes[node].labels.get(&g.key).cloned() {
                    *self.spread_counts[gi].entry(d).or_insert(0) += 1;
                    self.spread_min[gi] = eligible_min(g, &self.spread_counts[gi]);
                }
            }
        }
        for (ri, r) in self.p.topology.affinities.iter().enumerate() {
            if r.members.binary_search(&k).is_ok() || r.owner == k {
                let d = if r.is_host() {
                    Some(host.clone())
                } else {
                    self.nodes[node].labels.get(&r.key).cloned()
                };
                if let Some(d) = d {
                    if r.members.binary_search(&k).is_ok() {
                        *self.affinity_counts[ri].entry(d.clone()).or_insert(0) += 1;
                    }
                    // hostname rules check the node's own pods (`inverse_ok`)
                    if r.owner == k && !r.is_host() {
                        *self.owner_counts[ri].entry(d).or_insert(0) += 1;
                    }
                }
            }
        }
        self.count_preferred(k, node);
    }

    /// Whether new node `i` could be launched as offering `to` of its shape instead, with its pods:
    /// they may use it, and they fit its room and its DaemonSets' host ports. Topology is the
    /// caller's to check.
    pub fn can_relaunch(&self, i: usize, to: usize) -> bool {
        let n = &self.nodes[i];
        let NodeKind::New { shape, offering } = n.kind else {
            return false;
        };
        let (from, off) = (
            &self.p.shapes[shape].offerings[offering],
            &self.p.shapes[shape].offerings[to],
        );
        let pods_ports: Vec<&HostPort> = n
            .placed
            .keys()
            .flat_map(|&k| &self.p.classes[k].constraints.host_ports)
            .collect();
        n.placed
            .keys()
            .all(|&k| self.p.classes[k].on_menu((shape, to)))
            && off
                .alloc
                .iter()
                .zip(&from.alloc)
                .zip(&n.free)
                .all(|((a, b), f)| a - (b - f) >= 0)
            && !pods_ports
                .iter()
                .any(|x| off.ds_ports.iter().any(|y| x.conflicts(y)))
    }

    /// Launches new node `i` as offering `(shape, to)` with the same pods, keeping its hostname
    /// (see [`Self::can_relaunch`]; `improve::downsize` changes the type too). Only the
    /// preferred-term counts follow the node to its new domains, so the caller must not move pods
    /// that a spread or required affinity on a changed key counts.
    pub fn relaunch(&mut self, i: usize, (shape, to): (usize, usize)) {
        let NodeKind::New {
            shape: old,
            offering,
        } = self.nodes[i].kind
        else {
            return;
        };
        let placed: Vec<(usize, usize)> =
            self.nodes[i].placed.iter().map(|(&k, &c)| (k, c)).collect();
        self.count_preferred_on(i, &placed, -1);
        if old != shape {
            let (before, after) = (&self.p.shapes[old], &self.p.shapes[shape]);
            self.pool_used[before.pool].sub(&before.capacity);
            self.pool_used[after.pool].add(&after.capacity);
        }
        let (from, off) = (
            &self.p.shapes[old].offerings[offering],
            &self.p.shapes[shape].offerings[to],
        );
        let n = &mut self.nodes[i];
        for ((f, a), b) in n.free.iter_mut().zip(&off.alloc).zip(&from.alloc) {
            *f += a - b;
        }
        n.ports.retain(|port| !from.ds_ports.contains(port));
        n.ports.extend(off.ds_ports.iter().cloned());
        let host = n.hostname().to_string();
        n.labels = off.labels.clone();
        n.labels.insert(HOSTNAME.to_string(), host);
        n.kind = NodeKind::New {
            shape,
            offering: to,
        };
        self.count_preferred_on(i, &placed, 1);
    }

    fn count_preferred_on(&mut self, node: usize, placed: &[(usize, usize)], sign: i64) {
        for &(k, c) in placed {
            let c = sign * c as i64;
            for &ri in &self.rules.preferred_member_of[k] {
                if let Some(d) = self.nodes[node]
                    .labels
                    .get(&self.p.topology.preferred[ri].key)
                {
                    *self.preferred_counts[ri].entry(d.clone()).or_insert(0) += c;
                }
            }
            for &ri in self.p.topology.owned_preferred(k) {
                let r = &self.p.topology.preferred[ri];
                if !r.is_host() {
                    *self.preferred_owners[ri]
                        .entry(self.nodes[node].labels.get(&r.key).cloned())
                        .or_insert(0) += c;
                }
            }
        }
    }

    fn count_preferred(&mut self, k: usize, node: usize) {
        self.count_preferred_on(node, &[(k, 1)], 1);
    }

    /// Zone-like preferred rule `ri`: member pods per domain (running and placed), and its owner's
    /// pods per domain (None: on nodes without the key).
    pub fn preferred_domains(
        &self,
        ri: usize,
    ) -> (&BTreeMap<String, i64>, &BTreeMap<Option<String>, i64>) {
        (&self.preferred_counts[ri], &self.preferred_owners[ri])
    }

    /// The zone-like preferred rules whose penalty depends on where `node`'s pods are.
    pub fn preferred_rules_on(&self, node: usize) -> Vec<usize> {
        let mut out: Vec<usize> = self.nodes[node]
            .placed
            .keys()
            .flat_map(|&k| {
                self.p
                    .topology
                    .owned_preferred(k)
                    .iter()
                    .chain(&self.rules.preferred_member_of[k])
                    .copied()
            })
            .filter(|&ri| !self.p.topology.preferred[ri].is_host())
            .collect();
        out.sort_unstable();
        out.dedup();
        out
    }

    /// Matching pods of zone-like spread group `g` per domain, running and placed by this plan.
    pub fn spread_counts(&self, g: usize) -> &BTreeMap<String, i64> {
        &self.spread_counts[g]
    }

    /// Matching pods of spread group `g` in `node`'s domain.
    pub fn domain_count(&self, g: usize, node: usize) -> i64 {
        let key = &self.p.topology.spreads[g].key;
        self.nodes[node]
            .labels
            .get(key)
            .and_then(|d| self.spread_counts[g].get(d))
            .copied()
            .unwrap_or(0)
    }

    /// The value `node` carries for a topology key.
    pub fn node_domain(&self, node: usize, key: &str) -> Option<&str> {
        self.nodes[node].labels.get(key).map(String::as_str)
    }

    /// Pods of class `k` placed so far.
    pub fn placed_of(&self, k: usize) -> usize {
        self.nodes
            .iter()
            .map(|n| n.placed.get(&k).copied().unwrap_or(0))
            .sum()
    }

    /// Total price of the planned nodes.
    pub fn new_nodes(&self) -> impl Iterator<Item = (usize, &NodeState)> {
        self.nodes
            .iter()
            .enumerate()
            .filter(|(_, n)| matches!(n.kind, NodeKind::New { .. }))
    }
}

fn eligible_min(g: &super::topology::SpreadGroup, counts: &BTreeMap<String, i64>) -> i64 {
    g.eligible
        .iter()
        .map(|e| counts.get(e).copied().unwrap_or(0))
        .min()
        .unwrap_or(0)
}

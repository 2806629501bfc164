//! Karpenter's provisioning heuristic, reproduced as the baseline: pods in cpu-then-memory descending
//! order; first fit on existing nodes; then on this round's new nodes (fewest pods first); else a new
//! node of the highest-weight NodePool that can take the pod. A new node keeps every offering that
//! could still hold all its pods and launches the cheapest of them at the end, so nodes fill up to the
//! largest compatible type, exactly the behaviour joiner's MILP is measured against.

use std::collections::BTreeMap;

use super::plan::UnschedulableReason;
use super::problem::{fits, Problem};
use super::state::{NodeKind, State};

/// The candidate offerings still open for one new node.
struct Claim {
    node: usize,
    candidates: Vec<(usize, usize)>,
    used: Vec<i64>,
}

/// Places every pod it can; returns the state and the pods (class, count) it could not place.
pub fn place_all<'p>(p: &'p Problem, state: State<'p>, todo: &[(usize, usize)]) -> (State<'p>, BTreeMap<usize, (usize, UnschedulableReason)>) {
    run(p, state, todo, false)
}

/// Places leftovers into a plan that already has new nodes (the MILP's replay): unlike Karpenter it
/// first fills the plan's new nodes, fullest first, and then the fullest claim, so leftovers pack
/// tightly instead of spreading over half-empty nodes.
pub fn repair<'p>(p: &'p Problem, state: State<'p>, todo: &[(usize, usize)]) -> (State<'p>, BTreeMap<usize, (usize, UnschedulableReason)>) {
    run(p, state, todo, true)
}

fn run<'p>(p: &'p Problem, state: State<'p>, todo: &[(usize, usize)], tight: bool) -> (State<'p>, BTreeMap<usize, (usize, UnschedulableReason)>) {
    let domains = Domains::build(p);
    // fullest (least free cpu) first; the order is fixed at the start, which is close enough
    let mut planned: Vec<usize> = if tight { state.new_nodes().map(|(i, _)| i).collect() } else { vec![] };
    planned.sort_by_key(|&n| (state.nodes[n].free.first().copied().unwrap_or(0), n));
    let mut g = Greedy { p, state, claims: Vec::new(), by_load: Default::default(), domains, tight, planned };
    let mut queue: Vec<(usize, usize)> = todo.iter().flat_map(|&(k, n)| std::iter::repeat_n((k, 1), n)).collect();
    let mut failed: BTreeMap<usize, (usize, UnschedulableReason)> = BTreeMap::new();
    // Karpenter re-queues pods that fail and retries until a full pass makes no progress
    loop {
        let mut retry = Vec::new();
        let mut progress = false;
        for &(k, _) in &queue {
            match g.add_preferring(k) {
                Ok(()) => progress = true,
                Err(reason) => retry.push((k, reason)),
            }
        }
        if retry.is_empty() || !progress {
            for (k, reason) in retry {
                let e = failed.entry(k).or_insert((0, reason));
                e.0 += 1;
            }
            break;
        }
        queue = retry.into_iter().map(|(k, _)| (k, 1)).collect();
    }
    g.finish();
    (g.state, failed)
}

struct Greedy<'p> {
    p: &'p Problem,
    state: State<'p>,
    claims: Vec<Claim>,
    /// (pods on the claim's node, claim index), ascending.
    by_load: std::collections::BTreeSet<(usize, usize)>,
    domains: Domains,
    /// Repair mode (see [`repair`]).
    tight: bool,
    /// New nodes the state already had when placement started (repair mode only).
    planned: Vec<usize>,
}

/// Topology domains as small integers, so claims compare offerings without string lookups.
struct Domains {
    /// Per class: indices (into the global key list) of the keys its topology reads.
    keys_of: Vec<Vec<usize>>,
    /// Dense offering number: shape s's offerings start at base[s].
    base: Vec<usize>,
    /// Per dense offering, per global key: an id of its value (0 when absent).
    ids: Vec<Vec<u32>>,
}

impl Domains {
    fn build(p: &Problem) -> Domains {
        let mut keys: Vec<String> = (0..p.classes.len()).flat_map(|k| topology_keys(p, k)).collect();
        keys.sort();
        keys.dedup();
        let keys_of = (0..p.classes.len()).map(|k| topology_keys(p, k).iter().map(|key| keys.binary_search(key).unwrap_or(0)).collect()).collect();
        let mut values: std::collections::HashMap<&str, u32> = std::collections::HashMap::new();
        let mut base = Vec::with_capacity(p.shapes.len());
        let mut ids = Vec::new();
        for s in &p.shapes {
            base.push(ids.len());
            for o in &s.offerings {
                ids.push(
                    keys.iter()
                        .map(|key| o.labels.get(key).map_or(0, |v| {
                            let next = values.len() as u32 + 1;
                            *values.entry(v.as_str()).or_insert(next)
                        }))
                        .collect(),
                );
            }
        }
        Domains { keys_of, base, ids }
    }

    fn of(&self, (s, o): (usize, usize)) -> &[u32] {
        &self.ids[self.base[s] + o]
    }

    /// Whether two offerings agree on every key class `k` reads.
    fn same(&self, k: usize, a: (usize, usize), b: (usize, usize)) -> bool {
        let (x, y) = (self.of(a), self.of(b));
        self.keys_of[k].iter().all(|&i| x[i] == y[i])
    }
}

impl<'p> Greedy<'p> {
    /// Karpenter first holds a pod to its preferred pod (anti-)affinity and drops the preferences
    /// only when that fails; the repair of a MILP plan leaves them to the objective instead.
    fn add_preferring(&mut self, k: usize) -> Result<(), UnschedulableReason> {
        if self.tight || self.p.topology.preferred_of.get(k).is_none_or(Vec::is_empty) {
            return self.add(k);
        }
        self.state.strict_preferred = true;
        let strict = self.add(k);
        self.state.strict_preferred = false;
        strict.or_else(|_| self.add(k))
    }

    fn add(&mut self, k: usize) -> Result<(), UnschedulableReason> {
        for i in 0..self.p.existing.len() {
            if self.state.can_place(k, i).is_ok() {
                self.state.place(k, i);
                return Ok(());
            }
        }
        if self.tight {
            return self.add_tight(k);
        }
        // claims by (pods, index): Karpenter tries the emptiest new node first
        let mut from = std::ops::Bound::Unbounded;
        while let Some(&(load, c)) = self.by_load.range((from, std::ops::Bound::Unbounded)).next() {
            if self.try_claim(c, k) {
                self.by_load.remove(&(load, c));
                self.by_load.insert((load + 1, c));
                return Ok(());
            }
            from = std::ops::Bound::Excluded((load, c));
        }
        self.open_claim(k)
    }

    fn add_tight(&mut self, k: usize) -> Result<(), UnschedulableReason> {
        for i in 0..self.planned.len() {
            let n = self.planned[i];
            if fits(&self.p.classes[k].req, &self.state.nodes[n].free) && self.state.can_place(k, n).is_ok() {
                self.state.place(k, n);
                return Ok(());
            }
        }
        let fullest: Vec<(usize, usize)> = self.by_load.iter().rev().copied().collect();
        for (load, c) in fullest {
            if self.try_claim(c, k) {
                self.by_load.remove(&(load, c));
                self.by_load.insert((load + 1, c));
                return Ok(());
            }
        }
        self.open_claim(k)
    }

    /// Offerings of `claim` that can also take a pod of class `k`.
    fn surviving(&self, claim: &Claim, k: usize) -> Vec<(usize, usize)> {
        let class = &self.p.classes[k];
        let need: Vec<i64> = claim.used.iter().zip(&class.req).map(|(u, r)| u + r).collect();
        let NodeKind::New { shape, offering } = self.state.nodes[claim.node].kind else { return vec![] };
        let rep = (shape, offering);
        claim
            .candidates
            .iter()
            .copied()
            .filter(|&c| fits(&need, &self.p.offering(c.0, c.1).alloc) && self.domains.same(k, c, rep) && class.offerings.binary_search(&c).is_ok())
            .collect()
    }

    fn try_claim(&mut self, c: usize, k: usize) -> bool {
        // the claim's room is the most any candidate offers; no survivor exists when even that is short
        if !fits(&self.p.classes[k].req, &self.state.nodes[self.claims[c].node].free) {
            return false;
        }
        // survivors share the node's domain for every key this class reads, so a topology refusal
        // now is a refusal for all of them
        if !self.state.rules_ok(k, self.claims[c].node) {
            return false;
        }
        let survivors = self.surviving(&self.claims[c], k);
        if survivors.is_empty() || !self.min_values_ok(&survivors) {
            return false;
        }
        let node = self.claims[c].node;
        let saved = (self.state.nodes[node].kind, self.state.nodes[node].labels.clone(), self.state.nodes[node].free.clone());
        self.represent(node, survivors[0], max_free(self.p, &survivors, &self.claims[c].used));
        if self.state.can_place(k, node).is_err() {
            let n = &mut self.state.nodes[node];
            (n.kind, n.labels, n.free) = saved;
            return false;
        }
        self.state.place(k, node);
        let claim = &mut self.claims[c];
        claim.candidates = survivors;
        for (u, r) in claim.used.iter_mut().zip(&self.p.classes[k].req) {
            *u += r;
        }
        true
    }

    fn open_claim(&mut self, k: usize) -> Result<(), UnschedulableReason> {
        let class = &self.p.classes[k];
        if class.offerings.is_empty() {
            return Err(UnschedulableReason::NoCompatibleOffering);
        }
        let mut reason = UnschedulableReason::NodepoolLimit;
        // representatives: the cheapest offering per domain of the keys this class's topology reads
        let mut reps: Vec<(usize, usize)> = class.offerings.clone();
        // Karpenter first treats PreferNoSchedule taints as NoSchedule and relaxes only if nothing else
        // fits: pools whose soft taints the pod does not tolerate come last
        let soft = |s: usize| crate::domain::labels::untolerated_soft_taints(&class.constraints.tolerations, &self.p.shapes[s].taints) > 0;
        reps.sort_by(|a, b| soft(a.0).cmp(&soft(b.0)).then(self.p.offering(a.0, a.1).cost.total_cmp(&self.p.offering(b.0, b.1).cost)).then(a.cmp(b)));
        let mut tried_domains = std::collections::BTreeSet::new();
        let keys = topology_keys(self.p, k);
        for (s, o) in reps {
            let off = self.p.offering(s, o);
            let domain: Vec<Option<&String>> = keys.iter().map(|key| off.labels.get(key)).collect();
            if !tried_domains.insert((self.p.shapes[s].pool, domain.iter().map(|d| d.cloned()).collect::<Vec<_>>())) {
                continue;
            }
            if !self.state.can_open(s, o) {
                continue;
            }
            let pool = self.p.shapes[s].pool;
            let mut candidates: Vec<(usize, usize)> = class
                .offerings
                .iter()
                .copied()
                .filter(|&(cs, co)| self.p.shapes[cs].pool == pool && self.domains.same(k, (cs, co), (s, o)) && self.state.can_open(cs, co))
                .collect();
            // cheapest first, so the offering that stands for the claim (the first survivor) and the
            // domain a later topology-reading pod inherits do not depend on catalog order
            candidates.sort_by(|a, b| self.p.offering(a.0, a.1).cost.total_cmp(&self.p.offering(b.0, b.1).cost).then(a.cmp(b)));
            if !self.min_values_ok(&candidates) {
                reason = UnschedulableReason::MinValues;
                continue;
            }
            // opened only now, so the trial node does not count against the limits its candidates use
            let node = self.state.open(s, o);
            let zero = vec![0; self.p.dims.len()];
            self.state.nodes[node].free = max_free(self.p, &candidates, &zero);
            match self.state.can_place(k, node) {
                Ok(()) => {
                    self.state.place(k, node);
                    self.claims.push(Claim { node, candidates, used: class.req.clone() });
                    self.by_load.insert((1, self.claims.len() - 1));
                    return Ok(());
                }
                Err(r) => {
                    reason = r;
                    self.state.close_if_empty(node);
                }
            }
        }
        Err(reason)
    }

    /// Lets `(s, o)` stand for a claim in the state's checks, keeping the node's hostname.
    fn represent(&mut self, node: usize, (s, o): (usize, usize), free: Vec<i64>) {
        let off = self.p.offering(s, o);
        let n = &mut self.state.nodes[node];
        let host = n.labels.get(crate::domain::labels::HOSTNAME).cloned().unwrap_or_default();
        n.kind = NodeKind::New { shape: s, offering: o };
        n.labels = off.labels.clone();
        n.labels.insert(crate::domain::labels::HOSTNAME.to_string(), host);
        n.free = free;
    }

    fn min_values_ok(&self, candidates: &[(usize, usize)]) -> bool {
        let Some(&(s0, _)) = candidates.first() else { return false };
        let pool = &self.p.pools[self.p.shapes[s0].pool];
        super::extract::min_values_met(self.p, pool, candidates)
    }

    /// Launches each claim as its cheapest surviving offering.
    fn finish(&mut self) {
        let claims = std::mem::take(&mut self.claims);
        for claim in &claims {
            let best = claim
                .candidates
                .iter()
                .copied()
                .min_by(|a, b| self.p.offering(a.0, a.1).cost.total_cmp(&self.p.offering(b.0, b.1).cost).then(a.cmp(b)));
            if let Some((s, o)) = best {
                let free = self.p.offering(s, o).alloc.iter().zip(&claim.used).map(|(a, u)| a - u).collect();
                self.represent(claim.node, (s, o), free);
            }
        }
    }
}

/// Keys whose value this class's topology rules read (hostname excluded: every node has its own).
fn topology_keys(p: &Problem, k: usize) -> Vec<String> {
    let mut keys: Vec<String> = p
        .topology
        .spreads
        .iter()
        .filter(|g| g.owner == k || g.members.contains(&k))
        .map(|g| g.key.clone())
        .chain(p.topology.affinities.iter().filter(|r| r.owner == k || r.members.contains(&k)).map(|r| r.key.clone()))
        .chain(p.topology.preferred_touching(k).map(|r| r.key.clone()))
        .filter(|key| key != crate::domain::labels::HOSTNAME)
        .collect();
    keys.sort();
    keys.dedup();
    keys
}

/// The most room any candidate offers, less what the claim already holds.
fn max_free(p: &Problem, candidates: &[(usize, usize)], used: &[i64]) -> Vec<i64> {
    let mut best = vec![i64::MIN; p.dims.len()];
    for &(s, o) in candidates {
        for (b, a) in best.iter_mut().zip(&p.offering(s, o).alloc) {
            *b = (*b).max(*a);
        }
    }
    best.iter().zip(used).map(|(b, u)| b - u).collect()
}

//! Karpenter's provisioning heuristic, reproduced as the baseline: pods in cpu-then-memory
//! descending order; first fit on existing nodes; then on this round's new nodes (fewest pods
//! first); else a new node of the highest-weight NodePool that can take the pod. A new node keeps
//! every offering that could still hold all its pods and launches the cheapest of them at the end,
//! so nodes fill up to the largest compatible type, exactly the behaviour joiner's MILP is measured
//! against. Preferences are held as requirements and dropped one at a time when a pod fits nowhere,
//! as Karpenter relaxes them ([`Ladder`]). Two variants share the packing: [`seed`], the
//! optimizer's start, which leaves most preferences to the objective, and [`repair`], which places
//! what a MILP plan's replay left over.

use std::collections::BTreeMap;

use super::plan::UnschedulableReason;
use super::problem::{fits, Problem};
use super::state::{Held, NodeKind, State};
use crate::domain::Resources;

/// The candidate offerings still open for one new node.
struct Claim {
    node: usize,
    candidates: Vec<(usize, usize)>,
    used: Vec<i64>,
    /// A bit per class whose pod found no surviving offering here, with no preference held, since
    /// the claim last took a pod. Until it takes one its survivors for that class stay none (its
    /// room, candidates and representative only change then), and the greedy start of the
    /// zone-pinned relaxation at 10,000 pods of the diverse mix spent most of its time finding so
    /// again, claim after claim, pod after pod.
    refused: Vec<u64>,
}

impl Claim {
    fn refuses(&self, k: usize) -> bool {
        self.refused
            .get(k / 64)
            .is_some_and(|w| w & (1 << (k % 64)) != 0)
    }

    fn refuse(&mut self, k: usize, classes: usize) {
        self.refused.resize(classes.div_ceil(64), 0);
        self.refused[k / 64] |= 1 << (k % 64);
    }
}

/// Places every pod it can as Karpenter does, preferences relaxed one at a time (see [`Ladder`]);
/// returns the state and the pods (class, count) it could not place. The baseline strategy.
pub fn place_all<'p>(
    p: &'p Problem,
    state: State<'p>,
    todo: &[(usize, usize)],
) -> (State<'p>, BTreeMap<usize, (usize, UnschedulableReason)>) {
    run(p, state, todo, Mode::Karpenter)
}

/// The same placement as a starting plan for the optimizer: a pod is held to all its preferred pod
/// terms and then to none, and ScheduleAnyway spreads, preferred node terms and soft taints are
/// left to the objective. Holding them, as the baseline does, hands column generation more nodes
/// than it needs: with the baseline as its start, two scale-in decisions (docs/disruption.md) ended
/// 3.8% and 8.1% above the bound, one of them in 5.1 s, against 1.3-1.8% in about 4 s with this
/// start.
pub fn seed<'p>(
    p: &'p Problem,
    state: State<'p>,
    todo: &[(usize, usize)],
) -> (State<'p>, BTreeMap<usize, (usize, UnschedulableReason)>) {
    run(p, state, todo, Mode::Seed)
}

/// Places leftovers into a plan that already has new nodes (the MILP's replay): unlike Karpenter it
/// first fills the plan's new nodes, fullest first, and then the fullest claim, so leftovers pack
/// tightly instead of spreading over half-empty nodes.
/// Stand-ins for headroom (`super::headroom`) that the plan left out stay out: leaving them is a
/// price the plan chose, not a pod to rescue.
pub fn repair<'p>(
    p: &'p Problem,
    state: State<'p>,
    todo: &[(usize, usize)],
) -> (State<'p>, BTreeMap<usize, (usize, UnschedulableReason)>) {
    type Todo = Vec<(usize, usize)>;
    let (stand_ins, todo): (Todo, Todo) = todo
        .iter()
        .partition(|(k, _)| super::headroom::is_headroom(&p.classes[*k].constraints));
    let (state, mut left) = run(p, state, &todo, Mode::Repair);
    for (k, n) in stand_ins.into_iter().filter(|(_, n)| *n > 0) {
        left.entry(k)
            .or_insert((0, UnschedulableReason::SolverLimit))
            .0 += n;
    }
    (state, left)
}

/// Which placement [`run`] does.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Karpenter,
    Seed,
    Repair,
}

fn run<'p>(
    p: &'p Problem,
    state: State<'p>,
    todo: &[(usize, usize)],
    mode: Mode,
) -> (State<'p>, BTreeMap<usize, (usize, UnschedulableReason)>) {
    let domains = Domains::build(p);
    // fullest (least free cpu) first; the order is fixed at the start, which is close enough
    let mut planned: Vec<usize> = if mode == Mode::Repair {
        state.new_nodes().map(|(i, _)| i).collect()
    } else {
        vec![]
    };
    planned.sort_by_key(|&n| (state.nodes[n].free.first().copied().unwrap_or(0), n));
    let ladders = match mode {
        Mode::Karpenter => (0..p.classes.len())
            .map(|k| Ladder::build(p, &domains, k))
            .collect(),
        Mode::Seed => (0..p.classes.len())
            .map(|k| Ladder::pod_terms(p, k))
            .collect(),
        Mode::Repair => vec![],
    };
    let mut g = Greedy {
        p,
        state,
        claims: Vec::new(),
        by_load: Default::default(),
        domains,
        mode,
        planned,
        ladders,
    };
    let mut queue: Vec<(usize, usize)> = todo
        .iter()
        .flat_map(|&(k, n)| std::iter::repeat_n((k, 1), n))
        .collect();
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
    /// Which placement this is: Karpenter's, the optimizer's start or its repair.
    mode: Mode,
    /// New nodes the state already had when placement started (repair mode only).
    planned: Vec<usize>,
    /// Per class, its preference ladder (empty in repair mode).
    ladders: Vec<Ladder<'p>>,
}

/// Karpenter's preference relaxation for one class (karpenter-reference.md section 3.8): a pod is
/// first tried with every preference held as a requirement; each failure drops one, in a fixed
/// order: required node-affinity terms but the last (only the first remaining term is held),
/// preferred pod affinity terms heaviest first, then preferred anti-affinity terms, then preferred
/// node-affinity terms (only the heaviest remaining is held), ScheduleAnyway spreads (see
/// [`drop_order`]), and last the refusal of untolerated PreferNoSchedule taints. Rung `i` is the
/// state after `i` drops.
struct Ladder<'p> {
    required: &'p [Vec<crate::domain::Requirement>],
    affinity: Vec<usize>,
    anti: Vec<usize>,
    node_terms: Vec<&'p [crate::domain::Requirement]>,
    spreads: Vec<usize>,
    /// Whether some NodePool carries a PreferNoSchedule taint the class does not tolerate.
    soft_taints: bool,
    /// When a rung holds node terms: the class's offerings with the ones the menu dropped as
    /// dominated put back (a dropped offering may be the only one that meets a held term).
    wide: Option<std::sync::Arc<[(usize, usize)]>>,
    /// Drop everything on the first failure ([`seed`]'s two rungs).
    at_once: bool,
}

impl<'p> Ladder<'p> {
    fn build(p: &'p Problem, domains: &Domains, k: usize) -> Ladder<'p> {
        let c = &p.classes[k].constraints;
        let by_weight = |anti: bool| {
            let mut rules: Vec<usize> = p
                .topology
                .owned_preferred(k)
                .iter()
                .copied()
                .filter(|&ri| p.topology.preferred[ri].anti == anti)
                .collect();
            rules.sort_by_key(|&ri| std::cmp::Reverse(p.topology.preferred[ri].weight));
            rules
        };
        let mut preferred: Vec<&crate::domain::Weighted<Vec<crate::domain::Requirement>>> =
            c.preferred_node_affinity.iter().collect();
        preferred.sort_by_key(|w| std::cmp::Reverse(w.weight));
        let untolerated = |taints: &[crate::domain::Taint]| {
            crate::domain::labels::untolerated_soft_taints(&c.tolerations, taints) > 0
        };
        Ladder {
            required: &c.node_affinity.terms,
            affinity: by_weight(false),
            anti: by_weight(true),
            node_terms: preferred.into_iter().map(|w| w.term.as_slice()).collect(),
            spreads: drop_order(
                p.topology
                    .spreads
                    .iter()
                    .enumerate()
                    .filter(|(_, g)| g.owner == k)
                    .map(|(gi, g)| (gi, g.hard))
                    .collect(),
            ),
            // Karpenter has the toleration step only when a NodePool carries such a taint (existing
            // nodes with one then wait for the last rung too); without it Karpenter would refuse a
            // soft-tainted existing node for good, where joiner lets it take the pod as
            // kube-scheduler does
            soft_taints: p.shapes.iter().any(|s| untolerated(&s.taints)),
            wide: (c.node_affinity.terms.len() > 1 || !c.preferred_node_affinity.is_empty())
                .then(|| wide_offerings(p, domains, k).into()),
            at_once: false,
        }
    }

    /// [`seed`]'s ladder: every preferred pod term held, then none.
    fn pod_terms(p: &'p Problem, k: usize) -> Ladder<'p> {
        Ladder {
            required: &[],
            affinity: p.topology.owned_preferred(k).to_vec(),
            anti: vec![],
            node_terms: vec![],
            spreads: vec![],
            soft_taints: false,
            wide: None,
            at_once: true,
        }
    }

    /// How many preferences can be dropped; rung `steps()` holds none.
    fn steps(&self) -> usize {
        if self.at_once {
            return usize::from(!self.affinity.is_empty());
        }
        self.required.len().saturating_sub(1)
            + self.affinity.len()
            + self.anti.len()
            + self.node_terms.len()
            + self.spreads.len()
            + usize::from(self.soft_taints)
    }

    fn rung(&self, level: usize) -> Held<'p> {
        let mut level = if self.at_once && level > 0 {
            usize::MAX
        } else {
            level
        };
        let mut drop = |n: usize| {
            let d = level.min(n);
            level -= d;
            d
        };
        let required = drop(self.required.len().saturating_sub(1));
        let affinity = drop(self.affinity.len());
        let anti = drop(self.anti.len());
        let node_terms = drop(self.node_terms.len());
        let spreads = drop(self.spreads.len());
        let taints = drop(usize::from(self.soft_taints));
        Held {
            preferred: self.affinity[affinity..]
                .iter()
                .chain(&self.anti[anti..])
                .copied()
                .collect(),
            soft_spreads: self.spreads[spreads..].to_vec(),
            terms: self
                .required
                .get(required)
                .map(Vec::as_slice)
                .into_iter()
                .chain(self.node_terms.get(node_terms).copied())
                .collect(),
            soft_taints: self.soft_taints && taints == 0,
            // the menu suffices once no term narrows the class's own required affinity
            offerings: self
                .wide
                .clone()
                .filter(|_| self.required.len() > 1 || node_terms < self.node_terms.len()),
        }
    }
}

/// Topology domains as small integers, so claims compare offerings without string lookups.
struct Domains {
    /// Per class: indices (into the global key list) of the keys its topology reads.
    keys_of: Vec<Vec<usize>>,
    /// Dense offering number: shape s's offerings start at base[s].
    base: Vec<usize>,
    /// Per dense offering, per global key: an id of its value (0 when absent).
    ids: Vec<Vec<u32>>,
    /// Per class, a bit per dense offering: its menu. A claim's survivors are checked against it
    /// for every candidate of every claim a pod tries, where a search of the menu took 3.5 s of the
    /// zone-pinned relaxation's start at 10,000 pods of the diverse mix.
    menus: Vec<Vec<u64>>,
}

impl Domains {
    fn build(p: &Problem) -> Domains {
        let mut keys: Vec<String> = (0..p.classes.len())
            .flat_map(|k| topology_keys(p, k))
            .collect();
        keys.sort();
        keys.dedup();
        let keys_of = (0..p.classes.len())
            .map(|k| {
                topology_keys(p, k)
                    .iter()
                    .map(|key| keys.binary_search(key).unwrap_or(0))
                    .collect()
            })
            .collect();
        let mut values: std::collections::HashMap<&str, u32> = std::collections::HashMap::new();
        let mut base = Vec::with_capacity(p.shapes.len());
        let mut ids = Vec::new();
        for s in p.shapes.iter() {
            base.push(ids.len());
            for o in &s.offerings {
                ids.push(
                    keys.iter()
                        .map(|key| {
                            o.labels.get(key).map_or(0, |v| {
                                let next = values.len() as u32 + 1;
                                *values.entry(v.as_str()).or_insert(next)
                            })
                        })
                        .collect(),
                );
            }
        }
        let words = ids.len().div_ceil(64);
        let menus = p
            .classes
            .iter()
            .map(|c| {
                let mut bits = vec![0u64; words];
                for &(s, o) in &c.offerings {
                    let d = base[s] + o;
                    bits[d / 64] |= 1 << (d % 64);
                }
                bits
            })
            .collect();
        Domains {
            keys_of,
            base,
            ids,
            menus,
        }
    }

    /// Whether offering `c` is on class `k`'s menu.
    fn on_menu(&self, k: usize, (s, o): (usize, usize)) -> bool {
        let d = self.base[s] + o;
        self.menus[k][d / 64] & (1 << (d % 64)) != 0
    }

    fn of(&self, (s, o): (usize, usize)) -> &[u32] {
        &self.ids[self.base[s] + o]
    }

    /// The values of the keys class `k` reads on offering `c`, as ids.
    fn signature(&self, k: usize, c: (usize, usize)) -> Vec<u32> {
        let ids = self.of(c);
        self.keys_of[k].iter().map(|&i| ids[i]).collect()
    }

    /// Whether two offerings agree on every key class `k` reads.
    fn same(&self, k: usize, a: (usize, usize), b: (usize, usize)) -> bool {
        let (x, y) = (self.of(a), self.of(b));
        self.keys_of[k].iter().all(|&i| x[i] == y[i])
    }
}

impl<'p> Greedy<'p> {
    /// Climbs class `k`'s preference ladder until a rung places the pod (see [`Ladder`]); the
    /// repair of a MILP plan leaves preferences to the objective instead.
    fn add_preferring(&mut self, k: usize) -> Result<(), UnschedulableReason> {
        let steps = self.ladders.get(k).map_or(0, Ladder::steps);
        if steps == 0 {
            return self.add(k);
        }
        let mut result = Err(UnschedulableReason::NoCompatibleOffering);
        for level in 0..=steps {
            self.state.held = Some(self.ladders[k].rung(level));
            result = self.add(k);
            if result.is_ok() {
                break;
            }
        }
        self.state.held = None;
        result
    }

    fn add(&mut self, k: usize) -> Result<(), UnschedulableReason> {
        for i in 0..self.p.existing.len() {
            if self.state.can_place(k, i).is_ok() {
                self.state.place(k, i);
                return Ok(());
            }
        }
        if self.mode == Mode::Repair {
            return self.add_tight(k);
        }
        // claims by (pods, index): Karpenter tries the emptiest new node first
        let mut from = std::ops::Bound::Unbounded;
        while let Some(&(load, c)) = self
            .by_load
            .range((from, std::ops::Bound::Unbounded))
            .next()
        {
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
            if fits(&self.p.classes[k].req, &self.state.nodes[n].free)
                && self.state.can_place(k, n).is_ok()
            {
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
        let need: Vec<i64> = claim
            .used
            .iter()
            .zip(&class.req)
            .map(|(u, r)| u + r)
            .collect();
        let NodeKind::New { shape, offering } = self.state.nodes[claim.node].kind else {
            return vec![];
        };
        let rep = (shape, offering);
        claim
            .candidates
            .iter()
            .copied()
            .filter(|&c| {
                self.offers(k, c)
                    && fits(&need, &self.p.offering(c.0, c.1).alloc)
                    && self.domains.same(k, c, rep)
                    && self.held_admits(k, c)
                    && self.may_become(shape, c.0)
            })
            .collect()
    }

    /// Whether a claim counted as `from` may become `to` under its NodePool's limits. Karpenter's
    /// claims hold their largest candidate from the start ([`Greedy::take_largest`]); the
    /// optimizer's count the type they stand for, so a claim grows only into what the limits
    /// leave with its own count given back.
    fn may_become(&self, from: usize, to: usize) -> bool {
        if self.mode == Mode::Karpenter || from == to {
            return true;
        }
        let pool = self.p.shapes[to].pool;
        let Some(mut room) = self.state.room(pool) else {
            return true;
        };
        if self.p.shapes[from].pool == pool {
            for (name, q) in self.state.usage(from).iter() {
                if room.names().any(|n| n == name) {
                    room.set(name, room.get(name).saturating_add(q));
                }
            }
        }
        super::problem::within_limits(&self.p.shapes[to].capacity, &room)
    }

    /// Outside Karpenter's placement, a node's pool counts the type it stands for: moving it from
    /// one type to another moves the count.
    fn recount_kind(&mut self, from: NodeKind, to: NodeKind) {
        if self.mode == Mode::Karpenter {
            return;
        }
        if let (NodeKind::New { shape: a, .. }, NodeKind::New { shape: b, .. }) = (from, to) {
            if a != b {
                let none = Resources::new();
                let (ua, ub) = (self.state.usage(a), self.state.usage(b));
                self.state.recount(self.p.shapes[a].pool, &ua, &none);
                self.state.recount(self.p.shapes[b].pool, &none, &ub);
            }
        }
    }

    fn try_claim(&mut self, c: usize, k: usize) -> bool {
        let held = self.state.held.is_some();
        if !held && self.claims[c].refuses(k) {
            return false;
        }
        // the claim's room is the most any candidate offers; no survivor exists when even that is
        // short
        if !fits(
            &self.p.classes[k].req,
            &self.state.nodes[self.claims[c].node].free,
        ) {
            return false;
        }
        // survivors share the node's domain for every key this class reads, so a topology refusal
        // now is a refusal for all of them
        if !self.state.rules_ok(k, self.claims[c].node) {
            return false;
        }
        let survivors = self.surviving(&self.claims[c], k);
        if survivors.is_empty() || !self.min_values_ok(&survivors) {
            if !held {
                self.claims[c].refuse(k, self.p.classes.len());
            }
            return false;
        }
        let node = self.claims[c].node;
        let saved = (
            self.state.nodes[node].kind,
            self.state.nodes[node].labels.clone(),
            self.state.nodes[node].free.clone(),
        );
        self.represent(
            node,
            survivors[0],
            max_free(self.p, &survivors, &self.claims[c].used),
        );
        if self.state.can_place(k, node).is_err() {
            let now = self.state.nodes[node].kind;
            self.recount_kind(now, saved.0);
            let n = &mut self.state.nodes[node];
            (n.kind, n.labels, n.free) = saved;
            return false;
        }
        self.state.place(k, node);
        let claim = &mut self.claims[c];
        claim.candidates = survivors;
        claim.refused.clear();
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
        let offers = self
            .state
            .held
            .as_ref()
            .and_then(|h| h.offerings.as_deref())
            .unwrap_or(&class.offerings);
        let admitted: Vec<(usize, usize)> = offers
            .iter()
            .copied()
            .filter(|&c| self.held_admits(k, c))
            .collect();
        let mut reps = admitted.clone();
        if reps.is_empty() {
            return Err(UnschedulableReason::NoCompatibleOffering);
        }
        // where soft taints no longer refuse a pool (the ladder's last rung, the seed), pools whose
        // PreferNoSchedule taints the pod does not tolerate are still tried last
        let soft = |s: usize| {
            crate::domain::labels::untolerated_soft_taints(
                &class.constraints.tolerations,
                &self.p.shapes[s].taints,
            ) > 0
        };
        reps.sort_by(|a, b| {
            soft(a.0)
                .cmp(&soft(b.0))
                .then(
                    self.p
                        .offering(a.0, a.1)
                        .cost
                        .total_cmp(&self.p.offering(b.0, b.1).cost),
                )
                .then(a.cmp(b))
        });
        let mut tried_domains = std::collections::BTreeSet::new();
        for (s, o) in reps {
            if !tried_domains.insert((self.p.shapes[s].pool, self.domains.signature(k, (s, o)))) {
                continue;
            }
            if !self.state.can_open(s, o) {
                continue;
            }
            let pool = self.p.shapes[s].pool;
            let mut candidates: Vec<(usize, usize)> = admitted
                .iter()
                .copied()
                .filter(|&(cs, co)| {
                    self.p.shapes[cs].pool == pool
                        && self.domains.same(k, (cs, co), (s, o))
                        && self.state.can_open(cs, co)
                })
                .collect();
            // cheapest first, so the offering that stands for the claim (the first survivor) and
            // the domain a later topology-reading pod inherits do not depend on catalog order
            candidates.sort_by(|a, b| {
                self.p
                    .offering(a.0, a.1)
                    .cost
                    .total_cmp(&self.p.offering(b.0, b.1).cost)
                    .then(a.cmp(b))
            });
            if !self.min_values_ok(&candidates) {
                reason = UnschedulableReason::MinValues;
                continue;
            }
            // opened only now, so the trial node does not count against the limits its candidates
            // use
            let node = self.state.open(s, o);
            let zero = vec![0; self.p.dims.len()];
            self.state.nodes[node].free = max_free(self.p, &candidates, &zero);
            match self.state.can_place(k, node) {
                Ok(()) => {
                    self.state.place(k, node);
                    if self.mode == Mode::Karpenter {
                        self.take_largest(k, s, &candidates);
                    }
                    self.claims.push(Claim {
                        node,
                        candidates,
                        used: class.req.clone(),
                        refused: Vec::new(),
                    });
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

    /// Karpenter's count of a new NodeClaim against its NodePool's limits: once the claim takes
    /// its first pod, the largest capacity among its instance types that hold the pod comes off
    /// what the limits leave (it may still launch as that type), and stays off for the round, so
    /// later claims of the batch see only what is left. The claim was opened as `opened`, whose
    /// capacity [`State::open`] already counted.
    fn take_largest(&mut self, k: usize, opened: usize, candidates: &[(usize, usize)]) {
        let pool = self.p.shapes[opened].pool;
        if self.p.pools[pool].remaining.is_none() {
            return;
        }
        let req = &self.p.classes[k].req;
        let mut most = self.state.usage(opened);
        for &(s, o) in candidates {
            if fits(req, &self.p.offering(s, o).alloc) {
                most.max_with(&self.state.usage(s));
            }
        }
        let counted = self.state.usage(opened);
        self.state.recount(pool, &counted, &most);
    }

    /// [`State::offers`] through the menus' bits.
    fn offers(&self, k: usize, c: (usize, usize)) -> bool {
        self.domains.on_menu(k, c) || self.state.held_widens(c)
    }

    /// Whether offering `(s, o)` meets the node terms and soft taints the current rung holds.
    fn held_admits(&self, k: usize, (s, o): (usize, usize)) -> bool {
        self.state.held.as_ref().is_none_or(|h| {
            h.admits(
                &self.p.classes[k].constraints.tolerations,
                &self.p.offering(s, o).labels,
                &self.p.shapes[s].taints,
            )
        })
    }

    /// Lets `(s, o)` stand for a claim in the state's checks, keeping the node's hostname.
    fn represent(&mut self, node: usize, (s, o): (usize, usize), free: Vec<i64>) {
        let to = NodeKind::New {
            shape: s,
            offering: o,
        };
        self.recount_kind(self.state.nodes[node].kind, to);
        let off = self.p.offering(s, o);
        let n = &mut self.state.nodes[node];
        let host = n
            .labels
            .get(crate::domain::labels::HOSTNAME)
            .cloned()
            .unwrap_or_default();
        n.kind = NodeKind::New {
            shape: s,
            offering: o,
        };
        n.labels = off.labels.clone();
        n.labels
            .insert(crate::domain::labels::HOSTNAME.to_string(), host);
        n.free = free;
    }

    fn min_values_ok(&self, candidates: &[(usize, usize)]) -> bool {
        let Some(&(s0, _)) = candidates.first() else {
            return false;
        };
        let pool = &self.p.pools[self.p.shapes[s0].pool];
        super::extract::min_values_met(self.p, pool, candidates)
    }

    /// Launches each claim as its cheapest surviving offering.
    fn finish(&mut self) {
        let claims = std::mem::take(&mut self.claims);
        for claim in &claims {
            let NodeKind::New { shape: now, .. } = self.state.nodes[claim.node].kind else {
                continue;
            };
            let allowed = claim
                .candidates
                .iter()
                .copied()
                .filter(|c| self.may_become(now, c.0));
            let best = allowed.min_by(|a, b| {
                self.p
                    .offering(a.0, a.1)
                    .cost
                    .total_cmp(&self.p.offering(b.0, b.1).cost)
                    .then(a.cmp(b))
            });
            if let Some((s, o)) = best {
                let free = self
                    .p
                    .offering(s, o)
                    .alloc
                    .iter()
                    .zip(&claim.used)
                    .map(|(a, u)| a - u)
                    .collect();
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
        .chain(
            p.topology
                .affinities
                .iter()
                .filter(|r| r.owner == k || r.members.contains(&k))
                .map(|r| r.key.clone()),
        )
        .chain(p.topology.preferred_touching(k).map(|r| r.key.clone()))
        .filter(|key| key != crate::domain::labels::HOSTNAME)
        .collect();
    keys.sort();
    keys.dedup();
    keys
}

/// Class `k`'s offerings including those the menu dropped as dominated: every compatible offering
/// of a pool and topology domain (the values of the keys its rules read) that `class.offerings`
/// still has, so the restrictions by NodePool weight and by running pods' domains still apply.
fn wide_offerings(p: &Problem, domains: &Domains, k: usize) -> Vec<(usize, usize)> {
    let class = &p.classes[k];
    let domain = |c: (usize, usize)| (p.shapes[c.0].pool, domains.signature(k, c));
    let kept: std::collections::BTreeSet<_> = class.offerings.iter().map(|&c| domain(c)).collect();
    let mut wide: Vec<(usize, usize)> = p.label_groups[class.group]
        .iter()
        .copied()
        .filter(|&c| p.compatible(k, c) && kept.contains(&domain(c)))
        .collect();
    wide.sort_unstable();
    wide
}

/// The order in which Karpenter drops a pod's ScheduleAnyway spreads from `(group, hard)` in spec
/// order: the first soft one each time, its place taken by the last constraint (Go's swap-remove).
fn drop_order(mut spreads: Vec<(usize, bool)>) -> Vec<usize> {
    let mut order = Vec::new();
    while let Some(i) = spreads.iter().position(|&(_, hard)| !hard) {
        order.push(spreads.swap_remove(i).0);
    }
    order
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

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::domain::labels::ZONE;
    use crate::domain::{Operator, Requirement, Taint, TaintEffect, Weighted};
    use crate::optimizer::topology::PreferredRule;

    fn zone_is(zone: &str) -> Vec<Requirement> {
        vec![Requirement {
            key: ZONE.into(),
            operator: Operator::In,
            values: vec![zone.into()],
            min_values: None,
        }]
    }

    fn preferred(anti: bool, weight: i32) -> PreferredRule {
        PreferredRule {
            owner: 0,
            members: vec![0],
            key: ZONE.into(),
            anti,
            weight,
            running: BTreeMap::new(),
        }
    }

    #[test]
    fn schedule_anyway_spreads_drop_in_gos_swap_remove_order() {
        // (group, hard) in spec order: soft 0, hard 1, soft 2, soft 3. Dropping 0 moves 3 into its
        // place
        assert_eq!(
            drop_order(vec![(0, false), (1, true), (2, false), (3, false)]),
            [0, 3, 2]
        );
        assert_eq!(drop_order(vec![(5, true)]), Vec::<usize>::new());
        assert_eq!(drop_order(vec![(4, false), (5, false)]), [4, 5]);
    }

    /// One class with three required terms, two preferred affinity terms (weights 10 and 80), one
    /// anti-affinity term, preferred node terms of weights 1, 100 and 50, and the spread groups of
    /// `hard` (true: DoNotSchedule); `tainted` puts a PreferNoSchedule taint on the only shape.
    fn ladder_problem(hard: &[bool], tainted: bool) -> Problem {
        let mut p = crate::optimizer::fixtures::zone_spread(1);
        let c = &mut p.classes[0].constraints;
        c.node_affinity.terms = vec![zone_is("a"), zone_is("z1"), zone_is("z2")];
        c.preferred_node_affinity = [(1, "z1"), (100, "nowhere"), (50, "z2")]
            .into_iter()
            .map(|(weight, z)| Weighted {
                weight,
                term: zone_is(z),
            })
            .collect();
        let spread = p.topology.spreads[0].clone();
        p.topology.spreads = hard
            .iter()
            .map(|&h| crate::optimizer::topology::SpreadGroup {
                hard: h,
                ..spread.clone()
            })
            .collect();
        p.topology.preferred = vec![
            preferred(false, 10),
            preferred(false, 80),
            preferred(true, 30),
        ];
        p.topology.preferred_of = vec![vec![0, 1, 2]];
        if tainted {
            std::sync::Arc::make_mut(&mut p.shapes)[0]
                .taints
                .push(Taint {
                    key: "dedicated".into(),
                    value: "batch".into(),
                    effect: TaintEffect::PreferNoSchedule,
                });
        }
        p
    }

    #[test]
    fn the_ladder_drops_preferences_in_karpenters_order() {
        let p = ladder_problem(&[false, true, false], true);
        let ladder = Ladder::build(&p, &Domains::build(&p), 0);
        // 2 required terms + 2 affinity + 1 anti + 3 node terms + 2 spreads + the taint toleration
        assert_eq!(ladder.steps(), 11);
        let terms = |h: &Held| {
            h.terms
                .iter()
                .map(|t| t[0].values[0].clone())
                .collect::<Vec<_>>()
        };
        let full = ladder.rung(0);
        assert_eq!(
            terms(&full),
            ["a", "nowhere"],
            "first required term and the heaviest preferred one"
        );
        assert_eq!(
            full.preferred,
            [1, 0, 2],
            "affinity heaviest first, then anti-affinity"
        );
        assert_eq!(full.soft_spreads, [0, 2]);
        assert!(full.soft_taints);
        assert!(
            full.offerings.is_some(),
            "held terms may need offerings the menu dropped"
        );
        assert_eq!(terms(&ladder.rung(1)), ["z1", "nowhere"]);
        assert_eq!(
            terms(&ladder.rung(2)),
            ["z2", "nowhere"],
            "the last required term is never dropped"
        );
        assert_eq!(
            ladder.rung(3).preferred,
            [0, 2],
            "the weight-80 affinity term goes first"
        );
        assert_eq!(ladder.rung(4).preferred, [2]);
        assert_eq!(ladder.rung(5).preferred, Vec::<usize>::new());
        assert_eq!(terms(&ladder.rung(5)), ["z2", "nowhere"]);
        assert_eq!(
            terms(&ladder.rung(6)),
            ["z2", "z2"],
            "weight 100 dropped, weight 50 held"
        );
        assert_eq!(terms(&ladder.rung(7)), ["z2", "z1"]);
        assert_eq!(terms(&ladder.rung(8)), ["z2"]);
        assert_eq!(ladder.rung(8).soft_spreads, [0, 2]);
        assert_eq!(ladder.rung(9).soft_spreads, [2]);
        assert!(ladder.rung(10).soft_spreads.is_empty() && ladder.rung(10).soft_taints);
        let last = ladder.rung(11);
        assert!(!last.soft_taints && last.preferred.is_empty() && last.soft_spreads.is_empty());
    }

    #[test]
    fn the_menu_bits_are_the_class_menus() {
        let catalog = crate::catalog::Catalog::bundled("us-east-1").expect("bundled catalog");
        let p = Problem::build(&crate::workload::diverse(200, 5), &catalog);
        let domains = Domains::build(&p);
        assert!(
            p.classes.len() > 64,
            "classes past the first word: {}",
            p.classes.len()
        );
        for (k, class) in p.classes.iter().enumerate() {
            for (s, shape) in p.shapes.iter().enumerate() {
                for o in 0..shape.offerings.len() {
                    assert_eq!(
                        domains.on_menu(k, (s, o)),
                        class.offerings.binary_search(&(s, o)).is_ok(),
                        "class {k}, offering {s}/{o}"
                    );
                }
            }
        }
    }

    #[test]
    fn a_claim_forgets_its_refusals_when_it_takes_a_pod() {
        let mut claim = Claim {
            node: 0,
            candidates: vec![],
            used: vec![],
            refused: vec![],
        };
        claim.refuse(70, 130);
        claim.refuse(3, 130);
        assert!(claim.refuses(70) && claim.refuses(3));
        assert!(!claim.refuses(6) && !claim.refuses(67) && !claim.refuses(129));
        let mut p = crate::optimizer::fixtures::zone_spread(2);
        p.topology.spreads[0].hard = false;
        // two pods of one class (two.large holds two): the second joins the first's claim
        let mut g = Greedy {
            p: &p,
            state: State::new(&p),
            claims: vec![],
            by_load: Default::default(),
            domains: Domains::build(&p),
            mode: Mode::Karpenter,
            planned: vec![],
            ladders: vec![],
        };
        assert!(g.add(0).is_ok());
        g.claims[0].refuse(0, 1);
        assert!(
            !g.try_claim(0, 0),
            "a refusal stands until the claim changes"
        );
        // another class's refusal (class 5 stands for one): the claim takes the pod and forgets it
        g.claims[0].refused.clear();
        g.claims[0].refuse(5, 64);
        assert!(g.try_claim(0, 0));
        assert!(
            !g.claims[0].refuses(5),
            "the claim changed, so its refusals are void"
        );
    }

    #[test]
    fn a_class_without_preferences_has_no_ladder() {
        let p = crate::optimizer::fixtures::zone_spread(1);
        assert_eq!(
            Ladder::build(&p, &Domains::build(&p), 0).steps(),
            0,
            "a DoNotSchedule spread is not a preference"
        );
        let p = ladder_problem(&[false], false);
        assert_eq!(
            Ladder::build(&p, &Domains::build(&p), 0).steps(),
            9,
            "no toleration step without a soft-tainted pool"
        );
    }

    #[test]
    fn the_baseline_holds_a_schedule_anyway_spread_and_the_seed_does_not() {
        // two pods that share one node (two.large holds two); their zone spread made ScheduleAnyway
        let mut p = crate::optimizer::fixtures::zone_spread(2);
        p.topology.spreads[0].hard = false;
        let nodes = |state: &State| {
            state
                .new_nodes()
                .map(|(_, n)| n.pod_count())
                .collect::<Vec<_>>()
        };
        let (karpenter, left) = place_all(&p, State::new(&p), &[(0, 2)]);
        assert!(left.is_empty());
        assert_eq!(
            nodes(&karpenter),
            [1, 1],
            "one pod per zone while the spread is held"
        );
        let (seeded, left) = seed(&p, State::new(&p), &[(0, 2)]);
        assert!(left.is_empty());
        assert_eq!(
            nodes(&seeded),
            [2],
            "the seed leaves the skew to the objective"
        );
    }

    #[test]
    fn a_held_zone_term_is_met_before_it_is_dropped() {
        // required terms a, z2, z1 and both zones at one price: term a matches nothing and is
        // dropped, z2 fits. Read as one union the terms would leave the choice to the offering
        // order (z1 first)
        let mut p = ladder_problem(&[], false);
        p.classes[0].constraints.node_affinity.terms =
            vec![zone_is("a"), zone_is("z2"), zone_is("z1")];
        p.classes[0].constraints.preferred_node_affinity.clear();
        p.topology.preferred.clear();
        p.topology.preferred_of = vec![vec![]];
        let (state, left) = place_all(&p, State::new(&p), &[(0, 1)]);
        assert!(left.is_empty());
        let zones: Vec<&str> = state
            .new_nodes()
            .map(|(_, n)| n.labels[ZONE].as_str())
            .collect();
        assert_eq!(zones, ["z2"]);
    }
}

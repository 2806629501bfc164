//! The view model of `joiner top`: what one frame shows, computed from a snapshot and the decisions
//! made on it (the pending pods' plan, the consolidation plan, the re-packing bound). Pure: no
//! terminal, no clock, no cluster; `--once -o json` prints a [`Frame`] as it is.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::catalog::Catalog;
use crate::disruption::candidates::{Candidates, NodeInfo};
use crate::disruption::timing::{parse_timestamp, Timestamp};
use crate::disruption::{DisruptionPlan, DisruptionStatus};
use crate::domain::labels::{CAPACITY_TYPE, INSTANCE_TYPE, ZONE};
use crate::domain::resources::{CPU, MEMORY};
use crate::domain::{ClusterSnapshot, Node, Pod};
use crate::optimizer::problem::node_price;
use crate::optimizer::{Plan, PlanStatus};

/// One screen's worth of facts about the cluster and what joiner would do now.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Frame {
    /// The decisions' clock, RFC 3339.
    pub at: String,
    /// Every node, in snapshot order.
    pub nodes: Vec<NodeRow>,
    pub totals: Totals,
    pub pending: Pending,
    pub consolidation: Consolidation,
    /// Objects that could not be read and decisions that failed, one line each.
    pub notes: Vec<String>,
}

/// Requested against allocatable, in base units (cores, bytes).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Usage {
    pub requested: f64,
    pub allocatable: f64,
}

impl Usage {
    /// Requested over allocatable, 0 when nothing is allocatable.
    pub fn fraction(self) -> f64 {
        if self.allocatable > 0.0 {
            self.requested / self.allocatable
        } else {
            0.0
        }
    }
}

/// Why a node can or cannot be disrupted now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "state", content = "reason", rename_all = "kebab-case")]
pub enum DisruptionState {
    /// Consolidation may remove or replace it now.
    Consolidatable,
    /// Its NodePool's policy or consolidateAfter does not allow consolidating it yet.
    NotConsolidatable,
    /// The node or one of its pods carries `karpenter.sh/do-not-disrupt`.
    DoNotDisrupt(String),
    /// A PodDisruptionBudget allows no eviction of one of its pods.
    BlockedByPdb(String),
    /// Any other reason no voluntary disruption may take it (deleting, initializing, unpriced).
    Blocked(String),
    /// Not in a NodePool of the snapshot: neither joiner nor Karpenter manages it.
    Unmanaged,
}

impl DisruptionState {
    /// A short word for the table.
    pub fn label(&self) -> &'static str {
        match self {
            DisruptionState::Consolidatable => "consolidatable",
            DisruptionState::NotConsolidatable => "not yet",
            DisruptionState::DoNotDisrupt(_) => "do-not-disrupt",
            DisruptionState::BlockedByPdb(_) => "pdb-blocked",
            DisruptionState::Blocked(_) => "blocked",
            DisruptionState::Unmanaged => "unmanaged",
        }
    }

    /// The state of a managed node, from what the disruption candidates say of it. The block
    /// reasons are `candidates`' own words; its tests pin the two kinds told apart here.
    fn of(info: &NodeInfo) -> DisruptionState {
        match &info.block {
            Some(r) if r.contains("do-not-disrupt") => DisruptionState::DoNotDisrupt(r.clone()),
            Some(r) if r.starts_with("pdb ") => DisruptionState::BlockedByPdb(r.clone()),
            Some(r) => DisruptionState::Blocked(r.clone()),
            None if info.consolidatable => DisruptionState::Consolidatable,
            None => DisruptionState::NotConsolidatable,
        }
    }
}

/// A pod bound to a node, for the node's detail view.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PodRow {
    /// `namespace/name`.
    pub pod: String,
    pub cpu: f64,
    pub memory: f64,
    pub daemonset: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NodeRow {
    pub name: String,
    /// `None` for a node no NodePool of the snapshot manages.
    pub nodepool: Option<String>,
    pub instance_type: String,
    pub zone: String,
    pub capacity_type: String,
    /// Since its NodeClaim (or the node) was created; `None` when unknown.
    pub age_seconds: Option<u64>,
    /// The catalog's hourly price of its offering, 0 when the catalog does not know it.
    pub price_per_hour: f64,
    pub cpu: Usage,
    pub memory: Usage,
    pub pods: Vec<PodRow>,
    pub disruption: DisruptionState,
    /// Why it has drifted, when it has.
    pub drift: Option<String>,
    /// The index of the consolidation action that deletes it, if one does.
    pub deleted_by: Option<usize>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Totals {
    pub nodes: usize,
    pub running_pods: usize,
    pub cost_per_hour: f64,
    /// The certified lower bound, $/h, on capacity for the running pods bought from scratch;
    /// `None` when its solve failed.
    pub repack_bound: Option<f64>,
    /// `cost_per_hour` less the bound: at most this much is to gain by re-packing.
    pub gap_per_hour: Option<f64>,
}

/// A node the pending pods' plan launches.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Launch {
    pub nodepool: String,
    pub instance_type: String,
    pub zone: String,
    pub capacity_type: String,
    pub price_per_hour: f64,
    pub pods: usize,
}

/// The plan for the pending pods, as the provisioning core makes it now.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PendingPlan {
    pub launches: Vec<Launch>,
    /// Pods placed on nodes that exist.
    pub onto_existing: usize,
    pub cost_per_hour: f64,
    /// The price plus what the cost weights charge (spot risk, launches, preferences): what the
    /// solver minimises and `lower_bound` bounds.
    pub objective: f64,
    pub lower_bound: f64,
    pub status: PlanStatus,
    /// `namespace/name: message`.
    pub unschedulable: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Pending {
    /// `namespace/name` of every pending pod.
    pub pods: Vec<String>,
    /// `None` without pending pods, or when the solve failed (a note says why).
    pub plan: Option<PendingPlan>,
}

/// One consolidation command.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Command {
    pub reason: String,
    pub delete: Vec<String>,
    pub launch: Vec<Launch>,
    pub moves: usize,
    pub savings_per_hour: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Consolidation {
    pub commands: Vec<Command>,
    pub cost_before_per_hour: f64,
    pub cost_after_per_hour: f64,
    pub savings_per_hour: f64,
    pub evictions: usize,
    /// `node: reason` for every node that may not be disrupted.
    pub blocked: Vec<String>,
    /// `None` when the decision failed (a note says why).
    pub status: Option<DisruptionStatus>,
}

/// What a frame is made of.
#[derive(Debug, Clone, Copy)]
pub struct Inputs<'a> {
    pub snapshot: &'a ClusterSnapshot,
    pub catalog: &'a Catalog,
    pub now: Timestamp,
    pub plan: Option<&'a Plan>,
    pub consolidation: Option<&'a DisruptionPlan>,
    pub repack_bound: Option<f64>,
}

/// The frame of `inputs`, with `notes` shown under it.
pub fn frame(inputs: Inputs<'_>, notes: Vec<String>) -> Frame {
    let snap = inputs.snapshot;
    let cands = Candidates::build(snap, inputs.catalog, inputs.now);
    let mut on_node: BTreeMap<&str, Vec<&Pod>> = BTreeMap::new();
    for p in snap.pods.iter().filter(|p| p.occupies_node()) {
        if let Some(n) = p.node_name.as_deref() {
            on_node.entry(n).or_default().push(p);
        }
    }
    let nodes: Vec<NodeRow> = snap
        .nodes
        .iter()
        .map(|n| {
            let pods = on_node.get(n.name.as_str()).map_or(&[][..], Vec::as_slice);
            let mut row = node_row(n, pods, cands.find(&n.name), &inputs);
            row.deleted_by = inputs.consolidation.and_then(|c| {
                c.actions
                    .iter()
                    .position(|a| a.delete.iter().any(|d| *d == n.name))
            });
            row
        })
        .collect();
    let cost: f64 = nodes.iter().map(|n| n.price_per_hour).sum();
    Frame {
        at: inputs.now.to_rfc3339(),
        totals: Totals {
            nodes: nodes.len(),
            running_pods: on_node.values().map(Vec::len).sum(),
            cost_per_hour: cost,
            repack_bound: inputs.repack_bound,
            gap_per_hour: inputs.repack_bound.map(|b| (cost - b).max(0.0)),
        },
        nodes,
        pending: Pending {
            pods: snap.pending_pods().map(Pod::key).collect(),
            plan: inputs.plan.map(pending_plan),
        },
        consolidation: consolidation(inputs.consolidation),
        notes,
    }
}

fn node_row(node: &Node, pods: &[&Pod], info: Option<&NodeInfo>, inputs: &Inputs<'_>) -> NodeRow {
    let label = |k: &str| node.labels.get(k).cloned().unwrap_or_default();
    let requested = |r: &str| pods.iter().map(|p| p.requests().get(r).as_f64()).sum();
    let age = match info {
        Some(i) => i.age,
        None => node
            .created
            .as_deref()
            .and_then(|t| parse_timestamp(t).ok())
            .and_then(|c| (inputs.now - c).to_std().ok()),
    };
    NodeRow {
        name: node.name.clone(),
        nodepool: info.map(|i| i.pool.clone()),
        instance_type: label(INSTANCE_TYPE),
        zone: label(ZONE),
        capacity_type: label(CAPACITY_TYPE),
        age_seconds: age.map(|a| a.as_secs()),
        price_per_hour: node_price(node, inputs.catalog),
        cpu: Usage {
            requested: requested(CPU),
            allocatable: node.allocatable.get(CPU).as_f64(),
        },
        memory: Usage {
            requested: requested(MEMORY),
            allocatable: node.allocatable.get(MEMORY).as_f64(),
        },
        pods: pods
            .iter()
            .map(|p| PodRow {
                pod: p.key(),
                cpu: p.requests().get(CPU).as_f64(),
                memory: p.requests().get(MEMORY).as_f64(),
                daemonset: p.is_daemonset_pod(),
            })
            .collect(),
        disruption: info.map_or(DisruptionState::Unmanaged, DisruptionState::of),
        drift: info.and_then(|i| i.drift.clone()),
        deleted_by: None,
    }
}

fn launch(n: &crate::optimizer::NewNode) -> Launch {
    Launch {
        nodepool: n.nodepool.clone(),
        instance_type: n.instance_type.clone(),
        zone: n.zone.clone(),
        capacity_type: n.capacity_type.as_str().to_string(),
        price_per_hour: n.price,
        pods: n.pods.len(),
    }
}

fn pending_plan(plan: &Plan) -> PendingPlan {
    PendingPlan {
        launches: plan.nodes.iter().map(launch).collect(),
        onto_existing: plan.existing.iter().map(|e| e.pods.len()).sum(),
        cost_per_hour: plan.cost_per_hour,
        objective: plan.objective,
        lower_bound: plan.lower_bound,
        status: plan.solver.status,
        unschedulable: plan
            .unschedulable
            .iter()
            .map(|u| format!("{}: {}", u.pod, u.message))
            .collect(),
    }
}

fn consolidation(plan: Option<&DisruptionPlan>) -> Consolidation {
    let Some(plan) = plan else {
        return Consolidation {
            commands: vec![],
            cost_before_per_hour: 0.0,
            cost_after_per_hour: 0.0,
            savings_per_hour: 0.0,
            evictions: 0,
            blocked: vec![],
            status: None,
        };
    };
    Consolidation {
        commands: plan
            .actions
            .iter()
            .map(|a| Command {
                reason: a.reason.as_str().to_string(),
                delete: a.delete.clone(),
                launch: a.launch.iter().map(launch).collect(),
                moves: a.moves.len(),
                savings_per_hour: a.savings_per_hour,
            })
            .collect(),
        cost_before_per_hour: plan.cost_before_per_hour,
        cost_after_per_hour: plan.cost_after_per_hour,
        savings_per_hour: plan.savings_per_hour,
        evictions: plan.evictions(),
        blocked: plan
            .blocked
            .iter()
            .map(|b| format!("{}: {}", b.node, b.reason))
            .collect(),
        status: Some(plan.solver.status),
    }
}

/// How the node table is ordered within each NodePool.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SortKey {
    #[default]
    Name,
    Price,
    Cpu,
    Memory,
    Age,
}

impl SortKey {
    pub fn label(self) -> &'static str {
        match self {
            SortKey::Name => "name",
            SortKey::Price => "price",
            SortKey::Cpu => "cpu",
            SortKey::Memory => "memory",
            SortKey::Age => "age",
        }
    }

    fn next(self) -> SortKey {
        match self {
            SortKey::Name => SortKey::Price,
            SortKey::Price => SortKey::Cpu,
            SortKey::Cpu => SortKey::Memory,
            SortKey::Memory => SortKey::Age,
            SortKey::Age => SortKey::Name,
        }
    }
}

/// A key the view answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Key {
    Quit,
    /// Next sort order.
    Sort,
    /// Next NodePool filter (all, then each pool in turn).
    Pool,
    Up,
    Down,
    /// Show or hide the selected node's pods.
    Toggle,
    Back,
}

/// Nodes of one NodePool (`None`: unmanaged), in view order.
#[derive(Debug, Clone, PartialEq)]
pub struct Group<'f> {
    pub nodepool: Option<&'f str>,
    pub cost_per_hour: f64,
    pub nodes: Vec<&'f NodeRow>,
}

/// What the person looking chose: order, filter, selection.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct View {
    pub sort: SortKey,
    /// Only this NodePool's nodes; `None` shows all.
    pub pool: Option<String>,
    /// Index of the selected node in [`View::rows`].
    pub selected: usize,
    /// Whether the selected node's pods replace the node table.
    pub detail: bool,
}

impl View {
    /// The nodes shown, grouped by NodePool (pools by name, unmanaged nodes last), each group
    /// ordered by the sort key (largest first, except by name).
    pub fn groups<'f>(&self, frame: &'f Frame) -> Vec<Group<'f>> {
        let mut by: BTreeMap<(bool, Option<&str>), Vec<&NodeRow>> = BTreeMap::new();
        for n in &frame.nodes {
            let pool = n.nodepool.as_deref();
            if self.pool.as_deref().is_some_and(|p| Some(p) != pool) {
                continue;
            }
            by.entry((pool.is_none(), pool)).or_default().push(n);
        }
        by.into_iter()
            .map(|((_, pool), mut nodes)| {
                nodes.sort_by(|a, b| self.order(a, b));
                Group {
                    nodepool: pool,
                    cost_per_hour: nodes.iter().map(|n| n.price_per_hour).sum(),
                    nodes,
                }
            })
            .collect()
    }

    fn order(&self, a: &NodeRow, b: &NodeRow) -> std::cmp::Ordering {
        let desc = |x: f64, y: f64| y.total_cmp(&x);
        match self.sort {
            SortKey::Name => std::cmp::Ordering::Equal,
            SortKey::Price => desc(a.price_per_hour, b.price_per_hour),
            SortKey::Cpu => desc(a.cpu.fraction(), b.cpu.fraction()),
            SortKey::Memory => desc(a.memory.fraction(), b.memory.fraction()),
            SortKey::Age => b.age_seconds.cmp(&a.age_seconds),
        }
        .then_with(|| a.name.cmp(&b.name))
    }

    /// The nodes shown, in display order.
    pub fn rows<'f>(&self, frame: &'f Frame) -> Vec<&'f NodeRow> {
        self.groups(frame)
            .into_iter()
            .flat_map(|g| g.nodes)
            .collect()
    }

    /// The selected node, if any is shown.
    pub fn selected<'f>(&self, frame: &'f Frame) -> Option<&'f NodeRow> {
        self.rows(frame).get(self.selected).copied()
    }

    /// Applies `key`; whether the view is to close.
    pub fn key(&mut self, key: Key, frame: &Frame) -> bool {
        let shown = self.rows(frame).len();
        match key {
            Key::Quit => return true,
            Key::Sort => self.sort = self.sort.next(),
            Key::Pool => {
                self.pool = next_pool(frame, self.pool.as_deref());
                self.selected = 0;
            }
            Key::Up => self.selected = self.selected.saturating_sub(1),
            Key::Down => self.selected = (self.selected + 1).min(shown.saturating_sub(1)),
            Key::Toggle => self.detail = !self.detail && shown > 0,
            Key::Back => self.detail = false,
        }
        self.selected = self.selected.min(shown.saturating_sub(1));
        false
    }
}

/// The NodePool after `current` among the frame's pools, then back to all.
fn next_pool(frame: &Frame, current: Option<&str>) -> Option<String> {
    let mut pools: Vec<&str> = frame
        .nodes
        .iter()
        .filter_map(|n| n.nodepool.as_deref())
        .collect();
    pools.sort_unstable();
    pools.dedup();
    match current {
        None => pools.first().map(|p| p.to_string()),
        Some(c) => pools
            .iter()
            .skip_while(|p| **p != c)
            .nth(1)
            .map(|p| p.to_string()),
    }
}

#[cfg(test)]
#[path = "model_tests.rs"]
mod tests;

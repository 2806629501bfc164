//! An independent feasibility check of a provisioning plan: [`verify`] re-derives, from the
//! snapshot and the catalog alone, whether a [`Plan`] can be carried out as written. It reads its
//! inputs through the snapshot parser and the domain and catalog types, and applies the scheduling
//! rules afresh from Kubernetes' and Karpenter's semantics; it shares no code with the optimizer's
//! problem building, constraints or topology, so a bug there cannot hide itself here.
//!
//! It checks that
//! - every pending pod is placed exactly once or reported unschedulable, and nothing else is
//!   placed;
//! - every new node is an offering of the catalog, available, at the catalog's price, launched from
//!   a NodePool of the snapshot whose requirements its labels meet (in a zone its EC2NodeClass
//!   reaches), with the labels and allocatable the catalog and the NodePool give it, and enough
//!   distinct values among it and its fallbacks for each `minValues`; each fallback is such an
//!   offering and holds the node's pods too;
//! - the pods on every node fit its allocatable (requests, the DaemonSet pods a new node runs, pod
//!   count), on existing nodes next to the pods already bound there, and no cordoned node gets
//!   pods;
//! - each placed pod's nodeSelector and required node affinity match its node's labels, and it
//!   tolerates the node's NoSchedule and NoExecute taints;
//! - topology spread with `whenUnsatisfiable: DoNotSchedule` holds on any key, counting running
//!   pods; required pod affinity and anti-affinity hold both ways (a running pod's anti-affinity
//!   repels planned pods); no two pods on a node claim the same host port;
//! - NodePool limits hold with the nodes and NodeClaims that exist; the plan's cost adds up and its
//!   lower bound is not above its objective.
//!
//! The rules are read against the cluster as the plan leaves it. A spread's domains are the values
//! of its key on the nodes its nodeAffinityPolicy and nodeTaintsPolicy admit (Honor: the pod's own
//! nodeSelector and required node affinity accept the node, or the pod tolerates its taints;
//! Ignore: every node) and, for keys other than the hostname, on the offerings NodePools may launch
//! that the same policies admit, as Karpenter counts them; pods count on admitted nodes only. Its
//! hostname domains are the nodes themselves, existing and new, which is what kube-scheduler
//! checks when it binds the pods.
//!
//! Passing is necessary, not sufficient: it says nothing about optimality.

mod nodes;
mod topology;
mod world;

#[cfg(test)]
mod tests;

use std::fmt;

use crate::catalog::Catalog;
use crate::domain::{ClusterSnapshot, Quantity};
use crate::optimizer::Plan;

use world::World;

/// Prices in plans are rounded to 6 decimals.
const PRICE_EPS: f64 = 1e-6;

/// One way in which a plan is not feasible, naming the pod, node or NodePool and the rule.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Violation {
    #[error("the plan places {pod}, which is not a pending pod of the snapshot")]
    NotPending { pod: String },
    #[error("pod {pod} appears {} times in the plan ({})", .places.len(), .places.join(", "))]
    PlacedTwice { pod: String, places: Vec<String> },
    #[error("pending pod {pod} is neither placed nor reported unschedulable")]
    Dropped { pod: String },
    #[error("new node id {node} is used twice, or is the name of a node that exists")]
    DuplicateNode { node: String },
    #[error("{node}: instance type {instance_type} is not in the catalog")]
    UnknownInstanceType { node: String, instance_type: String },
    #[error("{node}: the catalog has no offering {offering}")]
    UnknownOffering { node: String, offering: String },
    #[error("{node}: offering {offering} is not available")]
    UnavailableOffering { node: String, offering: String },
    #[error("{node}: price {plan} but the catalog prices {offering} at {catalog}")]
    WrongPrice {
        node: String,
        offering: String,
        plan: f64,
        catalog: f64,
    },
    #[error("{node}: nodepool {nodepool} is not in the snapshot")]
    UnknownNodePool { node: String, nodepool: String },
    #[error(
        "{node}: nodepool {nodepool} cannot launch nodes: its EC2NodeClass {node_class} is missing"
    )]
    MissingNodeClass {
        node: String,
        nodepool: String,
        node_class: String,
    },
    #[error("{node}: zone {zone} is outside the subnets of EC2NodeClass {node_class}")]
    ZoneOutsideNodeClass {
        node: String,
        zone: String,
        node_class: String,
    },
    #[error("{node}: label {key}={plan} but the catalog and nodepool give {expected}")]
    WrongLabel {
        node: String,
        key: String,
        plan: String,
        expected: String,
    },
    #[error("{node}: nodepool {nodepool}'s requirement {requirement} is not met")]
    NodePoolRequirement {
        node: String,
        nodepool: String,
        requirement: String,
    },
    #[error("{node}: allocatable {resource} {plan} is more than the model's {model}")]
    AllocatableOverstated {
        node: String,
        resource: String,
        plan: String,
        model: Quantity,
    },
    #[error("{node}: {resource} requested {requested} is more than allocatable {allocatable}")]
    Overcommitted {
        node: String,
        resource: String,
        requested: Quantity,
        allocatable: Quantity,
    },
    #[error("existing node {node} is not in the snapshot")]
    UnknownNode { node: String },
    #[error("{node} is cordoned but the plan binds pods to it")]
    Cordoned { node: String },
    #[error("{node}: pod {pod}'s nodeSelector or required node affinity does not match the node")]
    NodeSelector { pod: String, node: String },
    #[error("{node}: pod {pod} does not tolerate the taint {taint}")]
    Taint {
        pod: String,
        node: String,
        taint: String,
    },
    #[error("{node}: pod {pod} spreads over {key}, a label the node does not have")]
    SpreadKeyMissing {
        pod: String,
        node: String,
        key: String,
    },
    #[error(
        "pod {pod}: spread over {key} with maxSkew {max_skew} broken: {domain} holds {count}, \
         the emptiest of {domains} eligible domains {min}"
    )]
    Spread {
        pod: String,
        key: String,
        domain: String,
        count: usize,
        min: usize,
        max_skew: u32,
        domains: usize,
    },
    #[error("pod {pod} on {node}: required pod affinity over {key} is not met")]
    Affinity {
        pod: String,
        node: String,
        key: String,
    },
    #[error("pod {pod}'s required anti-affinity over {key} selects {other}, also in {domain}")]
    AntiAffinity {
        pod: String,
        other: String,
        key: String,
        domain: String,
    },
    #[error("{node}: host port {port} is claimed by both {first} and {second}")]
    HostPort {
        node: String,
        port: String,
        first: String,
        second: String,
    },
    #[error("nodepool {nodepool}: {resource} {used} is over its limit {limit}")]
    NodePoolLimit {
        nodepool: String,
        resource: String,
        used: Quantity,
        limit: Quantity,
    },
    #[error("{node}: minValues {min} on {key}, but the node and its fallbacks give {found}")]
    MinValues {
        node: String,
        key: String,
        min: u32,
        found: usize,
    },
    #[error("{node}: fallback {offering}: {problem}")]
    Fallback {
        node: String,
        offering: String,
        problem: FallbackProblem,
    },
    #[error("cost_per_hour {plan} but the new nodes' prices add up to {sum}")]
    Cost { plan: f64, sum: f64 },
    #[error("lower_bound {lower_bound} is above the objective {objective}")]
    LowerBound { lower_bound: f64, objective: f64 },
}

/// Why a fallback offering could not replace its node.
#[derive(Debug, Clone, PartialEq)]
pub enum FallbackProblem {
    NotInCatalog,
    Unavailable,
    Price { plan: f64, catalog: f64 },
    ZoneOutsideNodeClass,
    Requirement(String),
    NodeSelector { pod: String },
    Overcommitted { resource: String },
}

impl fmt::Display for FallbackProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FallbackProblem::NotInCatalog => write!(f, "not in the catalog"),
            FallbackProblem::Unavailable => write!(f, "not available"),
            FallbackProblem::Price { plan, catalog } => {
                write!(f, "price {plan} but the catalog says {catalog}")
            }
            FallbackProblem::ZoneOutsideNodeClass => {
                write!(f, "zone outside the EC2NodeClass's subnets")
            }
            FallbackProblem::Requirement(r) => write!(f, "nodepool requirement {r} is not met"),
            FallbackProblem::NodeSelector { pod } => {
                write!(f, "pod {pod}'s node selector or affinity does not match it")
            }
            FallbackProblem::Overcommitted { resource } => {
                write!(f, "the node's pods need more {resource} than it has")
            }
        }
    }
}

/// Checks `plan` against `snapshot` and `catalog`: `Ok` when it is feasible, otherwise every
/// violation found.
pub fn verify(
    snapshot: &ClusterSnapshot,
    catalog: &Catalog,
    plan: &Plan,
) -> Result<(), Vec<Violation>> {
    let mut world = World::new(snapshot, catalog);
    for node in &plan.nodes {
        world.add_new_node(node);
    }
    for placement in &plan.existing {
        world.bind_existing(placement);
    }
    world.check_accounting(plan);
    world.check_hosts();
    world.check_limits();
    let between = topology::check(&world.hosts, snapshot, catalog);
    let mut violations = world.violations;
    violations.extend(between);
    violations.extend(check_cost(plan));
    if violations.is_empty() {
        Ok(())
    } else {
        Err(violations)
    }
}

fn check_cost(plan: &Plan) -> Vec<Violation> {
    let mut out = Vec::new();
    let sum: f64 = plan.nodes.iter().map(|n| n.price).sum();
    if (sum - plan.cost_per_hour).abs() > PRICE_EPS * (1.0 + plan.nodes.len() as f64) {
        out.push(Violation::Cost {
            plan: plan.cost_per_hour,
            sum,
        });
    }
    if plan.lower_bound > plan.objective + PRICE_EPS * plan.objective.abs().max(1.0) {
        out.push(Violation::LowerBound {
            lower_bound: plan.lower_bound,
            objective: plan.objective,
        });
    }
    out
}

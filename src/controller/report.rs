//! What the controller tells the people who run it: an INFO log line for every NodeClaim it
//! creates and launches and for every disruption command it executes, and [`Notice`]s, the facts
//! behind Karpenter's Events, for the host to publish on the objects they concern (the in-cluster
//! host turns them into Events, the simulator drops them). docs/logging.md lists both.
//!
//! Field names are the same on every line (`nodeclaim`, `nodepool`, `node`, `instance_type`, ...),
//! so that a log query written for one line works for the others.

use std::collections::BTreeSet;

use super::Cluster;
use crate::catalog::Catalog;
use crate::cloud::Instance;
use crate::disruption::candidates::Candidates;
use crate::disruption::timing::Timestamp;
use crate::disruption::{DisruptionPlan, Reason};
use crate::domain::ClusterSnapshot;
use crate::optimizer::problem::{offering_labels, pool_type_labels};
use crate::optimizer::NewNode;

/// A fact the controller found that Karpenter reports as an Event. Each names the object it
/// concerns; the host finds the object and publishes (and thins) the Event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Notice {
    /// No voluntary disruption may take `node` (do-not-disrupt, a PodDisruptionBudget, still
    /// initializing, not managed): `DisruptionBlocked` on the Node and its NodeClaim.
    DisruptionBlocked { node: String, why: String },
    /// `nodepool`'s budgets allow no disruption for `reason` now: `DisruptionBlocked` on the
    /// NodePool.
    BudgetBlocked { nodepool: String, reason: Reason },
    /// `node` may be disrupted, but consolidation does not take it (no saving worth it, its pods
    /// fit nowhere else, consolidateAfter): `Unconsolidatable` on the Node and its NodeClaim.
    Unconsolidatable { node: String, why: String },
    /// A disruption command launched `claim` to replace its nodes: `DisruptionLaunching`.
    DisruptionLaunching { claim: String, reason: Reason },
    /// A disruption command waits for its replacement `claim` to initialize:
    /// `DisruptionWaitingReadiness`.
    DisruptionWaitingReadiness { claim: String },
    /// A disruption command drains and terminates `node`: `DisruptionTerminating` on the Node and
    /// its NodeClaim.
    DisruptionTerminating { node: String, reason: Reason },
    /// The cloud had no capacity for any offering of `claim`: `InsufficientCapacityError`.
    InsufficientCapacity { claim: String, error: String },
    /// `nodepool`'s requirements leave no instance type of the catalog:
    /// `NoCompatibleInstanceTypes` on the NodePool.
    NoCompatibleInstanceTypes { nodepool: String },
    /// Evictions from `node` were refused (a PodDisruptionBudget): `FailedDraining` on the Node.
    FailedDraining { node: String, error: String },
}

impl Notice {
    /// The Event's reason, as Karpenter names it.
    pub fn reason(&self) -> &'static str {
        match self {
            Notice::DisruptionBlocked { .. } | Notice::BudgetBlocked { .. } => "DisruptionBlocked",
            Notice::Unconsolidatable { .. } => "Unconsolidatable",
            Notice::DisruptionLaunching { .. } => "DisruptionLaunching",
            Notice::DisruptionWaitingReadiness { .. } => "DisruptionWaitingReadiness",
            Notice::DisruptionTerminating { .. } => "DisruptionTerminating",
            Notice::InsufficientCapacity { .. } => "InsufficientCapacityError",
            Notice::NoCompatibleInstanceTypes { .. } => "NoCompatibleInstanceTypes",
            Notice::FailedDraining { .. } => "FailedDraining",
        }
    }

    /// Whether the Event is a Warning (else Normal), as Karpenter types it.
    pub fn is_warning(&self) -> bool {
        matches!(
            self,
            Notice::InsufficientCapacity { .. }
                | Notice::NoCompatibleInstanceTypes { .. }
                | Notice::FailedDraining { .. }
        )
    }

    /// The Event's message.
    pub fn message(&self) -> String {
        match self {
            Notice::DisruptionBlocked { why, .. } => format!("Node is not disruptable: {why}"),
            Notice::BudgetBlocked { reason, .. } => format!(
                "No allowed disruptions for disruption reason {reason} due to blocking budget"
            ),
            Notice::Unconsolidatable { why, .. } => format!("Node is not consolidated: {why}"),
            Notice::DisruptionLaunching { reason, .. } => format!("Launching NodeClaim: {reason}"),
            Notice::DisruptionWaitingReadiness { .. } => {
                "Waiting on readiness to continue disruption".into()
            }
            Notice::DisruptionTerminating { reason, .. } => format!("Disrupting Node: {reason}"),
            Notice::InsufficientCapacity { claim, error } => {
                format!("NodeClaim {claim} event: {error}")
            }
            Notice::NoCompatibleInstanceTypes { .. } => {
                "NodePool requirements filtered out all compatible available instance types".into()
            }
            Notice::FailedDraining { error, .. } => format!("Failed to drain node, {error}"),
        }
    }

    /// The object the Event is about, by kind and name; Node Events also go on the Node's
    /// NodeClaim where Karpenter puts them on both.
    pub fn object(&self) -> (ObjectKind, &str) {
        match self {
            Notice::DisruptionBlocked { node, .. }
            | Notice::Unconsolidatable { node, .. }
            | Notice::DisruptionTerminating { node, .. } => (ObjectKind::NodeAndClaim, node),
            Notice::FailedDraining { node, .. } => (ObjectKind::Node, node),
            Notice::BudgetBlocked { nodepool, .. }
            | Notice::NoCompatibleInstanceTypes { nodepool } => (ObjectKind::NodePool, nodepool),
            Notice::DisruptionLaunching { claim, .. }
            | Notice::DisruptionWaitingReadiness { claim }
            | Notice::InsufficientCapacity { claim, .. } => (ObjectKind::NodeClaim, claim),
        }
    }

    /// What makes two Events the same for thinning: the message, except where it changes while
    /// the fact stands (a drain refused for one pod, then another).
    pub fn dedupe_key(&self) -> String {
        match self {
            Notice::FailedDraining { .. } => String::new(),
            other => other.message(),
        }
    }
}

/// The kinds of object a [`Notice`] concerns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ObjectKind {
    Node,
    /// A Node, and its NodeClaim when it has one.
    NodeAndClaim,
    NodeClaim,
    NodePool,
}

pub(super) fn claim_created(name: &str, node: &NewNode) {
    tracing::info!(
        nodeclaim = name,
        nodepool = %node.nodepool,
        instance_type = %node.instance_type,
        zone = %node.zone,
        capacity_type = node.capacity_type.as_str(),
        price_per_hour = node.price,
        fallbacks = node.fallbacks.len(),
        pods = node.pods.len(),
        "created nodeclaim"
    );
}

pub(super) fn claim_launched(name: &str, node: &NewNode, instance: &Instance) {
    let o = &instance.offering;
    tracing::info!(
        nodeclaim = name,
        nodepool = %node.nodepool,
        instance = %instance.id,
        instance_type = %o.instance_type,
        zone = %o.zone,
        capacity_type = o.capacity_type.as_str(),
        price_per_hour = o.price,
        pods = node.pods.len(),
        "launched nodeclaim"
    );
}

/// Logs an executed disruption command and tells the host of each replacement launched.
/// `replacements` are the names of the claims launched, in the plan's order of launches.
/// `bound` says whether the plan carries its certified lower bound.
pub(super) fn command_executed(
    cluster: &mut impl Cluster,
    plan: &DisruptionPlan,
    replacements: &[String],
    bound: bool,
) {
    let reasons: BTreeSet<&str> = plan.actions.iter().map(|a| a.reason.as_str()).collect();
    let nodes: Vec<&str> = plan
        .actions
        .iter()
        .flat_map(|a| a.delete.iter().map(String::as_str))
        .collect();
    tracing::info!(
        reason = %reasons.into_iter().collect::<Vec<_>>().join(","),
        nodes = %nodes.join(","),
        node_count = nodes.len(),
        replacements = %replacements.join(","),
        savings_per_hour = plan.savings_per_hour,
        cost_before_per_hour = plan.cost_before_per_hour,
        cost_after_per_hour = plan.cost_after_per_hour,
        evictions = plan.evictions(),
        bound_per_hour = bound.then_some(plan.lower_bound),
        status = plan.solver.status.as_str(),
        strategy = ?plan.solver.strategy,
        "disrupting nodes"
    );
    let reasons = plan
        .actions
        .iter()
        .flat_map(|a| a.launch.iter().map(move |_| a.reason));
    for (claim, reason) in replacements.iter().zip(reasons) {
        cluster.notify(Notice::DisruptionLaunching {
            claim: claim.clone(),
            reason,
        });
    }
}

/// The command's nodes are being drained and terminated.
pub(super) fn terminating(cluster: &mut impl Cluster, plan: &DisruptionPlan) {
    for a in &plan.actions {
        for node in &a.delete {
            cluster.notify(Notice::DisruptionTerminating {
                node: node.clone(),
                reason: a.reason,
            });
        }
    }
}

/// The Notices of a disruption pass: each node the plan leaves alone for a reason other than
/// cost, as Karpenter sorts them (not disruptable at all, or not consolidated), and each NodePool
/// whose budgets allow nothing for a reason.
pub(super) fn blocked(
    snapshot: &ClusterSnapshot,
    catalog: &Catalog,
    plan: &DisruptionPlan,
    now: Timestamp,
) -> Vec<Notice> {
    let cands = Candidates::build(snapshot, catalog, now);
    // disruptability is the node's own (its pods, annotations, state): the candidates say it;
    // what else the decision found (savings, where pods go, consolidateAfter) is consolidation's
    let not_disruptable = |node: &str, why: &str| match cands.find(node) {
        Some(c) => c.block.as_deref() == Some(why),
        None => cands.unmanaged.iter().any(|u| u.node == node),
    };
    let mut out: Vec<Notice> = plan
        .blocked
        .iter()
        .map(|b| match not_disruptable(&b.node, &b.reason) {
            true => Notice::DisruptionBlocked {
                node: b.node.clone(),
                why: b.reason.clone(),
            },
            false => Notice::Unconsolidatable {
                node: b.node.clone(),
                why: b.reason.clone(),
            },
        })
        .collect();
    out.extend(
        plan.budgets
            .iter()
            .filter(|u| u.allowed == 0)
            .map(|u| Notice::BudgetBlocked {
                nodepool: u.nodepool.clone(),
                reason: u.reason,
            }),
    );
    out
}

/// NodePools whose requirements admit no offering of `catalog` (offerings out of capacity left
/// out), for `NoCompatibleInstanceTypes`.
pub(super) fn pools_without_types(snapshot: &ClusterSnapshot, catalog: &Catalog) -> Vec<String> {
    snapshot
        .nodepools
        .iter()
        .filter(|np| {
            !catalog.instance_types.iter().any(|it| {
                let base = pool_type_labels(it, np, &catalog.region);
                it.offerings.iter().filter(|o| o.available).any(|o| {
                    let labels = offering_labels(&base, o);
                    np.requirements.iter().all(|r| r.matches(&labels))
                })
            })
        })
        .map(|np| np.name.clone())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::labels::{Operator, Requirement};
    use crate::domain::NodePool;

    #[test]
    fn events_carry_karpenters_reasons_types_and_objects() {
        let ice = Notice::InsufficientCapacity {
            claim: "default-abcde".into(),
            error: "no capacity".into(),
        };
        assert_eq!(ice.reason(), "InsufficientCapacityError");
        assert!(ice.is_warning());
        assert_eq!(ice.object(), (ObjectKind::NodeClaim, "default-abcde"));
        assert_eq!(ice.message(), "NodeClaim default-abcde event: no capacity");
        let blocked = Notice::DisruptionBlocked {
            node: "n1".into(),
            why: "pod a/b has karpenter.sh/do-not-disrupt".into(),
        };
        assert_eq!(blocked.reason(), "DisruptionBlocked");
        assert!(!blocked.is_warning());
        assert_eq!(blocked.object(), (ObjectKind::NodeAndClaim, "n1"));
        let launching = Notice::DisruptionLaunching {
            claim: "c".into(),
            reason: Reason::Underutilized,
        };
        assert_eq!(launching.message(), "Launching NodeClaim: Underutilized");
        // a drain refused for one pod, then another, is the same Event
        let refused = |pod: &str| Notice::FailedDraining {
            node: "n1".into(),
            error: format!("eviction of {pod} refused"),
        };
        assert_eq!(refused("a").dedupe_key(), refused("b").dedupe_key());
        assert_ne!(blocked.dedupe_key(), launching.dedupe_key());
    }

    /// A cluster that keeps the Notices it is told.
    #[derive(Default)]
    struct Told(ClusterSnapshot, Vec<Notice>);

    impl Cluster for Told {
        fn snapshot(&self) -> &ClusterSnapshot {
            &self.0
        }
        fn in_flight(&self) -> Vec<(&str, &NewNode)> {
            vec![]
        }
        fn claim_launched(&mut self, _: &str, _: &NewNode, _: &Instance) {}
        fn notify(&mut self, notice: Notice) {
            self.1.push(notice);
        }
        fn set_disrupted(&mut self, _: &str, _: bool) {}
        fn evict(&mut self, _: &str) -> Result<(), crate::controller::EvictionRefused> {
            Ok(())
        }
        fn delete_node(&mut self, _: &str) -> usize {
            0
        }
    }

    #[test]
    fn a_launch_without_capacity_is_told_on_its_claim() {
        use crate::cloud::sim::{IceWindow, SimCloud};
        let catalog = crate::optimizer::fixtures::tiny_catalog();
        let ice = IceWindow {
            from: 0.0,
            until: 1e9,
            instance_type: "tiny.large".into(),
            zone: None,
            capacity_type: None,
        };
        let cloud = SimCloud::new(catalog.clone(), vec![ice], 0.0, 1);
        let mut ctl =
            super::super::Controller::new(super::super::tests::settings(), catalog, cloud);
        let node = NewNode {
            id: "n".into(),
            nodepool: "default".into(),
            instance_type: "tiny.large".into(),
            zone: "z1".into(),
            capacity_type: crate::catalog::CapacityType::OnDemand,
            price: 0.05,
            labels: Default::default(),
            allocatable: Default::default(),
            pods: vec![],
            fallbacks: vec![],
        };
        let mut cluster = Told::default();
        assert_eq!(ctl.launch(&mut cluster, &node, 0.0), None);
        assert_eq!(
            cluster.1,
            vec![Notice::InsufficientCapacity {
                claim: "default-00001".into(),
                error: "insufficient capacity for 1 offerings of claim default-00001".into(),
            }]
        );
    }

    #[test]
    fn a_pool_whose_requirements_match_no_type_is_found() {
        let catalog = crate::optimizer::fixtures::tiny_catalog();
        let mut snap = ClusterSnapshot::default();
        snap.nodepools.push(NodePool::unconstrained("open"));
        let mut closed = NodePool::unconstrained("closed");
        closed.requirements.push(Requirement {
            key: "node.kubernetes.io/instance-type".into(),
            operator: Operator::In,
            values: vec!["z9.nonexistent".into()],
            min_values: None,
        });
        snap.nodepools.push(closed);
        assert_eq!(pools_without_types(&snap, &catalog), vec!["closed"]);
    }
}

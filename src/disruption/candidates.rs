//! Which nodes may be disrupted, for which reason, at what disruption cost — and, for the others,
//! why not. This is Karpenter's candidate filter (managed, initialized, not deleting, no
//! `do-not-disrupt`, no PodDisruptionBudget at zero, consolidateAfter elapsed, policy) plus the
//! forceful and drift reasons, computed once per decision from the snapshot and the clock.

use crate::catalog::Catalog;
use crate::domain::labels::{CAPACITY_TYPE, INSTANCE_TYPE, ZONE};
use crate::domain::{ClusterSnapshot, ConsolidationPolicy, Node, NodeClaim, NodePool, Pod};
use crate::optimizer::problem::node_price;

use super::plan::Blocked;
use super::timing::{parse_go_duration, parse_nillable, parse_timestamp, Timestamp};

const NODE_DO_NOT_DISRUPT: &str = "karpenter.sh/do-not-disrupt";

/// A Karpenter-managed node with what the disruption decisions need to know about it.
#[derive(Debug, Clone)]
pub struct NodeInfo {
    /// Index into `snapshot.nodes`.
    pub node: usize,
    pub name: String,
    pub pool: String,
    pub instance_type: String,
    pub spot: bool,
    /// Hourly price of its offering; 0 when the catalog does not know it.
    pub price: f64,
    /// Indices into `snapshot.pods` of the pods an eviction would reschedule.
    pub pods: Vec<usize>,
    /// Karpenter's eviction cost summed over those pods, scaled by the node's remaining lifetime.
    pub eviction_cost: f64,
    /// What disrupting it costs in the objective ($/h units): the per-node weight plus the
    /// per-pod weight times `eviction_cost`, one-off dollars paid back over the node's payback
    /// horizon (how long it has run unchanged, between `paybackHours` and `paybackMaxHours`).
    pub disruption_cost: f64,
    /// Karpenter's disruption cost for Balanced scoring: 1 for the node plus
    /// `max(0, EvictionCost)` of each of `pods` (not scaled by lifetime).
    pub score_disruption: f64,
    /// Time since its NodeClaim (or, without one, the node) was created; None when unknown.
    pub age: Option<std::time::Duration>,
    /// Why it has drifted, when it has.
    pub drift: Option<String>,
    pub expired: bool,
    /// Consolidation (empty or underutilized) may take it: its pool's policy and consolidateAfter
    /// allow.
    pub consolidatable: bool,
    /// Why no voluntary disruption may take it.
    pub block: Option<String>,
}

impl NodeInfo {
    pub fn empty(&self) -> bool {
        self.pods.is_empty()
    }
}

/// The managed nodes, in snapshot order, and the nodes that were left out with the reason.
#[derive(Debug, Clone, Default)]
pub struct Candidates {
    pub nodes: Vec<NodeInfo>,
    pub unmanaged: Vec<Blocked>,
}

impl Candidates {
    pub fn build(snapshot: &ClusterSnapshot, catalog: &Catalog, now: Timestamp) -> Candidates {
        let mut out = Candidates::default();
        for (i, node) in snapshot.nodes.iter().enumerate() {
            let Some(pool) = node
                .nodepool()
                .and_then(|p| snapshot.nodepools.iter().find(|np| np.name == p))
            else {
                out.unmanaged.push(Blocked {
                    node: node.name.clone(),
                    reason: "not managed by a nodepool in the snapshot".into(),
                });
                continue;
            };
            out.nodes
                .push(describe(snapshot, catalog, i, node, pool, now));
        }
        out
    }

    pub fn find(&self, name: &str) -> Option<&NodeInfo> {
        self.nodes.iter().find(|n| n.name == name)
    }
}

fn describe(
    snapshot: &ClusterSnapshot,
    catalog: &Catalog,
    i: usize,
    node: &Node,
    pool: &NodePool,
    now: Timestamp,
) -> NodeInfo {
    let claim = snapshot
        .node_claims
        .iter()
        .find(|c| c.node_name.as_deref() == Some(&node.name));
    let pods: Vec<usize> = (0..snapshot.pods.len())
        .filter(|&p| {
            snapshot.pods[p].node_name.as_deref() == Some(&node.name)
                && snapshot.pods[p].is_reschedulable()
        })
        .collect();
    let created = claim
        .and_then(|c| c.created.as_deref())
        .or(node.created.as_deref())
        .and_then(|t| parse_timestamp(t).ok());
    let expire_after = claim
        .and_then(|c| c.expire_after.as_deref())
        .or(pool.expire_after.as_deref())
        .and_then(|e| parse_nillable(e).ok())
        .flatten();
    let age = created.map(|c| (now - c).to_std().unwrap_or_default());
    let lifetime = match (expire_after, age) {
        (Some(e), Some(a)) if !e.is_zero() => {
            (1.0 - a.as_secs_f64() / e.as_secs_f64()).clamp(0.0, 1.0)
        }
        _ => 1.0,
    };
    let evictions: f64 = pods
        .iter()
        .map(|&p| eviction_cost(&snapshot.pods[p]).max(0.0))
        .sum();
    let score_disruption = 1.0 + evictions;
    let eviction_cost = evictions * lifetime;
    let w = &snapshot.weights;
    NodeInfo {
        node: i,
        name: node.name.clone(),
        pool: pool.name.clone(),
        instance_type: node.labels.get(INSTANCE_TYPE).cloned().unwrap_or_default(),
        spot: node.labels.get(CAPACITY_TYPE).map(String::as_str) == Some("spot"),
        price: node_price(node, catalog),
        eviction_cost,
        disruption_cost: (w.node_disruption + w.pod_eviction * eviction_cost)
            / w.payback_horizon(unchanged(claim, age, now)),
        score_disruption,
        age,
        drift: drift(node, claim, pool, catalog),
        expired: matches!((expire_after, age), (Some(e), Some(a)) if a >= e),
        consolidatable: consolidatable(snapshot, node, claim, pool, &pods, now),
        block: block(snapshot, node, claim, &pods, catalog, now),
        pods,
    }
}

/// How long the node has run as it is: since its last pod event, or since its launch when it has
/// had none. A node whose pods have not changed for hours is likely to stay as it is about as
/// long again; one whose pods come and go is not.
fn unchanged(
    claim: Option<&NodeClaim>,
    age: Option<std::time::Duration>,
    now: Timestamp,
) -> Option<std::time::Duration> {
    let quiet = claim
        .and_then(|c| c.last_pod_event.as_deref())
        .and_then(|t| parse_timestamp(t).ok())
        .map(|t| (now - t).to_std().unwrap_or_default());
    match (age, quiet) {
        (Some(a), Some(q)) => Some(a.min(q)),
        (a, q) => a.or(q),
    }
}

/// Karpenter's `EvictionCost`: 1, plus the pod-deletion-cost and priority scaled into (-10, 10).
pub fn eviction_cost(pod: &Pod) -> f64 {
    (1.0 + f64::from(pod.deletion_cost) / 2f64.powi(27) + f64::from(pod.priority) / 2f64.powi(25))
        .clamp(-10.0, 10.0)
}

fn drift(
    node: &Node,
    claim: Option<&NodeClaim>,
    pool: &NodePool,
    catalog: &Catalog,
) -> Option<String> {
    if let (Some(want), Some(have)) = (
        pool.hash.as_deref(),
        claim.and_then(|c| c.nodepool_hash.as_deref()),
    ) {
        if want != have {
            return Some(format!(
                "nodepool template changed (hash {have} is now {want})"
            ));
        }
    }
    // as Karpenter, a well-known label the node does not carry is not drift
    // (AllowUndefinedWellKnownLabels)
    let undefined_well_known = |key: &str| !node.labels.contains_key(key) && is_well_known(key);
    if let Some(r) = pool
        .requirements
        .iter()
        .find(|r| !undefined_well_known(&r.key) && !r.matches(&node.labels))
    {
        return Some(format!(
            "node no longer meets nodepool requirement on {}",
            r.key
        ));
    }
    if let Some(t) = node
        .labels
        .get(INSTANCE_TYPE)
        .filter(|t| !catalog.instance_types.iter().any(|it| &it.name == *t))
    {
        return Some(format!("instance type {t} is no longer offered"));
    }
    claim
        .filter(|c| c.drifted)
        .map(|_| "nodeclaim reports Drifted".to_string())
}

fn is_well_known(key: &str) -> bool {
    use crate::domain::labels::{ARCH, NODEPOOL, OS, REGION};
    [
        INSTANCE_TYPE,
        ZONE,
        REGION,
        ARCH,
        OS,
        CAPACITY_TYPE,
        NODEPOOL,
    ]
    .contains(&key)
        || key.starts_with("karpenter.k8s.aws/")
}

/// Whether consolidateAfter has passed since the last pod event and the policy allows the node.
fn consolidatable(
    snapshot: &ClusterSnapshot,
    node: &Node,
    claim: Option<&NodeClaim>,
    pool: &NodePool,
    pods: &[usize],
    now: Timestamp,
) -> bool {
    let Some(after) = pool
        .disruption
        .consolidate_after
        .as_deref()
        .map(parse_nillable)
    else {
        return true;
    };
    let Ok(Some(after)) = after else { return false }; // Never, or unreadable: fail closed
    if !pods.is_empty() && pool.disruption.consolidation_policy == ConsolidationPolicy::WhenEmpty {
        return false;
    }
    // without the claim's lastPodEventTime, the latest of the node's and its pods' start stands in
    let last = claim
        .and_then(|c| c.last_pod_event.as_deref())
        .map(str::to_string)
        .or_else(|| {
            let times = pods.iter().filter_map(|&p| {
                snapshot.pods[p]
                    .started
                    .as_ref()
                    .or(snapshot.pods[p].created.as_ref())
            });
            times
                .chain(node.created.as_ref())
                .filter_map(|t| parse_timestamp(t).ok())
                .max()
                .map(|t| t.to_rfc3339())
        });
    match last.and_then(|t| parse_timestamp(&t).ok()) {
        Some(t) => (now - t).to_std().is_ok_and(|d| d >= after),
        None => true,
    }
}

/// Why no voluntary disruption may take the node, checked in Karpenter's order.
fn block(
    snapshot: &ClusterSnapshot,
    node: &Node,
    claim: Option<&NodeClaim>,
    pods: &[usize],
    catalog: &Catalog,
    now: Timestamp,
) -> Option<String> {
    if node.deleting || claim.is_some_and(|c| c.deleting) {
        return Some("already being deleted".into());
    }
    if claim.is_some_and(|c| !c.initialized) || (claim.is_none() && !node.ready) {
        return Some("still initializing".into());
    }
    if node
        .annotations
        .get(NODE_DO_NOT_DISRUPT)
        .map(String::as_str)
        == Some("true")
    {
        return Some("node annotated karpenter.sh/do-not-disrupt".into());
    }
    if ![INSTANCE_TYPE, ZONE, CAPACITY_TYPE]
        .iter()
        .all(|k| node.labels.contains_key(*k))
        || node_price(node, catalog) <= 0.0
    {
        return Some("instance type, zone or capacity type unknown to the catalog".into());
    }
    for &p in pods {
        let pod = &snapshot.pods[p];
        if protected(pod, now) {
            return Some(format!("pod {} has karpenter.sh/do-not-disrupt", pod.key()));
        }
        let pdbs: Vec<_> = snapshot
            .pdbs
            .iter()
            .filter(|b| b.namespace == pod.namespace && b.selector.matches(&pod.labels))
            .collect();
        if pdbs.len() > 1 {
            return Some(format!(
                "pod {} is selected by more than one pdb",
                pod.key()
            ));
        }
        if let Some(b) = pdbs
            .first()
            .filter(|b| allowed_disruptions(snapshot, b) == 0)
        {
            return Some(format!(
                "pdb {}/{} allows no disruption (pod {})",
                b.namespace,
                b.name,
                pod.key()
            ));
        }
    }
    None
}

/// `karpenter.sh/do-not-disrupt` on a pod: "true", or a duration that has not yet run out since the
/// pod started. Other values are ignored, as Karpenter does.
fn protected(pod: &Pod, now: Timestamp) -> bool {
    match pod.do_not_disrupt.as_deref() {
        Some("true") => true,
        Some(d) => match (
            parse_go_duration(d),
            pod.started
                .as_deref()
                .or(pod.created.as_deref())
                .map(parse_timestamp),
        ) {
            (Ok(d), Some(Ok(start))) => (now - start).to_std().map_or(true, |ran| ran < d),
            (Ok(_), None) => true,
            _ => false,
        },
        None => false,
    }
}

/// A PDB's allowed disruptions: `status.disruptionsAllowed` when reported, otherwise computed from
/// the spec over the running pods it selects (percentages rounded up, as the disruption controller
/// does).
pub fn allowed_disruptions(
    snapshot: &ClusterSnapshot,
    b: &crate::domain::PodDisruptionBudget,
) -> usize {
    if let Some(a) = b.disruptions_allowed {
        return a.max(0) as usize;
    }
    let healthy = snapshot
        .pods
        .iter()
        .filter(|p| {
            p.namespace == b.namespace
                && p.node_name.is_some()
                && !p.terminal
                && !p.terminating
                && b.selector.matches(&p.labels)
        })
        .count();
    let scaled = |v: &str| crate::domain::PodDisruptionBudget::count_of(v, healthy);
    match (b.min_available.as_deref(), b.max_unavailable.as_deref()) {
        (_, Some(max)) => scaled(max).unwrap_or(0),
        (Some(min), None) => healthy.saturating_sub(scaled(min).unwrap_or(healthy)),
        (None, None) => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{LabelSelector, PodConstraints, PodDisruptionBudget};

    fn pod(name: &str, node: Option<&str>) -> Pod {
        let constraints = PodConstraints {
            namespace: "default".into(),
            labels: [("app".to_string(), "web".to_string())].into(),
            ..Default::default()
        };
        Pod {
            node_name: node.map(str::to_string),
            created: Some("2026-11-30T10:00:00Z".into()),
            started: Some("2026-11-30T11:00:00Z".into()),
            ..Pod::new(name, constraints).owned_by("ReplicaSet", "web")
        }
    }

    fn at(t: &str) -> Timestamp {
        parse_timestamp(t).unwrap()
    }

    #[test]
    fn eviction_cost_follows_deletion_cost_and_priority() {
        let mut p = pod("a", Some("n"));
        assert_eq!(eviction_cost(&p), 1.0);
        p.deletion_cost = 1 << 27;
        assert_eq!(eviction_cost(&p), 2.0);
        p.priority = i32::MAX;
        assert_eq!(eviction_cost(&p), 10.0, "clamped");
        p.deletion_cost = i32::MIN;
        p.priority = i32::MIN;
        assert_eq!(eviction_cost(&p), -10.0, "clamped below");
    }

    #[test]
    fn do_not_disrupt_true_or_a_running_duration() {
        let mut p = pod("a", Some("n"));
        let now = at("2026-11-30T12:00:00Z");
        assert!(!protected(&p, now));
        p.do_not_disrupt = Some("true".into());
        assert!(protected(&p, now));
        p.do_not_disrupt = Some("30m".into()); // started an hour ago
        assert!(!protected(&p, now));
        p.do_not_disrupt = Some("2h".into());
        assert!(protected(&p, now));
        p.do_not_disrupt = Some("soon".into()); // unreadable values are ignored, as Karpenter does
        assert!(!protected(&p, now));
    }

    #[test]
    fn pdb_allowance_from_status_or_spec() {
        let snap = ClusterSnapshot {
            pods: (0..4)
                .map(|i| std::sync::Arc::new(pod(&format!("w{i}"), Some("n"))))
                .collect(),
            ..ClusterSnapshot::default()
        };
        let selector = LabelSelector {
            match_labels: [("app".to_string(), "web".to_string())].into(),
            match_expressions: vec![],
        };
        let mut b = PodDisruptionBudget {
            namespace: "default".into(),
            name: "web".into(),
            selector,
            min_available: Some("3".into()),
            max_unavailable: None,
            disruptions_allowed: None,
        };
        assert_eq!(allowed_disruptions(&snap, &b), 1);
        b.min_available = Some("50%".into());
        assert_eq!(allowed_disruptions(&snap, &b), 2);
        b.max_unavailable = Some("25%".into());
        assert_eq!(allowed_disruptions(&snap, &b), 1);
        b.disruptions_allowed = Some(0);
        assert_eq!(
            allowed_disruptions(&snap, &b),
            0,
            "the controller's status wins"
        );
    }
}

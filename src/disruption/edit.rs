//! Snapshots edited the way carrying out a decision would change the cluster: nodes deleted (their
//! pods pending again), new nodes registered (with their DaemonSet pods) and pods bound. The
//! disruption model reasons about "the cluster after", the Karpenter baseline applies its commands
//! one by one, and benchmarks replay plans, all through these functions.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use crate::catalog::Catalog;
use crate::domain::labels::{tolerates_all, HOSTNAME, INSTANCE_TYPE};
use crate::domain::{ClusterSnapshot, Node, NodeClaim, Pod, Quantity, Resources};
use crate::optimizer::{NewNode, Plan};

use super::plan::DisruptionPlan;

/// The snapshot once `nodes` are gone: the nodes and their claims are removed, pods that would be
/// rescheduled become pending (unbound), and the rest of their pods (DaemonSet, mirror) vanish.
pub fn without_nodes(snapshot: &ClusterSnapshot, nodes: &BTreeSet<String>) -> ClusterSnapshot {
    let mut out = snapshot.clone();
    out.nodes.retain(|n| !nodes.contains(&n.name));
    out.node_claims
        .retain(|c| c.node_name.as_ref().is_none_or(|n| !nodes.contains(n)));
    out.pods.retain_mut(
        |p| match p.node_name.as_ref().filter(|n| nodes.contains(*n)) {
            None => true,
            Some(_) if p.is_reschedulable() => {
                Arc::make_mut(p).node_name = None;
                true
            }
            Some(_) => false,
        },
    );
    out
}

/// The snapshot once a provisioning plan is carried out: every new node is registered (named
/// `{prefix}{id}`) with a NodeClaim and its DaemonSet pods, and every placed pod is bound.
pub fn with_plan(
    snapshot: &ClusterSnapshot,
    catalog: &Catalog,
    plan: &Plan,
    prefix: &str,
    now: &str,
) -> ClusterSnapshot {
    let mut out = snapshot.clone();
    let names = register_all(&mut out, catalog, &plan.nodes, prefix, now);
    bind(&mut out, plan.destinations().into_iter(), &names);
    out
}

/// The snapshot once every action of a disruption plan is carried out.
pub fn with_disruption(
    snapshot: &ClusterSnapshot,
    catalog: &Catalog,
    plan: &DisruptionPlan,
    prefix: &str,
    now: &str,
) -> ClusterSnapshot {
    let deleted: BTreeSet<String> = plan
        .actions
        .iter()
        .flat_map(|a| a.delete.iter().cloned())
        .collect();
    let mut out = without_nodes(snapshot, &deleted);
    let launched: Vec<NewNode> = plan
        .actions
        .iter()
        .flat_map(|a| a.launch.iter().cloned())
        .collect();
    let names = register_all(&mut out, catalog, &launched, prefix, now);
    bind(
        &mut out,
        plan.actions
            .iter()
            .flat_map(|a| &a.moves)
            .map(|m| (m.pod.as_str(), m.to.as_str())),
        &names,
    );
    out
}

/// Registers every launched node as `{prefix}{id}`; returns id -> node name.
fn register_all(
    snapshot: &mut ClusterSnapshot,
    catalog: &Catalog,
    nodes: &[NewNode],
    prefix: &str,
    now: &str,
) -> BTreeMap<String, String> {
    let mut names = BTreeMap::new();
    for n in nodes {
        let name = format!("{prefix}{}", n.id);
        register(snapshot, catalog, n, &name, now);
        names.insert(n.id.clone(), name);
    }
    names
}

/// Binds pods to their targets: a launched node's id (renamed through `names`) or an existing node.
fn bind<'a>(
    snapshot: &mut ClusterSnapshot,
    targets: impl Iterator<Item = (&'a str, &'a str)>,
    names: &BTreeMap<String, String>,
) {
    let target: BTreeMap<&str, &str> = targets
        .map(|(pod, to)| (pod, names.get(to).map_or(to, String::as_str)))
        .collect();
    for pod in &mut snapshot.pods {
        if let Some(node) = target.get(pod.key().as_str()) {
            Arc::make_mut(pod).node_name = Some(node.to_string());
        }
    }
}

/// Adds a launched node as a ready, initialized Node with its NodeClaim and DaemonSet pods.
pub(crate) fn register(
    snapshot: &mut ClusterSnapshot,
    catalog: &Catalog,
    n: &NewNode,
    name: &str,
    now: &str,
) {
    let pool = snapshot.nodepools.iter().find(|p| p.name == n.nodepool);
    let class = pool.and_then(|p| snapshot.node_class(p.node_class.as_deref()));
    let it = catalog
        .instance_types
        .iter()
        .find(|t| t.name == n.instance_type);
    let capacity = it.map(|t| t.node_capacity(class)).unwrap_or_default();
    let allocatable: Resources = match it {
        Some(t) => t.node_allocatable(class),
        None => n
            .allocatable
            .iter()
            .filter_map(|(k, v)| Quantity::parse(v).ok().map(|q| (k.clone(), q)))
            .collect(),
    };
    let mut labels = n.labels.clone();
    labels.insert(HOSTNAME.to_string(), name.to_string());
    labels.insert(INSTANCE_TYPE.to_string(), n.instance_type.clone());
    let taints = pool.map(|p| p.taints.clone()).unwrap_or_default();
    for ds in &snapshot.daemonsets {
        if ds.pod.node_matches(&labels) && tolerates_all(&ds.pod.tolerations, &taints) {
            snapshot.pods.push(Arc::new(daemon_pod(ds, name)));
        }
    }
    let node = Node {
        name: name.to_string(),
        labels,
        taints,
        capacity,
        allocatable,
        unschedulable: false,
        ready: true,
        provider_id: None,
        created: Some(now.to_string()),
        annotations: Default::default(),
        deleting: false,
    };
    snapshot.node_claims.push(claim_for(
        &node,
        &n.nodepool,
        pool.and_then(|p| p.hash.clone()),
    ));
    snapshot.nodes.push(node.into());
}

/// The NodeClaim Karpenter keeps for a node it launched: initialized, last pod event at creation.
pub(crate) fn claim_for(node: &Node, nodepool: &str, nodepool_hash: Option<String>) -> NodeClaim {
    NodeClaim {
        name: node.name.clone(),
        nodepool: Some(nodepool.to_string()),
        labels: node.labels.clone(),
        requirements: vec![],
        node_name: Some(node.name.clone()),
        provider_id: node.provider_id.clone(),
        capacity: node.capacity.clone(),
        allocatable: node.allocatable.clone(),
        deleting: false,
        created: node.created.clone(),
        initialized: true,
        drifted: false,
        last_pod_event: node.created.clone(),
        expire_after: None,
        nodepool_hash,
    }
}

/// The pod a DaemonSet runs on `node`.
pub(crate) fn daemon_pod(ds: &crate::domain::DaemonSet, node: &str) -> Pod {
    Pod {
        namespace: ds.namespace.clone(),
        node_name: Some(node.to_string()),
        ..Pod::new(format!("{}-{node}", ds.name), ds.pod.clone()).owned_by("DaemonSet", &ds.name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::PodConstraints;

    #[test]
    fn deleting_a_node_makes_its_pods_pending_and_drops_its_daemon_pods() {
        let on = |name: &str, node: &str, owner: &str| Pod {
            node_name: Some(node.into()),
            ..Pod::new(name, PodConstraints::default()).owned_by(owner, "x")
        };
        let node = |name: &str| Node {
            name: name.into(),
            labels: Default::default(),
            taints: vec![],
            capacity: Resources::new(),
            allocatable: Resources::new(),
            unschedulable: false,
            ready: true,
            provider_id: None,
            created: None,
            annotations: Default::default(),
            deleting: false,
        };
        let snap = ClusterSnapshot {
            nodes: vec![node("a").into(), node("b").into()],
            pods: [
                on("web-1", "a", "ReplicaSet"),
                on("agent-a", "a", "DaemonSet"),
                on("web-2", "b", "ReplicaSet"),
            ]
            .map(Arc::new)
            .into(),
            ..ClusterSnapshot::default()
        };
        let after = without_nodes(&snap, &["a".to_string()].into());
        assert_eq!(
            after
                .nodes
                .iter()
                .map(|n| n.name.as_str())
                .collect::<Vec<_>>(),
            ["b"]
        );
        let pods: Vec<(&str, Option<&str>)> = after
            .pods
            .iter()
            .map(|p| (p.name.as_str(), p.node_name.as_deref()))
            .collect();
        assert_eq!(pods, [("web-1", None), ("web-2", Some("b"))]);
    }
}

//! Draining a Node as Karpenter's terminator does. The node carries the
//! `karpenter.sh/disrupted:NoSchedule` taint rather than a cordon: DaemonSet pods tolerate
//! `node.kubernetes.io/unschedulable`, so the DaemonSet controller would put every evicted one
//! back on a cordoned node, while it keeps them off a tainted one.
//!
//! The pods that hold the node are those that are not finished, not static (mirror) pods, and not
//! tolerating the disrupted taint (those stay until the instance goes, as Karpenter leaves them).
//! They are evicted one priority group at a time: non-critical pods, non-critical DaemonSet
//! pods, critical pods, critical DaemonSet pods. A pod already terminating is waited for until
//! its grace period is over (its `deletionTimestamp`); after that its kubelet has killed it or is
//! gone, and it no longer holds the node. Once the NodeClaim's terminationGracePeriod is over,
//! whatever is left is deleted outright and the node counts as drained.

use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, ListParams};

use super::super::claims::DISRUPTED_TAINT;
use super::super::cluster::KubeCluster;
use crate::controller::Cluster;
use crate::disruption::timing::parse_timestamp;
use crate::domain::CRITICAL_PRIORITY;

/// Where a node's drain stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Drain {
    /// Pods still hold the node: evictions were asked for, or terminating pods are within grace.
    Draining,
    /// No pod holds the node any more.
    Drained,
    /// The pods could not be read; tried again next step.
    Unknown,
}

/// The pods bound to `node`, read from the API server (the step's snapshot has already dropped
/// the pods it evicted); None when they cannot be read.
pub(super) fn pods_on(cluster: &KubeCluster, node: &str) -> Option<Vec<Pod>> {
    let api: Api<Pod> = Api::all(cluster.client().clone());
    let on_node = ListParams::default().fields(&format!("spec.nodeName={node}"));
    match cluster.handle().block_on(api.list(&on_node)) {
        Ok(list) => Some(list.items),
        Err(e) => {
            tracing::warn!(node, error = %e, "pods of a draining node not listed");
            None
        }
    }
}

/// How many pods still hold `node` at `now` (DaemonSet pods counted when `daemons`); None when
/// the pods cannot be read.
pub fn holding(
    cluster: &KubeCluster,
    node: &str,
    now: DateTime<Utc>,
    daemons: bool,
) -> Option<usize> {
    let pods = pods_on(cluster, node)?;
    let held = pods
        .iter()
        .filter(|p| holds_node(p) && !past_grace(p, now))
        .filter(|p| daemons || !daemon(p))
        .count();
    Some(held)
}

/// One drain step on `node` at `now`; `forced` once terminationGracePeriod is over.
pub fn drain(cluster: &mut KubeCluster, node: &str, forced: bool, now: DateTime<Utc>) -> Drain {
    let Some(pods) = pods_on(cluster, node) else {
        return Drain::Unknown;
    };
    let holding: Vec<&Pod> = pods
        .iter()
        .filter(|p| holds_node(p) && !past_grace(p, now))
        .collect();
    if forced {
        // terminationGracePeriod is over: budgets and grace periods no longer hold the node back
        for pod in &holding {
            force_delete(cluster, pod);
        }
        return Drain::Drained;
    }
    let evictable: Vec<&&Pod> = holding
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .collect();
    if let Some(group) = evictable.iter().map(|p| group_of(p)).min() {
        for pod in evictable.iter().filter(|p| group_of(p) == group) {
            let key = format!(
                "{}/{}",
                pod.metadata.namespace.as_deref().unwrap_or_default(),
                pod.metadata.name.as_deref().unwrap_or_default()
            );
            if let Err(e) = cluster.evict(&key) {
                tracing::debug!(pod = %key, reason = %e.reason, "eviction refused, retrying");
            }
        }
        return Drain::Draining;
    }
    match holding.is_empty() {
        true => Drain::Drained,
        false => Drain::Draining,
    }
}

/// Not finished, not a static pod's mirror, and not tolerating the disrupted taint.
fn holds_node(pod: &Pod) -> bool {
    let finished = pod
        .status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .is_some_and(|p| p == "Succeeded" || p == "Failed");
    !finished && !mirror(pod) && !tolerates_disrupted(pod)
}

/// A static pod's mirror: the kubelet owns it, the API cannot evict or delete it.
pub(super) fn mirror(pod: &Pod) -> bool {
    pod.metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key("kubernetes.io/config.mirror"))
}

/// Whether the pod tolerates `karpenter.sh/disrupted:NoSchedule`.
pub(super) fn tolerates_disrupted(pod: &Pod) -> bool {
    let tolerations = pod.spec.as_ref().and_then(|s| s.tolerations.as_ref());
    tolerations.into_iter().flatten().any(|t| {
        let effect_ok = t
            .effect
            .as_deref()
            .is_none_or(|e| e.is_empty() || e == "NoSchedule");
        let exists = t.operator.as_deref() == Some("Exists");
        let key_ok = match t.key.as_deref() {
            None | Some("") => exists,
            Some(k) => {
                k == DISRUPTED_TAINT && (exists || t.value.as_deref().is_none_or(str::is_empty))
            }
        };
        effect_ok && key_ok
    })
}

/// Terminating and past its grace period: its kubelet has killed it, or is gone.
fn past_grace(pod: &Pod, now: DateTime<Utc>) -> bool {
    pod.metadata
        .deletion_timestamp
        .as_ref()
        .is_some_and(|t| parse_timestamp(&t.0.to_string()).is_ok_and(|d| d <= now))
}

/// Karpenter's eviction groups, lowest first.
fn group_of(pod: &Pod) -> u8 {
    let critical = pod
        .spec
        .as_ref()
        .and_then(|s| s.priority)
        .is_some_and(|p| p >= CRITICAL_PRIORITY)
        || pod
            .spec
            .as_ref()
            .and_then(|s| s.priority_class_name.as_deref())
            .is_some_and(|c| c == "system-cluster-critical" || c == "system-node-critical");
    (critical as u8) * 2 + daemon(pod) as u8
}

pub(super) fn daemon(pod: &Pod) -> bool {
    pod.metadata
        .owner_references
        .as_ref()
        .is_some_and(|os| os.iter().any(|o| o.kind == "DaemonSet"))
}

fn force_delete(cluster: &mut KubeCluster, pod: &Pod) {
    let (Some(ns), Some(name)) = (&pod.metadata.namespace, &pod.metadata.name) else {
        return;
    };
    if !cluster.leads("force delete pod") {
        return;
    }
    let api: Api<Pod> = Api::namespaced(cluster.client().clone(), ns);
    let now = DeleteParams {
        grace_period_seconds: Some(0),
        ..DeleteParams::default()
    };
    match cluster.handle().block_on(api.delete(name, &now)) {
        Ok(_) => tracing::info!(pod = %format!("{ns}/{name}"), "deleted at terminationGracePeriod"),
        Err(kube::Error::Api(e)) if e.code == 404 => {}
        Err(e) => tracing::warn!(pod = %format!("{ns}/{name}"), error = %e, "pod not deleted"),
    }
}

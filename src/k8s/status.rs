//! Status joiner reports on Karpenter's objects, as Karpenter's own controllers would:
//!
//! - NodeClaim `Consolidatable` (consolidateAfter has passed since the last pod event, under a
//!   policy that allows it) and `Drifted` (the NodePool template hash, its requirements or the
//!   instance type's availability changed, read off the disruption candidates; or the cloud
//!   provider reports the instance drifted);
//! - NodePool `ValidationSucceeded` (the snapshot conversion accepted it, or why not),
//!   `NodeClassReady` (its EC2NodeClass exists), `Ready`, and `status.resources` (the capacity of
//!   its nodes, with `nodes`).
//!
//! Each is written only when it changes, so a write never wakes the next step into another one.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use serde_json::{json, Value};

use super::caches::karpenter_resource;
use super::claims::{conditions_of, k8s_time, node_name_of, set_condition};
use super::cluster::KubeCluster;
use crate::api::{
    find_condition, NODECLAIM_CONSOLIDATABLE, NODECLAIM_DRIFTED, NODEPOOL_NODE_CLASS_READY,
    NODEPOOL_VALIDATION_SUCCEEDED, READY,
};
use crate::controller::Cluster;
use crate::disruption::candidates::Candidates;
use crate::disruption::timing::Timestamp;
use crate::domain::Resources;
use crate::snapshot::SnapshotError;

/// The reason joiner writes on a Drifted condition it set, so it clears only its own.
const DRIFT_REASON: &str = "Drifted";
/// Drift that is only the Drifted condition itself, as the candidates read it back.
const SELF_REPORTED: &str = "nodeclaim reports Drifted";

/// `provider_drift`: drift the cloud provider reports, by node name.
pub fn report(
    cluster: &mut KubeCluster,
    now: Timestamp,
    unreadable: &[SnapshotError],
    provider_drift: &BTreeMap<String, String>,
) {
    let at = k8s_time(now);
    claims(cluster, now, &at, provider_drift);
    nodepools(cluster, &at, unreadable);
}

fn claims(
    cluster: &mut KubeCluster,
    now: Timestamp,
    at: &Time,
    provider_drift: &BTreeMap<String, String>,
) {
    let candidates = Candidates::build(cluster.snapshot(), cluster.catalog(), now);
    let by_node: BTreeMap<&str, _> = candidates
        .nodes
        .iter()
        .map(|c| (c.name.as_str(), c))
        .collect();
    let mut writes = Vec::new();
    for claim in cluster.caches().node_claims() {
        let Some(info) = node_name_of(&claim).and_then(|n| by_node.get(n)) else {
            continue;
        };
        let mut next = (*claim).clone();
        let consolidatable = if info.consolidatable {
            "Consolidatable"
        } else {
            "ConsolidateAfterNotElapsed"
        };
        let mut changed = set_condition(
            &mut next,
            NODECLAIM_CONSOLIDATABLE,
            info.consolidatable,
            consolidatable,
            "",
            at,
        );
        match info
            .drift
            .as_deref()
            .filter(|d| *d != SELF_REPORTED)
            .or(provider_drift.get(&info.name).map(String::as_str))
        {
            Some(why) => {
                changed |= set_condition(&mut next, NODECLAIM_DRIFTED, true, DRIFT_REASON, why, at)
            }
            None if find_condition(&conditions_of(&next), NODECLAIM_DRIFTED)
                .is_some_and(|c| c.reason == DRIFT_REASON && c.status == "True") =>
            {
                changed |= set_condition(&mut next, NODECLAIM_DRIFTED, false, "NotDrifted", "", at)
            }
            None => {}
        }
        if changed {
            writes.push((
                claim.metadata.name.clone().unwrap_or_default(),
                next.data["status"]["conditions"].clone(),
            ));
        }
    }
    let api: Api<DynamicObject> =
        Api::all_with(cluster.client().clone(), &karpenter_resource("NodeClaim"));
    for (name, conditions) in writes {
        write_status(
            cluster,
            &api,
            &name,
            json!({"status": {"conditions": conditions}}),
        );
    }
}

fn nodepools(cluster: &mut KubeCluster, at: &Time, unreadable: &[SnapshotError]) {
    let classes: Vec<String> = cluster
        .caches()
        .nodeclasses
        .state()
        .iter()
        .filter_map(|c| c.metadata.name.clone())
        .collect();
    let mut writes = Vec::new();
    for pool in cluster.caches().nodepools.state() {
        let name = pool.metadata.name.clone().unwrap_or_default();
        let invalid = unreadable.iter().find_map(|e| match e {
            SnapshotError::Object {
                kind,
                object,
                path,
                message,
            } if kind == "NodePool" && *object == name => Some(format!("{path}: {message}")),
            _ => None,
        });
        let class = pool.data["spec"]["template"]["spec"]["nodeClassRef"]["name"]
            .as_str()
            .unwrap_or_default();
        let class_ready = classes.iter().any(|c| c == class);
        let mut next = (*pool).clone();
        let mut changed = set_condition(
            &mut next,
            NODEPOOL_VALIDATION_SUCCEEDED,
            invalid.is_none(),
            if invalid.is_none() {
                "ValidationSucceeded"
            } else {
                "ValidationFailed"
            },
            invalid.as_deref().unwrap_or(""),
            at,
        );
        let class_message = if class_ready {
            String::new()
        } else {
            format!("EC2NodeClass {class:?} not found")
        };
        changed |= set_condition(
            &mut next,
            NODEPOOL_NODE_CLASS_READY,
            class_ready,
            if class_ready {
                "NodeClassReady"
            } else {
                "NodeClassNotFound"
            },
            &class_message,
            at,
        );
        let ready = invalid.is_none() && class_ready;
        changed |= set_condition(
            &mut next,
            READY,
            ready,
            if ready { "Ready" } else { "NotReady" },
            "",
            at,
        );
        let resources = resources(cluster, &name);
        changed |= next.data["status"]["resources"] != resources;
        next.data["status"]["resources"] = resources;
        if changed {
            writes.push((name, next.data["status"].clone()));
        }
    }
    let api: Api<DynamicObject> =
        Api::all_with(cluster.client().clone(), &karpenter_resource("NodePool"));
    for (name, status) in writes {
        write_status(cluster, &api, &name, json!({ "status": status }));
    }
}

/// The capacity of a pool's nodes, as Karpenter reports it in `status.resources`.
fn resources(cluster: &KubeCluster, pool: &str) -> Value {
    let nodes: Vec<_> = cluster
        .snapshot()
        .nodes
        .iter()
        .filter(|n| n.nodepool() == Some(pool))
        .collect();
    let mut total = Resources::new();
    for n in &nodes {
        total.add(&n.capacity);
    }
    let mut out: BTreeMap<String, String> = total
        .iter()
        .map(|(k, q)| (k.to_string(), q.to_string()))
        .collect();
    out.insert("nodes".into(), nodes.len().to_string());
    json!(out)
}

fn write_status(cluster: &mut KubeCluster, api: &Api<DynamicObject>, name: &str, patch: Value) {
    if !cluster.leads("status") {
        return;
    }
    if let Err(e) = cluster.handle().block_on(api.patch_status(
        name,
        &PatchParams::default(),
        &Patch::Merge(&patch),
    )) {
        cluster.writes.errors += 1;
        tracing::debug!(object = name, error = %e, "status not written, retrying next step");
    }
}

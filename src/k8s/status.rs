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

use kube::api::{Api, DynamicObject, Patch, PatchParams};
use serde_json::{json, Value};

use super::caches::karpenter_resource;
use super::claims::{node_name_of, with_condition};
use super::cluster::KubeCluster;
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
pub fn report(cluster: &mut KubeCluster, now: Timestamp, unreadable: &[SnapshotError], provider_drift: &BTreeMap<String, String>) {
    let stamp = now.to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    claims(cluster, now, &stamp, provider_drift);
    nodepools(cluster, &stamp, unreadable);
}

fn claims(cluster: &mut KubeCluster, now: Timestamp, stamp: &str, provider_drift: &BTreeMap<String, String>) {
    let candidates = Candidates::build(cluster.snapshot(), cluster.catalog(), now);
    let by_node: BTreeMap<&str, _> = candidates.nodes.iter().map(|c| (c.name.as_str(), c)).collect();
    let mut writes = Vec::new();
    for claim in cluster.caches().node_claims() {
        let Some(info) = node_name_of(&claim).and_then(|n| by_node.get(n)) else { continue };
        let mut next = (*claim).clone();
        let consolidatable = if info.consolidatable { ("True", "Consolidatable") } else { ("False", "ConsolidateAfterNotElapsed") };
        set(&mut next, "Consolidatable", consolidatable.0 == "True", consolidatable.1, "", stamp);
        match info.drift.as_deref().filter(|d| *d != SELF_REPORTED).or(provider_drift.get(&info.name).map(String::as_str)) {
            Some(why) => set(&mut next, "Drifted", true, DRIFT_REASON, why, stamp),
            None if condition(&next, "Drifted").is_some_and(|c| c["reason"] == DRIFT_REASON && c["status"] == "True") => {
                set(&mut next, "Drifted", false, "NotDrifted", "", stamp)
            }
            None => {}
        }
        if next.data["status"]["conditions"] != claim.data["status"]["conditions"] {
            writes.push((claim.metadata.name.clone().unwrap_or_default(), next.data["status"]["conditions"].clone()));
        }
    }
    let api: Api<DynamicObject> = Api::all_with(cluster.client().clone(), &karpenter_resource("NodeClaim"));
    for (name, conditions) in writes {
        write_status(cluster, &api, &name, json!({"status": {"conditions": conditions}}));
    }
}

fn nodepools(cluster: &mut KubeCluster, stamp: &str, unreadable: &[SnapshotError]) {
    let classes: Vec<String> = cluster.caches().nodeclasses.state().iter().filter_map(|c| c.metadata.name.clone()).collect();
    let mut writes = Vec::new();
    for pool in cluster.caches().nodepools.state() {
        let name = pool.metadata.name.clone().unwrap_or_default();
        let invalid = unreadable.iter().find_map(|e| match e {
            SnapshotError::Object { kind, object, path, message } if kind == "NodePool" && *object == name => Some(format!("{path}: {message}")),
            _ => None,
        });
        let class = pool.data["spec"]["template"]["spec"]["nodeClassRef"]["name"].as_str().unwrap_or_default();
        let class_ready = classes.iter().any(|c| c == class);
        let mut next = (*pool).clone();
        set(&mut next, "ValidationSucceeded", invalid.is_none(), if invalid.is_none() { "ValidationSucceeded" } else { "ValidationFailed" }, invalid.as_deref().unwrap_or(""), stamp);
        let class_message = if class_ready { String::new() } else { format!("EC2NodeClass {class:?} not found") };
        set(&mut next, "NodeClassReady", class_ready, if class_ready { "NodeClassReady" } else { "NodeClassNotFound" }, &class_message, stamp);
        let ready = invalid.is_none() && class_ready;
        set(&mut next, "Ready", ready, if ready { "Ready" } else { "NotReady" }, "", stamp);
        next.data["status"]["resources"] = resources(cluster, &name);
        if next.data["status"] != pool.data["status"] {
            writes.push((name, next.data["status"].clone()));
        }
    }
    let api: Api<DynamicObject> = Api::all_with(cluster.client().clone(), &karpenter_resource("NodePool"));
    for (name, status) in writes {
        write_status(cluster, &api, &name, json!({ "status": status }));
    }
}

/// The capacity of a pool's nodes, as Karpenter reports it in `status.resources`.
fn resources(cluster: &KubeCluster, pool: &str) -> Value {
    let nodes: Vec<_> = cluster.snapshot().nodes.iter().filter(|n| n.nodepool() == Some(pool)).collect();
    let mut total = Resources::new();
    for n in &nodes {
        total.add(&n.capacity);
    }
    let mut out: BTreeMap<String, String> = total.iter().map(|(k, q)| (k.to_string(), q.to_string())).collect();
    out.insert("nodes".into(), nodes.len().to_string());
    json!(out)
}

fn condition<'a>(o: &'a DynamicObject, kind: &str) -> Option<&'a Value> {
    o.data["status"]["conditions"].as_array()?.iter().find(|c| c["type"] == kind)
}

/// Sets a condition on the object's status, keeping its transition time unless the status flips;
/// a changed message is written too.
fn set(o: &mut DynamicObject, kind: &str, status: bool, reason: &str, message: &str, stamp: &str) {
    let mut list = with_condition(o, kind, status, reason, stamp);
    if let Some(c) = list.as_array_mut().and_then(|l| l.iter_mut().find(|c| c["type"] == kind)) {
        c["reason"] = json!(reason);
        c["message"] = json!(message);
    }
    o.data["status"]["conditions"] = list;
}

fn write_status(cluster: &mut KubeCluster, api: &Api<DynamicObject>, name: &str, patch: Value) {
    if let Err(e) = cluster.handle().block_on(api.patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))) {
        cluster.writes.errors += 1;
        tracing::debug!(object = name, error = %e, "status not written, retrying next step");
    }
}

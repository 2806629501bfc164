//! NodeClaim lifecycle after launch, as Karpenter's lifecycle and termination controllers run it:
//!
//! - **Registered**: the Node whose `spec.providerID` is the claim's appears; joiner gives it the
//!   claim's labels and taints, removes `karpenter.sh/unregistered`, adds the termination finalizer
//!   and an owner reference, and records `status.nodeName`.
//! - **Initialized**: the Node is Ready, reports allocatable, and the claim's startup taints are
//!   gone; the claim gets Initialized and Ready, the Node `karpenter.sh/initialized=true`.
//! - **Timeouts**: a claim never launched after the launch timeout, or never registered after the
//!   registration timeout, is given up (the host terminates its instance and re-solves).
//! - **Termination**: a Node or NodeClaim someone deleted (it carries the finalizer) is tainted
//!   `karpenter.sh/disrupted:NoSchedule` and drained through the Eviction API as Karpenter's
//!   terminator drains ([`terminator`]); once its VolumeAttachments are gone ([`volumes`]) its
//!   instance goes and joiner's finalizer with it. A disruption command's drain waits for the
//!   volumes the same way.
//!
//! These functions write to the API server and return what the host must tell the controller.

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use serde_json::{json, Value};

use super::caches::karpenter_resource;
use super::claims::{
    self, DISRUPTED_TAINT, INITIALIZED_LABEL, REGISTERED_LABEL, TERMINATION_FINALIZER,
    UNREGISTERED_TAINT,
};
use super::cluster::{has_finalizer, KubeCluster};
use crate::api::{NODECLAIM_INITIALIZED, NODECLAIM_REGISTERED, READY};
use crate::controller::Cluster;
use crate::disruption::timing::{parse_go_duration, parse_timestamp, Timestamp};

mod terminator;
mod volumes;
use terminator::Drain;
pub use volumes::wait_metrics as volume_wait_metrics;

/// Karpenter's annotation on a NodeClaim: when its terminationGracePeriod ends (RFC 3339).
const GRACE_END_ANNOTATION: &str = "karpenter.sh/nodeclaim-termination-timestamp";

/// What changed for the host to act on.
#[derive(Debug, Default, PartialEq)]
pub struct Transitions {
    /// (claim, node): the claim's node registered.
    pub registered: Vec<(String, String)>,
    /// Nodes whose claim became Initialized.
    pub initialized: Vec<String>,
    /// Claims given up: (claim, providerID if launched, reason).
    pub timed_out: Vec<(String, Option<String>, &'static str)>,
    /// Nodes being deleted by someone and drained: (node, providerID, drained, grace over).
    pub terminating: Vec<Terminating>,
}

#[derive(Debug, PartialEq)]
pub struct Terminating {
    pub node: String,
    pub provider_id: Option<String>,
    /// No pod left to evict and no volume attached (or terminationGracePeriod over): the
    /// instance can go.
    pub drained: bool,
}

/// The claim lifecycle timeouts, in seconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Timeouts {
    pub launch: f64,
    pub registration: f64,
}

pub fn reconcile(cluster: &mut KubeCluster, now: Timestamp, timeouts: Timeouts) -> Transitions {
    let mut out = Transitions::default();
    let at = claims::k8s_time(now);
    let entries = cluster.caches().nodes.state();
    let nodes: Vec<&Node> = entries.iter().map(|n| &n.value.object).collect();
    for claim in cluster.caches().node_claims() {
        let name = claim.metadata.name.clone().unwrap_or_default();
        let provider = claims::provider_id_of(&claim).map(str::to_string);
        let node = provider.as_deref().and_then(|p| {
            nodes
                .iter()
                .find(|n| n.spec.as_ref().and_then(|s| s.provider_id.as_deref()) == Some(p))
        });
        if claim.metadata.deletion_timestamp.is_some() {
            // a deleted claim with a node is drained below; one without has nothing to drain
            if node.is_none() && has_finalizer(&claim.metadata) {
                out.timed_out.push((name, provider, "deleted"));
            }
            continue;
        }
        match node {
            Some(node) => {
                let node_name = node.metadata.name.clone().unwrap_or_default();
                if !claims::has_condition(&claim, NODECLAIM_REGISTERED) {
                    if register(cluster, &claim, node, &at) {
                        out.registered.push((name.clone(), node_name));
                    }
                } else if !claims::has_condition(&claim, NODECLAIM_INITIALIZED)
                    && initialize(cluster, &claim, node, &at)
                {
                    out.initialized.push(node_name);
                }
            }
            None => {
                let age = age_seconds(&claim.metadata, now);
                if provider.is_none() && age > timeouts.launch {
                    out.timed_out.push((name, None, "launch-timeout"));
                } else if provider.is_some() && age > timeouts.registration {
                    out.timed_out.push((name, provider, "registration-timeout"));
                }
            }
        }
    }
    out.terminating = terminating(cluster, now);
    out
}

fn age_seconds(meta: &ObjectMeta, now: Timestamp) -> f64 {
    let created = meta
        .creation_timestamp
        .as_ref()
        .and_then(|t| parse_timestamp(&t.0.to_string()).ok());
    created
        .map(|c| (now - c).num_milliseconds() as f64 / 1000.0)
        .unwrap_or(0.0)
}

/// Gives the node its claim's labels and taints and takes ownership; records the claim Registered.
fn register(cluster: &mut KubeCluster, claim: &DynamicObject, node: &Node, at: &Time) -> bool {
    let name = claim.metadata.name.clone().unwrap_or_default();
    let node_name = node.metadata.name.clone().unwrap_or_default();
    let mut labels = claim.metadata.labels.clone().unwrap_or_default();
    labels.insert(REGISTERED_LABEL.to_string(), "true".to_string());
    let existing: Vec<Value> = node
        .spec
        .as_ref()
        .and_then(|s| s.taints.clone())
        .unwrap_or_default()
        .iter()
        .filter_map(|t| serde_json::to_value(t).ok())
        .collect();
    let mut taints: Vec<Value> = existing
        .into_iter()
        .filter(|t| t["key"] != UNREGISTERED_TAINT)
        .collect();
    for key in ["taints", "startupTaints"] {
        for t in claim.data["spec"][key]
            .as_array()
            .cloned()
            .unwrap_or_default()
        {
            if !taints
                .iter()
                .any(|x| x["key"] == t["key"] && x["effect"] == t["effect"])
            {
                taints.push(t);
            }
        }
    }
    let mut finalizers = node.metadata.finalizers.clone().unwrap_or_default();
    if !finalizers.iter().any(|f| f == TERMINATION_FINALIZER) {
        finalizers.push(TERMINATION_FINALIZER.to_string());
    }
    let owner = json!({"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim", "name": name, "uid": claim.metadata.uid, "blockOwnerDeletion": true});
    let node_patch = json!({"metadata": {"labels": labels, "finalizers": finalizers, "ownerReferences": [owner]}, "spec": {"taints": taints}});
    let mut registered = claim.clone();
    claims::set_condition(
        &mut registered,
        NODECLAIM_REGISTERED,
        true,
        "Registered",
        "",
        at,
    );
    let status = json!({"status": {"nodeName": node_name, "conditions": registered.data["status"]["conditions"]}});
    write(cluster, &name, &node_name, node_patch, status)
}

/// Initialized once the node is Ready, reports allocatable and has shed its startup taints.
fn initialize(cluster: &mut KubeCluster, claim: &DynamicObject, node: &Node, at: &Time) -> bool {
    let ready = node
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
    let allocatable = node
        .status
        .as_ref()
        .and_then(|s| s.allocatable.as_ref())
        .is_some_and(|a| !a.is_empty());
    let node_taints = node
        .spec
        .as_ref()
        .and_then(|s| s.taints.clone())
        .unwrap_or_default();
    let startup = claim.data["spec"]["startupTaints"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let startup_left = startup.iter().any(|t| {
        node_taints
            .iter()
            .any(|n| t["key"] == n.key.as_str() && t["effect"] == n.effect.as_str())
    });
    if !ready || !allocatable || startup_left {
        return false;
    }
    let name = claim.metadata.name.clone().unwrap_or_default();
    let node_name = node.metadata.name.clone().unwrap_or_default();
    let mut initialized = claim.clone();
    claims::set_condition(
        &mut initialized,
        NODECLAIM_INITIALIZED,
        true,
        "Initialized",
        "",
        at,
    );
    claims::set_condition(&mut initialized, READY, true, "Ready", "", at);
    let node_patch = json!({"metadata": {"labels": {INITIALIZED_LABEL: "true"}}});
    let status = json!({"status": {"conditions": initialized.data["status"]["conditions"]}});
    let written = write(cluster, &name, &node_name, node_patch, status);
    if written {
        cluster.initialized(&name);
        let provider_id = claims::provider_id_of(claim).unwrap_or_default();
        tracing::info!(nodeclaim = %name, node = %node_name, provider_id, "initialized nodeclaim");
    }
    written
}

fn write(
    cluster: &mut KubeCluster,
    claim: &str,
    node: &str,
    node_patch: Value,
    status: Value,
) -> bool {
    if !cluster.leads("nodeclaim lifecycle") {
        return false;
    }
    let nodes: Api<Node> = Api::all(cluster.client().clone());
    let claims: Api<DynamicObject> =
        Api::all_with(cluster.client().clone(), &karpenter_resource("NodeClaim"));
    let params = PatchParams::default();
    let result = cluster.handle().block_on(async {
        nodes
            .patch(node, &params, &Patch::Merge(&node_patch))
            .await?;
        claims
            .patch_status(claim, &params, &Patch::Merge(&status))
            .await
    });
    match result {
        Ok(_) => true,
        Err(e) => {
            cluster.writes.errors += 1;
            tracing::warn!(claim, node, error = %e, "nodeclaim lifecycle write failed, retrying next step");
            false
        }
    }
}

/// Nodes with joiner's finalizer that someone deleted (directly or through their NodeClaim):
/// tainted, then drained as Karpenter's terminator drains (see [`terminator`]).
fn terminating(cluster: &mut KubeCluster, now: Timestamp) -> Vec<Terminating> {
    let claims = cluster.caches().node_claims();
    let mut out = Vec::new();
    for entry in cluster.caches().nodes.state() {
        let node = &entry.value.object;
        let name = node.metadata.name.clone().unwrap_or_default();
        let claim = claims
            .iter()
            .find(|c| claims::node_name_of(c) == Some(&name));
        let deleting_node =
            node.metadata.deletion_timestamp.is_some() && has_finalizer(&node.metadata);
        // once joiner's finalizer is off, what is left is another controller's to finish
        let deleting_claim = claim
            .is_some_and(|c| c.metadata.deletion_timestamp.is_some() && has_finalizer(&c.metadata));
        if !deleting_node && !deleting_claim {
            continue;
        }
        let since = node
            .metadata
            .deletion_timestamp
            .as_ref()
            .or(claim.and_then(|c| c.metadata.deletion_timestamp.as_ref()));
        let since = since
            .and_then(|t| parse_timestamp(&t.0.to_string()).ok())
            .unwrap_or(now);
        let forced = claim
            .and_then(|c| grace_end(c, since))
            .is_some_and(|end| now >= end);
        taint(cluster, node);
        let drained = terminator::drain(cluster, &name, forced, now) == Drain::Drained
            && volumes::await_detachment(cluster, &name, claim.map(|c| &**c), forced, false, now)
                .may_terminate();
        out.push(Terminating {
            node: name,
            provider_id: node.spec.as_ref().and_then(|s| s.provider_id.clone()),
            drained,
        });
    }
    out
}

/// Whether a node a disruption command drains holds no pod any more: evicted pods are gone or
/// past their grace period. DaemonSet pods stay until the instance goes: the command does not
/// evict them, and the disrupted taint keeps their controller from replacing them elsewhere.
/// Its VolumeAttachments are waited for as a deleted node's are: the claim's terminationGracePeriod
/// runs from the drain's first step, recorded on the claim as Karpenter records it.
pub fn disruption_drained(cluster: &mut KubeCluster, node: &str, now: Timestamp) -> bool {
    let claim = cluster
        .caches()
        .node_claims()
        .into_iter()
        .find(|c| claims::node_name_of(c) == Some(node));
    let end = claim.as_ref().and_then(|c| grace_end(c, now));
    if let (Some(c), Some(end)) = (&claim, end) {
        annotate_grace_end(cluster, c, end);
    }
    if terminator::holding(cluster, node, now, false) != Some(0) {
        return false;
    }
    let grace_over = end.is_some_and(|end| now >= end);
    volumes::await_detachment(cluster, node, claim.as_deref(), grace_over, true, now)
        .may_terminate()
}

/// When the claim's terminationGracePeriod ends: Karpenter's annotation when present, else
/// `since` plus the claim's grace; None without a grace.
fn grace_end(claim: &DynamicObject, since: Timestamp) -> Option<Timestamp> {
    let annotated = claim
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(GRACE_END_ANNOTATION))
        .and_then(|t| parse_timestamp(t).ok());
    annotated.or_else(|| {
        let grace = claim.data["spec"]["terminationGracePeriod"].as_str()?;
        let grace = chrono::Duration::from_std(parse_go_duration(grace).ok()?).ok()?;
        Some(since + grace)
    })
}

/// Records the end of the claim's grace on it once, so another replica or a restart keeps it.
/// The patch carries the cached resourceVersion: a cache that has not seen the annotation yet
/// fails with a conflict rather than moving the end later.
fn annotate_grace_end(cluster: &mut KubeCluster, claim: &DynamicObject, end: Timestamp) {
    let annotated = claim
        .metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(GRACE_END_ANNOTATION));
    if annotated || !cluster.leads("termination grace annotation") {
        return;
    }
    let name = claim.metadata.name.clone().unwrap_or_default();
    let end = end.to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let patch = json!({"metadata": {
        "resourceVersion": claim.metadata.resource_version,
        "annotations": {GRACE_END_ANNOTATION: end},
    }});
    let api: Api<DynamicObject> =
        Api::all_with(cluster.client().clone(), &karpenter_resource("NodeClaim"));
    let (params, patch) = (PatchParams::default(), Patch::Merge(&patch));
    let sent = api.patch(&name, &params, &patch);
    match cluster.handle().block_on(sent) {
        Ok(_) => tracing::info!(claim = %name, end = %end, "termination grace end recorded"),
        Err(kube::Error::Api(e)) if e.code == 409 => {}
        Err(e) => {
            cluster.writes.errors += 1;
            tracing::warn!(claim = %name, error = %e, "termination grace end not recorded");
        }
    }
}

/// Puts the `karpenter.sh/disrupted:NoSchedule` taint on a node that lacks it.
fn taint(cluster: &mut KubeCluster, node: &Node) {
    let tainted = node
        .spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .is_some_and(|ts| ts.iter().any(|t| t.key == DISRUPTED_TAINT));
    if !tainted {
        let name = node.metadata.name.clone().unwrap_or_default();
        cluster.set_disrupted(&name, true);
    }
}

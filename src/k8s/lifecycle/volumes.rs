//! Waiting for a drained node's volumes to detach before its instance goes, as Karpenter's
//! terminator does: terminating an instance whose EBS volumes are still attached leaves them
//! attached until EC2 forces them off, and the pods that moved meanwhile fail with Multi-Attach
//! errors. The attach/detach controller deletes a node's VolumeAttachments once the pods using
//! them are gone; joiner waits for that.
//!
//! The VolumeAttachments that hold a node are those naming it in `spec.nodeName` and a
//! PersistentVolume in `spec.source`, except the ones whose volume a pod left on the node uses
//! (through a PersistentVolumeClaim or a generic ephemeral volume's claim): such a pod is never
//! drained (it tolerates the disrupted taint, is a static pod's mirror, has been terminating a
//! minute past its grace, or is a DaemonSet pod a disruption command leaves), so its volume
//! detaches only after the instance has gone. The wait ends once none is left, or once the
//! NodeClaim's terminationGracePeriod is over; the claim's `VolumesDetached` condition says which
//! (True; Unknown with `AwaitingVolumeDetachment` while waiting; False with
//! `TerminationGracePeriodElapsed` when the grace cut the wait short).
//!
//! The API server selects VolumeAttachments by name only, so all of them are listed and picked
//! by node here.
//!
//! Each wait that ends is measured ([`wait_metrics`]): its seconds from the condition turning
//! Unknown, and whether terminationGracePeriod cut it short.

use std::collections::BTreeSet;
use std::sync::LazyLock;

use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::VolumeAttachment;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use serde_json::json;

use super::super::caches::karpenter_resource;
use super::super::claims::{self, conditions_of};
use super::super::cluster::KubeCluster;
use super::terminator;
use crate::api::NODECLAIM_VOLUMES_DETACHED;
use crate::disruption::timing::parse_timestamp;

/// How long past its grace a terminating pod is waited for before it counts as stuck
/// (Karpenter's buffer for the kubelet to finish it).
const STUCK_AFTER_SECONDS: i64 = 60;

/// Seconds each ended wait lasted: buckets from 1 s to about 2 hours (a terminationGracePeriod
/// can be that long).
static WAIT_SECONDS: LazyLock<Histogram> =
    LazyLock::new(|| Histogram::new(exponential_buckets(1.0, 2.0, 14)));
/// Waits terminationGracePeriod cut short, the instance terminated with volumes attached.
static WAITS_CUT: LazyLock<Counter> = LazyLock::new(Default::default);

/// The wait's measures since the process started, for the metrics registry: one per process, as
/// the terminations of every step of the one decision thread feed them.
pub fn wait_metrics() -> (Histogram, Counter) {
    (WAIT_SECONDS.clone(), WAITS_CUT.clone())
}

/// Where a drained node's volumes stand; the `VolumesDetached` condition reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Volumes {
    /// No VolumeAttachment holds the node: the instance may go.
    Detached,
    /// These VolumeAttachments still hold the node.
    Awaiting(Vec<String>),
    /// These still hold it, but terminationGracePeriod is over: the instance goes regardless.
    GraceElapsed(Vec<String>),
    /// The VolumeAttachments or the claims of the pods left could not be read, or the claim's
    /// condition not written: tried again next step.
    Unknown,
}

impl Volumes {
    /// Whether the instance may be terminated now.
    pub fn may_terminate(&self) -> bool {
        matches!(self, Volumes::Detached | Volumes::GraceElapsed(_))
    }

    /// The condition's status and reason, when the state is known.
    fn condition(&self) -> Option<(&'static str, &'static str)> {
        match self {
            Volumes::Detached => Some(("True", NODECLAIM_VOLUMES_DETACHED)),
            Volumes::Awaiting(_) => Some(("Unknown", "AwaitingVolumeDetachment")),
            Volumes::GraceElapsed(_) => Some(("False", "TerminationGracePeriodElapsed")),
            Volumes::Unknown => None,
        }
    }
}

/// Checks `node`'s VolumeAttachments and records the outcome on its claim. `grace_over` once the
/// claim's terminationGracePeriod has passed; `daemons_left` when the drain leaves DaemonSet pods
/// in place (a disruption command's drain).
pub fn await_detachment(
    cluster: &mut KubeCluster,
    node: &str,
    claim: Option<&DynamicObject>,
    grace_over: bool,
    daemons_left: bool,
    now: DateTime<Utc>,
) -> Volumes {
    let volumes = match pending(cluster, node, daemons_left, now) {
        None if grace_over => Volumes::GraceElapsed(vec![]),
        None => Volumes::Unknown,
        Some(p) if p.is_empty() => Volumes::Detached,
        Some(p) if grace_over => Volumes::GraceElapsed(p),
        Some(p) => Volumes::Awaiting(p),
    };
    let Some(claim) = claim else {
        return volumes;
    };
    match record(cluster, claim, &volumes, now) {
        Recorded::Unchanged => volumes,
        // as Karpenter, the instance goes only once the claim says why
        Recorded::Failed => Volumes::Unknown,
        Recorded::Written => {
            match &volumes {
                Volumes::Awaiting(p) => {
                    tracing::info!(node, attachments = ?p, "awaiting volume detachment")
                }
                Volumes::GraceElapsed(p) => tracing::warn!(
                    node,
                    attachments = ?p,
                    "terminationGracePeriod elapsed with volumes attached, terminating"
                ),
                _ => tracing::info!(node, "volumes detached"),
            }
            volumes
        }
    }
}

/// What became of the claim's condition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Recorded {
    Unchanged,
    Written,
    Failed,
}

/// The names of the VolumeAttachments holding `node`; None when something could not be read.
fn pending(
    cluster: &KubeCluster,
    node: &str,
    daemons_left: bool,
    now: DateTime<Utc>,
) -> Option<Vec<String>> {
    let api: Api<VolumeAttachment> = Api::all(cluster.client().clone());
    let all = match cluster.handle().block_on(api.list(&ListParams::default())) {
        Ok(list) => list.items,
        Err(e) => {
            tracing::warn!(node, error = %e, "volume attachments not listed");
            return None;
        }
    };
    let on_node: Vec<(String, String)> = all
        .into_iter()
        .filter(|va| va.spec.node_name == node)
        .filter_map(|va| {
            let pv = va.spec.source.persistent_volume_name?;
            Some((va.metadata.name.unwrap_or_default(), pv))
        })
        .collect();
    if on_node.is_empty() {
        return Some(vec![]);
    }
    let left = volumes_of_pods_left(cluster, node, daemons_left, now)?;
    Some(
        on_node
            .into_iter()
            .filter(|(_, pv)| !left.contains(pv))
            .map(|(name, _)| name)
            .collect(),
    )
}

/// The PersistentVolumes the pods left on `node` use; None when they cannot be read.
fn volumes_of_pods_left(
    cluster: &KubeCluster,
    node: &str,
    daemons_left: bool,
    now: DateTime<Utc>,
) -> Option<BTreeSet<String>> {
    let pods = terminator::pods_on(cluster, node)?;
    let mut out = BTreeSet::new();
    for pod in pods.iter().filter(|p| left(p, daemons_left, now)) {
        let ns = pod.metadata.namespace.as_deref().unwrap_or_default();
        for claim in claim_names(pod) {
            if let Some(pv) = bound_volume(cluster, ns, &claim)? {
                out.insert(pv);
            }
        }
    }
    Some(out)
}

/// A pod the drain does not take off the node (Karpenter's not drainable).
fn left(pod: &Pod, daemons_left: bool, now: DateTime<Utc>) -> bool {
    let stuck = pod
        .metadata
        .deletion_timestamp
        .as_ref()
        .and_then(|t| parse_timestamp(&t.0.to_string()).ok())
        .is_some_and(|d| (now - d).num_seconds() > STUCK_AFTER_SECONDS);
    terminator::tolerates_disrupted(pod)
        || terminator::mirror(pod)
        || stuck
        || (daemons_left && terminator::daemon(pod))
}

/// The PersistentVolumeClaims a pod's volumes name, a generic ephemeral volume's by the name
/// Kubernetes gives it (`<pod>-<volume>`).
fn claim_names(pod: &Pod) -> Vec<String> {
    let pod_name = pod.metadata.name.as_deref().unwrap_or_default();
    let volumes = pod.spec.as_ref().and_then(|s| s.volumes.as_ref());
    volumes
        .into_iter()
        .flatten()
        .filter_map(|v| match (&v.persistent_volume_claim, &v.ephemeral) {
            (Some(c), _) => Some(c.claim_name.clone()),
            (None, Some(_)) => Some(format!("{pod_name}-{}", v.name)),
            (None, None) => None,
        })
        .collect()
}

/// The volume a claim is bound to: Some(None) when the claim is missing or unbound, None when it
/// cannot be read. Read with a list by name, the verb joiner's role has on claims.
fn bound_volume(cluster: &KubeCluster, ns: &str, claim: &str) -> Option<Option<String>> {
    let api: Api<PersistentVolumeClaim> = Api::namespaced(cluster.client().clone(), ns);
    let by_name = ListParams::default().fields(&format!("metadata.name={claim}"));
    match cluster.handle().block_on(api.list(&by_name)) {
        Ok(list) => Some(
            list.items
                .into_iter()
                .find_map(|c| c.spec.and_then(|s| s.volume_name))
                .filter(|v| !v.is_empty()),
        ),
        Err(e) => {
            tracing::warn!(claim = %format!("{ns}/{claim}"), error = %e, "claim not read");
            None
        }
    }
}

/// Writes the claim's `VolumesDetached` condition when it changes. The patch carries the cached
/// resourceVersion: a stale cache loses to a newer write and is tried again next step, rather
/// than writing an old condition list over it.
fn record(
    cluster: &mut KubeCluster,
    claim: &DynamicObject,
    volumes: &Volumes,
    now: DateTime<Utc>,
) -> Recorded {
    let Some((status, reason)) = volumes.condition() else {
        return Recorded::Unchanged;
    };
    let mut conditions = conditions_of(claim);
    let waiting_since = conditions
        .iter()
        .find(|c| c.type_ == NODECLAIM_VOLUMES_DETACHED && c.status == "Unknown")
        .and_then(|c| parse_timestamp(&c.last_transition_time.0.to_string()).ok());
    if !set(&mut conditions, status, reason, now) {
        return Recorded::Unchanged;
    }
    if !cluster.leads("volumes detached") {
        return Recorded::Failed;
    }
    let name = claim.metadata.name.clone().unwrap_or_default();
    let api: Api<DynamicObject> =
        Api::all_with(cluster.client().clone(), &karpenter_resource("NodeClaim"));
    let patch = json!({
        "metadata": {"resourceVersion": claim.metadata.resource_version},
        "status": {"conditions": conditions},
    });
    let (params, patch) = (PatchParams::default(), Patch::Merge(&patch));
    let sent = api.patch_status(&name, &params, &patch);
    match cluster.handle().block_on(sent) {
        Ok(_) => {
            measure(volumes, waiting_since, now);
            Recorded::Written
        }
        Err(e) => {
            tracing::debug!(claim = %name, error = %e, "VolumesDetached not written, retrying");
            Recorded::Failed
        }
    }
}

/// Observes a wait that ended (detached, or cut by the grace) into [`wait_metrics`]; a wait that
/// never started (nothing attached at the first look) is not one.
fn measure(volumes: &Volumes, waiting_since: Option<DateTime<Utc>>, now: DateTime<Utc>) {
    if !matches!(volumes, Volumes::Detached | Volumes::GraceElapsed(_)) {
        return;
    }
    if let Some(since) = waiting_since {
        WAIT_SECONDS.observe((now - since).num_milliseconds().max(0) as f64 / 1000.0);
    }
    if matches!(volumes, Volumes::GraceElapsed(_)) {
        WAITS_CUT.inc();
    }
}

/// Sets the condition (its transition time moves only when the status flips); whether it changed.
fn set(conditions: &mut Vec<Condition>, status: &str, reason: &str, now: DateTime<Utc>) -> bool {
    let at = claims::k8s_time(now);
    match conditions
        .iter_mut()
        .find(|c| c.type_ == NODECLAIM_VOLUMES_DETACHED)
    {
        Some(c) if c.status == status && c.reason == reason => false,
        Some(c) => {
            if c.status != status {
                c.last_transition_time = at;
            }
            c.status = status.to_string();
            c.reason = reason.to_string();
            c.message = reason.to_string();
            true
        }
        None => {
            conditions.push(Condition {
                type_: NODECLAIM_VOLUMES_DETACHED.to_string(),
                status: status.to_string(),
                reason: reason.to_string(),
                message: reason.to_string(),
                last_transition_time: at,
                observed_generation: None,
            });
            true
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(v: serde_json::Value) -> Pod {
        serde_json::from_value(v).unwrap()
    }

    fn at(s: &str) -> DateTime<Utc> {
        parse_timestamp(s).unwrap()
    }

    #[test]
    fn claims_of_a_pod_include_generic_ephemeral_ones_by_their_generated_name() {
        let p = pod(
            json!({"metadata": {"name": "db-0"}, "spec": {"containers": [], "volumes": [
                {"name": "data", "persistentVolumeClaim": {"claimName": "data-db-0"}},
                {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}},
                {"name": "config", "configMap": {"name": "c"}},
            ]}}),
        );
        assert_eq!(claim_names(&p), ["data-db-0", "db-0-scratch"]);
    }

    #[test]
    fn pods_left_on_the_node_are_the_undrainable_ones() {
        let now = at("2026-01-01T00:10:00Z");
        let plain = pod(json!({"metadata": {"name": "a"}, "spec": {"containers": []}}));
        assert!(!left(&plain, true, now));
        let tolerant = pod(json!({"metadata": {"name": "a"}, "spec": {"containers": [],
            "tolerations": [{"key": "karpenter.sh/disrupted", "operator": "Exists"}]}}));
        assert!(left(&tolerant, false, now));
        let daemon = pod(json!({"metadata": {"name": "a", "ownerReferences": [
            {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "d", "uid": "u"}]},
            "spec": {"containers": []}}));
        assert!(left(&daemon, true, now));
        assert!(!left(&daemon, false, now));
        let ending = |ts: &str| {
            pod(json!({"metadata": {"name": "a", "deletionTimestamp": ts},
                "spec": {"containers": []}}))
        };
        // within a minute past its grace the kubelet may still finish it
        assert!(!left(&ending("2026-01-01T00:09:30Z"), false, now));
        assert!(left(&ending("2026-01-01T00:08:30Z"), false, now));
    }

    #[test]
    fn the_condition_moves_its_transition_time_only_when_the_status_flips() {
        let mut cs = vec![];
        let t0 = at("2026-01-01T00:00:00Z");
        let t1 = at("2026-01-01T00:00:05Z");
        assert!(set(&mut cs, "Unknown", "AwaitingVolumeDetachment", t0));
        assert!(!set(&mut cs, "Unknown", "AwaitingVolumeDetachment", t1));
        assert!(set(&mut cs, "True", NODECLAIM_VOLUMES_DETACHED, t1));
        assert_eq!(cs.len(), 1);
        assert_eq!(cs[0].status, "True");
        assert_eq!(cs[0].last_transition_time, claims::k8s_time(t1));
    }

    /// The histogram's sample count, as the registry serves it.
    fn observed(h: &Histogram) -> u64 {
        let mut registry = prometheus_client::registry::Registry::default();
        registry.register("wait", "wait", h.clone());
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        text.lines()
            .find_map(|l| l.strip_prefix("wait_count "))
            .and_then(|v| v.trim().parse().ok())
            .unwrap()
    }

    #[test]
    fn an_ended_wait_is_measured_and_a_cut_one_counted() {
        let (seconds, cut) = wait_metrics();
        let (count, cuts) = (observed(&seconds), cut.get());
        let t0 = at("2026-01-01T00:00:00Z");
        let t1 = at("2026-01-01T00:00:12Z");
        measure(&Volumes::Awaiting(vec!["va".into()]), Some(t0), t1);
        assert_eq!(observed(&seconds), count, "still waiting");
        measure(&Volumes::Detached, None, t1);
        assert_eq!(observed(&seconds), count, "nothing was ever awaited");
        measure(&Volumes::Detached, Some(t0), t1);
        measure(&Volumes::GraceElapsed(vec!["va".into()]), Some(t0), t1);
        assert_eq!(observed(&seconds), count + 2);
        assert_eq!(cut.get(), cuts + 1);
    }

    #[test]
    fn only_detached_or_an_elapsed_grace_lets_the_instance_go() {
        assert!(Volumes::Detached.may_terminate());
        assert!(Volumes::GraceElapsed(vec!["a".into()]).may_terminate());
        assert!(!Volumes::Awaiting(vec!["a".into()]).may_terminate());
        assert!(!Volumes::Unknown.may_terminate());
    }
}

//! Pods' graceful deletion and the node-side controllers that finish it, run in-process against
//! the store:
//!
//! - **Graceful deletion** (the pod registry's rules): deleting a pod bound to a node marks it
//!   with `deletionTimestamp` = now + its grace period (the delete's `gracePeriodSeconds`, else
//!   `spec.terminationGracePeriodSeconds`, else Kubernetes' default of 30 s) and keeps it; a later
//!   delete may shorten the grace, never lengthen it; a grace of 0 removes it (a force delete).
//!   Unbound and finished pods go at once, as on the real server.
//! - **The kubelet**: once a terminating pod's containers have exited it deletes the pod with a
//!   grace of 0. A container exits after the seconds in the pod's `SHUTDOWN_ANNOTATION` (its
//!   preStop hook and SIGTERM handling; `ApiServer::set_pod_shutdown`'s when absent, at first 0),
//!   and never later than the grace period
//!   (SIGKILL). A node whose kubelet is dead (`ApiServer::kill_kubelet`) never finishes its pods.
//! - **The pod garbage collector**: a pod bound to a Node that no longer exists is removed
//!   (force-deleted; the real collector waits out a short quarantine first).

use std::collections::BTreeSet;

use chrono::{DateTime, Duration, SecondsFormat, Utc};
use serde_json::{json, Value};

use super::resources::{by_path, ResourceInfo};
use super::select::{FieldSelector, LabelSelector};
use super::store::{finalizers, is_deleting, obj_name, obj_ns, State};

/// How long a pod's containers take to exit after SIGTERM, in seconds (preStop included).
pub const SHUTDOWN_ANNOTATION: &str = "apiserver.test/shutdown-seconds";

/// The pod registry's default `terminationGracePeriodSeconds`.
const DEFAULT_GRACE: i64 = 30;

pub fn pods() -> &'static ResourceInfo {
    by_path("", "v1", "pods").expect("pods are served")
}

pub fn nodes() -> &'static ResourceInfo {
    by_path("", "v1", "nodes").expect("nodes are served")
}

/// The grace period a delete of `pod` with DeleteOptions `opts` gets: 0 (removed at once, finalizers
/// permitting) for unbound and finished pods, and for pods whose Node does not exist (the pod
/// garbage collector would force-delete them); otherwise the requested or the pod's own grace.
pub fn grace_period(state: &State, pod: &Value, opts: &Value) -> i64 {
    let node = pod["spec"]["nodeName"].as_str().unwrap_or_default();
    let finished = matches!(
        pod["status"]["phase"].as_str(),
        Some("Succeeded" | "Failed")
    );
    if node.is_empty() || finished || !state.contains(nodes(), "", node) {
        return 0;
    }
    opts["gracePeriodSeconds"]
        .as_i64()
        .or_else(|| pod["spec"]["terminationGracePeriodSeconds"].as_i64())
        .unwrap_or(DEFAULT_GRACE)
        .max(0)
}

/// Whether a delete with `grace` changes an already terminating pod: only a shorter deadline does.
pub fn shortens(pod: &Value, grace: i64, now: DateTime<Utc>) -> bool {
    match deletion_deadline(pod) {
        Some(deadline) => now + Duration::seconds(grace) < deadline,
        None => true,
    }
}

/// The pod as marked by a graceful delete at `now`.
pub fn mark(pod: &Value, grace: i64, now: DateTime<Utc>) -> Value {
    let mut marked = pod.clone();
    let deadline = now + Duration::seconds(grace);
    marked["metadata"]["deletionTimestamp"] =
        json!(deadline.to_rfc3339_opts(SecondsFormat::Secs, true));
    marked["metadata"]["deletionGracePeriodSeconds"] = json!(grace);
    marked
}

fn deletion_deadline(pod: &Value) -> Option<DateTime<Utc>> {
    let ts = pod["metadata"]["deletionTimestamp"].as_str()?;
    DateTime::parse_from_rfc3339(ts)
        .ok()
        .map(|t| t.with_timezone(&Utc))
}

/// When a terminating pod's containers have exited: its shutdown time after deletion began, capped
/// by the grace period.
fn exit_time(pod: &Value, default_shutdown: f64) -> Option<DateTime<Utc>> {
    let deadline = deletion_deadline(pod)?;
    let grace = pod["metadata"]["deletionGracePeriodSeconds"]
        .as_i64()
        .unwrap_or(0);
    let shutdown = pod["metadata"]["annotations"][SHUTDOWN_ANNOTATION]
        .as_str()
        .and_then(|s| s.parse::<f64>().ok())
        .unwrap_or(default_shutdown);
    let started = deadline - Duration::seconds(grace);
    let exits = started + Duration::milliseconds((shutdown * 1000.0) as i64);
    Some(exits.min(deadline))
}

/// One pass of the kubelets and the pod garbage collector at `now`; pods without the shutdown
/// annotation take `default_shutdown` seconds to exit.
pub fn tick(state: &mut State, dead: &BTreeSet<String>, default_shutdown: f64, now: DateTime<Utc>) {
    let all = FieldSelector::default();
    let existing: BTreeSet<String> = state
        .select(nodes(), None, &LabelSelector::default(), &all)
        .iter()
        .map(|n| obj_name(n).to_string())
        .collect();
    let bound = state.select(pods(), None, &LabelSelector::default(), &all);
    for pod in bound {
        let node = pod["spec"]["nodeName"].as_str().unwrap_or_default();
        if node.is_empty() {
            continue;
        }
        let orphaned = !existing.contains(node);
        let exited = is_deleting(&pod)
            && !dead.contains(node)
            && exit_time(&pod, default_shutdown).is_some_and(|t| t <= now);
        if (orphaned || exited) && finalizers(&pod).is_empty() {
            let (ns, name) = (obj_ns(&pod).to_string(), obj_name(&pod).to_string());
            let _ = state.delete(pods(), &ns, &name, &json!({"gracePeriodSeconds": 0}));
        }
    }
}

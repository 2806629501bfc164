//! Lifecycle invariants checked on the test API server's change feed (`ApiServer::subscribe`),
//! change by change in resourceVersion order:
//!
//! - **grace periods honoured**: a Node is removed (its instance terminated) only once every pod
//!   bound to it that holds it (not a DaemonSet or mirror pod, not finished) is gone or past the
//!   end of its grace period (`deletionTimestamp`).
//! - **other controllers' finalizers kept**: no change to a Node or NodeClaim drops a finalizer
//!   other than `karpenter.sh/termination`.
//! - **volumes detached first**: joiner takes its finalizer off a Node (it does that right after
//!   terminating the instance, in moto or the simulated cloud alike) only once no
//!   VolumeAttachment on the node is left, unless its NodeClaim's terminationGracePeriod is over
//!   (Karpenter's annotation, else the node's or claim's deletion plus the claim's grace). As
//!   Karpenter, attachments of a volume a pod left on the node uses do not count: DaemonSet and
//!   mirror pods, pods tolerating `karpenter.sh/disrupted`, pods a minute past their grace.
//!
//! Findings are kept as violation strings; a test asserts there are none.
#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use chrono::{DateTime, Utc};
use serde_json::Value;
use tokio::sync::broadcast::error::RecvError;

use super::apiserver::{ApiServer, Change, ChangeKind, RESOURCES};

const JOINERS_FINALIZER: &str = "karpenter.sh/termination";

#[derive(Debug, Clone)]
struct PodState {
    node: String,
    /// The end of its grace period, once deletion started.
    deadline: Option<DateTime<Utc>>,
    /// Whether it holds its node (not a DaemonSet or mirror pod, not finished).
    holds: bool,
    /// A DaemonSet or mirror pod, or one tolerating the disrupted taint: a drain may leave it.
    may_stay: bool,
    /// Its claims, `namespace/name`.
    claims: Vec<String>,
}

/// What the volume check needs of a NodeClaim.
#[derive(Debug, Clone, Default)]
struct ClaimState {
    node: String,
    deleted: Option<DateTime<Utc>>,
    grace: Option<chrono::Duration>,
    /// Karpenter's `karpenter.sh/nodeclaim-termination-timestamp`.
    grace_end: Option<DateTime<Utc>>,
}

#[derive(Debug, Default)]
struct Record {
    pods: BTreeMap<String, PodState>,
    /// Claim `namespace/name` -> its PersistentVolume.
    volumes: BTreeMap<String, String>,
    /// VolumeAttachment -> (node, PersistentVolume).
    attachments: BTreeMap<String, (String, String)>,
    claims: BTreeMap<String, ClaimState>,
    /// Node -> its deletionTimestamp.
    node_deleted: BTreeMap<String, DateTime<Utc>>,
    violations: Vec<String>,
    nodes_removed: usize,
    nodes_released: usize,
    released_with_volumes_after_grace: usize,
}

pub struct Invariants {
    record: Arc<Mutex<Record>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Invariants {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Invariants {
    /// Checks every change from now on, starting from the objects that exist.
    pub fn start(server: &ApiServer) -> Invariants {
        let mut feed = server.subscribe();
        let record = Arc::new(Mutex::new(Record::default()));
        record.lock().unwrap().seed(server);
        let r = record.clone();
        let task = tokio::spawn(async move {
            loop {
                match feed.recv().await {
                    Ok(change) => r.lock().unwrap().apply(&change),
                    Err(RecvError::Lagged(n)) => r
                        .lock()
                        .unwrap()
                        .violations
                        .push(format!("the checker missed {n} changes")),
                    Err(RecvError::Closed) => return,
                }
            }
        });
        Invariants { record, task }
    }

    pub fn violations(&self) -> Vec<String> {
        self.record.lock().unwrap().violations.clone()
    }

    /// Nodes removed while checking (so a test can tell the invariant was exercised).
    pub fn nodes_removed(&self) -> usize {
        self.record.lock().unwrap().nodes_removed
    }

    /// Nodes joiner released (took its finalizer off) while checking.
    pub fn nodes_released(&self) -> usize {
        self.record.lock().unwrap().nodes_released
    }

    /// Nodes released with VolumeAttachments left because terminationGracePeriod was over.
    pub fn released_with_volumes_after_grace(&self) -> usize {
        self.record
            .lock()
            .unwrap()
            .released_with_volumes_after_grace
    }
}

fn key_of(o: &Value) -> String {
    format!(
        "{}/{}",
        o["metadata"]["namespace"].as_str().unwrap_or_default(),
        o["metadata"]["name"].as_str().unwrap_or_default()
    )
}

fn finalizers(o: &Value) -> Vec<String> {
    o["metadata"]["finalizers"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|f| f.as_str().map(str::to_string))
        .collect()
}

fn deadline(o: &Value) -> Option<DateTime<Utc>> {
    time(&o["metadata"]["deletionTimestamp"])
}

fn time(v: &Value) -> Option<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(v.as_str()?)
        .ok()
        .map(|t| t.with_timezone(&Utc))
}

fn may_stay(o: &Value) -> bool {
    let daemon = o["metadata"]["ownerReferences"]
        .as_array()
        .is_some_and(|os| os.iter().any(|r| r["kind"] == "DaemonSet"));
    let mirror = !o["metadata"]["annotations"]["kubernetes.io/config.mirror"].is_null();
    let tolerates = o["spec"]["tolerations"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|t| {
            let key = t["key"].as_str().unwrap_or_default();
            let effect = t["effect"].as_str().unwrap_or_default();
            (key.is_empty() && t["operator"] == "Exists" || key == "karpenter.sh/disrupted")
                && (effect.is_empty() || effect == "NoSchedule")
        });
    daemon || mirror || tolerates
}

fn pod_claims(o: &Value) -> Vec<String> {
    let ns = o["metadata"]["namespace"].as_str().unwrap_or_default();
    let pod = o["metadata"]["name"].as_str().unwrap_or_default();
    o["spec"]["volumes"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|v| match v["persistentVolumeClaim"]["claimName"].as_str() {
            Some(c) => Some(format!("{ns}/{c}")),
            None if v["ephemeral"].is_object() => Some(format!(
                "{ns}/{pod}-{}",
                v["name"].as_str().unwrap_or_default()
            )),
            None => None,
        })
        .collect()
}

fn claim_state(o: &Value) -> ClaimState {
    let grace = o["spec"]["terminationGracePeriod"]
        .as_str()
        .and_then(|g| joiner::disruption::timing::parse_go_duration(g).ok())
        .and_then(|g| chrono::Duration::from_std(g).ok());
    ClaimState {
        node: o["status"]["nodeName"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
        deleted: deadline(o),
        grace,
        grace_end: time(
            &o["metadata"]["annotations"]["karpenter.sh/nodeclaim-termination-timestamp"],
        ),
    }
}

fn holds(o: &Value) -> bool {
    let daemon = o["metadata"]["ownerReferences"]
        .as_array()
        .is_some_and(|os| os.iter().any(|r| r["kind"] == "DaemonSet"));
    let mirror = !o["metadata"]["annotations"]["kubernetes.io/config.mirror"].is_null();
    let finished = matches!(o["status"]["phase"].as_str(), Some("Succeeded" | "Failed"));
    !daemon && !mirror && !finished
}

impl Record {
    /// Takes in the objects the checks need as they are now (later changes follow on the feed).
    fn seed(&mut self, server: &ApiServer) {
        let kinds = [
            "nodes",
            "pods",
            "persistentvolumeclaims",
            "volumeattachments.storage.k8s.io",
            "nodeclaims.karpenter.sh",
        ];
        for name in kinds {
            let Some(resource) = RESOURCES.iter().find(|r| r.qualified() == name) else {
                continue;
            };
            for object in server.list(name, None, "").unwrap_or_default() {
                let added = Change {
                    rv: 0,
                    kind: ChangeKind::Added,
                    resource,
                    object,
                    old: None,
                };
                self.apply(&added);
            }
        }
    }

    fn apply(&mut self, c: &Change) {
        let o = &c.object;
        if matches!(c.resource.plural, "nodes" | "nodeclaims") {
            self.finalizers_kept(c);
        }
        match (c.resource.plural, c.kind) {
            ("pods", ChangeKind::Deleted) => {
                self.pods.remove(&key_of(o));
            }
            ("pods", _) => {
                let node = o["spec"]["nodeName"].as_str().unwrap_or_default();
                if !node.is_empty() {
                    let state = PodState {
                        node: node.to_string(),
                        deadline: deadline(o),
                        holds: holds(o),
                        may_stay: may_stay(o),
                        claims: pod_claims(o),
                    };
                    self.pods.insert(key_of(o), state);
                }
            }
            ("persistentvolumeclaims", ChangeKind::Deleted) => {
                self.volumes.remove(&key_of(o));
            }
            ("persistentvolumeclaims", _) => {
                if let Some(pv) = o["spec"]["volumeName"].as_str() {
                    self.volumes.insert(key_of(o), pv.to_string());
                }
            }
            ("volumeattachments", ChangeKind::Deleted) => {
                self.attachments.remove(&key_of(o));
            }
            ("volumeattachments", _) => {
                let node = o["spec"]["nodeName"].as_str().unwrap_or_default();
                let pv = o["spec"]["source"]["persistentVolumeName"]
                    .as_str()
                    .unwrap_or_default();
                self.attachments
                    .insert(key_of(o), (node.to_string(), pv.to_string()));
            }
            // a claim's last state is kept: joiner deletes it just before it releases the node
            ("nodeclaims", _) => {
                self.claims.insert(key_of(o), claim_state(o));
            }
            _ => {}
        }
        if c.resource.plural == "nodes" {
            self.node_changed(c);
        }
    }

    fn node_changed(&mut self, c: &Change) {
        let o = &c.object;
        let name = o["metadata"]["name"].as_str().unwrap_or_default();
        if let Some(t) = deadline(o) {
            self.node_deleted.insert(name.to_string(), t);
        }
        let had = c
            .old
            .as_ref()
            .is_some_and(|old| finalizers(old).iter().any(|f| f == JOINERS_FINALIZER));
        let has =
            c.kind != ChangeKind::Deleted && finalizers(o).iter().any(|f| f == JOINERS_FINALIZER);
        if had && !has {
            self.node_released(name);
        }
        if c.kind == ChangeKind::Deleted {
            self.node_removed(o);
            self.node_deleted.remove(name);
        }
    }

    /// Joiner has terminated `name`'s instance: no VolumeAttachment may hold the node, unless the
    /// claim's terminationGracePeriod is over.
    fn node_released(&mut self, name: &str) {
        self.nodes_released += 1;
        let now = Utc::now();
        let left: BTreeSet<&String> = self
            .pods
            .values()
            .filter(|p| p.node == name)
            .filter(|p| {
                p.may_stay
                    || p.deadline
                        .is_some_and(|d| now - d > chrono::Duration::minutes(1))
            })
            .flat_map(|p| &p.claims)
            .filter_map(|c| self.volumes.get(c))
            .collect();
        let attached: Vec<String> = self
            .attachments
            .iter()
            .filter(|(_, (node, pv))| node == name && !pv.is_empty() && !left.contains(pv))
            .map(|(va, (_, pv))| format!("{va} ({pv})"))
            .collect();
        if attached.is_empty() {
            return;
        }
        let claim = self.claims.values().find(|c| c.node == name);
        let node_deleted = self.node_deleted.get(name).copied();
        // termination started with the first deletion, the node's or its claim's
        let since = match (node_deleted, claim.and_then(|c| c.deleted)) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let grace_end = claim.and_then(|c| c.grace_end.or_else(|| Some(since? + c.grace?)));
        if grace_end.is_some_and(|end| now >= end) {
            self.released_with_volumes_after_grace += 1;
            return;
        }
        self.violations.push(format!(
            "node {name} released (its instance terminated) with volumes attached {attached:?} \
             before terminationGracePeriod (ends {grace_end:?})"
        ));
    }

    fn node_removed(&mut self, o: &Value) {
        self.nodes_removed += 1;
        let name = o["metadata"]["name"].as_str().unwrap_or_default();
        let now = Utc::now();
        let within_grace: Vec<String> = self
            .pods
            .iter()
            .filter(|(_, p)| p.node == name && p.holds)
            .filter(|(_, p)| p.deadline.is_none_or(|d| d > now))
            .map(|(k, p)| format!("{k} (grace until {:?})", p.deadline))
            .collect();
        if !within_grace.is_empty() {
            self.violations.push(format!(
                "node {name} removed while its pods were within their grace: {within_grace:?}"
            ));
        }
    }

    fn finalizers_kept(&mut self, c: &Change) {
        let Some(old) = &c.old else {
            return;
        };
        let after = finalizers(&c.object);
        let dropped: Vec<String> = finalizers(old)
            .into_iter()
            .filter(|f| f != JOINERS_FINALIZER && !after.contains(f))
            .collect();
        if !dropped.is_empty() {
            self.violations.push(format!(
                "{} {} lost other controllers' finalizers {dropped:?}",
                c.resource.plural,
                key_of(&c.object)
            ));
        }
    }
}

//! Lifecycle invariants checked on the test API server's change feed (`ApiServer::subscribe`),
//! change by change in resourceVersion order:
//!
//! - **grace periods honoured**: a Node is removed (its instance terminated) only once every pod
//!   bound to it that holds it (not a DaemonSet or mirror pod, not finished) is gone or past the
//!   end of its grace period (`deletionTimestamp`).
//! - **other controllers' finalizers kept**: no change to a Node or NodeClaim drops a finalizer
//!   other than `karpenter.sh/termination`.
//!
//! Findings are kept as violation strings; a test asserts there are none.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use chrono::{DateTime, Utc};
use serde_json::Value;
use tokio::sync::broadcast::error::RecvError;

use super::apiserver::{ApiServer, Change, ChangeKind};

const JOINERS_FINALIZER: &str = "karpenter.sh/termination";

#[derive(Debug, Clone)]
struct PodState {
    node: String,
    /// The end of its grace period, once deletion started.
    deadline: Option<DateTime<Utc>>,
    /// Whether it holds its node (not a DaemonSet or mirror pod, not finished).
    holds: bool,
}

#[derive(Debug, Default)]
struct Record {
    pods: BTreeMap<String, PodState>,
    violations: Vec<String>,
    nodes_removed: usize,
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
    /// Checks every change from now on; pods that exist already are seen on their next change.
    pub fn start(server: &ApiServer) -> Invariants {
        let mut feed = server.subscribe();
        let record = Arc::new(Mutex::new(Record::default()));
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
    let ts = o["metadata"]["deletionTimestamp"].as_str()?;
    DateTime::parse_from_rfc3339(ts)
        .ok()
        .map(|t| t.with_timezone(&Utc))
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
                    };
                    self.pods.insert(key_of(o), state);
                }
            }
            ("nodes", ChangeKind::Deleted) => self.node_removed(o),
            _ => {}
        }
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

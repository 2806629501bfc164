//! A recorder of the test API server's change feed (`ApiServer::subscribe`: every committed change,
//! in resourceVersion order), for ordering properties no polling can check:
//!
//! - **replacements before deletions**: a node carrying the `karpenter.sh/disrupted` taint (a
//!   disruption command chose it) may be deleted only once every NodeClaim created since the taint
//!   went on, up to the first pod leaving the node (the command's replacements: the controller
//!   taints, launches them, and drains only once they are initialized), has a Ready node. A
//!   replacement claim that was deleted instead counts as not Ready.
//! - **no node deleted with pods on it**: a disrupted node's pods are evicted before it goes.
//! - **PodDisruptionBudgets**: the pods a budget selects that are Ready, not terminating and bound
//!   to a node that still exists never drop below the budget's `desiredHealthy` (as the server
//!   last computed it). The server's own `currentHealthy` does not look at nodes: a node deleted
//!   with pods bound breaks a budget without any eviction, and only this catches it.
//!
//! Findings are kept as violation strings; the test asserts there are none, and that the property
//! was exercised (`replaced_deletions`).
#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use serde_json::Value;
use tokio::sync::broadcast::error::RecvError;

use super::apiserver::{ApiServer, Change, ChangeKind};

const DISRUPTED: &str = "karpenter.sh/disrupted";

#[derive(Debug, Default)]
struct NodeLife {
    /// rv at which the node was first seen Ready.
    ready_at: Option<u64>,
    /// rv at which the current `karpenter.sh/disrupted` taint went on (None when untainted).
    disrupted_since: Option<u64>,
    /// rv of the first pod leaving the node during the current taint (the drain started).
    drain_started: Option<u64>,
    gone: bool,
}

#[derive(Debug)]
struct ClaimLife {
    created: u64,
    deleted: Option<u64>,
    provider_id: Option<String>,
}

#[derive(Debug, Clone)]
struct PodState {
    labels: BTreeMap<String, String>,
    node: Option<String>,
    healthy: bool,
}

#[derive(Debug, Default)]
struct Record {
    nodes: BTreeMap<String, NodeLife>,
    /// providerID -> node name
    node_of_provider: BTreeMap<String, String>,
    claims: BTreeMap<String, ClaimLife>,
    pods: BTreeMap<String, PodState>,
    budgets: BTreeMap<String, Budget>,
    /// ReplicaSet -> (selector matchLabels, replicas): the scale budgets count against.
    replicasets: BTreeMap<String, (BTreeMap<String, String>, i64)>,
    violations: Vec<String>,
    replaced_deletions: usize,
    disrupted_deletions: usize,
    /// Lowest (healthy - desiredHealthy) seen per budget.
    margins: BTreeMap<String, i64>,
    /// The last (healthy - desiredHealthy) per budget.
    last_margin: BTreeMap<String, i64>,
}

#[derive(Debug)]
struct Budget {
    selector: BTreeMap<String, String>,
    max_unavailable: Option<i64>,
    min_available: Option<i64>,
    /// The server's `status.desiredHealthy`, for budgets given as percentages.
    reported: Option<i64>,
}

pub struct Timeline {
    record: Arc<Mutex<Record>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Timeline {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn labels_of(o: &Value) -> BTreeMap<String, String> {
    o["metadata"]["labels"]
        .as_object()
        .map(|m| {
            m.iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
                .collect()
        })
        .unwrap_or_default()
}

fn name_of(o: &Value) -> String {
    o["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

fn deleting(o: &Value) -> bool {
    !o["metadata"]["deletionTimestamp"].is_null()
}

fn condition(o: &Value, t: &str) -> bool {
    o["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|c| c["type"] == t && c["status"] == "True")
}

impl Timeline {
    /// Starts recording every change from now on; objects that exist already are seen on their
    /// next change.
    pub fn start(server: &ApiServer) -> Timeline {
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
                        .push(format!("the timeline missed {n} changes")),
                    Err(RecvError::Closed) => return,
                }
            }
        });
        Timeline { record, task }
    }

    /// Everything found wrong so far.
    pub fn violations(&self) -> Vec<String> {
        self.record.lock().unwrap().violations.clone()
    }

    /// Disrupted nodes deleted after replacements launched for them were Ready.
    pub fn replaced_deletions(&self) -> usize {
        self.record.lock().unwrap().replaced_deletions
    }

    /// Disrupted nodes deleted, with or without replacements.
    pub fn disrupted_deletions(&self) -> usize {
        self.record.lock().unwrap().disrupted_deletions
    }

    /// The lowest number of healthy pods above its `desiredHealthy` each budget had (negative:
    /// broken).
    pub fn budget_margins(&self) -> BTreeMap<String, i64> {
        self.record.lock().unwrap().margins.clone()
    }

    /// Names of the NodeClaims ever created while recording.
    pub fn claims_created(&self) -> BTreeSet<String> {
        self.record.lock().unwrap().claims.keys().cloned().collect()
    }
}

impl Record {
    fn apply(&mut self, c: &Change) {
        let o = &c.object;
        let gone = c.kind == ChangeKind::Deleted;
        match c.resource.plural {
            "nodes" => self.node(c.rv, o, gone),
            "nodeclaims" => self.claim(c.rv, o, gone, c.kind == ChangeKind::Added),
            "pods" => self.pod(c.rv, o, gone),
            "poddisruptionbudgets" => {
                let name = format!(
                    "{}/{}",
                    o["metadata"]["namespace"].as_str().unwrap_or_default(),
                    name_of(o)
                );
                if gone {
                    self.budgets.remove(&name);
                } else {
                    let spec = &o["spec"];
                    let selector = spec["selector"]["matchLabels"]
                        .as_object()
                        .map(|m| {
                            m.iter()
                                .map(|(k, v)| {
                                    (k.clone(), v.as_str().unwrap_or_default().to_string())
                                })
                                .collect()
                        })
                        .unwrap_or_default();
                    self.budgets.insert(
                        name,
                        Budget {
                            selector,
                            max_unavailable: spec["maxUnavailable"].as_i64(),
                            min_available: spec["minAvailable"].as_i64(),
                            reported: o["status"]["desiredHealthy"].as_i64(),
                        },
                    );
                }
                self.check_budgets(c.rv, false);
            }
            "replicasets" => {
                let key = format!(
                    "{}/{}",
                    o["metadata"]["namespace"].as_str().unwrap_or_default(),
                    name_of(o)
                );
                let selector = o["spec"]["selector"]["matchLabels"]
                    .as_object()
                    .map(|m| {
                        m.iter()
                            .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
                            .collect()
                    })
                    .unwrap_or_default();
                if gone {
                    self.replicasets.remove(&key);
                } else {
                    self.replicasets
                        .insert(key, (selector, o["spec"]["replicas"].as_i64().unwrap_or(1)));
                }
                // a scale change moves what a budget wants; only pods and nodes going can break it
                self.check_budgets(c.rv, false);
            }
            _ => {}
        }
    }

    fn node(&mut self, rv: u64, o: &Value, gone: bool) {
        let name = name_of(o);
        if let Some(pid) = o["spec"]["providerID"].as_str() {
            self.node_of_provider.insert(pid.to_string(), name.clone());
        }
        let life = self.nodes.entry(name.clone()).or_default();
        if life.gone {
            return;
        }
        if condition(o, "Ready") && life.ready_at.is_none() {
            life.ready_at = Some(rv);
        }
        let tainted = o["spec"]["taints"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|t| t["key"] == DISRUPTED);
        match (tainted, life.disrupted_since) {
            (true, None) => life.disrupted_since = Some(rv),
            (false, Some(_)) if !gone => {
                life.disrupted_since = None;
                life.drain_started = None;
            }
            _ => {}
        }
        if gone || deleting(o) {
            life.gone = true;
            self.node_gone(rv, &name);
            self.check_budgets(rv, true);
        }
    }

    /// Node `name` is being deleted at `rv`: if a disruption command chose it, its replacements
    /// must be Ready and its pods gone.
    fn node_gone(&mut self, rv: u64, name: &str) {
        let life = &self.nodes[name];
        let Some(since) = life.disrupted_since else {
            return;
        };
        let until = life.drain_started.unwrap_or(rv);
        self.disrupted_deletions += 1;
        let replacements: Vec<&String> = self
            .claims
            .iter()
            .filter(|(_, c)| c.created > since && c.created < until)
            .map(|(n, _)| n)
            .collect();
        let mut unready = vec![];
        for claim in &replacements {
            let c = &self.claims[*claim];
            let ready = c.deleted.is_none()
                && c.provider_id
                    .as_ref()
                    .and_then(|p| self.node_of_provider.get(p))
                    .and_then(|n| self.nodes.get(n))
                    .and_then(|n| n.ready_at)
                    .is_some_and(|r| r < rv);
            if !ready {
                unready.push((*claim).clone());
            }
        }
        if !unready.is_empty() {
            self.violations.push(format!(
                "node {name} deleted at rv {rv} before its replacements {unready:?} were Ready"
            ));
        } else if !replacements.is_empty() {
            self.replaced_deletions += 1;
        }
        let left: Vec<&String> = self
            .pods
            .iter()
            .filter(|(_, p)| p.healthy && p.node.as_deref() == Some(name))
            .map(|(k, _)| k)
            .collect();
        if !left.is_empty() {
            self.violations.push(format!(
                "disrupted node {name} deleted at rv {rv} with pods still on it: {left:?}"
            ));
        }
    }

    /// A claim first seen through a change other than its creation existed before recording
    /// began: it is counted as created at rv 0, so it is never anyone's replacement.
    fn claim(&mut self, rv: u64, o: &Value, gone: bool, added: bool) {
        let name = name_of(o);
        let created = if added { rv } else { 0 };
        let c = self.claims.entry(name).or_insert(ClaimLife {
            created,
            deleted: None,
            provider_id: None,
        });
        if let Some(pid) = o["status"]["providerID"].as_str() {
            c.provider_id = Some(pid.to_string());
        }
        if (gone || deleting(o)) && c.deleted.is_none() {
            c.deleted = Some(rv);
        }
    }

    fn pod(&mut self, rv: u64, o: &Value, gone: bool) {
        let key = format!(
            "{}/{}",
            o["metadata"]["namespace"].as_str().unwrap_or_default(),
            name_of(o)
        );
        let node = o["spec"]["nodeName"].as_str().map(str::to_string);
        let before = self.pods.get(&key).cloned();
        if gone || deleting(o) {
            self.pods.remove(&key);
            // a pod leaving a disrupted node: the command's drain has started
            if let Some(n) = before.as_ref().and_then(|p| p.node.clone()).or(node) {
                if let Some(life) = self.nodes.get_mut(&n) {
                    if life.disrupted_since.is_some() && life.drain_started.is_none() {
                        life.drain_started = Some(rv);
                    }
                }
            }
        } else {
            self.pods.insert(
                key,
                PodState {
                    labels: labels_of(o),
                    node,
                    healthy: condition(o, "Ready"),
                },
            );
        }
        self.check_budgets(rv, true);
    }

    /// Healthy pods (Ready, bound to a node that still exists) of each budget against its
    /// desiredHealthy: the scale of the ReplicaSets it selects less `maxUnavailable`, or
    /// `minAvailable` (both integers here; otherwise what the server reported). `flag`: the
    /// change can break a budget (a pod or node went), so a drop below it is a violation.
    fn check_budgets(&mut self, rv: u64, flag: bool) {
        for (name, b) in &self.budgets {
            let selected = |labels: &BTreeMap<String, String>| {
                b.selector.iter().all(|(k, v)| labels.get(k) == Some(v))
            };
            let expected: i64 = self
                .replicasets
                .values()
                .filter(|(sel, _)| !sel.is_empty() && selected(sel))
                .map(|(_, n)| n)
                .sum();
            let desired = match (b.max_unavailable, b.min_available) {
                (Some(m), _) => (expected - m).max(0),
                (None, Some(m)) => m,
                (None, None) => b.reported.unwrap_or(0),
            };
            let healthy = self
                .pods
                .values()
                .filter(|p| selected(&p.labels))
                .filter(|p| {
                    p.healthy
                        && p.node
                            .as_ref()
                            .is_some_and(|n| self.nodes.get(n).is_none_or(|l| !l.gone))
                })
                .count() as i64;
            let margin = healthy - desired;
            let last = self.last_margin.insert(name.clone(), margin);
            let low = self.margins.entry(name.clone()).or_insert(margin);
            *low = (*low).min(margin);
            // pods becoming healthy after a start with pods pending never count against a budget
            if flag && margin < 0 && last.is_some_and(|l| margin < l) {
                self.violations.push(format!(
                    "budget {name} broken at rv {rv}: {healthy} healthy pods, {desired} desired"
                ));
            }
        }
    }
}

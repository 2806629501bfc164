//! The simulated cluster: the controller's [`Cluster`] in memory. It holds the nodes and pods,
//! registers launched nodes when the host says their boot is over (with their DaemonSet pods),
//! plays the Eviction API (PodDisruptionBudgets enforced) and the disruption controller (budget
//! status), and records when each pod waited and started.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use crate::catalog::Catalog;
use crate::cloud::Instance;
use crate::controller::{Cluster, EvictionRefused};
use crate::disruption::edit::register;
use crate::disruption::timing::Timestamp;
use crate::domain::{ClusterSnapshot, Pod, PodDisruptionBudget};
use crate::optimizer::NewNode;

pub struct SimCluster {
    snap: ClusterSnapshot,
    catalog: Catalog,
    origin: Timestamp,
    now: f64,
    /// Claims launched and not registered, by node name, with the instance id.
    booting: BTreeMap<String, (NewNode, String)>,
    /// Claims launched since the host last asked, so it can schedule their registration.
    launched: Vec<String>,
    pending_since: BTreeMap<String, f64>,
    /// Seconds each binding waited, in order.
    pub pending_times: Vec<f64>,
    /// Pods bound at least once.
    pub started: BTreeSet<String>,
    /// When each bound workload pod was bound, seconds.
    bound_since: BTreeMap<String, f64>,
    /// Seconds workload pods spent bound, over the pods no longer bound.
    served: f64,
    /// When each claim was launched, and its NodePool, by node name.
    launched_at: BTreeMap<String, (f64, String)>,
    /// Nodes gone during the run: NodePool, seconds from launch to deletion.
    pub lifetimes: Vec<(String, f64)>,
}

impl SimCluster {
    pub fn new(snap: ClusterSnapshot, catalog: Catalog, origin: Timestamp) -> SimCluster {
        let pending_since = snap
            .pods
            .iter()
            .filter(|p| p.is_pending())
            .map(|p| (p.key(), 0.0))
            .collect();
        let mut c = SimCluster {
            snap,
            catalog,
            origin,
            now: 0.0,
            booting: BTreeMap::new(),
            launched: vec![],
            pending_since,
            pending_times: vec![],
            started: BTreeSet::new(),
            bound_since: BTreeMap::new(),
            served: 0.0,
            launched_at: BTreeMap::new(),
            lifetimes: vec![],
        };
        c.refresh_pdb_status();
        c
    }

    pub fn set_now(&mut self, now: f64) {
        self.now = now;
    }

    fn stamp(&self) -> String {
        (self.origin + chrono::Duration::milliseconds((self.now * 1000.0).round() as i64))
            .to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
    }

    /// Claims launched since the last call.
    pub fn take_launched(&mut self) -> Vec<String> {
        std::mem::take(&mut self.launched)
    }

    /// The node of a launched claim registers, Ready, with its DaemonSet pods.
    pub fn register(&mut self, name: &str) -> bool {
        let Some((node, instance)) = self.booting.remove(name) else {
            return false;
        };
        let stamp = self.stamp();
        register(&mut self.snap, &self.catalog, &node, name, &stamp);
        if let Some(n) = self.snap.nodes.iter_mut().find(|n| n.name == name) {
            Arc::make_mut(n).provider_id = Some(format!("aws:///{}/{}", node.zone, instance));
        }
        true
    }

    pub fn add_pod(&mut self, pod: Pod) {
        self.pending_since.insert(pod.key(), self.now);
        self.snap.pods.push(Arc::new(pod));
    }

    /// Binds a pending pod (kube-scheduler's job); returns whether it was pending.
    pub fn bind(&mut self, pod: &str, node: &str) -> bool {
        let stamp = self.stamp();
        let Some(p) = self
            .snap
            .pods
            .iter_mut()
            .find(|p| p.key() == pod && p.node_name.is_none())
        else {
            return false;
        };
        let p = Arc::make_mut(p);
        p.node_name = Some(node.to_string());
        p.started = Some(stamp.clone());
        if let Some(since) = self.pending_since.remove(pod) {
            self.pending_times.push(self.now - since);
        }
        self.started.insert(pod.to_string());
        self.bound_since.insert(pod.to_string(), self.now);
        self.touch(Some(node), stamp);
        true
    }

    /// A workload pod stops being bound: its bound time is served time.
    fn unbound(&mut self, key: &str) {
        if let Some(since) = self.bound_since.remove(key) {
            self.served += self.now - since;
        }
    }

    /// Pod-seconds workload pods have been bound up to now (DaemonSet pods not counted).
    pub fn served_seconds(&self) -> f64 {
        self.served + self.bound_since.values().map(|s| self.now - s).sum::<f64>()
    }

    /// How long each pod still pending has waited so far, seconds.
    pub fn open_waits(&self) -> Vec<f64> {
        self.pending_since.values().map(|s| self.now - s).collect()
    }

    /// Deletes a pod (scale-down, a finished Job).
    pub fn remove_pod(&mut self, key: &str) {
        let node = self
            .snap
            .pods
            .iter()
            .find(|p| p.key() == key)
            .and_then(|p| p.node_name.clone());
        self.snap.pods.retain(|p| p.key() != key);
        self.pending_since.remove(key);
        self.unbound(key);
        let stamp = self.stamp();
        self.touch(node.as_deref(), stamp);
    }

    /// A pod event on a node: consolidateAfter runs from here.
    fn touch(&mut self, node: Option<&str>, stamp: String) {
        if let Some(c) = self
            .snap
            .node_claims
            .iter_mut()
            .find(|c| node.is_some() && c.node_name.as_deref() == node)
        {
            c.last_pod_event = Some(stamp);
        }
    }

    /// Makes a bound pod pending again, as its controller would recreate it.
    fn unbind(&mut self, key: &str) {
        let stamp = self.stamp();
        let Some(p) = self
            .snap
            .pods
            .iter_mut()
            .find(|p| p.key() == key && p.node_name.is_some())
        else {
            return;
        };
        let p = Arc::make_mut(p);
        let node = p.node_name.take();
        p.created = Some(stamp.clone());
        self.pending_since.insert(key.to_string(), self.now);
        self.unbound(key);
        self.touch(node.as_deref(), stamp);
    }

    /// PodDisruptionBudget status as the disruption controller reports it: healthy (bound) pods
    /// less those the budget requires, over every pod it selects.
    pub fn refresh_pdb_status(&mut self) {
        for i in 0..self.snap.pdbs.len() {
            let b = &self.snap.pdbs[i];
            let selected: Vec<&Pod> = self
                .snap
                .pods
                .iter()
                .map(|p| &**p)
                .filter(|p| {
                    p.namespace == b.namespace && !p.terminal && b.selector.matches(&p.labels)
                })
                .collect();
            let expected = selected.len();
            let healthy = selected.iter().filter(|p| p.node_name.is_some()).count();
            let scaled = |v: &str| PodDisruptionBudget::count_of(v, expected);
            let desired = match (b.min_available.as_deref(), b.max_unavailable.as_deref()) {
                (_, Some(max)) => expected.saturating_sub(scaled(max).unwrap_or(0)),
                (Some(min), None) => scaled(min).unwrap_or(expected),
                (None, None) => 0,
            };
            self.snap.pdbs[i].disruptions_allowed = Some(healthy.saturating_sub(desired) as i32);
        }
    }
}

impl Cluster for SimCluster {
    fn snapshot(&self) -> &ClusterSnapshot {
        &self.snap
    }

    fn in_flight(&self) -> Vec<(&str, &NewNode)> {
        self.booting
            .iter()
            .map(|(n, (node, _))| (n.as_str(), node))
            .collect()
    }

    fn claim_launched(&mut self, name: &str, node: &NewNode, instance: &Instance) {
        self.booting
            .insert(name.to_string(), (node.clone(), instance.id.clone()));
        self.launched.push(name.to_string());
        self.launched_at
            .insert(name.to_string(), (self.now, node.nodepool.clone()));
    }

    fn set_disrupted(&mut self, node: &str, disrupted: bool) {
        if let Some(n) = self.snap.nodes.iter_mut().find(|n| n.name == node) {
            Arc::make_mut(n).unschedulable = disrupted;
        }
    }

    fn evict(&mut self, key: &str) -> Result<(), EvictionRefused> {
        let Some(pod) = self.snap.pods.iter().find(|p| p.key() == key) else {
            return Err(EvictionRefused {
                pod: key.to_string(),
                reason: "no such pod".into(),
            });
        };
        let blocking = self.snap.pdbs.iter().find(|b| {
            b.namespace == pod.namespace
                && b.selector.matches(&pod.labels)
                && b.disruptions_allowed.unwrap_or(0) <= 0
        });
        if let Some(b) = blocking {
            return Err(EvictionRefused {
                pod: key.to_string(),
                reason: format!("pdb {}/{} allows no disruption", b.namespace, b.name),
            });
        }
        self.unbind(key);
        self.refresh_pdb_status();
        Ok(())
    }

    fn delete_node(&mut self, name: &str) -> usize {
        if let Some((at, pool)) = self.launched_at.remove(name) {
            self.lifetimes.push((pool, self.now - at));
        }
        if self.booting.remove(name).is_some() {
            return 0;
        }
        let pods: Vec<(String, bool)> = self
            .snap
            .pods
            .iter()
            .filter(|p| p.node_name.as_deref() == Some(name))
            .map(|p| (p.key(), p.is_reschedulable()))
            .collect();
        let mut moved = 0;
        for (p, reschedulable) in pods {
            if reschedulable {
                self.unbind(&p);
                moved += 1;
            } else {
                self.snap.pods.retain(|q| q.key() != p);
                self.unbound(&p);
            }
        }
        self.snap.nodes.retain(|n| n.name != name);
        self.snap
            .node_claims
            .retain(|c| c.node_name.as_deref() != Some(name));
        self.refresh_pdb_status();
        moved
    }
}

//! The simulated cluster: the controller's [`Cluster`] in memory. It holds the nodes and pods,
//! registers launched nodes when the host says their boot is over (with their DaemonSet pods),
//! plays the Eviction API (PodDisruptionBudgets enforced) and the disruption controller (budget
//! status), makes StatefulSet claims and their volumes (`storage`), and records when each pod
//! waited and started. Pods' volume needs are kept resolved as claims, volumes and nodes change, so
//! the controller always reads them current.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use crate::catalog::Catalog;
use crate::cloud::Instance;
use crate::controller::{Cluster, EvictionRefused};
use crate::disruption::edit::register;
use crate::disruption::timing::Timestamp;
use crate::domain::{ClusterSnapshot, Pod, PodDisruptionBudget};
use crate::optimizer::NewNode;

use super::storage::Provisioner;

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
    provisioner: Provisioner,
}

impl SimCluster {
    pub fn new(mut snap: ClusterSnapshot, catalog: Catalog, origin: Timestamp) -> SimCluster {
        snap.resolve_volumes();
        let provisioner = Provisioner::new(crate::sim::scenario::storage::catalog_zones(&catalog));
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
            provisioner,
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
        if !self.snap.storage.is_empty() {
            // its attach limit, before anything is bound to it
            self.snap.resolve_volumes();
        }
        true
    }

    /// Makes the claim `namespace/name` of StorageClass `class` unless it exists.
    pub fn make_claim(&mut self, namespace: &str, name: &str, class: &str) {
        self.provisioner
            .claim(&mut self.snap, namespace, name, class);
    }

    pub fn add_pod(&mut self, pod: Pod) {
        self.pending_since.insert(pod.key(), self.now);
        let volumes = !pod.volumes.is_empty();
        self.snap.pods.push(Arc::new(pod));
        if volumes {
            self.snap.resolve_volumes();
        }
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
        if self.provisioner.first_consumer(&mut self.snap, pod, node) {
            self.snap.resolve_volumes();
        }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::labels::{NodeSelector, Requirement, ZONE};
    use crate::domain::volume::{BindingMode, StorageClass};
    use crate::domain::{Node, PodConstraints, Resources};

    fn node(name: &str, zone: &str) -> Arc<Node> {
        let labels = [(ZONE.to_string(), zone.to_string())].into_iter().collect();
        let room: Resources = [("cpu", "2"), ("memory", "4Gi"), ("pods", "10")]
            .into_iter()
            .map(|(k, v)| (k.to_string(), crate::domain::Quantity::parse(v).unwrap()))
            .collect();
        Arc::new(Node::new(name, labels, room.clone(), room))
    }

    /// A cluster with a WaitForFirstConsumer class and nodes `a1` (zone a) and `b1` (zone b), and
    /// the StatefulSet pod db-0 with its claim data-db-0, pending.
    fn cluster() -> SimCluster {
        let mut snap = ClusterSnapshot::default();
        snap.storage.add_class(StorageClass {
            name: "gp3".into(),
            provisioner: "ebs.csi.aws.com".into(),
            binding_mode: BindingMode::WaitForFirstConsumer,
            allowed_topologies: NodeSelector::default(),
            default: true,
        });
        snap.nodes = vec![node("a1", "a"), node("b1", "b")];
        let catalog = Catalog {
            region: "r".into(),
            instance_types: vec![],
            provenance: None,
        };
        let origin = crate::disruption::timing::parse_timestamp("2026-01-05T00:00:00Z").unwrap();
        let mut c = SimCluster::new(snap, catalog, origin);
        c.make_claim("ns", "data-db-0", "gp3");
        let mut pod = Pod::new(
            "db-0",
            PodConstraints {
                namespace: "ns".into(),
                ..Default::default()
            },
        )
        .owned_by("StatefulSet", "db");
        pod.volumes = vec![crate::domain::volume::PodVolume {
            name: "data".into(),
            claim: "data-db-0".into(),
            ephemeral: None,
        }];
        c.add_pod(pod);
        c
    }

    fn pod(c: &SimCluster) -> &Pod {
        c.snapshot().pods.iter().find(|p| p.name == "db-0").unwrap()
    }

    #[test]
    fn a_statefulset_pod_comes_back_under_its_name_and_only_binds_in_its_volumes_zone() {
        let mut c = cluster();
        let ebs = crate::domain::volume::ebs_attach_resource();
        assert_eq!(
            pod(&c).constraints.requests.get(&ebs).units_ceil(),
            1,
            "one EBS attachment"
        );
        assert!(c.bind("ns/db-0", "b1"));
        let pv = c.snapshot().storage.claims["ns/data-db-0"]
            .volume_name
            .clone()
            .expect("bound at the first consumer");
        let zone_b = NodeSelector {
            terms: vec![vec![Requirement::in_values(ZONE, &["b"])]],
        };
        assert_eq!(c.snapshot().storage.volumes[&pv].node_affinity, zone_b);
        assert_eq!(pod(&c).constraints.volume_requirements, vec![zone_b]);

        // its node goes: the pod is pending again under the same name, with the same claim
        c.delete_node("b1");
        assert!(pod(&c).is_pending());
        assert_eq!(pod(&c).volumes[0].claim, "data-db-0");
        assert_eq!(
            c.snapshot().storage.claims["ns/data-db-0"]
                .volume_name
                .as_deref(),
            Some(pv.as_str())
        );
        let region = "r";
        assert_eq!(
            crate::sim::binder::bindings(c.snapshot(), region).unwrap(),
            BTreeMap::new(),
            "a1 has room but is in zone a"
        );
        c.snap.nodes.push(node("b2", "b"));
        c.snap.resolve_volumes();
        let binds = crate::sim::binder::bindings(c.snapshot(), region).unwrap();
        assert_eq!(
            binds.get("ns/db-0").map(String::as_str),
            Some("b2"),
            "a node in its volume's zone takes it"
        );
    }

    #[test]
    fn the_binder_honours_the_attach_limit() {
        let mut c = cluster();
        let ebs = crate::domain::volume::ebs_attach_resource();
        for n in &mut c.snap.nodes {
            let n = Arc::make_mut(n);
            n.allocatable
                .set(ebs.clone(), crate::domain::Quantity::from_units(0));
            n.capacity
                .set(ebs.clone(), crate::domain::Quantity::from_units(0));
        }
        c.snap
            .storage
            .add_attach_limits("a1".into(), [("ebs.csi.aws.com".to_string(), 0)].into());
        c.snap
            .storage
            .add_attach_limits("b1".into(), [("ebs.csi.aws.com".to_string(), 1)].into());
        c.snap.resolve_volumes();
        let binds = crate::sim::binder::bindings(c.snapshot(), "r").unwrap();
        assert_eq!(
            binds.get("ns/db-0").map(String::as_str),
            Some("b1"),
            "a1 can attach no volume"
        );
    }
}

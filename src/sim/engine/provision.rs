//! The controller's provisioning side in the simulation: a batch of waiting pods is solved by the
//! decision core against the cluster as it will be (booting nodes and the pods meant for them
//! included), each new node is launched through the cloud with its fallbacks, registers after the
//! boot delay, and spot interruptions and terminations hand pods back to the scheduler.

use std::time::Duration;

use super::{Billed, Booting, Ev, World};
use crate::cloud::{CloudError, CloudProvider, LaunchRequest, OfferingKey};
use crate::catalog::CapacityType;
use crate::disruption::edit::register;
use crate::domain::labels::{CAPACITY_TYPE, INSTANCE_TYPE, ZONE};
use crate::domain::ClusterSnapshot;
use crate::optimizer::{self, NewNode, OfferingRef, SolveSettings};
use crate::sim::SimError;

/// How long a pod no offering could hold waits before it is solved again.
const PARK_SECONDS: f64 = 60.0;
/// The spot interruption notice: the instance is reclaimed this long after the warning.
const INTERRUPTION_NOTICE_SECONDS: f64 = 120.0;

impl World<'_> {
    /// Nodes present before the run are billed at their catalog price from the start.
    pub(super) fn adopt_initial_nodes(&mut self) {
        for n in &self.snap.nodes {
            let id = format!("initial-{}", n.name);
            self.billed.insert(id.clone(), Billed { price: optimizer::problem::node_price(n, &self.sc.catalog), since: 0.0 });
            self.instance_of.insert(n.name.clone(), id);
        }
        for p in self.snap.pods.iter().filter(|p| p.is_pending()) {
            self.pending_since.insert(p.key(), 0.0);
        }
    }

    pub(super) fn batch_due(&mut self) -> Result<(), SimError> {
        let Some((first, last)) = self.batch_window else { return Ok(()) };
        let t = &self.sc.timing;
        if self.now() + 1e-6 < (last + t.batch_idle).min(first + t.batch_max) {
            return Ok(());
        }
        self.batch_window = None;
        self.batch.clear();
        self.provision()
    }

    /// The cluster as the next solve must see it: booting nodes registered, their pods bound.
    pub(super) fn provisioning_view(&self) -> ClusterSnapshot {
        let mut view = self.snap.clone();
        let stamp = self.rfc3339();
        for (name, b) in &self.booting {
            register(&mut view, &self.sc.catalog, &b.node, name, &stamp);
        }
        for p in view.pods.iter_mut().filter(|p| p.node_name.is_none()) {
            if let Some(n) = self.nominated.get(&p.key()) {
                p.node_name = Some(n.clone());
            }
        }
        view
    }

    fn provision(&mut self) -> Result<(), SimError> {
        let view = self.provisioning_view();
        if view.pending_pods().next().is_none() {
            return Ok(());
        }
        let now = self.now();
        let catalog = self.unavailable.mask(&self.sc.catalog, now);
        let settings = SolveSettings {
            strategy: self.strategy.provisioning(),
            time_limit: Duration::from_secs_f64(self.sc.solver.time_limit),
            gap: self.sc.solver.gap,
            lower_bound: false,
            ..SolveSettings::default()
        };
        let plan = optimizer::solve(&view, &catalog, &settings).map_err(|e| SimError::Decision(e.to_string()))?;
        self.record_solve(plan.solver.seconds, &plan.solver.status);
        for e in &plan.existing {
            for pod in &e.pods {
                self.nominated.insert(pod.clone(), e.node.clone());
            }
        }
        for node in &plan.nodes {
            self.launch(node);
        }
        for u in &plan.unschedulable {
            self.parked.insert(u.pod.clone(), now + PARK_SECONDS);
        }
        if !plan.unschedulable.is_empty() {
            self.at(now + PARK_SECONDS, Ev::Retry);
        }
        Ok(())
    }

    pub(super) fn record_solve(&mut self, seconds: f64, status: &str) {
        self.solver_seconds.push(seconds);
        if status == "time-limit" {
            self.counters.time_limited += 1;
        }
    }

    /// Launches a plan's node (its offering, then its fallbacks) and nominates its pods; returns
    /// the node's name, or None when no offering had capacity.
    pub(super) fn launch(&mut self, node: &NewNode) -> Option<String> {
        let now = self.now();
        self.node_seq += 1;
        let name = format!("{}-{:05}", node.nodepool, self.node_seq);
        let request = LaunchRequest::for_node(&name, node, &self.unavailable, now);
        match pollster::block_on(self.cloud.launch(&request)) {
            Ok(launched) => {
                if !launched.insufficient.is_empty() {
                    self.counters.ice += 1;
                }
                for key in launched.insufficient {
                    self.unavailable.mark(key, now);
                }
                let i = launched.instance;
                tracing::debug!(hours = now / 3600.0, node = %name, instance_type = %i.offering.instance_type, zone = %i.offering.zone, capacity_type = i.offering.capacity_type.as_str(), price = i.offering.price, pods = node.pods.len(), "launched");
                self.billed.insert(i.id.clone(), Billed { price: i.offering.price, since: now });
                self.instance_of.insert(name.clone(), i.id.clone());
                self.counters.launched += 1;
                for pod in &node.pods {
                    self.nominated.insert(pod.clone(), name.clone());
                }
                let booted = self.relabel(node, &i.offering);
                self.booting.insert(name.clone(), Booting { node: booted, instance: i.id.clone() });
                self.at(now + self.sc.timing.boot, Ev::NodeReady(name.clone()));
                if let Some(at) = self.cloud.interruption_at(&i.id).filter(|t| *t < self.sc.duration) {
                    self.at(at, Ev::Warning(i.id));
                }
                Some(name)
            }
            Err(CloudError::InsufficientCapacity { offerings, .. }) => {
                self.counters.ice += 1;
                for key in offerings {
                    self.unavailable.mark(key, now);
                }
                None
            }
            Err(e) => {
                tracing::warn!(claim = %name, error = %e, "launch failed");
                None
            }
        }
    }

    /// The plan's node as launched: a fallback offering changes its type, zone or capacity type.
    fn relabel(&self, node: &NewNode, o: &OfferingRef) -> NewNode {
        let mut n = node.clone();
        if o.instance_type != n.instance_type {
            if let Some(it) = self.sc.catalog.instance_types.iter().find(|t| t.name == o.instance_type) {
                n.labels.extend(it.labels(&self.sc.catalog.region));
            }
        }
        n.instance_type = o.instance_type.clone();
        n.zone = o.zone.clone();
        n.capacity_type = o.capacity_type;
        n.price = o.price;
        n.labels.insert(INSTANCE_TYPE.to_string(), o.instance_type.clone());
        n.labels.insert(ZONE.to_string(), o.zone.clone());
        n.labels.insert(CAPACITY_TYPE.to_string(), o.capacity_type.as_str().to_string());
        n.fallbacks.clear();
        n
    }

    pub(super) fn node_ready(&mut self, name: &str) {
        let Some(b) = self.booting.remove(name) else { return };
        let stamp = self.rfc3339();
        register(&mut self.snap, &self.sc.catalog, &b.node, name, &stamp);
        if let Some(n) = self.snap.nodes.iter_mut().find(|n| n.name == name) {
            n.provider_id = Some(format!("aws:///{}/{}", b.node.zone, b.instance));
        }
        // the scheduler decides now; pods it cannot bind wait for the next batch
        self.nominated.retain(|_, n| n != name);
        self.replacement_ready();
    }

    pub(super) fn interruption_warning(&mut self, instance: &str) {
        let Some(name) = self.instance_of.iter().find(|(_, i)| *i == instance).map(|(n, _)| n.clone()) else { return };
        if !self.billed.contains_key(instance) {
            return;
        }
        self.counters.interruptions += 1;
        if let Some(b) = self.booting.get(&name) {
            let key = OfferingKey { instance_type: b.node.instance_type.clone(), zone: b.node.zone.clone(), capacity_type: b.node.capacity_type };
            self.unavailable.mark(key, self.now());
            self.terminate(&name);
            return;
        }
        let Some(node) = self.snap.nodes.iter_mut().find(|n| n.name == name) else { return };
        node.unschedulable = true;
        let get = |k: &str| node.labels.get(k).cloned().unwrap_or_default();
        let key = OfferingKey { instance_type: get(INSTANCE_TYPE), zone: get(ZONE), capacity_type: CapacityType::Spot };
        self.unavailable.mark(key, self.now());
        let pods: Vec<String> = self.snap.pods.iter().filter(|p| p.node_name.as_deref() == Some(&name) && p.is_reschedulable()).map(|p| p.key()).collect();
        for p in pods {
            self.evict(&p);
        }
        self.at(self.now() + INTERRUPTION_NOTICE_SECONDS, Ev::Terminate(name));
    }

    /// A scripted interruption hits the oldest schedulable spot node (of the type, if given).
    pub(super) fn scripted_interrupt(&mut self, instance_type: Option<&str>) {
        let victim = self
            .snap
            .nodes
            .iter()
            .filter(|n| !n.unschedulable && n.labels.get(CAPACITY_TYPE).map(String::as_str) == Some("spot"))
            .filter(|n| instance_type.is_none_or(|t| n.labels.get(INSTANCE_TYPE).map(String::as_str) == Some(t)))
            .filter_map(|n| self.instance_of.get(&n.name))
            .filter_map(|i| self.billed.get(i).map(|b| (b.since, i.clone())))
            .min_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        if let Some((_, instance)) = victim {
            self.interruption_warning(&instance);
        }
    }

    /// The instance is gone: its node, claim and pods leave the cluster; billing stops.
    pub(super) fn terminate(&mut self, name: &str) {
        let Some(instance) = self.instance_of.remove(name) else { return };
        let now = self.now();
        if let Some(b) = self.billed.remove(&instance) {
            self.cost += b.price * (now - b.since) / 3600.0;
        }
        let _ = pollster::block_on(self.cloud.delete(&instance));
        self.counters.terminated += 1;
        self.booting.remove(name);
        self.nominated.retain(|_, n| n != name);
        let pods: Vec<(String, bool)> = self.snap.pods.iter().filter(|p| p.node_name.as_deref() == Some(name)).map(|p| (p.key(), p.is_reschedulable())).collect();
        for (p, moves) in pods {
            if moves {
                self.evict(&p);
            } else {
                self.remove_pod(&p);
            }
        }
        self.snap.nodes.retain(|n| n.name != name);
        self.snap.node_claims.retain(|c| c.node_name.as_deref() != Some(name));
        self.replacement_lost(name);
    }
}

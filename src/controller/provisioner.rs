//! Provisioning: a closed batch is solved by the decision core against the cluster as it will be
//! (nodes in flight registered, the pods meant for them bound), each new node is launched through
//! the cloud with its fallbacks, and offerings without capacity are kept out of later solves.
//! Interruption warnings and terminations live here too: they hand pods back to provisioning.

use std::time::Duration;

use super::{Cluster, Controller, ControllerError, Wake};
use crate::catalog::CapacityType;
use crate::cloud::{CloudError, CloudProvider, LaunchRequest, NodeTemplate, OfferingKey};
use crate::disruption::edit::register;
use crate::domain::labels::{CAPACITY_TYPE, INSTANCE_TYPE, ZONE};
use crate::domain::ClusterSnapshot;
use crate::optimizer::{self, NewNode, OfferingRef, SolveSettings};

/// How long a pod no offering could hold waits before it is solved again.
const PARK_SECONDS: f64 = 60.0;
/// The spot interruption notice: the instance is reclaimed this long after the warning.
pub const INTERRUPTION_NOTICE_SECONDS: f64 = 120.0;

impl<P: CloudProvider> Controller<P> {
    pub fn batch_due(&mut self, cluster: &mut impl Cluster, now: f64) -> Result<(), ControllerError> {
        let Some((first, last)) = self.batch_window else { return Ok(()) };
        if now + 1e-6 < (last + self.settings.batch_idle).min(first + self.settings.batch_max) {
            return Ok(());
        }
        self.batch_window = None;
        self.batch.clear();
        self.provision(cluster, now)
    }

    /// The cluster as the next solve must see it: nodes in flight registered, their pods bound.
    fn provisioning_view(&self, cluster: &impl Cluster, now: f64) -> ClusterSnapshot {
        let mut view = cluster.snapshot().clone();
        let stamp = self.timestamp(now).to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
        for (name, node) in cluster.in_flight() {
            register(&mut view, &self.catalog, node, name, &stamp);
        }
        for p in view.pods.iter_mut().filter(|p| p.node_name.is_none()) {
            if let Some(n) = self.nominated.get(&p.key()) {
                p.node_name = Some(n.clone());
            }
        }
        view
    }

    fn provision(&mut self, cluster: &mut impl Cluster, now: f64) -> Result<(), ControllerError> {
        let view = self.provisioning_view(cluster, now);
        if view.pending_pods().next().is_none() {
            return Ok(());
        }
        let catalog = self.unavailable.mask(&self.catalog, now);
        let settings = SolveSettings {
            strategy: self.settings.provisioning,
            time_limit: Duration::from_secs_f64(self.settings.solve_time_limit),
            gap: self.settings.gap,
            lower_bound: false,
            fault: self.settings.solver_fault,
            ..SolveSettings::default()
        };
        let plan = optimizer::solve(&view, &catalog, &settings).map_err(|e| ControllerError::Provisioning(e.to_string()))?;
        self.record_solve(super::Phase::Provisioning, plan.solver.seconds, &plan.solver.status, plan.solver.gap);
        if plan.solver.status == optimizer::FALLBACK_STATUS {
            let why = plan.solver.notes.iter().find(|n| n.starts_with("solver failed")).cloned().unwrap_or_default();
            cluster.solver_fell_back(super::Phase::Provisioning.as_str(), &why);
        }
        for e in &plan.existing {
            for pod in &e.pods {
                self.nominated.insert(pod.clone(), e.node.clone());
                self.nominated_at.insert(pod.clone(), now);
            }
        }
        for node in &plan.nodes {
            self.launch(cluster, node, now);
        }
        for u in &plan.unschedulable {
            self.parked.insert(u.pod.clone(), now + PARK_SECONDS);
            tracing::debug!(pod = %u.pod, reason = ?u.reason, message = %u.message, "no offering can hold the pod");
            cluster.unschedulable(&u.pod, &u.message);
        }
        if !plan.unschedulable.is_empty() {
            self.wake(now + PARK_SECONDS, Wake::Retry);
        }
        Ok(())
    }

    /// Launches a plan's node (its offering, then its fallbacks) and nominates its pods; returns
    /// the node's name, or None when no offering had capacity.
    pub(super) fn launch(&mut self, cluster: &mut impl Cluster, node: &NewNode, now: f64) -> Option<String> {
        self.node_seq += 1;
        let name = cluster.claim_name(&node.nodepool, self.node_seq);
        if !cluster.claim_created(&name, node) {
            // the write may have taken effect although its answer was lost (the API server's
            // request timeout, then a retry answered AlreadyExists): nothing launches for the
            // claim, so it must not stay behind without an instance until the launch timeout
            cluster.claim_failed(&name);
            return None;
        }
        let template = NodeTemplate::of(cluster.snapshot(), &node.nodepool);
        let request = LaunchRequest::for_node(&name, node, template, &self.unavailable, now);
        let result = pollster::block_on(self.cloud.launch(&request));
        if result.is_err() {
            cluster.claim_failed(&name);
        }
        match result {
            Ok(launched) => {
                if !launched.insufficient.is_empty() {
                    self.stats.ice += 1;
                }
                for key in launched.insufficient {
                    self.unavailable.mark(key, now);
                }
                let i = launched.instance;
                tracing::debug!(hours = now / 3600.0, node = %name, instance_type = %i.offering.instance_type, zone = %i.offering.zone, capacity_type = i.offering.capacity_type.as_str(), price = i.offering.price, pods = node.pods.len(), "launched");
                self.instance_of.insert(name.clone(), i.id.clone());
                self.stats.launched += 1;
                for pod in &node.pods {
                    self.nominated.insert(pod.clone(), name.clone());
                }
                cluster.claim_launched(&name, &self.relabel(node, &i.offering), &i);
                Some(name)
            }
            Err(CloudError::InsufficientCapacity { offerings, .. }) => {
                self.stats.ice += 1;
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
            if let Some(it) = self.catalog.instance_types.iter().find(|t| t.name == o.instance_type) {
                n.labels.extend(it.labels(&self.catalog.region));
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

    /// The node of claim `claim` registered under its own name `node` (a kubelet names itself, the
    /// simulator names nodes after their claims): the controller knows it by that name from now on.
    pub fn claim_registered(&mut self, cluster: &mut impl Cluster, claim: &str, node: &str, now: f64) {
        if claim != node {
            if let Some(instance) = self.instance_of.remove(claim) {
                self.instance_of.insert(node.to_string(), instance);
            }
        }
        self.nominated.retain(|_, n| n != claim);
        self.node_registered(cluster, node, now);
    }

    /// A launched node registered: the scheduler decides where pods go now; pods it cannot bind
    /// wait for the next batch. A disruption command waiting for it may start draining.
    pub fn node_registered(&mut self, cluster: &mut impl Cluster, name: &str, now: f64) {
        self.nominated.retain(|_, n| n != name);
        self.replacement_ready(cluster, now);
    }

    /// A spot interruption warning: cordon, evict, keep the offering out of solves, and reclaim
    /// the instance after the notice (a node still booting goes at once).
    pub fn interruption_warning(&mut self, cluster: &mut impl Cluster, instance: &str, now: f64) {
        self.reclaim(cluster, instance, true, now);
    }

    /// The instance is going away for another reason (scheduled maintenance, stopped or terminated
    /// outside joiner): the same cordon, evict and reclaim, without holding the offering against it.
    pub fn instance_retiring(&mut self, cluster: &mut impl Cluster, instance: &str, now: f64) {
        self.reclaim(cluster, instance, false, now);
    }

    fn reclaim(&mut self, cluster: &mut impl Cluster, instance: &str, spot: bool, now: f64) {
        let Some(name) = self.node_of(instance).map(str::to_string) else { return };
        self.stats.interruptions += 1;
        if let Some((_, n)) = cluster.in_flight().into_iter().find(|(n, _)| *n == name) {
            if spot {
                let key = OfferingKey { instance_type: n.instance_type.clone(), zone: n.zone.clone(), capacity_type: n.capacity_type };
                self.unavailable.mark(key, now);
            }
            self.terminate(cluster, &name);
            return;
        }
        let Some(node) = cluster.snapshot().nodes.iter().find(|n| n.name == name) else { return };
        let get = |k: &str| node.labels.get(k).cloned().unwrap_or_default();
        if spot {
            self.unavailable.mark(OfferingKey { instance_type: get(INSTANCE_TYPE), zone: get(ZONE), capacity_type: CapacityType::Spot }, now);
        }
        cluster.set_disrupted(&name, true);
        self.reclaiming.insert(name.clone());
        let pods: Vec<String> = cluster.snapshot().pods.iter().filter(|p| p.node_name.as_deref() == Some(&name) && p.is_reschedulable()).map(|p| p.key()).collect();
        for p in pods {
            // the instance goes regardless: a refused eviction loses the pod at termination instead
            if cluster.evict(&p).is_ok() {
                self.stats.evicted += 1;
            }
        }
        self.wake(now + INTERRUPTION_NOTICE_SECONDS, Wake::Terminate(name));
    }

    /// Terminates a node's instance and deletes the node; pods still on it go pending.
    pub fn terminate(&mut self, cluster: &mut impl Cluster, name: &str) {
        self.reclaiming.remove(name);
        let Some(instance) = self.instance_of.remove(name) else { return };
        if let Err(e) = pollster::block_on(self.cloud.delete(&instance)) {
            tracing::warn!(node = %name, instance = %instance, error = %e, "terminate failed");
        }
        self.stats.terminated += 1;
        self.nominated.retain(|_, n| n != name);
        self.stats.evicted += cluster.delete_node(name);
        self.replacement_lost(cluster, name);
    }
}

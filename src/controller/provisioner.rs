//! Provisioning: a closed batch is solved by the decision core against the cluster as it will be
//! (nodes in flight registered, the pods meant for them bound), each new node is launched through
//! the cloud with its fallbacks, and offerings without capacity are kept out of later solves.
//! Interruption warnings and terminations live here too: they hand pods back to provisioning.

use std::sync::Arc;
use std::time::Duration;

use super::{Cluster, Controller, ControllerError, Wake};
mod certify;

use crate::catalog::CapacityType;
use crate::cloud::{
    CloudError, CloudProvider, Instance, LaunchRequest, Launched, NodeTemplate, OfferingKey,
    TERMINATE_RETRY_SECONDS,
};
use crate::disruption::edit::register;
use crate::domain::labels::{CAPACITY_TYPE, INSTANCE_TYPE, ZONE};
use crate::domain::ClusterSnapshot;
use crate::optimizer::{self, NewNode, OfferingRef, SolveSettings};
use certify::PlanToCertify;
pub use certify::{Certifier, ProvisioningCost, Uncertified};

/// How long a pod no offering could hold (none fits it, or every one that would is out of
/// capacity) waits before it is solved again, unless the host sets `Settings::unschedulable_retry`.
pub const UNSCHEDULABLE_RETRY_SECONDS: f64 = 60.0;
/// The spot interruption notice: the instance is reclaimed this long after the warning.
pub const INTERRUPTION_NOTICE_SECONDS: f64 = 120.0;

impl<P: CloudProvider> Controller<P> {
    pub fn batch_due(
        &mut self,
        cluster: &mut impl Cluster,
        now: f64,
    ) -> Result<(), ControllerError> {
        let Some((first, last)) = self.batch_window else {
            return Ok(());
        };
        if now + 1e-6 < (last + self.settings.batch_idle).min(first + self.settings.batch_max) {
            return Ok(());
        }
        self.leading()?;
        self.batch_window = None;
        self.batch.clear();
        self.provision(cluster, now)
    }

    /// The cluster as the next solve must see it: nodes in flight registered, their pods bound.
    fn provisioning_view(&self, cluster: &impl Cluster, now: f64) -> ClusterSnapshot {
        let mut view = cluster.snapshot().clone();
        let stamp = self
            .timestamp(now)
            .to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
        for (name, node) in cluster.in_flight() {
            register(&mut view, &self.catalog, node, name, &stamp);
        }
        for p in view.pods.iter_mut().filter(|p| p.node_name.is_none()) {
            if let Some(n) = self.nominated.get(&p.key()) {
                Arc::make_mut(p).node_name = Some(n.clone());
            }
        }
        view
    }

    fn provision(&mut self, cluster: &mut impl Cluster, now: f64) -> Result<(), ControllerError> {
        let view = self.provisioning_view(cluster, now);
        if view.pending_pods().next().is_none() {
            return Ok(());
        }
        // joiner buys room ahead for growing workloads; Karpenter's strategy does not
        let (view, stand_ins) = match self.settings.provisioning {
            optimizer::Strategy::Milp => optimizer::headroom::add(&view, &self.trend.growth()),
            optimizer::Strategy::Greedy => (view, 0),
        };
        let catalog = self.unavailable.mask(&self.catalog, now);
        let settings = SolveSettings {
            strategy: self.settings.provisioning,
            time_limit: Duration::from_secs_f64(self.settings.solve_time_limit),
            gap: self.settings.gap,
            lower_bound: false,
            fault: self.settings.solver_fault,
            ..SolveSettings::default()
        };
        let mut plan = optimizer::solve(&view, &catalog, &settings)
            .map_err(|e| ControllerError::Provisioning(e.to_string()))?;
        let no_types = match plan.unschedulable.is_empty() {
            true => vec![],
            false => super::report::pools_without_types(&view, &catalog),
        };
        let certify = self.certifier.clone().map(|c| {
            c.planned(&plan);
            (c, PlanToCertify::of(&plan, view, catalog, settings))
        });
        if stand_ins > 0 {
            optimizer::headroom::strip(&mut plan);
        }
        self.record_solve(
            super::Phase::Provisioning,
            plan.solver.seconds,
            plan.solver.status.into(),
            plan.solver.gap,
        );
        if plan.solver.status == optimizer::PlanStatus::FallbackGreedy {
            let why = plan
                .solver
                .notes
                .iter()
                .find(|n| n.starts_with("solver failed"))
                .cloned()
                .unwrap_or_default();
            cluster.solver_fell_back(super::Phase::Provisioning.as_str(), &why);
        }
        for e in &plan.existing {
            for pod in &e.pods {
                self.nominated.insert(pod.clone(), e.node.clone());
                self.nominated_at.insert(pod.clone(), now);
            }
        }
        self.launch_all(cluster, plan.nodes, now);
        // the bound is computed once the launches are under way, off the decision's path
        if let Some((certifier, todo)) = certify {
            certifier.spawn(todo);
        }
        for u in &plan.unschedulable {
            self.parked
                .insert(u.pod.clone(), now + self.settings.unschedulable_retry);
            tracing::debug!(pod = %u.pod, reason = ?u.reason, message = %u.message, "no offering can hold the pod");
            cluster.unschedulable(&u.pod, &u.message);
        }
        if !plan.unschedulable.is_empty() {
            for nodepool in no_types {
                cluster.notify(super::report::Notice::NoCompatibleInstanceTypes { nodepool });
            }
            self.wake(now + self.settings.unschedulable_retry, Wake::Retry);
        }
        Ok(())
    }

    /// Launches a plan's node (its offering, then its fallbacks) and nominates its pods; returns
    /// the node's name, or None when no offering had capacity.
    pub(super) fn launch(
        &mut self,
        cluster: &mut impl Cluster,
        node: &NewNode,
        now: f64,
    ) -> Option<String> {
        self.launch_all(cluster, vec![node.clone()], now)
            .pop()
            .flatten()
    }

    /// [`Controller::launch`] for every node of a plan: all NodeClaims are written first, then
    /// the launches go in groups of the cloud's concurrency, and their records are written
    /// together. One answer per node, in order. The nodes are taken, not copied: a launched node
    /// becomes the claim's record (a 5,000-node plan is about 20 MB).
    pub(super) fn launch_all(
        &mut self,
        cluster: &mut impl Cluster,
        nodes: Vec<NewNode>,
        now: f64,
    ) -> Vec<Option<String>> {
        let names: Vec<String> = nodes
            .iter()
            .map(|n| {
                self.node_seq += 1;
                cluster.claim_name(&n.nodepool, self.node_seq)
            })
            .collect();
        let claims: Vec<(String, &NewNode)> = names.iter().cloned().zip(&nodes).collect();
        let created = cluster.claims_created(&claims);
        let mut todo = Vec::new();
        for (i, ok) in created.into_iter().enumerate() {
            if ok {
                super::report::claim_created(&names[i], &nodes[i]);
                todo.push(i);
            } else {
                // the write may have taken effect although its answer was lost (the API server's
                // request timeout, then a retry answered AlreadyExists): nothing launches for the
                // claim, so it must not stay behind without an instance until the launch timeout
                cluster.claim_failed(&names[i]);
            }
        }
        let mut out = vec![None; nodes.len()];
        let mut nodes: Vec<Option<NewNode>> = nodes.into_iter().map(Some).collect();
        let mut launched = Vec::new();
        for group in todo.chunks(self.cloud.launch_concurrency().max(1)) {
            let requests: Vec<(usize, LaunchRequest)> = group
                .iter()
                .filter_map(|&i| {
                    nodes[i].as_ref().map(|n| {
                        (
                            i,
                            LaunchRequest::for_node(
                                &names[i],
                                n,
                                NodeTemplate::of(cluster.snapshot(), &n.nodepool),
                                &self.unavailable,
                                now,
                            ),
                        )
                    })
                })
                .collect();
            let results = pollster::block_on(futures::future::join_all(
                requests.iter().map(|(_, r)| self.cloud.launch(r)),
            ));
            for (&(i, _), result) in requests.iter().zip(results) {
                let Some(node) = nodes[i].take() else {
                    continue;
                };
                if let Some(record) = self.launched(cluster, &names[i], node, result, now) {
                    out[i] = Some(names[i].clone());
                    launched.push(record);
                }
            }
        }
        cluster.claims_launched(launched);
        out
    }

    /// Takes in one launch's result: what it found without capacity is kept out of solves, and a
    /// launched node's pods are nominated to it. The claim's record, for a launched node.
    fn launched(
        &mut self,
        cluster: &mut impl Cluster,
        name: &str,
        node: NewNode,
        result: Result<Launched, CloudError>,
        now: f64,
    ) -> Option<(String, NewNode, Instance)> {
        if result.is_err() {
            cluster.claim_failed(name);
        }
        if let Err(e @ CloudError::InsufficientCapacity { .. }) = &result {
            let error = e.to_string();
            let claim = name.to_string();
            cluster.notify(super::report::Notice::InsufficientCapacity { claim, error });
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
                super::report::claim_launched(name, &node, &i);
                self.instance_of.insert(name.to_string(), i.id.clone());
                self.stats.launched += 1;
                for pod in &node.pods {
                    self.nominated.insert(pod.clone(), name.to_string());
                }
                Some((name.to_string(), self.relabel(node, &i.offering), i))
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
    fn relabel(&self, mut n: NewNode, o: &OfferingRef) -> NewNode {
        if o.instance_type != n.instance_type {
            if let Some(it) = self
                .catalog
                .instance_types
                .iter()
                .find(|t| t.name == o.instance_type)
            {
                n.labels.extend(it.labels(&self.catalog.region));
            }
        }
        n.instance_type = o.instance_type.clone();
        n.zone = o.zone.clone();
        n.capacity_type = o.capacity_type;
        n.price = o.price;
        n.labels
            .insert(INSTANCE_TYPE.to_string(), o.instance_type.clone());
        n.labels.insert(ZONE.to_string(), o.zone.clone());
        n.labels.insert(
            CAPACITY_TYPE.to_string(),
            o.capacity_type.as_str().to_string(),
        );
        n.fallbacks.clear();
        n
    }

    /// The node of claim `claim` registered under its own name `node` (a kubelet names itself, the
    /// simulator names nodes after their claims): the controller knows it by that name from now on.
    pub fn claim_registered(
        &mut self,
        cluster: &mut impl Cluster,
        claim: &str,
        node: &str,
        now: f64,
    ) {
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
    /// outside joiner): the same cordon, evict and reclaim, without holding the offering against
    /// it.
    pub fn instance_retiring(&mut self, cluster: &mut impl Cluster, instance: &str, now: f64) {
        self.reclaim(cluster, instance, false, now);
    }

    fn reclaim(&mut self, cluster: &mut impl Cluster, instance: &str, spot: bool, now: f64) {
        if self.leading().is_err() {
            return;
        }
        let Some(name) = self.node_of(instance).map(str::to_string) else {
            return;
        };
        self.stats.interruptions += 1;
        if let Some((_, n)) = cluster.in_flight().into_iter().find(|(n, _)| *n == name) {
            if spot {
                let key = OfferingKey {
                    instance_type: n.instance_type.clone(),
                    zone: n.zone.clone(),
                    capacity_type: n.capacity_type,
                };
                self.unavailable.mark(key, now);
            }
            if !self.terminate(cluster, &name) {
                // the in-cluster host backs off from there
                self.wake(now + TERMINATE_RETRY_SECONDS, Wake::Terminate(name));
            }
            return;
        }
        let Some(node) = cluster.snapshot().nodes.iter().find(|n| n.name == name) else {
            return;
        };
        let get = |k: &str| node.labels.get(k).cloned().unwrap_or_default();
        if spot {
            self.unavailable.mark(
                OfferingKey {
                    instance_type: get(INSTANCE_TYPE),
                    zone: get(ZONE),
                    capacity_type: CapacityType::Spot,
                },
                now,
            );
        }
        cluster.set_disrupted(&name, true);
        self.reclaiming.insert(name.clone());
        let pods: Vec<String> = cluster
            .snapshot()
            .pods
            .iter()
            .filter(|p| p.node_name.as_deref() == Some(&name) && p.is_reschedulable())
            .map(|p| p.key())
            .collect();
        for p in pods {
            // the instance goes regardless: a refused eviction loses the pod at termination instead
            if cluster.evict(&p).is_ok() {
                self.stats.evicted += 1;
                self.stats.evicted_by_interruption += 1;
            }
        }
        self.wake(now + INTERRUPTION_NOTICE_SECONDS, Wake::Terminate(name));
    }

    /// Terminates a node's instance and, once the cloud has accepted that, deletes the node (its
    /// finalizer comes off); pods still on it go pending. Whether the node is done with: false
    /// when this replica does not lead or the cloud refused, and then nothing changed (the
    /// instance stays on record, the node and a reclaim stay) so that the caller asks again. A
    /// node with no instance on record has nothing to terminate and counts as done.
    pub fn terminate(&mut self, cluster: &mut impl Cluster, name: &str) -> bool {
        if self.leading().is_err() {
            return false;
        }
        // the id is forgotten only once the cloud accepted: a refused node must still name it
        let Some(instance) = self.instance_of.get(name) else {
            self.reclaiming.remove(name);
            return true;
        };
        if let Err(e) = pollster::block_on(self.cloud.delete(instance)) {
            tracing::warn!(node = %name, instance = %instance, error = %e, "termination refused; the node stays until the cloud accepts it");
            return false;
        }
        self.instance_of.remove(name);
        let reclaimed = self.reclaiming.remove(name);
        self.stats.terminated += 1;
        self.nominated.retain(|_, n| n != name);
        let lost = cluster.delete_node(name);
        self.stats.evicted += lost;
        if reclaimed {
            self.stats.evicted_by_interruption += lost;
        }
        self.replacement_lost(cluster, name);
        true
    }
}

impl<P: CloudProvider> Controller<P> {
    /// Reports each provisioning plan's cost to `certifier`, then computes the plan's certified
    /// lower bound on a thread of its own and reports that too.
    pub fn with_certifier(mut self, certifier: Certifier) -> Self {
        self.certifier = Some(certifier);
        self
    }
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;
    use std::rc::Rc;

    use super::*;
    use crate::catalog::Catalog;
    use crate::cloud::{Instance, InstanceState};
    use crate::controller::tests::settings;
    use crate::controller::EvictionRefused;
    use crate::optimizer::NewNode;

    type Log = Rc<RefCell<Vec<String>>>;

    /// A cloud whose "scarce" offerings never have capacity; it logs every launch's offerings.
    struct Scarce {
        log: Log,
        concurrency: usize,
    }

    impl CloudProvider for Scarce {
        async fn launch(&self, request: &LaunchRequest) -> Result<Launched, CloudError> {
            let tried: Vec<&str> = request
                .offerings
                .iter()
                .map(|o| o.instance_type.as_str())
                .collect();
            self.log
                .borrow_mut()
                .push(format!("launch {} {}", request.claim, tried.join(",")));
            let (insufficient, rest): (Vec<&OfferingRef>, Vec<&OfferingRef>) = request
                .offerings
                .iter()
                .partition(|o| o.instance_type == "scarce");
            let insufficient: Vec<OfferingKey> =
                insufficient.into_iter().map(OfferingKey::from).collect();
            let Some(offering) = rest.first() else {
                return Err(CloudError::InsufficientCapacity {
                    claim: request.claim.clone(),
                    offerings: insufficient,
                });
            };
            let instance = Instance {
                id: format!("i-{}", request.claim),
                claim: request.claim.clone(),
                nodepool: request.nodepool.clone(),
                offering: (*offering).clone(),
                state: InstanceState::Pending,
            };
            Ok(Launched {
                instance,
                insufficient,
            })
        }
        fn launch_concurrency(&self) -> usize {
            self.concurrency
        }
        async fn delete(&self, _: &str) -> Result<(), CloudError> {
            Ok(())
        }
        async fn get(&self, id: &str) -> Result<Instance, CloudError> {
            Err(CloudError::NotFound(id.to_string()))
        }
        async fn list(&self) -> Result<Vec<Instance>, CloudError> {
            Ok(vec![])
        }
        async fn catalog(&self) -> Result<Catalog, CloudError> {
            Ok(Catalog {
                region: "test".into(),
                instance_types: vec![],
                provenance: None,
            })
        }
        async fn drifted(&self, _: &str) -> Result<Option<String>, CloudError> {
            Ok(None)
        }
    }

    /// A cluster that logs claim writes into the cloud's log, so their order against launches
    /// shows.
    struct Recording {
        snapshot: ClusterSnapshot,
        log: Log,
    }

    impl Cluster for Recording {
        fn snapshot(&self) -> &ClusterSnapshot {
            &self.snapshot
        }
        fn in_flight(&self) -> Vec<(&str, &NewNode)> {
            vec![]
        }
        fn claim_created(&mut self, name: &str, _: &NewNode) -> bool {
            self.log.borrow_mut().push(format!("create {name}"));
            true
        }
        fn claim_launched(&mut self, name: &str, node: &NewNode, _: &Instance) {
            self.log
                .borrow_mut()
                .push(format!("record {name} {}", node.instance_type));
        }
        fn set_disrupted(&mut self, _: &str, _: bool) {}
        fn evict(&mut self, _: &str) -> Result<(), EvictionRefused> {
            Ok(())
        }
        fn delete_node(&mut self, _: &str) -> usize {
            0
        }
    }

    fn offering(instance_type: &str) -> OfferingRef {
        OfferingRef {
            instance_type: instance_type.into(),
            zone: "z1".into(),
            capacity_type: CapacityType::OnDemand,
            price: 1.0,
        }
    }

    fn node(id: &str) -> NewNode {
        let o = offering("scarce");
        NewNode {
            id: id.into(),
            nodepool: "default".into(),
            instance_type: o.instance_type,
            zone: o.zone,
            capacity_type: o.capacity_type,
            price: o.price,
            labels: Default::default(),
            allocatable: Default::default(),
            pods: vec![format!("default/{id}")],
            fallbacks: vec![offering("plenty")],
        }
    }

    /// A controller on a [`Scarce`] cloud of `concurrency`, a [`Recording`] cluster, their log.
    fn setup(concurrency: usize) -> (Controller<Scarce>, Recording, Log) {
        let log: Log = Rc::default();
        let cloud = Scarce {
            log: log.clone(),
            concurrency,
        };
        let catalog = Catalog {
            region: "test".into(),
            instance_types: vec![],
            provenance: None,
        };
        let cluster = Recording {
            snapshot: ClusterSnapshot::default(),
            log: log.clone(),
        };
        (Controller::new(settings(), catalog, cloud), cluster, log)
    }

    #[test]
    fn every_claim_is_written_before_any_launch_and_a_group_s_ice_spares_the_next_group() {
        let (mut ctl, mut cluster, log) = setup(2);
        let names = ctl.launch_all(&mut cluster, vec![node("a"), node("b"), node("c")], 0.0);
        assert_eq!(
            names,
            vec![
                Some("default-00001".to_string()),
                Some("default-00002".to_string()),
                Some("default-00003".to_string())
            ]
        );
        let log = log.borrow().clone();
        let expected = [
            "create default-00001",
            "create default-00002",
            "create default-00003",
            // the first group of two both try the scarce offering; the third knows better
            "launch default-00001 scarce,plenty",
            "launch default-00002 scarce,plenty",
            "launch default-00003 plenty",
            // the records name the offering each node really got
            "record default-00001 plenty",
            "record default-00002 plenty",
            "record default-00003 plenty",
        ];
        assert_eq!(log, expected);
        assert_eq!(ctl.stats.ice, 2);
    }

    #[test]
    fn one_at_a_time_every_launch_knows_what_the_one_before_found() {
        let (mut ctl, mut cluster, log) = setup(1);
        ctl.launch_all(&mut cluster, vec![node("a"), node("b")], 0.0);
        let launches: Vec<String> = log
            .borrow()
            .iter()
            .filter(|l| l.starts_with("launch"))
            .cloned()
            .collect();
        assert_eq!(
            launches,
            [
                "launch default-00001 scarce,plenty",
                "launch default-00002 plenty"
            ]
        );
    }
}

//! [`KubeCluster`]: the controller's [`Cluster`] on a real API server. Reads come from the snapshot
//! rebuilt from the caches at every step; writes go to the API server at once (NodeClaims, node
//! taints, the Eviction API, deletes) and are mirrored into the snapshot, so the rest of a step
//! sees its own writes before the watches bring them back.
//!
//! It is driven from the decision thread, never from the async runtime: each write blocks on the
//! runtime's handle, so solves and writes stay off the tokio workers. Every write asks the
//! [`LeaderToken`] first: a replica whose leadership lapsed mid-step sends nothing more.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use futures::channel::mpsc::UnboundedSender;
use futures::StreamExt;
use governor::DefaultDirectRateLimiter;
use k8s_openapi::api::core::v1::{Node, ObjectReference, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, DeleteParams, DynamicObject, EvictParams, Patch, PatchParams, PostParams};
use kube::runtime::events::{Event, EventType, Recorder};
use kube::runtime::reflector::ObjectRef;
use kube::{Client, Resource};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::de::DeserializeOwned;
use serde_json::json;
use tokio::runtime::Handle;

use super::caches::{karpenter_resource, Caches};
use super::claims::{self, k8s_time, DISRUPTED_TAINT, TERMINATION_FINALIZER};
use super::events::{self, Dedupe};
use crate::catalog::Catalog;
use crate::cloud::Instance;
use crate::controller::{Cluster, EvictionRefused, LeaderToken};
use crate::disruption::timing::{parse_timestamp, Timestamp};
use crate::domain::{ClusterSnapshot, Resources, Taint, TaintEffect};
use crate::optimizer::NewNode;

/// Writes made and refused, for metrics.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Writes {
    pub claims_created: u64,
    pub claims_deleted: u64,
    pub evictions: u64,
    pub evictions_refused: u64,
    pub errors: u64,
    /// Disruption commands rolled back at their deadline.
    pub disruptions_timed_out: u64,
    /// Writes not sent because this replica no longer leads.
    pub not_leader: u64,
}

pub struct KubeCluster {
    client: Client,
    /// Without automatic retries: a PodDisruptionBudget's 429 comes back at once.
    evictions: Client,
    rt: Handle,
    caches: Caches,
    catalog: Catalog,
    /// Events go to a publisher task (see [`events::spawn_publisher`]).
    events: UnboundedSender<(ObjectReference, Event)>,
    /// Admits `Nominated` Events (see [`events::nomination_limiter`]).
    nominations: DefaultDirectRateLimiter,
    /// `FailedScheduling` Events sent in the last five minutes.
    failed_scheduling: Dedupe,
    /// The controller's Notices sent lately (see [`events::Notices`]).
    notices: events::Notices,
    snap: ClusterSnapshot,
    /// Position of each pod of `snap` by key, built when the first claim of a step is written.
    pod_index: Option<std::collections::HashMap<String, usize>>,
    /// Claims this process created, as planned, until their node registers or they go. The
    /// caches may not show a claim yet right after its creation; this keeps it counted.
    planned: BTreeMap<String, Arc<NewNode>>,
    /// Claims without a registered node, by name (sharing `planned`'s nodes).
    in_flight: BTreeMap<String, Arc<NewNode>>,
    /// The time of the step, for conditions written during it.
    now: Time,
    /// Launches whose record on the claim (labels, status) failed, retried every step: without
    /// the providerID the claim's node could never register.
    unrecorded: BTreeMap<String, Unrecorded>,
    /// Claims written Initialized by this process.
    initialized_claims: std::collections::BTreeSet<String>,
    /// Draws claim name suffixes; seeded per process so restarts draw new names.
    names: ChaCha8Rng,
    /// Asked before every write; without leader election it never lapses.
    leader: LeaderToken,
    pub writes: Writes,
}

/// NodeClaim writes of one plan in flight at once: a pass may write thousands, and one at a time
/// they took most of a large pass (each is a round trip to the API server).
const WRITE_CONCURRENCY: usize = 16;
/// NodeClaims built and written per round of concurrent writes.
const WRITE_CHUNK: usize = 256;

impl KubeCluster {
    /// `seed` draws claim name suffixes: it must differ between processes (see `operator`).
    pub fn new(
        client: Client,
        evictions: Client,
        rt: Handle,
        caches: Caches,
        catalog: Catalog,
        recorder: Recorder,
        seed: u64,
    ) -> KubeCluster {
        let events = events::spawn_publisher(&rt, recorder);
        KubeCluster {
            client,
            evictions,
            rt,
            caches,
            catalog,
            events,
            nominations: events::nomination_limiter(),
            failed_scheduling: Dedupe::new(events::FAILED_SCHEDULING_REPEAT, Instant::now()),
            notices: events::Notices::new(Instant::now()),
            snap: ClusterSnapshot::default(),
            pod_index: None,
            planned: BTreeMap::new(),
            in_flight: BTreeMap::new(),
            now: k8s_time(chrono::DateTime::UNIX_EPOCH),
            unrecorded: BTreeMap::new(),
            initialized_claims: Default::default(),
            names: ChaCha8Rng::seed_from_u64(seed),
            leader: LeaderToken::always(),
            writes: Writes::default(),
        }
    }

    /// Writes only while `token` leads.
    pub fn with_leader_token(mut self, token: LeaderToken) -> Self {
        self.leader = token;
        self
    }

    /// Whether a write may go out now; a refused one is counted and logged.
    pub fn leads(&mut self, what: &str) -> bool {
        if self.leader.is_leader() {
            return true;
        }
        self.writes.not_leader += 1;
        tracing::debug!(write = what, "not the leader; write not sent");
        false
    }

    pub fn caches(&self) -> &Caches {
        &self.caches
    }

    pub fn catalog(&self) -> &Catalog {
        &self.catalog
    }

    pub fn set_catalog(&mut self, catalog: Catalog) {
        self.catalog = catalog;
    }

    pub fn client(&self) -> &Client {
        &self.client
    }

    pub fn handle(&self) -> &Handle {
        &self.rt
    }

    /// Drops the last step's snapshot before the next one is built, so the two are never held at
    /// once (on a large cluster each is a copy of every pod).
    pub fn forget_snapshot(&mut self) {
        self.snap = ClusterSnapshot::default();
        self.pod_index = None;
    }

    /// Takes the step's snapshot (built from the caches) at `now`, retries unrecorded launches,
    /// and works out which claims are in flight.
    pub fn refresh(&mut self, snapshot: ClusterSnapshot, now: Timestamp) {
        self.snap = snapshot;
        self.pod_index = None;
        self.now = k8s_time(now);
        self.record_launches();
        let claims = self.caches.node_claims();
        self.in_flight.clear();
        for c in &claims {
            let name = c.metadata.name.clone().unwrap_or_default();
            if claims::node_name_of(c).is_some() || c.metadata.deletion_timestamp.is_some() {
                self.planned.remove(&name);
                continue;
            }
            let node = self.planned.get(&name).cloned().or_else(|| {
                let class = self
                    .snap
                    .node_class(c.data["spec"]["nodeClassRef"]["name"].as_str());
                claims::planned_node(c, &self.catalog, class).map(Arc::new)
            });
            if let Some(node) = node {
                self.in_flight.insert(name, node);
            }
        }
        // created a moment ago and not in the caches yet
        for (name, node) in &self.planned {
            if !claims
                .iter()
                .any(|c| c.metadata.name.as_deref() == Some(name))
            {
                self.in_flight.insert(name.clone(), node.clone());
            }
        }
    }

    /// The claim was just written Initialized (the caches may not show it yet).
    pub fn initialized(&mut self, claim: &str) {
        self.initialized_claims.insert(claim.to_string());
    }

    /// The claim's node registered: it is capacity in the snapshot now, no longer in flight.
    pub fn registered(&mut self, claim: &str) {
        self.planned.remove(claim);
        self.in_flight.remove(claim);
    }

    fn claims_api(&self) -> Api<DynamicObject> {
        Api::all_with(self.client.clone(), &karpenter_resource("NodeClaim"))
    }

    /// Publishes an Event on a pod; failures are logged, never fatal.
    pub fn pod_event(&mut self, key: &str, kind: EventType, reason: &str, note: String) {
        let Some((ns, name)) = key.split_once('/') else {
            return;
        };
        // a keyed lookup: a pass may publish an Event for each of thousands of pods
        let Some(pod) = self.caches.pods.get(&ObjectRef::new(name).within(ns)) else {
            return;
        };
        self.publish(
            &pod.object_ref(),
            Event {
                type_: kind,
                reason: reason.into(),
                note: Some(note),
                action: "Provisioning".into(),
                secondary: None,
            },
        );
    }

    /// Queues an Event about `object` for the publisher task; failures are logged, never fatal.
    fn publish(&self, object: &ObjectReference, event: Event) {
        if !self.leader.is_leader() {
            return;
        }
        if self.events.unbounded_send((object.clone(), event)).is_err() {
            tracing::debug!(object = ?object.name, "event publisher stopped");
        }
    }

    /// Writes the launches not yet recorded on their claims; what fails is tried again next step.
    fn record_launches(&mut self) {
        if self.unrecorded.is_empty() || !self.leads("record launches") {
            return;
        }
        let api = self.claims_api();
        let params = PatchParams::default();
        let entries: Vec<_> = std::mem::take(&mut self.unrecorded).into_iter().collect();
        let patches = futures::stream::iter(&entries)
            .map(|(name, u)| {
                let (api, params) = (&api, &params);
                async move {
                    // built as sent: a 5,000-node plan's patches held at once took about 30 MB
                    let (labels, status) =
                        claims::launched_patches(&u.node, &u.instance, &u.capacity, &u.at);
                    api.patch(name, params, &Patch::Merge(&labels)).await?;
                    api.patch_status(name, params, &Patch::Merge(&status))
                        .await
                        .map(drop)
                }
            })
            .buffered(WRITE_CONCURRENCY);
        let results: Vec<_> = self.rt.block_on(patches.collect());
        for ((name, record), result) in entries.into_iter().zip(results) {
            match result {
                Ok(_) => {}
                Err(kube::Error::Api(e)) if e.code == 404 => {
                    tracing::warn!(claim = %name, "nodeclaim gone before its launch was recorded")
                }
                Err(e) => {
                    self.writes.errors += 1;
                    tracing::warn!(claim = %name, error = %e, "nodeclaim launch not recorded, retrying");
                    self.unrecorded.insert(name, record);
                }
            }
        }
    }

    /// The NodeClaim object for a plan's node, or None (logged) when it cannot be built.
    fn claim_object(&mut self, name: &str, node: &NewNode) -> Option<DynamicObject> {
        if self.pod_index.is_none() {
            self.pod_index = Some(
                self.snap
                    .pods
                    .iter()
                    .enumerate()
                    .map(|(i, p)| (p.key(), i))
                    .collect(),
            );
        }
        let index = self.pod_index.as_ref().expect("just built");
        let pods: Vec<&crate::domain::Pod> = node
            .pods
            .iter()
            .filter_map(|k| index.get(k))
            .map(|&i| &*self.snap.pods[i])
            .collect();
        let object = claims::claim_object_for(name, node, &self.snap, &pods);
        match serde_json::from_value(object) {
            Ok(c) => Some(c),
            Err(e) => {
                tracing::error!(claim = name, error = %e, "nodeclaim not built");
                None
            }
        }
    }

    /// Takes in the answer to one NodeClaim's POST (None: it was never built): whether the claim
    /// is recorded, so that its node may launch.
    fn claim_written(
        &mut self,
        name: &str,
        node: &NewNode,
        result: Option<Result<(), kube::Error>>,
    ) -> bool {
        match result {
            None => false,
            Some(Ok(_)) => {
                self.writes.claims_created += 1;
                let shared = Arc::new(node.clone());
                self.planned.insert(name.to_string(), shared.clone());
                self.in_flight.insert(name.to_string(), shared);
                let admitted = node
                    .pods
                    .iter()
                    .take_while(|_| self.nominations.check().is_ok())
                    .count();
                for pod in &node.pods[..admitted] {
                    let note = format!("Pod should schedule on: nodeclaim/{name}");
                    self.pod_event(pod, EventType::Normal, "Nominated", note);
                }
                true
            }
            Some(Err(e)) => {
                self.writes.errors += 1;
                tracing::warn!(claim = name, error = %e, "nodeclaim create failed");
                false
            }
        }
    }

    /// Publishes a Warning Event on joiner's cost-weight ConfigMap.
    pub fn config_map_event(&mut self, reason: &str, note: String) {
        let Some(cm) = self.caches.config_maps.state().into_iter().next() else {
            return;
        };
        self.publish(
            &cm.object_ref(&()),
            Event {
                type_: EventType::Warning,
                reason: reason.into(),
                note: Some(note),
                action: "LoadCostWeights".into(),
                secondary: None,
            },
        );
    }

    /// Deletes a NodeClaim and takes joiner's finalizer off it; absent is fine.
    pub fn delete_claim(&mut self, name: &str) {
        if !self.leads("delete nodeclaim") {
            return;
        }
        if self.release(self.claims_api(), name) {
            self.writes.claims_deleted += 1;
            tracing::info!(nodeclaim = name, "deleted nodeclaim");
        }
        self.planned.remove(name);
        self.in_flight.remove(name);
        self.initialized_claims.remove(name);
        self.snap.node_claims.retain(|c| c.name != name);
    }

    /// Deletes an object and takes joiner's termination finalizer off it, leaving any other
    /// controller's finalizer to hold it; one already gone is fine. Whether it went (or is held
    /// only by others' finalizers).
    fn release<K>(&mut self, api: Api<K>, name: &str) -> bool
    where
        K: Resource + Clone + DeserializeOwned + std::fmt::Debug,
    {
        if !self.leads("release") {
            return false;
        }
        let result = self.rt.block_on(async {
            // an object held by finalizers comes back marked: that is the state to patch
            match api.delete(name, &DeleteParams::default()).await?.left() {
                Some(marked) => unfinalize(&api, name, marked.meta()).await,
                None => Ok(()),
            }
        });
        match result {
            Ok(()) => true,
            Err(kube::Error::Api(e)) if e.code == 404 => false,
            Err(e) => {
                self.writes.errors += 1;
                tracing::warn!(object = name, error = %e, "finalizer not removed, retrying next step");
                false
            }
        }
    }

    /// The NodeClaim whose node is `node`, from the caches.
    pub fn claim_of_node(&self, node: &str) -> Option<String> {
        self.caches
            .node_claims()
            .iter()
            .find(|c| claims::node_name_of(c) == Some(node))
            .and_then(|c| c.metadata.name.clone())
    }

    /// Suffix like `generateName`'s: five characters from the API server's alphabet.
    fn suffix(&mut self) -> String {
        const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
        (0..5)
            .map(|_| ALPHABET[self.names.random_range(0..ALPHABET.len())] as char)
            .collect()
    }
}

impl Cluster for KubeCluster {
    fn snapshot(&self) -> &ClusterSnapshot {
        &self.snap
    }

    fn in_flight(&self) -> Vec<(&str, &NewNode)> {
        self.in_flight
            .iter()
            .map(|(n, node)| (n.as_str(), &**node))
            .collect()
    }

    fn claim_name(&mut self, nodepool: &str, _seq: u64) -> String {
        format!("{nodepool}-{}", self.suffix())
    }

    fn claim_created(&mut self, name: &str, node: &NewNode) -> bool {
        self.claims_created(&[(name.to_string(), node)])[0]
    }

    fn claims_created(&mut self, batch: &[(String, &NewNode)]) -> Vec<bool> {
        if !self.leads("create nodeclaims") {
            return vec![false; batch.len()];
        }
        let api = self.claims_api();
        let mut written = Vec::with_capacity(batch.len());
        // a few hundred at a time: only their objects are held, not a whole plan's
        for chunk in batch.chunks(WRITE_CHUNK) {
            let objects: Vec<Option<DynamicObject>> = chunk
                .iter()
                .map(|(name, node)| self.claim_object(name, node))
                .collect();
            let posts = futures::stream::iter(&objects)
                .map(|object| {
                    let api = &api;
                    async move {
                        match object {
                            Some(claim) => {
                                Some(api.create(&PostParams::default(), claim).await.map(drop))
                            }
                            None => None,
                        }
                    }
                })
                .buffered(WRITE_CONCURRENCY);
            let results: Vec<_> = self.rt.block_on(posts.collect());
            written.extend(
                chunk
                    .iter()
                    .zip(results)
                    .map(|((name, node), result)| self.claim_written(name, node, result)),
            );
        }
        written
    }

    fn initialized(&self, name: &str) -> bool {
        self.initialized_claims.contains(name)
            || self.caches.node_claims().iter().any(|c| {
                c.metadata.name.as_deref() == Some(name)
                    && claims::has_condition(c, crate::api::NODECLAIM_INITIALIZED)
            })
    }

    fn claim_failed(&mut self, name: &str) {
        self.delete_claim(name);
    }

    fn claim_launched(&mut self, name: &str, node: &NewNode, instance: &Instance) {
        self.claims_launched(vec![(name.to_string(), node.clone(), instance.clone())]);
    }

    fn claims_launched(&mut self, launched: Vec<(String, NewNode, Instance)>) {
        for (name, node, instance) in launched {
            let class = self
                .snap
                .nodepools
                .iter()
                .find(|p| p.name == node.nodepool)
                .and_then(|p| self.snap.node_class(p.node_class.as_deref()));
            let capacity = self
                .catalog
                .instance_types
                .iter()
                .find(|t| t.name == node.instance_type)
                .map(|t| t.node_capacity(class))
                .unwrap_or_default();
            let shared = Arc::new(node);
            self.unrecorded.insert(
                name.clone(),
                Unrecorded {
                    node: shared.clone(),
                    instance,
                    capacity,
                    at: self.now.clone(),
                },
            );
            self.planned.insert(name.clone(), shared.clone());
            self.in_flight.insert(name, shared);
        }
        self.record_launches();
    }

    fn unschedulable(&mut self, pod: &str, why: &str) {
        // a pod no offering holds is retried every minute; its Event stands for five
        if self.failed_scheduling.admit(pod, why, Instant::now()) {
            self.pod_event(
                pod,
                EventType::Warning,
                "FailedScheduling",
                format!("no nodeclaim can be planned: {why}"),
            );
        }
    }

    /// A Warning Event on every NodePool: the decision affects them all, and their Events are where
    /// Karpenter users look for an autoscaler's complaints.
    fn solver_fell_back(&mut self, phase: &str, why: &str) {
        let note = format!("{phase} decision fell back to karpenter's rules: {why}");
        for pool in self.caches.nodepools.state() {
            let reference = ObjectReference {
                api_version: Some("karpenter.sh/v1".into()),
                kind: Some("NodePool".into()),
                name: pool.metadata.name.clone(),
                uid: pool.metadata.uid.clone(),
                resource_version: pool.metadata.resource_version.clone(),
                ..Default::default()
            };
            self.publish(
                &reference,
                Event {
                    type_: EventType::Warning,
                    reason: "SolverFallback".into(),
                    note: Some(note.clone()),
                    action: "Decide".into(),
                    secondary: None,
                },
            );
        }
    }

    fn disruption_timed_out(&mut self, nodes: &[String], why: &str) {
        self.writes.disruptions_timed_out += 1;
        for entry in self.caches.nodes.state() {
            if !nodes.iter().any(|n| n == entry.name()) {
                continue;
            }
            self.publish(
                &entry.object_ref(),
                Event {
                    type_: EventType::Warning,
                    reason: "DisruptionTimedOut".into(),
                    note: Some(why.to_string()),
                    action: "Disrupt".into(),
                    secondary: None,
                },
            );
        }
    }

    fn notify(&mut self, notice: crate::controller::report::Notice) {
        let now = Instant::now();
        for object in events::notice_objects(&self.caches, &notice) {
            let key = format!("{:?}/{:?}", object.kind, object.name);
            if self.notices.admit(&key, &notice, now) {
                self.publish(&object, events::notice_event(&notice));
            }
        }
    }

    fn set_disrupted(&mut self, node: &str, disrupted: bool) {
        if !self.leads("node taint") {
            return;
        }
        let cordoned = set_node_taint(self, node, disrupted);
        // the step's view follows at once; the next snapshot reads the patched node back
        if let Some(n) = self.snap.nodes.iter_mut().find(|n| n.name == node) {
            let n = Arc::make_mut(n);
            n.taints.retain(|t| t.key != DISRUPTED_TAINT);
            if disrupted {
                n.taints.push(Taint {
                    key: DISRUPTED_TAINT.into(),
                    value: String::new(),
                    effect: TaintEffect::NoSchedule,
                });
            }
            n.unschedulable = disrupted || cordoned;
        }
    }

    fn evict(&mut self, key: &str) -> Result<(), EvictionRefused> {
        let Some((ns, name)) = key.split_once('/') else {
            return Err(EvictionRefused {
                pod: key.to_string(),
                reason: "not a namespace/name key".into(),
            });
        };
        if !self.leads("evict") {
            return Err(EvictionRefused {
                pod: key.to_string(),
                reason: crate::controller::NotLeader.to_string(),
            });
        }
        let api: Api<Pod> = Api::namespaced(self.evictions.clone(), ns);
        match self.rt.block_on(api.evict(name, &EvictParams::default())) {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 404 => {}
            Err(e) => {
                self.writes.evictions_refused += 1;
                let reason = match e {
                    kube::Error::Api(s) => s.message,
                    other => other.to_string(),
                };
                tracing::debug!(pod = key, reason = %reason, "eviction refused");
                return Err(EvictionRefused {
                    pod: key.to_string(),
                    reason,
                });
            }
        }
        self.writes.evictions += 1;
        tracing::debug!(pod = key, "evicted");
        self.snap.pods.retain(|p| p.key() != key);
        self.pod_index = None;
        Ok(())
    }

    fn drained(&mut self, node: &str) -> bool {
        let now = parse_timestamp(&self.now.0.to_string()).unwrap_or_else(|_| chrono::Utc::now());
        super::lifecycle::disruption_drained(self, node, now)
    }

    fn delete_node(&mut self, name: &str) -> usize {
        if !self.leads("delete node") {
            return 0;
        }
        // a claim with no node yet: launched by this process (in flight), or left by an earlier one
        // (read back from the cache after a restart, not in flight here)
        let claim_only = !self.snap.nodes.iter().any(|n| n.name == name)
            && self
                .caches
                .node_claims()
                .iter()
                .any(|c| c.metadata.name.as_deref() == Some(name));
        if self.in_flight.contains_key(name) || claim_only {
            self.delete_claim(name);
            return 0;
        }
        let moved = self
            .snap
            .pods
            .iter()
            .filter(|p| p.node_name.as_deref() == Some(name) && p.is_reschedulable())
            .count();
        if let Some(claim) = self.claim_of_node(name) {
            self.delete_claim(&claim);
        }
        self.release(Api::<Node>::all(self.client.clone()), name);
        self.snap.nodes.retain(|n| n.name != name);
        self.snap
            .pods
            .retain(|p| p.node_name.as_deref() != Some(name));
        self.pod_index = None;
        moved
    }
}

/// A launch to record on its claim: the node as launched, its instance, its type's capacity and
/// the step it launched in.
#[derive(Debug, Clone)]
struct Unrecorded {
    node: Arc<NewNode>,
    instance: Instance,
    capacity: Resources,
    at: Time,
}

/// Adds or removes the `karpenter.sh/disrupted:NoSchedule` taint, keeping the node's others;
/// returns whether the node is cordoned (`spec.unschedulable`) on its own account.
fn set_node_taint(cluster: &mut KubeCluster, node: &str, present: bool) -> bool {
    let Some(object) = cluster
        .caches
        .nodes
        .state()
        .into_iter()
        .find(|n| n.name() == node)
    else {
        return false;
    };
    let cordoned = object
        .value
        .object
        .spec
        .as_ref()
        .and_then(|s| s.unschedulable)
        .unwrap_or(false);
    let mut taints: Vec<serde_json::Value> = object
        .value
        .object
        .spec
        .as_ref()
        .and_then(|s| s.taints.clone())
        .unwrap_or_default()
        .iter()
        .filter_map(|t| serde_json::to_value(t).ok())
        .filter(|t| t["key"] != DISRUPTED_TAINT)
        .collect();
    if present {
        taints.push(json!({"key": DISRUPTED_TAINT, "effect": "NoSchedule"}));
    }
    let api: Api<Node> = Api::all(cluster.client.clone());
    let patch = json!({"spec": {"taints": taints}});
    if let Err(e) =
        cluster
            .rt
            .block_on(api.patch(node, &PatchParams::default(), &Patch::Merge(&patch)))
    {
        cluster.writes.errors += 1;
        tracing::warn!(node, error = %e, "node taint not written");
    }
    cordoned
}

/// Removes joiner's termination finalizer and no other from the object `meta` describes (as the
/// delete returned it; joiner's role does not get single objects): a JSON patch that tests the
/// resourceVersion and that the finalizer at its index is joiner's, then removes that entry. When
/// the object changed meanwhile the test fails (422) and the next step tries again; another
/// controller's finalizer is never dropped. An object without the finalizer is done.
async fn unfinalize<K>(api: &Api<K>, name: &str, meta: &ObjectMeta) -> Result<(), kube::Error>
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug,
{
    let Some(index) = meta
        .finalizers
        .iter()
        .flatten()
        .position(|f| f == TERMINATION_FINALIZER)
    else {
        return Ok(());
    };
    let at = format!("/metadata/finalizers/{index}");
    let ops = json!([
        {"op": "test", "path": "/metadata/resourceVersion", "value": meta.resource_version},
        {"op": "test", "path": at, "value": TERMINATION_FINALIZER},
        {"op": "remove", "path": at},
    ]);
    let ops = serde_json::from_value(ops).map_err(kube::Error::SerdeError)?;
    match api
        .patch(name, &PatchParams::default(), &Patch::<()>::Json(ops))
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
        Err(e) => Err(e),
    }
}

/// Whether a cached object carries joiner's termination finalizer.
pub fn has_finalizer(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> bool {
    meta.finalizers
        .as_ref()
        .is_some_and(|f| f.iter().any(|x| x == TERMINATION_FINALIZER))
}

//! The decision thread: the one place the controller runs in-cluster. It sleeps until a cache
//! changes or a timer it owes the controller is due, then takes a step: rebuild the snapshot from
//! the caches, carry NodeClaims through their lifecycle, tell the controller what changed (pods
//! gone or bound, nodes registered, nodes deleted by users), fire due timers (batch windows,
//! validation delays, drain retries), run the disruption pass every interval, and publish metrics.
//! Solves run here, on a plain OS thread, never on the async runtime.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::measured::Measured;
use super::metrics::{status_label, Metrics, PhaseLabels, ReasonLabels, StatusLabels};
use crate::cloud::CloudProvider;
use crate::controller::{Controller, Stats, Wake};
use crate::disruption::timing::Timestamp;
use crate::domain::CostWeights;
use crate::k8s::caches::Signal;
use crate::k8s::claims::{instance_of_provider_id, node_name_of, provider_id_of};
use crate::k8s::cluster::{KubeCluster, Writes};
use crate::k8s::lifecycle::{self, Timeouts};
use crate::snapshot::SnapshotError;

/// How the loop paces itself.
#[derive(Debug, Clone, PartialEq)]
pub struct LoopSettings {
    pub disruption_interval: Duration,
    pub disruption_enabled: bool,
    pub timeouts: Timeouts,
    /// A burst of cache changes is taken in one step after this quiet time.
    pub debounce: Duration,
    /// Steps run at least this often, for timeouts and terminations nothing else wakes.
    pub resync: Duration,
}

/// Something the cloud reported about an instance, handed from the async side to the decision
/// thread.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HostEvent {
    /// A spot interruption warning: the instance is reclaimed after the notice and its offering is
    /// kept out of solves.
    SpotInterruption(String),
    /// The instance is going away for another reason (scheduled maintenance, stopping, terminated).
    Retiring(String),
}

/// Cloud events waiting for the next step, each batch with the receipt of the queue message it
/// came from; and the receipts of the messages acted on, for the queue reader to delete. A message
/// is deleted only once its events are acted on (the node tainted, its reclaim scheduled): one
/// taken but not acted on (a crash, a lost lease) comes back when its visibility timeout ends.
#[derive(Debug, Default)]
pub struct HostQueue {
    events: std::sync::Mutex<Vec<(Vec<HostEvent>, Option<String>)>>,
    acted: std::sync::Mutex<Vec<String>>,
}

impl HostQueue {
    /// Queues the events of one message; the producer also signals the thread to wake.
    pub fn push(&self, events: Vec<HostEvent>, receipt: Option<String>) {
        lock(&self.events).push((events, receipt));
    }

    /// The receipts of the messages acted on since the last call.
    pub fn take_acted(&self) -> Vec<String> {
        std::mem::take(&mut *lock(&self.acted))
    }
}

fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Shared by the queue reader and the decision thread.
pub type HostEvents = Arc<HostQueue>;

/// Provider-side drift as the last scan off the decision thread found it: the reason by instance
/// id, replaced whole by each scan; None until the first scan finished.
#[derive(Debug, Clone, Default)]
pub struct DriftReport(Arc<std::sync::Mutex<Option<DriftByInstance>>>);

/// Why each drifted instance drifted, by instance id.
pub type DriftByInstance = std::collections::BTreeMap<String, String>;

impl DriftReport {
    pub fn publish(&self, drifted: DriftByInstance) {
        *lock(&self.0) = Some(drifted);
    }

    pub fn latest(&self) -> Option<DriftByInstance> {
        lock(&self.0).clone()
    }
}

pub struct Decisions<P: CloudProvider> {
    host_events: Option<HostEvents>,
    /// Drift scanned by a background task; without one, each node is asked about in turn.
    drift_report: Option<DriftReport>,
    pub ctl: Controller<Measured<P>>,
    pub cluster: KubeCluster,
    metrics: Arc<Metrics>,
    settings: LoopSettings,
    /// Called with the controller's clock before every step (the simulated provider bills by it).
    tick: fn(&P, f64),
    started: Instant,
    origin: Timestamp,
    timers: BTreeSet<(i64, Wake)>,
    next_disruption: f64,
    good_weights: Option<CostWeights>,
    pending: BTreeSet<String>,
    last_stats: Stats,
    last_writes: Writes,
    host_terminations: u64,
    adopted: bool,
    /// Drift the cloud provider reports, by node, refreshed every [`DRIFT_CHECK_SECONDS`].
    provider_drift: std::collections::BTreeMap<String, String>,
    next_drift_check: f64,
    next_catalog_check: f64,
    /// The objects the last step could not read, so each is logged when it turns unreadable rather
    /// than at every step.
    unreadable: BTreeSet<String>,
    /// Terminations the cloud refused, by node or claim: each keeps its finalizer and is asked
    /// for again once its wait is over.
    refused: BTreeMap<String, Retry>,
}

/// When a refused termination is asked for again, and how long the wait was.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Retry {
    at: f64,
    wait: f64,
}

/// How often the provider's catalog is compared with the one solves use (the AWS provider
/// refreshes its own every 12 hours).
const CATALOG_CHECK_SECONDS: f64 = 60.0;

/// How often instances are checked for provider-side drift (Karpenter checks every few minutes).
const DRIFT_CHECK_SECONDS: f64 = 60.0;

impl<P: CloudProvider> Decisions<P> {
    pub fn new(
        ctl: Controller<Measured<P>>,
        cluster: KubeCluster,
        metrics: Arc<Metrics>,
        settings: LoopSettings,
        origin: Timestamp,
        tick: fn(&P, f64),
    ) -> Self {
        let next_disruption = settings.disruption_interval.as_secs_f64();
        Decisions {
            host_events: None,
            drift_report: None,
            ctl,
            cluster,
            metrics,
            settings,
            tick,
            started: Instant::now(),
            origin,
            timers: BTreeSet::new(),
            next_disruption,
            good_weights: None,
            pending: BTreeSet::new(),
            last_stats: Stats::default(),
            last_writes: Writes::default(),
            host_terminations: 0,
            adopted: false,
            provider_drift: Default::default(),
            next_drift_check: 0.0,
            next_catalog_check: CATALOG_CHECK_SECONDS,
            unreadable: BTreeSet::new(),
            refused: BTreeMap::new(),
        }
    }

    /// Takes cloud events (interruptions) from `events` at every step.
    pub fn with_host_events(mut self, events: HostEvents) -> Self {
        self.host_events = Some(events);
        self
    }

    /// Reads drift from `report` (filled by a background scan) instead of asking per node.
    pub fn with_drift_report(mut self, report: DriftReport) -> Self {
        self.drift_report = Some(report);
        self
    }

    fn handle_host_events(&mut self, now: f64) {
        let Some(queue) = &self.host_events else {
            return;
        };
        let queue = queue.clone();
        let batches = std::mem::take(&mut *lock(&queue.events));
        for (events, receipt) in batches {
            for e in events {
                tracing::info!(event = ?e, "cloud event");
                match e {
                    HostEvent::SpotInterruption(id) => {
                        self.ctl.interruption_warning(&mut self.cluster, &id, now)
                    }
                    HostEvent::Retiring(id) => {
                        self.ctl.instance_retiring(&mut self.cluster, &id, now)
                    }
                }
            }
            lock(&queue.acted).extend(receipt);
        }
    }

    fn now(&self) -> f64 {
        self.started.elapsed().as_secs_f64()
    }

    fn timestamp(&self, now: f64) -> Timestamp {
        self.origin + chrono::Duration::milliseconds((now * 1000.0) as i64)
    }

    /// Runs until told to stop or the caches go away.
    pub fn run(mut self, signals: Receiver<Signal>) {
        loop {
            let now = self.now();
            let next = self
                .timers
                .first()
                .map(|(ms, _)| *ms as f64 / 1000.0)
                .unwrap_or(f64::MAX)
                .min(self.next_disruption)
                .min(now + self.settings.resync.as_secs_f64());
            match signals.recv_timeout(Duration::from_secs_f64((next - now).max(0.0))) {
                Ok(Signal::Stop) | Err(RecvTimeoutError::Disconnected) => return,
                Ok(Signal::Changed) => {
                    std::thread::sleep(self.settings.debounce);
                    if signals.try_iter().any(|s| s == Signal::Stop) {
                        return;
                    }
                }
                Err(RecvTimeoutError::Timeout) => {}
            }
            self.step();
        }
    }

    /// Warns once about each object that became unreadable (it is left out of the decisions) and
    /// notes when it is read again.
    fn log_unreadable(&mut self, unreadable: &[crate::snapshot::SnapshotError]) {
        let now: BTreeSet<String> = unreadable.iter().map(ToString::to_string).collect();
        for e in now.difference(&self.unreadable) {
            tracing::warn!(error = %e, "object left out of the decisions: it cannot be read");
        }
        if self.unreadable.difference(&now).next().is_some() {
            tracing::info!(
                unreadable = now.len(),
                "objects that could not be read changed"
            );
        }
        self.unreadable = now;
    }

    /// One pass over everything that may have changed.
    pub fn step(&mut self) {
        let now = self.now();
        let at = self.timestamp(now);
        (self.tick)(&self.ctl.cloud.inner, now);
        self.cluster.forget_snapshot();
        let (mut snapshot, unreadable) = crate::k8s::snapshot::build(self.cluster.caches());
        self.log_unreadable(&unreadable);
        self.keep_good_weights(&mut snapshot, &unreadable);
        self.cluster.refresh(snapshot, at);
        // a replica that lost the lease mid-way stops before its next write; the host exits
        if !self.leads() {
            return;
        }
        if !self.adopted {
            self.adopt_existing();
        }
        self.lifecycle(now, at);
        self.handle_host_events(now);
        // a background scan's report costs nothing to read: it is taken up at every step
        if self.drift_report.is_some() || now >= self.next_drift_check {
            self.next_drift_check = now + DRIFT_CHECK_SECONDS;
            self.check_drift();
        }
        if now >= self.next_catalog_check {
            self.next_catalog_check = now + CATALOG_CHECK_SECONDS;
            self.refresh_catalog();
        }
        if !self.leads() {
            return;
        }
        crate::k8s::status::report(&mut self.cluster, at, &unreadable, &self.provider_drift);
        self.track_pods();
        self.fire_timers(now);
        if self.settings.disruption_enabled && now >= self.next_disruption {
            self.next_disruption = now + self.settings.disruption_interval.as_secs_f64();
            if let Err(e) = self.ctl.disruption_tick(&mut self.cluster, now) {
                tracing::error!(error = %e, "disruption pass failed");
            }
        }
        self.ctl.observe(&self.cluster, now);
        for (at, wake) in self.ctl.take_wakes() {
            self.timers.insert(((at * 1000.0).ceil() as i64, wake));
        }
        self.publish_metrics();
    }

    /// An invalid cost-weight ConfigMap keeps the last good weights in force.
    fn keep_good_weights(
        &mut self,
        snapshot: &mut crate::domain::ClusterSnapshot,
        errors: &[SnapshotError],
    ) {
        let bad_config = errors
            .iter()
            .find(|e| matches!(e, SnapshotError::Object { kind, .. } if kind == "ConfigMap"));
        match bad_config {
            Some(e) => {
                if self.metrics.config_invalid.get() == 0 {
                    tracing::error!(error = %e, "cost-weight configmap invalid, keeping the last good weights");
                    self.metrics
                        .config_reloads
                        .get_or_create(&ReasonLabels { reason: "invalid" })
                        .inc();
                    self.cluster.config_map_event(
                        "InvalidCostWeights",
                        format!("{e}; the last good weights stay in force"),
                    );
                }
                self.metrics.config_invalid.set(1);
                if let Some(w) = &self.good_weights {
                    snapshot.weights = w.clone();
                }
            }
            None => {
                if self.good_weights.as_ref() != Some(&snapshot.weights) {
                    if self.good_weights.is_some() {
                        tracing::info!(weights = ?snapshot.weights, "cost weights changed");
                    }
                    self.metrics
                        .config_reloads
                        .get_or_create(&ReasonLabels { reason: "applied" })
                        .inc();
                    self.good_weights = Some(snapshot.weights.clone());
                }
                self.metrics.config_invalid.set(0);
            }
        }
        for e in errors
            .iter()
            .filter(|e| !matches!(e, SnapshotError::Object { kind, .. } if kind == "ConfigMap"))
        {
            tracing::warn!(error = %e, "object left out of decisions");
        }
    }

    /// On the first step: instances of NodeClaims that existed before this process. A claim with no
    /// instance recorded was being launched by a process that is gone (killed between CreateFleet
    /// and writing the status, or Karpenter before a cut-over): nobody will finish that launch, so
    /// it is given up now rather than after the launch timeout. Its pods are solved again, and an
    /// instance it did get is the garbage collector's once the claim is gone.
    fn adopt_existing(&mut self) {
        // giving up another replica's in-flight claims is for the leader alone
        if !self.leads() {
            return;
        }
        self.adopted = true;
        let mut abandoned = Vec::new();
        for claim in self.cluster.caches().node_claims() {
            let name = claim.metadata.name.clone().unwrap_or_default();
            let Some(instance) = provider_id_of(&claim).and_then(instance_of_provider_id) else {
                if claim.metadata.deletion_timestamp.is_none() {
                    abandoned.push(name);
                }
                continue;
            };
            let node = node_name_of(&claim).map(str::to_string).unwrap_or(name);
            self.ctl.adopt(&node, instance);
        }
        let now = self.now();
        for claim in abandoned {
            tracing::warn!(claim = %claim, "nodeclaim launched by an earlier process was never recorded; giving it up");
            self.terminate(&claim, None, "launch-abandoned", now);
        }
    }

    /// Takes up the provider's catalog when it changed (new prices, offerings).
    fn refresh_catalog(&mut self) {
        match pollster::block_on(self.ctl.cloud.catalog()) {
            Ok(c) if &c != self.ctl.catalog() && !c.instance_types.is_empty() => {
                tracing::info!(types = c.instance_types.len(), "catalog refreshed");
                self.metrics.set_prices(&c);
                self.cluster.set_catalog(c.clone());
                self.ctl.set_catalog(c);
            }
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "catalog not refreshed"),
        }
    }

    /// Whether this replica leads; when it does not, the rest of the step is skipped.
    fn leads(&self) -> bool {
        let leads = self.ctl.leading().is_ok();
        if !leads {
            tracing::debug!("not the leader; step stops before its writes");
        }
        leads
    }

    /// Which registered nodes' instances drifted: from the background scan's last report, or by
    /// asking the cloud provider node by node where no scan runs.
    fn check_drift(&mut self) {
        let nodes: Vec<String> = crate::controller::Cluster::snapshot(&self.cluster)
            .nodes
            .iter()
            .map(|n| n.name.clone())
            .collect();
        if let Some(report) = &self.drift_report {
            let Some(drifted) = report.latest() else {
                return;
            };
            self.provider_drift = nodes
                .into_iter()
                .filter_map(|node| {
                    let why = drifted.get(self.ctl.instance_of(&node)?)?.clone();
                    Some((node, why))
                })
                .collect();
            return;
        }
        self.provider_drift.clear();
        for node in nodes {
            let Some(id) = self.ctl.instance_of(&node).map(str::to_string) else {
                continue;
            };
            match pollster::block_on(self.ctl.cloud.drifted(&id)) {
                Ok(Some(why)) => {
                    self.provider_drift.insert(node, why);
                }
                Ok(None) => {}
                Err(e) => tracing::debug!(node = %node, error = %e, "drift not checked"),
            }
        }
    }

    fn lifecycle(&mut self, now: f64, at: Timestamp) {
        let t = lifecycle::reconcile(&mut self.cluster, at, self.settings.timeouts);
        for (claim, node) in t.registered {
            tracing::info!(nodeclaim = %claim, node = %node, "registered nodeclaim");
            self.cluster.registered(&claim);
            self.ctl
                .claim_registered(&mut self.cluster, &claim, &node, now);
        }
        // a disruption command waits for its replacements to initialize before draining
        for node in t.initialized {
            self.ctl.node_registered(&mut self.cluster, &node, now);
        }
        // a claim or node stays in these lists until its termination is accepted: each step
        // asks again once the refusal's wait is over
        for (claim, provider, reason) in t.timed_out {
            if self.retry_due(&claim, now) {
                tracing::warn!(claim = %claim, reason, "nodeclaim given up");
                self.terminate(&claim, provider.as_deref(), reason, now);
            }
        }
        for term in t.terminating.into_iter().filter(|t| t.drained) {
            if self.retry_due(&term.node, now) {
                tracing::info!(node = %term.node, "deleted node drained, terminating");
                self.terminate(&term.node, term.provider_id.as_deref(), "deleted", now);
            }
        }
        // a refusal is forgotten with its instance (terminated, or its node released elsewhere)
        let ctl = &self.ctl;
        self.refused
            .retain(|name, _| ctl.instance_of(name).is_some());
    }

    /// Terminates the instance of node or claim `name` (adopting it from `provider_id` when this
    /// process did not launch it) and releases the node and its claim once the cloud accepted;
    /// a refusal keeps both, finalizers and all, and is asked for again after a backoff.
    fn terminate(&mut self, name: &str, provider_id: Option<&str>, reason: &'static str, now: f64) {
        if !self.leads() {
            return;
        }
        if self.ctl.instance_of(name).is_none() {
            if let Some(instance) = provider_id.and_then(instance_of_provider_id) {
                self.ctl.adopt(name, instance);
            }
        }
        if self.ctl.instance_of(name).is_some() {
            if !self.ctl.terminate(&mut self.cluster, name) {
                // the step's lifecycle pass finds the node or claim again and asks once due
                self.back_off(name, now, Wake::Retry);
                return;
            }
            self.host_terminations += 1;
        } else {
            crate::controller::Cluster::delete_node(&mut self.cluster, name);
        }
        self.refused.remove(name);
        self.metrics
            .nodeclaims_terminated
            .get_or_create(&ReasonLabels { reason })
            .inc();
    }

    /// Whether `name`'s termination may be asked for at `now`: never refused, or its wait over.
    fn retry_due(&self, name: &str, now: f64) -> bool {
        self.refused.get(name).is_none_or(|r| now >= r.at)
    }

    /// Records a refused termination of `name` and sets a timer for `wake` when it is due again.
    fn back_off(&mut self, name: &str, now: f64, wake: Wake) {
        let wait = crate::cloud::terminate_retry_wait(self.refused.get(name).map(|r| r.wait));
        let at = now + wait;
        tracing::info!(node = %name, retry_in = wait, "termination refused, asking again later");
        self.refused.insert(name.to_string(), Retry { at, wait });
        self.timers.insert(((at * 1000.0).ceil() as i64, wake));
    }

    /// Pods gone or bound since the last step stop waiting in the controller's books.
    fn track_pods(&mut self) {
        let snap = crate::controller::Cluster::snapshot(&self.cluster);
        let now_pending: BTreeSet<String> = snap.pending_pods().map(|p| p.key()).collect();
        let bound: BTreeSet<String> = snap
            .pods
            .iter()
            .filter(|p| p.node_name.is_some())
            .map(|p| p.key())
            .collect();
        for key in self.pending.difference(&now_pending) {
            if bound.contains(key) {
                self.ctl.pod_bound(key);
            } else {
                self.ctl.forget_pod(key);
            }
        }
        self.metrics.pods_pending.set(now_pending.len() as i64);
        self.pending = now_pending;
    }

    fn fire_timers(&mut self, now: f64) {
        let due_ms = (now * 1000.0) as i64;
        while let Some((at, wake)) = self.timers.first().cloned() {
            if at > due_ms {
                break;
            }
            self.timers.remove(&(at, wake.clone()));
            self.fire(wake, now);
        }
    }

    fn fire(&mut self, wake: Wake, now: f64) {
        match wake {
            Wake::BatchDue => {
                let started = Instant::now();
                let solves = self.ctl.stats.solves.len();
                if let Err(e) = self.ctl.batch_due(&mut self.cluster, now) {
                    tracing::error!(error = %e, "provisioning failed");
                }
                if self.ctl.stats.solves.len() > solves {
                    self.metrics
                        .scheduling_duration
                        .observe(started.elapsed().as_secs_f64());
                }
            }
            // parked pods come back through observe, refused terminations through the lifecycle
            Wake::Retry => {}
            Wake::Validate => self.ctl.validate(&mut self.cluster, now),
            Wake::DrainStep => self.ctl.drain_step(&mut self.cluster, now),
            Wake::Terminate(node) => {
                if self.ctl.terminate(&mut self.cluster, &node) {
                    self.refused.remove(&node);
                } else if self.leads() {
                    self.back_off(&node, now, Wake::Terminate(node.clone()));
                }
            }
        }
    }

    fn publish_metrics(&mut self) {
        let m = &self.metrics;
        let st = &self.ctl.stats;
        for s in &st.solves[self.last_stats.solves.len().min(st.solves.len())..] {
            let phase = s.phase.as_str();
            m.solve_duration
                .get_or_create(&PhaseLabels { phase })
                .observe(s.seconds);
            m.solves
                .get_or_create(&StatusLabels {
                    phase,
                    status: status_label(s.status),
                })
                .inc();
            // a provisioning plan's gap is set when its bound is computed, off this thread
            if s.phase != crate::controller::Phase::Provisioning {
                m.solve_gap.get_or_create(&PhaseLabels { phase }).set(s.gap);
            }
        }
        let grew = |now: usize, before: usize| now.saturating_sub(before) as u64;
        m.nodeclaims_created
            .get_or_create(&ReasonLabels { reason: "launched" })
            .inc_by(grew(st.launched, self.last_stats.launched));
        let terminated =
            grew(st.terminated, self.last_stats.terminated).saturating_sub(self.host_terminations);
        m.nodeclaims_terminated
            .get_or_create(&ReasonLabels {
                reason: "disruption",
            })
            .inc_by(terminated);
        m.disruption_decisions
            .get_or_create(&ReasonLabels { reason: "executed" })
            .inc_by(grew(
                st.disruptions_executed,
                self.last_stats.disruptions_executed,
            ));
        m.disruption_decisions
            .get_or_create(&ReasonLabels {
                reason: "abandoned",
            })
            .inc_by(grew(
                st.disruptions_abandoned,
                self.last_stats.disruptions_abandoned,
            ));
        let w = &self.cluster.writes;
        m.disruption_decisions
            .get_or_create(&ReasonLabels {
                reason: "timed-out",
            })
            .inc_by(w.disruptions_timed_out - self.last_writes.disruptions_timed_out);
        m.evictions
            .get_or_create(&ReasonLabels { reason: "accepted" })
            .inc_by(w.evictions - self.last_writes.evictions);
        m.evictions
            .get_or_create(&ReasonLabels { reason: "refused" })
            .inc_by(w.evictions_refused - self.last_writes.evictions_refused);
        m.api_errors.inc_by(w.errors - self.last_writes.errors);
        self.last_writes = w.clone();
        self.last_stats = st.clone();
        self.host_terminations = 0;
        let now = self.now();
        let snap = crate::controller::Cluster::snapshot(&self.cluster);
        let in_flight = crate::controller::Cluster::in_flight(&self.cluster).len();
        m.observe_cluster(&super::metrics::karpenter::Observed {
            snap,
            catalog: self.ctl.catalog(),
            at: self.timestamp(now),
            now,
            unregistered: in_flight,
            synced: self.unreadable.is_empty(),
        });
    }
}

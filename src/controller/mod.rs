//! The controller: turns decisions into actions, wherever it runs. It holds what Karpenter's
//! provisioner, disruption queue and interruption handler keep between events — the open
//! provisioning batch, pods nominated to nodes in flight, offerings out of capacity, the disruption
//! command being validated or drained — and acts through two small traits: [`Cluster`] (read the
//! cluster, record claims, taint, evict, delete) and [`CloudProvider`] (launch, terminate).
//!
//! It has no clock and no timers of its own. The host calls it on events (`observe` after any
//! change, `batch_due`, `node_registered`, `interruption_warning`, `disruption_tick`, `validate`,
//! `drain_step`, `terminate`) with the time in seconds, and collects the wake-ups it asks for with
//! [`Controller::take_wakes`]. The simulator (`sim`) is one host; the in-cluster controller is the
//! other. Decisions are the pure ones: `optimizer::solve` and `disruption::consolidate`.

pub mod cluster;
mod disrupter;
pub mod leadership;
mod provisioner;
pub mod report;

use std::collections::{BTreeMap, BTreeSet};
use std::ops::{Index, RangeFrom};

use crate::catalog::Catalog;
use crate::cloud::{CloudProvider, Unavailable};
use crate::disruption::timing::Timestamp;
use crate::disruption::{DisruptionStatus, DisruptionStrategy};
use crate::domain::Pod;
use crate::optimizer::{PlanStatus, SolverFault, Strategy};

pub use cluster::{Cluster, EvictionRefused};
pub use disrupter::COMMAND_TIMEOUT_SECONDS;
pub use leadership::{LeaderToken, NotLeader};
pub use provisioner::{Certifier, ProvisioningCost, Uncertified, UNSCHEDULABLE_RETRY_SECONDS};

/// How long a pod nominated to a running node waits for kube-scheduler to bind it there before it
/// is provisioned for again (Karpenter's nomination window is two batch windows).
pub const NOMINATION_TTL_SECONDS: f64 = 20.0;

/// Failures the controller cannot act around: a decision that could not be made.
#[derive(Debug, thiserror::Error)]
pub enum ControllerError {
    #[error("provisioning decision: {0}")]
    Provisioning(String),
    #[error("disruption decision: {0}")]
    Disruption(String),
    /// The replica lost its leadership: the step starts no new writes.
    #[error(transparent)]
    NotLeader(#[from] NotLeader),
}

/// Timings and solver limits, in seconds.
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    pub provisioning: Strategy,
    pub disruption: DisruptionStrategy,
    pub batch_idle: f64,
    pub batch_max: f64,
    pub validation_delay: f64,
    pub solve_time_limit: f64,
    pub disruption_time_limit: f64,
    pub gap: f64,
    /// Karpenter re-runs disruption on an unchanged cluster after this long, for changes it cannot
    /// see. None: only when the inputs change (the simulator sees every input).
    pub quiet_ttl: Option<f64>,
    /// Whether disruption decisions compute their certified lower bound.
    pub disruption_bound: bool,
    /// Time 0 of the host's clock, for budgets' schedules, consolidateAfter and expiry.
    pub origin: Timestamp,
    /// A HiGHS failure injected into every decision (fault-injection tests and drills).
    pub solver_fault: Option<SolverFault>,
    /// Whether consolidation may replace spot nodes with spot capacity (Karpenter's
    /// SpotToSpotConsolidation feature gate).
    pub spot_to_spot_consolidation: bool,
    /// A disruption command not finished this long after its validation is rolled back
    /// (Karpenter's orchestration timeout, [`COMMAND_TIMEOUT_SECONDS`] by default).
    pub command_timeout: f64,
    /// How long an offering that ran out of capacity is kept out of solves
    /// ([`crate::cloud::UNAVAILABLE_TTL_SECONDS`] by default, Karpenter's).
    pub unavailable_ttl: f64,
    /// How long a pod no offering can hold waits before it is solved again
    /// ([`UNSCHEDULABLE_RETRY_SECONDS`] by default).
    pub unschedulable_retry: f64,
}

/// A wake-up the controller asks the host for.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Wake {
    /// The open provisioning batch may be due.
    BatchDue,
    /// Pods the last solve could not place may be tried again.
    Retry,
    /// The disruption command's validation delay is over.
    Validate,
    /// A drain blocked by a PodDisruptionBudget may go on.
    DrainStep,
    /// The interrupted node's instance is reclaimed.
    Terminate(String),
}

/// What the controller did, for reports and metrics.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Stats {
    pub evicted: usize,
    /// Of `evicted`, the pods of nodes a spot interruption took.
    pub evicted_by_interruption: usize,
    pub interruptions: usize,
    pub ice: usize,
    pub launched: usize,
    pub terminated: usize,
    pub disruptions_executed: usize,
    pub disruptions_abandoned: usize,
    pub time_limited: usize,
    /// Provisioning and disruption decisions, in order: every one in a simulation, the latest in
    /// a long-running controller (see [`SolveLog::bounded`]).
    pub solves: SolveLog,
}

/// Solve records, counted from the first and kept whole or only the latest. `len` counts every
/// solve ever recorded and `log[n..]` indexes by that count, so a reader that remembers how many
/// it saw reads only the new ones; those already dropped are skipped. A controller that runs for
/// months records a solve every few seconds and must not keep them all.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SolveLog {
    kept: Vec<SolveRecord>,
    dropped: usize,
    /// Keeps at least this many of the latest, and at most twice as many; None: keeps all.
    limit: Option<usize>,
}

impl SolveLog {
    /// A log that keeps the latest `limit` records (at least one).
    pub fn bounded(limit: usize) -> SolveLog {
        SolveLog {
            limit: Some(limit.max(1)),
            ..SolveLog::default()
        }
    }

    /// Solves recorded since the start, including those no longer kept.
    pub fn len(&self) -> usize {
        self.dropped + self.kept.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The records still kept, oldest first.
    pub fn iter(&self) -> std::slice::Iter<'_, SolveRecord> {
        self.kept.iter()
    }

    /// How many records are held in memory.
    pub fn kept(&self) -> usize {
        self.kept.len()
    }

    pub fn push(&mut self, record: SolveRecord) {
        self.kept.push(record);
        // dropping in halves keeps a push O(1) amortized
        if let Some(limit) = self.limit {
            if self.kept.len() >= 2 * limit {
                let drop = self.kept.len() - limit;
                self.kept.drain(..drop);
                self.dropped += drop;
            }
        }
    }
}

impl Index<RangeFrom<usize>> for SolveLog {
    type Output = [SolveRecord];

    /// The records from the `n`-th solve ever recorded on, as far as they are still kept.
    fn index(&self, from: RangeFrom<usize>) -> &[SolveRecord] {
        let start = from.start.saturating_sub(self.dropped).min(self.kept.len());
        &self.kept[start..]
    }
}

impl<'a> IntoIterator for &'a SolveLog {
    type Item = &'a SolveRecord;
    type IntoIter = std::slice::Iter<'a, SolveRecord>;
    fn into_iter(self) -> Self::IntoIter {
        self.kept.iter()
    }
}

/// One decision's solve, for reports and metrics.
#[derive(Debug, Clone, PartialEq)]
pub struct SolveRecord {
    pub phase: Phase,
    /// The plan's `solver.status`.
    pub status: SolveStatus,
    /// Wall-clock seconds.
    pub seconds: f64,
    /// Relative gap: to the certified lower bound for provisioning, the MIP gap for disruption (0
    /// when none).
    pub gap: f64,
}

/// A decision's `solver.status`: a provisioning plan's or a disruption plan's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SolveStatus {
    Provisioning(PlanStatus),
    Disruption(DisruptionStatus),
}

impl SolveStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            SolveStatus::Provisioning(s) => s.as_str(),
            SolveStatus::Disruption(s) => s.as_str(),
        }
    }

    /// The time limit cut the search short.
    pub fn is_time_limit(self) -> bool {
        matches!(
            self,
            SolveStatus::Provisioning(PlanStatus::TimeLimit)
                | SolveStatus::Disruption(DisruptionStatus::TimeLimit)
        )
    }
}

impl From<PlanStatus> for SolveStatus {
    fn from(s: PlanStatus) -> Self {
        SolveStatus::Provisioning(s)
    }
}

impl From<DisruptionStatus> for SolveStatus {
    fn from(s: DisruptionStatus) -> Self {
        SolveStatus::Disruption(s)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    Provisioning,
    Disruption,
}

impl Phase {
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Provisioning => "provisioning",
            Phase::Disruption => "disruption",
        }
    }
}

pub struct Controller<P: CloudProvider> {
    settings: Settings,
    catalog: Catalog,
    pub cloud: P,
    unavailable: Unavailable,
    /// Node name -> instance id, for every node launched or adopted.
    instance_of: BTreeMap<String, String>,
    /// Pending pods a launch is meant for, and the node.
    nominated: BTreeMap<String, String>,
    /// When pods were nominated to nodes that already run: kube-scheduler may place them
    /// differently, so such a nomination lapses after [`NOMINATION_TTL_SECONDS`].
    nominated_at: BTreeMap<String, f64>,
    /// Pending pods the last solve could not place, and when to try them again.
    parked: BTreeMap<String, f64>,
    /// Pending pods the open batch holds, and when it opened and last grew.
    batch: BTreeSet<String>,
    batch_window: Option<(f64, f64)>,
    node_seq: u64,
    /// Nodes cordoned and drained for an interruption: they stay cordoned until terminated,
    /// whatever becomes of a disruption command that also chose them.
    reclaiming: BTreeSet<String>,
    disruption: disrupter::State,
    /// Each workload's recent pod counts, for provisioning's headroom.
    trend: crate::optimizer::headroom::Trend,
    wakes: Vec<(f64, Wake)>,
    /// Asked before a step starts writes: a deposed leader's step must not act.
    leader: LeaderToken,
    pub stats: Stats,
    /// Computes provisioning plans' bounds off the decision path, when the host asks for them.
    certifier: Option<Certifier>,
}

impl<P: CloudProvider> Controller<P> {
    pub fn new(settings: Settings, catalog: Catalog, cloud: P) -> Self {
        let unavailable = Unavailable::with_ttl(settings.unavailable_ttl);
        Controller {
            settings,
            catalog,
            cloud,
            unavailable,
            instance_of: BTreeMap::new(),
            nominated: BTreeMap::new(),
            nominated_at: BTreeMap::new(),
            parked: BTreeMap::new(),
            batch: BTreeSet::new(),
            batch_window: None,
            node_seq: 0,
            reclaiming: BTreeSet::new(),
            disruption: disrupter::State::default(),
            trend: Default::default(),
            wakes: vec![],
            leader: LeaderToken::always(),
            stats: Stats::default(),
            certifier: None,
        }
    }

    /// Keeps only the latest `n` solve records (a long-running host); the default keeps all.
    pub fn with_solve_history(mut self, n: usize) -> Self {
        self.stats.solves = SolveLog::bounded(n);
        self
    }

    /// Acts only while `token` leads: the provisioning and disruption entry points check it
    /// before they write.
    pub fn with_leader_token(mut self, token: LeaderToken) -> Self {
        self.leader = token;
        self
    }

    /// Ok while this replica may act; the entry points that write call it first.
    pub fn leading(&self) -> Result<(), NotLeader> {
        self.leader.check()
    }

    /// Takes over a node that was running before the controller started.
    pub fn catalog(&self) -> &Catalog {
        &self.catalog
    }

    /// Replaces the catalog later solves use (the provider refreshed prices or offerings).
    pub fn set_catalog(&mut self, catalog: Catalog) {
        self.catalog = catalog;
    }

    pub fn adopt(&mut self, node: &str, instance: &str) {
        self.instance_of
            .insert(node.to_string(), instance.to_string());
    }

    /// The instance a node runs on, if the controller knows it.
    pub fn instance_of(&self, node: &str) -> Option<&str> {
        self.instance_of.get(node).map(String::as_str)
    }

    /// The node an instance runs as, if the controller knows it.
    pub fn node_of(&self, instance: &str) -> Option<&str> {
        self.instance_of
            .iter()
            .find(|(_, i)| *i == instance)
            .map(|(n, _)| n.as_str())
    }

    /// The wake-ups asked for since the last call, as (time, what).
    pub fn take_wakes(&mut self) -> Vec<(f64, Wake)> {
        std::mem::take(&mut self.wakes)
    }

    fn wake(&mut self, at: f64, what: Wake) {
        self.wakes.push((at, what));
    }

    fn timestamp(&self, now: f64) -> Timestamp {
        self.settings.origin + chrono::Duration::milliseconds((now * 1000.0).round() as i64)
    }

    fn record_solve(&mut self, phase: Phase, seconds: f64, status: SolveStatus, gap: f64) {
        self.stats.solves.push(SolveRecord {
            phase,
            status,
            seconds,
            gap,
        });
        if status.is_time_limit() {
            self.stats.time_limited += 1;
        }
    }

    /// After any change: pods that wait for capacity (not nominated, not in the batch, not parked)
    /// open the provisioning batch or extend it.
    pub fn observe(&mut self, cluster: &impl Cluster, now: f64) {
        self.trend.observe(cluster.snapshot(), now);
        let lapsed: Vec<String> = self
            .nominated_at
            .iter()
            .filter(|(_, at)| now - **at >= NOMINATION_TTL_SECONDS)
            .map(|(k, _)| k.clone())
            .collect();
        for k in lapsed {
            self.nominated_at.remove(&k);
            self.nominated.remove(&k);
        }
        let waiting: Vec<String> = cluster
            .snapshot()
            .pending_pods()
            .map(Pod::key)
            .filter(|k| {
                !self.nominated.contains_key(k)
                    && !self.batch.contains(k)
                    && self.parked.get(k).is_none_or(|t| *t <= now)
            })
            .collect();
        if waiting.is_empty() {
            return;
        }
        for k in waiting {
            self.parked.remove(&k);
            self.batch.insert(k);
        }
        let (first, _) = self.batch_window.unwrap_or((now, now));
        self.batch_window = Some((first, now));
        let due = (now + self.settings.batch_idle).min(first + self.settings.batch_max);
        self.wake(due, Wake::BatchDue);
    }

    /// Forgets a pod that no longer exists.
    pub fn forget_pod(&mut self, key: &str) {
        self.nominated.remove(key);
        self.nominated_at.remove(key);
        self.parked.remove(key);
        self.batch.remove(key);
    }

    /// A pod was bound: it no longer waits for anything.
    pub fn pod_bound(&mut self, key: &str) {
        self.nominated.remove(key);
        self.nominated_at.remove(key);
        self.batch.remove(key);
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::cloud::sim::SimCloud;
    use crate::cloud::Instance;
    use crate::domain::{ClusterSnapshot, PodConstraints};
    use crate::optimizer::NewNode;

    /// A cluster that holds a snapshot and records each node's cordon (the
    /// `karpenter.sh/disrupted` taint): enough for the batching and command rules.
    pub(crate) struct Fake(pub ClusterSnapshot, pub BTreeMap<String, bool>);

    impl Fake {
        pub(crate) fn new(snapshot: ClusterSnapshot) -> Fake {
            Fake(snapshot, BTreeMap::new())
        }
    }

    impl Cluster for Fake {
        fn snapshot(&self) -> &ClusterSnapshot {
            &self.0
        }
        fn in_flight(&self) -> Vec<(&str, &NewNode)> {
            vec![]
        }
        fn claim_launched(&mut self, _: &str, _: &NewNode, _: &Instance) {}
        fn set_disrupted(&mut self, node: &str, disrupted: bool) {
            self.1.insert(node.to_string(), disrupted);
        }
        fn evict(&mut self, _: &str) -> Result<(), EvictionRefused> {
            Ok(())
        }
        fn delete_node(&mut self, _: &str) -> usize {
            0
        }
    }

    pub(crate) fn controller() -> Controller<SimCloud> {
        let catalog = Catalog {
            region: "test".into(),
            instance_types: vec![],
            provenance: None,
        };
        Controller::new(
            settings(),
            catalog.clone(),
            SimCloud::new(catalog, vec![], 0.0, 1),
        )
    }

    pub(crate) fn settings() -> Settings {
        let origin = crate::disruption::timing::parse_timestamp("2026-01-05T00:00:00Z").unwrap();
        Settings {
            provisioning: Strategy::Greedy,
            disruption: DisruptionStrategy::Baseline,
            batch_idle: 1.0,
            batch_max: 10.0,
            validation_delay: 15.0,
            solve_time_limit: 1.0,
            disruption_time_limit: 1.0,
            gap: 0.01,
            quiet_ttl: Some(300.0),
            disruption_bound: false,
            origin,
            solver_fault: None,
            spot_to_spot_consolidation: true,
            command_timeout: COMMAND_TIMEOUT_SECONDS,
            unavailable_ttl: crate::cloud::UNAVAILABLE_TTL_SECONDS,
            unschedulable_retry: UNSCHEDULABLE_RETRY_SECONDS,
        }
    }

    #[test]
    fn a_batch_closes_after_the_idle_window_but_never_after_the_max_window() {
        let mut ctl = controller();
        let mut cluster = Fake::new(ClusterSnapshot::default());
        let add = |cluster: &mut Fake, name: &str| {
            cluster.0.pods.push(std::sync::Arc::new(Pod::new(
                name,
                PodConstraints::default(),
            )))
        };
        add(&mut cluster, "a");
        ctl.observe(&cluster, 0.0);
        assert_eq!(ctl.take_wakes(), vec![(1.0, Wake::BatchDue)]);
        // a pod every 0.9 s keeps the idle window open until the max window ends it
        for (i, t) in [0.9, 1.8, 2.7, 9.9].into_iter().enumerate() {
            add(&mut cluster, &format!("p{i}"));
            ctl.observe(&cluster, t);
        }
        let due: Vec<f64> = ctl.take_wakes().into_iter().map(|(t, _)| t).collect();
        assert_eq!(due, vec![1.9, 2.8, 3.7, 10.0]);
        // nothing new: no wake-up
        ctl.observe(&cluster, 10.0);
        assert!(ctl.take_wakes().is_empty());
    }

    fn record(seconds: f64) -> SolveRecord {
        SolveRecord {
            phase: Phase::Provisioning,
            status: SolveStatus::Provisioning(PlanStatus::Optimal),
            seconds,
            gap: 0.0,
        }
    }

    #[test]
    fn a_bounded_solve_log_counts_every_solve_and_keeps_the_latest() {
        let mut log = SolveLog::bounded(64);
        let mut seen = 0;
        let mut read = 0;
        for i in 0..100_000 {
            log.push(record(i as f64));
            assert!(log.kept() < 128, "holds {} records", log.kept());
            // a reader that remembers the count reads each new record once
            if i % 50 == 49 {
                let new = &log[seen..];
                assert_eq!(new.len(), 50);
                assert_eq!(new[0].seconds, seen as f64);
                read += new.len();
                seen = log.len();
            }
        }
        assert_eq!(log.len(), 100_000);
        assert_eq!(read, 100_000);
        assert_eq!(log.iter().last().map(|r| r.seconds), Some(99_999.0));
        // a reader that fell behind gets what is still kept
        assert_eq!(log[0..].len(), log.kept());
        assert!(log[200_000..].is_empty());
    }

    #[test]
    fn an_unbounded_solve_log_keeps_every_solve() {
        let mut log = SolveLog::default();
        for i in 0..1000 {
            log.push(record(i as f64));
        }
        assert_eq!((log.len(), log.kept()), (1000, 1000));
    }

    #[test]
    fn a_deposed_leader_closes_no_batch_and_terminates_nothing() {
        let token = LeaderToken::pending();
        token.extend(std::time::Instant::now() + std::time::Duration::from_secs(60));
        let mut ctl = controller().with_leader_token(token.clone());
        ctl.adopt("n1", "i-1");
        let mut cluster = Fake::new(ClusterSnapshot::default());
        cluster.0.pods.push(std::sync::Arc::new(Pod::new(
            "a",
            PodConstraints::default(),
        )));
        ctl.observe(&cluster, 0.0);
        token.revoke();
        assert!(matches!(
            ctl.batch_due(&mut cluster, 5.0),
            Err(ControllerError::NotLeader(_))
        ));
        assert!(ctl.batch_window.is_some(), "the batch is kept, not dropped");
        ctl.terminate(&mut cluster, "n1");
        assert_eq!(ctl.instance_of("n1"), Some("i-1"));
        assert_eq!(ctl.stats.terminated, 0);
    }
}

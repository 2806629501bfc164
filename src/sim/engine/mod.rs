//! The simulation's event loop. Time is virtual, in milliseconds, and only moves from one queued
//! event to the next. The world holds the simulated cluster (`cluster`), the simulated cloud (owned
//! by the controller), the workloads, and the real [`Controller`]. After each event it lets the
//! kube-scheduler stand-in bind what it can, tells the controller to look, and queues what the
//! controller, the cluster and the cloud ask for: batch deadlines, validation delays, drains,
//! node registrations after the boot delay, spot interruption warnings. After the bindings it runs
//! the cluster's invariants (`super::invariants`) and keeps what they found for the report.

mod cluster;
mod storage;

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, BinaryHeap};

use crate::catalog::CapacityType;
use crate::cloud::sim::{IceWindow, SimCloud};
use crate::controller::{Cluster, Controller, Settings, Wake};
use crate::domain::labels::{CAPACITY_TYPE, INSTANCE_TYPE};
use crate::domain::{ClusterSnapshot, LabelSelector, Pod, PodDisruptionBudget};

use super::invariants::{volume_zone_violations, ZoneViolation};
use super::report::{short_lived, Percentiles, RunReport, Sample, Summary};
use super::scenario::{Event, Scenario, Workload, WorkloadKind};
use super::{SimError, SimStrategy};
use cluster::SimCluster;

/// Something that happens at an instant.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Ev {
    /// The nodes one step launched register together: kube-scheduler sees every one of their zones
    /// (a NotReady node's zone is a spread domain) before it binds to any of them.
    NodesReady(Vec<String>),
    Warning(String),
    JobDone(String),
    ScriptedInterrupt(Option<String>),
    WorkloadStep,
    Controller(Wake),
    DisruptionTick,
    Sample,
}

/// A workload's live pods, oldest first.
#[derive(Default)]
struct Live {
    pods: Vec<String>,
    created: u64,
}

pub struct World<'a> {
    sc: &'a Scenario,
    strategy: SimStrategy,
    seed: u64,
    ctl: Controller<SimCloud>,
    cluster: SimCluster,
    now_ms: u64,
    seq: u64,
    queue: BinaryHeap<Reverse<(u64, u64, Ev)>>,
    live: BTreeMap<String, Live>,
    samples: Vec<Sample>,
    /// Keep a copy of the cluster every this many seconds (at the first sample at or after).
    keep_every: Option<f64>,
    /// The kept copies: seconds into the run, the cluster.
    pub kept: Vec<(f64, ClusterSnapshot)>,
    /// Every pod placement seen outside its volume's zone (none, when all is well).
    pub zone_violations: BTreeSet<ZoneViolation>,
}

impl<'a> World<'a> {
    pub fn new(sc: &'a Scenario, strategy: SimStrategy, seed: u64) -> World<'a> {
        let ice = sc
            .events
            .iter()
            .filter_map(|e| match e {
                Event::InsufficientCapacity {
                    from,
                    until,
                    instance_type,
                    zone,
                    capacity_type,
                } => Some(IceWindow {
                    from: *from,
                    until: *until,
                    instance_type: instance_type.clone(),
                    zone: zone.clone(),
                    capacity_type: *capacity_type,
                }),
                Event::Interrupt { .. } => None,
            })
            .collect();
        let mut snap = sc.cluster.clone();
        snap.pdbs
            .extend(sc.workloads.iter().filter_map(workload_pdb));
        let settings = Settings {
            provisioning: strategy.provisioning(),
            disruption: strategy.disruption(),
            batch_idle: sc.timing.batch_idle,
            batch_max: sc.timing.batch_max,
            validation_delay: sc.timing.validation_delay,
            solve_time_limit: sc.solver.time_limit,
            disruption_time_limit: sc.solver.disruption_time_limit,
            gap: sc.solver.gap,
            quiet_ttl: None,
            // nothing reads a pass's bound here; its time goes to the decisions instead
            disruption_bound: false,
            origin: sc.start,
            solver_fault: None,
            // the simulator compares strategies on every consolidation Karpenter can make
            spot_to_spot_consolidation: true,
            command_timeout: crate::controller::COMMAND_TIMEOUT_SECONDS,
            unavailable_ttl: crate::cloud::UNAVAILABLE_TTL_SECONDS,
            unschedulable_retry: crate::controller::UNSCHEDULABLE_RETRY_SECONDS,
        };
        let cloud = SimCloud::new(sc.catalog.clone(), ice, sc.interruption_rate_scale, seed);
        let mut ctl = Controller::new(settings, sc.catalog.clone(), cloud);
        // nodes present at the start are billed from t = 0 at their catalog price
        for n in &snap.nodes {
            let id = format!("initial-{}", n.name);
            ctl.cloud
                .adopt(&id, crate::optimizer::problem::node_price(n, &sc.catalog));
            ctl.adopt(&n.name, &id);
        }
        let cluster = SimCluster::new(snap, sc.catalog.clone(), sc.start);
        World {
            sc,
            strategy,
            seed,
            ctl,
            cluster,
            now_ms: 0,
            seq: 0,
            queue: BinaryHeap::new(),
            live: BTreeMap::new(),
            samples: vec![],
            keep_every: None,
            kept: vec![],
            zone_violations: BTreeSet::new(),
        }
    }

    /// The simulated cluster as it is now (at the end, after `run`).
    pub fn cluster(&self) -> &ClusterSnapshot {
        self.cluster.snapshot()
    }

    /// Keeps a copy of the cluster at the first sample at or after every multiple of `seconds`.
    pub fn keep_every(&mut self, seconds: f64) {
        self.keep_every = (seconds > 0.0).then_some(seconds);
    }

    fn keep(&mut self) {
        let Some(every) = self.keep_every else {
            return;
        };
        let due = self.kept.len() as f64 * every;
        if self.now() + 1e-9 >= due {
            self.kept
                .push((self.now(), self.cluster.snapshot().clone()));
        }
    }

    fn now(&self) -> f64 {
        self.now_ms as f64 / 1000.0
    }

    fn at(&mut self, seconds: f64, ev: Ev) {
        let ms = (seconds.max(self.now()) * 1000.0).round() as u64;
        self.seq += 1;
        self.queue.push(Reverse((ms, self.seq, ev)));
    }

    pub fn run(&mut self, progress: &mut dyn FnMut(f64)) -> Result<(), SimError> {
        let end = self.sc.duration;
        self.at(0.0, Ev::WorkloadStep);
        self.at(0.0, Ev::Sample);
        self.at(self.sc.timing.disruption_interval, Ev::DisruptionTick);
        for e in &self.sc.events {
            if let Event::Interrupt { at, instance_type } = e {
                self.at(*at, Ev::ScriptedInterrupt(instance_type.clone()));
            }
        }
        self.settle()?;
        while let Some(Reverse((ms, _, ev))) = self.queue.pop() {
            if ms as f64 / 1000.0 > end {
                break;
            }
            self.now_ms = ms;
            self.ctl.cloud.set_now(self.now());
            self.cluster.set_now(self.now());
            let sample = ev == Ev::Sample;
            self.handle(ev)?;
            self.settle()?;
            if sample {
                progress(self.now() / end);
            }
        }
        self.now_ms = (end * 1000.0).round() as u64;
        self.ctl.cloud.set_now(end);
        self.cluster.set_now(end);
        self.sample();
        progress(1.0);
        Ok(())
    }

    fn handle(&mut self, ev: Ev) -> Result<(), SimError> {
        let now = self.now();
        let decision = |e: crate::controller::ControllerError| SimError::Decision(e.to_string());
        match ev {
            Ev::WorkloadStep => {
                self.step_workloads();
                self.at(now + self.sc.timing.workload_step, Ev::WorkloadStep);
            }
            Ev::JobDone(pod) => self.remove_pod(&pod),
            Ev::NodesReady(names) => {
                for name in names {
                    if self.cluster.register(&name) {
                        self.ctl.node_registered(&mut self.cluster, &name, now);
                    }
                }
            }
            Ev::Warning(instance) => {
                self.ctl
                    .interruption_warning(&mut self.cluster, &instance, now)
            }
            Ev::ScriptedInterrupt(instance_type) => {
                self.scripted_interrupt(instance_type.as_deref())
            }
            Ev::DisruptionTick => {
                self.ctl
                    .disruption_tick(&mut self.cluster, now)
                    .map_err(decision)?;
                self.at(now + self.sc.timing.disruption_interval, Ev::DisruptionTick);
            }
            Ev::Controller(Wake::BatchDue) => self
                .ctl
                .batch_due(&mut self.cluster, now)
                .map_err(decision)?,
            Ev::Controller(Wake::Retry) => {}
            Ev::Controller(Wake::Validate) => self.ctl.validate(&mut self.cluster, now),
            Ev::Controller(Wake::DrainStep) => self.ctl.drain_step(&mut self.cluster, now),
            // the simulated cloud accepts every termination: there is nothing to ask again
            Ev::Controller(Wake::Terminate(node)) => {
                self.ctl.terminate(&mut self.cluster, &node);
            }
            Ev::Sample => {
                self.sample();
                self.keep();
                self.at(now + self.sc.timing.sample_interval, Ev::Sample);
            }
        }
        Ok(())
    }

    /// Binds what fits, lets the controller look, and queues what everyone asked for.
    fn settle(&mut self) -> Result<(), SimError> {
        let now = self.now();
        let binds = super::binder::bindings(self.cluster.snapshot(), &self.sc.catalog.region)?;
        for (pod, node) in binds {
            if self.cluster.bind(&pod, &node) {
                self.ctl.pod_bound(&pod);
                if let Some(runtime) = self.job_runtime(&pod) {
                    self.at(now + runtime, Ev::JobDone(pod));
                }
            }
        }
        self.zone_violations
            .extend(volume_zone_violations(self.cluster.snapshot()));
        // after the event's pod changes and the bindings, so the next decision reads current status
        self.cluster.refresh_pdb_status();
        self.ctl.observe(&self.cluster, now);
        for (at, wake) in self.ctl.take_wakes() {
            self.at(at, Ev::Controller(wake));
        }
        let launched = self.cluster.take_launched();
        if !launched.is_empty() {
            self.at(now + self.sc.timing.boot, Ev::NodesReady(launched));
        }
        for (instance, at) in self.ctl.cloud.take_new_interruptions() {
            if at < self.sc.duration {
                self.at(at, Ev::Warning(instance));
            }
        }
        Ok(())
    }

    fn job_runtime(&self, pod: &str) -> Option<f64> {
        let p = self
            .cluster
            .snapshot()
            .pods
            .iter()
            .find(|p| p.key() == pod)?;
        let w = self.sc.workloads.iter().find(|w| {
            p.owner_name.as_deref() == Some(w.name.as_str()) && p.namespace == w.namespace
        })?;
        match w.kind {
            WorkloadKind::Job { runtime, .. } => Some(runtime),
            WorkloadKind::Deployment { .. } | WorkloadKind::StatefulSet { .. } => None,
        }
    }

    fn remove_pod(&mut self, key: &str) {
        self.cluster.remove_pod(key);
        self.ctl.forget_pod(key);
        for live in self.live.values_mut() {
            live.pods.retain(|p| p != key);
        }
    }

    /// A scripted interruption hits one schedulable spot node (of the type, if given), drawn
    /// uniformly with the run's seed and the event's time. EC2 reclaims instances of a pool without
    /// regard to their age or size, so no strategy's node shape decides which node it takes.
    fn scripted_interrupt(&mut self, instance_type: Option<&str>) {
        let candidates: Vec<String> = self
            .cluster
            .snapshot()
            .nodes
            .iter()
            .filter(|n| {
                !n.unschedulable
                    && n.labels.get(CAPACITY_TYPE).map(String::as_str)
                        == Some(CapacityType::Spot.as_str())
            })
            .filter(|n| {
                instance_type
                    .is_none_or(|t| n.labels.get(INSTANCE_TYPE).map(String::as_str) == Some(t))
            })
            .filter_map(|n| self.ctl.instance_of(&n.name))
            .map(str::to_string)
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        if candidates.is_empty() {
            return;
        }
        let mut rng = crate::workload::Rng(self.seed ^ self.now_ms.rotate_left(32));
        let instance = candidates[rng.below(candidates.len())].clone();
        let now = self.now();
        self.ctl
            .interruption_warning(&mut self.cluster, &instance, now);
    }

    fn step_workloads(&mut self) {
        let now = self.now();
        let step = self.sc.timing.workload_step;
        for w in &self.sc.workloads {
            let want = match (&w.kind, w.kind.scaling()) {
                (_, Some((replicas, bursts))) => {
                    replicas.at(now)
                        + bursts
                            .iter()
                            .filter(|b| (b.at..b.at + b.duration).contains(&now))
                            .map(|b| b.extra)
                            .sum::<u32>()
                }
                // a Job's pods are created once, in the step that reaches its start
                (
                    WorkloadKind::Job {
                        at, parallelism, ..
                    },
                    None,
                ) if *at <= now && now < at + step => *parallelism,
                (_, None) => continue,
            };
            let key = format!("{}/{}", w.namespace, w.name);
            let have = self.live.get(&key).map_or(0, |l| l.pods.len()) as u32;
            if want > have {
                for _ in have..want {
                    self.create_pod(w, &key);
                }
            } else if w.kind.scaling().is_some() {
                let stateful = matches!(w.kind, WorkloadKind::StatefulSet { .. });
                for _ in want..have {
                    self.scale_down_one(&key, stateful);
                }
            }
        }
    }

    fn create_pod(&mut self, w: &Workload, key: &str) {
        let stamp = (self.sc.start + chrono::Duration::milliseconds(self.now_ms as i64))
            .to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
        let live = self.live.entry(key.to_string()).or_default();
        live.created += 1;
        let (name, kind) = match &w.kind {
            WorkloadKind::StatefulSet { .. } => {
                let taken: BTreeSet<u32> = live.pods.iter().filter_map(|p| ordinal(p)).collect();
                let free = (0..).find(|i| !taken.contains(i)).unwrap_or(0);
                (format!("{}-{free}", w.name), "StatefulSet")
            }
            WorkloadKind::Job { .. } => (format!("{}-{:05}", w.name, live.created), "Job"),
            WorkloadKind::Deployment { .. } => {
                (format!("{}-{:05}", w.name, live.created), "ReplicaSet")
            }
        };
        let mut pod = Pod::new(name, w.pod.clone()).owned_by(kind, &w.name);
        pod.created = Some(stamp);
        pod.uid = format!("{key}-{}", live.created);
        live.pods.push(pod.key());
        pod.volumes = w.volumes.clone();
        if let WorkloadKind::StatefulSet { claims, .. } = &w.kind {
            for t in claims {
                let claim = t.claim_for(&pod.name);
                self.cluster
                    .make_claim(&w.namespace, &claim, &t.storage_class);
                pod.volumes.push(t.volume_for(&pod.name));
            }
        }
        self.cluster.add_pod(pod);
    }

    /// A ReplicaSet scaling down deletes unbound pods first, then the newest; a StatefulSet
    /// deletes its highest ordinal, bound or not, and keeps the pod's claims.
    fn scale_down_one(&mut self, key: &str, stateful: bool) {
        let Some(live) = self.live.get(key) else {
            return;
        };
        if stateful {
            let victim = live.pods.iter().max_by_key(|p| ordinal(p)).cloned();
            if let Some(v) = victim {
                self.remove_pod(&v);
            }
            return;
        }
        let pending = |k: &String| {
            self.cluster
                .snapshot()
                .pods
                .iter()
                .any(|p| &p.key() == k && p.node_name.is_none())
        };
        let victim = live
            .pods
            .iter()
            .rev()
            .find(|k| pending(k))
            .or_else(|| live.pods.last())
            .cloned();
        if let Some(v) = victim {
            self.remove_pod(&v);
        }
    }

    fn sample(&mut self) {
        let (nodes, cost_per_hour) = self.ctl.cloud.billing();
        let s = Sample {
            hours: self.now() / 3600.0,
            cost_per_hour,
            nodes,
            pending_pods: self.cluster.snapshot().pending_pods().count(),
        };
        if self.samples.last().is_some_and(|l| l.hours == s.hours) {
            self.samples.pop();
        }
        self.samples.push(s);
    }

    pub fn report(&self, wall_seconds: f64) -> RunReport {
        let end = self.sc.duration;
        let total_cost = self.ctl.cloud.total_cost(end);
        let (unschedulable, pending_at_end) = self.leftovers();
        let st = &self.ctl.stats;
        // pods still pending at the end count with the wait they have had so far
        let mut waits = self.cluster.pending_times.clone();
        waits.extend(self.cluster.open_waits());
        let served_pod_hours = self.cluster.served_seconds() / 3600.0;
        let summary = Summary {
            total_cost,
            average_cost_per_hour: total_cost / (end / 3600.0),
            peak_nodes: self.samples.iter().map(|s| s.nodes).max().unwrap_or(0),
            final_nodes: self.ctl.cloud.billing().0,
            pending_seconds: Percentiles::of(&waits),
            pods_started: self.cluster.started.len(),
            pods_evicted: st.evicted,
            pods_evicted_by_interruption: st.evicted_by_interruption,
            interruptions_handled: st.interruptions,
            ice_events: st.ice,
            instances_launched: st.launched,
            instances_terminated: st.terminated,
            disruptions_executed: st.disruptions_executed,
            disruptions_abandoned: st.disruptions_abandoned,
            solves: st.solves.len(),
            solver_seconds: Percentiles::of(
                &st.solves.iter().map(|s| s.seconds).collect::<Vec<_>>(),
            ),
            time_limited_solves: st.time_limited,
            unschedulable_pods: unschedulable,
            pending_at_end,
            pending_pod_hours: waits.iter().sum::<f64>() / 3600.0,
            served_pod_hours,
            cost_per_served_pod_hour: if served_pod_hours > 0.0 {
                total_cost / served_pod_hours
            } else {
                0.0
            },
            short_lived_nodes: short_lived(&self.cluster.lifetimes, |pool| {
                self.consolidate_after(pool)
            }),
            volume_zone_violations: self.zone_violations.len(),
        };
        RunReport {
            strategy: self.strategy.as_str().to_string(),
            scenario: self.sc.name.clone(),
            seed: self.seed,
            hours: end / 3600.0,
            summary,
            series: self.samples.clone(),
            wall_seconds,
        }
    }

    /// A NodePool's consolidateAfter in seconds: 0 when absent, `Never` or unknown.
    fn consolidate_after(&self, pool: &str) -> f64 {
        self.sc
            .cluster
            .nodepools
            .iter()
            .find(|np| np.name == pool)
            .and_then(|np| np.disruption.consolidate_after.as_deref())
            .and_then(|v| crate::disruption::timing::parse_go_duration(v).ok())
            .map_or(0.0, |d| d.as_secs_f64())
    }

    /// Pending pods at the end split into those no offering can hold and those still waiting.
    fn leftovers(&self) -> (usize, usize) {
        let snap = self.cluster.snapshot();
        let pending = snap.pending_pods().count();
        if pending == 0 {
            return (0, 0);
        }
        let settings = crate::optimizer::SolveSettings {
            strategy: crate::optimizer::Strategy::Greedy,
            lower_bound: false,
            ..Default::default()
        };
        let never = crate::optimizer::solve(snap, &self.sc.catalog, &settings)
            .map_or(0, |p| p.unschedulable.len());
        (never, pending - never)
    }
}

/// A StatefulSet pod's ordinal, from its key `namespace/<sts>-<ordinal>`.
fn ordinal(key: &str) -> Option<u32> {
    key.rsplit_once('-').and_then(|(_, n)| n.parse().ok())
}

/// The PodDisruptionBudget a workload's `maxUnavailable` asks for.
fn workload_pdb(w: &Workload) -> Option<PodDisruptionBudget> {
    let max = w.max_unavailable.clone()?;
    Some(PodDisruptionBudget {
        namespace: w.namespace.clone(),
        name: w.name.clone(),
        selector: LabelSelector {
            match_labels: w.pod.labels.clone(),
            match_expressions: vec![],
        },
        min_available: None,
        max_unavailable: Some(max),
        disruptions_allowed: None,
    })
}

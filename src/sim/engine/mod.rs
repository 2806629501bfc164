//! The simulation's state and event loop. Time is virtual, in milliseconds, and only moves from one
//! queued event to the next. After each event `settle` lets the kube-scheduler stand-in bind what
//! it can and opens or extends a provisioning batch for pods still waiting; `provision` and
//! `disrupt` hold the controller's side (batches, launches, registration, interruptions, disruption
//! commands), each calling the real decision code.

mod disrupt;
mod provision;

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, BinaryHeap};

use crate::cloud::sim::{IceWindow, SimCloud};
use crate::cloud::Unavailable;
use crate::domain::{ClusterSnapshot, LabelSelector, Pod, PodDisruptionBudget};
use crate::optimizer::NewNode;

use super::report::{Percentiles, RunReport, Sample, Summary};
use super::scenario::{Event, Scenario, WorkloadKind};
use super::{SimError, SimStrategy};

/// Something that happens at an instant. Ordered so that simultaneous events run in a fixed order.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Ev {
    NodeReady(String),
    Warning(String),
    Terminate(String),
    JobDone(String),
    ScriptedInterrupt(Option<String>),
    WorkloadStep,
    Retry,
    BatchDue,
    DisruptionTick,
    Validate,
    DrainStep,
    Sample,
}

/// A launched instance that has not registered yet.
struct Booting {
    node: NewNode,
    instance: String,
}

/// An instance being billed.
struct Billed {
    price: f64,
    since: f64,
}

/// A workload's live pods, oldest first.
#[derive(Default)]
struct Live {
    pods: Vec<String>,
    created: u64,
}

#[derive(Default)]
struct Counters {
    evicted: usize,
    interruptions: usize,
    ice: usize,
    launched: usize,
    terminated: usize,
    executed: usize,
    abandoned: usize,
    time_limited: usize,
    started: BTreeSet<String>,
}

pub struct World<'a> {
    sc: &'a Scenario,
    strategy: SimStrategy,
    seed: u64,
    cloud: SimCloud,
    unavailable: Unavailable,
    now_ms: u64,
    seq: u64,
    queue: BinaryHeap<Reverse<(u64, u64, Ev)>>,
    /// Registered nodes, every pod (bound or pending), NodePools, DaemonSets, PDBs.
    snap: ClusterSnapshot,
    booting: BTreeMap<String, Booting>,
    /// Node name -> instance id, for registered and booting nodes.
    instance_of: BTreeMap<String, String>,
    billed: BTreeMap<String, Billed>,
    /// Pending pods a launch is meant for, and the node.
    nominated: BTreeMap<String, String>,
    pending_since: BTreeMap<String, f64>,
    /// Pending pods the last solve could not place, and when to try them again.
    parked: BTreeMap<String, f64>,
    /// Pending pods the open batch already holds.
    batch: BTreeSet<String>,
    batch_window: Option<(f64, f64)>,
    live: BTreeMap<String, Live>,
    node_seq: u64,
    disruption: disrupt::State,
    cost: f64,
    pending_times: Vec<f64>,
    solver_seconds: Vec<f64>,
    counters: Counters,
    samples: Vec<Sample>,
}

impl<'a> World<'a> {
    pub fn new(sc: &'a Scenario, strategy: SimStrategy, seed: u64) -> World<'a> {
        let ice = sc
            .events
            .iter()
            .filter_map(|e| match e {
                Event::InsufficientCapacity { from, until, instance_type, zone, capacity_type } => {
                    Some(IceWindow { from: *from, until: *until, instance_type: instance_type.clone(), zone: zone.clone(), capacity_type: *capacity_type })
                }
                Event::Interrupt { .. } => None,
            })
            .collect();
        let mut snap = sc.cluster.clone();
        snap.pdbs.extend(sc.workloads.iter().filter_map(workload_pdb));
        let mut world = World {
            sc,
            strategy,
            seed,
            cloud: SimCloud::new(sc.catalog.clone(), ice, sc.interruption_rate_scale, seed),
            unavailable: Unavailable::default(),
            now_ms: 0,
            seq: 0,
            queue: BinaryHeap::new(),
            snap,
            booting: BTreeMap::new(),
            instance_of: BTreeMap::new(),
            billed: BTreeMap::new(),
            nominated: BTreeMap::new(),
            pending_since: BTreeMap::new(),
            parked: BTreeMap::new(),
            batch: BTreeSet::new(),
            batch_window: None,
            live: BTreeMap::new(),
            node_seq: 0,
            disruption: disrupt::State::default(),
            cost: 0.0,
            pending_times: vec![],
            solver_seconds: vec![],
            counters: Counters::default(),
            samples: vec![],
        };
        world.adopt_initial_nodes();
        world
    }

    fn now(&self) -> f64 {
        self.now_ms as f64 / 1000.0
    }

    fn at(&mut self, seconds: f64, ev: Ev) {
        let ms = (seconds.max(self.now()) * 1000.0).round() as u64;
        self.seq += 1;
        self.queue.push(Reverse((ms, self.seq, ev)));
    }

    fn timestamp(&self) -> crate::disruption::timing::Timestamp {
        self.sc.start + chrono::Duration::milliseconds(self.now_ms as i64)
    }

    fn rfc3339(&self) -> String {
        self.timestamp().to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
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
            self.cloud.set_now(self.now());
            let sample = ev == Ev::Sample;
            self.handle(ev)?;
            self.settle()?;
            if sample {
                progress(self.now() / end);
            }
        }
        self.now_ms = (end * 1000.0).round() as u64;
        self.sample();
        progress(1.0);
        Ok(())
    }

    fn handle(&mut self, ev: Ev) -> Result<(), SimError> {
        match ev {
            Ev::WorkloadStep => {
                self.step_workloads();
                self.at(self.now() + self.sc.timing.workload_step, Ev::WorkloadStep);
            }
            Ev::JobDone(pod) => self.remove_pod(&pod),
            Ev::Retry => {}
            Ev::BatchDue => self.batch_due()?,
            Ev::NodeReady(name) => self.node_ready(&name),
            Ev::Warning(instance) => self.interruption_warning(&instance),
            Ev::ScriptedInterrupt(instance_type) => self.scripted_interrupt(instance_type.as_deref()),
            Ev::Terminate(node) => self.terminate(&node),
            Ev::DisruptionTick => {
                self.disruption_tick()?;
                self.at(self.now() + self.sc.timing.disruption_interval, Ev::DisruptionTick);
            }
            Ev::Validate => self.validate()?,
            Ev::DrainStep => self.drain_step(),
            Ev::Sample => {
                self.sample();
                self.at(self.now() + self.sc.timing.sample_interval, Ev::Sample);
            }
        }
        Ok(())
    }

    /// Binds what fits, then batches what still waits for capacity.
    fn settle(&mut self) -> Result<(), SimError> {
        self.refresh_pdb_status();
        let binds = super::binder::bindings(&self.snap, &self.sc.catalog.region)?;
        let now = self.now();
        for (pod, node) in binds {
            self.bind(&pod, &node, now);
        }
        let waiting: Vec<String> = self
            .snap
            .pending_pods()
            .map(Pod::key)
            .filter(|k| !self.nominated.contains_key(k) && !self.batch.contains(k) && self.parked.get(k).is_none_or(|t| *t <= now))
            .collect();
        if !waiting.is_empty() {
            for k in waiting {
                self.parked.remove(&k);
                self.batch.insert(k);
            }
            let (first, _) = self.batch_window.unwrap_or((now, now));
            self.batch_window = Some((first, now));
            let due = (now + self.sc.timing.batch_idle).min(first + self.sc.timing.batch_max);
            self.at(due, Ev::BatchDue);
        }
        Ok(())
    }

    fn bind(&mut self, pod: &str, node: &str, now: f64) {
        let stamp = self.rfc3339();
        let Some(p) = self.snap.pods.iter_mut().find(|p| p.key() == pod) else { return };
        p.node_name = Some(node.to_string());
        p.started = Some(stamp.clone());
        let job = self.sc.workloads.iter().find(|w| p.owner_name.as_deref() == Some(w.name.as_str()) && p.namespace == w.namespace);
        if let Some(WorkloadKind::Job { runtime, .. }) = job.map(|w| &w.kind) {
            let done = now + runtime;
            self.at(done, Ev::JobDone(pod.to_string()));
        }
        if let Some(since) = self.pending_since.remove(pod) {
            self.pending_times.push(now - since);
        }
        self.nominated.remove(pod);
        self.batch.remove(pod);
        self.counters.started.insert(pod.to_string());
        if let Some(c) = self.snap.node_claims.iter_mut().find(|c| c.node_name.as_deref() == Some(node)) {
            c.last_pod_event = Some(stamp);
        }
    }

    /// Makes a bound pod pending again, as its controller would recreate it after an eviction.
    fn evict(&mut self, pod: &str) {
        let now = self.now();
        let stamp = self.rfc3339();
        if let Some(p) = self.snap.pods.iter_mut().find(|p| p.key() == pod && p.node_name.is_some()) {
            let node = p.node_name.take();
            p.created = Some(stamp.clone());
            self.pending_since.insert(pod.to_string(), now);
            self.counters.evicted += 1;
            if let Some(c) = self.snap.node_claims.iter_mut().find(|c| c.node_name == node) {
                c.last_pod_event = Some(stamp);
            }
        }
    }

    fn remove_pod(&mut self, key: &str) {
        let node = self.snap.pods.iter().find(|p| p.key() == key).and_then(|p| p.node_name.clone());
        self.snap.pods.retain(|p| p.key() != key);
        self.pending_since.remove(key);
        self.nominated.remove(key);
        self.parked.remove(key);
        self.batch.remove(key);
        for live in self.live.values_mut() {
            live.pods.retain(|p| p != key);
        }
        let stamp = self.rfc3339();
        if let Some(c) = self.snap.node_claims.iter_mut().find(|c| node.is_some() && c.node_name == node) {
            c.last_pod_event = Some(stamp);
        }
    }

    fn step_workloads(&mut self) {
        let now = self.now();
        let step = self.sc.timing.workload_step;
        for w in &self.sc.workloads {
            let want = match &w.kind {
                WorkloadKind::Deployment { replicas, bursts } => {
                    replicas.at(now) + bursts.iter().filter(|b| (b.at..b.at + b.duration).contains(&now)).map(|b| b.extra).sum::<u32>()
                }
                // a Job's pods are created once, in the step that reaches its start
                WorkloadKind::Job { at, parallelism, .. } if *at <= now && now < at + step => *parallelism,
                WorkloadKind::Job { .. } => continue,
            };
            let key = format!("{}/{}", w.namespace, w.name);
            let have = self.live.get(&key).map_or(0, |l| l.pods.len()) as u32;
            if want > have {
                for _ in have..want {
                    self.create_pod(w, &key);
                }
            } else if matches!(w.kind, WorkloadKind::Deployment { .. }) {
                for _ in want..have {
                    self.scale_down_one(&key);
                }
            }
        }
    }

    fn create_pod(&mut self, w: &super::scenario::Workload, key: &str) {
        let stamp = self.rfc3339();
        let live = self.live.entry(key.to_string()).or_default();
        live.created += 1;
        let kind = if matches!(w.kind, WorkloadKind::Job { .. }) { "Job" } else { "ReplicaSet" };
        let mut pod = Pod::new(format!("{}-{:05}", w.name, live.created), w.pod.clone()).owned_by(kind, &w.name);
        pod.created = Some(stamp);
        pod.uid = format!("{key}-{}", live.created);
        live.pods.push(pod.key());
        self.pending_since.insert(pod.key(), self.now());
        self.snap.pods.push(pod);
    }

    /// A ReplicaSet scaling down deletes unbound pods first, then the newest.
    fn scale_down_one(&mut self, key: &str) {
        let Some(live) = self.live.get(key) else { return };
        let pending = |k: &String| self.snap.pods.iter().any(|p| &p.key() == k && p.node_name.is_none());
        let victim = live.pods.iter().rev().find(|k| pending(k)).or_else(|| live.pods.last()).cloned();
        if let Some(v) = victim {
            self.remove_pod(&v);
        }
    }

    /// PodDisruptionBudget status as the disruption controller reports it: healthy (bound) pods
    /// less those the budget requires, over every pod it selects.
    fn refresh_pdb_status(&mut self) {
        for i in 0..self.snap.pdbs.len() {
            let b = &self.snap.pdbs[i];
            let selected: Vec<&Pod> = self.snap.pods.iter().filter(|p| p.namespace == b.namespace && !p.terminal && b.selector.matches(&p.labels)).collect();
            let expected = selected.len();
            let healthy = selected.iter().filter(|p| p.node_name.is_some()).count();
            let scaled = |v: &str| match v.strip_suffix('%') {
                Some(pct) => pct.parse::<usize>().ok().map(|pct| (expected * pct).div_ceil(100)),
                None => v.parse::<usize>().ok(),
            };
            let desired = match (b.min_available.as_deref(), b.max_unavailable.as_deref()) {
                (_, Some(max)) => expected.saturating_sub(scaled(max).unwrap_or(0)),
                (Some(min), None) => scaled(min).unwrap_or(expected),
                (None, None) => 0,
            };
            self.snap.pdbs[i].disruptions_allowed = Some(healthy.saturating_sub(desired) as i32);
        }
    }

    fn sample(&mut self) {
        let pending = self.snap.pending_pods().count();
        let cost_per_hour = self.billed.values().map(|b| b.price).sum::<f64>() + 0.0;
        let s = Sample { hours: self.now() / 3600.0, cost_per_hour, nodes: self.billed.len(), pending_pods: pending };
        if self.samples.last().is_some_and(|l| l.hours == s.hours) {
            self.samples.pop();
        }
        self.samples.push(s);
    }

    pub fn report(&self, wall_seconds: f64) -> RunReport {
        let end = self.sc.duration;
        let open: f64 = self.billed.values().map(|b| b.price * (end - b.since) / 3600.0).sum();
        let total_cost = self.cost + open;
        let (unschedulable, pending_at_end) = self.leftovers();
        let summary = Summary {
            total_cost,
            average_cost_per_hour: total_cost / (end / 3600.0),
            peak_nodes: self.samples.iter().map(|s| s.nodes).max().unwrap_or(0),
            final_nodes: self.billed.len(),
            pending_seconds: Percentiles::of(&self.pending_times),
            pods_started: self.counters.started.len(),
            pods_evicted: self.counters.evicted,
            interruptions_handled: self.counters.interruptions,
            ice_events: self.counters.ice,
            instances_launched: self.counters.launched,
            instances_terminated: self.counters.terminated,
            disruptions_executed: self.counters.executed,
            disruptions_abandoned: self.counters.abandoned,
            solves: self.solver_seconds.len(),
            solver_seconds: Percentiles::of(&self.solver_seconds),
            time_limited_solves: self.counters.time_limited,
            unschedulable_pods: unschedulable,
            pending_at_end,
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

    /// Pending pods at the end split into those no offering can hold and those still waiting.
    fn leftovers(&self) -> (usize, usize) {
        let pending = self.snap.pending_pods().count();
        if pending == 0 {
            return (0, 0);
        }
        let settings = crate::optimizer::SolveSettings { strategy: crate::optimizer::Strategy::Greedy, lower_bound: false, ..Default::default() };
        let never = crate::optimizer::solve(&self.snap, &self.sc.catalog, &settings).map_or(0, |p| p.unschedulable.len());
        (never, pending - never)
    }
}

/// The PodDisruptionBudget a workload's `maxUnavailable` asks for.
fn workload_pdb(w: &super::scenario::Workload) -> Option<PodDisruptionBudget> {
    let max = w.max_unavailable.clone()?;
    Some(PodDisruptionBudget {
        namespace: w.namespace.clone(),
        name: w.name.clone(),
        selector: LabelSelector { match_labels: w.pod.labels.clone(), match_expressions: vec![] },
        min_available: None,
        max_unavailable: Some(max),
        disruptions_allowed: None,
    })
}

//! Headroom for a rising demand. A plan sized to the pods pending at one moment leaves no room
//! for the next replica, so each arrival of a rising workload waits for a node of its own to boot
//! and each of those small nodes is later consolidated, its pods evicted. When pods are pending,
//! [`add`] looks at how many pods each workload gained within the last `trendMinutes` ([`Trend`],
//! kept by the controller from what it observes) and adds
//! `trendHeadroom` times as many stand-ins for its next replicas: pods with its requests, node
//! requirements and tolerations, but no labels and no rules between pods, in a namespace no real
//! pod can have. Leaving a stand-in unplaced costs the fair price of its room (the cheapest
//! offering's price times the share of the node it takes) times `headroomPrice`, so the solve
//! buys room ahead only where it is about as cheap as it will be later: a larger type for a node
//! it launches anyway, never a node for stand-ins alone ([`strip`] drops such nodes). Stand-ins
//! that fit in room the cluster already has cost nothing and change nothing.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

use super::plan::Plan;
use crate::domain::{ClusterSnapshot, Pod, PodConstraints};

/// The namespace of the stand-ins: a colon is not allowed in a Kubernetes namespace name, so no
/// real pod shares it.
pub const NAMESPACE: &str = "joiner.sh:headroom";

/// A workload: its pods' namespace, owner kind and owner name.
pub type Workload = (String, String, String);

/// Whether a class or pod with these constraints is a stand-in.
pub fn is_headroom(c: &PodConstraints) -> bool {
    c.namespace == NAMESPACE
}

/// Each workload's pod count as observed over the last `trendMinutes`: its growth is the latest
/// count less the least within that time. Counting pods, not creations, keeps a pod that is
/// evicted and created again from looking like growth.
#[derive(Debug, Default, Clone)]
pub struct Trend {
    seen: BTreeMap<Workload, VecDeque<(f64, usize)>>,
    last: Option<f64>,
    /// `trendMinutes` and `recallMinutes` in seconds, as of the last observation.
    trend_window: f64,
    recall_window: f64,
}

/// Seconds between two observations: counting every pod at every change of a large cluster would
/// cost more than the trend is worth.
const SAMPLE_SECONDS: f64 = 10.0;

impl Trend {
    /// Records each workload's pods in `snapshot` at `now` (seconds), at most once per
    /// [`SAMPLE_SECONDS`], and forgets what is older than the window.
    pub fn observe(&mut self, snapshot: &ClusterSnapshot, now: f64) {
        if self
            .last
            .is_some_and(|t| now - t < SAMPLE_SECONDS && now >= t)
        {
            return;
        }
        self.last = Some(now);
        let w = &snapshot.weights;
        self.trend_window = w.trend_minutes.max(0.0) * 60.0;
        self.recall_window = w.recall_minutes.max(0.0) * 60.0;
        let window = self.trend_window.max(self.recall_window);
        let counts = workload_pods(snapshot);
        for (w, pods) in &counts {
            let seen = self.seen.entry(w.clone()).or_default();
            if seen.back().is_some_and(|(t, _)| *t == now) {
                seen.pop_back();
            }
            seen.push_back((now, pods.len()));
        }
        for (w, seen) in &mut self.seen {
            if !counts.contains_key(w) {
                seen.push_back((now, 0));
            }
            while seen.len() > 1 && seen.front().is_some_and(|(t, _)| now - *t > window) {
                seen.pop_front();
            }
        }
        self.seen.retain(|_, seen| seen.iter().any(|(_, n)| *n > 0));
    }

    /// How many pods each workload gained within `trendMinutes`: its latest count less its least.
    pub fn growth(&self) -> BTreeMap<Workload, usize> {
        self.seen
            .iter()
            .filter_map(|(w, seen)| {
                let (now, last) = *seen.back()?;
                let least = within(seen, now, self.trend_window).min()?;
                (last > least).then(|| (w.clone(), last - least))
            })
            .collect()
    }

    /// How many pods each workload that comes back is short of its peak: a workload that fell and
    /// rose again within `recallMinutes` (as an HPA's replicas wobble) is expected to reach its
    /// peak of that time again, so this is the peak less the latest count. A workload that only
    /// grows or only shrinks has none.
    pub fn recurring(&self) -> BTreeMap<Workload, usize> {
        self.seen
            .iter()
            .filter_map(|(w, seen)| {
                let (now, last) = *seen.back()?;
                let counts: Vec<usize> = within(seen, now, self.recall_window).collect();
                let peak = *counts.iter().max()?;
                (peak > last && fell_and_rose(&counts)).then(|| (w.clone(), peak - last))
            })
            .collect()
    }
}

/// The counts of `seen` observed within `window` seconds of `now`.
fn within(
    seen: &VecDeque<(f64, usize)>,
    now: f64,
    window: f64,
) -> impl Iterator<Item = usize> + '_ {
    seen.iter()
        .filter(move |(t, _)| now - *t <= window)
        .map(|(_, n)| *n)
}

/// Whether some count is below an earlier one and a later one is above it again.
fn fell_and_rose(counts: &[usize]) -> bool {
    let mut high = 0;
    let mut low: Option<usize> = None;
    for &n in counts {
        if low.is_some_and(|l| n > l) {
            return true;
        }
        if n < high {
            low = Some(low.map_or(n, |l| l.min(n)));
        }
        high = high.max(n);
    }
    false
}

/// The room `recurring` workloads need to come back to their peaks: each one's newest pod's
/// requests times the pods it is short. A workload with no pod left has no requests to go by.
pub fn held_room(
    snapshot: &ClusterSnapshot,
    recurring: &BTreeMap<Workload, usize>,
) -> crate::domain::Resources {
    let pods = workload_pods(snapshot);
    let mut room = crate::domain::Resources::new();
    for (workload, short) in recurring {
        let Some(newest) = pods.get(workload).and_then(|p| p.last()) else {
            continue;
        };
        for _ in 0..*short {
            room.add(&newest.constraints.requests);
        }
    }
    room
}

/// `snapshot` with `trendHeadroom` stand-ins per pod each workload of `growth` gained, and how
/// many were added. Nothing is added without a pending pod.
pub fn add(
    snapshot: &ClusterSnapshot,
    growth: &BTreeMap<Workload, usize>,
) -> (ClusterSnapshot, usize) {
    let w = &snapshot.weights;
    let mut out = snapshot.clone();
    if w.trend_headroom <= 0.0 || snapshot.pending_pods().next().is_none() {
        return (out, 0);
    }
    let pods = workload_pods(snapshot);
    let mut added = 0;
    for (workload, gained) in growth {
        let Some(newest) = pods.get(workload).and_then(|p| p.last()) else {
            continue;
        };
        let n = (*gained as f64 * w.trend_headroom).ceil() as usize;
        let (namespace, kind, name) = workload;
        // clones of one stand-in share its labels and constraints
        let mut template = Pod::new(String::new(), stand_in(&newest.constraints));
        template.created = newest.created.clone();
        for i in 0..n {
            let mut pod = template.clone();
            pod.name = format!("{namespace}.{kind}.{name}.{i}");
            out.pods.push(Arc::new(pod));
            added += 1;
        }
    }
    (out, added)
}

/// Each workload's live pods, oldest first.
fn workload_pods(snapshot: &ClusterSnapshot) -> BTreeMap<Workload, Vec<&Pod>> {
    let mut out: BTreeMap<Workload, Vec<&Pod>> = BTreeMap::new();
    for pod in snapshot.pods.iter().filter(|p| counts(p)) {
        let (Some(kind), Some(name)) = (pod.owner_kind.as_deref(), pod.owner_name.as_deref())
        else {
            continue;
        };
        out.entry((pod.namespace.clone(), kind.to_string(), name.to_string()))
            .or_default()
            .push(pod);
    }
    for pods in out.values_mut() {
        pods.sort_by(|a, b| a.created.cmp(&b.created).then(a.name.cmp(&b.name)));
    }
    out
}

/// Removes the stand-ins from `plan`: from its nodes (a node left with no real pod is not
/// launched), its placements and its unplaced pods. The plan's bound was certified for the
/// problem with them, so it is dropped.
pub fn strip(plan: &mut Plan) -> usize {
    let prefix = format!("{NAMESPACE}/");
    let real = |p: &String| !p.starts_with(&prefix);
    let before: usize = plan.nodes.iter().map(|n| n.pods.len()).sum();
    for n in &mut plan.nodes {
        n.pods.retain(real);
    }
    let after: usize = plan.nodes.iter().map(|n| n.pods.len()).sum();
    plan.nodes.retain(|n| !n.pods.is_empty());
    for e in &mut plan.existing {
        e.pods.retain(real);
    }
    plan.existing.retain(|e| !e.pods.is_empty());
    plan.unschedulable.retain(|u| real(&u.pod));
    plan.cost_per_hour = plan.nodes.iter().map(|n| n.price).sum();
    plan.lower_bound = 0.0;
    plan.solver.gap = 1.0;
    let held = before - after;
    if held > 0 {
        plan.solver.notes.push(format!(
            "headroom: room for {held} next replicas of growing workloads bought ahead"
        ));
    }
    held
}

/// A workload pod that counts towards its workload's size: not a DaemonSet's, not finished, not
/// being deleted.
fn counts(p: &Pod) -> bool {
    !p.terminal && !p.terminating && !p.is_daemonset_pod() && !p.mirror
}

/// The stand-in for a replica: its requests, node requirements and tolerations, nothing that
/// relates it to other pods.
fn stand_in(c: &PodConstraints) -> PodConstraints {
    PodConstraints {
        namespace: NAMESPACE.to_string(),
        labels: Default::default(),
        requests: c.requests.clone(),
        node_selector: c.node_selector.clone(),
        node_affinity: c.node_affinity.clone(),
        preferred_node_affinity: vec![],
        tolerations: c.tolerations.clone(),
        spread: vec![],
        pod_affinity: vec![],
        pod_anti_affinity: vec![],
        preferred_pod_affinity: vec![],
        preferred_pod_anti_affinity: vec![],
        host_ports: vec![],
        // a new replica gets a new volume, placed where its node is
        volume_requirements: vec![],
        volume_error: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{Quantity, Resources};

    fn replica(name: &str, created: &str) -> Arc<Pod> {
        let mut c = PodConstraints {
            namespace: "shop".into(),
            ..PodConstraints::default()
        };
        c.requests = Resources::new().with("cpu", Quantity::from_milli(500));
        c.labels.insert("app".into(), "web".into());
        let mut pod = Pod::new(name, c);
        pod.owner_kind = Some("ReplicaSet".into());
        pod.owner_name = Some("web-1".into());
        pod.created = Some(created.into());
        Arc::new(pod)
    }

    fn cluster(pods: &[Arc<Pod>]) -> ClusterSnapshot {
        ClusterSnapshot {
            pods: pods.to_vec(),
            ..ClusterSnapshot::default()
        }
    }

    fn web() -> Workload {
        ("shop".into(), "ReplicaSet".into(), "web-1".into())
    }

    #[test]
    fn growth_is_the_latest_count_less_the_least_within_the_window() {
        let mut t = Trend::default();
        let a = replica("a", "2026-01-01T00:00:00Z");
        let b = replica("b", "2026-01-01T00:01:00Z");
        let c = replica("c", "2026-01-01T00:02:00Z");
        t.observe(&cluster(std::slice::from_ref(&a)), 0.0);
        t.observe(&cluster(&[a.clone(), b.clone()]), 60.0);
        t.observe(&cluster(&[a.clone(), b.clone(), c.clone()]), 120.0);
        assert_eq!(t.growth(), [(web(), 2)].into());
        // 15 minutes later the first count has left the window
        t.observe(
            &cluster(&[a.clone(), b.clone(), c.clone()]),
            60.0 + 15.0 * 60.0,
        );
        assert_eq!(t.growth(), [(web(), 1)].into());
        t.observe(&cluster(&[a, b, c]), 120.0 + 15.5 * 60.0);
        assert!(t.growth().is_empty(), "steady: no growth");
    }

    #[test]
    fn a_pod_evicted_and_created_again_is_not_growth_and_samples_are_spaced() {
        let mut t = Trend::default();
        let a = replica("a", "2026-01-01T00:00:00Z");
        let b = replica("b", "2026-01-01T00:00:00Z");
        t.observe(&cluster(&[a.clone(), b]), 0.0);
        let b_again = replica("b-2", "2026-01-01T00:05:00Z");
        t.observe(&cluster(&[a.clone(), b_again.clone()]), 300.0);
        assert!(t.growth().is_empty());
        // a second look within SAMPLE_SECONDS is not recorded
        let c = replica("c", "2026-01-01T00:05:01Z");
        t.observe(&cluster(&[a, b_again, c]), 301.0);
        assert!(t.growth().is_empty());
    }

    #[test]
    fn a_workload_that_is_gone_is_forgotten() {
        let mut t = Trend::default();
        t.observe(&cluster(&[replica("a", "2026-01-01T00:00:00Z")]), 0.0);
        t.observe(&cluster(&[]), 20.0 * 60.0);
        assert!(!t.seen.is_empty(), "kept for recallMinutes");
        t.observe(&cluster(&[]), 121.0 * 60.0);
        assert!(t.seen.is_empty());
    }

    fn replicas(n: usize) -> Vec<Arc<Pod>> {
        (0..n)
            .map(|i| replica(&format!("r{i}"), "2026-01-01T00:00:00Z"))
            .collect()
    }

    #[test]
    fn a_workload_that_fell_and_rose_again_is_short_of_its_peak() {
        let mut t = Trend::default();
        for (minute, n) in [(0.0, 4), (10.0, 6), (20.0, 3), (30.0, 5)] {
            t.observe(&cluster(&replicas(n)), minute * 60.0);
        }
        assert_eq!(t.recurring(), [(web(), 1)].into());
        let room = held_room(&cluster(&replicas(5)), &t.recurring());
        assert_eq!(room.get("cpu"), Quantity::from_milli(500));
        // the peak leaves the 120-minute window
        t.observe(&cluster(&replicas(5)), 135.0 * 60.0);
        assert!(t.recurring().is_empty());
    }

    #[test]
    fn a_workload_that_only_falls_or_only_rises_does_not_recur() {
        let mut down = Trend::default();
        let mut up = Trend::default();
        for (minute, n) in [(0.0, 8), (10.0, 6), (20.0, 6), (30.0, 3)] {
            down.observe(&cluster(&replicas(n)), minute * 60.0);
            up.observe(&cluster(&replicas(9 - n)), minute * 60.0);
        }
        assert!(down.recurring().is_empty());
        assert!(up.recurring().is_empty());
        // a rise then a fall is a peak that has passed, not yet a return
        let mut once = Trend::default();
        for (minute, n) in [(0.0, 3), (10.0, 6), (20.0, 4)] {
            once.observe(&cluster(&replicas(n)), minute * 60.0);
        }
        assert!(once.recurring().is_empty());
    }

    #[test]
    fn stand_ins_carry_requests_and_node_rules_but_nothing_between_pods() {
        let mut snap = cluster(&[replica("a", "2026-01-01T00:00:00Z")]);
        let pending = replica("p", "2026-01-01T00:01:00Z");
        snap.pods.push(pending);
        snap.weights.trend_headroom = 1.0;
        let (out, added) = add(&snap, &[(web(), 2)].into());
        assert_eq!(added, 2);
        let stand_ins: Vec<&Arc<Pod>> = out
            .pods
            .iter()
            .filter(|p| is_headroom(&p.constraints))
            .collect();
        assert_eq!(stand_ins.len(), 2);
        for s in stand_ins {
            assert!(s.labels.is_empty() && s.constraints.labels.is_empty());
            assert_eq!(s.constraints.requests, snap.pods[0].constraints.requests);
            assert!(s.node_name.is_none() && s.owner_kind.is_none());
        }
    }
}

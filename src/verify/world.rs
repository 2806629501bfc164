//! The cluster as the plan would leave it: every node (existing ones and the plan's new ones) with
//! the pods bound to it and the pods the plan adds, and the per-node rules: pods placed once,
//! selectors and taints, room, host ports and NodePool limits.

use std::collections::{BTreeMap, HashMap};

use crate::catalog::Catalog;
use crate::domain::labels::HOSTNAME;
use crate::domain::{
    ClusterSnapshot, DaemonSet, HostPort, Labels, Pod, Quantity, Resources, Taint, TaintEffect,
};
use crate::optimizer::Plan;

use super::Violation;

/// Taints a node carries only while it starts: Karpenter and the kube-scheduler's node lifecycle
/// remove them, so they do not keep pods off.
const START_UP_TAINTS: [&str; 2] = ["node.kubernetes.io/not-ready", "karpenter.sh/unregistered"];

/// A node, existing or new, with its pods.
#[derive(Debug)]
pub(super) struct Host<'a> {
    pub name: String,
    pub labels: Labels,
    /// Taints that keep pods without a toleration off (NoSchedule and NoExecute).
    pub taints: Vec<Taint>,
    pub allocatable: Resources,
    /// Counted against NodePool limits.
    pub capacity: Resources,
    pub pool: Option<String>,
    pub new: bool,
    pub cordoned: bool,
    /// Pods bound to the node that still hold room on it.
    pub running: Vec<&'a Pod>,
    /// Pending pods the plan puts here.
    pub planned: Vec<&'a Pod>,
    /// DaemonSets whose pod will run on this new node.
    pub daemons: Vec<&'a DaemonSet>,
}

pub(super) struct World<'a> {
    pub snapshot: &'a ClusterSnapshot,
    pub catalog: &'a Catalog,
    pub pending: BTreeMap<String, &'a Pod>,
    pub hosts: Vec<Host<'a>>,
    pub index: HashMap<String, usize>,
    pub violations: Vec<Violation>,
}

impl<'a> World<'a> {
    pub fn new(snapshot: &'a ClusterSnapshot, catalog: &'a Catalog) -> World<'a> {
        let pending = snapshot.pending_pods().map(|p| (p.key(), p)).collect();
        let mut on_node: HashMap<&str, Vec<&'a Pod>> = HashMap::new();
        for p in snapshot.pods.iter().filter(|p| p.occupies_node()) {
            if let Some(n) = p.node_name.as_deref() {
                on_node.entry(n).or_default().push(p);
            }
        }
        let mut world = World {
            snapshot,
            catalog,
            pending,
            hosts: Vec::new(),
            index: HashMap::new(),
            violations: Vec::new(),
        };
        for node in &snapshot.nodes {
            let mut labels = node.labels.clone();
            labels
                .entry(HOSTNAME.to_string())
                .or_insert_with(|| node.name.clone());
            let taints = node
                .taints
                .iter()
                .filter(|t| !START_UP_TAINTS.contains(&t.key.as_str()))
                .cloned()
                .collect();
            world.push(Host {
                name: node.name.clone(),
                pool: node.nodepool().map(str::to_string),
                labels,
                taints: blocking(taints),
                allocatable: node.allocatable.clone(),
                capacity: node.capacity.clone(),
                new: false,
                cordoned: node.unschedulable,
                running: on_node.remove(node.name.as_str()).unwrap_or_default(),
                planned: Vec::new(),
                daemons: Vec::new(),
            });
        }
        world
    }

    pub fn push(&mut self, host: Host<'a>) {
        self.index.insert(host.name.clone(), self.hosts.len());
        self.hosts.push(host);
    }

    /// The pending pods among `keys`; the others are reported by [`World::check_accounting`].
    pub fn planned(&self, keys: &[String]) -> Vec<&'a Pod> {
        keys.iter()
            .filter_map(|k| self.pending.get(k).copied())
            .collect()
    }

    /// Every pending pod is placed once or reported unschedulable; nothing else is placed.
    pub fn check_accounting(&mut self, plan: &Plan) {
        let mut places: BTreeMap<&str, Vec<String>> = BTreeMap::new();
        for n in &plan.nodes {
            for p in &n.pods {
                places.entry(p.as_str()).or_default().push(n.id.clone());
            }
        }
        for e in &plan.existing {
            for p in &e.pods {
                places.entry(p.as_str()).or_default().push(e.node.clone());
            }
        }
        for u in &plan.unschedulable {
            places
                .entry(u.pod.as_str())
                .or_default()
                .push("unschedulable".into());
        }
        for (pod, places) in &places {
            if !self.pending.contains_key(*pod) {
                self.violations.push(Violation::NotPending {
                    pod: pod.to_string(),
                });
            } else if places.len() > 1 {
                self.violations.push(Violation::PlacedTwice {
                    pod: pod.to_string(),
                    places: places.clone(),
                });
            }
        }
        for pod in self.pending.keys() {
            if !places.contains_key(pod.as_str()) {
                self.violations
                    .push(Violation::Dropped { pod: pod.clone() });
            }
        }
    }

    /// Selectors, taints, room and host ports on every node that gets pods, and on every new node.
    pub fn check_hosts(&mut self) {
        let mut out = Vec::new();
        for h in self.hosts.iter().filter(|h| h.new || !h.planned.is_empty()) {
            if h.cordoned && !h.planned.is_empty() {
                out.push(Violation::Cordoned {
                    node: h.name.clone(),
                });
            }
            for p in &h.planned {
                check_pod_on(p, h, &mut out);
            }
            check_room(h, &mut out);
            check_ports(h, &mut out);
        }
        self.violations.extend(out);
    }

    /// A NodePool that gets new nodes stays within its limits, counting the nodes it has and the
    /// NodeClaims not yet registered.
    pub fn check_limits(&mut self) {
        for pool in &self.snapshot.nodepools {
            // a limit written as 0 is a limit: test the names, not the values
            if pool.limits.names().next().is_none() {
                continue;
            }
            let in_pool = |h: &&Host| h.pool.as_deref() == Some(pool.name.as_str());
            if !self.hosts.iter().filter(in_pool).any(|h| h.new) {
                continue;
            }
            let mut used = Resources::new();
            let one_node = Resources::new().with("nodes", Quantity::from_units(1));
            for h in self.hosts.iter().filter(in_pool) {
                used.add(&h.capacity);
                used.add(&one_node);
            }
            for claim in &self.snapshot.node_claims {
                let registered = claim
                    .node_name
                    .as_ref()
                    .is_some_and(|n| self.snapshot.nodes.iter().any(|x| &x.name == n));
                if claim.nodepool.as_deref() == Some(pool.name.as_str()) && !registered {
                    used.add(&claim.capacity);
                    used.add(&one_node);
                }
            }
            for (resource, limit) in pool.limits.iter() {
                if used.get(resource) > limit {
                    self.violations.push(Violation::NodePoolLimit {
                        nodepool: pool.name.clone(),
                        resource: resource.to_string(),
                        used: used.get(resource),
                        limit,
                    });
                }
            }
        }
    }
}

/// The taints that keep pods off: PreferNoSchedule only scores.
pub(super) fn blocking(taints: Vec<Taint>) -> Vec<Taint> {
    taints
        .into_iter()
        .filter(|t| t.effect != TaintEffect::PreferNoSchedule)
        .collect()
}

pub(super) fn taint_text(t: &Taint) -> String {
    if t.value.is_empty() {
        format!("{}:{}", t.key, t.effect.as_str())
    } else {
        format!("{}={}:{}", t.key, t.value, t.effect.as_str())
    }
}

fn check_pod_on(p: &Pod, h: &Host, out: &mut Vec<Violation>) {
    let c = &p.constraints;
    if !c.node_matches(&h.labels) {
        out.push(Violation::NodeSelector {
            pod: p.key(),
            node: h.name.clone(),
        });
    }
    for t in &h.taints {
        if !c.tolerations.iter().any(|tol| tol.tolerates(t)) {
            out.push(Violation::Taint {
                pod: p.key(),
                node: h.name.clone(),
                taint: taint_text(t),
            });
        }
    }
}

/// What the node's pods request: those bound, the planned ones and a new node's DaemonSet pods.
pub(super) fn requested(h: &Host) -> Resources {
    let mut used = Resources::new();
    for ds in &h.daemons {
        used.add(&ds.pod.requests);
    }
    for p in h.running.iter().chain(&h.planned) {
        used.add(p.requests());
    }
    used
}

fn check_room(h: &Host, out: &mut Vec<Violation>) {
    let used = requested(h);
    for (resource, requested) in used.iter() {
        let allocatable = h.allocatable.get(resource);
        if requested.milli() > 0 && requested > allocatable {
            out.push(Violation::Overcommitted {
                node: h.name.clone(),
                resource: resource.to_string(),
                requested,
                allocatable,
            });
        }
    }
}

fn check_ports(h: &Host, out: &mut Vec<Violation>) {
    let planned: Vec<(String, &HostPort)> = h
        .planned
        .iter()
        .flat_map(|p| p.constraints.host_ports.iter().map(move |hp| (p.key(), hp)))
        .collect();
    if planned.is_empty() {
        return;
    }
    let settled: Vec<(String, &HostPort)> = h
        .running
        .iter()
        .flat_map(|p| p.constraints.host_ports.iter().map(move |hp| (p.key(), hp)))
        .chain(h.daemons.iter().flat_map(|ds| {
            let name = format!("daemonset {}/{}", ds.namespace, ds.name);
            ds.pod.host_ports.iter().map(move |hp| (name.clone(), hp))
        }))
        .collect();
    for (i, (pod, port)) in planned.iter().enumerate() {
        let earlier = planned[..i].iter().filter(|(other, _)| other != pod);
        for (other, theirs) in settled.iter().chain(earlier) {
            if port.conflicts(theirs) {
                out.push(Violation::HostPort {
                    node: h.name.clone(),
                    port: format!("{}/{}", port.port, port.protocol),
                    first: other.clone(),
                    second: pod.clone(),
                });
            }
        }
    }
}

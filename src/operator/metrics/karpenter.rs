//! The `karpenter_*` series, with Karpenter's names, labels and meanings, so that its stock
//! dashboards and alerts read joiner unchanged. Gauges are computed at every step from the
//! snapshot the decision thread already holds; counters from what changed between two snapshots
//! (NodeClaims and Nodes that appeared or went away) and from the disruption command under way.

use std::collections::{BTreeMap, BTreeSet};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use super::disruption::{tainted, Savings, Step};
use super::gauges::{GaugeSet, Summary};
use super::interruption::Interruption;
use crate::domain::labels::{ARCH, CAPACITY_TYPE, INSTANCE_TYPE, NODEPOOL, OS, REGION, ZONE};
use crate::domain::resources::PODS;
use crate::domain::{ClusterSnapshot, Node, Pod, Resources};

/// Karpenter's node labels: the well-known node labels in snake case, the node's name, whether a
/// NodePool manages it, and the resource measured. Node `status.phase` is left out: Kubernetes
/// no longer sets it.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct NodeLabels {
    pub node_name: String,
    pub nodepool: String,
    pub zone: String,
    pub region: String,
    pub instance_type: String,
    pub arch: String,
    pub os: String,
    pub capacity_type: String,
    pub managed: String,
    pub resource_type: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PoolResourceLabels {
    pub nodepool: String,
    pub resource_type: String,
}

/// Karpenter's pod labels, less `ready`: the snapshot does not keep pod conditions.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PodLabels {
    pub name: String,
    pub namespace: String,
    pub owner: String,
    pub node: String,
    pub scheduled: String,
    pub nodepool: String,
    pub zone: String,
    pub arch: String,
    pub capacity_type: String,
    pub instance_type: String,
    pub phase: &'static str,
    pub managed: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ClaimCreatedLabels {
    pub reason: String,
    pub nodepool: String,
    pub min_values_relaxed: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ClaimTerminatedLabels {
    pub nodepool: String,
    pub capacity_type: String,
    pub zone: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct DisruptedLabels {
    pub reason: String,
    pub nodepool: String,
    pub capacity_type: String,
    pub consolidation_policy: String,
    pub termination_mode: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct NodeCountLabels {
    pub nodepool: String,
    pub zone: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct DecisionLabels {
    pub decision: &'static str,
    pub reason: String,
    pub consolidation_type: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct EligibleLabels {
    pub reason: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct BuildLabels {
    pub version: &'static str,
    pub goarch: &'static str,
}

pub struct Karpenter {
    pub nodes_allocatable: GaugeSet<NodeLabels>,
    pub nodes_pod_requests: GaugeSet<NodeLabels>,
    pub nodes_daemon_requests: GaugeSet<NodeLabels>,
    pub nodepools_usage: GaugeSet<PoolResourceLabels>,
    pub nodepools_limit: GaugeSet<PoolResourceLabels>,
    pub pods_state: GaugeSet<PodLabels>,
    pub pods_startup: Summary,
    pub nodeclaims_created: Family<ClaimCreatedLabels, Counter>,
    pub nodeclaims_terminated: Family<ClaimTerminatedLabels, Counter>,
    pub nodeclaims_disrupted: Family<DisruptedLabels, Counter>,
    pub nodes_created: Family<NodeCountLabels, Counter>,
    pub nodes_terminated: Family<NodeCountLabels, Counter>,
    pub decisions: Family<DecisionLabels, Counter>,
    pub eligible: Family<EligibleLabels, Gauge>,
    pub node_count: Gauge,
    pub synced: Gauge,
    pub build_info: Family<BuildLabels, Gauge>,
    pub interruption: Interruption,
}

/// Go's name for the architecture, as Karpenter's `goarch` label carries it.
pub fn goarch() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => other,
    }
}

impl Karpenter {
    /// The families, registered in `r` (the `karpenter` prefix).
    pub fn register(r: &mut Registry) -> Karpenter {
        let k = Karpenter {
            nodes_allocatable: GaugeSet::default(),
            nodes_pod_requests: GaugeSet::default(),
            nodes_daemon_requests: GaugeSet::default(),
            nodepools_usage: GaugeSet::default(),
            nodepools_limit: GaugeSet::default(),
            pods_state: GaugeSet::default(),
            pods_startup: Summary::default(),
            nodeclaims_created: Family::default(),
            nodeclaims_terminated: Family::default(),
            nodeclaims_disrupted: Family::default(),
            nodes_created: Family::default(),
            nodes_terminated: Family::default(),
            decisions: Family::default(),
            eligible: Family::default(),
            node_count: Gauge::default(),
            synced: Gauge::default(),
            build_info: Family::default(),
            interruption: Interruption::register(r),
        };
        let gauges: [(&str, &str, &GaugeSet<NodeLabels>); 3] = [
            ("nodes_allocatable", "Node allocatable are the resources allocatable by nodes", &k.nodes_allocatable),
            ("nodes_total_pod_requests", "Node total pod requests are the resources requested by pods bound to nodes, including the DaemonSet pods", &k.nodes_pod_requests),
            ("nodes_total_daemon_requests", "Node total daemon requests are the resources requested by DaemonSet pods bound to nodes", &k.nodes_daemon_requests),
        ];
        for (name, help, g) in gauges {
            r.register(name, help, g.family.clone());
        }
        r.register(
            "nodepools_usage",
            "The amount of resources provisioned by a NodePool, including nodes",
            k.nodepools_usage.family.clone(),
        );
        r.register(
            "nodepools_limit",
            "The limits of a NodePool (spec.limits)",
            k.nodepools_limit.family.clone(),
        );
        r.register(
            "pods_state",
            "Pod state is the current state of pods, labeled by pod, owner, node, its NodePool and offering, and phase",
            k.pods_state.family.clone(),
        );
        k.pods_startup.register(
            r,
            "pods_startup_duration_seconds",
            "The time from pod creation until the kubelet started the pod, quantiles over 10 minutes",
        );
        r.register(
            "nodeclaims_created",
            "Number of nodeclaims created in total, by reason, owning nodepool and whether min values was relaxed",
            k.nodeclaims_created.clone(),
        );
        r.register(
            "nodeclaims_terminated",
            "Number of nodeclaims terminated in total, by owning nodepool, capacity type and zone",
            k.nodeclaims_terminated.clone(),
        );
        r.register(
            "nodeclaims_disrupted",
            "Number of nodeclaims disrupted in total, by reason, owning nodepool, capacity type, consolidation policy and termination mode",
            k.nodeclaims_disrupted.clone(),
        );
        r.register(
            "nodes_created",
            "Number of nodes created in total, by owning nodepool and zone",
            k.nodes_created.clone(),
        );
        r.register(
            "nodes_terminated",
            "Number of nodes terminated in total, by owning nodepool and zone",
            k.nodes_terminated.clone(),
        );
        r.register(
            "voluntary_disruption_decisions",
            "Number of disruption decisions performed, by decision, reason and consolidation type",
            k.decisions.clone(),
        );
        r.register(
            "voluntary_disruption_eligible_nodes",
            "Number of nodes eligible for disruption, by disruption reason",
            k.eligible.clone(),
        );
        r.register(
            "cluster_state_node_count",
            "Current count of nodes in cluster state (Nodes, and NodeClaims not yet registered)",
            k.node_count.clone(),
        );
        r.register(
            "cluster_state_synced",
            "1 when every Node and NodeClaim in the caches could be read into the snapshot, else 0",
            k.synced.clone(),
        );
        r.register(
            "build_info",
            "A metric with a constant 1 value labeled by the joiner version it was built from",
            k.build_info.clone(),
        );
        k.build_info
            .get_or_create(&BuildLabels {
                version: env!("CARGO_PKG_VERSION"),
                goarch: goarch(),
            })
            .set(1);
        k
    }

    /// The gauges read off the snapshot: nodes' allocatable and requests, NodePools' usage and
    /// limits, every pod's state, the node count.
    pub fn set_state(&self, snap: &ClusterSnapshot, unregistered_claims: usize) {
        let mut allocatable = Vec::new();
        let mut requests = Vec::new();
        let mut daemons = Vec::new();
        let by_node = requests_by_node(snap);
        for node in &snap.nodes {
            for (name, q) in node.allocatable.iter() {
                allocatable.push((node_labels(node, name), q.as_f64()));
            }
            if let Some((all, daemon)) = by_node.get(node.name.as_str()) {
                for (name, q) in all.iter() {
                    requests.push((node_labels(node, name), q.as_f64()));
                }
                for (name, q) in daemon.iter() {
                    daemons.push((node_labels(node, name), q.as_f64()));
                }
            }
        }
        self.nodes_allocatable.replace(allocatable);
        self.nodes_pod_requests.replace(requests);
        self.nodes_daemon_requests.replace(daemons);
        self.set_pools(snap);
        let nodes: BTreeMap<&str, &Node> =
            snap.nodes.iter().map(|n| (n.name.as_str(), &**n)).collect();
        let pods = snap
            .pods
            .iter()
            .filter(|p| !p.terminal)
            .map(|p| (pod_labels(p, &nodes), 1.0));
        self.pods_state.replace(pods);
        self.node_count
            .set((snap.nodes.len() + unregistered_claims) as i64);
    }

    fn set_pools(&self, snap: &ClusterSnapshot) {
        let mut usage: BTreeMap<(String, String), f64> = BTreeMap::new();
        for pool in &snap.nodepools {
            usage.insert((pool.name.clone(), "nodes".into()), 0.0);
        }
        for claim in snap.node_claims.iter().filter(|c| !c.deleting) {
            let Some(pool) = &claim.nodepool else {
                continue;
            };
            *usage.entry((pool.clone(), "nodes".into())).or_default() += 1.0;
            for (name, q) in claim.capacity.iter() {
                *usage
                    .entry((pool.clone(), resource_type(name)))
                    .or_default() += q.as_f64();
            }
        }
        self.nodepools_usage
            .replace(usage.into_iter().map(|((nodepool, resource_type), v)| {
                (
                    PoolResourceLabels {
                        nodepool,
                        resource_type,
                    },
                    v,
                )
            }));
        let limits = snap.nodepools.iter().flat_map(|pool| {
            pool.limits.iter().map(|(name, q)| {
                (
                    PoolResourceLabels {
                        nodepool: pool.name.clone(),
                        resource_type: resource_type(name),
                    },
                    q.as_f64(),
                )
            })
        });
        self.nodepools_limit.replace(limits);
    }
}

/// Karpenter's resource name as a label value: lower case, dashes as underscores.
fn resource_type(name: &str) -> String {
    name.to_lowercase().replace('-', "_")
}

/// Every bound, non-terminal pod's requests by node (each pod counts one `pods`): all pods, and
/// the DaemonSet pods alone.
fn requests_by_node(snap: &ClusterSnapshot) -> BTreeMap<&str, (Resources, Resources)> {
    let one_pod = Resources::new().with(PODS, crate::domain::Quantity::from_units(1));
    let mut out: BTreeMap<&str, (Resources, Resources)> = BTreeMap::new();
    for pod in snap.pods.iter().filter(|p| !p.terminal) {
        let Some(node) = pod.node_name.as_deref() else {
            continue;
        };
        let requests = pod.requests().plus(&one_pod);
        let entry = out.entry(node).or_default();
        entry.0.add(&requests);
        if pod.is_daemonset_pod() {
            entry.1.add(&requests);
        }
    }
    out
}

fn label(node: &Node, key: &str) -> String {
    node.labels.get(key).cloned().unwrap_or_default()
}

fn node_labels(node: &Node, resource: &str) -> NodeLabels {
    NodeLabels {
        node_name: node.name.clone(),
        nodepool: label(node, NODEPOOL),
        zone: label(node, ZONE),
        region: label(node, REGION),
        instance_type: label(node, INSTANCE_TYPE),
        arch: label(node, ARCH),
        os: label(node, OS),
        capacity_type: label(node, CAPACITY_TYPE),
        managed: node.labels.contains_key(NODEPOOL).to_string(),
        resource_type: resource_type(resource),
    }
}

/// The owner as Karpenter writes it, a self link of the first owner reference, for the kinds
/// whose API group is known; empty for others.
fn owner_link(pod: &Pod) -> String {
    let (Some(kind), Some(name)) = (&pod.owner_kind, &pod.owner_name) else {
        return String::new();
    };
    let group = match kind.as_str() {
        "ReplicaSet" | "StatefulSet" | "DaemonSet" | "Deployment" => "apps/v1",
        "Job" | "CronJob" => "batch/v1",
        _ => return String::new(),
    };
    format!(
        "/apis/{group}/namespaces/{}/{}s/{name}",
        pod.namespace,
        kind.to_lowercase()
    )
}

fn pod_labels(pod: &Pod, nodes: &BTreeMap<&str, &Node>) -> PodLabels {
    let node = pod.node_name.as_deref().and_then(|n| nodes.get(n));
    let get = |key: &str| node.map(|n| label(n, key)).unwrap_or_default();
    // a bound pod the kubelet has started is running; Succeeded and Failed pods are left out
    let phase = if pod.node_name.is_some() && pod.started.is_some() {
        "Running"
    } else {
        "Pending"
    };
    PodLabels {
        name: pod.name.clone(),
        namespace: pod.namespace.clone(),
        owner: owner_link(pod),
        node: pod.node_name.clone().unwrap_or_default(),
        scheduled: pod.node_name.is_some().to_string(),
        nodepool: get(NODEPOOL),
        zone: get(ZONE),
        arch: get(ARCH),
        capacity_type: get(CAPACITY_TYPE),
        instance_type: get(INSTANCE_TYPE),
        phase,
        managed: node
            .is_some_and(|n| n.labels.contains_key(NODEPOOL))
            .to_string(),
    }
}

/// The NodeClaims and Nodes seen at the last step, for the created and terminated counters.
#[derive(Debug, Default)]
pub struct Seen {
    /// Claim name -> (nodepool, capacity type, zone).
    claims: BTreeMap<String, ClaimTerminatedLabels>,
    /// Managed node name -> (nodepool, zone).
    nodes: BTreeMap<String, NodeCountLabels>,
    /// Pods whose start was observed (or that had started before the first step).
    started: BTreeSet<String>,
    /// Nodes that carried the disrupted taint.
    tainted: BTreeSet<String>,
    first: bool,
}

impl Seen {
    pub fn new() -> Seen {
        Seen {
            first: true,
            ..Seen::default()
        }
    }
}

/// What one step hands the Karpenter metrics.
pub struct Observed<'a> {
    pub snap: &'a ClusterSnapshot,
    pub catalog: &'a crate::catalog::Catalog,
    pub at: crate::disruption::timing::Timestamp,
    /// Seconds on the host's clock.
    pub now: f64,
    /// NodeClaims launched whose node has not registered.
    pub unregistered: usize,
    /// Every Node and NodeClaim in the caches was read.
    pub synced: bool,
}

impl Karpenter {
    /// Everything one step updates: the gauges, and the counters of what appeared or went away
    /// since the last step. The first step only takes note: what existed before this process is
    /// not counted again.
    pub fn observe(&self, seen: &mut Seen, savings: &Savings, o: &Observed) {
        self.set_state(o.snap, o.unregistered);
        self.synced.set(i64::from(o.synced));
        let snap = o.snap;
        let new_claims: Vec<crate::domain::NodeClaim> = snap
            .node_claims
            .iter()
            .filter(|c| !seen.first && !seen.claims.contains_key(&c.name))
            .cloned()
            .collect();
        // a node tainted before this process started was not chosen by it
        let before = if seen.first {
            tainted(snap)
        } else {
            std::mem::take(&mut seen.tainted)
        };
        let step = Step {
            snap,
            catalog: o.catalog,
            at: o.at,
            tainted_before: &before,
            new_claims: &new_claims,
        };
        let replacing = self.count_disruption(savings, &step);
        seen.tainted = tainted(snap);
        self.count_lifecycle(seen, snap, replacing.unwrap_or("provisioned"));
        self.zero_known(snap, seen, savings);
        self.observe_starts(seen, snap, o.now);
        seen.first = false;
    }

    /// Creates at 0 the counter series whose label values are known before anything happened (the
    /// NodePools, the zones of their nodes, the decision kinds), so that `increase()` over them
    /// works from the first event and dashboards find every series they query.
    fn zero_known(&self, snap: &ClusterSnapshot, seen: &Seen, savings: &Savings) {
        const REASONS: [&str; 4] = ["empty", "underutilized", "drifted", "expired"];
        for pool in &snap.nodepools {
            let policy = pool.disruption.consolidation_policy.as_str();
            for (reason, capacity_type) in REASONS
                .iter()
                .flat_map(|r| ["on-demand", "spot"].map(|c| (r, c)))
            {
                let _ = self.nodeclaims_disrupted.get_or_create(&DisruptedLabels {
                    reason: reason.to_string(),
                    nodepool: pool.name.clone(),
                    capacity_type: capacity_type.to_string(),
                    consolidation_policy: policy.to_string(),
                    termination_mode: "graceful",
                });
            }
        }
        for l in seen.nodes.values() {
            let _ = self.nodes_created.get_or_create(l);
            let _ = self.nodes_terminated.get_or_create(l);
        }
        for l in seen.claims.values() {
            let _ = self.nodeclaims_terminated.get_or_create(l);
        }
        let kinds = [
            ("empty", "empty"),
            ("underutilized", "single"),
            ("underutilized", "multi"),
            ("drifted", ""),
            ("expired", ""),
        ];
        for (decision, (reason, consolidation_type)) in ["delete", "replace"]
            .iter()
            .flat_map(|d| kinds.map(|k| (*d, k)))
        {
            let _ = self.decisions.get_or_create(&DecisionLabels {
                decision,
                reason: reason.to_string(),
                consolidation_type,
            });
        }
        for reason in ["empty", "underutilized"] {
            let _ = savings.get_or_create(&super::disruption::SavingsLabels { reason });
        }
    }

    /// Counts the NodeClaims and Nodes that appeared or went away since the last step; new claims
    /// under `created_reason`.
    fn count_lifecycle(&self, seen: &mut Seen, snap: &ClusterSnapshot, created_reason: &str) {
        let claims: BTreeMap<String, ClaimTerminatedLabels> = snap
            .node_claims
            .iter()
            .map(|c| {
                let get = |k: &str| c.labels.get(k).cloned().unwrap_or_default();
                let labels = ClaimTerminatedLabels {
                    nodepool: c.nodepool.clone().unwrap_or_default(),
                    capacity_type: get(CAPACITY_TYPE),
                    zone: get(ZONE),
                };
                (c.name.clone(), labels)
            })
            .collect();
        let nodes: BTreeMap<String, NodeCountLabels> = snap
            .nodes
            .iter()
            .filter(|n| n.labels.contains_key(NODEPOOL))
            .map(|n| {
                let labels = NodeCountLabels {
                    nodepool: label(n, NODEPOOL),
                    zone: label(n, ZONE),
                };
                (n.name.clone(), labels)
            })
            .collect();
        if !seen.first {
            for l in new_of(&claims, &seen.claims) {
                self.nodeclaims_created
                    .get_or_create(&ClaimCreatedLabels {
                        reason: created_reason.to_string(),
                        nodepool: l.nodepool.clone(),
                        min_values_relaxed: "false",
                    })
                    .inc();
            }
            for l in new_of(&seen.claims, &claims) {
                self.nodeclaims_terminated.get_or_create(l).inc();
            }
            for l in new_of(&nodes, &seen.nodes) {
                self.nodes_created.get_or_create(l).inc();
            }
            for l in new_of(&seen.nodes, &nodes) {
                self.nodes_terminated.get_or_create(l).inc();
            }
        }
        seen.claims = claims;
        seen.nodes = nodes;
    }

    fn observe_starts(&self, seen: &mut Seen, snap: &ClusterSnapshot, now: f64) {
        let parse = |s: &Option<String>| {
            s.as_deref()
                .and_then(|s| crate::disruption::timing::parse_timestamp(s).ok())
        };
        let mut started = BTreeSet::new();
        for pod in snap.pods.iter().filter(|p| p.started.is_some()) {
            let key = pod.key();
            if !seen.first && !seen.started.contains(&key) {
                if let (Some(c), Some(s)) = (parse(&pod.created), parse(&pod.started)) {
                    let seconds = (s - c).num_milliseconds().max(0) as f64 / 1000.0;
                    self.pods_startup.observe(seconds, now);
                }
            }
            started.insert(key);
        }
        seen.started = started;
        self.pods_startup.publish(now);
    }
}

/// The values of `now` whose keys `before` lacks.
fn new_of<'a, V>(
    now: &'a BTreeMap<String, V>,
    before: &'a BTreeMap<String, V>,
) -> impl Iterator<Item = &'a V> {
    now.iter()
        .filter(|(k, _)| !before.contains_key(*k))
        .map(|(_, v)| v)
}

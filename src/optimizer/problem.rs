//! The solver-independent instance: pending pods grouped into classes, candidate node shapes
//! (NodePool x instance type) with their offerings and allocatable room after DaemonSet overhead,
//! existing nodes with their free room, and which class may use which offering or node.
//!
//! Both the greedy baseline and the MILP read a [`Problem`]; neither looks at the snapshot again.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use crate::catalog::{CapacityType, Catalog};
use crate::domain::labels::{
    tolerates_all, untolerated_soft_taints, CAPACITY_TYPE, HOSTNAME, NODEPOOL, ZONE,
};
use crate::domain::{
    ClusterSnapshot, CostWeights, HostPort, Labels, PodConstraints, Resources, Taint,
};

use super::plan::{Unschedulable, UnschedulableReason};
use super::topology::Topology;

/// Taints that a node carries only while it starts; they never block placement.
const TRANSIENT_TAINTS: [&str; 2] = ["node.kubernetes.io/not-ready", "karpenter.sh/unregistered"];

/// Identical pending pods.
#[derive(Debug, Clone)]
pub struct PodClass {
    /// Pod keys (`namespace/name`) in Karpenter's order.
    pub pods: Vec<String>,
    pub constraints: PodConstraints,
    /// Requests as a dense vector over [`Problem::dims`] (milli-units).
    pub req: Vec<i64>,
    /// (shape, offering) pairs worth using: compatible and not dominated (see [`super::menu`]).
    pub offerings: Vec<(usize, usize)>,
    /// Index into [`Problem::label_groups`]: the offerings whose labels and taints this class
    /// accepts.
    pub group: usize,
    /// Existing nodes this class may use.
    pub existing: Vec<usize>,
    /// $/h for each of its pods left unplaced: the `unschedulablePod` weight, or for headroom
    /// ([`super::headroom`]) the fair price of its room times `headroomPrice`.
    pub unplaced_cost: f64,
}

impl PodClass {
    pub fn demand(&self) -> usize {
        self.pods.len()
    }

    /// Whether offering `o` (shape, offering) is on the class's menu.
    pub fn on_menu(&self, o: (usize, usize)) -> bool {
        self.offerings.binary_search(&o).is_ok()
    }
}

#[derive(Debug, Clone)]
pub struct ShapeOffering {
    pub zone: String,
    pub capacity_type: CapacityType,
    pub price: f64,
    /// Price plus the spot-risk weight: what the objective charges.
    pub cost: f64,
    pub price_estimated: bool,
    /// Room for pending pods: allocatable less DaemonSet pods that would run here.
    pub alloc: Vec<i64>,
    pub ds_ports: Vec<HostPort>,
    /// Every label the node would carry except its hostname.
    pub labels: Labels,
}

/// A NodePool x instance type pair.
#[derive(Debug, Clone)]
pub struct Shape {
    pub pool: usize,
    pub instance_type: String,
    pub taints: Vec<Taint>,
    /// Node capacity, counted against NodePool limits.
    pub capacity: Resources,
    /// Node allocatable before DaemonSet pods, as the node will report it.
    pub allocatable: Resources,
    pub offerings: Vec<ShapeOffering>,
}

#[derive(Debug, Clone)]
pub struct ExistingNode {
    pub name: String,
    pub labels: Labels,
    pub taints: Vec<Taint>,
    pub free: Vec<i64>,
    pub ports: Vec<HostPort>,
    pub pool: Option<usize>,
    pub price: f64,
    /// What using this node costs in the objective: 0 for a node that stays whatever the plan, its
    /// price when the question is whether to keep it (disruption's bounds).
    pub keep_cost: f64,
    /// Pods (class, count) that every pattern of this node must hold: a node that is kept keeps its
    /// own pods (disruption's bounds); `free` still counts their room as free.
    pub home: Vec<(usize, u32)>,
}

#[derive(Debug, Clone)]
pub struct PoolInfo {
    pub name: String,
    pub weight: i32,
    /// Remaining room under `spec.limits` (capacity of existing nodes subtracted); `nodes`
    /// included.
    pub remaining: Option<Resources>,
    /// Requirements with minValues, checked against a node's fallback set.
    pub min_values: Vec<crate::domain::Requirement>,
}

#[derive(Debug, Clone)]
pub struct Problem {
    pub region: String,
    pub dims: Vec<String>,
    pub classes: Vec<PodClass>,
    /// Shared with other problems built from the same [`ShapeCache`].
    pub shapes: Arc<Vec<Shape>>,
    pub existing: Vec<ExistingNode>,
    pub pools: Vec<PoolInfo>,
    pub topology: Topology,
    pub weights: CostWeights,
    /// Pods that no offering or node can ever host, with the reason.
    pub rejected: Vec<Unschedulable>,
    /// Distinct label compatibilities: sorted (shape, offering) lists whose labels and taints a
    /// class accepts, before requests, host ports and dominance are looked at.
    pub label_groups: Vec<Vec<(usize, usize)>>,
    /// Every (shape, offering), cheapest price first (fallback lists walk this).
    pub by_price: Vec<(usize, usize)>,
    /// Every (shape, offering), cheapest objective cost first.
    pub by_cost: Vec<(usize, usize)>,
}

/// The shapes (NodePool x instance type, with their offerings) of problems that differ only in pods
/// and nodes: the same catalog, NodePools, EC2NodeClasses, DaemonSets and cost weights. Building
/// them is most of building a problem on a full catalog (tens of thousands of label maps), and the
/// disruption baseline builds one problem per consolidation candidate. The caller keeps a cache to
/// problems that share those inputs; shapes are rebuilt when the pending pods' resource names
/// differ.
#[derive(Debug, Default)]
pub struct ShapeCache {
    built: std::sync::Mutex<Option<Built>>,
}

/// Shapes and the resource names (`Problem::dims`) they were built for.
type Built = (Vec<String>, Arc<Vec<Shape>>);

impl ShapeCache {
    /// A cache that already holds `shapes`, built for the resource names `dims`: a problem built
    /// with it for the same pods' requests shares them, and so the indices of their offerings.
    pub fn holding(dims: &[String], shapes: Arc<Vec<Shape>>) -> ShapeCache {
        ShapeCache {
            built: std::sync::Mutex::new(Some((dims.to_vec(), shapes))),
        }
    }

    fn get(&self, dims: &[String], build: impl FnOnce() -> Vec<Shape>) -> Arc<Vec<Shape>> {
        let mut built = self
            .built
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        match &*built {
            Some((d, shapes)) if d.as_slice() == dims => shapes.clone(),
            _ => {
                let shapes = Arc::new(build());
                *built = Some((dims.to_vec(), shapes.clone()));
                shapes
            }
        }
    }
}

impl Problem {
    pub fn build(snapshot: &ClusterSnapshot, catalog: &Catalog) -> Problem {
        Problem::build_with(snapshot, catalog, None)
    }

    /// [`Problem::build`], taking the shapes from `cache` when it has them for these resource
    /// names.
    pub fn build_with(
        snapshot: &ClusterSnapshot,
        catalog: &Catalog,
        cache: Option<&ShapeCache>,
    ) -> Problem {
        let pending: Vec<_> = snapshot.pending_pods().collect();
        let dims = dimensions(pending.iter().map(|p| p.requests()));
        let pools = pool_infos(snapshot, catalog);
        let shapes = match cache {
            Some(cache) => cache.get(&dims, || build_shapes(snapshot, catalog, &dims)),
            None => Arc::new(build_shapes(snapshot, catalog, &dims)),
        };
        let existing = existing_nodes(snapshot, &dims, catalog, &pools);
        let mut classes = group_classes(snapshot, &dims);
        let mut rejected = Vec::new();
        let label_groups = label_groups(&mut classes, &shapes);
        // dominated offerings are dropped before any per-class list is built (see `menu`) the
        // topology reads only the classes' constraints, so this one build serves the menu's keys
        // and the restriction below
        let topology = Topology::build(snapshot, &classes, &shapes, &existing);
        let dropped = super::menu::dominated(
            &shapes,
            &pools,
            &label_groups,
            &topology.keys(),
            &classes,
            &snapshot.weights,
        );
        for class in &mut classes {
            if class.constraints.volume_error.is_some() {
                // rejected below with the error as its reason
                continue;
            }
            class.offerings = label_groups[class.group]
                .iter()
                .copied()
                .filter(|&(s, o)| {
                    !dropped[s][o]
                        && offering_fits(&class.constraints, &class.req, &shapes[s].offerings[o])
                })
                .collect();
            class.existing = compatible_existing(&class.constraints, &class.req, &existing);
        }
        for class in &mut classes {
            restrict_by_weight(class, &shapes, &pools);
        }
        topology.restrict(&mut classes, &shapes, &existing);
        for class in classes
            .iter_mut()
            .filter(|c| super::headroom::is_headroom(&c.constraints))
        {
            class.unplaced_cost = fair_price(class, &shapes) * snapshot.weights.headroom_price;
        }
        let missing_classes = missing_class_note(snapshot);
        classes.retain(|c| {
            if !c.offerings.is_empty() || !c.existing.is_empty() {
                return true;
            }
            let (reason, mut message) = explain_rejection(&c.constraints, &c.req, &shapes, &dims);
            if let (UnschedulableReason::NoCompatibleOffering, Some(note)) =
                (reason, &missing_classes)
            {
                message = format!("{message} ({note})");
            }
            rejected.extend(c.pods.iter().map(|p| Unschedulable {
                pod: p.clone(),
                reason,
                message: message.clone(),
            }));
            false
        });
        let topology = Topology::build(snapshot, &classes, &shapes, &existing);
        let mut problem = Problem {
            region: catalog.region.clone(),
            dims,
            classes,
            shapes,
            existing,
            pools,
            topology,
            weights: snapshot.weights.clone(),
            rejected,
            label_groups,
            by_price: vec![],
            by_cost: vec![],
        };
        let all: Vec<(usize, usize)> = problem
            .shapes
            .iter()
            .enumerate()
            .flat_map(|(s, sh)| (0..sh.offerings.len()).map(move |o| (s, o)))
            .collect();
        let ranked = |key: fn(&ShapeOffering) -> f64| {
            let mut v = all.clone();
            v.sort_by(|a, b| {
                key(problem.offering(a.0, a.1))
                    .total_cmp(&key(problem.offering(b.0, b.1)))
                    .then(a.cmp(b))
            });
            v
        };
        let (by_price, by_cost) = (ranked(|o| o.price), ranked(|o| o.cost));
        problem.by_price = by_price;
        problem.by_cost = by_cost;
        problem
    }

    pub fn offering(&self, shape: usize, offering: usize) -> &ShapeOffering {
        &self.shapes[shape].offerings[offering]
    }

    /// The (shape, offering) of `nodepool`'s `instance_type` in `zone` at `capacity_type`, when
    /// this problem has it: how plans and patterns of another problem (or none) are found here by
    /// name.
    pub fn find_offering(
        &self,
        nodepool: &str,
        instance_type: &str,
        zone: &str,
        capacity_type: CapacityType,
    ) -> Option<(usize, usize)> {
        self.shapes.iter().enumerate().find_map(|(s, sh)| {
            (self.pools[sh.pool].name == nodepool && sh.instance_type == instance_type)
                .then(|| {
                    sh.offerings
                        .iter()
                        .position(|o| o.zone == zone && o.capacity_type == capacity_type)
                })
                .flatten()
                .map(|o| (s, o))
        })
    }

    /// The objective's per-pod penalty for class `k` on a node with `labels` and `taints`:
    /// unsatisfied preferred node affinity and untolerated PreferNoSchedule taints.
    pub fn preference_penalty(&self, k: usize, labels: &Labels, taints: &[Taint]) -> f64 {
        preference_penalty(&self.classes[k].constraints, &self.weights, labels, taints)
    }

    /// Whether class `k` may use offering `(s, o)` (dominated offerings included), for fallback
    /// lists.
    pub fn compatible(&self, k: usize, (s, o): (usize, usize)) -> bool {
        let c = &self.classes[k];
        self.label_groups[c.group].binary_search(&(s, o)).is_ok()
            && offering_fits(&c.constraints, &c.req, self.offering(s, o))
    }

    /// Each class with all its pods, (class, count): what a greedy placement of the whole problem
    /// is asked to place.
    pub fn class_demands(&self) -> Vec<(usize, usize)> {
        self.classes
            .iter()
            .enumerate()
            .map(|(k, c)| (k, c.demand()))
            .collect()
    }

    pub fn total_pods(&self) -> usize {
        self.classes.iter().map(PodClass::demand).sum()
    }

    /// Each pending pod's class, by pod key.
    pub fn class_of_pods(&self) -> BTreeMap<&str, usize> {
        self.classes
            .iter()
            .enumerate()
            .flat_map(|(k, c)| c.pods.iter().map(move |pod| (pod.as_str(), k)))
            .collect()
    }

    /// Sets each existing node's `home` from `home` (pod key -> node name): its pods per class.
    pub fn set_home(&mut self, home: &BTreeMap<String, String>) {
        let class_of = self.class_of_pods();
        let mut own: BTreeMap<&str, BTreeMap<usize, u32>> = BTreeMap::new();
        for (pod, node) in home {
            if let Some(&k) = class_of.get(pod.as_str()) {
                *own.entry(node.as_str()).or_default().entry(k).or_default() += 1;
            }
        }
        let own: BTreeMap<String, Vec<(usize, u32)>> = own
            .into_iter()
            .map(|(n, m)| (n.to_string(), m.into_iter().collect()))
            .collect();
        for n in &mut self.existing {
            if let Some(h) = own.get(&n.name) {
                n.home = h.clone();
            }
        }
    }

    /// The room an existing node offers once its `home` pods are back on it (never below zero).
    pub fn room_after_home(&self, e: usize) -> Vec<i64> {
        let n = &self.existing[e];
        let mut room = n.free.clone();
        for &(k, c) in &n.home {
            for (r, q) in room.iter_mut().zip(&self.classes[k].req) {
                *r = (*r - q * i64::from(c)).max(0);
            }
        }
        room
    }
}

/// Resource names any pending pod requests, cpu/memory/pods first.
fn dimensions<'a>(requests: impl Iterator<Item = &'a Resources>) -> Vec<String> {
    let mut names: BTreeSet<String> = ["cpu", "memory", "pods"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    for r in requests {
        names.extend(
            r.iter()
                .filter(|(_, q)| q.milli() > 0)
                .map(|(n, _)| n.to_string()),
        );
    }
    let mut dims: Vec<String> = ["cpu", "memory", "pods"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    dims.extend(
        names
            .into_iter()
            .filter(|n| !["cpu", "memory", "pods"].contains(&n.as_str())),
    );
    dims
}

pub fn dense(r: &Resources, dims: &[String]) -> Vec<i64> {
    dims.iter().map(|d| r.get(d).milli()).collect()
}

fn pool_infos(snapshot: &ClusterSnapshot, catalog: &Catalog) -> Vec<PoolInfo> {
    let mut pools: Vec<&crate::domain::NodePool> = snapshot.nodepools.iter().collect();
    pools.sort_by(|a, b| b.weight.cmp(&a.weight).then(a.name.cmp(&b.name)));
    pools
        .into_iter()
        .map(|np| {
            // a written limit of 0 is a limit (Karpenter's way to pause a pool), so test for keys,
            // not values
            let remaining = np.limits.names().next().is_some().then(|| {
                let mut used = Resources::new();
                for node in snapshot
                    .nodes
                    .iter()
                    .filter(|n| n.nodepool() == Some(&np.name))
                {
                    used.add(&node.capacity);
                    used.add(
                        &Resources::new().with("nodes", crate::domain::Quantity::from_units(1)),
                    );
                }
                for claim in snapshot
                    .node_claims
                    .iter()
                    .filter(|c| c.nodepool.as_deref() == Some(&np.name))
                {
                    // a claim not yet registered still holds its capacity
                    if claim.node_name.is_none()
                        || !snapshot
                            .nodes
                            .iter()
                            .any(|n| Some(&n.name) == claim.node_name.as_ref())
                    {
                        used.add(&claim.capacity);
                        used.add(
                            &Resources::new().with("nodes", crate::domain::Quantity::from_units(1)),
                        );
                    }
                }
                // only the resources the pool limits: what it does not name is unlimited
                np.limits
                    .iter()
                    .map(|(k, limit)| (k.to_string(), limit.saturating_sub(used.get(k))))
                    .collect::<Resources>()
            });
            let _ = catalog;
            PoolInfo {
                name: np.name.clone(),
                weight: np.weight,
                remaining,
                min_values: np
                    .requirements
                    .iter()
                    .filter(|r| r.min_values.is_some())
                    .cloned()
                    .collect(),
            }
        })
        .collect()
}

/// The labels a node of `it` launched for `np` carries before its offering is chosen: the type's
/// well-known labels, the pool's template labels and the pool's name.
pub fn pool_type_labels(
    it: &crate::catalog::InstanceType,
    np: &crate::domain::NodePool,
    region: &str,
) -> Labels {
    let mut base = it.labels(region);
    base.extend(np.labels.iter().map(|(k, v)| (k.clone(), v.clone())));
    base.insert(NODEPOOL.to_string(), np.name.clone());
    base
}

/// `base` with an offering's zone and capacity type.
pub fn offering_labels(base: &Labels, o: &crate::catalog::Offering) -> Labels {
    let mut labels = base.clone();
    labels.insert(ZONE.to_string(), o.zone.clone());
    labels.insert(
        CAPACITY_TYPE.to_string(),
        o.capacity_type.as_str().to_string(),
    );
    labels
}

fn build_shapes(snapshot: &ClusterSnapshot, catalog: &Catalog, dims: &[String]) -> Vec<Shape> {
    let mut pools: Vec<&crate::domain::NodePool> = snapshot.nodepools.iter().collect();
    pools.sort_by(|a, b| b.weight.cmp(&a.weight).then(a.name.cmp(&b.name)));
    let mut shapes = Vec::new();
    for (pi, np) in pools.iter().enumerate() {
        // no node can launch for it; `missing_class_note` tells the pods left without a pool
        if snapshot.missing_node_class(np).is_some() {
            continue;
        }
        let class = snapshot.node_class(np.node_class.as_deref());
        let zones = class.and_then(|c| c.zones.as_ref());
        // a new node's launch, paid once, charged per hour over the payback time
        let launch = snapshot.weights.per_hour(snapshot.weights.node_launch);
        for it in &catalog.instance_types {
            let base = pool_type_labels(it, np, &catalog.region);
            let allocatable = it.node_allocatable(class);
            let offerings: Vec<ShapeOffering> = it
                .offerings
                .iter()
                .filter(|o| o.available && zones.is_none_or(|z| z.contains(&o.zone)))
                .filter_map(|o| {
                    let labels = offering_labels(&base, o);
                    if !np.requirements.iter().all(|r| r.matches(&labels)) {
                        return None;
                    }
                    let (overhead, ds_ports) = daemon_overhead(snapshot, &labels, &np.taints);
                    let alloc_resources = allocatable.minus(&overhead);
                    if alloc_resources.first_negative().is_some() {
                        return None;
                    }
                    let band = o.interruption_band.unwrap_or(0) as f64;
                    let risk = if o.capacity_type == CapacityType::Spot {
                        snapshot.weights.spot_interruption_band * band
                    } else {
                        0.0
                    };
                    Some(ShapeOffering {
                        zone: o.zone.clone(),
                        capacity_type: o.capacity_type,
                        price: o.price,
                        cost: o.price * (1.0 + risk) + launch,
                        price_estimated: o.price_estimated,
                        alloc: dense(&alloc_resources, dims),
                        ds_ports,
                        labels,
                    })
                })
                .collect();
            if !offerings.is_empty() {
                shapes.push(Shape {
                    pool: pi,
                    instance_type: it.name.clone(),
                    taints: np.taints.clone(),
                    capacity: it.node_capacity(class),
                    allocatable,
                    offerings,
                });
            }
        }
    }
    shapes
}

/// The NodePools left out for a missing EC2NodeClass, for the message of a pod no offering suits.
fn missing_class_note(snapshot: &ClusterSnapshot) -> Option<String> {
    let notes: Vec<String> = snapshot
        .nodepools
        .iter()
        .filter_map(|np| {
            let class = snapshot.missing_node_class(np)?;
            Some(format!(
                "nodepool {} is not used: its EC2NodeClass {class} does not exist",
                np.name
            ))
        })
        .collect();
    (!notes.is_empty()).then(|| notes.join("; "))
}

/// Requests and host ports of the DaemonSet pods that would run on a node with these labels and
/// taints.
pub fn daemon_overhead(
    snapshot: &ClusterSnapshot,
    labels: &Labels,
    taints: &[Taint],
) -> (Resources, Vec<HostPort>) {
    let mut total = Resources::new();
    let mut ports = Vec::new();
    for ds in &snapshot.daemonsets {
        if ds.pod.node_matches(labels) && tolerates_all(&ds.pod.tolerations, taints) {
            total.add(&ds.pod.requests);
            ports.extend(ds.pod.host_ports.iter().cloned());
        }
    }
    (total, ports)
}

fn existing_nodes(
    snapshot: &ClusterSnapshot,
    dims: &[String],
    catalog: &Catalog,
    pools: &[PoolInfo],
) -> Vec<ExistingNode> {
    // one pass over the pods: scanning them per node is quadratic at 5,000 nodes and 50,000 pods
    let mut on_node: BTreeMap<&str, Vec<&crate::domain::Pod>> = BTreeMap::new();
    for p in snapshot.pods.iter().filter(|p| p.occupies_node()) {
        if let Some(n) = p.node_name.as_deref() {
            on_node.entry(n).or_default().push(p);
        }
    }
    let mut nodes: Vec<ExistingNode> = snapshot
        .nodes
        .iter()
        .map(|n| {
            let mut labels = n.labels.clone();
            labels
                .entry(HOSTNAME.to_string())
                .or_insert_with(|| n.name.clone());
            let mut used = Resources::new();
            let mut ports = Vec::new();
            for p in on_node.get(n.name.as_str()).into_iter().flatten() {
                used.add(p.requests());
                ports.extend(p.constraints.host_ports.iter().cloned());
            }
            let free = dense(&n.allocatable.minus(&used), dims);
            let taints = n
                .taints
                .iter()
                .filter(|t| !TRANSIENT_TAINTS.contains(&t.key.as_str()))
                .cloned()
                .collect();
            ExistingNode {
                name: n.name.clone(),
                labels,
                taints,
                free: if n.unschedulable {
                    vec![-1; dims.len()]
                } else {
                    free
                },
                ports,
                pool: n
                    .nodepool()
                    .and_then(|np| pools.iter().position(|p| p.name == np)),
                price: node_price(n, catalog),
                keep_cost: 0.0,
                home: vec![],
            }
        })
        .collect();
    nodes.sort_by(|a, b| a.name.cmp(&b.name));
    nodes
}

/// What an existing node costs, from its instance type, zone and capacity-type labels.
pub fn node_price(n: &crate::domain::Node, catalog: &Catalog) -> f64 {
    let get = |k: &str| n.labels.get(k).map(String::as_str);
    catalog
        .instance_types
        .iter()
        .find(|it| Some(it.name.as_str()) == get(crate::domain::labels::INSTANCE_TYPE))
        .and_then(|it| {
            it.offerings
                .iter()
                .find(|o| {
                    Some(o.zone.as_str()) == get(ZONE)
                        && Some(o.capacity_type.as_str()) == get(CAPACITY_TYPE)
                })
                .or_else(|| {
                    it.offerings
                        .iter()
                        .find(|o| o.capacity_type == CapacityType::OnDemand)
                })
        })
        .map_or(0.0, |o| o.price)
}

/// Label keys that some selector in the snapshot reads; only these distinguish pods into classes.
fn selector_keys(snapshot: &ClusterSnapshot) -> BTreeSet<String> {
    let mut keys = BTreeSet::new();
    let mut add_sel = |s: &crate::domain::LabelSelector| {
        keys.extend(s.match_labels.keys().cloned());
        keys.extend(s.match_expressions.iter().map(|r| r.key.clone()));
    };
    for p in &snapshot.pods {
        let c = &p.constraints;
        c.spread.iter().for_each(|s| add_sel(&s.selector));
        c.pod_affinity
            .iter()
            .chain(&c.pod_anti_affinity)
            .for_each(|t| add_sel(&t.selector));
        c.preferred_pod_affinity
            .iter()
            .chain(&c.preferred_pod_anti_affinity)
            .for_each(|t| add_sel(&t.term.selector));
    }
    snapshot.pdbs.iter().for_each(|p| add_sel(&p.selector));
    keys
}

fn group_classes(snapshot: &ClusterSnapshot, dims: &[String]) -> Vec<PodClass> {
    let keys = selector_keys(snapshot);
    let mut groups: BTreeMap<PodConstraints, Vec<&crate::domain::Pod>> = BTreeMap::new();
    for pod in snapshot.pending_pods() {
        let mut c = PodConstraints::clone(&pod.constraints);
        c.labels.retain(|k, _| keys.contains(k));
        groups.entry(c).or_default().push(pod);
    }
    let mut classes: Vec<PodClass> = groups
        .into_iter()
        .map(|(mut constraints, mut pods)| {
            pods.sort_by(|a, b| {
                a.created
                    .cmp(&b.created)
                    .then(a.uid.cmp(&b.uid))
                    .then(a.key().cmp(&b.key()))
            });
            // keep the full labels of one member so selectors evaluate as on the real pods
            constraints.labels = Labels::clone(&pods[0].labels);
            let req = dense(&constraints.requests, dims);
            PodClass {
                pods: pods.iter().map(|p| p.key()).collect(),
                constraints,
                req,
                offerings: vec![],
                group: 0,
                existing: vec![],
                unplaced_cost: snapshot.weights.unschedulable_pod,
            }
        })
        .collect();
    // Karpenter's order: cpu then memory descending; ties by the first pod's key for determinism
    classes.sort_by(|a, b| {
        b.req[0]
            .cmp(&a.req[0])
            .then(b.req[1].cmp(&a.req[1]))
            .then(a.pods[0].cmp(&b.pods[0]))
    });
    classes
}

/// The least $/h any offering on the class's menu charges for one of its pods: the offering's
/// price times the share of the node the pod takes.
fn fair_price(class: &PodClass, shapes: &[Shape]) -> f64 {
    class
        .offerings
        .iter()
        .map(|&(s, o)| {
            let off = &shapes[s].offerings[o];
            off.price * room_share(&class.req, &off.alloc)
        })
        .fold(f64::INFINITY, f64::min)
        .min(1e6)
}

/// The largest fraction of `room` that `used` takes in any resource it uses: the share of a node
/// it occupies, infinite where it uses what the room lacks.
pub(crate) fn room_share(used: &[i64], room: &[i64]) -> f64 {
    used.iter()
        .zip(room)
        .filter(|(u, _)| **u > 0)
        .map(|(u, r)| {
            if *r > 0 {
                *u as f64 / *r as f64
            } else {
                f64::INFINITY
            }
        })
        .fold(0.0, f64::max)
}

pub fn fits(req: &[i64], free: &[i64]) -> bool {
    req.iter().zip(free).all(|(r, f)| *r <= 0 || r <= f)
}

pub fn ports_conflict(a: &[HostPort], b: &[HostPort]) -> bool {
    a.iter().any(|x| b.iter().any(|y| x.conflicts(y)))
}

/// The per-pod penalty of a pod with constraints `c` on a node with `labels` and `taints`.
pub fn preference_penalty(
    c: &PodConstraints,
    weights: &CostWeights,
    labels: &Labels,
    taints: &[Taint],
) -> f64 {
    let unmet: i64 = c
        .preferred_node_affinity
        .iter()
        .filter(|w| !w.term.iter().all(|r| r.matches(labels)))
        .map(|w| i64::from(w.weight.max(0)))
        .sum();
    unmet as f64 * weights.preferred_node_affinity
        + untolerated_soft_taints(&c.tolerations, taints) as f64 * weights.prefer_no_schedule
}

/// What decides label compatibility of a class with an offering; classes that differ only in
/// requests share one label scan.
type LabelKey = (
    Vec<crate::domain::Requirement>,
    crate::domain::NodeSelector,
    Vec<crate::domain::NodeSelector>,
    Vec<crate::domain::Toleration>,
);

/// Sets each class's label group and returns the groups' offering lists (sorted).
fn label_groups(classes: &mut [PodClass], shapes: &[Shape]) -> Vec<Vec<(usize, usize)>> {
    let mut ids: BTreeMap<LabelKey, usize> = BTreeMap::new();
    let mut groups = Vec::new();
    for class in classes.iter_mut() {
        let c = &class.constraints;
        let key = (
            c.node_selector.clone(),
            c.node_affinity.clone(),
            c.volume_requirements.clone(),
            c.tolerations.clone(),
        );
        class.group = *ids.entry(key).or_insert_with(|| {
            let mut out = Vec::new();
            for (si, s) in shapes.iter().enumerate() {
                if tolerates_all(&c.tolerations, &s.taints) {
                    out.extend(
                        (0..s.offerings.len())
                            .filter(|&oi| c.node_matches(&s.offerings[oi].labels))
                            .map(|oi| (si, oi)),
                    );
                }
            }
            groups.push(out);
            groups.len() - 1
        });
    }
    groups
}

/// Whether a pod's requests fit an offering's room and its host ports are free of DaemonSet ports.
fn offering_fits(c: &PodConstraints, req: &[i64], o: &ShapeOffering) -> bool {
    fits(req, &o.alloc) && !ports_conflict(&c.host_ports, &o.ds_ports)
}

fn compatible_existing(c: &PodConstraints, req: &[i64], nodes: &[ExistingNode]) -> Vec<usize> {
    (0..nodes.len())
        .filter(|&i| {
            let n = &nodes[i];
            c.node_matches(&n.labels)
                && tolerates_all(&c.tolerations, &n.taints)
                && fits(req, &n.free)
                && !ports_conflict(&c.host_ports, &n.ports)
        })
        .collect()
}

/// Karpenter tries NodePools by weight and uses a lower one only when no higher one can host the
/// pod; a pool whose limits cannot fit even one compatible node does not count as able.
fn restrict_by_weight(class: &mut PodClass, shapes: &[Shape], pools: &[PoolInfo]) {
    let able = |pool: usize| {
        class.offerings.iter().any(|&(s, _)| {
            shapes[s].pool == pool
                && pools[pool]
                    .remaining
                    .as_ref()
                    .is_none_or(|rem| within_limits(&shapes[s].capacity, rem))
        })
    };
    let able: Vec<bool> = (0..pools.len()).map(able).collect();
    if let Some(best) = able.iter().position(|&a| a) {
        let weight = pools[best].weight;
        class
            .offerings
            .retain(|&(s, _)| pools[shapes[s].pool].weight == weight && able[shapes[s].pool]);
    }
}

/// Whether one more node of `capacity` fits under the remaining limits.
pub fn within_limits(capacity: &Resources, remaining: &Resources) -> bool {
    remaining.iter().all(|(name, left)| {
        let need = if name == "nodes" {
            crate::domain::Quantity::from_units(1)
        } else {
            capacity.get(name)
        };
        need <= left
    })
}

/// When the pod's own selectors and tolerations allow some offering and only its volumes rule
/// them all out: a message naming what the volumes require.
fn volume_zones_unoffered(c: &PodConstraints, shapes: &[Shape]) -> Option<String> {
    if c.volume_requirements.is_empty() {
        return None;
    }
    let own = PodConstraints {
        volume_requirements: vec![],
        ..c.clone()
    };
    let allowed = shapes
        .iter()
        .filter(|s| tolerates_all(&c.tolerations, &s.taints))
        .flat_map(|s| s.offerings.iter())
        .any(|o| own.node_matches(&o.labels));
    let terms: Vec<String> = c
        .volume_requirements
        .iter()
        .flat_map(|sel| sel.terms.iter())
        .flat_map(|t| {
            t.iter()
                .map(|r| format!("{} {:?} {:?}", r.key, r.operator, r.values))
        })
        .collect();
    allowed.then(|| {
        format!(
            "its volumes require nodes with {}, and no nodepool offering or node there can take it",
            terms.join(", ")
        )
    })
}

fn explain_rejection(
    c: &PodConstraints,
    req: &[i64],
    shapes: &[Shape],
    dims: &[String],
) -> (UnschedulableReason, String) {
    if let Some(error) = &c.volume_error {
        return (UnschedulableReason::Volume, error.clone());
    }
    let compatible: Vec<&ShapeOffering> = shapes
        .iter()
        .filter(|s| tolerates_all(&c.tolerations, &s.taints))
        .flat_map(|s| s.offerings.iter())
        .filter(|o| c.node_matches(&o.labels))
        .collect();
    if compatible.is_empty() {
        if let Some(zones) = volume_zones_unoffered(c, shapes) {
            return (UnschedulableReason::Volume, zones);
        }
        return (
            UnschedulableReason::NoCompatibleOffering,
            "no nodepool offering satisfies the pod's node selector, affinity and tolerations"
                .into(),
        );
    }
    let fitting: Vec<&&ShapeOffering> = compatible.iter().filter(|o| fits(req, &o.alloc)).collect();
    if fitting.is_empty() {
        let short: BTreeSet<&str> = compatible
            .iter()
            .flat_map(|o| {
                dims.iter()
                    .zip(req.iter().zip(&o.alloc))
                    .filter(|(_, (r, a))| r > a)
                    .map(|(d, _)| d.as_str())
            })
            .collect();
        return (
            UnschedulableReason::LargerThanAnyType,
            format!(
                "requests exceed the largest compatible instance type ({})",
                short.into_iter().collect::<Vec<_>>().join(", ")
            ),
        );
    }
    if fitting
        .iter()
        .all(|o| ports_conflict(&c.host_ports, &o.ds_ports))
    {
        return (
            UnschedulableReason::HostPort,
            "a host port is taken by a daemonset on every compatible node".into(),
        );
    }
    (
        UnschedulableReason::NodepoolLimit,
        "nodepool limits leave no room for a compatible node".into(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{Node, Quantity};

    #[test]
    fn a_limit_on_cpu_leaves_memory_and_pods_unlimited_when_nodes_exist() {
        let catalog = Catalog {
            region: "test".into(),
            instance_types: vec![],
            provenance: None,
        };
        let mut snapshot = ClusterSnapshot::default();
        let mut pool = crate::domain::NodePool::unconstrained("default");
        pool.limits = Resources::new().with("cpu", Quantity::from_units(100));
        snapshot.nodepools.push(pool);
        let capacity = Resources::new()
            .with("cpu", Quantity::from_units(8))
            .with("memory", Quantity::from_units(32 << 30));
        let mut node = Node::new("n1", Labels::new(), capacity.clone(), capacity);
        node.labels.insert(NODEPOOL.into(), "default".into());
        snapshot.nodes.push(node.into());
        let info = &pool_infos(&snapshot, &catalog)[0];
        let remaining = info.remaining.as_ref().unwrap();
        assert_eq!(remaining.get("cpu"), Quantity::from_units(92));
        assert_eq!(remaining.names().collect::<Vec<_>>(), vec!["cpu"]);
        // another node the size of the first still fits: only cpu is limited
        assert!(within_limits(&snapshot.nodes[0].capacity, remaining));
    }

    #[test]
    fn a_resolved_node_class_keeps_its_pools_in_the_zones_of_its_subnets() {
        let mut it =
            crate::catalog::InstanceType::new("m5.large", 2, 8192, crate::catalog::Arch::Amd64);
        for zone in ["z1", "z2", "z3"] {
            it.offerings.push(crate::catalog::Offering {
                zone: zone.into(),
                capacity_type: CapacityType::OnDemand,
                price: 0.1,
                available: true,
                price_estimated: false,
                interruption_band: None,
            });
        }
        let catalog = Catalog {
            region: "test".into(),
            instance_types: vec![it],
            provenance: None,
        };
        let mut snapshot = ClusterSnapshot::default();
        let mut pool = crate::domain::NodePool::unconstrained("default");
        pool.node_class = Some("nc".into());
        snapshot.nodepools.push(pool);
        let zones = |s: &ClusterSnapshot| -> Vec<String> {
            build_shapes(s, &catalog, &[])
                .iter()
                .flat_map(|sh| sh.offerings.iter().map(|o| o.zone.clone()))
                .collect()
        };
        snapshot.node_classes.push(crate::domain::NodeClass {
            name: "nc".into(),
            ..Default::default()
        });
        assert_eq!(
            zones(&snapshot),
            ["z1", "z2", "z3"],
            "an unresolved class does not narrow zones"
        );
        snapshot.node_classes[0].zones = Some(vec!["z1".into(), "z3".into()]);
        assert_eq!(zones(&snapshot), ["z1", "z3"]);
    }

    #[test]
    fn problems_built_from_one_cache_share_shapes_until_the_resource_names_change() {
        let catalog = crate::optimizer::fixtures::tiny_catalog();
        let cache = ShapeCache::default();
        let (a, b) = (
            crate::workload::diverse(10, 1),
            crate::workload::diverse(12, 2),
        );
        let (pa, pb) = (
            Problem::build_with(&a, &catalog, Some(&cache)),
            Problem::build_with(&b, &catalog, Some(&cache)),
        );
        assert!(Arc::ptr_eq(&pa.shapes, &pb.shapes));
        assert_eq!(
            format!("{:?}", pb.shapes),
            format!("{:?}", Problem::build(&b, &catalog).shapes)
        );
        // a pending pod asking for a GPU adds a dimension: the shapes are built again
        let mut c = b.clone();
        let mut gpu = (*c.pods[0]).clone();
        Arc::make_mut(&mut gpu.constraints)
            .requests
            .set("nvidia.com/gpu", crate::domain::Quantity::from_units(1));
        c.pods[0] = Arc::new(gpu);
        let pc = Problem::build_with(&c, &catalog, Some(&cache));
        assert!(!Arc::ptr_eq(&pb.shapes, &pc.shapes));
        assert_eq!(pc.dims.len(), pb.dims.len() + 1);
        assert_eq!(
            format!("{:?}", pc.shapes),
            format!("{:?}", Problem::build(&c, &catalog).shapes)
        );
    }
}

//! Shared by `tests/properties.rs` and `tests/bruteforce.rs`: a tiny, fully known instance model
//! (pod classes and instance types with explicit overhead, so allocatable is exact), builders that turn
//! it into a `ClusterSnapshot` and a `Catalog` (through `Catalog::from_json`, as a user's file would be
//! read), a solve helper with explicit settings, and an independent plan checker that re-derives every
//! rule (fit, selectors, hostname anti-affinity, zone spread, prices) from the model, not from the
//! optimizer's internals.

#![allow(dead_code)]

#[path = "../common/plan_text.rs"]
mod plan_text;
pub use plan_text::summary;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use joiner::catalog::{CapacityType, Catalog};
use joiner::domain::labels::{CAPACITY_TYPE, HOSTNAME, INSTANCE_TYPE, ZONE};
use joiner::domain::{
    ClusterSnapshot, LabelSelector, Labels, NodePool, Pod, PodAffinityTerm, PodConstraints,
    Quantity, Requirement, Resources, TopologySpread, Weighted, WhenUnsatisfiable,
};
use joiner::optimizer::{solve, Plan, SolveSettings, Strategy};

pub const EPS: f64 = 1e-6;
pub const ZONES: [&str; 2] = ["zone-a", "zone-b"];

/// Identical pending pods (one Deployment): `count` replicas named `default/{name}-{i}`.
#[derive(Debug, Clone)]
pub struct ClassSpec {
    pub name: String,
    pub count: usize,
    pub cpu_m: i64,
    pub mem_mib: i64,
    /// Zone topology spread (DoNotSchedule) over the class's own pods, with this maxSkew.
    pub spread: Option<u32>,
    /// The spread is ScheduleAnyway instead: a preference, never checked as a rule.
    pub soft_spread: bool,
    /// Required hostname anti-affinity to the class's own pods: one per node.
    pub anti: bool,
    /// `nodeSelector: {topology.kubernetes.io/zone: Z}`.
    pub zone: Option<String>,
    /// Preferred hostname anti-affinity to the class's own pods, with this weight: each pod that
    /// shares its node with another of the class costs weight x `preferredPodAntiAffinity`.
    pub prefer_apart: Option<i32>,
    /// A preferred node-affinity term `node.kubernetes.io/instance-type In [T]` with this weight:
    /// each pod on another type costs weight x `preferredNodeAffinity`.
    pub prefer_type: Option<(String, i32)>,
}

impl ClassSpec {
    pub fn plain(name: &str, count: usize, cpu_m: i64, mem_mib: i64) -> ClassSpec {
        ClassSpec {
            name: name.into(),
            count,
            cpu_m,
            mem_mib,
            spread: None,
            soft_spread: false,
            anti: false,
            zone: None,
            prefer_apart: None,
            prefer_type: None,
        }
    }
}

#[derive(Debug, Clone)]
pub struct OfferingSpec {
    pub zone: String,
    pub ct: CapacityType,
    pub price: f64,
}

/// An instance type with an explicit overhead: allocatable = (vcpu, memory_mib, max_pods) - overhead.
#[derive(Debug, Clone)]
pub struct TypeSpec {
    pub name: String,
    pub vcpu: u32,
    pub mem_mib: i64,
    pub max_pods: u32,
    pub ovh_cpu_m: i64,
    pub ovh_mem_mib: i64,
    pub offerings: Vec<OfferingSpec>,
}

impl TypeSpec {
    /// (cpu millicores, memory MiB, pods) a new node of this type offers to pods.
    pub fn alloc(&self) -> (i64, i64, i64) {
        (
            i64::from(self.vcpu) * 1000 - self.ovh_cpu_m,
            self.mem_mib - self.ovh_mem_mib,
            i64::from(self.max_pods),
        )
    }
}

#[derive(Debug, Clone)]
pub struct Instance {
    pub classes: Vec<ClassSpec>,
    pub types: Vec<TypeSpec>,
}

/// One pending pod of the model.
#[derive(Debug, Clone)]
pub struct PodInfo {
    pub key: String,
    pub class: usize,
}

impl Instance {
    pub fn pods(&self) -> Vec<PodInfo> {
        self.classes
            .iter()
            .enumerate()
            .flat_map(|(k, c)| {
                (0..c.count).map(move |i| PodInfo {
                    key: format!("default/{}-{i}", c.name),
                    class: k,
                })
            })
            .collect()
    }

    /// pod key -> class index.
    pub fn class_of(&self) -> BTreeMap<String, usize> {
        self.pods().into_iter().map(|p| (p.key, p.class)).collect()
    }

    /// The snapshot with the pods in model order.
    pub fn snapshot(&self) -> ClusterSnapshot {
        let order: Vec<usize> = (0..self.pods().len()).collect();
        self.snapshot_ordered(&order)
    }

    /// The snapshot with the pods listed in `order` (a permutation of the model's pod indices).
    pub fn snapshot_ordered(&self, order: &[usize]) -> ClusterSnapshot {
        let all = self.pods();
        let pods = order
            .iter()
            .map(|&i| std::sync::Arc::new(make_pod(&self.classes[all[i].class], &all[i].key)))
            .collect();
        ClusterSnapshot {
            pods,
            nodepools: vec![nodepool()],
            ..Default::default()
        }
    }

    pub fn catalog(&self) -> Catalog {
        let order: Vec<usize> = (0..self.types.len()).collect();
        self.catalog_ordered(&order)
    }

    /// The catalog with the instance types listed in `order` (a permutation of the model's type indices).
    pub fn catalog_ordered(&self, order: &[usize]) -> Catalog {
        let types: Vec<serde_json::Value> = order
            .iter()
            .enumerate()
            .map(|(pos, &i)| {
                let t = &self.types[i];
                // offerings reversed on odd positions, so a type order change reorders offerings too
                let mut offs: Vec<&OfferingSpec> = t.offerings.iter().collect();
                if pos % 2 == 1 {
                    offs.reverse();
                }
                serde_json::json!({
                    "name": t.name, "vcpu": t.vcpu, "memory_mib": t.mem_mib, "arch": "amd64", "max_pods": t.max_pods,
                    "overhead": {"cpu": format!("{}m", t.ovh_cpu_m), "memory": format!("{}Mi", t.ovh_mem_mib)},
                    "offerings": offs.iter().map(|o| serde_json::json!({
                        "zone": o.zone, "capacity_type": o.ct.as_str(), "price": o.price
                    })).collect::<Vec<_>>(),
                })
            })
            .collect();
        let doc = serde_json::json!({"region": "test-region", "instance_types": types});
        Catalog::from_json(&doc.to_string(), "test catalog").expect("the test catalog is valid")
    }

    /// Zones a pod of class `k` may use: zones with an offering matching its node selector.
    pub fn eligible_zones(&self, k: usize) -> BTreeSet<String> {
        let c = &self.classes[k];
        self.types
            .iter()
            .flat_map(|t| t.offerings.iter())
            .filter(|o| c.zone.as_ref().is_none_or(|z| *z == o.zone))
            .map(|o| o.zone.clone())
            .collect()
    }

    /// Whether one pod of class `k` alone fits a fresh node of some offering it may use.
    pub fn fits_somewhere(&self, k: usize) -> bool {
        let c = &self.classes[k];
        self.types.iter().any(|t| {
            let (cpu, mem, pods) = t.alloc();
            c.cpu_m <= cpu
                && c.mem_mib <= mem
                && pods >= 1
                && t.offerings
                    .iter()
                    .any(|o| c.zone.as_ref().is_none_or(|z| *z == o.zone))
        })
    }
}

fn selector(app: &str) -> LabelSelector {
    LabelSelector {
        match_labels: [("app".to_string(), app.to_string())].into(),
        match_expressions: vec![],
    }
}

fn make_pod(c: &ClassSpec, key: &str) -> Pod {
    let labels: Labels = [("app".to_string(), c.name.clone())].into();
    let requests = Resources::new()
        .with("cpu", Quantity::from_milli(c.cpu_m))
        .with("memory", Quantity::from_mib(c.mem_mib))
        .with("pods", Quantity::from_units(1));
    let mut constraints = PodConstraints {
        namespace: "default".into(),
        labels: labels.clone(),
        requests,
        ..Default::default()
    };
    if let Some(skew) = c.spread {
        constraints.spread.push(TopologySpread {
            max_skew: skew,
            topology_key: ZONE.into(),
            when_unsatisfiable: if c.soft_spread {
                WhenUnsatisfiable::ScheduleAnyway
            } else {
                WhenUnsatisfiable::DoNotSchedule
            },
            selector: selector(&c.name),
            min_domains: None,
            node_affinity_policy: joiner::domain::NodeInclusionPolicy::affinity_default(),
            node_taints_policy: joiner::domain::NodeInclusionPolicy::taints_default(),
        });
    }
    if c.anti {
        constraints.pod_anti_affinity.push(PodAffinityTerm {
            selector: selector(&c.name),
            namespaces: vec![],
            all_namespaces: false,
            topology_key: HOSTNAME.into(),
        });
    }
    if let Some(weight) = c.prefer_apart {
        let term = PodAffinityTerm {
            selector: selector(&c.name),
            namespaces: vec![],
            all_namespaces: false,
            topology_key: HOSTNAME.into(),
        };
        constraints
            .preferred_pod_anti_affinity
            .push(Weighted { weight, term });
    }
    if let Some(z) = &c.zone {
        constraints
            .node_selector
            .push(Requirement::in_values(ZONE, &[z.as_str()]));
    }
    if let Some((ty, weight)) = &c.prefer_type {
        constraints.preferred_node_affinity.push(Weighted {
            weight: *weight,
            term: vec![Requirement::in_values(INSTANCE_TYPE, &[ty.as_str()])],
        });
    }
    let name = key.strip_prefix("default/").unwrap_or(key).to_string();
    Pod {
        namespace: "default".into(),
        uid: format!("uid-{name}"),
        labels: std::sync::Arc::new(labels),
        ..Pod::new(name, constraints).owned_by("ReplicaSet", &c.name)
    }
}

fn nodepool() -> NodePool {
    NodePool::unconstrained("default")
}

/// Explicit settings: a 5 s limit, an exact gap (so the MILP answer is the optimum over its patterns),
/// one thread.
pub fn settings(strategy: Strategy) -> SolveSettings {
    SolveSettings {
        strategy,
        time_limit: Duration::from_secs(5),
        gap: 0.0,
        threads: 1,
        ..SolveSettings::default()
    }
}

pub fn solve_with(snapshot: &ClusterSnapshot, catalog: &Catalog, strategy: Strategy) -> Plan {
    solve(snapshot, catalog, &settings(strategy)).expect("solve returns a plan")
}

pub fn label(s: Strategy) -> &'static str {
    match s {
        Strategy::Milp => "milp",
        Strategy::Greedy => "greedy",
    }
}

/// Pods the plan places on new nodes.
pub fn placed(plan: &Plan) -> usize {
    plan.nodes.iter().map(|n| n.pods.len()).sum()
}

/// The plan's JSON with the wall-clock field zeroed.
pub fn json_without_time(plan: &Plan) -> String {
    let mut v = serde_json::to_value(plan).expect("plans serialise");
    v["solver"]["seconds"] = serde_json::json!(0.0);
    serde_json::to_string_pretty(&v).expect("json")
}

/// Nodes as a sorted multiset of (type, zone, capacity type, sorted pods): the plan up to node ids.
pub fn nodes_canonical(plan: &Plan) -> Vec<(String, String, String, Vec<String>)> {
    let mut out: Vec<_> = plan
        .nodes
        .iter()
        .map(|n| {
            let mut pods = n.pods.clone();
            pods.sort();
            (
                n.instance_type.clone(),
                n.zone.clone(),
                n.capacity_type.as_str().to_string(),
                pods,
            )
        })
        .collect();
    out.sort();
    out
}

/// Sorted multiset of the offerings the plan launches.
pub fn offerings_canonical(plan: &Plan) -> Vec<(String, String, String)> {
    let mut out: Vec<_> = plan
        .nodes
        .iter()
        .map(|n| {
            (
                n.instance_type.clone(),
                n.zone.clone(),
                n.capacity_type.as_str().to_string(),
            )
        })
        .collect();
    out.sort();
    out
}

pub fn unschedulable_set(plan: &Plan) -> BTreeSet<String> {
    plan.unschedulable.iter().map(|u| u.pod.clone()).collect()
}

fn parse_q(s: &str) -> Result<i64, String> {
    Quantity::parse(s)
        .map(|q| q.milli())
        .map_err(|e| format!("allocatable {s:?}: {e}"))
}

/// Checks a plan against the model, independently of the optimizer: every pod exactly once (on a node
/// or unschedulable); every node a real offering at its catalog price with the right labels and exact
/// allocatable; requests within allocatable (cpu, memory, pods); zone selectors met; anti-affinity
/// classes one per node; zone-spread skew within maxSkew over the class's eligible zones; cost the sum
/// of node prices and objective the cost plus the preference penalties (preferred anti-affinity,
/// preferred instance type); a pod that fits some offering it may use and has no spread rule is
/// never left unplaced.
pub fn check_plan(inst: &Instance, plan: &Plan) -> Result<(), String> {
    let class_of = inst.class_of();
    if !plan.existing.is_empty() {
        return Err("placements on existing nodes, but there are none".into());
    }
    let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
    for p in plan
        .nodes
        .iter()
        .flat_map(|n| n.pods.iter())
        .chain(plan.unschedulable.iter().map(|u| &u.pod))
    {
        *seen.entry(p.as_str()).or_insert(0) += 1;
    }
    for (p, n) in &seen {
        if !class_of.contains_key(*p) {
            return Err(format!("unknown pod {p}"));
        }
        if *n != 1 {
            return Err(format!("pod {p} appears {n} times"));
        }
    }
    if let Some(p) = class_of.keys().find(|p| !seen.contains_key(p.as_str())) {
        return Err(format!("pod {p} is neither placed nor unschedulable"));
    }
    let ids: BTreeSet<&str> = plan.nodes.iter().map(|n| n.id.as_str()).collect();
    if ids.len() != plan.nodes.len() {
        return Err("node ids are not unique".into());
    }
    let mut total = 0.0;
    // spread class -> zone -> pods
    let mut per_zone: BTreeMap<usize, BTreeMap<String, i64>> = BTreeMap::new();
    let mut penalty = 0.0;
    for n in &plan.nodes {
        let t = inst
            .types
            .iter()
            .find(|t| t.name == n.instance_type)
            .ok_or(format!("{}: unknown type {}", n.id, n.instance_type))?;
        let o = t
            .offerings
            .iter()
            .find(|o| o.zone == n.zone && o.ct == n.capacity_type)
            .ok_or(format!(
                "{}: {} has no offering {} {:?}",
                n.id, t.name, n.zone, n.capacity_type
            ))?;
        if (o.price - n.price).abs() > 1e-9 {
            return Err(format!(
                "{}: price {} but the catalog says {}",
                n.id, n.price, o.price
            ));
        }
        total += n.price;
        let lab = |k: &str| n.labels.get(k).map(String::as_str);
        if lab(ZONE) != Some(&n.zone)
            || lab(CAPACITY_TYPE) != Some(n.capacity_type.as_str())
            || lab(INSTANCE_TYPE) != Some(&t.name)
        {
            return Err(format!(
                "{}: labels {:?} disagree with the node",
                n.id, n.labels
            ));
        }
        let (acpu, amem, apods) = t.alloc();
        let get = |k: &str| n.allocatable.get(k).map_or(Ok(0), |s| parse_q(s));
        let (pcpu, pmem, ppods) = (get("cpu")?, get("memory")?, get("pods")?);
        if (pcpu, pmem, ppods) != (acpu, amem * 1024 * 1024 * 1000, apods * 1000) {
            return Err(format!(
                "{}: allocatable {:?}, expected cpu {acpu}m memory {amem}Mi pods {apods}",
                n.id, n.allocatable
            ));
        }
        if n.pods.is_empty() {
            return Err(format!("{}: an empty node is launched", n.id));
        }
        let (mut cpu, mut mem) = (0, 0);
        let mut anti_here = BTreeSet::new();
        let mut on_node: BTreeMap<usize, usize> = BTreeMap::new();
        for p in &n.pods {
            *on_node.entry(class_of[p]).or_insert(0) += 1;
        }
        let weights = joiner::domain::CostWeights::default();
        for (&k, &count) in on_node.iter().filter(|(_, &count)| count >= 2) {
            penalty += inst.classes[k].prefer_apart.map_or(0.0, |w| {
                count as f64 * f64::from(w) * weights.preferred_pod_anti_affinity
            });
        }
        for (&k, &count) in &on_node {
            if let Some((_, w)) = inst.classes[k]
                .prefer_type
                .as_ref()
                .filter(|(ty, _)| *ty != t.name)
            {
                penalty += count as f64 * f64::from(*w) * weights.preferred_node_affinity;
            }
        }
        for p in &n.pods {
            let k = class_of[p];
            let c = &inst.classes[k];
            cpu += c.cpu_m;
            mem += c.mem_mib;
            if c.zone.as_ref().is_some_and(|z| *z != n.zone) {
                return Err(format!(
                    "{}: {p} selects zone {:?} but the node is in {}",
                    n.id, c.zone, n.zone
                ));
            }
            if c.anti && !anti_here.insert(k) {
                return Err(format!(
                    "{}: two pods of anti-affinity class {} share the node",
                    n.id, c.name
                ));
            }
            if c.spread.is_some() {
                *per_zone
                    .entry(k)
                    .or_default()
                    .entry(n.zone.clone())
                    .or_insert(0) += 1;
            }
        }
        if cpu > acpu || mem > amem || n.pods.len() as i64 > apods {
            return Err(format!(
                "{}: pods need cpu {cpu}m memory {mem}Mi pods {}, allocatable is {acpu}m {amem}Mi {apods}",
                n.id,
                n.pods.len()
            ));
        }
    }
    for (k, c) in inst.classes.iter().enumerate() {
        if let Some(skew) = c.spread.filter(|_| !c.soft_spread) {
            let counts = per_zone.get(&k).cloned().unwrap_or_default();
            let mut zones = inst.eligible_zones(k);
            zones.extend(counts.keys().cloned());
            let vals: Vec<i64> = zones
                .iter()
                .map(|z| counts.get(z).copied().unwrap_or(0))
                .collect();
            let (max, min) = (
                vals.iter().copied().max().unwrap_or(0),
                vals.iter().copied().min().unwrap_or(0),
            );
            if max - min > i64::from(skew) {
                return Err(format!(
                    "class {}: zone counts {counts:?} over {zones:?} exceed maxSkew {skew}",
                    c.name
                ));
            }
        } else if inst.fits_somewhere(k) {
            if let Some(u) = plan.unschedulable.iter().find(|u| class_of[&u.pod] == k) {
                return Err(format!(
                    "{} is unschedulable ({:?}) although a fresh node would hold it",
                    u.pod, u.reason
                ));
            }
        }
    }
    if (plan.cost_per_hour - total).abs() > EPS {
        return Err(format!(
            "cost_per_hour {} but the nodes cost {total}",
            plan.cost_per_hour
        ));
    }
    if (plan.objective - plan.cost_per_hour - penalty).abs() > EPS {
        return Err(format!(
            "objective {} is not the cost {} plus the preference penalty {penalty}",
            plan.objective, plan.cost_per_hour
        ));
    }
    if plan.lower_bound > plan.objective + EPS || plan.lower_bound < 0.0 {
        return Err(format!(
            "lower bound {} is not in [0, objective {}]",
            plan.lower_bound, plan.objective
        ));
    }
    Ok(())
}

/// `cases` cases from a fixed seed, so every run checks the same instances; `PROPTEST_CASES` and
/// `PROPTEST_RNG_SEED` override both to explore further.
pub fn proptest_config(cases: u32, seed: u64) -> proptest::test_runner::Config {
    let default = proptest::test_runner::Config::default();
    proptest::test_runner::Config {
        cases: if std::env::var_os("PROPTEST_CASES").is_some() {
            default.cases
        } else {
            cases
        },
        rng_seed: if std::env::var_os("PROPTEST_RNG_SEED").is_some() {
            default.rng_seed
        } else {
            proptest::test_runner::RngSeed::Fixed(seed)
        },
        failure_persistence: None,
        ..default
    }
}

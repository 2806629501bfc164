//! The scale-in benchmark for disruption: a cluster that Karpenter filled and whose load then
//! dropped.
//!
//! [`scale_in`] builds `nodes` running, initialized Karpenter nodes of one NodePool `default`
//! (EC2NodeClass `default`; c/m/r categories, generation > 2, amd64, linux, on-demand and spot;
//! `WhenEmptyOrUnderutilized` after `0s`, one budget of `100%`) in three zones. Nodes are what
//! Karpenter would have launched for such a workload: general-purpose, compute- and
//! memory-optimized types of the 2xlarge and 4xlarge sizes, mostly spot, each carrying the
//! well-known labels (nodepool, capacity type, instance type, zone, region, arch, os, hostname, the
//! `karpenter.k8s.aws/` instance labels) and a NodeClaim, with capacity and allocatable from the
//! catalog and a price the catalog knows for its zone and capacity type. Every node runs the pod of
//! one DaemonSet (100m, 128Mi) and was filled to 85-95% of its allocatable by replicas of 20
//! Deployments (one per request shape: cpu {250m, 500m, 1, 2} x memory {256Mi, 512Mi, 1Gi, 2Gi,
//! 4Gi}; ReplicaSet owners; three spread over zones with ScheduleAnyway and one with DoNotSchedule,
//! maxSkew 1, respected when filling). Pods are shared out in proportion to node vCPUs so that
//! `pods_after / (1 - drop)` pods ran before the drop. Then the load drops: pods are removed at
//! random until exactly `pods_after` Deployment pods remain, which leaves every node partly empty;
//! consolidation's task is to pack them again. The same seed gives the same snapshot. Times are
//! fixed just before 2026-11-30T12:00:00Z so benchmarks are reproducible; NodeClaims expire after
//! 720h, long after that.
//!
//! When asked for more pods than the nodes can hold (about 25 pods per 8 vCPU), fewer pods run
//! before the drop and, should that be fewer than `pods_after`, fewer remain after it too; a
//! catalog without the listed types gives fewer nodes.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::catalog::{CapacityType, Catalog, InstanceType};
use crate::disruption::edit;
use crate::domain::labels::{ARCH, CAPACITY_TYPE, HOSTNAME, INSTANCE_TYPE, NODEPOOL, OS, ZONE};
use crate::domain::{
    Budget, ClusterSnapshot, DaemonSet, Disruption, LabelSelector, Labels, Node, NodeClaim,
    NodeClass, NodePool, Operator, Pod, PodConstraints, Quantity, Requirement, Resources,
    TopologySpread, WhenUnsatisfiable,
};
use crate::workload::Rng;

const CPU_MILLI: [i64; 4] = [250, 500, 1000, 2000];
const MEMORY_MIB: [i64; 5] = [256, 512, 1024, 2048, 4096];
/// What Karpenter launched, with relative weights: 4xlarge more often than 2xlarge, general purpose
/// most.
const TYPES: [(&str, u64); 18] = [
    ("m5.2xlarge", 4),
    ("m6i.2xlarge", 6),
    ("m7i.2xlarge", 5),
    ("m5.4xlarge", 6),
    ("m6i.4xlarge", 9),
    ("m7i.4xlarge", 7),
    ("c5.2xlarge", 3),
    ("c6i.2xlarge", 5),
    ("c7i.2xlarge", 4),
    ("c5.4xlarge", 4),
    ("c6i.4xlarge", 6),
    ("c7i.4xlarge", 5),
    ("r5.2xlarge", 3),
    ("r6i.2xlarge", 4),
    ("r7i.2xlarge", 3),
    ("r5.4xlarge", 3),
    ("r6i.4xlarge", 5),
    ("r7i.4xlarge", 4),
];
/// Share of spot nodes, in percent: with both allowed Karpenter launches spot unless it is
/// unavailable.
const SPOT_PERCENT: u64 = 70;
const ZONES: usize = 3;
const NAMESPACE: &str = "default";
/// The benchmark's fixed clock, RFC 3339: every time in the snapshot lies before it.
pub const NOW: &str = "2026-11-30T12:00:00Z";

/// Kubernetes' random pod-name suffix.
trait Suffix {
    fn suffix(&mut self, len: usize) -> String;
}

impl Suffix for Rng {
    fn suffix(&mut self, len: usize) -> String {
        const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
        (0..len)
            .map(|_| ALPHABET[self.below(ALPHABET.len())] as char)
            .collect()
    }
}

/// A Deployment's pod template.
struct Deployment {
    name: String,
    template_hash: String,
    cpu: i64,
    mem: i64,
    spread: Option<WhenUnsatisfiable>,
}

/// An instance offering a node of the benchmark runs on.
struct Placed<'a> {
    it: &'a InstanceType,
    zone: usize,
    capacity_type: CapacityType,
}

/// The scale-in snapshot described in the module documentation.
pub fn scale_in(
    nodes: usize,
    pods_after: usize,
    drop: f64,
    seed: u64,
    catalog: &Catalog,
) -> ClusterSnapshot {
    let mut rng = Rng(seed);
    let drop = if drop.is_finite() {
        drop.clamp(0.0, 0.95)
    } else {
        0.0
    };
    let pods_before = ((pods_after as f64 / (1.0 - drop)).round() as usize).max(pods_after);
    let zones = zones(catalog);
    let deployments = deployments(&mut rng);
    let daemonset = daemonset();
    let ds_req = &daemonset.pod.requests;
    let mut snapshot = ClusterSnapshot {
        nodepools: vec![nodepool()],
        node_classes: vec![NodeClass {
            name: "default".into(),
            ..Default::default()
        }],
        daemonsets: vec![daemonset.clone()],
        ..Default::default()
    };
    let placed: Vec<Placed> = (0..nodes)
        .filter_map(|_| offering(&mut rng, catalog, &zones))
        .collect();
    let total_vcpu: u64 = placed
        .iter()
        .map(|p| u64::from(p.it.vcpu))
        .sum::<u64>()
        .max(1);
    let mut zone_counts = vec![[0usize; ZONES]; deployments.len()];
    let (mut cum_vcpu, mut carry) = (0u64, 0usize);
    let mut pods: Vec<Pod> = Vec::new();
    for (i, p) in placed.iter().enumerate() {
        let name = format!(
            "ip-10-{}-{}-{}.ec2.internal",
            (i >> 16) & 255,
            (i >> 8) & 255,
            i & 255
        );
        let share =
            |v: u64| (pods_before as u128 * u128::from(v) / u128::from(total_vcpu)) as usize;
        let quota = share(cum_vcpu + u64::from(p.it.vcpu)) - share(cum_vcpu) + carry;
        cum_vcpu += u64::from(p.it.vcpu);
        let alloc = p.it.allocatable(None);
        let fill = 0.85 + 0.10 * rng.unit();
        let budget = |r: &str| (alloc.get(r).milli() as f64 * fill) as i64 - ds_req.get(r).milli();
        let (mut cpu, mut mem) = (budget("cpu"), budget("memory"));
        let max_pods = (alloc.get("pods").milli() / 1000 - 1).max(0) as usize;
        // never more pods than the smallest request shape leaves room for
        let fits = (cpu / CPU_MILLI[0]).min(mem / mib(MEMORY_MIB[0])).max(0) as usize;
        let mut left = quota.min(max_pods).min(fits);
        let mut on_node = 0;
        while left > 0 {
            let (want_cpu, want_mem) = (cpu as f64 / left as f64, mem as f64 / left as f64);
            let (min_cpu, min_mem) = (
                (left as i64 - 1) * CPU_MILLI[0],
                (left as i64 - 1) * mib(MEMORY_MIB[0]),
            );
            let best = deployments
                .iter()
                .enumerate()
                .filter(|(_, d)| d.cpu <= cpu - min_cpu && mib(d.mem) <= mem - min_mem)
                .filter(|(k, d)| {
                    d.spread != Some(WhenUnsatisfiable::DoNotSchedule)
                        || skew_ok(&zone_counts[*k], p.zone)
                })
                .map(|(k, d)| {
                    let miss = (d.cpu as f64 / want_cpu).ln().abs()
                        + (mib(d.mem) as f64 / want_mem).ln().abs();
                    (miss + 0.6 * rng.unit(), k)
                })
                .min_by(|a, b| a.0.total_cmp(&b.0));
            let Some((_, k)) = best else { break };
            let d = &deployments[k];
            cpu -= d.cpu;
            mem -= mib(d.mem);
            zone_counts[k][p.zone] += 1;
            pods.push(deployment_pod(d, &name, &mut rng));
            left -= 1;
            on_node += 1;
        }
        carry = quota - on_node;
        register(&mut snapshot, p, &zones, &catalog.region, &name, &mut rng);
        snapshot.pods.push(Arc::new(daemon_pod(&daemonset, &name)));
    }
    // the drop: a random `pods_after` of the deployment pods stay, in their original order
    let mut order: Vec<usize> = (0..pods.len()).collect();
    for i in (1..order.len()).rev() {
        order.swap(i, rng.below(i + 1));
    }
    let mut keep = vec![false; pods.len()];
    order.iter().take(pods_after).for_each(|&i| keep[i] = true);
    snapshot.pods.extend(
        pods.into_iter()
            .zip(keep)
            .filter(|(_, k)| *k)
            .map(|(p, _)| Arc::new(p)),
    );
    snapshot
}

fn mib(m: i64) -> i64 {
    Quantity::from_mib(m).milli()
}

/// Whether one more pod in `zone` keeps the deployment's zone skew within 1.
fn skew_ok(counts: &[usize; ZONES], zone: usize) -> bool {
    let min = counts.iter().copied().min().unwrap_or(0);
    counts[zone] < min + 1
}

/// The first three zones the catalog offers in.
fn zones(catalog: &Catalog) -> Vec<String> {
    let all: std::collections::BTreeSet<&str> = catalog
        .instance_types
        .iter()
        .flat_map(|t| t.offerings.iter().map(|o| o.zone.as_str()))
        .collect();
    all.into_iter().take(ZONES).map(str::to_string).collect()
}

/// Picks an instance type, zone and capacity type with a price in the catalog.
fn offering<'a>(rng: &mut Rng, catalog: &'a Catalog, zones: &[String]) -> Option<Placed<'a>> {
    let known: Vec<(&InstanceType, u64)> = TYPES
        .iter()
        .filter_map(|(name, w)| {
            catalog
                .instance_types
                .iter()
                .find(|t| t.name == *name)
                .map(|t| (t, *w))
        })
        .collect();
    let total: u64 = known.iter().map(|(_, w)| w).sum();
    let mut ticket = rng.next() % total.max(1);
    let it = known.iter().find(|(_, w)| {
        ticket < *w || {
            ticket -= w;
            false
        }
    })?;
    let spot = rng.next() % 100 < SPOT_PERCENT;
    let zone = rng.below(zones.len());
    let preferred = if spot {
        [CapacityType::Spot, CapacityType::OnDemand]
    } else {
        [CapacityType::OnDemand, CapacityType::Spot]
    };
    // the drawn zone first, then the others: the node must have an offering the catalog prices
    (0..zones.len())
        .map(|k| (zone + k) % zones.len())
        .find_map(|z| {
            preferred.iter().find_map(|&ct| {
                let priced =
                    it.0.offerings
                        .iter()
                        .any(|o| o.zone == zones[z] && o.capacity_type == ct && o.price > 0.0);
                priced.then_some(Placed {
                    it: it.0,
                    zone: z,
                    capacity_type: ct,
                })
            })
        })
}

fn deployments(rng: &mut Rng) -> Vec<Deployment> {
    let mut out: Vec<Deployment> = CPU_MILLI
        .iter()
        .flat_map(|&cpu| MEMORY_MIB.iter().map(move |&mem| (cpu, mem)))
        .enumerate()
        .map(|(i, (cpu, mem))| Deployment {
            name: format!("app-{i:02}"),
            template_hash: rng.suffix(10),
            cpu,
            mem,
            spread: None,
        })
        .collect();
    let n = out.len();
    let first = rng.below(n);
    for (k, when) in [
        WhenUnsatisfiable::DoNotSchedule,
        WhenUnsatisfiable::ScheduleAnyway,
        WhenUnsatisfiable::ScheduleAnyway,
        WhenUnsatisfiable::ScheduleAnyway,
    ]
    .into_iter()
    .enumerate()
    {
        out[(first + 5 * k + k) % n].spread = Some(when);
    }
    out
}

fn app_labels(app: &str) -> Labels {
    [("app".to_string(), app.to_string())].into()
}

fn requests(cpu_milli: i64, mem_mib: i64) -> Resources {
    Resources::new()
        .with("cpu", Quantity::from_milli(cpu_milli))
        .with("memory", Quantity::from_mib(mem_mib))
        .with("pods", Quantity::from_units(1))
}

fn deployment_pod(d: &Deployment, node: &str, rng: &mut Rng) -> Pod {
    let mut labels = app_labels(&d.name);
    labels.insert("pod-template-hash".into(), d.template_hash.clone());
    let spread = d.spread.map(|when| TopologySpread {
        max_skew: 1,
        topology_key: ZONE.into(),
        when_unsatisfiable: when,
        selector: LabelSelector {
            match_labels: app_labels(&d.name),
            match_expressions: vec![],
        },
        min_domains: None,
        node_affinity_policy: crate::domain::NodeInclusionPolicy::affinity_default(),
        node_taints_policy: crate::domain::NodeInclusionPolicy::taints_default(),
    });
    let constraints = PodConstraints {
        namespace: NAMESPACE.into(),
        labels: labels.clone(),
        requests: requests(d.cpu, d.mem),
        spread: spread.into_iter().collect(),
        ..Default::default()
    };
    let replica_set = format!("{}-{}", d.name, d.template_hash);
    let uid = format!("{:016x}{:016x}", rng.next(), rng.next());
    Pod {
        namespace: NAMESPACE.into(),
        name: format!("{replica_set}-{}", rng.suffix(5)),
        uid,
        labels: std::sync::Arc::new(labels),
        constraints: std::sync::Arc::new(constraints),
        node_name: Some(node.to_string()),
        terminal: false,
        terminating: false,
        owner_kind: Some("ReplicaSet".into()),
        owner_name: Some(replica_set),
        priority: 0,
        deletion_cost: 0,
        do_not_disrupt: None,
        created: Some("2026-11-29T09:00:00Z".into()),
        started: Some("2026-11-29T09:00:10Z".into()),
        mirror: false,
        volumes: vec![],
    }
}

fn daemonset() -> DaemonSet {
    let labels = app_labels("node-agent");
    let pod = PodConstraints {
        namespace: "kube-system".into(),
        labels,
        requests: requests(100, 128),
        ..Default::default()
    };
    DaemonSet {
        namespace: "kube-system".into(),
        name: "node-agent".into(),
        pod,
    }
}

fn daemon_pod(ds: &DaemonSet, node: &str) -> Pod {
    Pod {
        created: Some("2026-11-28T12:00:00Z".into()),
        started: Some("2026-11-28T12:00:05Z".into()),
        ..edit::daemon_pod(ds, node)
    }
}

fn nodepool() -> NodePool {
    let req = |key: &str, operator: Operator, values: &[&str]| Requirement {
        key: key.into(),
        operator,
        values: values.iter().map(|v| v.to_string()).collect(),
        min_values: None,
    };
    let mut pool = NodePool::unconstrained("default");
    pool.requirements = vec![
        req(
            "karpenter.k8s.aws/instance-category",
            Operator::In,
            &["c", "m", "r"],
        ),
        req(
            "karpenter.k8s.aws/instance-generation",
            Operator::Gt,
            &["2"],
        ),
        req(ARCH, Operator::In, &["amd64"]),
        req(OS, Operator::In, &["linux"]),
        req(CAPACITY_TYPE, Operator::In, &["on-demand", "spot"]),
    ];
    pool.node_class = Some("default".into());
    pool.expire_after = Some("720h".into());
    pool.disruption = Disruption {
        consolidate_after: Some("0s".into()),
        budgets: vec![Budget {
            nodes: "100%".into(),
            reasons: vec![],
            schedule: None,
            duration: None,
        }],
        ..Disruption::default()
    };
    pool
}

/// Adds the Node and its NodeClaim as Karpenter would have registered them.
fn register(
    snapshot: &mut ClusterSnapshot,
    p: &Placed,
    zones: &[String],
    region: &str,
    name: &str,
    rng: &mut Rng,
) {
    let zone = &zones[p.zone];
    let mut labels = p.it.labels(region);
    for (k, v) in [
        (NODEPOOL, "default"),
        (CAPACITY_TYPE, p.capacity_type.as_str()),
        (INSTANCE_TYPE, &p.it.name),
        (ZONE, zone),
        (ARCH, p.it.arch.as_str()),
        (OS, "linux"),
        (HOSTNAME, name),
        ("karpenter.k8s.aws/ec2nodeclass", "default"),
        ("karpenter.sh/registered", "true"),
        ("karpenter.sh/initialized", "true"),
        (
            "node.kubernetes.io/lifecycle",
            if p.capacity_type == CapacityType::Spot {
                "spot"
            } else {
                "normal"
            },
        ),
    ] {
        labels.insert(k.to_string(), v.to_string());
    }
    let provider_id = Some(format!("aws:///{zone}/i-{:017x}", rng.next() >> 4));
    // launched over the two days before `NOW`, with pod events up to just before it
    let created = format!(
        "2026-11-{:02}T{:02}:{:02}:00Z",
        28 + rng.below(2),
        rng.below(24),
        rng.below(60)
    );
    let claim_name = format!("default-{}", rng.suffix(5));
    let node = Node {
        name: name.to_string(),
        labels,
        taints: vec![],
        capacity: p.it.capacity(None),
        allocatable: p.it.allocatable(None),
        unschedulable: false,
        ready: true,
        provider_id,
        created: Some(created),
        annotations: BTreeMap::new(),
        deleting: false,
    };
    snapshot.node_claims.push(NodeClaim {
        name: claim_name,
        last_pod_event: Some("2026-11-30T11:30:00Z".into()),
        expire_after: Some("720h".into()),
        ..edit::claim_for(&node, "default", None)
    });
    snapshot.nodes.push(node.into());
}

#[cfg(test)]
mod tests {
    use super::*;

    fn used(s: &ClusterSnapshot) -> BTreeMap<&str, Resources> {
        let mut out: BTreeMap<&str, Resources> = BTreeMap::new();
        for p in &s.pods {
            out.entry(p.node_name.as_deref().unwrap_or(""))
                .or_default()
                .add(p.requests());
        }
        out
    }

    #[test]
    fn counts_determinism_and_fit() {
        let catalog = Catalog::bundled("us-east-1").unwrap();
        let s = scale_in(40, 400, 0.6, 7, &catalog);
        assert_eq!(s.nodes.len(), 40);
        assert_eq!(s.node_claims.len(), 40);
        assert_eq!(
            s.pods
                .iter()
                .filter(|p| p.owner_kind.as_deref() == Some("ReplicaSet"))
                .count(),
            400
        );
        assert_eq!(s.pods.iter().filter(|p| p.is_daemonset_pod()).count(), 40);
        assert!(s.node_claims.iter().all(|c| c.initialized));
        assert_eq!(s, scale_in(40, 400, 0.6, 7, &catalog));
        assert_ne!(s, scale_in(40, 400, 0.6, 8, &catalog));
        let used = used(&s);
        for n in &s.nodes {
            assert!(
                used[n.name.as_str()].fits_in(&n.allocatable),
                "{} overfull",
                n.name
            );
            assert!(crate::optimizer::problem::node_price(n, &catalog) > 0.0);
            assert!(
                s.nodepools[0]
                    .requirements
                    .iter()
                    .all(|r| r.matches(&n.labels)),
                "{} off its pool",
                n.name
            );
        }
    }

    #[test]
    fn nodes_were_full_before_the_drop() {
        let catalog = Catalog::bundled("us-east-1").unwrap();
        let s = scale_in(30, 750, 0.0, 3, &catalog);
        assert_eq!(s.pods.len(), 750 + 30);
        let used = used(&s);
        for n in &s.nodes {
            let ratio =
                |r: &str| used[n.name.as_str()].get(r).as_f64() / n.allocatable.get(r).as_f64();
            let fill = ratio("cpu").max(ratio("memory"));
            assert!((0.75..=0.96).contains(&fill), "{} filled {fill:.2}", n.name);
        }
    }
}

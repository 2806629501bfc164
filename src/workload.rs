//! Synthetic workloads for benchmarks: the diverse pod mix of Karpenter's scheduling benchmark (1/5
//! generic, 1/5 zonal spread, 1/5 hostname spread, 1/5 zonal self-affinity, 1/5 hostname
//! anti-affinity; cpu in {100m, 250m, 500m, 1, 1.5}, memory in {100Mi, 256Mi, 512Mi, 1Gi, 2Gi,
//! 4Gi}), built directly as domain types with a seeded generator so every run sees the same pods;
//! its generic pods alone ([`generic`]); a mix whose rules are preferences only (see
//! [`preferring`]); service Deployments of 20-25 replicas ([`deployments`]); and small batches of
//! at most eight classes ([`small`]).

use crate::domain::labels::{HOSTNAME, ZONE};
use crate::domain::{
    ClusterSnapshot, LabelSelector, Labels, NodePool, Pod, PodAffinityTerm, PodConstraints,
    Quantity, Resources, TopologySpread, Weighted, WhenUnsatisfiable,
};

const CPU_MILLI: [i64; 5] = [100, 250, 500, 1000, 1500];
const MEMORY_MIB: [i64; 6] = [100, 256, 512, 1024, 2048, 4096];
/// Deployments per constrained kind, so constraints are shared by groups of pods as in real
/// clusters.
const GROUPS: usize = 10;

/// A small deterministic generator (SplitMix64) shared by the benchmark generators: benchmarks need
/// repeatability across runs and versions, not statistics.
pub(crate) struct Rng(pub(crate) u64);

impl Rng {
    pub(crate) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    pub(crate) fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.below(items.len())]
    }

    pub(crate) fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }

    /// Uniform in [0, 1).
    pub(crate) fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

fn selector(app: &str) -> LabelSelector {
    LabelSelector {
        match_labels: [("app".to_string(), app.to_string())].into(),
        match_expressions: vec![],
    }
}

fn pod(i: usize, app: &str, rng: &mut Rng, kind: usize) -> Pod {
    let labels: Labels = [("app".to_string(), app.to_string())].into();
    let requests = Resources::new()
        .with("cpu", Quantity::from_milli(rng.pick(&CPU_MILLI)))
        .with("memory", Quantity::from_mib(rng.pick(&MEMORY_MIB)))
        .with("pods", Quantity::from_units(1));
    let mut c = PodConstraints {
        namespace: "default".into(),
        labels: labels.clone(),
        requests,
        ..Default::default()
    };
    let spread = |key: &str| TopologySpread {
        max_skew: 1,
        topology_key: key.into(),
        when_unsatisfiable: WhenUnsatisfiable::DoNotSchedule,
        selector: selector(app),
        min_domains: None,
        node_affinity_policy: crate::domain::NodeInclusionPolicy::affinity_default(),
        node_taints_policy: crate::domain::NodeInclusionPolicy::taints_default(),
    };
    let term = |key: &str| PodAffinityTerm {
        selector: selector(app),
        namespaces: vec![],
        all_namespaces: false,
        topology_key: key.into(),
    };
    match kind {
        1 => c.spread.push(spread(ZONE)),
        2 => c.spread.push(spread(HOSTNAME)),
        3 => c.pod_affinity.push(term(ZONE)),
        4 => c.pod_anti_affinity.push(term(HOSTNAME)),
        _ => {}
    }
    Pod {
        namespace: "default".into(),
        uid: format!("uid-{i:06}"),
        labels: std::sync::Arc::new(labels),
        ..Pod::new(format!("{app}-{i}"), c).owned_by("ReplicaSet", app)
    }
}

/// A cluster of nothing but `pods`, all pending, and one unconstrained NodePool.
fn pending(pods: Vec<std::sync::Arc<Pod>>) -> ClusterSnapshot {
    ClusterSnapshot {
        pods,
        nodepools: vec![NodePool::unconstrained("default")],
        ..Default::default()
    }
}

/// `count` pending pods of the diverse mix and one unconstrained NodePool.
pub fn diverse(count: usize, seed: u64) -> ClusterSnapshot {
    let mut rng = Rng(seed);
    let names = [
        "generic",
        "zone-spread",
        "host-spread",
        "zone-affinity",
        "host-anti",
    ];
    let pods = (0..count)
        .map(|i| {
            let kind = (i * 5 / count.max(1)).min(4);
            // Karpenter's benchmark gives every anti-affinity pod the same label: one per node
            let app = if kind == 4 {
                names[4].to_string()
            } else {
                format!("{}-{}", names[kind], i % GROUPS)
            };
            std::sync::Arc::new(pod(i, &app, &mut rng, kind))
        })
        .collect();
    pending(pods)
}

/// `count` pending pods like the diverse mix's generic fifth (10 Deployments, no placement rules):
/// plain bin packing, where the bound is not loosened by rules it leaves out.
pub fn generic(count: usize, seed: u64) -> ClusterSnapshot {
    let mut rng = Rng(seed);
    let pods = (0..count)
        .map(|i| std::sync::Arc::new(pod(i, &format!("generic-{}", i % GROUPS), &mut rng, 0)))
        .collect();
    pending(pods)
}

/// `count` pending pods whose placement rules are all preferences: half generic (20 Deployments),
/// a quarter in 25 Deployments that prefer one replica per node (weight 100), a quarter in
/// Deployments of three replicas that prefer one replica per zone (weight 50). Requests as in
/// [`diverse`].
pub fn preferring(count: usize, seed: u64) -> ClusterSnapshot {
    let mut rng = Rng(seed);
    let pods = (0..count)
        .map(|i| {
            let kind = (i * 4 / count.max(1)).min(3);
            let (app, key, weight) = match kind {
                0 | 1 => (format!("generic-{}", i % 20), None, 0),
                2 => (format!("web-{}", i % 25), Some(HOSTNAME), 100),
                _ => (format!("db-{}", i % (count / 12).max(1)), Some(ZONE), 50),
            };
            let mut p = pod(i, &app, &mut rng, 0);
            if let Some(key) = key {
                let term = PodAffinityTerm {
                    selector: selector(&app),
                    namespaces: vec![],
                    all_namespaces: false,
                    topology_key: key.into(),
                };
                std::sync::Arc::make_mut(&mut p.constraints)
                    .preferred_pod_anti_affinity
                    .push(Weighted { weight, term });
            }
            std::sync::Arc::new(p)
        })
        .collect();
    pending(pods)
}

/// One Deployment of `replicas` pods sharing one class: requests drawn as in [`diverse`], a
/// required zone spread (maxSkew 1) with probability `zone`, required hostname anti-affinity with
/// `host`, and a node selector for on-demand capacity with `on_demand`.
struct DeploymentShape {
    zone: f64,
    host: f64,
    on_demand: f64,
}

fn deployment(
    app: &str,
    replicas: usize,
    first: usize,
    shape: &DeploymentShape,
    rng: &mut Rng,
) -> Vec<std::sync::Arc<Pod>> {
    let kind = if rng.unit() < shape.zone {
        1
    } else if rng.unit() < shape.host / (1.0 - shape.zone).max(1e-9) {
        4
    } else {
        0
    };
    let on_demand = rng.unit() < shape.on_demand;
    let template = {
        let mut p = pod(first, app, rng, kind);
        if on_demand {
            std::sync::Arc::make_mut(&mut p.constraints)
                .node_selector
                .push(crate::domain::Requirement::in_values(
                    crate::domain::labels::CAPACITY_TYPE,
                    &["on-demand"],
                ));
        }
        p
    };
    (first..first + replicas)
        .map(|i| {
            std::sync::Arc::new(Pod {
                uid: format!("uid-{i:06}"),
                name: format!("{app}-{i}"),
                ..template.clone()
            })
        })
        .collect()
}

/// `count` pending pods in Deployments of 20-25 replicas: 40% with a required zone spread, 15%
/// with required hostname anti-affinity, 10% on on-demand capacity only, requests as in
/// [`diverse`]. Each Deployment is one pod class, as in clusters that run services.
pub fn deployments(count: usize, seed: u64) -> ClusterSnapshot {
    let shape = DeploymentShape {
        zone: 0.4,
        host: 0.15,
        on_demand: 0.1,
    };
    let mut rng = Rng(seed);
    let mut pods = Vec::with_capacity(count);
    while pods.len() < count {
        let replicas = (20 + rng.below(6)).min(count - pods.len());
        let app = format!("svc-{}", pods.len());
        pods.extend(deployment(&app, replicas, pods.len(), &shape, &mut rng));
    }
    pending(pods)
}

/// `count` pending pods in 2 to 8 Deployments (the number drawn from the seed) of near-equal
/// size: a quarter with a required zone spread, a sixth with required hostname anti-affinity, a
/// tenth on on-demand only. The small batches a controller sees most reconciles, where every
/// plan should be proven optimal.
pub fn small(count: usize, seed: u64) -> ClusterSnapshot {
    let shape = DeploymentShape {
        zone: 0.25,
        host: 0.17,
        on_demand: 0.1,
    };
    let mut rng = Rng(seed);
    let classes = 2 + rng.below(7);
    let mut pods = Vec::with_capacity(count);
    for d in 0..classes {
        let replicas = (count * (d + 1)) / classes - (count * d) / classes;
        let app = format!("app-{d}");
        pods.extend(deployment(&app, replicas, pods.len(), &shape, &mut rng));
    }
    pending(pods)
}

/// Snapshot YAML for the same workload, so a benchmark case can be replayed with `joiner solve`.
pub fn to_yaml(snapshot: &ClusterSnapshot) -> String {
    let mut docs = vec!["apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: default}\nspec:\n  template:\n    spec:\n      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}\n      requirements: []\n".to_string()];
    for p in &snapshot.pods {
        let c = &p.constraints;
        let app = &p.labels["app"];
        let mut d = format!(
            "apiVersion: v1\nkind: Pod\nmetadata: {{name: {}, namespace: default, uid: {}, labels: {{app: {app}}}}}\nspec:\n  containers:\n  - name: c\n    image: app\n    resources: {{requests: {{cpu: {}, memory: {}}}}}\n",
            p.name,
            p.uid,
            c.requests.get("cpu"),
            c.requests.get("memory").to_binary()
        );
        for r in &c.node_selector {
            d += &format!("  nodeSelector: {{{}: {}}}\n", r.key, r.values.join(","));
        }
        for s in &c.spread {
            d += &format!("  topologySpreadConstraints:\n  - {{maxSkew: 1, topologyKey: {}, whenUnsatisfiable: DoNotSchedule, labelSelector: {{matchLabels: {{app: {app}}}}}}}\n", s.topology_key);
        }
        for (terms, field) in [
            (&c.pod_affinity, "podAffinity"),
            (&c.pod_anti_affinity, "podAntiAffinity"),
        ] {
            for t in terms {
                d += &format!("  affinity:\n    {field}:\n      requiredDuringSchedulingIgnoredDuringExecution:\n      - {{topologyKey: {}, labelSelector: {{matchLabels: {{app: {app}}}}}}}\n", t.topology_key);
            }
        }
        d += "status: {phase: Pending}\n";
        docs.push(d);
    }
    docs.join("---\n")
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    /// Pods per app label, and per app its (zone spread, hostname anti-affinity, on-demand only).
    fn apps(s: &ClusterSnapshot) -> BTreeMap<String, (usize, (bool, bool, bool))> {
        let mut out: BTreeMap<String, (usize, (bool, bool, bool))> = BTreeMap::new();
        for p in &s.pods {
            let c = &p.constraints;
            let kind = (
                !c.spread.is_empty(),
                !c.pod_anti_affinity.is_empty(),
                !c.node_selector.is_empty(),
            );
            let e = out.entry(p.labels["app"].clone()).or_insert((0, kind));
            e.0 += 1;
            assert_eq!(e.1, kind, "one Deployment, one shape: {}", p.name);
        }
        out
    }

    #[test]
    fn deployments_have_20_to_25_replicas_and_the_mix_of_rules() {
        let mut kinds = [0usize; 3];
        let mut total = 0;
        for seed in 1..=20 {
            let s = deployments(1000, seed);
            assert_eq!(s.pods.len(), 1000);
            let apps = apps(&s);
            // the last Deployment takes what is left of the count
            let short = apps
                .values()
                .filter(|(n, _)| !(20..=25).contains(n))
                .count();
            assert!(short <= 1, "seed {seed}: {apps:?}");
            for (n, (zone, host, od)) in apps.values() {
                total += n;
                kinds[0] += usize::from(*zone) * n;
                kinds[1] += usize::from(*host) * n;
                kinds[2] += usize::from(*od) * n;
            }
        }
        let share = |k: usize| kinds[k] as f64 / total as f64;
        assert!((0.33..0.47).contains(&share(0)), "zone spread {}", share(0));
        assert!(
            (0.10..0.20).contains(&share(1)),
            "anti-affinity {}",
            share(1)
        );
        assert!((0.06..0.14).contains(&share(2)), "on-demand {}", share(2));
        let same = |s: &ClusterSnapshot| {
            s.pods
                .iter()
                .map(|p| (p.name.clone(), p.constraints.requests.clone()))
                .collect::<Vec<_>>()
        };
        assert_eq!(same(&deployments(300, 7)), same(&deployments(300, 7)));
    }

    #[test]
    fn small_batches_have_two_to_eight_deployments() {
        let mut seen = std::collections::BTreeSet::new();
        for seed in 1..=40 {
            let s = small(200, seed);
            assert_eq!(s.pods.len(), 200);
            let n = apps(&s).len();
            assert!((2..=8).contains(&n), "seed {seed}: {n}");
            seen.insert(n);
        }
        assert!(seen.len() >= 5, "{seen:?}");
    }
}

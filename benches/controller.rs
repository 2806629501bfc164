//! The cost of one step of `joiner controller` before any decision: rebuilding the snapshot from
//! the reflector caches (`k8s::snapshot::build`, which clones the objects the caches converted as
//! their watch events arrived), which every step does. Baseline in the same run:
//! `snapshot::parse_snapshot` of the same objects as a `kubectl get -o yaml` dump, the path
//! `joiner solve` takes. Sizes: 1,000 and 5,000 pods on nodes of 10 pods each, a tenth pending.

use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::DynamicObject;
use kube::runtime::reflector::{store::Writer, Lookup};
use kube::runtime::watcher::Event;
use serde_json::json;

use joiner::k8s::cached::{self, Cached};
use joiner::k8s::caches::{karpenter_resource, Caches};

fn pod(i: usize, node: Option<String>) -> Pod {
    let conditions = if node.is_none() {
        json!([{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}])
    } else {
        json!([{"type": "Ready", "status": "True"}])
    };
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": format!("web-{i}"), "namespace": "default", "labels": {"app": "web"}},
        "spec": {"nodeName": node, "containers": [{"name": "app", "image": "nginx", "resources": {"requests": {"cpu": "250m", "memory": "512Mi"}}}]},
        "status": {"phase": if node.is_some() { "Running" } else { "Pending" }, "conditions": conditions},
    }))
    .expect("pod")
}

fn node(i: usize) -> Node {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": format!("node-{i}"), "labels": {"karpenter.sh/nodepool": "default", "node.kubernetes.io/instance-type": "m5.xlarge", "topology.kubernetes.io/zone": "us-east-1a", "karpenter.sh/capacity-type": "on-demand"}},
        "spec": {"providerID": format!("aws:///us-east-1a/i-{i:017x}")},
        "status": {"capacity": {"cpu": "4", "memory": "16Gi", "pods": "58"}, "allocatable": {"cpu": "3920m", "memory": "14Gi", "pods": "58"},
                   "conditions": [{"type": "Ready", "status": "True"}]},
    }))
    .expect("node")
}

fn nodepool() -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "default"},
        "spec": {"template": {"spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}, "requirements": []}}},
    }))
    .expect("nodepool")
}

fn fill<K: Lookup<DynamicType = ()> + Clone + 'static>(
    objects: Vec<K>,
) -> kube::runtime::reflector::Store<K> {
    let mut w = Writer::new(());
    for o in objects {
        w.apply_watcher_event(&Event::Apply(o));
    }
    w.as_reader()
}

/// Caches holding `pods` pods (a tenth pending) and their nodes, and the same objects as YAML.
fn cluster(pods: usize) -> (Caches, String) {
    let nodes: Vec<Node> = (0..pods / 10).map(node).collect();
    let all: Vec<Pod> = (0..pods)
        .map(|i| pod(i, (i % 10 != 0).then(|| format!("node-{}", i / 10))))
        .collect();
    let mut yaml: Vec<String> = nodes
        .iter()
        .map(|n| serde_yaml_ng::to_string(n).unwrap())
        .collect();
    yaml.extend(all.iter().map(|p| serde_yaml_ng::to_string(p).unwrap()));
    yaml.push(
        serde_yaml_ng::to_string(&nodepool())
            .unwrap()
            .replace("types: null\n", ""),
    );
    let mut pools = Writer::new(karpenter_resource("NodePool"));
    pools.apply_watcher_event(&Event::Apply(nodepool()));
    let empty = |kind: &str| Writer::<DynamicObject>::new(karpenter_resource(kind)).as_reader();
    let mut reader = cached::PodReader::default();
    let caches = Caches {
        pods: fill(
            all.into_iter()
                .map(|p| Cached::new(p, |p| reader.read(p)))
                .collect(),
        ),
        nodes: fill(
            nodes
                .into_iter()
                .map(|n| Cached::new(n, cached::read_node))
                .collect(),
        ),
        daemonsets: fill(vec![]),
        pdbs: fill(vec![]),
        config_maps: fill(vec![]),
        nodepools: pools.as_reader(),
        nodeclaims: empty("NodeClaim"),
        nodeclasses: empty("EC2NodeClass"),
        volumes: fill(vec![]),
        volume_claims: fill(vec![]),
        storage_classes: fill(vec![]),
        csi_nodes: fill(vec![]),
        resolved: Default::default(),
    };
    (caches, yaml.join("---\n"))
}

fn steps(c: &mut Criterion) {
    let mut group = c.benchmark_group("snapshot");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(8));
    for pods in [1000, 5000] {
        let (caches, yaml) = cluster(pods);
        let (live, errors) = joiner::k8s::snapshot::build(&caches);
        assert!(errors.is_empty(), "{errors:?}");
        let dump = joiner::snapshot::parse_snapshot(&yaml, "bench").expect("dump");
        assert_eq!(
            (live.pods.len(), live.nodes.len()),
            (dump.pods.len(), dump.nodes.len())
        );
        group.bench_with_input(BenchmarkId::new("from caches", pods), &caches, |b, c| {
            b.iter(|| joiner::k8s::snapshot::build(c))
        });
        group.bench_with_input(BenchmarkId::new("from yaml dump", pods), &yaml, |b, y| {
            b.iter(|| joiner::snapshot::parse_snapshot(y, "bench").expect("dump"))
        });
    }
    group.finish();
}

criterion_group!(benches, steps);
criterion_main!(benches);

//! End to end: the real `joiner controller` binary against the in-process API server, with the
//! kubelet, scheduler and ReplicaSet stand-ins of `support/kubesim.rs`. Each test starts its own
//! server and controller(s) and asserts on the cluster's objects and the controller's metrics.

#[path = "support/apiserver/mod.rs"]
mod apiserver;
#[path = "support/invariants.rs"]
mod invariants;
#[path = "support/joinerproc.rs"]
mod joinerproc;
#[path = "support/kubesim.rs"]
mod kubesim;
#[path = "support/timeline.rs"]
mod timeline;

use std::time::Duration;

use joiner::k8s::caches::karpenter_resource;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{Api, DynamicObject, ListParams, PostParams};
use kube::Client;
use serde_json::json;

use apiserver::{ApiServer, Injected, RequestMatch};
use invariants::Invariants;
use joinerproc::{tempdir, Joiner, SYSTEM_NS};
use kubesim::{census, eventually, nodeclaims, Census, Deployment, KubeSim};
use timeline::Timeline;

const NS: &str = "default";

/// A NodePool over general-purpose on-demand amd64 types and its EC2NodeClass.
async fn install_nodepool(client: &Client) {
    joinerproc::install_nodepool(
        client,
        json!({"requirements": joinerproc::general_purpose(true), "expireAfter": "720h"}),
        json!({"limits": {"cpu": "1000"}}),
    )
    .await;
}

async fn namespace(client: &Client, name: &str) {
    joinerproc::namespace(client, name).await;
}

async fn cluster(name: &str) -> (ApiServer, Client, tempdir::Dir) {
    let server = ApiServer::start().await;
    let client = server.client();
    namespace(&client, SYSTEM_NS).await;
    joinerproc::weights_for_a_seconds_clock(&client, json!({})).await;
    install_nodepool(&client).await;
    (server, client, tempdir::Dir::new(name))
}

/// The nodes running pods of [`NS`].
async fn nodes_with_pods(client: &Client) -> std::collections::BTreeSet<String> {
    Api::<Pod>::namespaced(client.clone(), NS)
        .list(&ListParams::default())
        .await
        .expect("pods listed")
        .items
        .into_iter()
        .filter_map(|p| p.spec.and_then(|s| s.node_name))
        .collect()
}

/// A PodDisruptionBudget allowing one `web` pod down at a time.
async fn one_web_pod_down_at_a_time(client: &Client) {
    let pdb: PodDisruptionBudget = serde_json::from_value(json!({
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "web", "namespace": NS},
        "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app": "web"}}},
    }))
    .unwrap();
    Api::<PodDisruptionBudget>::namespaced(client.clone(), NS)
        .create(&PostParams::default(), &pdb)
        .await
        .unwrap();
}

fn web(replicas: usize, cpu: &str) -> Deployment {
    Deployment {
        namespace: NS.into(),
        name: "web".into(),
        replicas,
        cpu: cpu.into(),
        memory: "1Gi".into(),
    }
}

/// The sum of every sample whose line starts with `prefix` (a metric name and its first labels).
fn sum_of_samples(metrics: &str, prefix: &str) -> f64 {
    metrics
        .lines()
        .filter(|l| l.starts_with(prefix))
        .filter_map(|l| l.rsplit_once(' ')?.1.parse::<f64>().ok())
        .sum()
}

async fn node_names(client: &Client) -> std::collections::BTreeSet<String> {
    Api::<Node>::all(client.clone())
        .list(&ListParams::default())
        .await
        .expect("nodes")
        .items
        .into_iter()
        .filter_map(|n| n.metadata.name)
        .collect()
}

async fn settled(client: &Client, pods: usize) -> Result<Census, Census> {
    eventually(
        Duration::from_secs(60),
        || async { census(client, NS).await.expect("census") },
        |c| {
            c.pods_running == pods
                && c.pods_pending == 0
                && c.claims_without_node == 0
                && c.claims == c.nodes
        },
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pending_pods_become_nodeclaims_nodes_and_running_pods() {
    let (server, client, dir) = cluster("provision").await;
    let joiner = Joiner::start(&server, &dir, "joiner-a", &["--disable-leader-election"]);
    let sim = KubeSim::start(client.clone(), Duration::from_millis(500));
    sim.deploy(web(12, "700m"));
    let c = settled(&client, 12)
        .await
        .unwrap_or_else(|c| panic!("not settled: {c:?}\n{}", joiner.log()));
    assert!(c.nodes >= 1, "{c:?}");
    // every claim goes through Karpenter's lifecycle (Initialized may land a step after the pods bind)
    let true_conditions = |claim: &DynamicObject| -> Vec<String> {
        claim.data["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|c| c["status"] == "True")
            .filter_map(|c| c["type"].as_str().map(str::to_string))
            .collect()
    };
    let wanted = [
        "Launched",
        "Registered",
        "Initialized",
        "Ready",
        "Consolidatable",
    ];
    let lifecycle = eventually(
        Duration::from_secs(10),
        || async {
            nodeclaims(&client)
                .list(&ListParams::default())
                .await
                .unwrap()
                .items
        },
        |claims| {
            claims.iter().all(|c| {
                wanted
                    .iter()
                    .all(|w| true_conditions(c).iter().any(|t| t == w))
            })
        },
    )
    .await;
    let claims = lifecycle.unwrap_or_else(|cs| {
        panic!(
            "claims short of {wanted:?}: {:?}\n{}",
            cs.iter().map(true_conditions).collect::<Vec<_>>(),
            joiner.log()
        )
    });
    for claim in claims {
        assert_eq!(
            claim.metadata.finalizers.as_deref(),
            Some(&["karpenter.sh/termination".to_string()][..])
        );
        let reqs = claim.data["spec"]["requirements"].as_array().unwrap();
        assert!(reqs
            .iter()
            .any(|r| r["key"] == "node.kubernetes.io/instance-type" && r["operator"] == "In"));
    }
    for node in Api::<Node>::all(client.clone())
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
    {
        let labels = node.metadata.labels.clone().unwrap_or_default();
        assert_eq!(
            labels.get("karpenter.sh/nodepool").map(String::as_str),
            Some("default")
        );
        assert_eq!(
            labels.get("karpenter.sh/registered").map(String::as_str),
            Some("true")
        );
        assert_eq!(
            labels.get("karpenter.sh/initialized").map(String::as_str),
            Some("true")
        );
        let taints = node
            .spec
            .as_ref()
            .and_then(|s| s.taints.clone())
            .unwrap_or_default();
        assert!(
            !taints.iter().any(|t| t.key == "karpenter.sh/unregistered"),
            "{taints:?}"
        );
        assert!(node
            .metadata
            .finalizers
            .unwrap_or_default()
            .contains(&"karpenter.sh/termination".to_string()));
    }
    // the NodePool reports itself Ready with its nodes' capacity
    let pools: Api<DynamicObject> = Api::all_with(client.clone(), &karpenter_resource("NodePool"));
    let reported = eventually(
        Duration::from_secs(10),
        || async { pools.get("default").await.unwrap() },
        |p| p.data["status"]["resources"]["nodes"].as_str() == Some(c.nodes.to_string().as_str()),
    )
    .await;
    let pool =
        reported.unwrap_or_else(|p| panic!("nodepool status not reported: {:?}", p.data["status"]));
    let ready = |o: &DynamicObject, t: &str| {
        o.data["status"]["conditions"]
            .as_array()
            .is_some_and(|cs| cs.iter().any(|c| c["type"] == t && c["status"] == "True"))
    };
    for t in ["Ready", "NodeClassReady", "ValidationSucceeded"] {
        assert!(
            ready(&pool, t),
            "nodepool not {t}: {:?}",
            pool.data["status"]
        );
    }
    // pods were told where they were going
    let events: Api<k8s_openapi::api::events::v1::Event> = Api::namespaced(client.clone(), NS);
    let nominated = events
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .iter()
        .filter(|e| e.reason.as_deref() == Some("Nominated"))
        .count();
    assert!(nominated >= 1, "no Nominated event");
    assert!(
        joiner
            .metric("joiner_nodeclaims_created_total{reason=\"launched\"}")
            .await
            >= c.claims as f64
    );
    // every provisioning solve is counted, whatever its status label
    let metrics = joiner.metrics().await;
    let provisioning_solves = sum_of_samples(
        &metrics,
        "joiner_solver_solves_total{phase=\"provisioning\",",
    );
    assert!(
        provisioning_solves >= 1.0,
        "no provisioning solve counted:\n{metrics}"
    );
    sim.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scale_down_is_consolidated_and_drained_without_breaking_the_budget() {
    let (server, client, dir) = cluster("consolidate").await;
    set_weights(&client, json!({})).await;
    one_web_pod_down_at_a_time(&client).await;
    let mut joiner = Joiner::start(&server, &dir, "joiner-a", &["--disable-leader-election"]);
    let sim = KubeSim::start(client.clone(), Duration::from_millis(300));
    sim.deploy(web(16, "1500m"));
    let before = settled(&client, 16)
        .await
        .unwrap_or_else(|c| panic!("not settled: {c:?}\n{}", joiner.log()));
    let original = node_names(&client).await;
    let timeline = Timeline::start(&server);
    let invariants = Invariants::start(&server);
    sim.scale(NS, "web", 4);
    // from here on the budget allows one pod down at a time: never fewer than 3 running
    let fewest = std::sync::atomic::AtomicUsize::new(usize::MAX);
    let after = eventually(
        Duration::from_secs(90),
        || async {
            let c = census(&client, NS).await.expect("census");
            fewest.fetch_min(c.pods_running, std::sync::atomic::Ordering::Relaxed);
            (c, node_names(&client).await)
        },
        |(c, nodes)| {
            c.pods_running == 4
                && nodes.len() < original.len()
                && c.claims == c.nodes
                && c.pods_pending == 0
        },
    )
    .await
    .unwrap_or_else(|c| {
        panic!(
            "not consolidated: before {before:?}, now {c:?}\n{}",
            joiner.log()
        )
    });
    let fewest = fewest.into_inner();
    assert!(
        fewest >= 3,
        "running pods fell to {fewest}\n{}",
        joiner.log()
    );
    // the smaller fleet costs less: no more nodes than before, each replaced by a cheaper one
    assert!(after.0.nodes <= before.nodes, "{after:?}");
    // the counter is published at the end of the decision step that starts the command, so it is
    // read again until it shows the command, for up to 20 s
    let executed = "joiner_disruption_decisions_total{reason=\"executed\"}";
    let n = eventually(
        Duration::from_secs(20),
        || joiner.metric(executed),
        |n| *n >= 1.0,
    )
    .await
    .unwrap_or_else(|n| n);
    assert!(
        n >= 1.0,
        "{executed} = {n}, joiner exited: {}\n{}\n{}",
        joiner.exited(),
        joiner.metrics().await,
        joiner.log()
    );
    // from the change feed: no node went before its replacements were Ready, none with pods on it,
    // and the budget held counting only pods on nodes that still exist
    assert_eq!(
        timeline.violations(),
        Vec::<String>::new(),
        "\n{}",
        joiner.log()
    );
    // the nodes the scale-down leaves go, emptied or replaced, depending on where the four pods
    // are left (a node holding them that is already the cheapest fit stays)
    assert!(
        timeline.disrupted_deletions() >= 1,
        "no node was disrupted ({} replaced)",
        timeline.replaced_deletions()
    );
    assert_eq!(invariants.violations(), Vec::<String>::new());
    sim.stop().await;
}

/// Writes the cost weights: `data` over weights with which every saving pays for its evictions
/// within the hour (podEviction and nodeDisruption as small as they were before the payback rule),
/// so that these tests, which are about the drain, see a scale-down consolidated by replacement.
async fn set_weights(client: &Client, data: serde_json::Value) {
    let mut all = json!({"podEviction": "0.0005", "nodeDisruption": "0.001", "paybackHours": "1"});
    if let (Some(a), Some(d)) = (all.as_object_mut(), data.as_object()) {
        a.extend(d.clone());
    }
    joinerproc::weights_for_a_seconds_clock(client, all).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cost_weight_change_applies_without_restart_and_a_bad_one_keeps_the_last_good() {
    let (server, client, dir) = cluster("weights").await;
    // consolidation is worth nothing below $1000/h of savings: nothing will be consolidated
    set_weights(&client, json!({"minSavings": "1000"})).await;
    let joiner = Joiner::start(&server, &dir, "joiner-a", &["--disable-leader-election"]);
    let sim = KubeSim::start(client.clone(), Duration::from_millis(300));
    sim.deploy(web(12, "1500m"));
    settled(&client, 12)
        .await
        .unwrap_or_else(|c| panic!("not settled: {c:?}\n{}", joiner.log()));
    let original = node_names(&client).await;
    sim.scale(NS, "web", 2);
    tokio::time::sleep(Duration::from_secs(8)).await;
    // a node the scale-down emptied may go (emptiness is not subject to minSavings); nothing is
    // replaced and no node that holds a pod goes
    let kept = node_names(&client).await;
    let holding = nodes_with_pods(&client).await;
    assert!(
        kept.is_subset(&original) && holding.is_subset(&kept) && !holding.is_empty(),
        "consolidated although minSavings forbids it: {kept:?} of {original:?}, pods on {holding:?}"
    );
    // an invalid value: the last good weights (minSavings 1000) stay, and joiner says so
    set_weights(&client, json!({"minSavings": "lots"})).await;
    let flagged = eventually(
        Duration::from_secs(20),
        || async { joiner.metric("joiner_config_invalid").await },
        |v| *v == 1.0,
    )
    .await;
    assert!(
        flagged.is_ok(),
        "invalid configmap not reported\n{}",
        joiner.log()
    );
    assert_eq!(node_names(&client).await, kept);
    let events: Api<k8s_openapi::api::events::v1::Event> =
        Api::namespaced(client.clone(), SYSTEM_NS);
    assert!(events
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .iter()
        .any(|e| e.reason.as_deref() == Some("InvalidCostWeights")));
    // a good value again: consolidation goes ahead, no restart
    set_weights(&client, json!({"minSavings": "0.01"})).await;
    let after = eventually(
        Duration::from_secs(60),
        || async {
            (
                census(&client, NS).await.unwrap(),
                node_names(&client).await,
            )
        },
        |(c, n)| n.is_disjoint(&original) && c.pods_running == 2,
    )
    .await;
    assert!(
        after.is_ok(),
        "not consolidated after the weights changed: {:?}\n{}",
        after,
        joiner.log()
    );
    assert_eq!(joiner.metric("joiner_config_invalid").await, 0.0);
    sim.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_standby_acts_on_nothing_until_the_leaders_lease_expires() {
    let (server, client, dir) = cluster("leader").await;
    let mut a = Joiner::start(&server, &dir, "joiner-a", &[]);
    let leader = eventually(
        Duration::from_secs(20),
        || async { a.metric("joiner_leader").await },
        |v| *v == 1.0,
    )
    .await;
    assert!(leader.is_ok(), "first replica never led\n{}", a.log());
    let b = Joiner::start(&server, &dir, "joiner-b", &[]);
    let sim = KubeSim::start(client.clone(), Duration::from_millis(300));
    sim.deploy(web(6, "1"));
    settled(&client, 6)
        .await
        .unwrap_or_else(|c| panic!("not settled: {c:?}\n{}", a.log()));
    // the standby serves metrics but created nothing and holds nothing
    assert_eq!(b.metric("joiner_leader").await, 0.0);
    assert_eq!(
        b.metric("joiner_nodeclaims_created_total{reason=\"launched\"}")
            .await,
        0.0
    );
    assert!(!b.metrics().await.is_empty(), "standby not serving");
    // the leader dies without releasing its Lease; the standby takes over once it expires
    a.kill();
    let took_over = eventually(
        Duration::from_secs(20),
        || async { b.metric("joiner_leader").await },
        |v| *v == 1.0,
    )
    .await;
    assert!(took_over.is_ok(), "standby never took over\n{}", b.log());
    let lease: Api<k8s_openapi::api::coordination::v1::Lease> =
        Api::namespaced(client.clone(), SYSTEM_NS);
    let l = lease.get("joiner-leader-election").await.unwrap();
    assert_eq!(
        l.spec.as_ref().and_then(|s| s.holder_identity.as_deref()),
        Some("joiner-b")
    );
    assert!(
        l.spec
            .as_ref()
            .and_then(|s| s.lease_transitions)
            .unwrap_or(0)
            >= 1
    );
    sim.scale(NS, "web", 12);
    settled(&client, 12)
        .await
        .unwrap_or_else(|c| panic!("new leader did not provision: {c:?}\n{}", b.log()));
    assert!(
        b.metric("joiner_nodeclaims_created_total{reason=\"launched\"}")
            .await
            >= 1.0
    );
    sim.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropped_watches_conflicts_and_server_errors_neither_lose_nor_duplicate_capacity() {
    let (server, client, dir) = cluster("faults").await;
    let server = std::sync::Arc::new(server);
    // no disruption: a duplicated launch would stay as an empty node for the test to see
    let joiner = Joiner::start(
        &server,
        &dir,
        "joiner-a",
        &["--disable-leader-election", "--disable-disruption"],
    );
    server.fail_next(RequestMatch::new("POST", "nodeclaims"), 2, 500);
    server.fail_next(RequestMatch::new("PATCH", "nodeclaims"), 3, 409);
    server.fail_next(RequestMatch::new("PATCH", "nodes"), 2, 500);
    let sim = KubeSim::start(client.clone(), Duration::from_millis(300));
    sim.deploy(web(10, "1"));
    let chaos = {
        let server = server.clone();
        tokio::spawn(async move {
            for i in 0..12 {
                tokio::time::sleep(Duration::from_millis(1500)).await;
                if i % 4 == 3 {
                    server.compact();
                }
                server.drop_watches();
            }
        })
    };
    let c = settled(&client, 10)
        .await
        .unwrap_or_else(|c| panic!("not settled: {c:?}\n{}", joiner.log()));
    chaos.await.unwrap();
    // settle again after the last dropped watch, then check nothing is wasted
    tokio::time::sleep(Duration::from_secs(3)).await;
    let after = census(&client, NS).await.unwrap();
    assert_eq!(after, c, "cluster changed after the faults stopped");
    let pods = Api::<Pod>::namespaced(client.clone(), NS)
        .list(&ListParams::default())
        .await
        .unwrap()
        .items;
    for node in Api::<Node>::all(client.clone())
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
    {
        let name = node.metadata.name.clone().unwrap();
        assert!(
            pods.iter()
                .any(|p| p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(&name)),
            "node {name} is empty: capacity was duplicated"
        );
    }
    assert!(
        server.count("POST", "nodeclaims") > c.claims,
        "the injected failures were not hit"
    );
    sim.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_node_is_drained_through_the_eviction_api_then_released() {
    let (server, client, dir) = cluster("terminate").await;
    let joiner = Joiner::start(
        &server,
        &dir,
        "joiner-a",
        &["--disable-leader-election", "--disable-disruption"],
    );
    let sim = KubeSim::start(client.clone(), Duration::from_millis(300));
    sim.deploy(web(6, "1"));
    settled(&client, 6)
        .await
        .unwrap_or_else(|c| panic!("not settled: {c:?}\n{}", joiner.log()));
    let original = node_names(&client).await;
    let victim = original.iter().next().unwrap().clone();
    let pods_on_victim = Api::<Pod>::namespaced(client.clone(), NS)
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .iter()
        .filter(|p| p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(&victim))
        .count();
    let invariants = Invariants::start(&server);
    // what `kubectl delete node` does: the finalizer keeps the node until joiner lets it go
    Api::<Node>::all(client.clone())
        .delete(&victim, &kube::api::DeleteParams::default())
        .await
        .unwrap();
    let done = eventually(
        Duration::from_secs(60),
        || async {
            (
                census(&client, NS).await.unwrap(),
                node_names(&client).await,
            )
        },
        |(c, nodes)| {
            !nodes.contains(&victim)
                && c.pods_running == 6
                && c.pods_pending == 0
                && c.claims == c.nodes
                && c.claims_without_node == 0
        },
    )
    .await;
    assert!(
        done.is_ok(),
        "not drained and released: {done:?}\n{}",
        joiner.log()
    );
    let evictions =
        server.request_count(&RequestMatch::new("POST", "pods").subresource("eviction"));
    assert!(
        evictions >= pods_on_victim,
        "{evictions} evictions for {pods_on_victim} pods"
    );
    assert!(
        joiner
            .metric("joiner_nodeclaims_terminated_total{reason=\"deleted\"}")
            .await
            >= 1.0
    );
    assert_eq!(invariants.violations(), Vec::<String>::new());
    assert!(invariants.nodes_removed() >= 1);
    sim.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_instance_that_never_registers_is_given_up_and_its_pods_solved_again() {
    let (server, client, dir) = cluster("registration").await;
    let joiner = Joiner::start(
        &server,
        &dir,
        "joiner-a",
        &[
            "--disable-leader-election",
            "--disable-disruption",
            "--registration-timeout",
            "3s",
        ],
    );
    let sim = KubeSim::start(client.clone(), Duration::from_millis(300));
    sim.never_boot(1);
    sim.deploy(web(4, "1"));
    let first = eventually(
        Duration::from_secs(20),
        || async {
            nodeclaims(&client)
                .list(&ListParams::default())
                .await
                .unwrap()
                .items
        },
        |cs| !cs.is_empty(),
    )
    .await;
    let first = first.unwrap_or_else(|_| panic!("no nodeclaim\n{}", joiner.log()))[0]
        .metadata
        .name
        .clone()
        .unwrap();
    let c = settled(&client, 4)
        .await
        .unwrap_or_else(|c| panic!("not settled: {c:?}\n{}", joiner.log()));
    let names: Vec<String> = nodeclaims(&client)
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|c| c.metadata.name)
        .collect();
    assert!(
        !names.contains(&first),
        "the claim that never registered is still there: {names:?}"
    );
    assert_eq!(c.claims, c.nodes);
    assert!(
        joiner
            .metric("joiner_nodeclaims_terminated_total{reason=\"registration-timeout\"}")
            .await
            >= 1.0,
        "{}",
        joiner.log()
    );
    assert!(
        joiner
            .metric("joiner_cloudprovider_duration_seconds_count{method=\"delete\"}")
            .await
            >= 1.0,
        "its instance was not terminated"
    );
    sim.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_solver_falls_back_to_karpenters_rules_and_says_so() {
    let (server, client, dir) = cluster("solver-fault").await;
    let joiner = Joiner::start(
        &server,
        &dir,
        "joiner-a",
        &[
            "--disable-leader-election",
            "--inject-solver-fault",
            "error",
        ],
    );
    let sim = KubeSim::start(client.clone(), Duration::from_millis(300));
    sim.deploy(web(16, "1500m"));
    let before = settled(&client, 16)
        .await
        .unwrap_or_else(|c| panic!("not settled: {c:?}\n{}", joiner.log()));
    let original = node_names(&client).await;
    let timeline = Timeline::start(&server);
    sim.scale(NS, "web", 4);
    // Karpenter's consolidation still runs: the scaled-down fleet is replaced or shrunk
    let after = eventually(
        Duration::from_secs(90),
        || async {
            (
                census(&client, NS).await.expect("census"),
                node_names(&client).await,
            )
        },
        |(c, nodes)| {
            c.pods_running == 4
                && c.pods_pending == 0
                && c.claims == c.nodes
                && nodes.is_disjoint(&original)
        },
    )
    .await
    .unwrap_or_else(|c| {
        panic!(
            "not consolidated: before {before:?}, now {c:?}\n{}",
            joiner.log()
        )
    });
    assert!(after.0.nodes <= before.nodes, "{after:?}");
    assert_eq!(
        timeline.violations(),
        Vec::<String>::new(),
        "\n{}",
        joiner.log()
    );
    for phase in [
        "provisioning\",status=\"fallback-greedy",
        "disruption\",status=\"fallback-baseline",
    ] {
        let solves = joiner
            .metric(&format!("joiner_solver_solves_total{{phase=\"{phase}\"}}"))
            .await;
        assert!(
            solves >= 1.0,
            "no {phase} solves counted\n{}",
            joiner.metrics().await
        );
    }
    assert_eq!(
        joiner
            .metric("joiner_solver_solves_total{phase=\"provisioning\",status=\"time-limit\"}")
            .await,
        0.0
    );
    // a Warning Event on the NodePool says which decision fell back and why
    let events: Api<k8s_openapi::api::events::v1::Event> = Api::all(client.clone());
    let fallbacks: Vec<_> = events
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some("SolverFallback"))
        .collect();
    let about = |phase: &str| {
        fallbacks.iter().any(|e| {
            e.regarding.as_ref().and_then(|r| r.kind.as_deref()) == Some("NodePool")
                && e.type_.as_deref() == Some("Warning")
                && e.note
                    .as_deref()
                    .is_some_and(|n| n.starts_with(phase) && n.contains("highs error"))
        })
    };
    assert!(
        about("provisioning") && about("disruption"),
        "{fallbacks:?}"
    );
    sim.stop().await;
}

/// Whether a node carries the `karpenter.sh/disrupted` taint a disruption command puts on.
fn disrupted(node: &Node) -> bool {
    node.spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .is_some_and(|ts| ts.iter().any(|t| t.key == "karpenter.sh/disrupted"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_killed_mid_disruption_leaves_nothing_cordoned_lost_or_leaked() {
    let (server, client, dir) = cluster("leader-disruption").await;
    one_web_pod_down_at_a_time(&client).await;
    let mut a = Joiner::start(&server, &dir, "joiner-a", &[]);
    eventually(
        Duration::from_secs(20),
        || async { a.metric("joiner_leader").await },
        |v| *v == 1.0,
    )
    .await
    .unwrap_or_else(|_| panic!("no leader\n{}", a.log()));
    let b = Joiner::start(&server, &dir, "joiner-b", &[]);
    let sim = KubeSim::start(client.clone(), Duration::from_millis(300));
    sim.deploy(web(16, "1500m"));
    settled(&client, 16)
        .await
        .unwrap_or_else(|c| panic!("not settled: {c:?}\n{}", a.log()));
    let original = node_names(&client).await;
    let timeline = Timeline::start(&server);
    let invariants = Invariants::start(&server);
    sim.scale(NS, "web", 4);
    // the leader dies once its disruption command has cordoned a node
    let nodes: Api<Node> = Api::all(client.clone());
    let cordoned = eventually(
        Duration::from_secs(60),
        || async {
            nodes
                .list(&ListParams::default())
                .await
                .unwrap()
                .items
                .iter()
                .filter(|n| disrupted(n))
                .count()
        },
        |n| *n > 0,
    )
    .await;
    cordoned.unwrap_or_else(|_| panic!("no disruption command started\n{}", a.log()));
    a.kill();
    // the standby takes over and finishes the job: no node left cordoned, every pod running, the
    // PodDisruptionBudget never broken, every claim with its node
    let fewest = std::sync::atomic::AtomicUsize::new(usize::MAX);
    eventually(
        Duration::from_secs(120),
        || async {
            let c = census(&client, NS).await.expect("census");
            fewest.fetch_min(c.pods_running, std::sync::atomic::Ordering::Relaxed);
            let all = nodes.list(&ListParams::default()).await.unwrap().items;
            (
                c,
                all.iter().filter(|n| disrupted(n)).count(),
                all.iter()
                    .filter_map(|n| n.metadata.name.clone())
                    .collect::<std::collections::BTreeSet<_>>(),
            )
        },
        // the standby decides afresh (the dead leader's taint is removed, its unrecorded replacement
        // given up): done once the big node is gone or the fleet is smaller
        |(c, cordoned, names)| {
            c.pods_running == 4
                && c.pods_pending == 0
                && c.claims == c.nodes
                && *cordoned == 0
                && (c.nodes < original.len() || names.is_disjoint(&original))
        },
    )
    .await
    .unwrap_or_else(|s| panic!("not finished after the takeover: {s:?}\n{}", b.log()));
    assert_eq!(b.metric("joiner_leader").await, 1.0);
    let fewest = fewest.into_inner();
    assert!(
        fewest >= 3,
        "running pods fell to {fewest}: the PodDisruptionBudget was broken\n{}",
        b.log()
    );
    // from the change feed, across both leaders: no node went before its replacements were
    // Ready, none with pods on it, and the budget held counting only pods on nodes still there
    assert_eq!(
        timeline.violations(),
        Vec::<String>::new(),
        "\n{}\n{}",
        a.log(),
        b.log()
    );
    assert_eq!(invariants.violations(), Vec::<String>::new());
    sim.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_server_timeouts_and_stalls_neither_lose_nor_duplicate_capacity() {
    let (server, client, dir) = cluster("timeouts").await;
    // the delays stay under joiner's `--api-timeout` (30 s): a request is answered late by
    // kube-apiserver's own request timeout, a 504 `Timeout` which kube retries three times.
    // Only joiner's requests (its kubeconfig's token) meet the faults, not the kubelet stand-ins'.
    let late = |delay_ms: u64, committed: bool| Injected::Timeout {
        delay: Duration::from_millis(delay_ms),
        committed,
    };
    // NodeClaim creates that take effect but whose answer is lost: kube's retry then finds the claim
    // already there (409)
    server.inject_next(
        RequestMatch::new("POST", "nodeclaims").by("joiner-a"),
        2,
        late(1500, true),
    );
    // launches recorded on the claim time out without effect, as do node registrations
    server.inject_next(
        RequestMatch::new("PATCH", "nodeclaims")
            .subresource("status")
            .by("joiner-a"),
        4,
        late(1500, false),
    );
    server.inject_next(
        RequestMatch::new("PATCH", "nodes").by("joiner-a"),
        4,
        late(1000, false),
    );
    // pod lists time out past kube's retries, and node and pod watches hang before their first event
    server.inject_next(
        RequestMatch::verb("list", "pods").by("joiner-a"),
        5,
        late(1000, false),
    );
    server.inject_next(
        RequestMatch::verb("watch", "nodes").by("joiner-a"),
        1,
        Injected::Stall(Duration::from_secs(4)),
    );
    server.inject_next(
        RequestMatch::verb("watch", "pods").by("joiner-a"),
        1,
        Injected::Stall(Duration::from_secs(4)),
    );
    let timeline = Timeline::start(&server);
    // no disruption: a duplicated launch would stay as an empty node for the test to see
    let joiner = Joiner::start(
        &server,
        &dir,
        "joiner-a",
        &["--disable-leader-election", "--disable-disruption"],
    );
    let sim = KubeSim::start(client.clone(), Duration::from_millis(300));
    sim.deploy(web(10, "1"));
    let c = settled(&client, 10)
        .await
        .unwrap_or_else(|c| panic!("not settled: {c:?}\n{}", joiner.log()));
    assert_eq!(
        server.faults_pending(),
        vec![],
        "not every injected fault was met"
    );
    // nothing changes once settled: no late duplicate launch, no claim given up later
    let quiet = eventually(
        Duration::from_secs(4),
        || async { census(&client, NS).await.unwrap() },
        |now| now != &c,
    )
    .await;
    assert!(
        quiet.is_err(),
        "cluster changed after it settled: {c:?} then {quiet:?}"
    );
    let pods = Api::<Pod>::namespaced(client.clone(), NS)
        .list(&ListParams::default())
        .await
        .unwrap()
        .items;
    for node in Api::<Node>::all(client.clone())
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
    {
        let name = node.metadata.name.clone().unwrap();
        assert!(
            pods.iter()
                .any(|p| p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(&name)),
            "node {name} is empty: capacity was duplicated"
        );
    }
    // the claims whose creation timed out were created all the same: none is left without a launch
    assert!(
        timeline.claims_created().len() > c.claims,
        "no claim creation was lost to a timeout: {:?}",
        timeline.claims_created()
    );
    assert_eq!(c.claims_without_node, 0);
    sim.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_never_answered_times_out_and_decisions_go_on() {
    let (server, client, dir) = cluster("hung").await;
    // the first NodeClaim create hangs: its answer would come ten minutes later, long after the test
    server.inject_next(
        RequestMatch::new("POST", "nodeclaims").by("joiner-a"),
        1,
        Injected::Stall(Duration::from_secs(600)),
    );
    let joiner = Joiner::start(
        &server,
        &dir,
        "joiner-a",
        &[
            "--disable-leader-election",
            "--disable-disruption",
            "--api-timeout",
            "2s",
        ],
    );
    let sim = KubeSim::start(client.clone(), Duration::from_millis(300));
    sim.deploy(web(4, "1"));
    // without the timeout the decision thread would wait on that answer and place nothing
    let c = settled(&client, 4)
        .await
        .unwrap_or_else(|c| panic!("not settled: {c:?}\n{}", joiner.log()));
    assert_eq!(
        server.faults_pending(),
        vec![],
        "the hung request was never made"
    );
    assert!(c.nodes >= 1, "{c:?}");
    sim.stop().await;
}

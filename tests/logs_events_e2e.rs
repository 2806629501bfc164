//! End to end: what `joiner controller` tells the people who run it. Its JSON log lines (every
//! stderr line an object, with the NodeClaim and disruption fields docs/logging.md lists) and the
//! Karpenter Events it publishes, driven against the in-process API server with the kubelet,
//! scheduler and ReplicaSet stand-ins of `support/kubesim.rs`. And that a bad `--log-level` is an
//! error naming it.

#[path = "support/apiserver/mod.rs"]
mod apiserver;
#[path = "support/joinerproc.rs"]
mod joinerproc;
#[path = "support/kubesim.rs"]
mod kubesim;

use std::collections::BTreeSet;
use std::time::Duration;

use joiner::k8s::caches::karpenter_resource;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::Client;
use serde_json::{json, Value};

use apiserver::ApiServer;
use joinerproc::{tempdir, Joiner, SYSTEM_NS};
use kubesim::{eventually, Deployment, KubeSim};

const NS: &str = "default";

/// A NodePool over the EC2NodeClass `install_nodepool` made.
async fn nodepool(client: &Client, name: &str, template: Value, disruption: Value) {
    let mut template = template;
    template["nodeClassRef"] =
        json!({"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"});
    let pool: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": name},
        "spec": {"template": {"spec": template}, "disruption": disruption},
    }))
    .expect("nodepool");
    Api::<DynamicObject>::all_with(client.clone(), &karpenter_resource("NodePool"))
        .create(&PostParams::default(), &pool)
        .await
        .expect("nodepool created");
}

/// Sets NodePool `default`'s template hash: claims launched under one hash drift under another.
async fn template_hash(client: &Client, hash: &str) {
    let patch = json!({"metadata": {"annotations": {"karpenter.sh/nodepool-hash": hash}}});
    Api::<DynamicObject>::all_with(client.clone(), &karpenter_resource("NodePool"))
        .patch("default", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("nodepool hash set");
}

async fn pod(client: &Client, manifest: Value) {
    let pod: Pod = serde_json::from_value(manifest).expect("pod");
    Api::<Pod>::namespaced(client.clone(), NS)
        .create(&PostParams::default(), &pod)
        .await
        .expect("pod created");
}

/// The cluster: NodePool `default` (general-purpose types, consolidation held off by an hour's
/// consolidateAfter, drift unbudgeted), `pinned` (tainted, for one do-not-disrupt pod, a budget
/// of zero nodes) and
/// `nowhere` (an instance type no catalog has); `web`'s PodDisruptionBudget lets two pods go at
/// once.
async fn cluster(client: &Client) {
    joinerproc::namespace(client, SYSTEM_NS).await;
    joinerproc::weights_for_a_seconds_clock(client, json!({})).await;
    joinerproc::install_nodepool(
        client,
        json!({"requirements": joinerproc::general_purpose(true)}),
        json!({"disruption": {"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "1h",
                              "budgets": [{"nodes": "100%"}]}}),
    )
    .await;
    template_hash(client, "1").await;
    let open = json!({"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "0s"});
    nodepool(
        client,
        "pinned",
        json!({"requirements": joinerproc::general_purpose(true),
               "taints": [{"key": "dedicated", "value": "pinned", "effect": "NoSchedule"}]}),
        json!({"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "0s",
               "budgets": [{"nodes": "0"}]}),
    )
    .await;
    nodepool(
        client,
        "nowhere",
        json!({"requirements": [{"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["z9.nonexistent"]}]}),
        open,
    )
    .await;
    let pdb: PodDisruptionBudget = serde_json::from_value(json!({
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "web", "namespace": NS},
        "spec": {"maxUnavailable": 2, "selector": {"matchLabels": {"app": "web"}}},
    }))
    .unwrap();
    Api::<PodDisruptionBudget>::namespaced(client.clone(), NS)
        .create(&PostParams::default(), &pdb)
        .await
        .unwrap();
    let small = json!({"requests": {"cpu": "250m", "memory": "256Mi"}});
    // do-not-disrupt, alone on a `pinned` node
    pod(client, json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "keeper", "namespace": NS, "annotations": {"karpenter.sh/do-not-disrupt": "true"}},
        "spec": {"nodeSelector": {"karpenter.sh/nodepool": "pinned"},
                 "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "pinned", "effect": "NoSchedule"}],
                 "containers": [{"name": "app", "image": "registry.k8s.io/pause:3.9", "resources": small}]},
    }))
    .await;
    // only `nowhere` may take it, and nothing fits `nowhere`
    pod(client, json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "lost", "namespace": NS},
        "spec": {"nodeSelector": {"karpenter.sh/nodepool": "nowhere"},
                 "containers": [{"name": "app", "image": "registry.k8s.io/pause:3.9", "resources": small}]},
    }))
    .await;
}

/// The Events published so far: (reason, type, kind of the object, its name).
async fn events(client: &Client) -> BTreeSet<(String, String, String, String)> {
    Api::<Event>::all(client.clone())
        .list(&ListParams::default())
        .await
        .expect("events")
        .items
        .into_iter()
        .map(|e| {
            let regarding = e.regarding.unwrap_or_default();
            (
                e.reason.unwrap_or_default(),
                e.type_.unwrap_or_default(),
                regarding.kind.unwrap_or_default(),
                regarding.name.unwrap_or_default(),
            )
        })
        .collect()
}

fn has(
    events: &BTreeSet<(String, String, String, String)>,
    reason: &str,
    type_: &str,
    kind: &str,
) -> bool {
    events
        .iter()
        .any(|(r, t, k, _)| r == reason && t == type_ && k == kind)
}

/// Every line of the log as JSON; a line that is not JSON fails the test.
fn json_lines(log: &str) -> Vec<Value> {
    log.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect()
}

/// The log lines whose message is `message`.
fn lines<'a>(all: &'a [Value], message: &str) -> Vec<&'a Value> {
    all.iter().filter(|l| l["message"] == message).collect()
}

fn assert_fields(line: &Value, strings: &[&str], numbers: &[&str]) {
    for k in strings {
        assert!(
            line[k].as_str().is_some_and(|s| !s.is_empty()),
            "no {k} in {line}"
        );
    }
    for k in numbers {
        assert!(line[k].is_number(), "{k} is not a number in {line}");
    }
    for k in ["timestamp", "target"] {
        assert!(line[k].is_string(), "no {k} in {line}");
    }
    assert_eq!(line["level"], "INFO", "{line}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_logs_and_karpenters_events_tell_what_the_controller_does() {
    let server = ApiServer::start().await;
    let client = server.client();
    let dir = tempdir::Dir::new("logs-events");
    cluster(&client).await;
    let joiner = Joiner::start(
        &server,
        &dir,
        "joiner-a",
        &["--disable-leader-election", "--log-format", "json"],
    );
    let sim = KubeSim::start(client.clone(), Duration::from_millis(300));
    sim.deploy(Deployment {
        namespace: NS.into(),
        name: "web".into(),
        replicas: 4,
        cpu: "1500m".into(),
        memory: "1Gi".into(),
    });
    // settled: the nodes the pods need are up; the disruption passes that follow find `keeper`'s
    // node blocked and `web`'s not yet consolidatable
    let before_drift = [
        ("NoCompatibleInstanceTypes", "Warning", "NodePool"),
        ("DisruptionBlocked", "Normal", "Node"),
        ("DisruptionBlocked", "Normal", "NodeClaim"),
        ("Unconsolidatable", "Normal", "Node"),
        ("Unconsolidatable", "Normal", "NodeClaim"),
        ("Nominated", "Normal", "Pod"),
        ("DisruptionBlocked", "Normal", "NodePool"),
    ];
    let seen = eventually(
        Duration::from_secs(40),
        || events(&client),
        |e| before_drift.iter().all(|(r, t, k)| has(e, r, t, k)),
    )
    .await
    .unwrap_or_else(|e| panic!("missing Events: {e:#?}\n{}", joiner.log()));
    assert!(
        seen.iter()
            .any(|(r, _, k, n)| r == "NoCompatibleInstanceTypes"
                && k == "NodePool"
                && n == "nowhere"),
        "{seen:#?}"
    );
    // the budget blocks `pinned`, never `default`, whose budget allows every node
    let pool_blocked = |name: &str| {
        seen.iter()
            .any(|(r, _, k, n)| r == "DisruptionBlocked" && k == "NodePool" && n == name)
    };
    assert!(
        pool_blocked("pinned") && !pool_blocked("default"),
        "{seen:#?}"
    );
    // `web`'s nodes drift: each is replaced, and drained two pods at a time
    template_hash(&client, "2").await;
    let drift = [
        ("DisruptionLaunching", "Normal", "NodeClaim"),
        ("DisruptionWaitingReadiness", "Normal", "NodeClaim"),
        ("DisruptionTerminating", "Normal", "Node"),
        ("DisruptionTerminating", "Normal", "NodeClaim"),
        ("FailedDraining", "Warning", "Node"),
    ];
    let log_done = |log: &str| log.contains("\"deleted nodeclaim\"");
    eventually(
        Duration::from_secs(40),
        || async { (events(&client).await, joiner.log()) },
        |(e, log)| drift.iter().all(|(r, t, k)| has(e, r, t, k)) && log_done(log),
    )
    .await
    .unwrap_or_else(|(e, log)| panic!("missing Events or deletion: {e:#?}\n{log}"));
    sim.stop().await;
    let all = json_lines(&joiner.log());
    let strings = [
        "nodeclaim",
        "nodepool",
        "instance_type",
        "zone",
        "capacity_type",
    ];
    let created = lines(&all, "created nodeclaim");
    assert!(created.len() >= 3, "{created:#?}");
    for l in &created {
        assert_fields(l, &strings, &["price_per_hour", "pods"]);
    }
    let launched = lines(&all, "launched nodeclaim");
    assert!(launched.len() >= 3, "{launched:#?}");
    for l in &launched {
        assert_fields(
            l,
            &[&strings[..], &["instance"]].concat(),
            &["price_per_hour"],
        );
    }
    for (message, fields) in [
        ("registered nodeclaim", &["nodeclaim", "node"][..]),
        (
            "initialized nodeclaim",
            &["nodeclaim", "node", "provider_id"],
        ),
        ("deleted nodeclaim", &["nodeclaim"]),
    ] {
        let found = lines(&all, message);
        assert!(!found.is_empty(), "no {message:?} line");
        for l in found {
            assert_fields(l, fields, &[]);
        }
    }
    let commands = lines(&all, "disrupting nodes");
    let drifted = commands
        .iter()
        .find(|l| l["reason"] == "Drifted")
        .unwrap_or_else(|| panic!("no drift command logged: {commands:#?}"));
    assert_fields(
        drifted,
        &["reason", "nodes", "replacements", "status"],
        &[
            "node_count",
            "savings_per_hour",
            "cost_before_per_hour",
            "cost_after_per_hour",
            "evictions",
        ],
    );
    assert!(drifted["evictions"].as_u64() >= Some(1), "{drifted}");
}

#[test]
fn a_log_level_that_does_not_parse_is_an_error_naming_it() {
    for (bad, named) in [
        ("verbose", "verbose"),
        ("info,joiner=loud", "info,joiner=loud"),
    ] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_joiner"))
            .args(["--log-level", bad, "crds"])
            .output()
            .expect("joiner runs");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{bad}: {stderr}");
        assert!(
            stderr.contains("--log-level") && stderr.contains(named),
            "{bad}: {stderr}"
        );
    }
    // and from the environment, as the chart sets it
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_joiner"))
        .arg("crds")
        .env("JOINER_LOG", "infoo")
        .output()
        .expect("joiner runs");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("infoo"));
}

//! The Kubernetes adapter's write gate: a [`KubeCluster`] whose leadership token lapsed sends no
//! write to the API server (no NodeClaim created or deleted, no taint, no eviction, no Node
//! deleted, no status, no Event), while the same calls with a live token do write. Run against
//! the in-process API server, which logs every request it serves.

#[path = "support/apiserver/mod.rs"]
mod apiserver;

use joiner::catalog::Catalog;
use joiner::controller::{Cluster, LeaderToken};
use joiner::k8s::caches::Caches;
use joiner::k8s::cluster::KubeCluster;
use kube::runtime::events::{Recorder, Reporter};
use serde_json::json;

use apiserver::ApiServer;

const NS: &str = "default";

fn seed(server: &ApiServer) {
    for name in ["node-a", "node-b"] {
        server
            .create(json!({
                "apiVersion": "v1", "kind": "Node",
                "metadata": {"name": name, "finalizers": ["karpenter.sh/termination"],
                             "labels": {"karpenter.sh/nodepool": "default"}},
                "spec": {"providerID": format!("aws:///us-east-1a/i-{name}")},
            }))
            .expect("node");
        server
            .create(json!({
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": format!("pod-{name}"), "namespace": NS},
                "spec": {"nodeName": name, "containers": [{"name": "c", "image": "x"}]},
            }))
            .expect("pod");
    }
    server
        .create(json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
            "metadata": {"name": "claim-a", "finalizers": ["karpenter.sh/termination"]},
            "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}},
        }))
        .expect("nodeclaim");
}

/// Requests that change something: everything but get, list and watch.
fn writes(server: &ApiServer) -> Vec<String> {
    server
        .requests()
        .into_iter()
        .filter(|r| !matches!(r.verb.as_str(), "get" | "list" | "watch"))
        .map(|r| format!("{} {} {:?} {:?}", r.verb, r.resource, r.subresource, r.name))
        .collect()
}

async fn cluster(server: &ApiServer, token: LeaderToken) -> KubeCluster {
    let (tx, _rx) = std::sync::mpsc::channel();
    let caches = Caches::start(&server.client(), NS, &tx);
    caches.wait_ready().await.expect("caches");
    let recorder = Recorder::new(
        server.client(),
        Reporter {
            controller: "joiner".into(),
            instance: None,
        },
    );
    let catalog = Catalog::bundled("us-east-1").expect("bundled catalog");
    KubeCluster::new(
        server.client(),
        server.client_without_retries(),
        tokio::runtime::Handle::current(),
        caches,
        catalog,
        recorder,
        7,
    )
    .with_leader_token(token)
}

/// Every write path of the adapter, from the decision thread's side (off the runtime: each
/// write blocks on it).
async fn act(mut c: KubeCluster) -> KubeCluster {
    tokio::task::spawn_blocking(move || {
        let (snapshot, _) = joiner::k8s::snapshot::build(c.caches());
        c.refresh(snapshot, chrono::Utc::now());
        c.set_disrupted("node-a", true);
        let _ = c.evict("default/pod-node-a");
        c.unschedulable("default/pod-node-b", "no offering");
        c.delete_claim("claim-a");
        c.delete_node("node-b");
        c
    })
    .await
    .expect("decision side")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lapsed_token_sends_no_write_and_a_live_one_does() {
    let server = ApiServer::start().await;
    seed(&server);

    let token = LeaderToken::always();
    let deposed = cluster(&server, token.clone()).await;
    token.revoke();
    server.reset_requests();
    let deposed = act(deposed).await;
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    let sent = writes(&server);
    println!(
        "lapsed token: {} writes sent, {} refused",
        sent.len(),
        deposed.writes.not_leader
    );
    assert!(sent.is_empty(), "a deposed replica wrote: {sent:?}");
    assert!(deposed.writes.not_leader >= 4, "{:?}", deposed.writes);
    assert!(server.get("nodes", None, "node-b").is_ok());
    assert!(server.get("pods", Some(NS), "pod-node-a").is_ok());

    let live = cluster(&server, LeaderToken::always()).await;
    server.reset_requests();
    let live = act(live).await;
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    let sent = writes(&server);
    println!("live token: {} writes sent: {sent:?}", sent.len());
    assert_eq!(live.writes.not_leader, 0);
    for (verb, resource) in [
        ("patch", "nodes"),
        ("create", "pods"),
        ("delete", "nodeclaims.karpenter.sh"),
        ("delete", "nodes"),
    ] {
        assert!(
            sent.iter()
                .any(|w| w.starts_with(&format!("{verb} {resource} "))),
            "no {verb} {resource} with a live token: {sent:?}"
        );
    }
}

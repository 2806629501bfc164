//! End to end: a disruption command whose replacement never initializes is rolled back at its
//! deadline (`--disruption-command-timeout`, Karpenter's orchestration timeout), against the
//! in-process API server and the kubelet/scheduler stand-ins of `support/kubesim.rs`. The node
//! goes back into service, the replacement that never came up is deleted, a Warning Event and the
//! `timed-out` decision count say so, and disruption then goes on: the drifted node is replaced by
//! one that boots.

#[path = "support/apiserver/mod.rs"]
mod apiserver;
#[path = "support/invariants.rs"]
mod invariants;
#[path = "support/joinerproc.rs"]
mod joinerproc;
#[path = "support/kubesim.rs"]
mod kubesim;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, ListParams, Patch, PatchParams};
use kube::Client;
use serde_json::{json, Value};
use tokio::sync::broadcast::error::RecvError;

use apiserver::{ApiServer, ChangeKind};
use invariants::Invariants;
use joinerproc::{tempdir, Joiner, SYSTEM_NS};
use kubesim::{census, eventually, nodeclaims, Deployment, KubeSim};

const NS: &str = "default";
const DISRUPTED: &str = "karpenter.sh/disrupted";

async fn cluster(name: &str) -> (ApiServer, Client, tempdir::Dir) {
    let server = ApiServer::start().await;
    let client = server.client();
    joinerproc::namespace(&client, SYSTEM_NS).await;
    joinerproc::weights_for_a_seconds_clock(&client, json!({})).await;
    joinerproc::install_nodepool(
        &client,
        json!({"requirements": joinerproc::general_purpose(false)}),
        json!({}),
    )
    .await;
    (server, client, tempdir::Dir::new(name))
}

/// What the change feed showed of the drifted node and the claims created meanwhile.
#[derive(Debug, Default, Clone)]
struct Seen {
    /// Times the node's disrupted taint went off while the node stayed.
    untainted: usize,
    /// rv of the node's deletion.
    node_deleted: Option<u64>,
    /// Claims created while recording: providerID once launched, whether a Node with it ever
    /// appeared, rv of the claim's deletion.
    claims: BTreeMap<String, (Option<String>, bool, Option<u64>)>,
}

fn tainted(o: &Value) -> bool {
    o["spec"]["taints"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|t| t["key"] == DISRUPTED)
}

fn record(server: &ApiServer, node: &str) -> (Arc<Mutex<Seen>>, tokio::task::JoinHandle<()>) {
    let mut feed = server.subscribe();
    let seen = Arc::new(Mutex::new(Seen::default()));
    let (s, node) = (seen.clone(), node.to_string());
    let task = tokio::spawn(async move {
        loop {
            let c = match feed.recv().await {
                Ok(c) => c,
                Err(RecvError::Lagged(n)) => panic!("the recorder missed {n} changes"),
                Err(RecvError::Closed) => return,
            };
            let o = &c.object;
            let name = o["metadata"]["name"].as_str().unwrap_or_default();
            let mut s = s.lock().unwrap();
            match (c.resource.plural, c.kind) {
                ("nodes", ChangeKind::Deleted) if name == node => s.node_deleted = Some(c.rv),
                ("nodes", ChangeKind::Modified) if name == node => {
                    let before = c.old.as_ref().is_some_and(tainted);
                    if before && !tainted(o) && o["metadata"]["deletionTimestamp"].is_null() {
                        s.untainted += 1;
                    }
                }
                ("nodes", _) => {
                    let pid = o["spec"]["providerID"].as_str().map(str::to_string);
                    for claim in s.claims.values_mut() {
                        if pid.is_some() && claim.0 == pid {
                            claim.1 = true;
                        }
                    }
                }
                ("nodeclaims", kind) => {
                    let pid = o["status"]["providerID"].as_str().map(str::to_string);
                    if kind == ChangeKind::Added {
                        s.claims.insert(name.to_string(), Default::default());
                    }
                    // claims that existed before the recording are not followed
                    let Some(entry) = s.claims.get_mut(name) else {
                        continue;
                    };
                    if pid.is_some() {
                        entry.0 = pid;
                    }
                    if kind == ChangeKind::Deleted {
                        entry.2 = Some(c.rv);
                    }
                }
                _ => {}
            }
        }
    });
    (seen, task)
}

/// Keeps the claim's `Drifted` condition True, as a cloud provider's drift check would (joiner's
/// own status writes may replace the condition list). Errors are left to the next call.
async fn keep_drifted(client: &Client, claim: &str) {
    let claims = nodeclaims(client);
    let Ok(Some(c)) = claims.get_opt(claim).await else {
        return;
    };
    let mut conditions: Vec<Value> = c.data["status"]["conditions"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    if conditions
        .iter()
        .any(|c| c["type"] == "Drifted" && c["status"] == "True")
    {
        return;
    }
    conditions.retain(|c| c["type"] != "Drifted");
    conditions.push(
        json!({"type": "Drifted", "status": "True", "reason": "AMIDrift",
        "message": "the node class's AMI changed", "lastTransitionTime": "2026-01-01T00:00:00Z"}),
    );
    let patch = json!({"status": {"conditions": conditions}});
    let _ = claims
        .patch_status(claim, &PatchParams::default(), &Patch::Merge(&patch))
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_whose_replacement_never_initializes_is_rolled_back_and_disruption_goes_on() {
    let (server, client, dir) = cluster("command-timeout").await;
    let joiner = Joiner::start(
        &server,
        &dir,
        "joiner-a",
        &[
            "--disable-leader-election",
            "--disruption-command-timeout",
            "8s",
        ],
    );
    let sim = KubeSim::start(client.clone(), Duration::from_millis(300));
    sim.deploy(Deployment {
        namespace: NS.into(),
        name: "web".into(),
        replicas: 2,
        cpu: "1".into(),
        memory: "1Gi".into(),
    });
    eventually(
        Duration::from_secs(60),
        || async { census(&client, NS).await.unwrap() },
        |c| c.pods_running == 2 && c.pods_pending == 0 && c.claims == c.nodes && c.claims > 0,
    )
    .await
    .unwrap_or_else(|c| panic!("not settled: {c:?}\n{}", joiner.log()));
    let first = nodeclaims(&client)
        .list(&ListParams::default())
        .await
        .unwrap()
        .items[0]
        .clone();
    let claim = first.metadata.name.clone().unwrap();
    let node = first.data["status"]["nodeName"]
        .as_str()
        .unwrap()
        .to_string();
    let invariants = Invariants::start(&server);
    let (seen, recorder) = record(&server, &node);
    // the drift replacement's instance never registers a Node
    sim.never_boot(1);
    let timed_out = eventually(
        Duration::from_secs(60),
        || async {
            keep_drifted(&client, &claim).await;
            joiner
                .metric("joiner_disruption_decisions_total{reason=\"timed-out\"}")
                .await
        },
        |n| *n >= 1.0,
    )
    .await;
    timed_out.unwrap_or_else(|n| panic!("no command timed out ({n})\n{}", joiner.log()));
    // disruption goes on: the drifted node is replaced by one that boots
    let nodes: Api<Node> = Api::all(client.clone());
    let replaced = eventually(
        Duration::from_secs(60),
        || async {
            keep_drifted(&client, &claim).await;
            (
                nodes.get_opt(&node).await.unwrap().is_some(),
                census(&client, NS).await.unwrap(),
            )
        },
        |(present, c)| {
            !present
                && c.pods_running == 2
                && c.pods_pending == 0
                && c.claims == c.nodes
                && c.claims_without_node == 0
        },
    )
    .await;
    replaced.unwrap_or_else(|s| panic!("the drifted node stayed: {s:?}\n{}", joiner.log()));
    recorder.abort();
    let seen = seen.lock().unwrap().clone();
    println!("{seen:?}");
    let deleted = seen.node_deleted.expect("the node's deletion was seen");
    assert!(
        seen.untainted >= 1,
        "the rolled-back node went back into service before it was replaced: {seen:?}"
    );
    // the replacement that never registered is deleted, before the node it was to replace goes
    let never_up: Vec<_> = seen
        .claims
        .iter()
        .filter(|(_, (pid, registered, _))| pid.is_some() && !registered)
        .collect();
    assert_eq!(never_up.len(), 1, "{seen:?}");
    let (name, (_, _, gone)) = never_up[0];
    assert!(
        gone.is_some_and(|rv| rv < deleted),
        "replacement {name} not deleted by the rollback: {seen:?}"
    );
    let events: Api<k8s_openapi::api::events::v1::Event> = Api::all(client.clone());
    let warned = events
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .any(|e| {
            e.reason.as_deref() == Some("DisruptionTimedOut")
                && e.type_.as_deref() == Some("Warning")
                && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(node.as_str())
        });
    assert!(warned, "no DisruptionTimedOut Warning on {node}");
    assert_eq!(invariants.violations(), Vec::<String>::new());
    sim.stop().await;
}

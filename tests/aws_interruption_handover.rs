//! End to end on the AWS provider: a spot interruption survives the leader that acted on it. The
//! `joiner controller` binary runs with `--cloud-provider aws` and an interruption queue against
//! moto (EC2 and SQS), with the in-process API server and the kubelet/scheduler stand-ins of
//! `support/kubesim.rs`. The first leader records the interruption on the cluster (the NodeClaim
//! deleted), cordons and evicts, deletes the message and dies; the next leader keeps the node
//! cordoned (its stale-taint cleanup leaves a node whose termination is on record), finishes the
//! drain, terminates the instance and releases the Node only once EC2 reports the instance
//! shutting down or terminated.

#[path = "support/apiserver/mod.rs"]
mod apiserver;
#[path = "support/invariants.rs"]
mod invariants;
#[path = "support/joinerproc.rs"]
mod joinerproc;
#[path = "support/kubesim.rs"]
mod kubesim;
#[path = "support/moto.rs"]
mod moto;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use aws_sdk_ec2::types::InstanceStateName;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, ListParams};
use kube::Client;
use serde_json::{json, Value};
use tokio::sync::broadcast::error::RecvError;

use apiserver::{ApiServer, ChangeKind};
use invariants::Invariants;
use joinerproc::{tempdir, Joiner, SYSTEM_NS};
use kubesim::{census, eventually, nodeclaims, Deployment, KubeSim};
use moto::{Account, Moto};

const NS: &str = "default";
const REGION: &str = "us-east-1";
const QUEUE: &str = "joiner-handover";
const DISRUPTED: &str = "karpenter.sh/disrupted";

async fn install(client: &Client) {
    joinerproc::install_moto_nodepool(client, json!({})).await;
    joinerproc::namespace(client, SYSTEM_NS).await;
    joinerproc::weights_for_a_seconds_clock(client, json!({})).await;
}

/// A spot interruption warning for `instance`, as EventBridge delivers it to the queue.
fn spot_warning(instance: &str) -> String {
    json!({
        "version": "0", "id": format!("e2e-{instance}"), "detail-type": "EC2 Spot Instance Interruption Warning", "source": "aws.ec2",
        "account": "123456789012", "time": "2026-11-30T10:15:00Z", "region": REGION, "resources": [format!("arn:aws:ec2:{REGION}:123456789012:instance/{instance}")],
        "detail": {"instance-id": instance, "instance-action": "terminate"},
    })
    .to_string()
}

fn tainted(o: &Value) -> bool {
    o["spec"]["taints"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|t| t["key"] == DISRUPTED)
}

/// Counts the times `node`'s disrupted taint goes off while the node stays, from the change feed.
fn count_uncordons(server: &ApiServer, node: &str) -> Arc<Mutex<usize>> {
    let mut feed = server.subscribe();
    let count = Arc::new(Mutex::new(0));
    let (n, node) = (count.clone(), node.to_string());
    tokio::spawn(async move {
        loop {
            let c = match feed.recv().await {
                Ok(c) => c,
                // changes missed: nothing can be said, so the count fails the test
                Err(RecvError::Lagged(_)) => {
                    *n.lock().unwrap() += 1000;
                    continue;
                }
                Err(RecvError::Closed) => return,
            };
            let o = &c.object;
            if c.resource.plural == "nodes"
                && c.kind == ChangeKind::Modified
                && o["metadata"]["name"] == node.as_str()
                && c.old.as_ref().is_some_and(tainted)
                && !tainted(o)
            {
                *n.lock().unwrap() += 1;
            }
        }
    });
    count
}

async fn instance_state(ec2: &aws_sdk_ec2::Client, id: &str) -> Option<InstanceStateName> {
    let out = ec2
        .describe_instances()
        .instance_ids(id)
        .send()
        .await
        .ok()?;
    out.reservations()
        .first()?
        .instances()
        .first()?
        .state()?
        .name()
        .cloned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_leader_carries_on_an_interruption_the_dead_one_recorded() {
    let moto = Moto::start();
    let aws = moto.clients(REGION, "e2e");
    Account::create(&aws, "e2e").await;
    let queue = aws
        .sqs
        .create_queue()
        .queue_name(QUEUE)
        .send()
        .await
        .unwrap()
        .queue_url
        .unwrap();
    let server = ApiServer::start().await;
    let client = server.client();
    install(&client).await;
    let dir = tempdir::Dir::new("aws-interruption-handover");
    let args = joinerproc::aws_args(&moto.endpoint, &["--interruption-queue", QUEUE]);
    let mut first =
        Joiner::start_with_env(&server, &dir, "joiner-a", &args, &joinerproc::MOTO_CREDS);
    let sim = KubeSim::start(client.clone(), Duration::from_millis(500));
    sim.deploy(Deployment {
        namespace: NS.into(),
        name: "web".into(),
        replicas: 2,
        cpu: "700m".into(),
        memory: "1Gi".into(),
    });
    eventually(
        Duration::from_secs(90),
        || async { census(&client, NS).await.unwrap() },
        |c| c.pods_running == 2 && c.pods_pending == 0 && c.claims == c.nodes && c.claims > 0,
    )
    .await
    .unwrap_or_else(|c| panic!("not settled: {c:?}\n{}", first.log()));
    let claim = nodeclaims(&client)
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .find(|c| c.data["status"]["nodeName"].is_string())
        .unwrap();
    let node = claim.data["status"]["nodeName"]
        .as_str()
        .unwrap()
        .to_string();
    let instance = claim.data["status"]["providerID"]
        .as_str()
        .and_then(|p| p.rsplit('/').next())
        .unwrap()
        .to_string();
    // the drain outlasts the first leader: the pods take 20 s to shut down
    server.set_pod_shutdown(Duration::from_secs(20));
    let invariants = Invariants::start(&server);
    let uncordons = count_uncordons(&server, &node);
    aws.sqs
        .send_message()
        .queue_url(&queue)
        .message_body(spot_warning(&instance))
        .send()
        .await
        .unwrap();
    let nodes: Api<Node> = Api::all(client.clone());
    let acted = eventually(
        Duration::from_secs(30),
        || async {
            let n = nodes.get(&node).await.unwrap();
            let tainted = n
                .spec
                .and_then(|s| s.taints)
                .into_iter()
                .flatten()
                .any(|t| t.key == DISRUPTED);
            let depth = joiner::cloud::aws::interruption::approximate_depth(&aws, &queue)
                .await
                .unwrap();
            (tainted, depth)
        },
        |(tainted, depth)| *tainted && *depth == 0,
    )
    .await;
    acted.unwrap_or_else(|s| panic!("interruption not acted on: {s:?}\n{}", first.log()));
    let first_log = first.log();
    first.kill();
    let second = Joiner::start_with_env(&server, &dir, "joiner-b", &args, &joinerproc::MOTO_CREDS);
    // a few of the next leader's disruption passes (one a second), each one cleaning stale taints
    let leading = eventually(
        Duration::from_secs(30),
        || async { second.metric("joiner_leader").await },
        |v| *v == 1.0,
    )
    .await;
    leading.unwrap_or_else(|_| {
        panic!(
            "the next leader did not start
{}",
            second.log()
        )
    });
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert_eq!(
        *uncordons.lock().unwrap(),
        0,
        "the next leader uncordoned a node being reclaimed
{}",
        second.log()
    );
    // the next leader finishes the reclaim; EC2 says the instance is going before the Node goes
    let released_while_running = Arc::new(Mutex::new(false));
    let gone = eventually(
        Duration::from_secs(90),
        || async {
            let present = nodes.get_opt(&node).await.unwrap().is_some();
            let state = instance_state(&aws.ec2, &instance).await;
            if !present && state == Some(InstanceStateName::Running) {
                *released_while_running.lock().unwrap() = true;
            }
            (present, state, census(&client, NS).await.unwrap())
        },
        |(present, state, c)| {
            !present
                && matches!(
                    state,
                    Some(InstanceStateName::ShuttingDown | InstanceStateName::Terminated)
                )
                && c.pods_running == 2
                && c.pods_pending == 0
                && c.claims == c.nodes
        },
    )
    .await;
    gone.unwrap_or_else(|s| {
        panic!(
            "the interrupted node was not reclaimed: {s:?}\nfirst leader:\n{first_log}\nsecond:\n{}",
            second.log()
        )
    });
    assert!(
        !*released_while_running.lock().unwrap(),
        "the Node was released while its instance still ran"
    );
    assert_eq!(
        *uncordons.lock().unwrap(),
        0,
        "the next leader uncordoned a node being reclaimed\n{}",
        second.log()
    );
    let name = claim.metadata.name.clone().unwrap();
    assert!(nodeclaims(&client).get_opt(&name).await.unwrap().is_none());
    assert_eq!(invariants.violations(), Vec::<String>::new());
    sim.stop().await;
}

//! End to end on the AWS provider: an instance terminated behind joiner's back (in the console, a
//! spot reclaim whose notice never came) takes its NodeClaim and Node with it. The `joiner
//! controller` binary runs with `--cloud-provider aws` against moto, with the in-process API server
//! and the kubelet/scheduler stand-ins of `support/kubesim.rs`.

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

use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, ListParams};
use kube::Client;
use serde_json::json;

use apiserver::ApiServer;
use invariants::Invariants;
use joinerproc::{tempdir, Joiner, SYSTEM_NS};
use kubesim::{census, eventually, nodeclaims, Deployment, KubeSim};
use moto::{Account, Moto};

const NS: &str = "default";
const REGION: &str = "us-east-1";

async fn install(client: &Client) {
    joinerproc::install_moto_nodepool(client, json!({})).await;
    joinerproc::namespace(client, SYSTEM_NS).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_instance_terminated_behind_joiners_back_takes_its_nodeclaim_and_node_with_it() {
    let moto = Moto::start();
    let ec2 = moto.clients(REGION, "e2e");
    Account::create(&ec2, "e2e").await;
    let server = ApiServer::start().await;
    let client = server.client();
    install(&client).await;
    let dir = tempdir::Dir::new("aws-claim-gc");
    let args = joinerproc::aws_args(
        &moto.endpoint,
        &[
            "--disable-disruption",
            // the collector's wait, not what it checks: every 10 s instead of every 2 minutes
            "--instance-gc-interval",
            "10s",
        ],
    );
    let joiner =
        Joiner::start_with_env(&server, &dir, "joiner-aws", &args, &joinerproc::MOTO_CREDS);
    let sim = KubeSim::start(client.clone(), Duration::from_millis(500));
    sim.deploy(Deployment {
        namespace: NS.into(),
        name: "web".into(),
        replicas: 4,
        cpu: "700m".into(),
        memory: "1Gi".into(),
    });
    eventually(
        Duration::from_secs(90),
        || async { census(&client, NS).await.unwrap() },
        |c| c.pods_running == 4 && c.pods_pending == 0 && c.claims == c.nodes && c.claims > 0,
    )
    .await
    .unwrap_or_else(|c| panic!("not settled: {c:?}\n{}", joiner.log()));
    let claim = nodeclaims(&client)
        .list(&ListParams::default())
        .await
        .unwrap()
        .items[0]
        .clone();
    let name = claim.metadata.name.clone().unwrap();
    let node = claim.data["status"]["nodeName"]
        .as_str()
        .unwrap()
        .to_string();
    let instance = claim.data["status"]["providerID"]
        .as_str()
        .and_then(|p| p.rsplit('/').next())
        .unwrap()
        .to_string();
    let invariants = Invariants::start(&server);
    // terminated in the console: the instance and its kubelet are gone, no event says so
    ec2.ec2
        .terminate_instances()
        .instance_ids(&instance)
        .send()
        .await
        .unwrap();
    server.kill_kubelet(&node);
    let nodes: Api<Node> = Api::all(client.clone());
    // the collector runs every 10 s; then the node's pods' grace period runs out
    let gone = eventually(
        Duration::from_secs(120),
        || async {
            (
                nodeclaims(&client).get_opt(&name).await.unwrap().is_some(),
                nodes.get_opt(&node).await.unwrap().is_some(),
                census(&client, NS).await.unwrap(),
            )
        },
        |(claim, node, c)| {
            !claim && !node && c.pods_running == 4 && c.pods_pending == 0 && c.claims == c.nodes
        },
    )
    .await;
    gone.unwrap_or_else(|s| {
        panic!(
            "the claim of a terminated instance stayed: {s:?}\n{}",
            joiner.log()
        )
    });
    assert_eq!(invariants.violations(), Vec::<String>::new());
    sim.stop().await;
}

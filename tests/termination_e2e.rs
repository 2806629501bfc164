//! End to end: what happens after someone deletes a Node or a NodeClaim, against the API server's
//! DaemonSet controller, graceful pod termination and killable kubelets (`support/apiserver`),
//! with the kubelet, scheduler and ReplicaSet stand-ins of `support/kubesim.rs`; and, on the AWS
//! provider against moto behind the fault proxy, a termination EC2 refuses for a while.

#[path = "support/apiserver/mod.rs"]
mod apiserver;
#[path = "support/faultproxy.rs"]
mod faultproxy;
#[path = "support/invariants.rs"]
mod invariants;
#[path = "support/joinerproc.rs"]
mod joinerproc;
#[path = "support/kubesim.rs"]
mod kubesim;
#[path = "support/moto.rs"]
mod moto;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use aws_sdk_ec2::types::InstanceStateName;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::Client;
use serde_json::json;

use apiserver::ApiServer;
use invariants::Invariants;
use joinerproc::{tempdir, Joiner, SYSTEM_NS};
use kubesim::{census, eventually, nodeclaims, Census, Deployment, KubeSim};

const NS: &str = "default";
const AGENTS_NS: &str = "kube-system";
const FOREIGN_FINALIZER: &str = "example.com/keep";

async fn install_nodepool(client: &Client) {
    joinerproc::install_nodepool(
        client,
        json!({"requirements": joinerproc::general_purpose(false)}),
        json!({}),
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
    namespace(&client, AGENTS_NS).await;
    joinerproc::weights_for_a_seconds_clock(&client, json!({})).await;
    install_nodepool(&client).await;
    (server, client, tempdir::Dir::new(name))
}

fn web(replicas: usize) -> Deployment {
    Deployment {
        namespace: NS.into(),
        name: "web".into(),
        replicas,
        cpu: "1".into(),
        memory: "1Gi".into(),
    }
}

/// A node agent as most clusters run them (kube-proxy, a CNI, a log shipper): a DaemonSet with
/// only the tolerations the DaemonSet controller adds, and a short grace period.
async fn node_agent(client: &Client) {
    let ds: k8s_openapi::api::apps::v1::DaemonSet = serde_json::from_value(json!({
        "apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": {"name": "node-agent", "namespace": AGENTS_NS},
        "spec": {"selector": {"matchLabels": {"app": "node-agent"}},
                 "template": {"metadata": {"labels": {"app": "node-agent"}},
                              "spec": {"terminationGracePeriodSeconds": 2, "containers": [{"name": "agent", "image": "agent",
                                       "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}]}}},
    }))
    .unwrap();
    Api::namespaced(client.clone(), AGENTS_NS)
        .create(&PostParams::default(), &ds)
        .await
        .unwrap();
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

async fn node(client: &Client, name: &str) -> Option<Node> {
    Api::<Node>::all(client.clone())
        .get_opt(name)
        .await
        .unwrap()
}

async fn pods_on(client: &Client, ns: &str, node: &str) -> Vec<Pod> {
    Api::<Pod>::namespaced(client.clone(), ns)
        .list(&ListParams::default().fields(&format!("spec.nodeName={node}")))
        .await
        .unwrap()
        .items
}

/// Adds a finalizer another controller would own.
async fn add_foreign_finalizer(api: &Api<DynamicObject>, name: &str) {
    let patch: json_patch::Patch = serde_json::from_value(
        json!([{"op": "add", "path": "/metadata/finalizers/-", "value": FOREIGN_FINALIZER}]),
    )
    .unwrap();
    api.patch(name, &PatchParams::default(), &Patch::<()>::Json(patch))
        .await
        .unwrap();
}

fn finalizers(o: &DynamicObject) -> Vec<String> {
    o.metadata.finalizers.clone().unwrap_or_default()
}

fn node_api(client: &Client) -> Api<DynamicObject> {
    let ar = kube::api::ApiResource::erase::<Node>(&());
    Api::all_with(client.clone(), &ar)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn releasing_a_deleted_node_leaves_other_controllers_finalizers() {
    let (server, client, dir) = cluster("foreign-finalizer").await;
    let joiner = Joiner::start(
        &server,
        &dir,
        "joiner-a",
        &["--disable-leader-election", "--disable-disruption"],
    );
    let sim = KubeSim::start(client.clone(), Duration::from_millis(300));
    sim.deploy(web(2));
    settled(&client, 2)
        .await
        .unwrap_or_else(|c| panic!("not settled: {c:?}\n{}", joiner.log()));
    let claims = nodeclaims(&client);
    let claim = claims.list(&ListParams::default()).await.unwrap().items[0].clone();
    let claim_name = claim.metadata.name.clone().unwrap();
    let victim = claim.data["status"]["nodeName"]
        .as_str()
        .unwrap()
        .to_string();
    let nodes = node_api(&client);
    add_foreign_finalizer(&nodes, &victim).await;
    add_foreign_finalizer(&claims, &claim_name).await;
    let invariants = Invariants::start(&server);
    Api::<Node>::all(client.clone())
        .delete(&victim, &DeleteParams::default())
        .await
        .unwrap();
    // joiner drains the node and terminates its instance, then takes only its own finalizer off:
    // the other controller's still holds the node and the claim
    let released = eventually(
        Duration::from_secs(60),
        || async {
            (
                nodes.get_opt(&victim).await.unwrap(),
                claims.get_opt(&claim_name).await.unwrap(),
                census(&client, NS).await.unwrap(),
            )
        },
        |(n, c, census)| {
            let only_foreign = |o: &Option<DynamicObject>| {
                o.as_ref().is_some_and(|o| {
                    o.metadata.deletion_timestamp.is_some()
                        && finalizers(o) == [FOREIGN_FINALIZER.to_string()]
                })
            };
            only_foreign(n) && only_foreign(c) && census.pods_running == 2
        },
    )
    .await;
    let (n, c, census) = released.unwrap_or_else(|(n, c, census)| {
        panic!(
            "not released with the other finalizer kept: node {:?}, claim {:?}, {census:?}\n{}",
            n.map(|o| o.metadata),
            c.map(|o| o.metadata),
            joiner.log()
        )
    });
    assert!(n.is_some() && c.is_some(), "{census:?}");
    assert_eq!(invariants.violations(), Vec::<String>::new());
    assert!(
        joiner
            .metric("joiner_nodeclaims_terminated_total{reason=\"deleted\"}")
            .await
            >= 1.0,
        "{}",
        joiner.log()
    );
    sim.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_nodeclaim_drains_past_daemonsets_and_a_dead_kubelet_then_goes() {
    let (server, client, dir) = cluster("dead-kubelet").await;
    node_agent(&client).await;
    let joiner = Joiner::start(
        &server,
        &dir,
        "joiner-a",
        &["--disable-leader-election", "--disable-disruption"],
    );
    let sim = KubeSim::start(client.clone(), Duration::from_millis(300));
    sim.deploy(web(4));
    settled(&client, 4)
        .await
        .unwrap_or_else(|c| panic!("not settled: {c:?}\n{}", joiner.log()));
    let claims = nodeclaims(&client);
    let all = claims.list(&ListParams::default()).await.unwrap().items;
    // the claim whose node runs web pods
    let mut victim = None;
    for c in &all {
        let node = c.data["status"]["nodeName"].as_str().unwrap_or_default();
        if !pods_on(&client, NS, node).await.is_empty() {
            victim = Some((c.metadata.name.clone().unwrap(), node.to_string()));
        }
    }
    let (claim, victim) = victim.expect("a node runs web pods");
    let agents = eventually(
        Duration::from_secs(10),
        || async { pods_on(&client, AGENTS_NS, &victim).await.len() },
        |n| *n == 1,
    )
    .await;
    assert_eq!(agents, Ok(1), "the DaemonSet controller runs its pod there");
    let web_on_victim = pods_on(&client, NS, &victim).await.len();
    // the node's kubelet dies: its pods never finish terminating; then `kubectl delete nodeclaim`
    server.kill_kubelet(&victim);
    let invariants = Invariants::start(&server);
    let deleted_at = Instant::now();
    claims
        .delete(&claim, &DeleteParams::default())
        .await
        .unwrap();
    let gone = eventually(
        Duration::from_secs(120),
        || async {
            (
                node(&client, &victim).await.is_some(),
                claims.get_opt(&claim).await.unwrap().is_some(),
                census(&client, NS).await.unwrap(),
            )
        },
        |(node, claim, c)| {
            !node && !claim && c.pods_running == 4 && c.pods_pending == 0 && c.claims == c.nodes
        },
    )
    .await;
    let took = deleted_at.elapsed();
    let c = gone.unwrap_or_else(|s| panic!("not terminated: {s:?}\n{}", joiner.log()));
    // the web pods (30 s of grace, a dead kubelet) held the node for their whole grace period
    assert!(
        took >= Duration::from_secs(25),
        "the node went {took:?} after the delete, inside its {web_on_victim} pods' grace\n{}",
        joiner.log()
    );
    assert!(
        joiner
            .metric("joiner_nodeclaims_terminated_total{reason=\"deleted\"}")
            .await
            >= 1.0
    );
    let names: BTreeSet<String> = Api::<Node>::all(client.clone())
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|n| n.metadata.name)
        .collect();
    assert_eq!(names.len(), c.2.nodes, "{names:?}");
    assert_eq!(invariants.violations(), Vec::<String>::new());
    assert!(invariants.nodes_removed() >= 1);
    sim.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_consolidated_node_goes_only_once_its_evicted_pods_have_finished() {
    let (server, client, dir) = cluster("graceful-consolidation").await;
    // every pod takes a few seconds to stop (a preStop hook, connection draining)
    server.set_pod_shutdown(Duration::from_secs(4));
    let joiner = Joiner::start(&server, &dir, "joiner-a", &["--disable-leader-election"]);
    let sim = KubeSim::start(client.clone(), Duration::from_millis(300));
    sim.deploy(Deployment {
        cpu: "1500m".into(),
        ..web(16)
    });
    settled(&client, 16)
        .await
        .unwrap_or_else(|c| panic!("not settled: {c:?}\n{}", joiner.log()));
    let original: BTreeSet<String> = Api::<Node>::all(client.clone())
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|n| n.metadata.name)
        .collect();
    let invariants = Invariants::start(&server);
    sim.scale(NS, "web", 4);
    let after = eventually(
        Duration::from_secs(120),
        || async { census(&client, NS).await.unwrap() },
        |c| {
            c.pods_running == 4
                && c.pods_pending == 0
                && c.claims == c.nodes
                && c.nodes < original.len()
        },
    )
    .await;
    after.unwrap_or_else(|c| panic!("not consolidated: {c:?}\n{}", joiner.log()));
    assert!(invariants.nodes_removed() >= 1);
    assert_eq!(
        invariants.violations(),
        Vec::<String>::new(),
        "\n{}",
        joiner.log()
    );
    sim.stop().await;
}

/// The state moto reports for instance `id`, asked directly (not through the fault proxy).
async fn instance_state(ec2: &aws_sdk_ec2::Client, id: &str) -> Option<InstanceStateName> {
    let out = ec2
        .describe_instances()
        .instance_ids(id)
        .send()
        .await
        .ok()?;
    let instance = out.reservations().first()?.instances().first()?;
    instance.state()?.name().cloned()
}

/// TerminateInstances calls EC2 refuses after the NodeClaim's delete: the controller asks again
/// 1, 2 and 4 s after each refusal, so the refusals last about 7 s.
const REFUSALS: u32 = 3;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_nodeclaim_keeps_its_node_while_ec2_refuses_the_termination() {
    let moto = moto::Moto::start();
    let aws = moto.clients("us-east-1", "e2e");
    moto::Account::create(&aws, "e2e").await;
    let proxy = faultproxy::FaultProxy::start(&moto.endpoint).await;
    let server = ApiServer::start().await;
    let client = server.client();
    joinerproc::install_moto_nodepool(&client, json!({})).await;
    namespace(&client, SYSTEM_NS).await;
    joinerproc::weights_for_a_seconds_clock(&client, json!({})).await;
    let dir = tempdir::Dir::new("refused-termination");
    // one attempt per AWS call: every refusal reaches the controller
    let args = joinerproc::aws_args(&proxy.endpoint, &["--aws-max-attempts", "1"]);
    let joiner =
        Joiner::start_with_env(&server, &dir, "joiner-aws", &args, &joinerproc::MOTO_CREDS);
    let sim = KubeSim::start(client.clone(), Duration::from_millis(300));
    sim.deploy(web(1));
    settled(&client, 1)
        .await
        .unwrap_or_else(|c| panic!("not settled: {c:?}\n{}", joiner.log()));
    let claims = nodeclaims(&client);
    let claim = claims.list(&ListParams::default()).await.unwrap().items[0].clone();
    let name = claim.metadata.name.clone().unwrap();
    let victim = claim.data["status"]["nodeName"]
        .as_str()
        .unwrap()
        .to_string();
    let provider_id = claim.data["status"]["providerID"].as_str().unwrap();
    let instance = provider_id.rsplit('/').next().unwrap().to_string();
    proxy
        .faults()
        .fail
        .insert("TerminateInstances".into(), REFUSALS);
    let calls_before = proxy.calls("TerminateInstances");
    claims
        .delete(&name, &DeleteParams::default())
        .await
        .unwrap();
    // the Node first, then the instance: once terminated an instance never runs again, so a Node
    // seen gone before its instance is seen running was gone while the instance ran
    let mut released_while_running = vec![];
    let mut accepted_at = None;
    let deadline = Instant::now() + Duration::from_secs(30);
    let gone = loop {
        let present = node(&client, &victim).await.is_some();
        let claimed = claims.get_opt(&name).await.unwrap().is_some();
        let state = instance_state(&aws.ec2, &instance).await;
        let calls = proxy.calls("TerminateInstances") - calls_before;
        if !present && state == Some(InstanceStateName::Running) {
            released_while_running.push(calls);
        }
        if calls > REFUSALS && accepted_at.is_none() {
            accepted_at = Some(Instant::now());
        }
        if (!present && !claimed) || Instant::now() > deadline {
            break (present, claimed, state, calls);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let log = joiner.log();
    assert_eq!(
        released_while_running,
        Vec::<u32>::new(),
        "the Node was gone while EC2 reported its instance running (TerminateInstances calls at \
         each sample)\n{log}"
    );
    let (present, claimed, state, calls) = gone.clone();
    assert!(
        !present && !claimed,
        "the Node and NodeClaim stayed after EC2 accepted: {gone:?}\n{log}"
    );
    assert!(
        matches!(
            state,
            Some(InstanceStateName::ShuttingDown | InstanceStateName::Terminated)
        ),
        "{state:?}"
    );
    assert_eq!(
        calls,
        REFUSALS + 1,
        "asked again after every refusal, once accepted no more"
    );
    // each refusal is counted where the provider's errors are
    let refused = r#"joiner_cloudprovider_errors_total{method="delete",error="provider"}"#;
    assert_eq!(
        joiner.metric(refused).await,
        f64::from(REFUSALS),
        "{}",
        joiner.metrics().await
    );
    let accepted_at = accepted_at.expect("EC2 accepted a termination");
    assert!(
        accepted_at.elapsed() < Duration::from_secs(3),
        "the Node and NodeClaim went {:?} after EC2 accepted\n{log}",
        accepted_at.elapsed()
    );
    // the web pod moves to a new node
    settled(&client, 1)
        .await
        .unwrap_or_else(|c| panic!("not replaced: {c:?}\n{}", joiner.log()));
    sim.stop().await;
}

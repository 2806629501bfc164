//! The AWS background work against moto, behind the request-counting fault proxy:
//! - the drift scan asks DescribeInstances once for every 200 instances, not once an instance,
//!   and finds exactly the drifted ones;
//! - with a lapsed leadership token the garbage collector and the interruption queue's reader
//!   send nothing to AWS, while with a live one they do.

#[path = "support/apiserver/mod.rs"]
mod apiserver;
#[path = "support/faultproxy.rs"]
mod faultproxy;
#[path = "support/moto.rs"]
mod moto;

use aws_sdk_ec2::types::{InstanceType, ResourceType, Tag, TagSpecification};
use joiner::api::EC2NodeClass;
use joiner::catalog::Catalog;
use joiner::cloud::aws::{nodeclass, AwsClients, AwsCloud, NODECLASS_TAG};
use joiner::controller::LeaderToken;
use joiner::k8s::caches::Caches;
use joiner::operator::aws::{Collector, Reader};

use apiserver::ApiServer;
use faultproxy::FaultProxy;
use moto::{Account, Moto};

const REGION: &str = "us-east-1";
const CLUSTER: &str = "drift";

fn node_class() -> EC2NodeClass {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", "metadata": {"name": "default"},
        "spec": {
            "amiFamily": "AL2023", "instanceProfile": "KarpenterNodeInstanceProfile",
            "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": CLUSTER}}],
            "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "*"}}],
            "amiSelectorTerms": [{"ssmParameter": "/joiner/test/ami"}],
        }
    }))
    .expect("EC2NodeClass")
}

/// A provider on the proxy with the `default` node class resolved (it selects the x86 image).
async fn provider(moto: &Moto, endpoint: &str) -> (AwsCloud, Account) {
    let settings = moto.settings(REGION, CLUSTER);
    let clients = AwsClients::from_config(&Moto::sdk_config(endpoint, REGION), &settings);
    let acct = Account::create(&moto.clients(REGION, CLUSTER), CLUSTER).await;
    let resolution = nodeclass::resolve(&clients, &settings, &node_class(), "1.33").await;
    let cloud = AwsCloud::new(
        clients,
        settings,
        Catalog::bundled(REGION).expect("bundled catalog"),
        tokio::runtime::Handle::current(),
    );
    cloud.set_node_class("default", resolution.resolved);
    (cloud, acct)
}

/// Launches `count` m5.large of the `default` node class from `ami` into `subnet`, straight on
/// moto.
async fn run(c: &AwsClients, acct: &Account, subnet: &str, ami: &str, count: i32) -> Vec<String> {
    let tags = TagSpecification::builder()
        .resource_type(ResourceType::Instance)
        .tags(Tag::builder().key(NODECLASS_TAG).value("default").build())
        .build();
    let out = c
        .ec2
        .run_instances()
        .image_id(ami)
        .instance_type(InstanceType::M5Large)
        .subnet_id(subnet)
        .security_group_ids(&acct.group)
        .min_count(count)
        .max_count(count)
        .tag_specifications(tags)
        .send()
        .await
        .expect("RunInstances");
    out.instances()
        .iter()
        .filter_map(|i| i.instance_id().map(str::to_string))
        .collect()
}

fn total_calls(proxy: &FaultProxy) -> u32 {
    proxy.faults().calls.values().sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drift_scan_asks_once_for_every_200_instances() {
    let moto = Moto::start();
    let proxy = FaultProxy::start(&moto.endpoint).await;
    let (cloud, acct) = provider(&moto, &proxy.endpoint).await;
    let direct = moto.clients(REGION, CLUSTER);
    // each subnet is a /24: at most 251 instances in one
    let mut drifted = Vec::new();
    for _ in 0..2 {
        drifted.extend(run(&direct, &acct, &acct.subnet_a, &acct.ami_arm, 100).await);
    }
    let current = run(&direct, &acct, &acct.subnet_b, &acct.ami_x86, 201).await;
    let ids: Vec<String> = drifted.iter().chain(&current).cloned().collect();
    assert_eq!(ids.len(), 401);

    proxy.faults().calls.clear();
    let started = std::time::Instant::now();
    let found = cloud.drift_scan(&ids).await.expect("scan");
    let calls = proxy.calls("DescribeInstances");
    println!(
        "{} instances: {calls} DescribeInstances calls, {} drifted, {:?}",
        ids.len(),
        found.len(),
        started.elapsed()
    );
    assert_eq!(calls, 3, "ceil(401 / 200) calls, not one an instance");
    assert_eq!(found.len(), drifted.len(), "{found:?}");
    for id in &drifted {
        let why = found.get(id).expect("the old image drifted");
        assert!(why.starts_with("AMIDrift"), "{why}");
    }
    assert!(current.iter().all(|id| !found.contains_key(id)));
    // an id EC2 does not know is left out, without failing the batch
    let mut with_unknown = current[..3].to_vec();
    with_unknown.push("i-0123456789abcdef0".into());
    with_unknown.push(drifted[0].clone());
    let found = cloud.drift_scan(&with_unknown).await.expect("scan");
    assert_eq!(found.keys().collect::<Vec<_>>(), vec![&drifted[0]]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lapsed_token_keeps_the_collector_and_the_queue_reader_off_aws() {
    let moto = Moto::start();
    let proxy = FaultProxy::start(&moto.endpoint).await;
    let (cloud, _) = provider(&moto, &proxy.endpoint).await;
    let queue = moto
        .clients(REGION, CLUSTER)
        .sqs
        .create_queue()
        .queue_name("interruptions")
        .send()
        .await
        .expect("CreateQueue")
        .queue_url
        .expect("queue url");
    let server = ApiServer::start().await;
    let (tx, _rx) = std::sync::mpsc::channel();
    let caches = Caches::start(&server.client(), "default", &tx);
    caches.wait_ready().await.expect("caches");

    let token = LeaderToken::always();
    let collector = Collector {
        cloud: cloud.clone(),
        client: server.client(),
        caches: caches.clone(),
        token: token.clone(),
    };
    let reader = Reader {
        cloud: cloud.clone(),
        client: server.client(),
        caches: caches.clone(),
        token: token.clone(),
        metrics: std::sync::Arc::new(joiner::operator::metrics::Metrics::new()),
    };
    token.revoke();
    proxy.faults().calls.clear();
    collector.pass().await;
    reader.delete_message(&queue, "receipt-1").await;
    let lapsed = total_calls(&proxy);
    println!("lapsed token: {lapsed} AWS calls");
    assert_eq!(lapsed, 0, "{:?}", proxy.faults().calls);

    let live = LeaderToken::always();
    let collector = Collector {
        token: live.clone(),
        ..collector
    };
    let reader = Reader {
        token: live,
        ..reader
    };
    collector.pass().await;
    reader.delete_message(&queue, "receipt-1").await;
    let calls = proxy.faults().calls.clone();
    println!("live token: {calls:?}");
    assert!(calls.get("DescribeInstances").copied().unwrap_or(0) >= 1);
    assert!(
        calls.keys().any(|a| a.ends_with("DeleteMessage")),
        "{calls:?}"
    );
}

//! What the AWS provider's calls cost, measured against moto (started here, as in the tests) in the
//! same run as their baselines:
//!
//! - `launch/template-cached` (the steady state: one CreateFleet, one DescribeInstances) against
//!   `launch/template-lookup` (the first launch of a process: the template is looked up by name
//!   first), each followed by the instance's termination;
//! - `catalog/discover` (DescribeInstanceTypes, offerings, zones and spot prices from moto, turned
//!   into a catalog) against `catalog/bundled` (parsing the bundled JSON).
//!
//! moto answers on loopback with none of EC2's latency, so the ratios bound joiner's own share of
//! a call, not EC2's.

#[path = "../tests/support/moto.rs"]
mod moto;

use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion};
use joiner::catalog::{CapacityType, Catalog};
use joiner::cloud::aws::{discovery, nodeclass, AwsClients, AwsCloud};
use joiner::cloud::{CloudProvider, LaunchRequest, NodeTemplate};
use joiner::optimizer::OfferingRef;
use moto::{Account, Moto};

const REGION: &str = "us-east-1";

fn request() -> LaunchRequest {
    let offering = OfferingRef {
        instance_type: "m5.large".into(),
        zone: "us-east-1a".into(),
        capacity_type: CapacityType::OnDemand,
        price: 0.096,
    };
    LaunchRequest {
        claim: "bench-claim".into(),
        nodepool: "bench".into(),
        offerings: vec![offering],
        template: NodeTemplate {
            node_class: Some("default".into()),
            ..Default::default()
        },
    }
}

fn benches(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let moto = Moto::start();
    let settings = moto.settings(REGION, "bench");
    let clients: AwsClients = moto.clients(REGION, "bench");
    let cloud = rt.block_on(async {
        let acct = Account::create(&clients, "bench").await;
        let nc = serde_json::from_value(serde_json::json!({
            "apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", "metadata": {"name": "default"},
            "spec": {"amiFamily": "AL2023", "instanceProfile": "bench", "amiSelectorTerms": [{"id": acct.ami_x86}],
                     "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "bench"}}],
                     "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "bench"}}]},
        }))
        .expect("EC2NodeClass");
        let r = nodeclass::resolve(&clients, &settings, &nc, "1.33").await;
        let cloud = AwsCloud::new(clients.clone(), settings.clone(), Catalog::bundled(REGION).expect("catalog"), rt.handle().clone());
        cloud.set_node_class("default", r.resolved);
        cloud
    });
    let launch_and_terminate = |cloud: &AwsCloud| {
        rt.block_on(async {
            let launched = cloud.launch(&request()).await.expect("launch");
            cloud
                .delete(&launched.instance.id)
                .await
                .expect("terminate");
        })
    };
    let mut g = c.benchmark_group("launch");
    // moto's /24 subnets hold 251 addresses and it keeps terminated instances' ones: stay well under
    g.sample_size(10)
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(2));
    g.bench_function("template-cached", |b| {
        b.iter(|| launch_and_terminate(&cloud))
    });
    let resolved = cloud.node_class("default");
    g.bench_function("template-lookup", |b| {
        b.iter(|| {
            // a node class update forgets the cached template ids
            cloud.set_node_class("default", None);
            cloud.set_node_class("default", resolved.clone());
            launch_and_terminate(&cloud)
        })
    });
    g.finish();

    let prices = discovery::on_demand_prices_of(&Catalog::bundled(REGION).expect("catalog"));
    let mut g = c.benchmark_group("catalog");
    g.sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(10));
    g.bench_function("discover", |b| {
        b.iter(|| {
            rt.block_on(discovery::discover(&clients, REGION, &prices))
                .expect("discovered")
        })
    });
    g.bench_function("bundled", |b| {
        b.iter(|| Catalog::bundled(REGION).expect("bundled"))
    });
    g.finish();
}

criterion_group!(aws, benches);
criterion_main!(aws);

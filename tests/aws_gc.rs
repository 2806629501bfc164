//! The garbage collector of leaked instances against moto's EC2: instances tagged for the cluster
//! by a NodePool (one owned by a NodeClaim, leaked ones), one of another cluster and one of an EKS node
//! group (the cluster tag without a NodePool's); a run terminates exactly the
//! leaked instances older than the grace, and running it again is harmless. moto stamps launch
//! times with the wall clock, so "old" and "young" are told apart by the grace (zero vs an hour),
//! not by waiting.

#[path = "support/moto.rs"]
mod moto;

use std::time::Duration;

use aws_sdk_ec2::types::{InstanceType, ResourceType, Tag, TagSpecification};
use chrono::Utc;
use joiner::catalog::CapacityType;
use joiner::cloud::aws::gc::{self, Ec2State, Owners};
use joiner::cloud::aws::{cluster_tag_key, AwsClients, NODECLAIM_TAG, NODEPOOL_TAG};
use moto::Moto;

const REGION: &str = "us-west-2";
const CLUSTER: &str = "alpha";
const HOUR: Duration = Duration::from_secs(3600);

async fn image(clients: &AwsClients) -> String {
    let out = clients
        .ec2
        .describe_images()
        .owners("amazon")
        .send()
        .await
        .expect("DescribeImages");
    out.images()
        .iter()
        .find_map(|i| i.image_id())
        .expect("moto ships images")
        .to_string()
}

/// Launches one m5.large with `tags`; returns its id.
async fn run(clients: &AwsClients, ami: &str, tags: &[(String, &str)]) -> String {
    let mut spec = TagSpecification::builder().resource_type(ResourceType::Instance);
    for (k, v) in tags {
        spec = spec.tags(Tag::builder().key(k).value(*v).build());
    }
    let out = clients
        .ec2
        .run_instances()
        .image_id(ami)
        .instance_type(InstanceType::M5Large)
        .min_count(1)
        .max_count(1)
        .tag_specifications(spec.build())
        .send()
        .await
        .expect("RunInstances");
    out.instances()
        .first()
        .and_then(|i| i.instance_id())
        .expect("one instance")
        .to_string()
}

async fn state(clients: &AwsClients, id: &str) -> String {
    let out = clients
        .ec2
        .describe_instances()
        .instance_ids(id)
        .send()
        .await
        .expect("DescribeInstances");
    let i = out
        .reservations()
        .iter()
        .flat_map(|r| r.instances())
        .next()
        .expect("described");
    i.state()
        .and_then(|s| s.name())
        .map(|n| n.as_str().to_string())
        .unwrap_or_default()
}

fn cluster_tag(cluster: &str) -> (String, &'static str) {
    (cluster_tag_key(cluster), "owned")
}

/// The tags joiner launches with: the cluster's and a NodePool's.
fn ours(cluster: &str) -> [(String, &'static str); 2] {
    [cluster_tag(cluster), (NODEPOOL_TAG.into(), "default")]
}

#[tokio::test]
async fn the_collector_terminates_exactly_the_old_leaked_instance() {
    let moto = Moto::start();
    let clients = moto.clients(REGION, CLUSTER);
    let ami = image(&clients).await;
    let [cluster, pool] = ours(CLUSTER);
    let owned = run(
        &clients,
        &ami,
        &[
            cluster.clone(),
            pool.clone(),
            (NODECLAIM_TAG.into(), "claim-a"),
        ],
    )
    .await;
    let leaked = run(
        &clients,
        &ami,
        &[
            cluster.clone(),
            pool.clone(),
            (NODECLAIM_TAG.into(), "claim-deleted"),
        ],
    )
    .await;
    let foreign = run(&clients, &ami, &ours("beta")).await;
    // an EKS node group's instance: tagged for the cluster, but by no NodePool
    let node_group = run(&clients, &ami, &[cluster_tag(CLUSTER)]).await;

    let listed = gc::list_cluster_instances(&clients, CLUSTER)
        .await
        .expect("list");
    let mut ids: Vec<&str> = listed.iter().map(|i| i.id.as_str()).collect();
    ids.sort();
    let mut want = vec![owned.as_str(), leaked.as_str()];
    want.sort();
    assert_eq!(
        ids, want,
        "only instances this cluster's NodePools launched are listed"
    );
    let a = listed.iter().find(|i| i.id == owned).expect("owned listed");
    assert_eq!(
        (
            a.instance_type.as_str(),
            a.capacity_type,
            a.state,
            a.claim()
        ),
        (
            "m5.large",
            CapacityType::OnDemand,
            Ec2State::Running,
            Some("claim-a")
        )
    );
    assert!(
        a.zone.starts_with(REGION) && a.launch_time.is_some(),
        "{a:?}"
    );

    let provider_id = format!("aws:///{}/{owned}", a.zone);
    let owners = || Owners::from_claims([("claim-a", Some(provider_id.as_str()))]);

    // within the grace even a leaked instance is left alone
    assert!(gc::collect(&clients, CLUSTER, Utc::now(), HOUR, owners)
        .await
        .expect("gc")
        .is_empty());
    assert_eq!(state(&clients, &leaked).await, "running");

    assert_eq!(
        gc::collect(&clients, CLUSTER, Utc::now(), Duration::ZERO, owners)
            .await
            .expect("gc"),
        vec![leaked.clone()]
    );
    assert!(matches!(
        state(&clients, &leaked).await.as_str(),
        "shutting-down" | "terminated"
    ));
    assert_eq!(state(&clients, &owned).await, "running");
    assert_eq!(state(&clients, &foreign).await, "running");
    assert_eq!(
        state(&clients, &node_group).await,
        "running",
        "an instance no NodePool launched is never collected"
    );

    // a second run finds nothing more to do and does not fail on the terminated instance
    assert!(
        gc::collect(&clients, CLUSTER, Utc::now(), Duration::ZERO, owners)
            .await
            .expect("gc again")
            .is_empty()
    );
    assert_eq!(state(&clients, &owned).await, "running");

    // a leak younger than the grace survives a run
    let young = run(&clients, &ami, &ours(CLUSTER)).await;
    assert!(gc::collect(&clients, CLUSTER, Utc::now(), HOUR, owners)
        .await
        .expect("gc")
        .is_empty());
    assert_eq!(state(&clients, &young).await, "running");
}

#[tokio::test]
async fn terminating_unknown_or_terminated_instances_is_not_an_error() {
    let moto = Moto::start();
    let clients = moto.clients(REGION, CLUSTER);
    let ami = image(&clients).await;
    let a = run(&clients, &ami, &[cluster_tag(CLUSTER)]).await;
    let b = run(&clients, &ami, &[cluster_tag(CLUSTER)]).await;
    let unknown = "i-0123456789abcdef0".to_string();

    // EC2 rejects a whole batch for one unknown id; the others must still be terminated
    gc::terminate(&clients, &[a.clone(), unknown.clone(), b.clone()])
        .await
        .expect("terminate with an unknown id");
    for id in [&a, &b] {
        assert!(
            matches!(
                state(&clients, id).await.as_str(),
                "shutting-down" | "terminated"
            ),
            "{id}"
        );
    }
    gc::terminate(&clients, std::slice::from_ref(&unknown))
        .await
        .expect("only an unknown id");
    gc::terminate(&clients, &[a.clone(), b.clone()])
        .await
        .expect("already terminated");
    gc::terminate(&clients, &[]).await.expect("nothing to do");
}

#[tokio::test]
async fn the_listing_reads_every_page() {
    let moto = Moto::start();
    let clients = moto.clients(REGION, CLUSTER);
    let ami = image(&clients).await;
    let mut launched = Vec::new();
    for _ in 0..7 {
        launched.push(run(&clients, &ami, &ours(CLUSTER)).await);
    }
    let mut listed: Vec<String> = gc::list_cluster_instances_paged(&clients, CLUSTER, 5)
        .await
        .expect("list")
        .into_iter()
        .map(|i| i.id)
        .collect();
    listed.sort();
    launched.sort();
    assert_eq!(listed, launched);
}

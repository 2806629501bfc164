//! The AWS provider against moto (a real EC2/SSM emulator started per test), with the fault proxy of
//! `support/faultproxy.rs` in front of it where EC2's insufficient-capacity answers and throttling
//! are needed: EC2NodeClass resolution, launch templates, CreateFleet with fallbacks, tags and user
//! data, list/get/terminate, the 3-minute unavailability of offerings that had no capacity, and
//! provider-side drift.

#[path = "support/faultproxy.rs"]
mod faultproxy;
#[path = "support/moto.rs"]
mod moto;

use std::collections::BTreeMap;

use aws_sdk_ec2::types::Filter;
use joiner::api::find_condition;
use joiner::api::EC2NodeClass;
use joiner::catalog::{CapacityType, Catalog};
use joiner::cloud::aws::{nodeclass, AwsClients, AwsCloud};
use joiner::cloud::{
    CloudError, CloudProvider, InstanceState, LaunchRequest, NodeTemplate, OfferingKey,
    Unavailable, UNAVAILABLE_TTL_SECONDS,
};
use joiner::optimizer::OfferingRef;

use faultproxy::FaultProxy;
use moto::{Account, Moto};

const REGION: &str = "us-east-1";
const CLUSTER: &str = "prod";

fn node_class(name: &str, discovery: &str, amis: serde_json::Value) -> EC2NodeClass {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", "metadata": {"name": name},
        "spec": {
            "amiFamily": "AL2023", "instanceProfile": "KarpenterNodeInstanceProfile",
            "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": discovery}}],
            "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "*"}}],
            "amiSelectorTerms": amis, "tags": {"team": "checkout"},
        }
    }))
    .expect("EC2NodeClass")
}

fn offering(t: &str, zone: &str, c: CapacityType) -> OfferingRef {
    OfferingRef {
        instance_type: t.into(),
        zone: zone.into(),
        capacity_type: c,
        price: 0.1,
    }
}

fn request(claim: &str, offerings: Vec<OfferingRef>) -> LaunchRequest {
    let template = NodeTemplate {
        node_class: Some("default".into()),
        labels: [("team".to_string(), "checkout".to_string())].into(),
        ..Default::default()
    };
    LaunchRequest {
        claim: claim.into(),
        nodepool: "general".into(),
        offerings,
        template,
    }
}

/// A provider on `endpoint` (moto, or the proxy) with the `default` node class resolved.
async fn provider(moto: &Moto, endpoint: &str) -> (AwsCloud, Account) {
    let settings = moto.settings(REGION, CLUSTER);
    let clients = AwsClients::from_config(&Moto::sdk_config(endpoint, REGION), &settings);
    let acct = Account::create(&moto.clients(REGION, CLUSTER), CLUSTER).await;
    let nc = node_class(
        "default",
        CLUSTER,
        serde_json::json!([{"ssmParameter": "/joiner/test/ami"}, {"id": acct.ami_arm}]),
    );
    let resolution = nodeclass::resolve(&clients, &settings, &nc, "1.33").await;
    let cloud = AwsCloud::new(
        clients,
        settings,
        Catalog::bundled(REGION).expect("bundled catalog"),
        tokio::runtime::Handle::current(),
    );
    cloud.set_node_class("default", resolution.resolved);
    (cloud, acct)
}

fn tags_of(i: &aws_sdk_ec2::types::Instance) -> BTreeMap<String, String> {
    i.tags()
        .iter()
        .map(|t| {
            (
                t.key().unwrap_or_default().to_string(),
                t.value().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nodeclass_resolves_its_selectors_and_reports_what_is_missing() {
    let moto = Moto::start();
    let c = moto.clients(REGION, CLUSTER);
    let acct = Account::create(&c, CLUSTER).await;
    let nc = node_class(
        "default",
        CLUSTER,
        serde_json::json!([{"ssmParameter": "/joiner/test/ami"}, {"id": acct.ami_arm}]),
    );
    let r = nodeclass::resolve(&c, &moto.settings(REGION, CLUSTER), &nc, "1.33").await;
    let resolved = r.resolved.expect("resolves");
    let subnets: Vec<(&str, &str)> = resolved
        .subnets
        .iter()
        .map(|s| (s.id.as_str(), s.zone.as_str()))
        .collect();
    assert_eq!(
        subnets.len(),
        2,
        "the untagged subnet is not selected: {subnets:?}"
    );
    assert!(
        subnets.contains(&(acct.subnet_a.as_str(), "us-east-1a"))
            && subnets.contains(&(acct.subnet_b.as_str(), "us-east-1b"))
    );
    assert_eq!(
        resolved
            .security_groups
            .iter()
            .map(|g| g.id.as_str())
            .collect::<Vec<_>>(),
        [acct.group.as_str()],
        "tag wildcard matches"
    );
    assert_eq!(
        resolved
            .ami_for(joiner::catalog::Arch::Amd64)
            .map(|a| a.id.as_str()),
        Some(acct.ami_x86.as_str())
    );
    assert_eq!(
        resolved
            .ami_for(joiner::catalog::Arch::Arm64)
            .map(|a| a.id.as_str()),
        Some(acct.ami_arm.as_str())
    );
    assert_eq!(
        find_condition(&r.status.conditions, "Ready").map(|c| c.status.as_str()),
        Some("True")
    );
    assert_eq!(r.status.subnets.len(), 2);
    assert_eq!(r.status.amis.len(), 2);

    let lost = node_class(
        "lost",
        "nobody",
        serde_json::json!([{"ssmParameter": "/joiner/test/missing"}]),
    );
    let r = nodeclass::resolve(&c, &moto.settings(REGION, CLUSTER), &lost, "1.33").await;
    assert!(r.resolved.is_none());
    let cond = |t: &str| {
        find_condition(&r.status.conditions, t)
            .map(|c| (c.status.clone(), c.message.clone()))
            .expect("condition")
    };
    assert_eq!(cond("SubnetsReady").0, "False");
    assert_eq!(cond("SecurityGroupsReady").0, "True");
    assert_eq!(
        cond("AMIsReady"),
        (
            "False".into(),
            "ssm parameter /joiner/test/missing not found".into()
        )
    );
    assert_eq!(cond("Ready").0, "False");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_launch_creates_one_template_and_a_tagged_instance_in_the_planned_zone() {
    let moto = Moto::start();
    let (cloud, acct) = provider(&moto, &moto.endpoint.clone()).await;
    let launched = cloud
        .launch(&request(
            "general-aaaaa",
            vec![offering("m5.large", "us-east-1b", CapacityType::OnDemand)],
        ))
        .await
        .expect("launch");
    let i = &launched.instance;
    assert_eq!(
        (
            i.offering.instance_type.as_str(),
            i.offering.zone.as_str(),
            i.offering.capacity_type
        ),
        ("m5.large", "us-east-1b", CapacityType::OnDemand)
    );
    assert_eq!(
        (i.claim.as_str(), i.nodepool.as_str()),
        ("general-aaaaa", "general")
    );
    assert!(launched.insufficient.is_empty());
    assert!(i.offering.price > 0.0, "priced from the catalog");

    let c = cloud.clients();
    let described = c
        .ec2
        .describe_instances()
        .instance_ids(&i.id)
        .send()
        .await
        .expect("describe");
    let ec2 = described.reservations()[0].instances()[0].clone();
    assert_eq!(ec2.subnet_id(), Some(acct.subnet_b.as_str()));
    assert_eq!(ec2.image_id(), Some(acct.ami_x86.as_str()));
    let tags = tags_of(&ec2);
    for (k, v) in [
        ("kubernetes.io/cluster/prod", "owned"),
        ("karpenter.sh/nodepool", "general"),
        ("karpenter.sh/nodeclaim", "general-aaaaa"),
        ("karpenter.k8s.aws/ec2nodeclass", "default"),
        ("karpenter.sh/capacity-type", "on-demand"),
        ("team", "checkout"),
    ] {
        assert_eq!(
            tags.get(k).map(String::as_str),
            Some(v),
            "tag {k}: {tags:?}"
        );
    }
    let text = moto::user_data(&c.ec2, &i.id).await;
    assert!(
        text.contains("kind: NodeConfig")
            && text.contains("name: prod")
            && text.contains("apiServerEndpoint: https://kube.test:6443"),
        "{text}"
    );
    assert!(
        text.contains("maxPods: 29") && text.contains("team=checkout"),
        "m5.large holds 29 pods on the ENI model: {text}"
    );

    let again = cloud
        .launch(&request(
            "general-bbbbb",
            vec![offering("m5.large", "us-east-1a", CapacityType::OnDemand)],
        ))
        .await
        .expect("second launch");
    let templates = c
        .ec2
        .describe_launch_templates()
        .filters(
            Filter::builder()
                .name("tag-key")
                .values("kubernetes.io/cluster/prod")
                .build(),
        )
        .send()
        .await
        .expect("templates");
    assert_eq!(
        templates.launch_templates().len(),
        1,
        "identical options share one template"
    );
    assert!(templates.launch_templates()[0]
        .launch_template_name()
        .is_some_and(|n| n.starts_with("joiner/prod/")));

    let mut listed: Vec<String> = cloud
        .list()
        .await
        .expect("list")
        .into_iter()
        .map(|i| i.claim)
        .collect();
    listed.sort();
    assert_eq!(listed, ["general-aaaaa", "general-bbbbb"]);
    cloud.delete(&again.instance.id).await.expect("terminate");
    cloud
        .delete(&again.instance.id)
        .await
        .expect("terminating twice is fine");
    let state = cloud.get(&again.instance.id).await.map(|i| i.state);
    assert!(
        matches!(
            state,
            Ok(InstanceState::Terminated | InstanceState::ShuttingDown)
                | Err(CloudError::NotFound(_))
        ),
        "{state:?}"
    );
    assert_eq!(cloud.list().await.expect("list").len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn insufficient_capacity_falls_back_and_keeps_the_offerings_out_for_three_minutes() {
    let moto = Moto::start();
    let proxy = FaultProxy::start(&moto.endpoint).await;
    let (cloud, _) = provider(&moto, &proxy.endpoint).await;
    proxy.faults().ice_types.insert("m5.large".into());
    let offerings = vec![
        offering("m5.large", "us-east-1a", CapacityType::Spot),
        offering("m5.large", "us-east-1b", CapacityType::Spot),
        offering("c5.large", "us-east-1a", CapacityType::Spot),
    ];
    let first = cloud
        .launch(&request("general-ccccc", offerings.clone()))
        .await
        .expect("the fallback launches");
    assert_eq!(first.instance.offering.instance_type, "c5.large");
    let key = |z: &str| OfferingKey {
        instance_type: "m5.large".into(),
        zone: z.into(),
        capacity_type: CapacityType::Spot,
    };
    let mut got = first.insufficient.clone();
    got.sort();
    assert_eq!(got, [key("us-east-1a"), key("us-east-1b")]);
    let fleets = proxy.faults().fleets.len();
    assert_eq!(
        fleets, 1,
        "one CreateFleet with every offering as an override"
    );

    let mut unavailable = Unavailable::default();
    for k in first.insufficient {
        unavailable.mark(k, 0.0);
    }
    let node = joiner::optimizer::NewNode {
        fallbacks: offerings[1..].to_vec(),
        ..new_node(&offerings[0])
    };
    let soon = LaunchRequest::for_node(
        "general-ddddd",
        &node,
        request("x", vec![]).template,
        &unavailable,
        60.0,
    );
    assert_eq!(
        soon.offerings,
        offerings[2..].to_vec(),
        "within three minutes only the offering with capacity is asked for"
    );
    let later = LaunchRequest::for_node(
        "general-ddddd",
        &node,
        request("x", vec![]).template,
        &unavailable,
        UNAVAILABLE_TTL_SECONDS + 1.0,
    );
    assert_eq!(
        later.offerings, offerings,
        "after three minutes they are tried again"
    );

    proxy.faults().ice_types.insert("c5.large".into());
    match cloud
        .launch(&request("general-eeeee", offerings.clone()))
        .await
    {
        Err(CloudError::InsufficientCapacity { offerings: o, .. }) => assert_eq!(o.len(), 3),
        other => panic!("expected insufficient capacity, got {other:?}"),
    }
}

fn new_node(o: &OfferingRef) -> joiner::optimizer::NewNode {
    serde_json::from_value(serde_json::json!({
        "id": "n1", "nodepool": "general", "instance_type": o.instance_type, "zone": o.zone, "capacity_type": "spot", "price": o.price,
        "pods": [], "labels": {}, "allocatable": {}, "fallbacks": [],
    }))
    .expect("NewNode from JSON")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn throttled_calls_are_retried_and_a_storm_is_an_error() {
    let moto = Moto::start();
    let proxy = FaultProxy::start(&moto.endpoint).await;
    let (cloud, _) = provider(&moto, &proxy.endpoint).await;
    proxy.faults().throttle.insert("CreateFleet".into(), 2);
    cloud
        .launch(&request(
            "general-fffff",
            vec![offering("m5.large", "us-east-1a", CapacityType::OnDemand)],
        ))
        .await
        .expect("retried through two throttles");
    assert_eq!(proxy.calls("CreateFleet"), 3);
    proxy.faults().throttle.insert("CreateFleet".into(), 10);
    let err = cloud
        .launch(&request(
            "general-ggggg",
            vec![offering("m5.large", "us-east-1a", CapacityType::OnDemand)],
        ))
        .await
        .expect_err("four attempts all throttled");
    assert!(err.to_string().contains("RequestLimitExceeded"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_instance_whose_ami_is_no_longer_selected_has_drifted() {
    let moto = Moto::start();
    let (cloud, acct) = provider(&moto, &moto.endpoint.clone()).await;
    let launched = cloud
        .launch(&request(
            "general-hhhhh",
            vec![offering("m5.large", "us-east-1a", CapacityType::OnDemand)],
        ))
        .await
        .expect("launch");
    assert_eq!(
        cloud
            .drifted(&launched.instance.id)
            .await
            .expect("drift check"),
        None
    );
    let mut nc = cloud.node_class("default").expect("resolved");
    nc.amis.retain(|a| a.id != acct.ami_x86);
    cloud.set_node_class("default", Some(nc));
    let drift = cloud
        .drifted(&launched.instance.id)
        .await
        .expect("drift check");
    assert!(
        drift.as_deref().is_some_and(|d| d.starts_with("AMIDrift")),
        "{drift:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nodeclass_with_a_role_gets_an_instance_profile_holding_it() {
    let moto = Moto::start();
    let c = moto.clients(REGION, CLUSTER);
    let acct = Account::create(&c, CLUSTER).await;
    let trust = r#"{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"Service":"ec2.amazonaws.com"},"Action":"sts:AssumeRole"}]}"#;
    for role in ["KarpenterNodeRole-prod", "NodeRole-v2"] {
        c.iam
            .create_role()
            .role_name(role)
            .assume_role_policy_document(trust)
            .send()
            .await
            .expect("role");
    }
    let with_role = |role: &str| {
        let mut nc = node_class(
            "default",
            CLUSTER,
            serde_json::json!([{"id": acct.ami_x86}]),
        );
        nc.spec.instance_profile = None;
        nc.spec.role = Some(role.to_string());
        nc
    };
    let settings = moto.settings(REGION, CLUSTER);
    let profile_roles = |name: String| {
        let iam = c.iam.clone();
        async move {
            let out = iam
                .get_instance_profile()
                .instance_profile_name(name)
                .send()
                .await
                .expect("profile exists");
            out.instance_profile()
                .map(|p| {
                    p.roles()
                        .iter()
                        .map(|r| r.role_name().to_string())
                        .collect::<Vec<_>>()
                })
                .unwrap_or_default()
        }
    };
    let r = nodeclass::resolve(
        &c,
        &settings,
        &with_role("arn:aws:iam::123456789012:role/KarpenterNodeRole-prod"),
        "1.33",
    )
    .await;
    let profile = r
        .status
        .instance_profile
        .clone()
        .expect("profile in status");
    assert_eq!(
        profile,
        joiner::cloud::aws::profile::profile_name(REGION, CLUSTER, "default")
    );
    assert_eq!(
        find_condition(&r.status.conditions, "InstanceProfileReady").map(|c| c.status.as_str()),
        Some("True")
    );
    assert_eq!(
        profile_roles(profile.clone()).await,
        ["KarpenterNodeRole-prod"]
    );
    let again =
        nodeclass::resolve(&c, &settings, &with_role("KarpenterNodeRole-prod"), "1.33").await;
    assert_eq!(
        again.status.instance_profile.as_deref(),
        Some(profile.as_str()),
        "resolving again finds the same profile"
    );
    nodeclass::resolve(&c, &settings, &with_role("NodeRole-v2"), "1.33")
        .await
        .resolved
        .expect("resolves with the new role");
    assert_eq!(
        profile_roles(profile).await,
        ["NodeRole-v2"],
        "a changed role replaces the old one"
    );
}

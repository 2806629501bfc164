//! End to end on the AWS provider: the `joiner controller` binary with `--cloud-provider aws`, the
//! in-process API server with the kubelet/scheduler stand-ins of `support/kubesim.rs`, and moto as
//! EC2/SSM. Pending pods must become real (emulated) EC2 instances of the planned type and zone, in
//! the node class's subnets, tagged for their NodeClaims and carrying user data that joins the
//! cluster; after scale-down the instances must be terminated.

#[path = "support/apiserver/mod.rs"]
mod apiserver;
#[path = "support/joinerproc.rs"]
mod joinerproc;
#[path = "support/kubesim.rs"]
mod kubesim;
#[path = "support/moto.rs"]
mod moto;

use std::collections::BTreeMap;
use std::time::Duration;

use aws_sdk_ec2::types::{Filter, InstanceStateName};
use base64::Engine;
use joiner::k8s::caches::karpenter_resource;
use kube::api::{Api, DynamicObject, ListParams, PostParams};
use kube::Client;
use serde_json::json;

use apiserver::ApiServer;
use joinerproc::{tempdir, Joiner, SYSTEM_NS};
use kubesim::{census, eventually, nodeclaims, Deployment, KubeSim};
use moto::{Account, Moto};

const NS: &str = "default";
const REGION: &str = "us-east-1";

async fn install(client: &Client) {
    let api = |kind: &str| Api::<DynamicObject>::all_with(client.clone(), &karpenter_resource(kind));
    let class: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", "metadata": {"name": "default"},
        "spec": {"amiFamily": "AL2023", "instanceProfile": "KarpenterNodeInstanceProfile-e2e",
                 "amiSelectorTerms": [{"ssmParameter": "/joiner/test/ami"}],
                 "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "e2e"}}],
                 "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "e2e"}}]},
    }))
    .expect("EC2NodeClass");
    api("EC2NodeClass").create(&PostParams::default(), &class).await.expect("ec2nodeclass created");
    let pool: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "default"},
        "spec": {
            "template": {"metadata": {"labels": {"team": "checkout"}}, "spec": {
                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                "requirements": [
                    {"key": "karpenter.k8s.aws/instance-family", "operator": "In", "values": ["m5", "c5"]},
                    {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
                ],
            }},
            "disruption": {"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "0s"},
        },
    }))
    .expect("NodePool");
    api("NodePool").create(&PostParams::default(), &pool).await.expect("nodepool created");
    let ns = serde_json::from_value(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": SYSTEM_NS}})).expect("namespace");
    let _ = Api::<k8s_openapi::api::core::v1::Namespace>::all(client.clone()).create(&PostParams::default(), &ns).await;
}

fn tags(i: &aws_sdk_ec2::types::Instance) -> BTreeMap<String, String> {
    i.tags().iter().map(|t| (t.key().unwrap_or_default().to_string(), t.value().unwrap_or_default().to_string())).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pending_pods_become_ec2_instances_and_scale_down_terminates_them() {
    let moto = Moto::start();
    let ec2 = moto.clients(REGION, "e2e");
    let acct = Account::create(&ec2, "e2e").await;
    let server = ApiServer::start().await;
    let client = server.client();
    install(&client).await;
    let dir = tempdir::Dir::new("aws");
    let args = ["--disable-leader-election", "--cloud-provider", "aws", "--cluster-endpoint", "https://e2e.example:443", "--aws-endpoint-url", &moto.endpoint, "--kubernetes-version", "1.33"];
    let creds = [("AWS_ACCESS_KEY_ID", "testing"), ("AWS_SECRET_ACCESS_KEY", "testing"), ("AWS_EC2_METADATA_DISABLED", "true")];
    let joiner = Joiner::start_with_env(&server, &dir, "joiner-aws", &args, &creds);
    let sim = KubeSim::start(client.clone(), Duration::from_millis(500));
    sim.deploy(Deployment { namespace: NS.into(), name: "web".into(), replicas: 6, cpu: "700m".into(), memory: "1Gi".into() });

    let settled = eventually(Duration::from_secs(90), || async { census(&client, NS).await.expect("census") }, |c| c.pods_running == 6 && c.pods_pending == 0 && c.claims == c.nodes && c.claims > 0).await;
    let c = settled.unwrap_or_else(|c| panic!("not settled: {c:?}\n{}", joiner.log()));

    let classes = Api::<DynamicObject>::all_with(client.clone(), &karpenter_resource("EC2NodeClass"));
    let class = classes.get("default").await.expect("ec2nodeclass");
    let ready = class.data["status"]["conditions"].as_array().into_iter().flatten().any(|c| c["type"] == "Ready" && c["status"] == "True");
    assert!(ready, "EC2NodeClass status: {}", class.data["status"]);
    assert_eq!(class.data["status"]["subnets"].as_array().map(Vec::len), Some(2), "{}", class.data["status"]);

    let claims = nodeclaims(&client).list(&ListParams::default()).await.expect("claims").items;
    assert_eq!(claims.len(), c.claims);
    for claim in &claims {
        let name = claim.metadata.name.clone().unwrap_or_default();
        let labels = claim.metadata.labels.clone().unwrap_or_default();
        let pid = claim.data["status"]["providerID"].as_str().expect("providerID");
        let id = pid.rsplit('/').next().expect("instance id");
        let out = ec2.ec2.describe_instances().instance_ids(id).send().await.expect("describe");
        let i = out.reservations()[0].instances()[0].clone();
        assert_eq!(i.instance_type().map(|t| t.as_str()), labels.get("node.kubernetes.io/instance-type").map(String::as_str), "claim {name}");
        let zone = i.placement().and_then(|p| p.availability_zone()).unwrap_or_default().to_string();
        assert_eq!(Some(&zone), labels.get("topology.kubernetes.io/zone"), "claim {name}");
        assert!(pid.starts_with(&format!("aws:///{zone}/")), "{pid}");
        let subnet = i.subnet_id().unwrap_or_default();
        assert!(subnet == acct.subnet_a || subnet == acct.subnet_b, "claim {name} in subnet {subnet}");
        let t = tags(&i);
        assert_eq!(t.get("karpenter.sh/nodeclaim"), Some(&name));
        assert_eq!(t.get("karpenter.sh/nodepool").map(String::as_str), Some("default"));
        assert_eq!(t.get("kubernetes.io/cluster/e2e").map(String::as_str), Some("owned"));
        let attr = ec2.ec2.describe_instance_attribute().instance_id(id).attribute(aws_sdk_ec2::types::InstanceAttributeName::UserData).send().await.expect("user data");
        let data = attr.user_data().and_then(|u| u.value()).expect("user data set");
        let text = String::from_utf8(base64::engine::general_purpose::STANDARD.decode(data).expect("base64")).expect("utf-8");
        assert!(text.contains("name: e2e") && text.contains("apiServerEndpoint: https://e2e.example:443") && text.contains("team=checkout"), "{text}");
    }

    sim.scale(NS, "web", 0);
    let gone = eventually(Duration::from_secs(90), || async { nodeclaims(&client).list(&ListParams::default()).await.expect("claims").items.len() }, |n| *n == 0).await;
    gone.unwrap_or_else(|n| panic!("{n} claims left after scale-down\n{}", joiner.log()));
    let running = ec2
        .ec2
        .describe_instances()
        .filters(Filter::builder().name("tag-key").values("kubernetes.io/cluster/e2e").build())
        .send()
        .await
        .expect("describe")
        .reservations()
        .iter()
        .flat_map(|r| r.instances())
        .filter(|i| matches!(i.state().and_then(|s| s.name()), Some(InstanceStateName::Pending | InstanceStateName::Running)))
        .count();
    assert_eq!(running, 0, "every instance is terminated after scale-down\n{}", joiner.log());
    sim.stop().await;
}

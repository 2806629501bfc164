//! End to end on the AWS provider: the `joiner controller` binary with `--cloud-provider aws`, the
//! in-process API server with the kubelet/scheduler stand-ins of `support/kubesim.rs`, and moto as
//! EC2/SSM. Pending pods must become real (emulated) EC2 instances of the planned type and zone, in
//! the node class's subnets, tagged for their NodeClaims and carrying user data that joins the
//! cluster; after scale-down the instances must be terminated.

#[path = "support/apiserver/mod.rs"]
mod apiserver;
#[path = "support/faultproxy.rs"]
mod faultproxy;
#[path = "support/joinerproc.rs"]
mod joinerproc;
#[path = "support/kubesim.rs"]
mod kubesim;
#[path = "support/moto.rs"]
mod moto;
#[path = "support/timeline.rs"]
mod timeline;

use std::collections::BTreeMap;
use std::time::Duration;

use aws_sdk_ec2::types::{Filter, InstanceStateName};
use joiner::k8s::caches::karpenter_resource;
use kube::api::{Api, DynamicObject, ListParams, PostParams};
use kube::Client;
use serde_json::json;

use apiserver::ApiServer;
use joinerproc::{aws_args, sample, tempdir, Joiner, MOTO_CREDS, SYSTEM_NS};
use kubesim::{census, eventually, nodeclaims, Deployment, KubeSim};
use moto::{Account, Moto};
use timeline::Timeline;

const NS: &str = "default";
const REGION: &str = "us-east-1";

async fn install(client: &Client) {
    let spec = json!({"template": {"metadata": {"labels": {"team": "checkout"}}}});
    joinerproc::install_moto_nodepool(client, spec).await;
    joinerproc::namespace(client, SYSTEM_NS).await;
    joinerproc::weights_for_a_seconds_clock(client, json!({})).await;
}

/// moto with the test account, and the fault proxy in front of it.
async fn moto_behind_proxy() -> (Moto, joiner::cloud::aws::AwsClients, faultproxy::FaultProxy) {
    let moto = Moto::start();
    let ec2 = moto.clients(REGION, "e2e");
    Account::create(&ec2, "e2e").await;
    let proxy = faultproxy::FaultProxy::start(&moto.endpoint).await;
    (moto, ec2, proxy)
}

fn tags(i: &aws_sdk_ec2::types::Instance) -> BTreeMap<String, String> {
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
async fn pending_pods_become_ec2_instances_and_scale_down_terminates_them() {
    let moto = Moto::start();
    let ec2 = moto.clients(REGION, "e2e");
    let acct = Account::create(&ec2, "e2e").await;
    let server = ApiServer::start().await;
    let client = server.client();
    install(&client).await;
    let dir = tempdir::Dir::new("aws");
    let args = aws_args(&moto.endpoint, &[]);
    let joiner = Joiner::start_with_env(&server, &dir, "joiner-aws", &args, &MOTO_CREDS);
    let sim = KubeSim::start(client.clone(), Duration::from_millis(500));
    sim.deploy(Deployment {
        namespace: NS.into(),
        name: "web".into(),
        replicas: 6,
        cpu: "700m".into(),
        memory: "1Gi".into(),
    });

    let settled = eventually(
        Duration::from_secs(90),
        || async { census(&client, NS).await.expect("census") },
        |c| c.pods_running == 6 && c.pods_pending == 0 && c.claims == c.nodes && c.claims > 0,
    )
    .await;
    let c = settled.unwrap_or_else(|c| panic!("not settled: {c:?}\n{}", joiner.log()));

    let classes =
        Api::<DynamicObject>::all_with(client.clone(), &karpenter_resource("EC2NodeClass"));
    let class = classes.get("default").await.expect("ec2nodeclass");
    let ready = class.data["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|c| c["type"] == "Ready" && c["status"] == "True");
    assert!(ready, "EC2NodeClass status: {}", class.data["status"]);
    assert_eq!(
        class.data["status"]["subnets"].as_array().map(Vec::len),
        Some(2),
        "{}",
        class.data["status"]
    );

    let claims = nodeclaims(&client)
        .list(&ListParams::default())
        .await
        .expect("claims")
        .items;
    assert_eq!(claims.len(), c.claims);
    for claim in &claims {
        let name = claim.metadata.name.clone().unwrap_or_default();
        let labels = claim.metadata.labels.clone().unwrap_or_default();
        let pid = claim.data["status"]["providerID"]
            .as_str()
            .expect("providerID");
        let id = pid.rsplit('/').next().expect("instance id");
        let out = ec2
            .ec2
            .describe_instances()
            .instance_ids(id)
            .send()
            .await
            .expect("describe");
        let i = out.reservations()[0].instances()[0].clone();
        assert_eq!(
            i.instance_type().map(|t| t.as_str()),
            labels
                .get("node.kubernetes.io/instance-type")
                .map(String::as_str),
            "claim {name}"
        );
        let zone = i
            .placement()
            .and_then(|p| p.availability_zone())
            .unwrap_or_default()
            .to_string();
        assert_eq!(
            Some(&zone),
            labels.get("topology.kubernetes.io/zone"),
            "claim {name}"
        );
        assert!(pid.starts_with(&format!("aws:///{zone}/")), "{pid}");
        let subnet = i.subnet_id().unwrap_or_default();
        assert!(
            subnet == acct.subnet_a || subnet == acct.subnet_b,
            "claim {name} in subnet {subnet}"
        );
        let t = tags(&i);
        assert_eq!(t.get("karpenter.sh/nodeclaim"), Some(&name));
        assert_eq!(
            t.get("karpenter.sh/nodepool").map(String::as_str),
            Some("default")
        );
        assert_eq!(
            t.get("kubernetes.io/cluster/e2e").map(String::as_str),
            Some("owned")
        );
        let text = moto::user_data(&ec2.ec2, id).await;
        assert!(
            text.contains("name: e2e")
                && text.contains("apiServerEndpoint: https://e2e.example:443")
                && text.contains("team=checkout"),
            "{text}"
        );
    }

    sim.scale(NS, "web", 0);
    let gone = eventually(
        Duration::from_secs(90),
        || async {
            nodeclaims(&client)
                .list(&ListParams::default())
                .await
                .expect("claims")
                .items
                .len()
        },
        |n| *n == 0,
    )
    .await;
    gone.unwrap_or_else(|n| panic!("{n} claims left after scale-down\n{}", joiner.log()));
    let running = ec2
        .ec2
        .describe_instances()
        .filters(
            Filter::builder()
                .name("tag-key")
                .values("kubernetes.io/cluster/e2e")
                .build(),
        )
        .send()
        .await
        .expect("describe")
        .reservations()
        .iter()
        .flat_map(|r| r.instances())
        .filter(|i| {
            matches!(
                i.state().and_then(|s| s.name()),
                Some(InstanceStateName::Pending | InstanceStateName::Running)
            )
        })
        .count();
    assert_eq!(
        running,
        0,
        "every instance is terminated after scale-down\n{}",
        joiner.log()
    );
    sim.stop().await;
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn capacity_shortages_fall_back_leaks_are_collected_and_interrupted_nodes_are_drained() {
    let (_moto, ec2, proxy) = moto_behind_proxy().await;
    // no c5 capacity anywhere: the plan's c5 offerings come back as InsufficientInstanceCapacity
    let catalog = joiner::catalog::Catalog::bundled(REGION).expect("catalog");
    proxy.faults().ice_types.extend(
        catalog
            .instance_types
            .iter()
            .filter(|t| t.name.starts_with("c5."))
            .map(|t| t.name.clone()),
    );
    // an instance tagged for the cluster that no NodeClaim will ever own
    let images = ec2.ec2.describe_images().send().await.expect("images");
    let image = images.images()[0].image_id().expect("image").to_string();
    let leak = ec2
        .ec2
        .run_instances()
        .image_id(image)
        .instance_type(aws_sdk_ec2::types::InstanceType::M5Large)
        .min_count(1)
        .max_count(1)
        .tag_specifications(
            aws_sdk_ec2::types::TagSpecification::builder()
                .resource_type(aws_sdk_ec2::types::ResourceType::Instance)
                .tags(
                    aws_sdk_ec2::types::Tag::builder()
                        .key("kubernetes.io/cluster/e2e")
                        .value("owned")
                        .build(),
                )
                .tags(
                    aws_sdk_ec2::types::Tag::builder()
                        .key("karpenter.sh/nodepool")
                        .value("default")
                        .build(),
                )
                .build(),
        )
        .send()
        .await
        .expect("leaked instance")
        .instances()[0]
        .instance_id()
        .expect("id")
        .to_string();
    let queue = ec2
        .sqs
        .create_queue()
        .queue_name("joiner-e2e")
        .send()
        .await
        .expect("queue")
        .queue_url
        .expect("queue url");

    let server = ApiServer::start().await;
    let client = server.client();
    install(&client).await;
    let dir = tempdir::Dir::new("aws-faults");
    let args = aws_args(
        &proxy.endpoint,
        &[
            "--interruption-queue",
            "joiner-e2e",
            "--instance-gc-grace",
            "0s",
        ],
    );
    let joiner = Joiner::start_with_env(&server, &dir, "joiner-aws", &args, &MOTO_CREDS);
    let sim = KubeSim::start(client.clone(), Duration::from_millis(500));
    sim.deploy(Deployment {
        namespace: NS.into(),
        name: "web".into(),
        replicas: 6,
        cpu: "700m".into(),
        memory: "1Gi".into(),
    });
    let settled = eventually(
        Duration::from_secs(90),
        || async { census(&client, NS).await.expect("census") },
        |c| c.pods_running == 6 && c.pods_pending == 0 && c.claims == c.nodes && c.claims > 0,
    )
    .await;
    settled.unwrap_or_else(|c| panic!("not settled: {c:?}\n{}", joiner.log()));
    let claims = nodeclaims(&client)
        .list(&ListParams::default())
        .await
        .expect("claims")
        .items;
    let types: Vec<String> = claims
        .iter()
        .filter_map(|c| {
            c.metadata
                .labels
                .as_ref()?
                .get("node.kubernetes.io/instance-type")
                .cloned()
        })
        .collect();
    assert!(
        types.iter().all(|t| t.starts_with("m5.")),
        "no c5 capacity, so every node is m5: {types:?}"
    );
    let ice = proxy.faults().ice_answered;
    assert!(
        ice > 0,
        "the plan asked for c5 at least once and got InsufficientInstanceCapacity"
    );

    let state = |id: String| {
        let ec2 = ec2.ec2.clone();
        async move {
            ec2.describe_instances()
                .instance_ids(id)
                .send()
                .await
                .ok()
                .and_then(|o| {
                    o.reservations()
                        .first()?
                        .instances()
                        .first()?
                        .state()?
                        .name()
                        .cloned()
                })
        }
    };
    let collected = eventually(
        Duration::from_secs(60),
        || state(leak.clone()),
        |s| {
            matches!(
                s,
                Some(InstanceStateName::ShuttingDown | InstanceStateName::Terminated)
            )
        },
    )
    .await;
    collected.unwrap_or_else(|s| panic!("leaked instance still {s:?}\n{}", joiner.log()));

    let victim = &claims[0];
    let node = victim.data["status"]["nodeName"]
        .as_str()
        .expect("node name")
        .to_string();
    let instance = victim.data["status"]["providerID"]
        .as_str()
        .and_then(|p| p.rsplit('/').next())
        .expect("instance")
        .to_string();
    ec2.sqs
        .send_message()
        .queue_url(&queue)
        .message_body(spot_warning(&instance))
        .send()
        .await
        .expect("message sent");
    // a message that is no event: read, counted as `noop`, and deleted
    ec2.sqs
        .send_message()
        .queue_url(&queue)
        .message_body("not an event")
        .send()
        .await
        .expect("message sent");
    let drained = eventually(
        Duration::from_secs(60),
        || async {
            let pods = Api::<k8s_openapi::api::core::v1::Pod>::namespaced(client.clone(), NS)
                .list(&ListParams::default())
                .await
                .expect("pods")
                .items;
            let on_victim = pods
                .iter()
                .filter(|p| {
                    p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(node.as_str())
                })
                .count();
            (on_victim, census(&client, NS).await.expect("census"))
        },
        |(on_victim, c)| *on_victim == 0 && c.pods_running == 6 && c.pods_pending == 0,
    )
    .await;
    drained.unwrap_or_else(|d| panic!("interrupted node not drained: {d:?}\n{}", joiner.log()));
    let depth = joiner::cloud::aws::interruption::approximate_depth(&ec2, &queue)
        .await
        .expect("queue depth");
    assert_eq!(depth, 0, "the messages were deleted once handled");
    assert!(
        joiner.log().contains("interruption event"),
        "{}",
        joiner.log()
    );
    let received = "karpenter_interruption_received_messages_total{message_type=";
    let scrape = joiner.metrics().await;
    for (metric, want) in [
        (format!("{received}\"spot_interrupted\"}}"), 1.0),
        (format!("{received}\"noop\"}}"), 1.0),
        ("karpenter_interruption_deleted_messages_total".into(), 2.0),
        // the warning carries its event time; the garbled message none
        (
            "karpenter_interruption_message_queue_duration_seconds_count".into(),
            1.0,
        ),
    ] {
        assert_eq!(sample(&scrape, &metric), want, "{metric}\n{scrape}");
    }
    sim.stop().await;
}

/// The cluster's pending or running instances in moto, by id.
async fn live_instances(ec2: &aws_sdk_ec2::Client) -> std::collections::BTreeSet<String> {
    let out = ec2
        .describe_instances()
        .filters(
            Filter::builder()
                .name("tag-key")
                .values("kubernetes.io/cluster/e2e")
                .build(),
        )
        .send()
        .await
        .expect("describe");
    out.reservations()
        .iter()
        .flat_map(|r| r.instances())
        .filter(|i| {
            matches!(
                i.state().and_then(|s| s.name()),
                Some(InstanceStateName::Pending | InstanceStateName::Running)
            )
        })
        .filter_map(|i| i.instance_id().map(str::to_string))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_controller_killed_between_createfleet_and_recording_the_claim_leaks_nothing_after_restart(
) {
    let (_moto, ec2, proxy) = moto_behind_proxy().await;
    // EC2 launches the instance, but its answer never reaches joiner
    proxy.faults().hold.insert("CreateFleet".into());
    let server = ApiServer::start().await;
    let client = server.client();
    install(&client).await;
    let dir = tempdir::Dir::new("aws-crash");
    let args = aws_args(&proxy.endpoint, &["--instance-gc-grace", "0s"]);
    let mut first = Joiner::start_with_env(&server, &dir, "joiner-first", &args, &MOTO_CREDS);
    let sim = KubeSim::start(client.clone(), Duration::from_millis(500));
    sim.deploy(Deployment {
        namespace: NS.into(),
        name: "web".into(),
        replicas: 4,
        cpu: "700m".into(),
        memory: "1Gi".into(),
    });
    let held = eventually(
        Duration::from_secs(60),
        || async { proxy.faults().held },
        |h| *h >= 1,
    )
    .await;
    held.unwrap_or_else(|_| panic!("no CreateFleet reached EC2\n{}", first.log()));
    first.kill(); // SIGKILL: no shutdown path runs
    let orphans = live_instances(&ec2.ec2).await;
    assert!(
        !orphans.is_empty(),
        "the withheld CreateFleet launched an instance"
    );
    let unrecorded = nodeclaims(&client)
        .list(&ListParams::default())
        .await
        .expect("claims")
        .items;
    assert!(
        unrecorded
            .iter()
            .all(|c| c.data["status"]["providerID"].is_null()),
        "no launch was recorded before the kill"
    );

    proxy.faults().hold.clear();
    let second = Joiner::start_with_env(&server, &dir, "joiner-second", &args, &MOTO_CREDS);
    // every pod placed, and every instance EC2 runs for the cluster is some NodeClaim's
    let owned = eventually(
        Duration::from_secs(90),
        || async {
            let claims = nodeclaims(&client)
                .list(&ListParams::default())
                .await
                .expect("claims")
                .items;
            let recorded: std::collections::BTreeSet<String> = claims
                .iter()
                .filter_map(|c| {
                    c.data["status"]["providerID"]
                        .as_str()?
                        .rsplit('/')
                        .next()
                        .map(str::to_string)
                })
                .collect();
            (
                census(&client, NS).await.expect("census"),
                live_instances(&ec2.ec2).await,
                recorded,
            )
        },
        |(c, live, recorded)| {
            c.pods_running == 4 && c.pods_pending == 0 && c.claims == c.nodes && live == recorded
        },
    )
    .await;
    let (_, live, _) = owned.unwrap_or_else(|o| panic!("after restart: {o:?}\n{}", second.log()));
    assert!(
        orphans.is_disjoint(&live),
        "the orphan {orphans:?} still runs\n{}",
        second.log()
    );
    sim.stop().await;
}

/// The instance ids the cluster's NodeClaims record in their providerIDs.
async fn recorded_instances(client: &Client) -> std::collections::BTreeSet<String> {
    let claims = nodeclaims(client)
        .list(&ListParams::default())
        .await
        .expect("claims")
        .items;
    claims
        .iter()
        .filter_map(|c| {
            c.data["status"]["providerID"]
                .as_str()?
                .rsplit('/')
                .next()
                .map(str::to_string)
        })
        .collect()
}

/// A PodDisruptionBudget allowing one `web` pod down at a time.
async fn one_web_pod_down_at_a_time(client: &Client) {
    let pdb: k8s_openapi::api::policy::v1::PodDisruptionBudget = serde_json::from_value(json!({
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "web", "namespace": NS},
        "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app": "web"}}},
    }))
    .expect("pdb");
    Api::<k8s_openapi::api::policy::v1::PodDisruptionBudget>::namespaced(client.clone(), NS)
        .create(&PostParams::default(), &pdb)
        .await
        .expect("pdb created");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consolidation_while_terminations_fail_and_launches_are_throttled_leaks_nothing() {
    let (_moto, ec2, proxy) = moto_behind_proxy().await;
    let server = ApiServer::start().await;
    let client = server.client();
    install(&client).await;
    one_web_pod_down_at_a_time(&client).await;
    let dir = tempdir::Dir::new("aws-consolidate-faults");
    // two attempts per AWS call: three failures in a row beat the SDK's retry once, so the
    // controller itself sees a failed TerminateInstances and a failed CreateFleet
    let args = aws_args(
        &proxy.endpoint,
        &["--instance-gc-grace", "0s", "--aws-max-attempts", "2"],
    );
    let joiner = Joiner::start_with_env(&server, &dir, "joiner-aws", &args, &MOTO_CREDS);
    let sim = KubeSim::start(client.clone(), Duration::from_millis(500));
    // four pods that only a c5.4xlarge holds together (each takes just over half a c5.2xlarge's
    // allocatable cpu, so no smaller node holds two), and one of them alone on a c5.2xlarge: the
    // scale-down can only be consolidated by replacing the first node with a smaller one
    sim.deploy(Deployment {
        namespace: NS.into(),
        name: "web".into(),
        replicas: 4,
        cpu: "3970m".into(),
        memory: "1Gi".into(),
    });
    let settled = eventually(
        Duration::from_secs(60),
        || async { census(&client, NS).await.expect("census") },
        |c| {
            c.pods_running == 4
                && c.pods_pending == 0
                && c.claims == c.nodes
                && c.claims_without_node == 0
        },
    )
    .await;
    settled.unwrap_or_else(|c| panic!("not settled: {c:?}\n{}", joiner.log()));
    let original: std::collections::BTreeSet<String> = recorded_instances(&client).await;
    {
        let mut f = proxy.faults();
        f.fail.insert("TerminateInstances".into(), 3);
        f.throttle.insert("CreateFleet".into(), 3);
    }
    let fleets_before = proxy.calls("CreateFleet");
    let timeline = Timeline::start(&server);
    sim.scale(NS, "web", 1);
    // consolidated: every original instance gone, every pod running, every claim with its node,
    // and what EC2 runs for the cluster is exactly what the NodeClaims record (grace 0s). Once
    // throttled, the SDK's adaptive retry paces every EC2 call (a launch takes up to 20 s), and the
    // Node goes only after a TerminateInstances EC2 accepts: a minute is not always enough
    let done = eventually(
        Duration::from_secs(90),
        || async {
            (
                census(&client, NS).await.expect("census"),
                live_instances(&ec2.ec2).await,
                recorded_instances(&client).await,
            )
        },
        |(c, live, recorded)| {
            c.pods_running == 1
                && c.pods_pending == 0
                && c.claims == c.nodes
                && c.claims_without_node == 0
                && live == recorded
                && live.is_disjoint(&original)
                // the three reads are not one snapshot: a node whose termination EC2 accepted
                // between them is still counted by the census, so the counts must agree too
                && recorded.len() == c.claims
                && live.len() == c.nodes
        },
    )
    .await;
    let (c, _, _) = done.unwrap_or_else(|d| {
        panic!(
            "not consolidated without leaks: {d:?}\nTerminateInstances calls {}\n{}",
            proxy.calls("TerminateInstances"),
            joiner.log()
        )
    });
    assert!(c.nodes >= 1, "{c:?}");
    {
        let f = proxy.faults();
        assert_eq!(
            f.fail.get("TerminateInstances"),
            Some(&0),
            "TerminateInstances never failed"
        );
        assert_eq!(
            f.throttle.get("CreateFleet"),
            Some(&0),
            "CreateFleet was never throttled: consolidation launched no replacement"
        );
    }
    assert!(
        proxy.calls("CreateFleet") > fleets_before + 3,
        "a replacement launched after the throttling"
    );
    assert_eq!(
        timeline.violations(),
        Vec::<String>::new(),
        "\n{}",
        joiner.log()
    );
    assert!(
        timeline.replaced_deletions() >= 1,
        "no node was replaced ({} disrupted deletions)\n{}",
        timeline.disrupted_deletions(),
        joiner.log()
    );
    sim.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_insufficient_capacity_storm_launches_nothing_and_places_pods_once_it_lifts() {
    let (_moto, ec2, proxy) = moto_behind_proxy().await;
    // no capacity for any type of the catalog, in any zone
    let catalog = joiner::catalog::Catalog::bundled(REGION).expect("catalog");
    proxy
        .faults()
        .ice_types
        .extend(catalog.instance_types.iter().map(|t| t.name.clone()));
    let server = ApiServer::start().await;
    let client = server.client();
    install(&client).await;
    let dir = tempdir::Dir::new("aws-ice-storm");
    // the marks' lifetime is a wait, not what the test checks: 20 s instead of Karpenter's 3 minutes
    let ttl = 20.0;
    let args = aws_args(
        &proxy.endpoint,
        &[
            "--instance-gc-grace",
            "0s",
            "--insufficient-capacity-ttl",
            "20s",
        ],
    );
    let joiner = Joiner::start_with_env(&server, &dir, "joiner-aws", &args, &MOTO_CREDS);
    let timeline = Timeline::start(&server);
    let sim = KubeSim::start(client.clone(), Duration::from_millis(500));
    sim.deploy(Deployment {
        namespace: NS.into(),
        name: "web".into(),
        replicas: 4,
        cpu: "700m".into(),
        memory: "1Gi".into(),
    });
    // joiner works through every offering until none is left, then tells the pods why
    let events: Api<k8s_openapi::api::events::v1::Event> = Api::namespaced(client.clone(), NS);
    let told = eventually(
        Duration::from_secs(60),
        || async {
            events
                .list(&ListParams::default())
                .await
                .expect("events")
                .items
                .into_iter()
                .filter(|e| e.reason.as_deref() == Some("FailedScheduling"))
                .count()
        },
        |n| *n >= 4,
    )
    .await;
    told.unwrap_or_else(|n| panic!("{n} FailedScheduling events\n{}", joiner.log()));
    // each claim EC2 had no capacity for is told so, as Karpenter tells it
    let refused = Api::<k8s_openapi::api::events::v1::Event>::all(client.clone())
        .list(&ListParams::default())
        .await
        .expect("events")
        .items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some("InsufficientCapacityError"))
        .filter(|e| e.type_.as_deref() == Some("Warning"))
        .filter(|e| e.regarding.as_ref().and_then(|r| r.kind.as_deref()) == Some("NodeClaim"))
        .count();
    assert!(
        refused > 0,
        "no InsufficientCapacityError Event on a NodeClaim\n{}",
        joiner.log()
    );
    let stormed = std::time::Instant::now();
    let asked = proxy.faults().ice_answered;
    assert!(asked > 0, "no CreateFleet met the storm");
    // nothing was launched and every claim made during the storm is gone
    let clean = eventually(
        Duration::from_secs(10),
        || async {
            (
                nodeclaims(&client)
                    .list(&ListParams::default())
                    .await
                    .expect("claims")
                    .items
                    .len(),
                census(&client, NS).await.expect("census"),
            )
        },
        |(claims, c)| *claims == 0 && c.pods_pending == 4,
    )
    .await;
    clean.unwrap_or_else(|c| {
        panic!(
            "claims left behind or pods placed during the storm: {c:?}\n{}",
            joiner.log()
        )
    });
    assert!(
        live_instances(&ec2.ec2).await.is_empty(),
        "an instance runs although EC2 had no capacity"
    );
    assert!(
        !timeline.claims_created().is_empty(),
        "no claim was tried during the storm"
    );

    // the storm lifts: offerings come back once their insufficient-capacity mark expires
    // (--insufficient-capacity-ttl) and the parked pods are solved again (a minute apart), so the
    // pods run within the TTL plus one retry and a launch
    proxy.faults().ice_types.clear();
    let bound = Duration::from_secs_f64(ttl + 60.0 + 30.0);
    let placed = eventually(
        bound,
        || async {
            (
                census(&client, NS).await.expect("census"),
                live_instances(&ec2.ec2).await,
                recorded_instances(&client).await,
            )
        },
        |(c, live, recorded)| {
            c.pods_running == 4
                && c.pods_pending == 0
                && c.claims == c.nodes
                && c.claims_without_node == 0
                && live == recorded
        },
    )
    .await;
    placed.unwrap_or_else(|p| {
        panic!(
            "not placed {:?} after the storm: {p:?}\n{}",
            stormed.elapsed(),
            joiner.log()
        )
    });
    sim.stop().await;
}

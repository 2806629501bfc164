//! End to end: a terminating node's instance goes only once its volumes have detached, against the
//! test API server's attach/detach controller (`support/apiserver/attach.rs`: a volume detaches a
//! while after its pod has left the node, or never when stuck), with the kubelet, scheduler and
//! ReplicaSet stand-ins of `support/kubesim.rs`.

#[path = "support/apiserver/mod.rs"]
mod apiserver;
#[path = "support/invariants.rs"]
mod invariants;
#[path = "support/joinerproc.rs"]
mod joinerproc;
#[path = "support/kubesim.rs"]
mod kubesim;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Node, PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::VolumeAttachment;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::Client;
use serde_json::{json, Value};

use apiserver::{ApiServer, ChangeKind};
use invariants::Invariants;
use joinerproc::{tempdir, Joiner, SYSTEM_NS};
use kubesim::{census, eventually, nodeclaims, Deployment, KubeSim};

const NS: &str = "default";
/// The database's namespace, apart from the web pods the census counts.
const DATA_NS: &str = "data";
const VOLUME: &str = "pv-db-0";
const FINALIZER: &str = "karpenter.sh/termination";

async fn install_nodepool(client: &Client, grace: Option<&str>) {
    let mut template = json!({"requirements": joinerproc::general_purpose(false)});
    if let Some(g) = grace {
        template["terminationGracePeriod"] = json!(g);
    }
    joinerproc::install_nodepool(client, template, json!({})).await;
}

async fn namespace(client: &Client, name: &str) {
    joinerproc::namespace(client, name).await;
}

async fn cluster(name: &str, grace: Option<&str>) -> (ApiServer, Client, tempdir::Dir) {
    let server = ApiServer::start().await;
    let client = server.client();
    for ns in [SYSTEM_NS, DATA_NS] {
        namespace(&client, ns).await;
    }
    joinerproc::weights_for_a_seconds_clock(&client, json!({})).await;
    install_nodepool(&client, grace).await;
    (server, client, tempdir::Dir::new(name))
}

fn web() -> Deployment {
    Deployment {
        namespace: NS.into(),
        name: "web".into(),
        replicas: 1,
        cpu: "1".into(),
        memory: "1Gi".into(),
    }
}

fn object<K: serde::de::DeserializeOwned>(v: Value) -> K {
    serde_json::from_value(v).expect("a valid object")
}

/// StatefulSet `db`'s pod `db-0` running on `node`, its claim bound to an EBS volume (as the
/// CSI driver provisions it); the attach/detach controller attaches the volume to the node.
async fn database_on(client: &Client, node: &str) {
    let pv: PersistentVolume = object(json!({
        "apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": VOLUME},
        "spec": {"capacity": {"storage": "10Gi"}, "accessModes": ["ReadWriteOnce"],
                 "persistentVolumeReclaimPolicy": "Delete", "storageClassName": "gp3",
                 "claimRef": {"namespace": DATA_NS, "name": "data-db-0"},
                 "csi": {"driver": "ebs.csi.aws.com", "volumeHandle": "vol-0123456789abcdef0", "fsType": "ext4"}},
    }));
    Api::<PersistentVolume>::all(client.clone())
        .create(&PostParams::default(), &pv)
        .await
        .expect("volume created");
    let pvc: PersistentVolumeClaim = object(json!({
        "apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "metadata": {"name": "data-db-0", "namespace": DATA_NS},
        "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "gp3", "volumeName": VOLUME,
                 "resources": {"requests": {"storage": "10Gi"}}},
    }));
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), DATA_NS);
    claims
        .create(&PostParams::default(), &pvc)
        .await
        .expect("claim created");
    let bound = json!({"status": {"phase": "Bound", "accessModes": ["ReadWriteOnce"],
        "capacity": {"storage": "10Gi"}}});
    claims
        .patch_status("data-db-0", &PatchParams::default(), &Patch::Merge(&bound))
        .await
        .expect("claim bound");
    let pod: Pod = object(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "db-0", "namespace": DATA_NS, "labels": {"app": "db"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "db", "uid": "uid-db", "controller": true}]},
        "spec": {
            "nodeName": node,
            "terminationGracePeriodSeconds": 2,
            "containers": [{"name": "db", "image": "registry.k8s.io/pause:3.9",
                "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}},
                "volumeMounts": [{"name": "data", "mountPath": "/data"}]}],
            "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data-db-0"}}],
        },
    }));
    Api::<Pod>::namespaced(client.clone(), DATA_NS)
        .create(&PostParams::default(), &pod)
        .await
        .expect("pod created");
}

async fn attachments_on(client: &Client, node: &str) -> Vec<VolumeAttachment> {
    Api::<VolumeAttachment>::all(client.clone())
        .list(&ListParams::default())
        .await
        .expect("attachments")
        .items
        .into_iter()
        .filter(|va| va.spec.node_name == node)
        .collect()
}

/// The one node, once web's pod runs there, with its claim's name.
async fn settled_node(client: &Client, joiner: &Joiner) -> (String, String) {
    let settled = eventually(
        Duration::from_secs(60),
        || async { census(client, NS).await.expect("census") },
        |c| c.pods_running == 1 && c.pods_pending == 0 && c.claims == 1 && c.nodes == 1,
    )
    .await;
    settled.unwrap_or_else(|c| panic!("not settled: {c:?}\n{}", joiner.log()));
    let claim = nodeclaims(client)
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .remove(0);
    let node = claim.data["status"]["nodeName"]
        .as_str()
        .unwrap()
        .to_string();
    (node, claim.metadata.name.unwrap())
}

/// When, on the server's change feed, `node`'s attachment of the volume was deleted, `db-0`
/// left the node, and joiner took its finalizer off the node (which it does right after
/// terminating the instance); and the `VolumesDetached` reasons its claim went through.
#[derive(Debug, Default, Clone)]
struct Timeline {
    pod_gone: Option<Instant>,
    detached: Option<Instant>,
    released: Option<Instant>,
    reasons: Vec<String>,
}

fn follow(server: &ApiServer, node: &str) -> (Arc<Mutex<Timeline>>, tokio::task::JoinHandle<()>) {
    let mut feed = server.subscribe();
    let timeline = Arc::new(Mutex::new(Timeline::default()));
    let (t, node) = (timeline.clone(), node.to_string());
    let task = tokio::spawn(async move {
        while let Ok(c) = feed.recv().await {
            let o = &c.object;
            let mut t = t.lock().unwrap();
            let deleted = c.kind == ChangeKind::Deleted;
            match c.resource.plural {
                "pods" if deleted && o["metadata"]["name"] == "db-0" => {
                    t.pod_gone.get_or_insert(Instant::now());
                }
                "volumeattachments" if deleted && o["spec"]["nodeName"] == node.as_str() => {
                    t.detached.get_or_insert(Instant::now());
                }
                "nodes" if o["metadata"]["name"] == node.as_str() => {
                    let has = |o: &Value| {
                        o["metadata"]["finalizers"]
                            .as_array()
                            .is_some_and(|f| f.iter().any(|f| f == FINALIZER))
                    };
                    let had = c.old.as_ref().is_some_and(has);
                    if had && (deleted || !has(o)) {
                        t.released.get_or_insert(Instant::now());
                    }
                }
                "nodeclaims" => {
                    let conditions = o["status"]["conditions"].as_array().cloned();
                    let reason = conditions
                        .into_iter()
                        .flatten()
                        .find(|c| c["type"] == "VolumesDetached")
                        .and_then(|c| c["reason"].as_str().map(str::to_string));
                    if let Some(r) = reason.filter(|r| t.reasons.last() != Some(r)) {
                        t.reasons.push(r);
                    }
                }
                _ => {}
            }
        }
    });
    (timeline, task)
}

/// Marks the claim Drifted as a cloud provider's drift check would, until the node is tainted for
/// disruption (joiner's own status writes may replace the condition list before it reads it).
async fn drift(client: &Client, claim: &str, node: &str) {
    let claims = nodeclaims(client);
    let deadline = Instant::now() + Duration::from_secs(60);
    while Instant::now() < deadline {
        let n = Api::<Node>::all(client.clone()).get(node).await.unwrap();
        let tainted = n
            .spec
            .and_then(|s| s.taints)
            .into_iter()
            .flatten()
            .any(|t| t.key == "karpenter.sh/disrupted");
        if tainted {
            return;
        }
        let c = claims.get(claim).await.unwrap();
        let mut conditions: Vec<Value> = c.data["status"]["conditions"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        if !conditions
            .iter()
            .any(|c| c["type"] == "Drifted" && c["status"] == "True")
        {
            conditions.retain(|c| c["type"] != "Drifted");
            conditions.push(json!({"type": "Drifted", "status": "True", "reason": "AMIDrift",
                "message": "the node class's AMI changed", "lastTransitionTime": "2026-01-01T00:00:00Z"}));
            let patch = json!({"status": {"conditions": conditions}});
            let _ = claims
                .patch_status(claim, &PatchParams::default(), &Patch::Merge(&patch))
                .await;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    panic!("node {node} never tainted for disruption");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_disrupted_nodes_instance_goes_only_after_its_volume_has_detached() {
    let (server, client, dir) = cluster("volume-detach", None).await;
    // EBS takes a while to detach once the kubelet has unmounted
    let delay = Duration::from_secs(8);
    server.set_detach_delay(delay);
    let joiner = Joiner::start(&server, &dir, "joiner-a", &["--disable-leader-election"]);
    let sim = KubeSim::start(client.clone(), Duration::from_millis(300));
    sim.deploy(web());
    let (node, claim) = settled_node(&client, &joiner).await;
    database_on(&client, &node).await;
    let attached = eventually(
        Duration::from_secs(10),
        || async { attachments_on(&client, &node).await.len() },
        |n| *n == 1,
    )
    .await;
    assert_eq!(
        attached,
        Ok(1),
        "the attach/detach controller attaches db-0's volume"
    );
    let invariants = Invariants::start(&server);
    let (timeline, follower) = follow(&server, &node);
    drift(&client, &claim, &node).await;
    let gone = eventually(
        Duration::from_secs(120),
        || async {
            Api::<Node>::all(client.clone())
                .get_opt(&node)
                .await
                .unwrap()
                .is_none()
        },
        |gone| *gone,
    )
    .await;
    gone.unwrap_or_else(|_| panic!("node {node} not terminated\n{}", joiner.log()));
    follower.abort();
    let t = timeline.lock().unwrap().clone();
    println!("{t:?}");
    assert_eq!(
        invariants.violations(),
        Vec::<String>::new(),
        "\n{}",
        joiner.log()
    );
    let (pod_gone, released) = (
        t.pod_gone.expect("db-0 evicted"),
        t.released.expect("the node released"),
    );
    assert!(
        t.detached.is_some_and(|d| released >= d),
        "the instance went before its volume detached: {t:?}\n{}",
        joiner.log()
    );
    // the detach delay ran from the pod's removal: the instance waited for it
    assert!(
        released - pod_gone >= delay - Duration::from_millis(500),
        "released {:?} after db-0 left, within the {delay:?} the volume takes to detach",
        released - pod_gone
    );
    assert!(
        t.reasons.iter().any(|r| r == "AwaitingVolumeDetachment"),
        "{:?}",
        t.reasons
    );
    assert_eq!(
        t.reasons.last().map(String::as_str),
        Some("VolumesDetached")
    );
    // the wait is measured: one ended wait, within the time the release waited, none cut short
    let waited = joiner
        .metric("joiner_termination_volume_wait_seconds_sum")
        .await;
    assert_eq!(
        joiner
            .metric("joiner_termination_volume_wait_seconds_count")
            .await,
        1.0
    );
    // from the drain's end (the condition turning Unknown, in whole seconds) to the detach
    assert!(
        waited >= 1.0 && waited <= (released - pod_gone).as_secs_f64() + 1.0,
        "{waited} s measured, released {:?} after db-0 left",
        released - pod_gone
    );
    assert_eq!(
        joiner
            .metric("joiner_termination_volume_waits_cut_total")
            .await,
        0.0
    );
    assert!(invariants.nodes_released() >= 1);
    sim.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stuck_volume_holds_a_deleted_claims_instance_until_its_termination_grace_period() {
    let grace = Duration::from_secs(20);
    let (server, client, dir) = cluster("volume-stuck", Some("20s")).await;
    let joiner = Joiner::start(
        &server,
        &dir,
        "joiner-a",
        &["--disable-leader-election", "--disable-disruption"],
    );
    let sim = KubeSim::start(client.clone(), Duration::from_millis(300));
    sim.deploy(web());
    let (node, claim) = settled_node(&client, &joiner).await;
    database_on(&client, &node).await;
    let attached = eventually(
        Duration::from_secs(10),
        || async { attachments_on(&client, &node).await.len() },
        |n| *n == 1,
    )
    .await;
    assert_eq!(attached, Ok(1));
    // the volume never detaches (stuck in `detaching`, or the CSI driver is down)
    server.stick_volume(VOLUME);
    let invariants = Invariants::start(&server);
    let (timeline, follower) = follow(&server, &node);
    let deleted_at = Instant::now();
    nodeclaims(&client)
        .delete(&claim, &DeleteParams::default())
        .await
        .unwrap();
    let released = eventually(
        Duration::from_secs(90),
        || async { timeline.lock().unwrap().released },
        |r| r.is_some(),
    )
    .await;
    let released = released
        .unwrap_or_else(|_| panic!("node {node} not released\n{}", joiner.log()))
        .unwrap();
    follower.abort();
    let t = timeline.lock().unwrap().clone();
    println!(
        "{t:?}, released {:?} after the delete",
        released - deleted_at
    );
    assert!(
        t.pod_gone.is_some_and(|p| p < released),
        "db-0 drained first"
    );
    // deletionTimestamp has whole seconds: the grace may end up to a second early
    assert!(
        released - deleted_at >= grace - Duration::from_secs(1),
        "released {:?} after the delete, inside terminationGracePeriod\n{}",
        released - deleted_at,
        joiner.log()
    );
    assert!(
        released - deleted_at <= grace + Duration::from_secs(15),
        "released {:?} after the delete: the grace did not end the wait\n{}",
        released - deleted_at,
        joiner.log()
    );
    assert_eq!(
        attachments_on(&client, &node).await.len(),
        1,
        "still attached"
    );
    assert_eq!(
        t.reasons,
        ["AwaitingVolumeDetachment", "TerminationGracePeriodElapsed"],
        "\n{}",
        joiner.log()
    );
    assert_eq!(invariants.violations(), Vec::<String>::new());
    assert_eq!(invariants.released_with_volumes_after_grace(), 1);
    assert_eq!(
        joiner
            .metric("joiner_termination_volume_waits_cut_total")
            .await,
        1.0,
        "the cut wait is counted"
    );
    assert_eq!(
        joiner
            .metric("joiner_termination_volume_wait_seconds_count")
            .await,
        1.0
    );
    sim.stop().await;
}

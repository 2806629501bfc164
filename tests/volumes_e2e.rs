//! End to end: the real `joiner controller` binary against the in-process API server, with a pod
//! whose PersistentVolumeClaim fixes its zone. The controller reads the PersistentVolumes, claims
//! and StorageClasses from its watch caches; the NodeClaim it launches must be in the volume's zone
//! although the NodePool's cheapest offering is in another.

#[path = "support/apiserver/mod.rs"]
mod apiserver;
#[path = "support/joinerproc.rs"]
mod joinerproc;
#[path = "support/kubesim.rs"]
mod kubesim;

use std::time::Duration;

use joiner::catalog::{CapacityType, Catalog};
use k8s_openapi::api::core::v1::{Namespace, PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::Client;
use serde::de::DeserializeOwned;
use serde_json::{json, Value};

use apiserver::ApiServer;
use joinerproc::{tempdir, Joiner, SYSTEM_NS};
use kubesim::{eventually, nodeclaims};

const NS: &str = "default";
const ZONE: &str = "topology.kubernetes.io/zone";
/// The only instance type of the NodePool: its spot price differs by zone.
const TYPE: &str = "c5.large";

fn object<K: DeserializeOwned>(v: Value) -> K {
    serde_json::from_value(v).expect("test object")
}

/// The zones of the NodePool's offerings, cheapest first (the e2e cloud prices from the bundled
/// us-east-1 catalog).
fn zones_by_price() -> Vec<String> {
    let catalog = Catalog::bundled("us-east-1").expect("bundled catalog");
    let t = catalog
        .instance_types
        .iter()
        .find(|t| t.name == TYPE)
        .expect("c5.large in the catalog");
    let mut spot: Vec<_> = t
        .offerings
        .iter()
        .filter(|o| o.available && o.capacity_type == CapacityType::Spot)
        .collect();
    spot.sort_by(|a, b| a.price.total_cmp(&b.price));
    spot.iter().map(|o| o.zone.clone()).collect()
}

/// A NodePool of spot c5.large only, and its EC2NodeClass.
async fn install_nodepool(client: &Client) {
    joinerproc::install_nodepool(
        client,
        json!({
            "requirements": [
                {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": [TYPE]},
                {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]},
            ],
            "expireAfter": "720h",
        }),
        json!({"limits": {"cpu": "100"}}),
    )
    .await;
}

async fn cluster(name: &str) -> (ApiServer, Client, tempdir::Dir) {
    let server = ApiServer::start().await;
    let client = server.client();
    let ns =
        object(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": SYSTEM_NS}}));
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
        .expect("namespace created");
    joinerproc::weights_for_a_seconds_clock(&client, json!({})).await;
    install_nodepool(&client).await;
    (server, client, tempdir::Dir::new(name))
}

/// StatefulSet `db`'s pod `db-0` with its claim `data-db-0`, which kube-scheduler found no node
/// for (what joiner acts on).
async fn pending_db_pod(client: &Client) {
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    let pod = object(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "db-0", "namespace": NS, "labels": {"app": "db"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "db", "uid": "uid-db", "controller": true}]},
        "spec": {
            "containers": [{"name": "db", "image": "registry.k8s.io/pause:3.9",
                "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}},
                "volumeMounts": [{"name": "data", "mountPath": "/data"}]}],
            "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data-db-0"}}],
        },
    }));
    pods.create(&PostParams::default(), &pod)
        .await
        .expect("pod created");
    let unschedulable = json!({"status": {"conditions": [{"type": "PodScheduled", "status": "False",
        "reason": "Unschedulable", "message": "0/0 nodes are available"}]}});
    pods.patch_status(
        "db-0",
        &PatchParams::default(),
        &Patch::Merge(&unschedulable),
    )
    .await
    .expect("pod marked unschedulable");
}

async fn storage_class(client: &Client, name: &str, allowed_zone: Option<&str>) {
    let mut class = json!({
        "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": name},
        "provisioner": "ebs.csi.aws.com", "volumeBindingMode": "WaitForFirstConsumer",
        "parameters": {"type": "gp3"},
    });
    if let Some(zone) = allowed_zone {
        class["allowedTopologies"] =
            json!([{"matchLabelExpressions": [{"key": ZONE, "values": [zone]}]}]);
    }
    Api::<StorageClass>::all(client.clone())
        .create(&PostParams::default(), &object(class))
        .await
        .expect("storageclass created");
}

/// Claim `data-db-0` of class `class`, bound to `volume` when given (its status written as the
/// PersistentVolume controller writes it).
async fn claim(client: &Client, class: &str, volume: Option<&str>) {
    let api: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), NS);
    let mut spec = json!({"accessModes": ["ReadWriteOnce"], "storageClassName": class,
        "resources": {"requests": {"storage": "10Gi"}}});
    if let Some(v) = volume {
        spec["volumeName"] = json!(v);
    }
    let pvc = object(json!({
        "apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "metadata": {"name": "data-db-0", "namespace": NS}, "spec": spec,
    }));
    api.create(&PostParams::default(), &pvc)
        .await
        .expect("claim created");
    if volume.is_some() {
        let bound = json!({"status": {"phase": "Bound", "accessModes": ["ReadWriteOnce"],
            "capacity": {"storage": "10Gi"}}});
        api.patch_status("data-db-0", &PatchParams::default(), &Patch::Merge(&bound))
            .await
            .expect("claim bound");
    }
}

/// An EBS volume in `zone`, as the CSI driver provisions it, bound to claim `data-db-0`.
async fn ebs_volume(client: &Client, name: &str, zone: &str) {
    let pv = object(json!({
        "apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": name},
        "spec": {
            "capacity": {"storage": "10Gi"}, "accessModes": ["ReadWriteOnce"],
            "persistentVolumeReclaimPolicy": "Delete", "storageClassName": "gp3",
            "claimRef": {"namespace": NS, "name": "data-db-0"},
            "csi": {"driver": "ebs.csi.aws.com", "volumeHandle": "vol-0123456789abcdef0", "fsType": "ext4"},
            "nodeAffinity": {"required": {"nodeSelectorTerms": [
                {"matchExpressions": [{"key": ZONE, "operator": "In", "values": [zone]}]}]}},
        },
    }));
    Api::<PersistentVolume>::all(client.clone())
        .create(&PostParams::default(), &pv)
        .await
        .expect("volume created");
}

/// The zones the one NodeClaim may launch in, and the zone its instance launched in, once it has.
async fn launched_claim(client: &Client, joiner: &Joiner) -> (Vec<String>, String) {
    let launched = eventually(
        Duration::from_secs(60),
        || async {
            nodeclaims(client)
                .list(&ListParams::default())
                .await
                .expect("claims")
                .items
        },
        |claims| {
            claims
                .iter()
                .any(|c| c.data["status"]["providerID"].as_str().is_some())
        },
    )
    .await
    .unwrap_or_else(|c| panic!("no claim launched: {c:?}\n{}", joiner.log()));
    assert_eq!(launched.len(), 1, "one pod, one claim: {launched:?}");
    let claim = &launched[0];
    let zones = claim.data["spec"]["requirements"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|r| r["key"] == ZONE)
        .flat_map(|r| r["values"].as_array().cloned().unwrap_or_default())
        .filter_map(|v| v.as_str().map(str::to_string))
        .collect();
    // aws:///<zone>/<instance>
    let provider_id = claim.data["status"]["providerID"].as_str().unwrap_or("");
    let zone = provider_id
        .trim_start_matches("aws:///")
        .split('/')
        .next()
        .unwrap_or("")
        .to_string();
    (zones, zone)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_whose_bound_volume_is_in_one_zone_gets_a_node_in_that_zone() {
    let volume_zone = "us-east-1b";
    let by_price = zones_by_price();
    assert!(
        by_price.len() > 1 && by_price[0] != volume_zone && by_price.contains(&volume_zone.into()),
        "the volume's zone is offered and not the cheapest: {by_price:?}"
    );
    let (server, client, dir) = cluster("bound-volume").await;
    storage_class(&client, "gp3", None).await;
    ebs_volume(&client, "pv-db-0", volume_zone).await;
    claim(&client, "gp3", Some("pv-db-0")).await;
    pending_db_pod(&client).await;
    let joiner = Joiner::start(&server, &dir, "joiner-a", &["--disable-leader-election"]);
    let (zones, launched_in) = launched_claim(&client, &joiner).await;
    assert_eq!(zones, [volume_zone], "{}", joiner.log());
    assert_eq!(launched_in, volume_zone);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unbound_claim_waiting_for_its_pod_gets_a_node_in_its_class_allowed_zone() {
    let allowed = "us-east-1c";
    let by_price = zones_by_price();
    assert!(
        by_price.len() > 1 && by_price[0] != allowed && by_price.contains(&allowed.into()),
        "the class's zone is offered and not the cheapest: {by_price:?}"
    );
    let (server, client, dir) = cluster("wait-for-consumer").await;
    storage_class(&client, "zonal", Some(allowed)).await;
    claim(&client, "zonal", None).await;
    pending_db_pod(&client).await;
    let joiner = Joiner::start(&server, &dir, "joiner-a", &["--disable-leader-election"]);
    let (zones, launched_in) = launched_claim(&client, &joiner).await;
    assert_eq!(zones, [allowed], "{}", joiner.log());
    assert_eq!(launched_in, allowed);
}

//! Typed API objects read one at a time, as the controller's caches do once per watch event: the
//! same conversions a dump goes through, without the YAML value in between (the object is already
//! typed, so only the conversion to domain types can fail). A failure is kept as [`Unreadable`],
//! which the cache can hold beside the object and clone into every snapshot.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1 as apps;
use k8s_openapi::api::core::v1 as core;
use k8s_openapi::api::policy::v1 as policy;
use k8s_openapi::api::storage::v1 as storage_api;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::domain::volume::{PersistentVolume, PersistentVolumeClaim, StorageClass};
use crate::domain::{DaemonSet, Node, Pod, PodDisruptionBudget};

use super::convert::FieldResult;
use super::{node, pod, policy as pdb, storage, SnapshotError};

/// An object that could not be read: what [`SnapshotError::Object`] says, in a form a cache can
/// clone (the error enum cannot be, it may carry an I/O error).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unreadable {
    pub kind: &'static str,
    /// `namespace/name`, or `name` for cluster-scoped kinds.
    pub object: String,
    pub path: String,
    pub message: String,
}

impl From<Unreadable> for SnapshotError {
    fn from(u: Unreadable) -> Self {
        SnapshotError::Object {
            kind: u.kind.to_string(),
            object: u.object,
            path: u.path,
            message: u.message,
        }
    }
}

pub fn read_pod(object: core::Pod) -> Result<Pod, Unreadable> {
    read(object, "Pod", |o| &o.metadata, pod::convert_pod)
}

pub fn read_node(object: core::Node) -> Result<Node, Unreadable> {
    read(object, "Node", |o| &o.metadata, node::convert_node)
}

pub fn read_daemonset(object: apps::DaemonSet) -> Result<DaemonSet, Unreadable> {
    read(object, "DaemonSet", |o| &o.metadata, pod::convert_daemonset)
}

pub fn read_pdb(object: policy::PodDisruptionBudget) -> Result<PodDisruptionBudget, Unreadable> {
    read(
        object,
        "PodDisruptionBudget",
        |o| &o.metadata,
        pdb::convert_pdb,
    )
}

pub fn read_volume(object: core::PersistentVolume) -> Result<PersistentVolume, Unreadable> {
    read(
        object,
        "PersistentVolume",
        |o| &o.metadata,
        storage::convert_volume,
    )
}

pub fn read_claim(
    object: core::PersistentVolumeClaim,
) -> Result<PersistentVolumeClaim, Unreadable> {
    read(
        object,
        "PersistentVolumeClaim",
        |o| &o.metadata,
        storage::convert_claim,
    )
}

pub fn read_storage_class(object: storage_api::StorageClass) -> Result<StorageClass, Unreadable> {
    read(
        object,
        "StorageClass",
        |o| &o.metadata,
        storage::convert_storage_class,
    )
}

/// A CSINode's attach limits (`allocatable.count` per driver), keyed by its node's name.
pub type AttachLimits = (String, BTreeMap<String, u32>);

pub fn read_csi_node(object: storage_api::CSINode) -> Result<AttachLimits, Unreadable> {
    read(
        object,
        "CSINode",
        |o| &o.metadata,
        storage::convert_csi_node,
    )
}

/// Converts `object`, labelling a failure as the dump reader does (`label_of`).
fn read<K, T>(
    object: K,
    kind: &'static str,
    meta: fn(&K) -> &ObjectMeta,
    convert: fn(K) -> FieldResult<T>,
) -> Result<T, Unreadable> {
    let meta = meta(&object);
    let label = super::label_of(meta.name.as_deref(), meta.namespace.as_deref(), kind);
    convert(object).map_err(|e| Unreadable {
        kind,
        object: label,
        path: e.path,
        message: e.message,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_name_object_and_field_like_a_dump() {
        let yaml = "apiVersion: v1\nkind: Pod\nmetadata: {name: web}\nspec:\n  containers:\n  - name: c\n    resources: {requests: {cpu: lots}}\n";
        let dumped = super::super::parse_snapshot(yaml, "t")
            .unwrap_err()
            .to_string();
        let live = read_pod(serde_yaml_ng::from_str(yaml).unwrap()).unwrap_err();
        assert_eq!(SnapshotError::from(live).to_string(), dumped);
    }

    #[test]
    fn reads_what_a_dump_reads() {
        let yaml = "apiVersion: v1\nkind: Node\nmetadata: {name: n1, labels: {a: b}}\nstatus:\n  capacity: {cpu: \"4\"}\n";
        let dumped = super::super::parse_snapshot(yaml, "t")
            .unwrap()
            .nodes
            .remove(0);
        assert_eq!(
            read_node(serde_yaml_ng::from_str(yaml).unwrap()).unwrap(),
            *dumped
        );
    }

    #[test]
    fn storage_objects_read_as_a_dump_reads_them() {
        let pv = "apiVersion: v1\nkind: PersistentVolume\nmetadata: {name: pv-1}\nspec:\n  csi: {driver: ebs.csi.aws.com, volumeHandle: vol-1}\n  nodeAffinity:\n    required:\n      nodeSelectorTerms:\n      - matchExpressions: [{key: topology.kubernetes.io/zone, operator: In, values: [us-east-1b]}]\n";
        let pvc = "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: data, namespace: db}\nspec: {volumeName: pv-1, storageClassName: gp3}\nstatus: {phase: Bound}\n";
        let sc = "apiVersion: storage.k8s.io/v1\nkind: StorageClass\nmetadata: {name: gp3}\nprovisioner: ebs.csi.aws.com\nvolumeBindingMode: WaitForFirstConsumer\nallowedTopologies:\n- matchLabelExpressions: [{key: topology.kubernetes.io/zone, values: [us-east-1c]}]\n";
        let csi = "apiVersion: storage.k8s.io/v1\nkind: CSINode\nmetadata: {name: n1}\nspec:\n  drivers:\n  - {name: ebs.csi.aws.com, nodeID: i-1, allocatable: {count: 25}}\n";
        let dumped = super::super::parse_snapshot(&[pv, pvc, sc, csi].join("---\n"), "t")
            .unwrap()
            .storage;
        let mut live = crate::domain::Storage::default();
        live.add_volume(read_volume(serde_yaml_ng::from_str(pv).unwrap()).unwrap());
        live.add_claim(read_claim(serde_yaml_ng::from_str(pvc).unwrap()).unwrap());
        live.add_class(read_storage_class(serde_yaml_ng::from_str(sc).unwrap()).unwrap());
        let (node, limits) = read_csi_node(serde_yaml_ng::from_str(csi).unwrap()).unwrap();
        live.add_attach_limits(node, limits);
        assert_eq!(live, dumped);
        assert_eq!(live.attach_limits["n1"]["ebs.csi.aws.com"], 25);
    }

    #[test]
    fn an_unreadable_storage_object_is_named_like_a_dump_names_it() {
        let pvc = "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: data, namespace: db}\nspec: {}\nstatus: {phase: Resizing}\n";
        let dumped = super::super::parse_snapshot(pvc, "t")
            .unwrap_err()
            .to_string();
        let live = read_claim(serde_yaml_ng::from_str(pvc).unwrap()).unwrap_err();
        assert_eq!(live.object, "db/data");
        assert_eq!(live.path, "status.phase");
        assert_eq!(SnapshotError::from(live).to_string(), dumped);
        let sc = "apiVersion: storage.k8s.io/v1\nkind: StorageClass\nmetadata: {name: odd}\nprovisioner: ebs.csi.aws.com\nvolumeBindingMode: Later\n";
        let live = read_storage_class(serde_yaml_ng::from_str(sc).unwrap()).unwrap_err();
        assert_eq!(
            (live.kind, live.path.as_str()),
            ("StorageClass", "volumeBindingMode")
        );
    }
}

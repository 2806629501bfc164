//! Typed API objects read one at a time, as the controller's caches do once per watch event: the
//! same conversions a dump goes through, without the YAML value in between (the object is already
//! typed, so only the conversion to domain types can fail). A failure is kept as [`Unreadable`],
//! which the cache can hold beside the object and clone into every snapshot.

use k8s_openapi::api::apps::v1 as apps;
use k8s_openapi::api::core::v1 as core;
use k8s_openapi::api::policy::v1 as policy;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::domain::{DaemonSet, Node, Pod, PodDisruptionBudget};

use super::convert::FieldResult;
use super::{node, pod, policy as pdb, SnapshotError};

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
}

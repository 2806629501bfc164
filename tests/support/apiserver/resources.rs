//! The table of resource kinds the server knows, and lookups into it.

/// What happens to `status` in a create request (each kind's registry strategy differs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CreateStatus {
    /// Status is stored as sent (nodes: the kubelet registers a node with its status).
    Keep,
    /// Status is dropped (custom resources with a status subresource, PodDisruptionBudgets).
    Clear,
    /// Status is reset to `{"phase": "Pending"}` (pods).
    PodPending,
}

/// One served resource: where it lives in the URL space and how its registry behaves.
#[derive(Debug, PartialEq, Eq)]
pub struct ResourceInfo {
    pub group: &'static str,
    pub version: &'static str,
    pub plural: &'static str,
    pub singular: &'static str,
    pub kind: &'static str,
    pub namespaced: bool,
    /// Has a `/status` subresource: updates of the main resource keep the stored status, and
    /// `metadata.generation` is bumped on changes outside metadata and status.
    pub status_subresource: bool,
    pub create_status: CreateStatus,
}

impl ResourceInfo {
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.to_string()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// `plural` for the core group, `plural.group` otherwise (kubectl's spelling, and the key used
    /// by request counters and fault matchers).
    pub fn qualified(&self) -> String {
        if self.group.is_empty() {
            self.plural.to_string()
        } else {
            format!("{}.{}", self.plural, self.group)
        }
    }

    pub fn is(&self, group: &str, plural: &str) -> bool {
        self.group == group && self.plural == plural
    }

    pub fn is_pod(&self) -> bool {
        self.is("", "pods")
    }

    pub fn is_pdb(&self) -> bool {
        self.is("policy", "poddisruptionbudgets")
    }
}

#[allow(clippy::too_many_arguments)] // a table row; named fields would triple the table
const fn res(
    group: &'static str,
    version: &'static str,
    plural: &'static str,
    singular: &'static str,
    kind: &'static str,
    namespaced: bool,
    status_subresource: bool,
    create_status: CreateStatus,
) -> ResourceInfo {
    ResourceInfo {
        group,
        version,
        plural,
        singular,
        kind,
        namespaced,
        status_subresource,
        create_status,
    }
}

use CreateStatus::{Clear, Keep, PodPending};

pub static RESOURCES: &[ResourceInfo] = &[
    res("", "v1", "pods", "pod", "Pod", true, true, PodPending),
    res("", "v1", "nodes", "node", "Node", false, true, Keep),
    res(
        "",
        "v1",
        "configmaps",
        "configmap",
        "ConfigMap",
        true,
        false,
        Keep,
    ),
    res("", "v1", "events", "event", "Event", true, false, Keep),
    res(
        "",
        "v1",
        "namespaces",
        "namespace",
        "Namespace",
        false,
        true,
        Keep,
    ),
    res(
        "apps",
        "v1",
        "daemonsets",
        "daemonset",
        "DaemonSet",
        true,
        true,
        Clear,
    ),
    res(
        "apps",
        "v1",
        "replicasets",
        "replicaset",
        "ReplicaSet",
        true,
        true,
        Clear,
    ),
    res(
        "policy",
        "v1",
        "poddisruptionbudgets",
        "poddisruptionbudget",
        "PodDisruptionBudget",
        true,
        true,
        Clear,
    ),
    res(
        "coordination.k8s.io",
        "v1",
        "leases",
        "lease",
        "Lease",
        true,
        false,
        Keep,
    ),
    res(
        "events.k8s.io",
        "v1",
        "events",
        "event",
        "Event",
        true,
        false,
        Keep,
    ),
    res(
        "karpenter.sh",
        "v1",
        "nodepools",
        "nodepool",
        "NodePool",
        false,
        true,
        Clear,
    ),
    res(
        "karpenter.sh",
        "v1",
        "nodeclaims",
        "nodeclaim",
        "NodeClaim",
        false,
        true,
        Clear,
    ),
    res(
        "karpenter.k8s.aws",
        "v1",
        "ec2nodeclasses",
        "ec2nodeclass",
        "EC2NodeClass",
        false,
        true,
        Clear,
    ),
    // PersistentVolume and claim creation resets the status (the PV controller then binds)
    res(
        "",
        "v1",
        "persistentvolumes",
        "persistentvolume",
        "PersistentVolume",
        false,
        true,
        Clear,
    ),
    res(
        "",
        "v1",
        "persistentvolumeclaims",
        "persistentvolumeclaim",
        "PersistentVolumeClaim",
        true,
        true,
        Clear,
    ),
    res(
        "storage.k8s.io",
        "v1",
        "storageclasses",
        "storageclass",
        "StorageClass",
        false,
        false,
        Keep,
    ),
    res(
        "storage.k8s.io",
        "v1",
        "csinodes",
        "csinode",
        "CSINode",
        false,
        false,
        Keep,
    ),
    // the attach/detach controller writes status (attached) after creating one (attach.rs)
    res(
        "storage.k8s.io",
        "v1",
        "volumeattachments",
        "volumeattachment",
        "VolumeAttachment",
        false,
        true,
        Clear,
    ),
];

/// The resource served at `group`/`version` under `plural`.
pub fn by_path(group: &str, version: &str, plural: &str) -> Option<&'static ResourceInfo> {
    RESOURCES
        .iter()
        .find(|r| r.group == group && r.version == version && r.plural == plural)
}

/// The resource for an object's `apiVersion` and `kind`.
pub fn by_kind(api_version: &str, kind: &str) -> Option<&'static ResourceInfo> {
    RESOURCES
        .iter()
        .find(|r| r.api_version() == api_version && r.kind == kind)
}

/// `plural` (the core group wins, so "events" is core/v1 events) or `plural.group`.
pub fn by_name(name: &str) -> Option<&'static ResourceInfo> {
    RESOURCES
        .iter()
        .find(|r| r.plural == name && r.group.is_empty())
        .or_else(|| RESOURCES.iter().find(|r| r.qualified() == name))
        .or_else(|| RESOURCES.iter().find(|r| r.plural == name))
}

/// The distinct API groups (besides core) with their single served version.
pub fn groups() -> Vec<(&'static str, &'static str)> {
    let mut out: Vec<(&str, &str)> = Vec::new();
    for r in RESOURCES.iter().filter(|r| !r.group.is_empty()) {
        if !out.iter().any(|(g, _)| *g == r.group) {
            out.push((r.group, r.version));
        }
    }
    out
}

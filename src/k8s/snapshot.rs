//! The snapshot decisions read, built from the caches through the same conversions `joiner solve`
//! applies to a dump, so a live cluster and its `kubectl get -o yaml` decide alike. Pods, nodes,
//! DaemonSets and PodDisruptionBudgets were converted as their watch events arrived and are only
//! cloned here; the few other objects are read as a dump's are. One object that cannot be read is
//! left out and reported; it never stops decisions for the others.

use kube::api::DynamicObject;
use serde_yaml_ng::Value;

use super::caches::Caches;
use crate::domain::ClusterSnapshot;
use crate::snapshot::live::Unreadable;
use crate::snapshot::{from_values, SnapshotError};

/// The snapshot and the objects that could not be read (in the order of kinds a dump is read).
pub fn build(caches: &Caches) -> (ClusterSnapshot, Vec<SnapshotError>) {
    let mut unreadable = Vec::new();
    let pods = caches.pods.state();
    let pods = readable(
        pods.iter()
            .filter(|p| !p.value.waits_for_scheduler)
            .map(|p| &p.value.pod),
        &mut unreadable,
    );
    let nodes = readable(
        caches.nodes.state().iter().map(|n| &n.value.node),
        &mut unreadable,
    );
    let daemonsets = readable(
        caches.daemonsets.state().iter().map(|d| &d.value),
        &mut unreadable,
    );
    let pdbs = readable(
        caches.pdbs.state().iter().map(|p| &p.value),
        &mut unreadable,
    );
    // The remaining kinds go through the dump's reader, YAML value and all, one object at a time:
    // a 5,000-node plan's NodeClaims held as YAML values at once took about 100 MB.
    let config_maps = caches.config_maps.state();
    let (pools, claims, classes) = (
        caches.nodepools.state(),
        caches.nodeclaims.state(),
        caches.nodeclasses.state(),
    );
    let values = config_maps
        .iter()
        .filter_map(|o| serde_yaml_ng::to_value(&**o).ok())
        .chain(
            pools
                .iter()
                .filter_map(|o| dynamic_value(o, "karpenter.sh/v1", "NodePool")),
        )
        .chain(
            claims
                .iter()
                .filter_map(|o| dynamic_value(o, "karpenter.sh/v1", "NodeClaim")),
        )
        .chain(
            classes
                .iter()
                .filter_map(|o| dynamic_value(o, "karpenter.k8s.aws/v1", "EC2NodeClass")),
        );
    let (mut snapshot, errors) = from_values(values, "cluster");
    (
        snapshot.pods,
        snapshot.nodes,
        snapshot.daemonsets,
        snapshot.pdbs,
    ) = (pods, nodes, daemonsets, pdbs);
    let mut unreadable: Vec<SnapshotError> =
        unreadable.into_iter().map(SnapshotError::from).collect();
    unreadable.extend(errors);
    (snapshot, unreadable)
}

/// The objects read, cloned out of the cache; the failures are added to `unreadable`.
fn readable<'a, T: Clone + 'a>(
    items: impl Iterator<Item = &'a Result<T, Unreadable>>,
    unreadable: &mut Vec<Unreadable>,
) -> Vec<T> {
    let mut out = Vec::new();
    for item in items {
        match item {
            Ok(t) => out.push(t.clone()),
            Err(e) => unreadable.push(e.clone()),
        }
    }
    out
}

/// A dynamic object as the YAML value of its manifest (list items may lack apiVersion and kind).
fn dynamic_value(o: &DynamicObject, api_version: &str, kind: &str) -> Option<Value> {
    let mut v = serde_yaml_ng::to_value(o).ok()?;
    let m = v.as_mapping_mut()?;
    m.insert("apiVersion".into(), api_version.into());
    m.insert("kind".into(), kind.into());
    Some(v)
}

/// An unbound pod kube-scheduler has not yet given up on (no `PodScheduled=False` with reason
/// `Unschedulable`): as Karpenter does, joiner leaves it to the scheduler, so the two never race.
pub fn waits_for_scheduler(pod: &k8s_openapi::api::core::v1::Pod) -> bool {
    let unbound = pod
        .spec
        .as_ref()
        .is_none_or(|s| s.node_name.as_deref().is_none_or(str::is_empty));
    let terminal = pod
        .status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .is_some_and(|p| p == "Succeeded" || p == "Failed");
    if !unbound || terminal || pod.metadata.deletion_timestamp.is_some() {
        return false;
    }
    let conditions = pod.status.as_ref().and_then(|s| s.conditions.as_ref());
    !conditions.is_some_and(|cs| {
        cs.iter().any(|c| {
            c.type_ == "PodScheduled"
                && c.status == "False"
                && c.reason.as_deref() == Some("Unschedulable")
        })
    })
}

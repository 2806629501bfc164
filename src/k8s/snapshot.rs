//! The snapshot decisions read, built from the caches through the same conversions `joiner solve`
//! applies to a dump, so a live cluster and its `kubectl get -o yaml` decide alike. Pods, nodes,
//! DaemonSets, PodDisruptionBudgets and the storage objects were converted as their watch events
//! arrived and are only cloned here; the few other objects are read as a dump's are. Every
//! snapshot's pod volumes are resolved against the storage objects it holds, as a dump's are. One
//! object that cannot be read is left out and reported; it never stops decisions for the others.

use std::collections::HashMap;
use std::sync::{Arc, PoisonError};

use kube::api::DynamicObject;
use serde_yaml_ng::Value;

use super::cached::Shared;
use super::caches::Caches;
use crate::domain::volume::{ebs_attach_resource, EBS_CSI_DRIVER};
use crate::domain::{ClusterSnapshot, Node, Pod, PodConstraints, Storage};
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
    let storage = storage(caches, &mut unreadable);
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
        snapshot.storage,
    ) = (pods, nodes, daemonsets, pdbs, storage);
    caches
        .resolved
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .resolve(&mut snapshot);
    let mut unreadable: Vec<SnapshotError> =
        unreadable.into_iter().map(SnapshotError::from).collect();
    unreadable.extend(errors);
    (snapshot, unreadable)
}

/// The storage objects of the caches; the unreadable ones are added to `unreadable`.
fn storage(caches: &Caches, unreadable: &mut Vec<Unreadable>) -> Storage {
    let mut storage = Storage::default();
    let volumes = caches.volumes.state();
    for v in readable(volumes.iter().map(|o| &o.value), unreadable) {
        storage.add_volume(v);
    }
    let claims = caches.volume_claims.state();
    for c in readable(claims.iter().map(|o| &o.value), unreadable) {
        storage.add_claim(c);
    }
    let classes = caches.storage_classes.state();
    for c in readable(classes.iter().map(|o| &o.value), unreadable) {
        storage.add_class(c);
    }
    let csi_nodes = caches.csi_nodes.state();
    for (node, limits) in readable(csi_nodes.iter().map(|o| &o.value), unreadable) {
        storage.add_attach_limits(node, limits);
    }
    storage
}

/// What the last snapshot's volume resolution made of each cached pod with volumes and each cached
/// node, so that the next snapshot starts from it. A pod whose cached object and whose storage
/// objects are unchanged keeps its copy unresolved; the others are resolved again, from their
/// copies, so `ClusterSnapshot::resolve_volumes` copies only what changed. Without this, every
/// step would resolve and copy every pod with a claim, and every node once a pod attaches an EBS
/// volume (benches/controller.rs measures `build`).
#[derive(Debug, Default)]
pub struct Resolved {
    /// The storage objects the copies were resolved against.
    storage: Storage,
    /// By the cached pod's address: the cached pod and its resolved copy. The cached `Arc` is held
    /// so that no other object can take its address while the entry lives.
    pods: HashMap<usize, (Arc<Pod>, Arc<Pod>)>,
    /// By the cached node's address: the cached node and its resolved copy, with the CSINode EBS
    /// limit the copy was resolved under.
    nodes: HashMap<usize, (NodeCopy, Option<u32>)>,
    /// One copy of equal resolved constraints: the replicas of a StatefulSet in one zone demand
    /// the same.
    constraints: Shared<PodConstraints>,
}

/// A cached node and its resolved copy.
type NodeCopy = (Arc<Node>, Arc<Node>);

/// A pod with volumes in this snapshot: its index, its cached object, the constraints it had before
/// resolution, and whether its copy still holds.
struct PodSlot {
    index: usize,
    cached: Arc<Pod>,
    constraints: *const PodConstraints,
    current: bool,
}

fn address<T>(a: &Arc<T>) -> usize {
    Arc::as_ptr(a) as usize
}

fn attaches(pod: &Pod, ebs: &str) -> bool {
    pod.constraints.requests.get(ebs).milli() > 0
}

impl Resolved {
    /// Resolves `snapshot`'s volumes, whose pods and nodes are the caches' own, starting from the
    /// copies the last call made of them.
    pub fn resolve(&mut self, snapshot: &mut ClusterSnapshot) {
        let same_storage = self.storage == snapshot.storage;
        let mut pods = Vec::new();
        for (index, pod) in snapshot.pods.iter_mut().enumerate() {
            if pod.volumes.is_empty() {
                continue;
            }
            let cached = pod.clone();
            let copy = self
                .pods
                .remove(&address(&cached))
                .filter(|(c, _)| Arc::ptr_eq(c, &cached));
            let current = copy.is_some() && same_storage;
            if let Some((_, copy)) = copy {
                *pod = copy;
            }
            let constraints = Arc::as_ptr(&pod.constraints);
            pods.push(PodSlot {
                index,
                cached,
                constraints,
                current,
            });
        }
        let nodes = self.start_nodes(snapshot);
        for slot in pods.iter().filter(|p| !p.current) {
            snapshot.storage.resolve_pod(&mut snapshot.pods[slot.index]);
        }
        snapshot.apply_attach_limits();
        if !same_storage {
            self.storage = snapshot.storage.clone();
        }
        self.keep(snapshot, pods, nodes);
    }

    /// Puts each node's copy in its place where the copy holds (same cached node, same limit).
    fn start_nodes(
        &mut self,
        snapshot: &mut ClusterSnapshot,
    ) -> Vec<(usize, Arc<Node>, Option<u32>)> {
        let mut nodes = Vec::new();
        for (i, node) in snapshot.nodes.iter_mut().enumerate() {
            let cached = node.clone();
            let limit = snapshot
                .storage
                .attach_limits
                .get(&node.name)
                .and_then(|d| d.get(EBS_CSI_DRIVER))
                .copied();
            if let Some(((_, copy), _)) = self
                .nodes
                .remove(&address(&cached))
                .filter(|((c, _), l)| Arc::ptr_eq(c, &cached) && *l == limit)
            {
                *node = copy;
            }
            nodes.push((i, cached, limit));
        }
        nodes
    }

    /// Keeps this snapshot's copies for the next. A node's copy stands only while some pod attaches
    /// EBS volumes: without one, resolution leaves nodes as they are cached.
    fn keep(
        &mut self,
        snapshot: &mut ClusterSnapshot,
        pods: Vec<PodSlot>,
        nodes: Vec<(usize, Arc<Node>, Option<u32>)>,
    ) {
        let ebs = ebs_attach_resource();
        let mut attaching = false;
        self.pods.clear();
        for slot in pods {
            let pod = &mut snapshot.pods[slot.index];
            // constraints written just now are a fresh copy: shared with equal ones from here on
            if Arc::as_ptr(&pod.constraints) != slot.constraints {
                if let Some(p) = Arc::get_mut(pod) {
                    p.constraints = self.constraints.share(&p.constraints);
                }
            }
            attaching |= attaches(pod, &ebs);
            self.pods
                .insert(address(&slot.cached), (slot.cached, pod.clone()));
        }
        self.nodes.clear();
        for (i, cached, limit) in nodes {
            if attaching {
                let copy = snapshot.nodes[i].clone();
                self.nodes.insert(address(&cached), ((cached, copy), limit));
            } else {
                snapshot.nodes[i] = cached;
            }
        }
    }
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

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1 as core;
    use k8s_openapi::api::storage::v1 as storage_api;
    use kube::runtime::reflector::store::Writer;
    use kube::runtime::watcher::Event;
    use serde::de::DeserializeOwned;

    use super::*;
    use crate::domain::volume::UNLIMITED_ATTACHMENTS;
    use crate::domain::Quantity;
    use crate::k8s::cached::{
        self, Cached, CachedClaim, CachedCsiNode, CachedNode, CachedPod, CachedVolume,
    };
    use crate::k8s::caches::karpenter_resource;
    use crate::snapshot::live;

    /// Caches fed by hand, as the watch tasks feed them.
    struct Fed {
        caches: Caches,
        pods: Writer<CachedPod>,
        nodes: Writer<CachedNode>,
        volumes: Writer<CachedVolume>,
        claims: Writer<CachedClaim>,
        csi_nodes: Writer<CachedCsiNode>,
    }

    fn fed() -> Fed {
        let (pods, nodes) = (Writer::new(()), Writer::new(()));
        let (volumes, claims, csi_nodes) = (Writer::new(()), Writer::new(()), Writer::new(()));
        let dynamic = |kind| Writer::<DynamicObject>::new(karpenter_resource(kind)).as_reader();
        let caches = Caches {
            pods: pods.as_reader(),
            nodes: nodes.as_reader(),
            daemonsets: Writer::new(()).as_reader(),
            pdbs: Writer::new(()).as_reader(),
            config_maps: Writer::new(()).as_reader(),
            nodepools: dynamic("NodePool"),
            nodeclaims: dynamic("NodeClaim"),
            nodeclasses: dynamic("EC2NodeClass"),
            volumes: volumes.as_reader(),
            volume_claims: claims.as_reader(),
            storage_classes: Writer::new(()).as_reader(),
            csi_nodes: csi_nodes.as_reader(),
            resolved: Arc::default(),
        };
        Fed {
            caches,
            pods,
            nodes,
            volumes,
            claims,
            csi_nodes,
        }
    }

    fn object<K: DeserializeOwned>(yaml: &str) -> K {
        serde_yaml_ng::from_str(yaml).expect("test object")
    }

    fn apply<K, T>(w: &mut Writer<Cached<K, T>>, yaml: &str, read: impl FnOnce(K) -> T)
    where
        K: kube::Resource<DynamicType = ()> + DeserializeOwned,
        T: Clone,
    {
        w.apply_watcher_event(&Event::Apply(Cached::new(object(yaml), read)));
    }

    fn delete<K, T>(w: &mut Writer<Cached<K, T>>, yaml: &str, read: impl FnOnce(K) -> T)
    where
        K: kube::Resource<DynamicType = ()> + DeserializeOwned,
        T: Clone,
    {
        w.apply_watcher_event(&Event::Delete(Cached::new(object(yaml), read)));
    }

    const NODE: &str = "metadata: {name: n1, labels: {topology.kubernetes.io/zone: us-east-1b}}\nstatus: {capacity: {cpu: '4', pods: '110'}}\n";
    const POD: &str = "metadata: {name: db-0, namespace: db}\nspec:\n  nodeName: n1\n  containers: [{name: c, image: i}]\n  volumes: [{name: data, persistentVolumeClaim: {claimName: data-db-0}}]\n";
    const CLAIM: &str = "metadata: {name: data-db-0, namespace: db}\nspec: {volumeName: pv-a}\nstatus: {phase: Bound}\n";
    const CSI_NODE: &str = "metadata: {name: n1}\nspec:\n  drivers: [{name: ebs.csi.aws.com, nodeID: i-1, allocatable: {count: 25}}]\n";

    fn volume(zone: &str) -> String {
        format!("metadata: {{name: pv-a}}\nspec:\n  csi: {{driver: ebs.csi.aws.com, volumeHandle: vol-1}}\n  nodeAffinity:\n    required:\n      nodeSelectorTerms:\n      - matchExpressions: [{{key: topology.kubernetes.io/zone, operator: In, values: [{zone}]}}]\n")
    }

    fn read_pod(p: core::Pod) -> cached::PodEntry {
        cached::PodReader::default().read(p)
    }

    /// The snapshot as a resolution from scratch makes it, from the same caches.
    fn from_scratch(caches: &Caches) -> ClusterSnapshot {
        let fresh = Caches {
            resolved: Arc::default(),
            ..caches.clone()
        };
        build(&fresh).0
    }

    fn zones(pod: &Pod) -> Vec<String> {
        pod.constraints
            .volume_requirements
            .iter()
            .flat_map(|s| s.terms.iter().flatten())
            .flat_map(|r| r.values.clone())
            .collect()
    }

    fn node<'a>(snapshot: &'a ClusterSnapshot, name: &str) -> &'a Arc<Node> {
        snapshot
            .nodes
            .iter()
            .find(|n| n.name == name)
            .expect("node")
    }

    fn attach_limit(node: &Node) -> Quantity {
        node.allocatable.get(&ebs_attach_resource())
    }

    #[test]
    fn every_snapshot_resolves_volumes_against_the_storage_it_holds() {
        let mut f = fed();
        apply(&mut f.nodes, NODE, cached::read_node);
        apply(&mut f.pods, POD, read_pod);
        apply(&mut f.claims, CLAIM, live::read_claim);
        apply(&mut f.volumes, &volume("us-east-1b"), live::read_volume);
        apply(&mut f.csi_nodes, CSI_NODE, live::read_csi_node);

        let (first, errors) = build(&f.caches);
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(first.storage.claims.len(), 1);
        assert_eq!(zones(&first.pods[0]), ["us-east-1b"]);
        assert_eq!(first.pods[0].constraints.volume_error, None);
        let ebs = ebs_attach_resource();
        assert_eq!(
            first.pods[0].constraints.requests.get(&ebs),
            Quantity::from_units(1)
        );
        assert_eq!(attach_limit(&first.nodes[0]), Quantity::from_units(25));
        assert_eq!(first, from_scratch(&f.caches));

        // nothing changed: the same copies again, none made
        let (second, _) = build(&f.caches);
        assert!(Arc::ptr_eq(&first.pods[0], &second.pods[0]));
        assert!(Arc::ptr_eq(&first.nodes[0], &second.nodes[0]));

        // a node joins without a CSINode: it has no limit, though no pod is resolved again
        apply(&mut f.nodes, &NODE.replace("n1", "n2"), cached::read_node);
        let (joined, _) = build(&f.caches);
        assert!(Arc::ptr_eq(&first.pods[0], &joined.pods[0]));
        assert!(Arc::ptr_eq(&first.nodes[0], node(&joined, "n1")));
        assert_eq!(
            attach_limit(node(&joined, "n2")),
            Quantity::from_units(UNLIMITED_ATTACHMENTS)
        );
        assert_eq!(joined, from_scratch(&f.caches));
        drop((first, second, joined));

        // the volume moves, the CSINode goes: the next snapshot follows both
        apply(&mut f.volumes, &volume("us-east-1c"), live::read_volume);
        delete(&mut f.csi_nodes, CSI_NODE, live::read_csi_node);
        let (third, _) = build(&f.caches);
        assert_eq!(zones(&third.pods[0]), ["us-east-1c"]);
        assert_eq!(
            attach_limit(node(&third, "n1")),
            Quantity::from_units(UNLIMITED_ATTACHMENTS)
        );
        assert_eq!(third, from_scratch(&f.caches));

        // the claim goes: the pod is unschedulable, naming it
        delete(&mut f.claims, CLAIM, live::read_claim);
        let (fourth, _) = build(&f.caches);
        let error = fourth.pods[0].constraints.volume_error.clone();
        assert!(
            error.as_deref().is_some_and(|e| e.contains("db/data-db-0")),
            "{error:?}"
        );
        assert_eq!(fourth.pods[0].constraints.volume_requirements, vec![]);
        assert_eq!(fourth, from_scratch(&f.caches));

        // no pod attaches a volume: nodes are left as cached
        delete(&mut f.pods, POD, read_pod);
        let (fifth, _) = build(&f.caches);
        for cached in f.caches.nodes.state() {
            let cached = cached.value.node.clone().unwrap();
            let n = node(&fifth, &cached.name);
            assert_eq!(attach_limit(n), Quantity::from_units(0));
            assert!(Arc::ptr_eq(n, &cached));
        }
        assert_eq!(fifth, from_scratch(&f.caches));
    }

    #[test]
    fn an_unreadable_storage_object_is_reported_and_left_out() {
        let mut f = fed();
        apply(&mut f.pods, POD, read_pod);
        let bad = "metadata: {name: data-db-0, namespace: db}\nspec: {volumeName: pv-a}\nstatus: {phase: Resizing}\n";
        apply(&mut f.claims, bad, live::read_claim);
        let mut classes = Writer::<cached::CachedStorageClass>::new(());
        let caches = Caches {
            storage_classes: classes.as_reader(),
            ..f.caches.clone()
        };
        apply(
            &mut classes,
            "metadata: {name: gp3}\nprovisioner: ebs.csi.aws.com\nvolumeBindingMode: Sometimes\n",
            live::read_storage_class,
        );
        let (snapshot, errors) = build(&caches);
        let errors: Vec<String> = errors.iter().map(ToString::to_string).collect();
        assert_eq!(errors.len(), 2, "{errors:?}");
        assert!(errors[0].starts_with("PersistentVolumeClaim db/data-db-0: status.phase:"));
        assert!(errors[1].starts_with("StorageClass gp3: volumeBindingMode:"));
        assert!(snapshot.storage.is_empty());
        let error = snapshot.pods[0].constraints.volume_error.as_deref();
        assert!(
            error.is_some_and(|e| e.contains("is not found")),
            "{error:?}"
        );
    }

    #[test]
    fn a_storage_class_and_claim_read_from_the_caches_place_an_unbound_volume() {
        let mut f = fed();
        let mut classes = Writer::<cached::CachedStorageClass>::new(());
        let caches = Caches {
            storage_classes: classes.as_reader(),
            ..f.caches.clone()
        };
        apply(&mut f.pods, POD, read_pod);
        let claim = "metadata: {name: data-db-0, namespace: db}\nspec: {storageClassName: zonal}\n";
        apply(&mut f.claims, claim, live::read_claim);
        let class: storage_api::StorageClass = object(
            "metadata: {name: zonal}\nprovisioner: ebs.csi.aws.com\nvolumeBindingMode: WaitForFirstConsumer\nallowedTopologies:\n- matchLabelExpressions: [{key: topology.kubernetes.io/zone, values: [us-east-1c]}]\n",
        );
        classes.apply_watcher_event(&Event::Apply(Cached::new(class, live::read_storage_class)));
        let (snapshot, errors) = build(&caches);
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(zones(&snapshot.pods[0]), ["us-east-1c"]);
    }
}

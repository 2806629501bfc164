//! What the caches keep of the kinds decisions read in domain form (pods, nodes, DaemonSets,
//! PodDisruptionBudgets and the storage objects: PersistentVolumes, PersistentVolumeClaims,
//! StorageClasses, CSINodes): the object's identity and its domain form, converted once per watch
//! event, instead of the full API object (a k8s-openapi Pod is several KB even when mostly empty, and re-converting 50,000 of
//! them through YAML values at every decision step dominated the controller's memory).

use std::borrow::Cow;
use std::collections::HashSet;
use std::hash::Hash;
use std::marker::PhantomData;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{self as core, ObjectReference};
use k8s_openapi::api::storage::v1 as storage;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::runtime::reflector::Lookup;
use kube::runtime::watcher::Event;
use kube::Resource;

use crate::domain::volume::{PersistentVolume, PersistentVolumeClaim, StorageClass};
use crate::domain::{self, Labels, PodConstraints};
use crate::snapshot::live::{self, AttachLimits, Unreadable};

/// One cached object of API kind `K`: its identity and `value`, what decisions read of it.
#[derive(Debug)]
pub struct Cached<K, T> {
    name: String,
    namespace: Option<String>,
    uid: Option<String>,
    pub value: T,
    /// `K` only names the kind (for the store's keys and Event references); no `K` is kept.
    api: PhantomData<fn() -> K>,
}

// By hand: a derive would require `K: Clone`, though no `K` is held.
impl<K, T: Clone> Clone for Cached<K, T> {
    fn clone(&self) -> Self {
        Cached {
            name: self.name.clone(),
            namespace: self.namespace.clone(),
            uid: self.uid.clone(),
            value: self.value.clone(),
            api: PhantomData,
        }
    }
}

impl<K: Resource<DynamicType = ()>, T> Cached<K, T> {
    /// Keeps `object`'s identity and what `read` makes of it.
    pub fn new(object: K, read: impl FnOnce(K) -> T) -> Self {
        let meta = object.meta();
        let (name, namespace, uid) = (
            meta.name.clone().unwrap_or_default(),
            meta.namespace.clone(),
            meta.uid.clone(),
        );
        Cached {
            name,
            namespace,
            uid,
            value: read(object),
            api: PhantomData,
        }
    }

    /// A reference to the object, as `Resource::object_ref` writes it (for Events about it).
    pub fn object_ref(&self) -> ObjectReference {
        ObjectReference {
            name: Some(self.name.clone()),
            namespace: self.namespace.clone(),
            uid: self.uid.clone(),
            api_version: Some(K::api_version(&()).to_string()),
            kind: Some(K::kind(&()).to_string()),
            ..Default::default()
        }
    }

    pub fn name(&self) -> &str {
        &self.name
    }
}

/// A watch event with its object converted by `read`.
pub fn convert_event<K: Resource<DynamicType = ()>, T>(
    event: Event<K>,
    read: &mut impl FnMut(K) -> T,
) -> Event<Cached<K, T>> {
    match event {
        Event::Apply(o) => Event::Apply(Cached::new(o, read)),
        Event::Delete(o) => Event::Delete(Cached::new(o, read)),
        Event::Init => Event::Init,
        Event::InitApply(o) => Event::InitApply(Cached::new(o, read)),
        Event::InitDone => Event::InitDone,
    }
}

// The store keys objects by kind, namespace and name as it does API objects.
impl<K: Resource<DynamicType = ()>, T> Lookup for Cached<K, T> {
    type DynamicType = ();

    fn kind(dt: &()) -> Cow<'_, str> {
        K::kind(dt)
    }

    fn group(dt: &()) -> Cow<'_, str> {
        K::group(dt)
    }

    fn version(dt: &()) -> Cow<'_, str> {
        K::version(dt)
    }

    fn plural(dt: &()) -> Cow<'_, str> {
        K::plural(dt)
    }

    fn name(&self) -> Option<Cow<'_, str>> {
        Some(Cow::Borrowed(&self.name))
    }

    fn namespace(&self) -> Option<Cow<'_, str>> {
        self.namespace.as_deref().map(Cow::Borrowed)
    }

    /// Not kept: nothing reads it, and every event replaces the entry anyway.
    fn resource_version(&self) -> Option<Cow<'_, str>> {
        None
    }

    fn uid(&self) -> Option<Cow<'_, str>> {
        self.uid.as_deref().map(Cow::Borrowed)
    }
}

/// A pod: its domain form, and whether kube-scheduler still owns it (decided on the object as
/// this event left it, so the filter follows the pod's current state).
#[derive(Debug, Clone)]
pub struct PodEntry {
    /// Shared with every snapshot built while the pod is unchanged.
    pub pod: Result<Arc<domain::Pod>, Unreadable>,
    pub waits_for_scheduler: bool,
}

/// Reads pods for the cache, keeping one copy of equal labels and of equal constraints: the
/// replicas of a workload carry and require the same, and a large cluster runs tens of thousands.
#[derive(Debug, Default)]
pub struct PodReader {
    labels: Shared<Labels>,
    constraints: Shared<PodConstraints>,
}

impl PodReader {
    pub fn read(&mut self, object: core::Pod) -> PodEntry {
        let waits_for_scheduler = super::snapshot::waits_for_scheduler(&object);
        let mut pod = live::read_pod(object);
        if let Ok(p) = &mut pod {
            p.labels = self.labels.share(&p.labels);
            p.constraints = self.constraints.share(&p.constraints);
        }
        PodEntry {
            pod: pod.map(Arc::new),
            waits_for_scheduler,
        }
    }
}

/// One copy of each distinct value.
#[derive(Debug)]
pub(crate) struct Shared<T> {
    kept: HashSet<Arc<T>>,
    /// How many values were kept after the last sweep.
    swept: usize,
}

impl<T> Default for Shared<T> {
    fn default() -> Self {
        Shared {
            kept: HashSet::new(),
            swept: 0,
        }
    }
}

/// Values are swept no more often than every this many new ones.
const SWEEP_AFTER: usize = 1024;

impl<T: Eq + Hash> Shared<T> {
    pub(crate) fn share(&mut self, value: &Arc<T>) -> Arc<T> {
        if let Some(kept) = self.kept.get(&**value) {
            return kept.clone();
        }
        // values only this set still holds belong to pods gone or changed since
        if self.kept.len() >= self.swept * 2 + SWEEP_AFTER {
            self.kept.retain(|v| Arc::strong_count(v) > 1);
            self.swept = self.kept.len();
        }
        self.kept.insert(value.clone());
        value.clone()
    }
}

/// A node: its domain form, and the fields of the object the NodeClaim lifecycle reads and
/// rewrites (`lifecycle.rs`, the disruption taint), kept as the API server has them: it acts on
/// a node whether or not the node converts, and rewrites taint lists keeping `timeAdded`.
#[derive(Debug, Clone)]
pub struct NodeEntry {
    /// Shared with every snapshot built while the node is unchanged.
    pub node: Result<Arc<domain::Node>, Unreadable>,
    pub object: core::Node,
}

pub fn read_node(object: core::Node) -> NodeEntry {
    let kept = lifecycle_fields(&object);
    NodeEntry {
        node: live::read_node(object).map(Arc::new),
        object: kept,
    }
}

/// The node with only what the lifecycle reads: identity, deletion and finalizers, providerID,
/// taints, cordon, readiness and allocatable.
fn lifecycle_fields(node: &core::Node) -> core::Node {
    let meta = &node.metadata;
    let metadata = ObjectMeta {
        name: meta.name.clone(),
        namespace: meta.namespace.clone(),
        uid: meta.uid.clone(),
        deletion_timestamp: meta.deletion_timestamp.clone(),
        finalizers: meta.finalizers.clone(),
        ..ObjectMeta::default()
    };
    let spec = node.spec.as_ref().map(|s| core::NodeSpec {
        provider_id: s.provider_id.clone(),
        taints: s.taints.clone(),
        unschedulable: s.unschedulable,
        ..core::NodeSpec::default()
    });
    let status = node.status.as_ref().map(|s| core::NodeStatus {
        conditions: s
            .conditions
            .as_ref()
            .map(|cs| cs.iter().filter(|c| c.type_ == "Ready").cloned().collect()),
        allocatable: s.allocatable.clone(),
        ..core::NodeStatus::default()
    });
    core::Node {
        metadata,
        spec,
        status,
    }
}

pub type CachedPod = Cached<core::Pod, PodEntry>;
pub type CachedNode = Cached<core::Node, NodeEntry>;
pub type CachedDaemonSet =
    Cached<k8s_openapi::api::apps::v1::DaemonSet, Result<domain::DaemonSet, Unreadable>>;
pub type CachedPdb = Cached<
    k8s_openapi::api::policy::v1::PodDisruptionBudget,
    Result<domain::PodDisruptionBudget, Unreadable>,
>;
pub type CachedVolume = Cached<core::PersistentVolume, Result<PersistentVolume, Unreadable>>;
pub type CachedClaim =
    Cached<core::PersistentVolumeClaim, Result<PersistentVolumeClaim, Unreadable>>;
pub type CachedStorageClass = Cached<storage::StorageClass, Result<StorageClass, Unreadable>>;
pub type CachedCsiNode = Cached<storage::CSINode, Result<AttachLimits, Unreadable>>;

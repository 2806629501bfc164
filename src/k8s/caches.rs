//! Reflector caches of every kind a decision reads. Each kind has a watcher feeding a store; every
//! change wakes the decision thread through a [`Wakeup`] (it coalesces bursts and rebuilds its
//! snapshot from the stores). Pods, nodes, DaemonSets, PodDisruptionBudgets and the storage objects
//! (PersistentVolumes, PersistentVolumeClaims, StorageClasses, CSINodes) are kept in domain form,
//! converted once per watch event ([`super::cached`]); the few other objects as the API server
//! sends them. Watch failures are retried with kube-runtime's default backoff; a
//! relist after `410 Gone` replaces a store's contents atomically, so nothing is lost or doubled.

use std::fmt::Debug;
use std::hash::Hash;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};

use futures::{Stream, StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind};
use kube::runtime::reflector::{store::Writer, Store};
use kube::runtime::{reflector, watcher, WatchStreamExt};
use kube::{Client, Resource};
use serde::de::DeserializeOwned;

use super::cached::{
    self, convert_event, Cached, CachedClaim, CachedCsiNode, CachedDaemonSet, CachedNode,
    CachedPdb, CachedPod, CachedStorageClass, CachedVolume,
};
use super::snapshot::Resolved;
use super::K8sError;
use crate::domain::weights::CONFIGMAP_NAME;
use crate::snapshot::live;

/// What wakes the decision thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    /// A cached object changed.
    Changed,
    /// The host is shutting down.
    Stop,
}

pub type Wakeup = mpsc::Sender<Signal>;

/// karpenter.sh/v1 NodePool, NodeClaim and karpenter.k8s.aws/v1 EC2NodeClass, read as dynamic
/// objects: the snapshot conversion deserializes them with the fields decisions use.
pub fn karpenter_resource(kind: &str) -> ApiResource {
    let (group, plural) = match kind {
        "EC2NodeClass" => ("karpenter.k8s.aws", "ec2nodeclasses"),
        "NodeClaim" => ("karpenter.sh", "nodeclaims"),
        _ => ("karpenter.sh", "nodepools"),
    };
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, "v1", kind), plural)
}

/// The stores, shared between the watch tasks and the decision thread.
#[derive(Clone)]
pub struct Caches {
    pub pods: Store<CachedPod>,
    pub nodes: Store<CachedNode>,
    pub daemonsets: Store<CachedDaemonSet>,
    pub pdbs: Store<CachedPdb>,
    pub config_maps: Store<ConfigMap>,
    pub nodepools: Store<DynamicObject>,
    pub nodeclaims: Store<DynamicObject>,
    pub nodeclasses: Store<DynamicObject>,
    pub volumes: Store<CachedVolume>,
    pub volume_claims: Store<CachedClaim>,
    pub storage_classes: Store<CachedStorageClass>,
    pub csi_nodes: Store<CachedCsiNode>,
    /// What the last snapshot's volume resolution made of the cached pods and nodes
    /// ([`super::snapshot::build`] starts the next one from it).
    pub resolved: Arc<Mutex<Resolved>>,
}

impl Caches {
    /// Starts a watch task per kind on the current runtime. `namespace` holds joiner's ConfigMap.
    pub fn start(client: &Client, namespace: &str, wake: &Wakeup) -> Caches {
        let all = watcher::Config::default();
        let weights = watcher::Config::default().fields(&format!("metadata.name={CONFIGMAP_NAME}"));
        let dynamic = |kind: &str| {
            let ar = karpenter_resource(kind);
            watch(
                Api::<DynamicObject>::all_with(client.clone(), &ar),
                all.clone(),
                ar,
                wake,
            )
        };
        Caches {
            pods: watch_read(
                Api::all(client.clone()),
                all.clone(),
                cached::PodReader::default(),
                |r, p| r.read(p),
                wake,
            ),
            nodes: watch_read(
                Api::all(client.clone()),
                all.clone(),
                (),
                |_, n| cached::read_node(n),
                wake,
            ),
            daemonsets: watch_read(
                Api::all(client.clone()),
                all.clone(),
                (),
                |_, d| live::read_daemonset(d),
                wake,
            ),
            pdbs: watch_read(
                Api::all(client.clone()),
                all.clone(),
                (),
                |_, p| live::read_pdb(p),
                wake,
            ),
            config_maps: watch(
                Api::namespaced(client.clone(), namespace),
                weights,
                (),
                wake,
            ),
            nodepools: dynamic("NodePool"),
            nodeclaims: dynamic("NodeClaim"),
            nodeclasses: dynamic("EC2NodeClass"),
            volumes: watch_read(
                Api::all(client.clone()),
                all.clone(),
                (),
                |_, v| live::read_volume(v),
                wake,
            ),
            volume_claims: watch_read(
                Api::all(client.clone()),
                all.clone(),
                (),
                |_, c| live::read_claim(c),
                wake,
            ),
            storage_classes: watch_read(
                Api::all(client.clone()),
                all.clone(),
                (),
                |_, c| live::read_storage_class(c),
                wake,
            ),
            csi_nodes: watch_read(
                Api::all(client.clone()),
                all.clone(),
                (),
                |_, c| live::read_csi_node(c),
                wake,
            ),
            resolved: Arc::default(),
        }
    }

    /// Waits until every store holds a complete first list: nothing is decided before.
    pub async fn wait_ready(&self) -> Result<(), K8sError> {
        let dropped = |_| K8sError::CacheClosed;
        self.pods.wait_until_ready().await.map_err(dropped)?;
        self.nodes.wait_until_ready().await.map_err(dropped)?;
        self.daemonsets.wait_until_ready().await.map_err(dropped)?;
        self.pdbs.wait_until_ready().await.map_err(dropped)?;
        self.config_maps.wait_until_ready().await.map_err(dropped)?;
        self.nodepools.wait_until_ready().await.map_err(dropped)?;
        self.nodeclaims.wait_until_ready().await.map_err(dropped)?;
        self.nodeclasses.wait_until_ready().await.map_err(dropped)?;
        self.volumes.wait_until_ready().await.map_err(dropped)?;
        self.volume_claims
            .wait_until_ready()
            .await
            .map_err(dropped)?;
        self.storage_classes
            .wait_until_ready()
            .await
            .map_err(dropped)?;
        self.csi_nodes.wait_until_ready().await.map_err(dropped)?;
        Ok(())
    }

    pub fn node_claims(&self) -> Vec<Arc<DynamicObject>> {
        self.nodeclaims.state()
    }
}

/// One kind's watcher and store of the objects as sent; every event (including relists) signals
/// the decision thread.
fn watch<K>(
    api: Api<K>,
    config: watcher::Config,
    dyntype: K::DynamicType,
    wake: &Wakeup,
) -> Store<K>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    K::DynamicType: Eq + Hash + Clone + Send + Sync,
{
    let writer = Writer::new(dyntype);
    let store = writer.as_reader();
    signal(
        watcher(api, config).default_backoff().reflect(writer),
        std::any::type_name::<K>(),
        wake,
    );
    store
}

/// One kind's watcher and store of what `read` makes of each object (with `reader`, state kept
/// across events), converted as its event arrives: the API object itself is dropped then and never
/// held by the store.
fn watch_read<K, T, R>(
    api: Api<K>,
    config: watcher::Config,
    mut reader: R,
    read: fn(&mut R, K) -> T,
    wake: &Wakeup,
) -> Store<Cached<K, T>>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    T: Clone + Send + Sync + 'static,
    R: Send + 'static,
{
    let writer = Writer::new(());
    let store = writer.as_reader();
    let events = watcher(api, config)
        .default_backoff()
        .map_ok(move |e| convert_event(e, &mut |o| read(&mut reader, o)));
    let events = reflector(writer, events);
    signal(events, std::any::type_name::<K>(), wake);
    store
}

/// Drives a reflector's events, waking the decision thread on each; stops when the thread is gone.
fn signal<K>(
    events: impl Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Send + 'static,
    kind: &'static str,
    wake: &Wakeup,
) {
    let wake = wake.clone();
    tokio::spawn(async move {
        futures::pin_mut!(events);
        while let Some(event) = events.next().await {
            match event {
                Ok(_) => {
                    if wake.send(Signal::Changed).is_err() {
                        return;
                    }
                }
                Err(e) => tracing::warn!(kind, error = %e, "watch failed, retrying"),
            }
        }
    });
}

//! An in-process Kubernetes API server for tests: it speaks the real REST and watch protocol over
//! plain HTTP on 127.0.0.1, so an unmodified kube-rs client (and a controller built on it) runs
//! against it, and it gives test harnesses direct, synchronous access to the same store.
//!
//! What it implements: the resources in `resources.rs` (core pods, nodes, configmaps, events,
//! namespaces; apps daemonsets and replicasets; policy PodDisruptionBudgets; coordination leases;
//! events.k8s.io events; karpenter.sh nodepools and nodeclaims; karpenter.k8s.aws ec2nodeclasses)
//! with get, list (label and field selectors, `limit`/`continue` paging with real continue
//! tokens), watch (resourceVersion resume from a bounded history, 410 Expired when it is too
//! old, bookmarks, `sendInitialEvents` streaming lists), create (generateName), update
//! (optimistic concurrency on resourceVersion), patch (merge, JSON, a strategic-merge subset and
//! a server-side-apply simplification), delete with finalizers, deletecollection, the `/status`
//! subresource, pods' `/eviction` with PodDisruptionBudgets whose status the server keeps current
//! like the disruption controller, pods' graceful deletion with a kubelet and a pod garbage
//! collector that finish it (`kubelet.rs`; a node's kubelet can be killed), a DaemonSet
//! controller (`daemonset.rs`), VolumeAttachments that an attach/detach controller creates for
//! pods' CSI volumes and deletes a while after the pods are gone (`attach.rs`), discovery
//! documents and `/version`. Errors are `Status`
//! objects with the real server's reasons, codes and (mostly) messages.
//!
//! What it does not: authentication and authorization, admission (no defaulting beyond pods'
//! Pending status, no validation of object schemas), namespaces' lifecycle (objects may be
//! created in any namespace), garbage collection (ownerReferences and `propagationPolicy` are
//! accepted and ignored; the pod garbage collector is the exception), managed fields (apply does
//! not detect conflicts; `force` is accepted and ignored), pods' default
//! `terminationGracePeriodSeconds` (30 s is assumed where it is absent, not written), lists at an exact older resourceVersion (every list serves the latest state; continue pages
//! serve the objects after the cursor as they are now, labelled with the first page's
//! resourceVersion, and 410 once the history has been compacted past it), `dryRun` (rejected
//! with 400), protobuf, and field selectors beyond each kind's common fields. `metadata.generation`
//! is kept only for kinds with a status subresource (bumped on changes outside metadata and
//! status, and when deletion starts). Note that kube's default client retries 429 answers (a
//! blocked eviction) with backoff for minutes; `client_without_retries` returns them at once.
//!
//! Data flow: an HTTP request is parsed in `routes.rs`, logged and checked against injected
//! faults (`faults.rs`), then served by `store::State` under one `std::sync::Mutex`, never held
//! across an await. Every committed change gets the next global resourceVersion and is appended
//! to the bounded history and sent on a `tokio::sync::broadcast` channel, both under the lock,
//! so order is total. Watches (`watch.rs`) replay from the history and follow the channel;
//! `ApiServer::subscribe` hands harnesses the same channel. Changes of pods and PDBs recompute
//! PDB status in the same critical section (`eviction.rs`).
// Handlers return Result<_, ApiError>; its `details` is a serde_json Value, which with the
// `preserve_order` feature the AWS SDK's test client turns on is large enough for clippy's
// result_large_err. Boxing every error of a test server buys nothing.
#![allow(clippy::result_large_err)]
#![allow(dead_code)]

mod attach;
mod daemonset;
mod direct;
mod discovery;
mod eviction;
mod faults;
mod kubelet;
mod patch;
mod resources;
mod routes;
mod select;
mod status;
mod store;
mod watch;

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::broadcast;
use tokio::task::JoinHandle;

// Re-exported for harnesses; a given test binary may not use them all.
#[allow(unused_imports)]
pub use eviction::pod_ready;
#[allow(unused_imports)]
pub use faults::{Injected, RequestMatch, RequestRecord};
#[allow(unused_imports)]
pub use kubelet::SHUTDOWN_ANNOTATION;
#[allow(unused_imports)]
pub use patch::PatchKind;
#[allow(unused_imports)]
pub use resources::{ResourceInfo, RESOURCES};
#[allow(unused_imports)]
pub use status::{ApiError, ApiResult};
#[allow(unused_imports)]
pub use store::{Change, ChangeKind};

use store::State;

const KUBECONFIG: &str = "apiVersion: v1
kind: Config
clusters:
- name: joiner-test
  cluster:
    server: SERVER
contexts:
- name: joiner-test
  context:
    cluster: joiner-test
    user: joiner-test
    namespace: default
current-context: joiner-test
users:
- name: joiner-test
  user: {}
";

/// Server settings.
#[derive(Debug, Clone)]
pub struct ServerOptions {
    /// Changes kept for watch resumption; a resume from before them gets 410.
    pub history: usize,
    /// How often watches with `allowWatchBookmarks` get a BOOKMARK.
    pub bookmark_interval: Duration,
}

impl Default for ServerOptions {
    fn default() -> Self {
        Self {
            history: store::DEFAULT_HISTORY,
            bookmark_interval: Duration::from_secs(1),
        }
    }
}

/// What the HTTP side and the Rust side share.
pub struct Shared {
    pub state: Mutex<State>,
    pub faults: Mutex<faults::Faults>,
    /// Bumped by `drop_watches`; every open watch ends when it changes.
    pub drops: tokio::sync::watch::Sender<u64>,
    pub addr: SocketAddr,
    bookmark_ms: AtomicU64,
    /// Nodes whose kubelet is dead: their terminating pods are never removed.
    pub dead_kubelets: Mutex<BTreeSet<String>>,
    /// How long pods without the shutdown annotation take to exit, in milliseconds.
    pod_shutdown_ms: AtomicU64,
    /// The attach/detach controller's settings and memory.
    attach: Mutex<attach::Detacher>,
}

impl Shared {
    pub fn bookmark_interval(&self) -> Duration {
        Duration::from_millis(self.bookmark_ms.load(Ordering::Relaxed).max(1))
    }
}

/// A running server; it stops (and ends its watches) when dropped.
pub struct ApiServer {
    shared: Arc<Shared>,
    task: JoinHandle<()>,
    /// The in-process controllers: kubelets, pod garbage collector, DaemonSets.
    controllers: JoinHandle<()>,
}

impl Drop for ApiServer {
    fn drop(&mut self) {
        self.drop_watches();
        self.task.abort();
        self.controllers.abort();
    }
}

/// How often the in-process controllers run.
const CONTROLLER_TICK: Duration = Duration::from_millis(100);

/// Runs the kubelets, the pod garbage collector and the DaemonSet controller every tick.
fn spawn_controllers(shared: Arc<Shared>) -> JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(CONTROLLER_TICK).await;
            let dead = shared.dead_kubelets.lock().expect("kubelets lock").clone();
            let shutdown = shared.pod_shutdown_ms.load(Ordering::Relaxed) as f64 / 1000.0;
            let mut state = shared.state.lock().expect("state lock");
            kubelet::tick(&mut state, &dead, shutdown, chrono::Utc::now());
            daemonset::tick(&mut state, &dead);
            let mut detacher = shared.attach.lock().expect("attach lock");
            attach::tick(&mut state, &mut detacher, chrono::Utc::now());
        }
    })
}

impl ApiServer {
    /// Binds 127.0.0.1 on a free port and serves on the current tokio runtime.
    pub async fn start() -> Self {
        Self::start_with(ServerOptions::default()).await
    }

    pub async fn start_with(opts: ServerOptions) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind 127.0.0.1:0");
        let addr = listener.local_addr().expect("local addr");
        let shared = Arc::new(Shared {
            state: Mutex::new(State::new(opts.history)),
            faults: Mutex::new(faults::Faults::default()),
            drops: tokio::sync::watch::channel(0).0,
            addr,
            bookmark_ms: AtomicU64::new(opts.bookmark_interval.as_millis() as u64),
            dead_kubelets: Mutex::new(BTreeSet::new()),
            pod_shutdown_ms: AtomicU64::new(0),
            attach: Mutex::default(),
        });
        let app = routes::router(shared.clone());
        let task = tokio::spawn(async move {
            axum::serve(listener, app).await.expect("api server");
        });
        let controllers = spawn_controllers(shared.clone());
        Self {
            shared,
            task,
            controllers,
        }
    }

    /// How long every pod without the shutdown annotation takes to exit once deleted (its preStop
    /// hook and SIGTERM handling), capped by its grace period.
    pub fn set_pod_shutdown(&self, every: Duration) {
        self.shared
            .pod_shutdown_ms
            .store(every.as_millis() as u64, Ordering::Relaxed);
    }

    /// Stops `node`'s kubelet: its terminating pods stay until force-deleted or the Node goes.
    pub fn kill_kubelet(&self, node: &str) {
        self.shared
            .dead_kubelets
            .lock()
            .expect("kubelets lock")
            .insert(node.to_string());
    }

    pub fn addr(&self) -> SocketAddr {
        self.shared.addr
    }

    /// `http://127.0.0.1:PORT`
    pub fn url(&self) -> String {
        format!("http://{}", self.shared.addr)
    }

    /// A kubeconfig for the server (no auth), default namespace "default".
    pub fn kubeconfig_yaml(&self) -> String {
        KUBECONFIG.replace("SERVER", &self.url())
    }

    pub fn write_kubeconfig(&self, path: impl AsRef<Path>) -> std::io::Result<()> {
        std::fs::write(path, self.kubeconfig_yaml())
    }

    /// A kubeconfig whose user sends `token` as a bearer token: the server records it with each
    /// request (`RequestRecord::user`), so one client's requests can be told from another's.
    pub fn write_kubeconfig_as(&self, path: impl AsRef<Path>, token: &str) -> std::io::Result<()> {
        std::fs::write(
            path,
            self.kubeconfig_yaml()
                .replace("  user: {}", &format!("  user: {{token: {token}}}")),
        )
    }

    /// The client configuration a controller would build for this server (kube's defaults,
    /// including its retry of 429/503/504 responses).
    pub fn config(&self) -> kube::Config {
        kube::Config::new(self.url().parse().expect("server url is a uri"))
    }

    /// A kube client with kube's default configuration. Note that it retries 429 answers (a
    /// blocked eviction) with backoff for minutes before returning them.
    pub fn client(&self) -> kube::Client {
        kube::Client::try_from(self.config()).expect("kube client")
    }

    /// A kube client that returns 429/503/504 answers at once instead of retrying.
    pub fn client_without_retries(&self) -> kube::Client {
        let mut config = self.config();
        config.default_retry = false;
        kube::Client::try_from(config).expect("kube client")
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.shared.state.lock().expect("state lock")
    }

    /// Every committed change from now on (the same feed watches follow).
    pub fn subscribe(&self) -> broadcast::Receiver<Arc<Change>> {
        self.state().subscribe()
    }

    /// The current (newest) resourceVersion.
    pub fn resource_version(&self) -> u64 {
        self.state().resource_version()
    }

    /// Sets the interval of BOOKMARK events for watches opened from now on.
    pub fn set_bookmark_interval(&self, every: Duration) {
        self.shared
            .bookmark_ms
            .store(every.as_millis() as u64, Ordering::Relaxed);
    }
}

//! The cluster side of `joiner top`: the controller's own reflector caches
//! ([`crate::k8s::caches`]) on a runtime of their own, and a decision thread that builds a snapshot
//! from them ([`crate::k8s::snapshot::build`]) whenever they change (and every few seconds, for
//! ages and clocks), makes the frame's decisions ([`super::decide`]) and publishes the frame. It
//! only lists and watches: nothing here writes to the cluster.

use std::path::PathBuf;
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::Duration;

use kube::config::{KubeConfigOptions, Kubeconfig};

use crate::catalog::Catalog;
use crate::k8s::caches::{Caches, Signal};
use crate::k8s::K8sError;

use super::decide::{self, Limits};
use super::model::Frame;
use super::TopError;

/// Where to watch and how to decide.
#[derive(Debug, Clone)]
pub struct WatchSettings {
    pub kubeconfig: Option<PathBuf>,
    pub context: Option<String>,
    /// The namespace of joiner's cost-weight ConfigMap.
    pub namespace: String,
    pub catalog: Catalog,
    pub limits: Limits,
    /// A frame is remade at least this often, even when nothing changed.
    pub refresh: Duration,
}

/// What the UI can show.
#[derive(Debug, Clone)]
pub enum Status {
    /// The caches have not synced yet.
    Connecting,
    /// The latest frame; `seq` counts frames, so the UI redraws only on a new one.
    Ready { frame: Arc<Frame>, seq: u64 },
    /// The watch could not start.
    Failed(String),
}

/// The latest [`Status`], shared between the decision thread and the UI.
#[derive(Debug, Clone)]
pub struct Latest(Arc<(Mutex<Status>, Condvar)>);

impl Latest {
    pub fn get(&self) -> Status {
        self.0
             .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn set(&self, status: Status) {
        *self.0 .0.lock().unwrap_or_else(PoisonError::into_inner) = status;
        self.0 .1.notify_all();
    }

    /// Waits until a frame is ready or the watch failed, at most `limit`.
    pub fn wait(&self, limit: Duration) -> Status {
        let guard = self.0 .0.lock().unwrap_or_else(PoisonError::into_inner);
        let (guard, _) = self
            .0
             .1
            .wait_timeout_while(guard, limit, |s| matches!(s, Status::Connecting))
            .unwrap_or_else(PoisonError::into_inner);
        guard.clone()
    }
}

/// Starts watching on a thread of its own; the returned handle follows its frames.
pub fn start(settings: WatchSettings) -> Result<Latest, TopError> {
    let latest = Latest(Arc::new((Mutex::new(Status::Connecting), Condvar::new())));
    let shared = latest.clone();
    std::thread::Builder::new()
        .name("top-decisions".into())
        .spawn(move || {
            if let Err(e) = run(&settings, &shared) {
                shared.set(Status::Failed(e.to_string()));
            }
        })
        .map_err(TopError::Thread)?;
    Ok(latest)
}

/// Syncs the caches, then makes a frame after every burst of changes and every `refresh`.
fn run(settings: &WatchSettings, latest: &Latest) -> Result<(), TopError> {
    // the watches need one worker: the decisions run on this thread, not the runtime's
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .map_err(TopError::Thread)?;
    let (tx, rx) = std::sync::mpsc::channel();
    let caches = runtime.block_on(async {
        let client = client(settings).await?;
        let caches = Caches::start(&client, &settings.namespace, &tx);
        caches.wait_ready().await?;
        Ok::<_, K8sError>(caches)
    })?;
    let mut seq = 0;
    loop {
        let (snapshot, unreadable) = crate::k8s::snapshot::build(&caches);
        let notes = unreadable.iter().map(ToString::to_string).collect();
        let now = chrono::Utc::now();
        let frame = decide::frame(&snapshot, &settings.catalog, now, settings.limits, notes);
        seq += 1;
        latest.set(Status::Ready {
            frame: Arc::new(frame),
            seq,
        });
        if !wait_for_change(&rx, settings.refresh) {
            return Ok(());
        }
    }
}

/// Waits for a change or `refresh`, then lets a burst of changes settle; false once the watches
/// are gone.
fn wait_for_change(rx: &Receiver<Signal>, refresh: Duration) -> bool {
    match rx.recv_timeout(refresh) {
        Ok(_) | Err(RecvTimeoutError::Timeout) => {}
        Err(RecvTimeoutError::Disconnected) => return false,
    }
    // a relist or a rollout arrives as many events within a few milliseconds
    std::thread::sleep(Duration::from_millis(150));
    while rx.try_recv().is_ok() {}
    true
}

/// A client for the kubeconfig and context given, or the one in force (in-cluster, `KUBECONFIG`,
/// `~/.kube/config`).
async fn client(settings: &WatchSettings) -> Result<kube::Client, K8sError> {
    let options = KubeConfigOptions {
        context: settings.context.clone(),
        ..KubeConfigOptions::default()
    };
    let config = match (&settings.kubeconfig, &settings.context) {
        (Some(path), _) => {
            let kc = Kubeconfig::read_from(path)
                .map_err(|e| K8sError::Config(format!("{}: {e}", path.display())))?;
            kube::Config::from_custom_kubeconfig(kc, &options)
                .await
                .map_err(|e| e.to_string())
        }
        (None, Some(_)) => kube::Config::from_kubeconfig(&options)
            .await
            .map_err(|e| e.to_string()),
        (None, None) => kube::Config::infer().await.map_err(|e| e.to_string()),
    }
    .map_err(K8sError::Config)?;
    kube::Client::try_from(config).map_err(K8sError::Api)
}

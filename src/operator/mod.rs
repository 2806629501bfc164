//! The in-cluster controller (`joiner controller`): the host that runs the clock-less
//! [`crate::controller::Controller`] against a real API server. Start-up order: serve `/metrics`,
//! `/healthz` and `/readyz`; wait for the leader Lease (a standby acts on nothing); start the
//! caches and wait until every one has synced; then hand the decision thread ([`decisions`]) the
//! controller, the Kubernetes-backed cluster and the caches' change signals. The async runtime
//! only watches, serves HTTP and renews the Lease; decisions and their writes run on that thread.
//! Losing the Lease or a shutdown signal stops the thread before the process exits.

pub mod aws;
pub mod decisions;
pub mod http;
pub mod measured;
pub mod metrics;
pub mod settings;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use kube::runtime::events::{Recorder, Reporter};
use kube::Client;
use tokio::runtime::Handle;

use std::sync::mpsc::Receiver;

use crate::cloud::aws::AwsCloud;
use crate::cloud::sim::SimCloud;
use crate::cloud::CloudProvider;
use crate::controller::Controller;
use crate::k8s::caches::{Caches, Signal};
use crate::k8s::cluster::KubeCluster;
use crate::k8s::lease::LeaseLock;
use crate::k8s::K8sError;
use decisions::{Decisions, HostEvents};
use http::Readiness;
use measured::Measured;
use metrics::Metrics;
pub use settings::{CloudChoice, LeaderElection, OperatorSettings};

#[derive(Debug, thiserror::Error)]
pub enum OperatorError {
    #[error(transparent)]
    Kubernetes(#[from] K8sError),
    /// The OS error is in the message, not a `source` (which `main` would print again).
    #[error("cannot listen on {addr}: {error}")]
    Bind {
        addr: SocketAddr,
        error: std::io::Error,
    },
    #[error("leader lease lost: not renewed for {0:?}")]
    LeaseLost(Duration),
    #[error("decision thread stopped unexpectedly")]
    DecisionsStopped,
    #[error("invalid setting {name}: {message}")]
    Setting { name: &'static str, message: String },
}

/// Runs until a shutdown signal (Ok) or a failure that needs a restart (Err).
pub async fn run(settings: OperatorSettings) -> Result<(), OperatorError> {
    let Clients {
        watches,
        client,
        evictions,
    } = clients(&settings).await?;
    let metrics = Arc::new(Metrics::new());
    metrics.set_prices(&settings.catalog);
    let ready = Readiness::default();
    let (m, h) = http::serve(
        settings.metrics_addr,
        settings.health_addr,
        metrics.clone(),
        ready.clone(),
    )
    .await?;
    tracing::info!(metrics = %m, health = %h, identity = %settings.identity, "serving");
    let lock = settings.leader_election.as_ref().map(|le| {
        LeaseLock::new(
            client.clone(),
            &settings.namespace,
            &le.lease_name,
            &settings.identity,
            le.lease_duration,
        )
    });
    if let (Some(lock), Some(le)) = (&lock, &settings.leader_election) {
        // a standby is healthy and ready; it only waits
        ready.set(true);
        tokio::select! {
            r = acquire(lock, le.retry_period) => r?,
            _ = shutdown() => return Ok(()),
        }
        ready.set(false);
    }
    metrics.leader.set(1);
    tracing::info!(identity = %settings.identity, "leading");
    let (tx, rx) = std::sync::mpsc::channel();
    let caches = Caches::start(&watches, &settings.namespace, &tx);
    tokio::select! {
        r = caches.wait_ready() => r?,
        _ = shutdown() => return Ok(()),
    }
    ready.set(true);
    tracing::info!("caches synced");
    let thread = match &settings.cloud {
        CloudChoice::Sim { seed } => spawn_decisions(
            sim_decisions(&settings, *seed, client, evictions, caches, metrics.clone()),
            rx,
        )?,
        CloudChoice::Aws {
            aws,
            kubernetes_version,
        } => {
            let events = HostEvents::default();
            let cloud = tokio::select! {
                r = aws::start(aws, kubernetes_version.as_deref(), &settings.catalog, &client, &caches, events.clone(), tx.clone()) => r?,
                _ = shutdown() => return Ok(()),
            };
            let cluster = kube_cluster(&settings, client, evictions, caches, process_seed());
            let ctl = Controller::new(
                settings.controller.clone(),
                settings.catalog.clone(),
                Measured::new(cloud, metrics.clone()),
            );
            let decisions = Decisions::new(
                ctl,
                cluster,
                metrics.clone(),
                settings.decisions.clone(),
                settings.controller.origin,
                |_: &AwsCloud, _| {},
            );
            spawn_decisions(decisions.with_host_events(events), rx)?
        }
    };
    let outcome = tokio::select! {
        _ = shutdown() => Ok(()),
        r = renew(lock.as_ref(), settings.leader_election.as_ref()) => r,
        _ = wait_finished(&thread) => Err(OperatorError::DecisionsStopped),
    };
    let _ = tx.send(Signal::Stop);
    let _ = tokio::task::spawn_blocking(move || thread.join()).await;
    metrics.leader.set(0);
    if let (Some(lock), Ok(())) = (&lock, &outcome) {
        if let Err(e) = lock.release().await {
            tracing::warn!(error = %e, "lease not released");
        }
    }
    outcome
}

/// Runs the decision loop on its own OS thread.
fn spawn_decisions<P: CloudProvider + Send + 'static>(
    decisions: Decisions<P>,
    rx: Receiver<Signal>,
) -> Result<std::thread::JoinHandle<()>, OperatorError> {
    std::thread::Builder::new()
        .name("decisions".into())
        .spawn(move || decisions.run(rx))
        .map_err(|_| OperatorError::DecisionsStopped)
}

fn kube_cluster(
    settings: &OperatorSettings,
    client: Client,
    evictions: Client,
    caches: Caches,
    process: u64,
) -> KubeCluster {
    let reporter = Reporter {
        controller: "joiner".into(),
        instance: Some(settings.identity.clone()),
    };
    let recorder = Recorder::new(client.clone(), reporter);
    KubeCluster::new(
        client,
        evictions,
        Handle::current(),
        caches,
        settings.catalog.clone(),
        recorder,
        process,
    )
}

fn sim_decisions(
    settings: &OperatorSettings,
    seed: u64,
    client: Client,
    evictions: Client,
    caches: Caches,
    metrics: Arc<Metrics>,
) -> Decisions<SimCloud> {
    let process = process_seed();
    let cluster = kube_cluster(settings, client, evictions, caches, process);
    let cloud = SimCloud::new(settings.catalog.clone(), vec![], 0.0, seed);
    cloud.number_from(process & 0xffff_ffff_ffff);
    let ctl = Controller::new(
        settings.controller.clone(),
        settings.catalog.clone(),
        Measured::new(cloud, metrics.clone()),
    );
    Decisions::new(
        ctl,
        cluster,
        metrics,
        settings.decisions.clone(),
        settings.controller.origin,
        |cloud: &SimCloud, now| cloud.set_now(now),
    )
}

/// A seed that differs between processes, from the clock and the process id: claim names and
/// simulated instance ids must not repeat when a replica takes over or the controller restarts.
fn process_seed() -> u64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    nanos ^ u64::from(std::process::id()) << 20
}

/// The API clients: watches wait for events as long as it takes, so only requests get the read
/// timeout; evictions also go without kube's automatic retries (kube retries a 429 for minutes,
/// while a budget's 429 is an answer the drain loop retries itself).
struct Clients {
    watches: Client,
    client: Client,
    evictions: Client,
}

async fn clients(settings: &OperatorSettings) -> Result<Clients, K8sError> {
    let config = match &settings.kubeconfig {
        Some(path) => {
            let kc = kube::config::Kubeconfig::read_from(path)
                .map_err(|e| K8sError::Config(format!("{}: {e}", path.display())))?;
            kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
                .await
                .map_err(|e| K8sError::Config(e.to_string()))?
        }
        None => kube::Config::infer()
            .await
            .map_err(|e| K8sError::Config(e.to_string()))?,
    };
    let mut requests = config.clone();
    requests.read_timeout = settings.api_timeout;
    // the timeout counts from the request, not from when its pooled connection went idle
    requests.reset_reader_on_write = true;
    let mut no_retries = requests.clone();
    no_retries.default_retry = false;
    Ok(Clients {
        watches: Client::try_from(config).map_err(K8sError::Api)?,
        client: Client::try_from(requests).map_err(K8sError::Api)?,
        evictions: Client::try_from(no_retries).map_err(K8sError::Api)?,
    })
}

/// Waits until this replica holds the Lease.
async fn acquire(lock: &LeaseLock, retry: Duration) -> Result<(), OperatorError> {
    loop {
        match lock.try_acquire_or_renew().await {
            Ok(true) => return Ok(()),
            Ok(false) => {}
            Err(e) => tracing::warn!(error = %e, "lease check failed"),
        }
        tokio::time::sleep(retry).await;
    }
}

/// Renews the Lease every retry period; fails once it went unrenewed for the renew deadline.
async fn renew(lock: Option<&LeaseLock>, le: Option<&LeaderElection>) -> Result<(), OperatorError> {
    let (Some(lock), Some(le)) = (lock, le) else {
        return std::future::pending().await;
    };
    let mut renewed = Instant::now();
    loop {
        tokio::time::sleep(le.retry_period).await;
        match lock.try_acquire_or_renew().await {
            Ok(true) => renewed = Instant::now(),
            Ok(false) => return Err(OperatorError::LeaseLost(renewed.elapsed())),
            Err(e) => tracing::warn!(error = %e, "lease renewal failed"),
        }
        if renewed.elapsed() > le.renew_deadline {
            return Err(OperatorError::LeaseLost(renewed.elapsed()));
        }
    }
}

async fn wait_finished(thread: &std::thread::JoinHandle<()>) {
    while !thread.is_finished() {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

async fn shutdown() {
    #[cfg(unix)]
    {
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(s) => s,
                Err(_) => return std::future::pending().await,
            };
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    let _ = tokio::signal::ctrl_c().await;
}

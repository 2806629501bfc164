//! The in-cluster controller (`joiner controller`): the host that runs the clock-less
//! [`crate::controller::Controller`] against a real API server. Start-up order: serve `/metrics`,
//! `/healthz` and `/readyz`; wait for the leader Lease (a standby acts on nothing); from then on
//! renew it ([`leadership`]) while the caches start and sync; then hand the decision thread
//! ([`decisions`]) the controller, the Kubernetes-backed cluster and the caches' change signals.
//! The async runtime only watches, serves HTTP and renews the Lease; decisions and their writes
//! run on that thread, and ask the [`LeaderToken`] before they write. Losing the Lease, a
//! decision loop that stalls, or a shutdown signal revokes the token and stops the thread; a
//! thread that does not stop is left behind as the process exits.

pub mod aws;
pub mod decisions;
pub mod http;
pub mod leadership;
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

use crate::cloud::aws::{AwsCloud, AwsSettings};
use crate::cloud::sim::SimCloud;
use crate::cloud::CloudProvider;
use crate::controller::Controller;
use crate::k8s::caches::{Caches, Signal};
use crate::k8s::cluster::KubeCluster;
use crate::k8s::lease::LeaseLock;
use crate::k8s::K8sError;
use decisions::{Decisions, DriftReport, HostEvents};
use http::{Health, Readiness};
use leadership::{Gated, Heartbeat, LeaderToken};
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
    /// The decision loop started no step for longer than its liveness bound: it is hung.
    #[error("decision loop stalled: no step started for {0:?}")]
    Stalled(Duration),
    #[error("decision thread stopped unexpectedly")]
    DecisionsStopped,
    #[error("invalid setting {name}: {message}")]
    Setting { name: &'static str, message: String },
}

/// Runs until a shutdown signal (Ok) or a failure that needs a restart (Err).
pub async fn run(settings: OperatorSettings) -> Result<(), OperatorError> {
    let clients = clients(&settings).await?;
    let metrics = Arc::new(Metrics::new());
    metrics.set_prices(&settings.catalog);
    let heartbeat = Heartbeat::new(leadership::liveness_bound(&settings));
    let ready = Readiness::default();
    let health = Health {
        ready: ready.clone(),
        heartbeat: heartbeat.clone(),
    };
    let (m, h) = http::serve(
        settings.metrics_addr,
        settings.health_addr,
        metrics.clone(),
        health,
    )
    .await?;
    tracing::info!(metrics = %m, health = %h, identity = %settings.identity, liveness = ?heartbeat.bound(), "serving");
    let lock = settings.leader_election.as_ref().map(|le| {
        LeaseLock::new(
            clients.client.clone(),
            &settings.namespace,
            &le.lease_name,
            &settings.identity,
            le.lease_duration,
        )
    });
    let token = match (&lock, &settings.leader_election) {
        (Some(lock), Some(le)) => {
            // a standby is healthy and ready; it only waits
            ready.set(true);
            let token = LeaderToken::pending();
            tokio::select! {
                _ = leadership::acquire(lock, le, &token) => {}
                _ = shutdown() => return Ok(()),
            }
            ready.set(false);
            token
        }
        _ => LeaderToken::always(),
    };
    metrics.leader.set(1);
    tracing::info!(identity = %settings.identity, "leading");
    let (tx, rx) = std::sync::mpsc::channel();
    let mut thread = None;
    let outcome = {
        // renewals start now, before the caches sync or the cloud starts: a start slower than
        // the lease must not let a standby take over while this replica goes on to act
        let renewing = leadership::renew(
            lock.as_ref(),
            settings.leader_election.as_ref(),
            &token,
            &heartbeat,
        );
        let leader = Leader {
            settings: &settings,
            metrics: metrics.clone(),
            token: token.clone(),
            heartbeat: heartbeat.clone(),
            ready: ready.clone(),
            tx: tx.clone(),
        };
        tokio::select! {
            _ = shutdown() => Ok(()),
            e = renewing => Err(e),
            r = leader.lead(clients, rx, &mut thread) => r,
        }
    };
    token.revoke();
    metrics.leader.set(0);
    let _ = tx.send(Signal::Stop);
    let stopped = match &thread {
        Some(t) => wait_finished(t, STOP_GRACE).await,
        None => true,
    };
    if !stopped {
        tracing::error!(grace = ?STOP_GRACE, "decision thread did not stop; exiting without it");
    }
    if let (Some(lock), Ok(()), true) = (&lock, &outcome, stopped) {
        if let Err(e) = lock.release().await {
            tracing::warn!(error = %e, "lease not released");
        }
    }
    outcome
}

/// How long a stopping process waits for the decision thread to finish its step. A thread still
/// running after it is hung: the process exits without it, and without releasing the Lease, so
/// the standby waits out the lease duration while whatever the thread sent settles.
const STOP_GRACE: Duration = Duration::from_secs(10);

/// Solve records a long-running controller keeps (metrics read each new one once).
const SOLVES_KEPT: usize = 64;

/// What the leader starts once it holds the Lease.
struct Leader<'a> {
    settings: &'a OperatorSettings,
    metrics: Arc<Metrics>,
    token: LeaderToken,
    heartbeat: Heartbeat,
    ready: Readiness,
    tx: std::sync::mpsc::Sender<Signal>,
}

impl Leader<'_> {
    /// Syncs the caches, starts the cloud and the decision thread (left in `thread`), and waits
    /// for the thread to end, which it only does when something failed.
    async fn lead(
        &self,
        clients: Clients,
        rx: Receiver<Signal>,
        thread: &mut Option<std::thread::JoinHandle<()>>,
    ) -> Result<(), OperatorError> {
        let caches = Caches::start(&clients.watches, &self.settings.namespace, &self.tx);
        caches.wait_ready().await?;
        self.ready.set(true);
        tracing::info!("caches synced");
        let handle = match &self.settings.cloud {
            CloudChoice::Sim { seed } => self.start_sim(*seed, clients, caches, rx)?,
            CloudChoice::Aws {
                aws,
                kubernetes_version,
            } => {
                let version = kubernetes_version.as_deref();
                self.start_aws(aws, version, clients, caches, rx).await?
            }
        };
        let handle = thread.insert(handle);
        wait_finished(handle, Duration::MAX).await;
        Err(OperatorError::DecisionsStopped)
    }

    /// The controller over `cloud`, which launches and terminates only while this replica leads.
    fn controller<P: CloudProvider>(&self, cloud: P) -> Controller<Measured<Gated<P>>> {
        let gated = Gated::new(cloud, self.token.clone(), self.heartbeat.clone());
        Controller::new(
            self.settings.controller.clone(),
            self.settings.catalog.clone(),
            Measured::new(gated, self.metrics.clone()),
        )
        .with_solve_history(SOLVES_KEPT)
        .with_leader_token(self.token.clone())
        .with_certifier(self.certifier())
    }

    /// Provisioning plans' costs and bounds go to the metrics; a bound gets the solve's time limit.
    fn certifier(&self) -> crate::controller::Certifier {
        let metrics = self.metrics.clone();
        let limit = Duration::from_secs_f64(self.settings.controller.solve_time_limit);
        crate::controller::Certifier::new(limit, move |cost| metrics.provisioning_cost(cost))
    }

    fn start_sim(
        &self,
        seed: u64,
        clients: Clients,
        caches: Caches,
        rx: Receiver<Signal>,
    ) -> Result<std::thread::JoinHandle<()>, OperatorError> {
        let process = process_seed();
        let cloud = SimCloud::new(self.settings.catalog.clone(), vec![], 0.0, seed);
        cloud.number_from(process & 0xffff_ffff_ffff);
        let cluster = kube_cluster(self.settings, clients, caches, process)
            .with_leader_token(self.token.clone());
        let decisions = Decisions::new(
            self.controller(cloud),
            cluster,
            self.metrics.clone(),
            self.settings.decisions.clone(),
            self.settings.controller.origin,
            |cloud: &Gated<SimCloud>, now| {
                cloud.step_started();
                cloud.inner.set_now(now)
            },
        );
        spawn_decisions(decisions, rx, &self.heartbeat)
    }

    async fn start_aws(
        &self,
        aws: &AwsSettings,
        version: Option<&str>,
        clients: Clients,
        caches: Caches,
        rx: Receiver<Signal>,
    ) -> Result<std::thread::JoinHandle<()>, OperatorError> {
        let events = HostEvents::default();
        let catalog = &self.settings.catalog;
        let (client, tx) = (&clients.client, self.tx.clone());
        let drift = DriftReport::default();
        let shared = aws::Shared {
            events: events.clone(),
            drift: drift.clone(),
            wake: tx,
            token: self.token.clone(),
            metrics: self.metrics.clone(),
        };
        let cloud = aws::start(aws, version, catalog, client, &caches, shared).await?;
        let cluster = kube_cluster(self.settings, clients, caches, process_seed())
            .with_leader_token(self.token.clone());
        let decisions = Decisions::new(
            self.controller(cloud),
            cluster,
            self.metrics.clone(),
            self.settings.decisions.clone(),
            self.settings.controller.origin,
            |cloud: &Gated<AwsCloud>, _| cloud.step_started(),
        );
        let decisions = decisions.with_host_events(events).with_drift_report(drift);
        spawn_decisions(decisions, rx, &self.heartbeat)
    }
}

/// Runs the decision loop on its own OS thread; its heartbeat counts from now.
fn spawn_decisions<P: CloudProvider + Send + 'static>(
    decisions: Decisions<P>,
    rx: Receiver<Signal>,
    heartbeat: &Heartbeat,
) -> Result<std::thread::JoinHandle<()>, OperatorError> {
    heartbeat.beat();
    std::thread::Builder::new()
        .name("decisions".into())
        .spawn(move || decisions.run(rx))
        .map_err(|_| OperatorError::DecisionsStopped)
}

fn kube_cluster(
    settings: &OperatorSettings,
    clients: Clients,
    caches: Caches,
    process: u64,
) -> KubeCluster {
    let reporter = Reporter {
        controller: "joiner".into(),
        instance: Some(settings.identity.clone()),
    };
    let recorder = Recorder::new(clients.client.clone(), reporter);
    KubeCluster::new(
        clients.client,
        clients.evictions,
        Handle::current(),
        caches,
        settings.catalog.clone(),
        recorder,
        process,
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

/// Waits until the thread has finished, or `limit` passed; whether it finished.
async fn wait_finished(thread: &std::thread::JoinHandle<()>, limit: Duration) -> bool {
    let started = Instant::now();
    while !thread.is_finished() {
        if started.elapsed() >= limit {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    true
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

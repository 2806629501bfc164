//! The HTTP endpoints: `/metrics` on the metrics port, `/healthz` and `/readyz` on the health port
//! (Karpenter's 8080 and 8081). Ready means the caches synced (leader) or the replica stands by.
//! Healthy means the decision loop started a step within its liveness bound (or has not started):
//! a loop hung in a blocking call fails `/healthz`, and the kubelet restarts the container.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::IntoResponse;
use axum::routing::get;
use axum::Router;

use super::leadership::Heartbeat;
use super::metrics::Metrics;
use super::OperatorError;

/// Whether `/readyz` answers 200.
#[derive(Clone, Default)]
pub struct Readiness(Arc<AtomicBool>);

impl Readiness {
    pub fn set(&self, ready: bool) {
        self.0.store(ready, Ordering::Relaxed);
    }
    fn get(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}

/// What the health port answers from.
#[derive(Clone)]
pub struct Health {
    pub ready: Readiness,
    pub heartbeat: Heartbeat,
}

/// Binds both ports and serves them on the current runtime; returns the bound addresses.
pub async fn serve(
    metrics_addr: SocketAddr,
    health_addr: SocketAddr,
    metrics: Arc<Metrics>,
    health: Health,
) -> Result<(SocketAddr, SocketAddr), OperatorError> {
    let metrics_router = Router::new()
        .route("/metrics", get(metrics_text))
        .with_state(metrics);
    let health_router = Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .with_state(health);
    let bind = |addr: SocketAddr| async move {
        tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|e| OperatorError::Bind { addr, error: e })
    };
    let (m, h) = (bind(metrics_addr).await?, bind(health_addr).await?);
    let bound = (
        m.local_addr().map_err(|e| OperatorError::Bind {
            addr: metrics_addr,
            error: e,
        })?,
        h.local_addr().map_err(|e| OperatorError::Bind {
            addr: health_addr,
            error: e,
        })?,
    );
    tokio::spawn(async move { axum::serve(m, metrics_router).await });
    tokio::spawn(async move { axum::serve(h, health_router).await });
    Ok(bound)
}

async fn metrics_text(State(metrics): State<Arc<Metrics>>) -> impl IntoResponse {
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        metrics.encode(),
    )
}

async fn healthz(State(health): State<Health>) -> impl IntoResponse {
    match health.heartbeat.stalled() {
        None => (StatusCode::OK, "ok".to_string()),
        Some(stalled) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            format!(
                "decision loop started no step for {:.0?} (bound {:.0?})",
                stalled,
                health.heartbeat.bound()
            ),
        ),
    }
}

async fn readyz(State(health): State<Health>) -> impl IntoResponse {
    if health.ready.get() {
        (StatusCode::OK, "ok")
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "caches not synced")
    }
}

//! Leadership of the in-cluster controller: acquiring the Lease, renewing it from the moment it
//! is held, the [`LeaderToken`] every write asks, and the decision loop's heartbeat.
//!
//! The renewal runs on the async runtime beside everything else the leader does (syncing caches,
//! starting the cloud, the decision thread), so a slow start cannot let the Lease lapse. Each
//! attempt is bounded by what is left of the renew deadline, counted from when the last
//! successful attempt was sent; the token is extended to that deadline and lapses by itself if
//! nothing renews it, before any standby may take over (renew deadline < lease duration). A
//! decision loop that has not started a step for longer than its liveness bound stops the
//! renewals and fails `/healthz`: a leader hung in a blocking call hands the Lease over instead of
//! keeping it while nothing is provisioned.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::settings::{LeaderElection, OperatorSettings};
use super::OperatorError;
use crate::catalog::Catalog;
use crate::cloud::{CloudError, CloudProvider, Instance, LaunchRequest, Launched};
pub use crate::controller::{LeaderToken, NotLeader};
use crate::k8s::lease::{Attempt, LeaseLock};

/// When the decision loop last started a step, and how long it may go without starting one.
#[derive(Debug, Clone)]
pub struct Heartbeat(Arc<Beat>);

#[derive(Debug)]
struct Beat {
    base: Instant,
    /// Nanoseconds after `base` of the last beat; 0: the loop has not started.
    last: AtomicU64,
    bound: Duration,
}

impl Heartbeat {
    pub fn new(bound: Duration) -> Heartbeat {
        Heartbeat(Arc::new(Beat {
            base: Instant::now(),
            last: AtomicU64::new(0),
            bound,
        }))
    }

    /// The loop is alive now (called as each step starts).
    pub fn beat(&self) {
        self.beat_at(Instant::now());
    }

    fn beat_at(&self, at: Instant) {
        let nanos = at.saturating_duration_since(self.0.base).as_nanos();
        let nanos = u64::try_from(nanos).unwrap_or(u64::MAX).max(1);
        self.0.last.fetch_max(nanos, Ordering::SeqCst);
    }

    /// How long the loop has gone without a beat, when longer than its bound.
    pub fn stalled(&self) -> Option<Duration> {
        self.stalled_at(Instant::now())
    }

    fn stalled_at(&self, now: Instant) -> Option<Duration> {
        let last = self.0.last.load(Ordering::SeqCst);
        if last == 0 {
            return None;
        }
        let since = now
            .saturating_duration_since(self.0.base)
            .saturating_sub(Duration::from_nanos(last));
        (since > self.0.bound).then_some(since)
    }

    pub fn bound(&self) -> Duration {
        self.0.bound
    }
}

/// How long the decision loop may go without starting a step: the longest idle wait (the resync
/// period), two solves of each kind and four API requests at their timeout, and never less than
/// four lease durations. Without an API timeout a request may wait forever, so a hung one counts
/// as a hung loop.
pub fn liveness_bound(settings: &OperatorSettings) -> Duration {
    let c = &settings.controller;
    let solves = Duration::from_secs_f64(2.0 * (c.solve_time_limit + c.disruption_time_limit));
    let requests = settings.api_timeout.unwrap_or_default() * 4;
    let idle = settings.decisions.resync + settings.decisions.debounce;
    let floor = settings
        .leader_election
        .as_ref()
        .map(|le| le.lease_duration * 4)
        .unwrap_or_default();
    (idle + solves + requests).max(floor)
}

/// A cloud provider that launches and terminates only while the token leads: a deposed leader's
/// step that is still running cannot start a CreateFleet or a TerminateInstances. Reads go
/// through. The decision loop calls the provider's tick as every step starts, so the heartbeat
/// beats here too.
pub struct Gated<P> {
    pub inner: P,
    token: LeaderToken,
    heartbeat: Heartbeat,
}

impl<P> Gated<P> {
    pub fn new(inner: P, token: LeaderToken, heartbeat: Heartbeat) -> Self {
        Gated {
            inner,
            token,
            heartbeat,
        }
    }

    /// A step starts.
    pub fn step_started(&self) {
        self.heartbeat.beat();
    }

    fn check(&self) -> Result<(), CloudError> {
        self.token
            .check()
            .map_err(|e| CloudError::Provider(e.to_string()))
    }
}

impl<P: CloudProvider> CloudProvider for Gated<P> {
    async fn launch(&self, request: &LaunchRequest) -> Result<Launched, CloudError> {
        self.check()?;
        self.inner.launch(request).await
    }

    fn launch_concurrency(&self) -> usize {
        self.inner.launch_concurrency()
    }

    async fn delete(&self, id: &str) -> Result<(), CloudError> {
        self.check()?;
        self.inner.delete(id).await
    }

    async fn get(&self, id: &str) -> Result<Instance, CloudError> {
        self.inner.get(id).await
    }

    async fn list(&self) -> Result<Vec<Instance>, CloudError> {
        self.inner.list().await
    }

    async fn catalog(&self) -> Result<Catalog, CloudError> {
        self.inner.catalog().await
    }

    async fn drifted(&self, id: &str) -> Result<Option<String>, CloudError> {
        self.inner.drifted(id).await
    }
}

/// Waits until this replica holds the Lease; the token then leads until the renew deadline
/// counted from the winning attempt.
pub async fn acquire(lock: &LeaseLock, le: &LeaderElection, token: &LeaderToken) {
    loop {
        let sent = Instant::now();
        match tokio::time::timeout(le.renew_deadline, lock.try_acquire_or_renew()).await {
            Ok(Ok(Attempt::Leading)) => {
                token.extend(sent + le.renew_deadline);
                return;
            }
            Ok(Ok(Attempt::HeldBy(holder))) => tracing::debug!(%holder, "lease held"),
            Ok(Ok(Attempt::Conflict)) => {}
            Ok(Err(e)) => tracing::warn!(error = %e, "lease check failed"),
            Err(_) => tracing::warn!(after = ?le.renew_deadline, "lease check timed out"),
        }
        tokio::time::sleep(le.retry_period).await;
    }
}

/// Renews the Lease every retry period from the moment it is held. Returns (and revokes the
/// token) once it was not renewed within the renew deadline, another replica holds it, or the
/// decision loop stalled. Never returns without leader election.
pub async fn renew(
    lock: Option<&LeaseLock>,
    le: Option<&LeaderElection>,
    token: &LeaderToken,
    heartbeat: &Heartbeat,
) -> OperatorError {
    let (Some(lock), Some(le)) = (lock, le) else {
        return watch_heartbeat(heartbeat, token).await;
    };
    let mut renewed = Instant::now();
    loop {
        tokio::time::sleep(le.retry_period).await;
        if let Some(stalled) = heartbeat.stalled() {
            token.revoke();
            return OperatorError::Stalled(stalled);
        }
        let left = (renewed + le.renew_deadline).saturating_duration_since(Instant::now());
        let sent = Instant::now();
        match tokio::time::timeout(left, lock.try_acquire_or_renew()).await {
            Ok(Ok(Attempt::Leading)) => {
                renewed = sent;
                token.extend(sent + le.renew_deadline);
            }
            Ok(Ok(Attempt::HeldBy(holder))) => {
                token.revoke();
                tracing::warn!(%holder, "lease taken over");
                return OperatorError::LeaseLost(renewed.elapsed());
            }
            Ok(Ok(Attempt::Conflict)) => tracing::warn!("lease renewal conflicted"),
            Ok(Err(e)) => tracing::warn!(error = %e, "lease renewal failed"),
            Err(_) => tracing::warn!(after = ?left, "lease renewal timed out"),
        }
        if renewed.elapsed() >= le.renew_deadline {
            token.revoke();
            return OperatorError::LeaseLost(renewed.elapsed());
        }
    }
}

/// Without leader election nothing renews, but a stalled loop still fails the process.
async fn watch_heartbeat(heartbeat: &Heartbeat, token: &LeaderToken) -> OperatorError {
    loop {
        tokio::time::sleep(Duration::from_secs(1)).await;
        if let Some(stalled) = heartbeat.stalled() {
            token.revoke();
            return OperatorError::Stalled(stalled);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_loop_is_stalled_only_after_the_bound_without_a_step() {
        let h = Heartbeat::new(Duration::from_secs(30));
        let t0 = Instant::now();
        assert_eq!(
            h.stalled_at(t0 + Duration::from_secs(3600)),
            None,
            "not started"
        );
        h.beat_at(t0);
        assert_eq!(h.stalled_at(t0 + Duration::from_secs(30)), None);
        let late = h.stalled_at(t0 + Duration::from_secs(31)).unwrap();
        assert!(late > Duration::from_secs(30), "{late:?}");
        h.beat_at(t0 + Duration::from_secs(40));
        assert_eq!(h.stalled_at(t0 + Duration::from_secs(60)), None);
    }

    #[test]
    fn a_deposed_leader_launches_and_terminates_nothing() {
        let catalog = Catalog {
            region: "test".into(),
            instance_types: vec![],
            provenance: None,
        };
        let sim = crate::cloud::sim::SimCloud::new(catalog, vec![], 0.0, 1);
        let token = LeaderToken::pending();
        token.extend(Instant::now() + Duration::from_secs(60));
        let cloud = Gated::new(sim, token.clone(), Heartbeat::new(Duration::from_secs(1)));
        let request = LaunchRequest {
            claim: "c".into(),
            nodepool: "default".into(),
            offerings: vec![],
            template: Default::default(),
        };
        // a leader's request reaches the provider (which refuses an empty request itself)
        let led = pollster::block_on(cloud.launch(&request));
        assert!(matches!(led, Err(CloudError::NoOfferings(_))), "{led:?}");
        token.revoke();
        let deposed = pollster::block_on(cloud.launch(&request));
        assert!(matches!(&deposed, Err(CloudError::Provider(m)) if m.contains("not the leader")));
        let deleted = pollster::block_on(cloud.delete("i-1"));
        assert!(matches!(&deleted, Err(CloudError::Provider(m)) if m.contains("not the leader")));
    }
}

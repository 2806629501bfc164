//! Leader election on a coordination.k8s.io/v1 Lease, the way client-go's leader election works:
//! the holder renews the Lease every retry period; another replica takes it over only once the
//! record has stayed unchanged for its `leaseDurationSeconds`, counted on the contender's own
//! monotonic clock from when it first saw that record. The times written in the record
//! (`renewTime`, `acquireTime`) are the holder's wall clock, informational only: comparing them
//! with another node's wall clock would let clock skew decide who leads. Every write carries the
//! resourceVersion it read, so two replicas racing for an expired Lease cannot both win (the loser
//! gets 409).

use std::sync::Mutex;
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, PostParams};
use kube::Client;

use super::K8sError;

/// The outcome of one attempt to acquire or renew the Lease.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Attempt {
    /// This replica holds the Lease: it was created, renewed or taken over.
    Leading,
    /// Another replica holds it and may still be renewing it.
    HeldBy(String),
    /// Another write came first (409); the next attempt reads the Lease again.
    Conflict,
}

/// What this replica last saw of the Lease, and when by its own monotonic clock. The clock
/// restarts whenever the record changes, as client-go's `observedTime` does.
#[derive(Debug, Default)]
pub struct Observed {
    record: Option<LeaseSpec>,
    at: Option<Instant>,
}

impl Observed {
    /// Takes in the record as read at `now`.
    pub fn see(&mut self, spec: &LeaseSpec, now: Instant) {
        if self.record.as_ref() != Some(spec) {
            self.record = Some(spec.clone());
            self.at = Some(now);
        }
    }

    /// The replica other than `me` that holds the Lease at `now`: the record names it and has not
    /// stayed unchanged for its lease duration since this replica saw it. `fallback` is the
    /// duration of a record that names none.
    pub fn held_by_other(&self, me: &str, now: Instant, fallback: Duration) -> Option<&str> {
        let (record, at) = (self.record.as_ref()?, self.at?);
        let holder = record
            .holder_identity
            .as_deref()
            .filter(|h| !h.is_empty())?;
        if holder == me {
            return None;
        }
        let seconds = record
            .lease_duration_seconds
            .map(|s| Duration::from_secs(s.max(0) as u64))
            .unwrap_or(fallback);
        (now < at + seconds).then_some(holder)
    }
}

pub struct LeaseLock {
    api: Api<Lease>,
    name: String,
    identity: String,
    duration: Duration,
    observed: Mutex<Observed>,
}

impl LeaseLock {
    pub fn new(
        client: Client,
        namespace: &str,
        name: &str,
        identity: &str,
        duration: Duration,
    ) -> LeaseLock {
        LeaseLock {
            api: Api::namespaced(client, namespace),
            name: name.into(),
            identity: identity.into(),
            duration,
            observed: Mutex::new(Observed::default()),
        }
    }

    pub fn identity(&self) -> &str {
        &self.identity
    }

    fn observed(&self) -> std::sync::MutexGuard<'_, Observed> {
        self.observed.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// One attempt: creates the Lease, renews it if held, or takes it over if its record stayed
    /// unchanged for the lease duration. The caller bounds the attempt's time (a hung request
    /// must not outlive the renew deadline).
    pub async fn try_acquire_or_renew(&self) -> Result<Attempt, K8sError> {
        let current = match self.api.get_opt(&self.name).await? {
            None => return self.create().await,
            Some(l) => l,
        };
        let spec = current.spec.clone().unwrap_or_default();
        let seen = Instant::now();
        let holder = {
            let mut observed = self.observed();
            observed.see(&spec, seen);
            let holder = observed.held_by_other(&self.identity, seen, self.duration);
            holder.map(str::to_string)
        };
        if let Some(holder) = holder {
            return Ok(Attempt::HeldBy(holder));
        }
        let now = MicroTime(Timestamp::now());
        let mut next = current.clone();
        let mut s = spec.clone();
        if spec.holder_identity.as_deref() != Some(&self.identity) {
            s.holder_identity = Some(self.identity.clone());
            s.acquire_time = Some(now.clone());
            s.lease_transitions = Some(spec.lease_transitions.unwrap_or(0) + 1);
        }
        s.renew_time = Some(now);
        s.lease_duration_seconds = Some(self.duration_seconds());
        next.spec = Some(s.clone());
        match self
            .api
            .replace(&self.name, &PostParams::default(), &next)
            .await
        {
            Ok(_) => {
                self.observed().see(&s, Instant::now());
                Ok(Attempt::Leading)
            }
            Err(kube::Error::Api(e)) if e.code == 409 => Ok(Attempt::Conflict),
            Err(e) => Err(e.into()),
        }
    }

    fn duration_seconds(&self) -> i32 {
        i32::try_from(self.duration.as_secs().max(1)).unwrap_or(i32::MAX)
    }

    async fn create(&self) -> Result<Attempt, K8sError> {
        let now = MicroTime(Timestamp::now());
        let spec = LeaseSpec {
            holder_identity: Some(self.identity.clone()),
            acquire_time: Some(now.clone()),
            renew_time: Some(now),
            lease_duration_seconds: Some(self.duration_seconds()),
            lease_transitions: Some(0),
            ..Default::default()
        };
        let lease = Lease {
            metadata: ObjectMeta {
                name: Some(self.name.clone()),
                ..Default::default()
            },
            spec: Some(spec.clone()),
        };
        match self.api.create(&PostParams::default(), &lease).await {
            Ok(_) => {
                self.observed().see(&spec, Instant::now());
                Ok(Attempt::Leading)
            }
            Err(kube::Error::Api(e)) if e.code == 409 => Ok(Attempt::Conflict),
            Err(e) => Err(e.into()),
        }
    }

    /// Gives the Lease up on a clean shutdown, so a standby takes over at its next attempt
    /// rather than a lease duration later. Called only once this replica stopped acting.
    pub async fn release(&self) -> Result<(), K8sError> {
        let Some(mut lease) = self.api.get_opt(&self.name).await? else {
            return Ok(());
        };
        let Some(spec) = lease.spec.as_mut() else {
            return Ok(());
        };
        if spec.holder_identity.as_deref() != Some(&self.identity) {
            return Ok(());
        }
        spec.holder_identity = None;
        spec.renew_time = Some(MicroTime(Timestamp::now()));
        spec.lease_duration_seconds = Some(1);
        match self
            .api
            .replace(&self.name, &PostParams::default(), &lease)
            .await
        {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(e)) if e.code == 409 => Ok(()),
            Err(e) => Err(e.into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::jiff::SignedDuration;

    const LEASE: Duration = Duration::from_secs(15);

    /// A record as a holder writes it: its renewTime is its own wall clock, `skew` off ours.
    fn record(holder: Option<&str>, renewal: i64, skew: i64) -> LeaseSpec {
        let wall = Timestamp::from_second(1_800_000_000).unwrap();
        LeaseSpec {
            holder_identity: holder.map(str::to_string),
            renew_time: Some(MicroTime(
                wall + SignedDuration::from_secs(renewal * 2 + skew),
            )),
            lease_duration_seconds: Some(15),
            ..Default::default()
        }
    }

    /// A fake monotonic clock: seconds after an arbitrary start.
    fn clock(t0: Instant, secs: u64) -> Instant {
        t0 + Duration::from_secs(secs)
    }

    #[test]
    fn a_renewed_lease_stays_held_whatever_the_holders_clock_says() {
        let t0 = Instant::now();
        for skew in [-30, 0, 30, -3600, 3600] {
            let mut o = Observed::default();
            // the holder renews every 2 s for a minute; we read it every 2 s
            for renewal in 0..30 {
                let now = clock(t0, 2 * renewal as u64);
                o.see(&record(Some("a"), renewal, skew), now);
                assert_eq!(o.held_by_other("b", now, LEASE), Some("a"), "skew {skew}");
            }
        }
    }

    #[test]
    fn a_lease_not_renewed_expires_a_lease_duration_after_we_saw_it_change() {
        let t0 = Instant::now();
        for skew in [-30, 0, 30, -3600, 3600] {
            let mut o = Observed::default();
            let last = record(Some("a"), 7, skew);
            o.see(&last, clock(t0, 100));
            // the same record read again does not restart the clock
            for s in [101, 105, 110, 114] {
                o.see(&last, clock(t0, s));
                assert_eq!(o.held_by_other("b", clock(t0, s), LEASE), Some("a"));
            }
            assert_eq!(o.held_by_other("b", clock(t0, 115), LEASE), None, "{skew}");
        }
    }

    #[test]
    fn a_change_restarts_the_count_even_when_its_time_goes_backwards() {
        let t0 = Instant::now();
        let mut o = Observed::default();
        o.see(&record(Some("a"), 10, 0), clock(t0, 0));
        // a new holder whose clock runs 30 s behind writes an older renewTime
        o.see(&record(Some("c"), 10, -30), clock(t0, 14));
        assert_eq!(o.held_by_other("b", clock(t0, 20), LEASE), Some("c"));
        assert_eq!(o.held_by_other("b", clock(t0, 29), LEASE), None);
    }

    #[test]
    fn a_released_or_own_lease_is_free_to_take() {
        let t0 = Instant::now();
        let mut o = Observed::default();
        assert_eq!(o.held_by_other("b", t0, LEASE), None, "nothing seen");
        o.see(&record(None, 0, 0), t0);
        assert_eq!(o.held_by_other("b", t0, LEASE), None);
        o.see(&record(Some(""), 0, 0), t0);
        assert_eq!(o.held_by_other("b", t0, LEASE), None);
        o.see(&record(Some("b"), 0, 0), t0);
        assert_eq!(o.held_by_other("b", t0, LEASE), None, "our own");
        assert_eq!(o.held_by_other("a", t0, LEASE), Some("b"));
    }
}

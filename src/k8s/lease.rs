//! Leader election on a coordination.k8s.io/v1 Lease, the way client-go's leader election works:
//! the holder renews `renewTime` every retry period; another replica takes the Lease over only
//! once `renewTime + leaseDurationSeconds` has passed. Every write carries the resourceVersion it
//! read, so two replicas racing for an expired Lease cannot both win (the loser gets 409).

use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::{Api, PostParams};
use kube::Client;

use super::K8sError;

pub struct LeaseLock {
    api: Api<Lease>,
    name: String,
    identity: String,
    duration: Duration,
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
        }
    }

    pub fn identity(&self) -> &str {
        &self.identity
    }

    /// One attempt: creates the Lease, renews it if held, or takes it over if expired.
    /// Ok(true): this replica leads until `duration` from now.
    pub async fn try_acquire_or_renew(&self) -> Result<bool, K8sError> {
        let now = Timestamp::now();
        let current = match self.api.get_opt(&self.name).await? {
            None => return self.create(now).await,
            Some(l) => l,
        };
        let spec = current.spec.clone().unwrap_or_default();
        let held_by_us = spec.holder_identity.as_deref() == Some(&self.identity);
        if !held_by_us && !expired(&spec, now) {
            return Ok(false);
        }
        let mut next = current.clone();
        let mut s = spec.clone();
        if !held_by_us {
            s.holder_identity = Some(self.identity.clone());
            s.acquire_time = Some(MicroTime(now));
            s.lease_transitions = Some(spec.lease_transitions.unwrap_or(0) + 1);
        }
        s.renew_time = Some(MicroTime(now));
        s.lease_duration_seconds = Some(self.duration.as_secs().max(1) as i32);
        next.spec = Some(s);
        match self
            .api
            .replace(&self.name, &PostParams::default(), &next)
            .await
        {
            Ok(_) => Ok(true),
            Err(kube::Error::Api(e)) if e.code == 409 => Ok(false),
            Err(e) => Err(e.into()),
        }
    }

    async fn create(&self, now: Timestamp) -> Result<bool, K8sError> {
        let lease = Lease {
            metadata: ObjectMeta {
                name: Some(self.name.clone()),
                ..Default::default()
            },
            spec: Some(LeaseSpec {
                holder_identity: Some(self.identity.clone()),
                acquire_time: Some(MicroTime(now)),
                renew_time: Some(MicroTime(now)),
                lease_duration_seconds: Some(self.duration.as_secs().max(1) as i32),
                lease_transitions: Some(0),
                ..Default::default()
            }),
        };
        match self.api.create(&PostParams::default(), &lease).await {
            Ok(_) => Ok(true),
            Err(kube::Error::Api(e)) if e.code == 409 => Ok(false),
            Err(e) => Err(e.into()),
        }
    }

    /// Gives the Lease up on a clean shutdown, so a standby takes over at once.
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
        spec.renew_time = None;
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

/// A Lease nobody holds, or whose holder stopped renewing it.
fn expired(spec: &LeaseSpec, now: Timestamp) -> bool {
    let (Some(holder), Some(renewed)) = (spec.holder_identity.as_deref(), spec.renew_time.as_ref())
    else {
        return true;
    };
    if holder.is_empty() {
        return true;
    }
    let duration = SignedDuration::from_secs(spec.lease_duration_seconds.unwrap_or(15).into());
    renewed.0 + duration < now
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(holder: Option<&str>, renewed_secs_ago: i64) -> LeaseSpec {
        LeaseSpec {
            holder_identity: holder.map(str::to_string),
            renew_time: Some(MicroTime(
                Timestamp::now() - SignedDuration::from_secs(renewed_secs_ago),
            )),
            lease_duration_seconds: Some(15),
            ..Default::default()
        }
    }

    #[test]
    fn a_lease_expires_only_after_its_duration_without_renewal() {
        let now = Timestamp::now();
        assert!(!expired(&spec(Some("a"), 5), now));
        assert!(expired(&spec(Some("a"), 16), now));
        assert!(expired(&spec(None, 0), now));
        assert!(expired(&spec(Some(""), 0), now));
    }
}

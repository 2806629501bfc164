//! The garbage collector of leaked instances: an EC2 instance tagged for this cluster that no
//! NodeClaim owns costs money and joins no scheduling decision, so it is terminated, as Karpenter's
//! instance garbage collection does. Leaks come from a crash between CreateFleet and writing the
//! NodeClaim's status, a launch that timed out on the client but succeeded in EC2, or a NodeClaim
//! deleted by hand without its finalizer.
//!
//! Data flow: [`collect`] lists the cluster's instances ([`list_cluster_instances`],
//! DescribeInstances by the `kubernetes.io/cluster/<name>` tag key) FIRST, then asks the caller for
//! the NodeClaims' [`Owners`]: a NodeClaim written while the listing ran is then seen, so its
//! instance is never taken for a leak. The pure [`to_collect`] keeps the running or pending
//! instances no NodeClaim owns that were launched more than `grace` ago (an instance launched just
//! before its NodeClaim status is written is young, and safe), and [`terminate`] ends them.
//!
//! The other way round, [`claims_to_collect`] finds the NodeClaims whose instance is gone
//! (terminated in the console, a spot reclaim whose notice was missed): the host deletes them, and
//! their nodes are drained and released like any deleted NodeClaim.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use aws_sdk_ec2::types::{InstanceLifecycleType, InstanceStateName};
use chrono::{DateTime, Utc};

pub use super::instances::terminate;
use super::{instances, AwsClients, AwsError, NODECLAIM_TAG};
use crate::catalog::CapacityType;

/// EC2's states, as far as the collector cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Ec2State {
    Pending,
    Running,
    Stopping,
    Stopped,
    ShuttingDown,
    Terminated,
    /// A state this SDK version does not know: never collected.
    Other,
}

/// One instance tagged for the cluster, as DescribeInstances reports it.
#[derive(Debug, Clone, PartialEq)]
pub struct ClusterInstance {
    pub id: String,
    pub instance_type: String,
    pub zone: String,
    pub capacity_type: CapacityType,
    /// None if EC2 left it out; such an instance cannot be proven old and is kept.
    pub launch_time: Option<DateTime<Utc>>,
    pub tags: BTreeMap<String, String>,
    pub state: Ec2State,
}

impl ClusterInstance {
    /// The NodeClaim the instance was launched for (its `karpenter.sh/nodeclaim` tag).
    pub fn claim(&self) -> Option<&str> {
        self.tags.get(NODECLAIM_TAG).map(String::as_str)
    }
}

/// What the cluster's NodeClaims own: the instances their status names, and the claims still
/// launching (no provider ID yet), whose tagged instance may be the one about to be recorded.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Owners {
    instances: BTreeSet<String>,
    launching: BTreeSet<String>,
}

impl Owners {
    /// From each NodeClaim's name and `status.providerID` (`aws:///<zone>/<instance-id>` or a bare
    /// instance id).
    pub fn from_claims<'a>(claims: impl IntoIterator<Item = (&'a str, Option<&'a str>)>) -> Owners {
        let mut owners = Owners::default();
        for (name, provider_id) in claims {
            match provider_id.and_then(instance_id) {
                Some(id) => owners.instances.insert(id.to_string()),
                None => owners.launching.insert(name.to_string()),
            };
        }
        owners
    }

    /// Whether a NodeClaim owns `instance`: its status names the instance, or the instance is
    /// tagged for a claim that has no instance recorded yet. A claim that already names another
    /// instance does not own this one (a second launch for the same claim is a leak).
    pub fn owns(&self, instance: &ClusterInstance) -> bool {
        self.instances.contains(&instance.id)
            || instance.claim().is_some_and(|c| self.launching.contains(c))
    }
}

/// The instance id of a provider ID (`aws:///us-east-1a/i-0abc`, `aws:///i-0abc`) or of a bare
/// instance id; None for anything else.
pub fn instance_id(provider_id: &str) -> Option<&str> {
    let id = provider_id.rsplit('/').next()?;
    let plain = !provider_id.contains('/');
    (id.starts_with("i-") && id.len() > 2 && (plain || provider_id.starts_with("aws://")))
        .then_some(id)
}

/// The ids of the instances to terminate at `now`: running or pending, owned by no NodeClaim, and
/// launched more than `grace` ago. Stopping, stopped and terminating instances are left alone: they
/// are already going or were stopped on purpose.
pub fn to_collect(
    instances: &[ClusterInstance],
    owners: &Owners,
    now: DateTime<Utc>,
    grace: Duration,
) -> Vec<String> {
    let grace = chrono::Duration::from_std(grace).unwrap_or(chrono::Duration::MAX);
    instances
        .iter()
        .filter(|i| matches!(i.state, Ec2State::Pending | Ec2State::Running))
        .filter(|i| !owners.owns(i))
        .filter(|i| {
            i.launch_time
                .is_some_and(|t| now.signed_duration_since(t) > grace)
        })
        .map(|i| i.id.clone())
        .collect()
}

/// A NodeClaim as the claim collector sees it: its name, the instance its status names, and
/// when it was created.
#[derive(Debug, Clone, PartialEq)]
pub struct LaunchedClaim {
    pub name: String,
    pub instance: String,
    pub created: Option<DateTime<Utc>>,
}

/// The claims that may have lost their instance at `now`: created more than `grace` ago, and
/// naming an instance that is not among the cluster's live instances (`live`, from
/// [`list_cluster_instances`]). They are suspects only: [`claims_to_collect`] confirms by id.
pub fn suspects<'a>(
    live: &[ClusterInstance],
    claims: &'a [LaunchedClaim],
    now: DateTime<Utc>,
    grace: Duration,
) -> Vec<&'a LaunchedClaim> {
    let grace = chrono::Duration::from_std(grace).unwrap_or(chrono::Duration::MAX);
    let live: BTreeSet<&str> = live.iter().map(|i| i.id.as_str()).collect();
    claims
        .iter()
        .filter(|c| !live.contains(c.instance.as_str()))
        .filter(|c| {
            c.created
                .is_some_and(|t| now.signed_duration_since(t) > grace)
        })
        .collect()
}

/// NodeClaims whose instance is gone (terminated, shutting down, or no longer known to EC2), as
/// Karpenter's NodeClaim garbage collection finds them: the cluster's instances are listed
/// (paged), then the claims naming none of them are confirmed by a batched DescribeInstances
/// of their ids, so an instance that only lacks the cluster's tags is never taken for gone.
/// `claims` is called after the listing, as in [`collect`].
pub async fn claims_to_collect(
    clients: &AwsClients,
    cluster: &str,
    now: DateTime<Utc>,
    grace: Duration,
    claims: impl FnOnce() -> Vec<LaunchedClaim>,
) -> Result<Vec<String>, AwsError> {
    let live = list_cluster_instances(clients, cluster).await?;
    let claims = claims();
    let suspects = suspects(&live, &claims, now, grace);
    if suspects.is_empty() {
        return Ok(vec![]);
    }
    let ids: Vec<String> = suspects.iter().map(|c| c.instance.clone()).collect();
    let states = instances::states(clients, &ids, instances::PAGE).await?;
    Ok(suspects
        .into_iter()
        .filter(|c| {
            states.get(&c.instance).is_none_or(|s| {
                matches!(
                    ec2_state(Some(s)),
                    Ec2State::ShuttingDown | Ec2State::Terminated
                )
            })
        })
        .map(|c| c.name.clone())
        .collect())
}

/// Lists the cluster's leaked instances and terminates them; returns the ids terminated. `owners`
/// is called after the listing (see the module comment for why the order matters).
pub async fn collect(
    clients: &AwsClients,
    cluster: &str,
    now: DateTime<Utc>,
    grace: Duration,
    owners: impl FnOnce() -> Owners,
) -> Result<Vec<String>, AwsError> {
    collect_while(clients, cluster, now, grace, owners, || true).await
}

/// [`collect`] that terminates only if `may_write` still holds once the listing is in: the
/// listing takes seconds on a large account, and a replica that lost its lease meanwhile must
/// not terminate what the new leader's claims may own.
pub async fn collect_while(
    clients: &AwsClients,
    cluster: &str,
    now: DateTime<Utc>,
    grace: Duration,
    owners: impl FnOnce() -> Owners,
    may_write: impl Fn() -> bool,
) -> Result<Vec<String>, AwsError> {
    let instances = list_cluster_instances(clients, cluster).await?;
    let ids = to_collect(&instances, &owners(), now, grace);
    if ids.is_empty() || !may_write() {
        return Ok(vec![]);
    }
    for id in &ids {
        tracing::info!(instance = %id, cluster, "terminating an instance no NodeClaim owns");
    }
    terminate(clients, &ids).await?;
    Ok(ids)
}

/// Every pending, running, stopping or stopped instance carrying the cluster's tag, all pages.
pub async fn list_cluster_instances(
    clients: &AwsClients,
    cluster: &str,
) -> Result<Vec<ClusterInstance>, AwsError> {
    list_cluster_instances_paged(clients, cluster, instances::PAGE).await
}

/// [`list_cluster_instances`] asking for `page_size` reservations a page (tests use small pages to
/// exercise the paging).
pub async fn list_cluster_instances_paged(
    clients: &AwsClients,
    cluster: &str,
    page_size: i32,
) -> Result<Vec<ClusterInstance>, AwsError> {
    Ok(instances::tagged(clients, cluster, page_size)
        .await?
        .iter()
        .filter_map(convert)
        .collect())
}

/// The collector's view of an SDK instance; None (skipped, logged) without an id.
fn convert(i: &aws_sdk_ec2::types::Instance) -> Option<ClusterInstance> {
    let Some(id) = i.instance_id() else {
        tracing::warn!("DescribeInstances returned an instance without an id");
        return None;
    };
    let launch_time = i
        .launch_time()
        .and_then(|t| DateTime::from_timestamp(t.secs(), t.subsec_nanos()));
    let tags = i
        .tags()
        .iter()
        .filter_map(|t| Some((t.key()?.to_string(), t.value().unwrap_or("").to_string())))
        .collect();
    Some(ClusterInstance {
        id: id.to_string(),
        instance_type: i
            .instance_type()
            .map(|t| t.as_str().to_string())
            .unwrap_or_default(),
        zone: i
            .placement()
            .and_then(|p| p.availability_zone())
            .unwrap_or_default()
            .to_string(),
        // capacity blocks and reservations are paid for up front; only spot is reclaimed
        capacity_type: if i.instance_lifecycle() == Some(&InstanceLifecycleType::Spot) {
            CapacityType::Spot
        } else {
            CapacityType::OnDemand
        },
        launch_time,
        tags,
        state: ec2_state(i.state().and_then(|s| s.name())),
    })
}

fn ec2_state(name: Option<&InstanceStateName>) -> Ec2State {
    match name {
        Some(InstanceStateName::Pending) => Ec2State::Pending,
        Some(InstanceStateName::Running) => Ec2State::Running,
        Some(InstanceStateName::Stopping) => Ec2State::Stopping,
        Some(InstanceStateName::Stopped) => Ec2State::Stopped,
        Some(InstanceStateName::ShuttingDown) => Ec2State::ShuttingDown,
        Some(InstanceStateName::Terminated) => Ec2State::Terminated,
        _ => Ec2State::Other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn at(secs: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(1_800_000_000 + secs, 0).expect("in range")
    }

    fn instance(id: &str, launched: i64, state: Ec2State, claim: Option<&str>) -> ClusterInstance {
        let tags = claim
            .map(|c| (NODECLAIM_TAG.to_string(), c.to_string()))
            .into_iter()
            .collect();
        ClusterInstance {
            id: id.into(),
            instance_type: "m5.large".into(),
            zone: "us-west-2a".into(),
            capacity_type: CapacityType::OnDemand,
            launch_time: Some(at(launched)),
            tags,
            state,
        }
    }

    const GRACE: Duration = Duration::from_secs(30);

    #[test]
    fn a_claim_is_a_suspect_only_when_old_and_its_instance_is_not_live() {
        let live = [instance("i-live", 0, Ec2State::Running, Some("a"))];
        let claim = |name: &str, id: &str, created: Option<i64>| LaunchedClaim {
            name: name.into(),
            instance: id.into(),
            created: created.map(at),
        };
        let claims = [
            claim("a", "i-live", Some(0)),
            claim("gone", "i-gone", Some(0)),
            claim("young", "i-young", Some(100)),
            claim("undated", "i-undated", None),
        ];
        let names: Vec<&str> = suspects(&live, &claims, at(120), GRACE)
            .iter()
            .map(|c| c.name.as_str())
            .collect();
        assert_eq!(names, ["gone"]);
    }

    #[test]
    fn provider_ids_name_their_instance() {
        assert_eq!(instance_id("aws:///us-west-2a/i-0abc"), Some("i-0abc"));
        assert_eq!(instance_id("aws:///i-0abc"), Some("i-0abc"));
        assert_eq!(instance_id("i-0abc"), Some("i-0abc"));
        assert_eq!(instance_id("kind://docker/kind/node-1"), None);
        assert_eq!(instance_id("aws:///us-west-2a/"), None);
        assert_eq!(instance_id("gce://p/z/i-0abc"), None);
    }

    #[test]
    fn only_an_old_unowned_running_or_pending_instance_is_collected() {
        let instances = [
            instance("i-owned", 0, Ec2State::Running, Some("claim-a")),
            instance("i-leaked", 0, Ec2State::Running, None),
            instance("i-leaked-pending", 0, Ec2State::Pending, Some("claim-gone")),
            instance("i-young", 100, Ec2State::Running, None),
            instance("i-stopped", 0, Ec2State::Stopped, None),
            instance("i-stopping", 0, Ec2State::Stopping, None),
            instance("i-other", 0, Ec2State::Other, None),
        ];
        let owners = Owners::from_claims([("claim-a", Some("aws:///us-west-2a/i-owned"))]);
        assert_eq!(
            to_collect(&instances, &owners, at(120), GRACE),
            vec!["i-leaked".to_string(), "i-leaked-pending".into()]
        );
    }

    #[test]
    fn the_grace_is_strict_and_a_future_launch_is_young() {
        let i = [instance("i-1", 0, Ec2State::Running, None)];
        assert!(to_collect(&i, &Owners::default(), at(30), GRACE).is_empty());
        assert_eq!(
            to_collect(&i, &Owners::default(), at(31), GRACE),
            vec!["i-1".to_string()]
        );
        assert!(to_collect(&i, &Owners::default(), at(-60), Duration::ZERO).is_empty());
    }

    #[test]
    fn an_instance_without_launch_time_is_kept() {
        let mut i = instance("i-1", 0, Ec2State::Running, None);
        i.launch_time = None;
        assert!(to_collect(&[i], &Owners::default(), at(10_000), GRACE).is_empty());
    }

    #[test]
    fn a_launching_claim_owns_its_tagged_instance_but_a_launched_one_does_not_own_a_second() {
        let first = instance("i-first", 0, Ec2State::Running, Some("claim-a"));
        let second = instance("i-second", 0, Ec2State::Running, Some("claim-a"));
        let launching = Owners::from_claims([("claim-a", None)]);
        assert!(
            to_collect(&[first.clone(), second.clone()], &launching, at(600), GRACE).is_empty()
        );
        let launched = Owners::from_claims([("claim-a", Some("aws:///us-west-2a/i-first"))]);
        assert_eq!(
            to_collect(&[first, second], &launched, at(600), GRACE),
            vec!["i-second".to_string()]
        );
    }

    #[test]
    fn an_unreadable_provider_id_counts_as_launching() {
        let i = instance("i-1", 0, Ec2State::Running, Some("claim-a"));
        assert!(to_collect(
            std::slice::from_ref(&i),
            &Owners::from_claims([("claim-a", Some("bogus"))]),
            at(600),
            GRACE
        )
        .is_empty());
        assert_eq!(
            to_collect(
                &[i],
                &Owners::from_claims([("claim-b", Some("bogus"))]),
                at(600),
                GRACE
            ),
            vec!["i-1".to_string()]
        );
    }

    #[test]
    fn sdk_states_and_lifecycles_convert() {
        assert_eq!(
            ec2_state(Some(&InstanceStateName::ShuttingDown)),
            Ec2State::ShuttingDown
        );
        assert_eq!(ec2_state(None), Ec2State::Other);
        let sdk = aws_sdk_ec2::types::Instance::builder()
            .instance_id("i-9")
            .instance_lifecycle(InstanceLifecycleType::Spot)
            .launch_time(aws_sdk_ec2::primitives::DateTime::from_secs(1_800_000_000))
            .tags(
                aws_sdk_ec2::types::Tag::builder()
                    .key(NODECLAIM_TAG)
                    .value("claim-z")
                    .build(),
            )
            .build();
        let c = convert(&sdk).expect("has an id");
        assert_eq!(
            (c.capacity_type, c.launch_time, c.claim(), c.state),
            (
                CapacityType::Spot,
                Some(at(0)),
                Some("claim-z"),
                Ec2State::Other
            )
        );
        assert_eq!(
            convert(&aws_sdk_ec2::types::Instance::builder().build()),
            None
        );
    }

    fn arb_state() -> impl Strategy<Value = Ec2State> {
        prop_oneof![
            Just(Ec2State::Pending),
            Just(Ec2State::Running),
            Just(Ec2State::Stopping),
            Just(Ec2State::Stopped),
            Just(Ec2State::ShuttingDown),
            Just(Ec2State::Terminated),
            Just(Ec2State::Other)
        ]
    }

    /// (launched, state, claim index, owned by provider id, claim launching)
    fn arb_instances() -> impl Strategy<Value = Vec<(i64, Ec2State, Option<u8>, bool, bool)>> {
        prop::collection::vec(
            (
                0i64..600,
                arb_state(),
                prop::option::of(0u8..4),
                any::<bool>(),
                any::<bool>(),
            ),
            0..20,
        )
    }

    proptest! {
        #[test]
        fn owned_and_young_instances_are_never_collected(specs in arb_instances(), now in 0i64..900, grace in 0u64..300) {
            let instances: Vec<ClusterInstance> = specs.iter().enumerate().map(|(n, (launched, st, claim, _, _))| {
                instance(&format!("i-{n}"), *launched, *st, claim.map(|c| format!("claim-{c}")).as_deref())
            }).collect();
            let by_provider = specs.iter().enumerate().filter(|(_, s)| s.3).map(|(n, _)| (format!("owner-{n}"), Some(format!("aws:///us-west-2a/i-{n}"))));
            let launching = specs.iter().filter(|s| s.4).filter_map(|s| s.2).map(|c| (format!("claim-{c}"), None));
            let claims: Vec<(String, Option<String>)> = by_provider.chain(launching).collect();
            let owners = Owners::from_claims(claims.iter().map(|(n, p)| (n.as_str(), p.as_deref())));
            let grace = Duration::from_secs(grace);
            let collected = to_collect(&instances, &owners, at(now), grace);
            // ownership and age worked out from the specs, not through `Owners`
            let owned = |n: usize| specs[n].3 || specs[n].2.is_some_and(|c| specs.iter().any(|s| s.4 && s.2 == Some(c)));
            let old = |n: usize| now - specs[n].0 > grace.as_secs() as i64;
            for id in &collected {
                let n = instances.iter().position(|i| &i.id == id).expect("collected ids are listed ids");
                prop_assert!(!owned(n), "{id} is owned");
                prop_assert!(old(n), "{id} launched at {} is young at {now}, grace {grace:?}", specs[n].0);
                prop_assert!(matches!(specs[n].1, Ec2State::Pending | Ec2State::Running), "{id} is {:?}", specs[n].1);
            }
            // and nothing else is kept: every unowned, old, running or pending instance is
            // collected
            let expected = (0..specs.len()).filter(|&n| matches!(specs[n].1, Ec2State::Pending | Ec2State::Running) && !owned(n) && old(n)).count();
            prop_assert_eq!(collected.len(), expected);
        }
    }
}

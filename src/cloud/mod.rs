//! The cloud side of joiner: what it asks of EC2 (or any provider) and what it remembers about the
//! answers. [`CloudProvider`] is the small trait the executor launches and terminates through;
//! `sim` implements it for the simulator (and for tests until the AWS adapter lands). Offerings
//! that ran out of capacity go into [`Unavailable`], which masks them out of the catalog the next
//! solves see, the way Karpenter's 3-minute insufficient-capacity cache does.
//!
//! Flow: a plan's new node becomes a [`LaunchRequest`] (its offering first, then its fallbacks,
//! minus unavailable ones); the provider answers with an [`Instance`] and the offerings it found
//! without capacity; those are recorded, and the instance becomes a node when it registers.

#[cfg(feature = "cluster")]
pub mod aws;
pub mod sim;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::catalog::{CapacityType, Catalog};
use crate::domain::labels::{Labels, Taint};
use crate::domain::{ClusterSnapshot, KubeletSettings};
use crate::optimizer::{NewNode, OfferingRef};

/// How long an offering that reported insufficient capacity stays out of the catalog (Karpenter's
/// `UnavailableOfferingsTTL`).
pub const UNAVAILABLE_TTL_SECONDS: f64 = 180.0;

/// The first wait before a termination the cloud refused is asked for again.
pub const TERMINATE_RETRY_SECONDS: f64 = 1.0;
/// The longest such wait: an outage is not hammered, and a throttle that clears is noticed soon.
pub const TERMINATE_RETRY_MAX_SECONDS: f64 = 30.0;

/// The wait after a refused termination whose previous wait was `previous` (None: the first
/// refusal): doubling from [`TERMINATE_RETRY_SECONDS`] up to [`TERMINATE_RETRY_MAX_SECONDS`].
pub fn terminate_retry_wait(previous: Option<f64>) -> f64 {
    previous.map_or(TERMINATE_RETRY_SECONDS, |w| {
        (w * 2.0).min(TERMINATE_RETRY_MAX_SECONDS)
    })
}

/// One offering, as the key of the unavailability cache.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct OfferingKey {
    pub instance_type: String,
    pub zone: String,
    pub capacity_type: CapacityType,
}

impl From<&OfferingRef> for OfferingKey {
    fn from(o: &OfferingRef) -> Self {
        OfferingKey {
            instance_type: o.instance_type.clone(),
            zone: o.zone.clone(),
            capacity_type: o.capacity_type,
        }
    }
}

/// A request to launch one node: the offerings to try, in order (the plan's choice first).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LaunchRequest {
    /// The NodeClaim the instance is for; instances are tagged with it.
    pub claim: String,
    pub nodepool: String,
    pub offerings: Vec<OfferingRef>,
    pub template: NodeTemplate,
}

/// What the NodePool says a node boots with: its node class, and the labels, taints and kubelet
/// settings the node registers with.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NodeTemplate {
    pub node_class: Option<String>,
    pub labels: Labels,
    pub taints: Vec<Taint>,
    pub startup_taints: Vec<Taint>,
    pub kubelet: Option<KubeletSettings>,
}

impl NodeTemplate {
    /// The template of NodePool `pool` in `snapshot` (empty when the pool is gone).
    pub fn of(snapshot: &ClusterSnapshot, pool: &str) -> NodeTemplate {
        let Some(p) = snapshot.nodepools.iter().find(|p| p.name == pool) else {
            return NodeTemplate::default();
        };
        let kubelet = snapshot
            .node_class(p.node_class.as_deref())
            .map(|n| n.kubelet.clone());
        NodeTemplate {
            node_class: p.node_class.clone(),
            labels: p.labels.clone(),
            taints: p.taints.clone(),
            startup_taints: p.startup_taints.clone(),
            kubelet,
        }
    }
}

impl LaunchRequest {
    /// The request for a plan's new node: its offering, then its fallbacks, without those
    /// `unavailable` holds.
    pub fn for_node(
        claim: &str,
        node: &NewNode,
        template: NodeTemplate,
        unavailable: &Unavailable,
        now: f64,
    ) -> LaunchRequest {
        let first = OfferingRef {
            instance_type: node.instance_type.clone(),
            zone: node.zone.clone(),
            capacity_type: node.capacity_type,
            price: node.price,
        };
        let offerings = std::iter::once(first)
            .chain(node.fallbacks.iter().cloned())
            .filter(|o| !unavailable.contains(&o.into(), now))
            .collect();
        LaunchRequest {
            claim: claim.to_string(),
            nodepool: node.nodepool.clone(),
            offerings,
            template,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum InstanceState {
    Pending,
    Running,
    ShuttingDown,
    Terminated,
}

/// An instance the provider runs for a NodeClaim.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Instance {
    pub id: String,
    pub claim: String,
    pub nodepool: String,
    pub offering: OfferingRef,
    pub state: InstanceState,
}

/// What a launch returns: the instance, and the offerings tried before it that had no capacity.
#[derive(Debug, Clone, PartialEq)]
pub struct Launched {
    pub instance: Instance,
    pub insufficient: Vec<OfferingKey>,
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CloudError {
    /// Every offering of the request lacked capacity; they are listed so the caller can mark them.
    #[error("insufficient capacity for {} offerings of claim {claim}", offerings.len())]
    InsufficientCapacity {
        claim: String,
        offerings: Vec<OfferingKey>,
    },
    #[error("launch request for claim {0} lists no offering")]
    NoOfferings(String),
    #[error("instance {0} not found")]
    NotFound(String),
    #[error("provider: {0}")]
    Provider(String),
}

/// The calls joiner makes to a cloud. Implementations: `sim::SimCloud` (simulator and tests); the
/// AWS adapter (EC2 CreateFleet / TerminateInstances) implements the same calls.
#[allow(async_fn_in_trait)]
pub trait CloudProvider {
    /// Launches one instance for `request`, trying its offerings in order.
    async fn launch(&self, request: &LaunchRequest) -> Result<Launched, CloudError>;
    /// How many launches of one plan may be in flight at once. Offerings one group of launches
    /// finds without capacity are kept out of the next group's requests, so 1 (the default, and
    /// the simulator's) keeps every launch informed by all before it.
    fn launch_concurrency(&self) -> usize {
        1
    }
    /// Terminates an instance. Ok once the cloud has accepted the termination or the instance is
    /// already going or gone (shutting down, terminated, unknown to the cloud); an error means it
    /// may still run, and the caller keeps its node and asks again.
    async fn delete(&self, id: &str) -> Result<(), CloudError>;
    async fn get(&self, id: &str) -> Result<Instance, CloudError>;
    /// Every instance this cluster owns that is not terminated.
    async fn list(&self) -> Result<Vec<Instance>, CloudError>;
    /// Instance types and offerings with current prices and availability.
    async fn catalog(&self) -> Result<Catalog, CloudError>;
    /// Why an instance no longer matches what its node class resolves to now (an AMI, subnet or
    /// security group that changed), or None. Drift joiner sees in the cluster itself (the
    /// NodePool template, requirements, instance types) is found by the disruption candidates.
    async fn drifted(&self, id: &str) -> Result<Option<String>, CloudError>;
}

/// Offerings known to lack capacity, each until an expiry time (seconds on the caller's clock).
#[derive(Debug, Clone, PartialEq)]
pub struct Unavailable {
    until: BTreeMap<OfferingKey, f64>,
    /// How long a mark lasts: [`UNAVAILABLE_TTL_SECONDS`] unless the host says otherwise.
    ttl: f64,
}

impl Default for Unavailable {
    fn default() -> Self {
        Unavailable::with_ttl(UNAVAILABLE_TTL_SECONDS)
    }
}

impl Unavailable {
    /// Marks that last `ttl` seconds.
    pub fn with_ttl(ttl: f64) -> Self {
        Unavailable {
            until: BTreeMap::new(),
            ttl,
        }
    }

    pub fn mark(&mut self, key: OfferingKey, now: f64) {
        self.until.insert(key, now + self.ttl);
    }

    pub fn contains(&self, key: &OfferingKey, now: f64) -> bool {
        self.until.get(key).is_some_and(|t| *t > now)
    }

    /// The offerings still unavailable at `now`, in order.
    pub fn keys(&self, now: f64) -> Vec<&OfferingKey> {
        self.until
            .iter()
            .filter(|(_, t)| **t > now)
            .map(|(k, _)| k)
            .collect()
    }

    /// `catalog` with every offering still unavailable at `now` marked `available: false`.
    pub fn mask(&mut self, catalog: &Catalog, now: f64) -> Catalog {
        self.until.retain(|_, t| *t > now);
        let mut out = catalog.clone();
        if self.until.is_empty() {
            return out;
        }
        for it in &mut out.instance_types {
            for o in &mut it.offerings {
                let key = OfferingKey {
                    instance_type: it.name.clone(),
                    zone: o.zone.clone(),
                    capacity_type: o.capacity_type,
                };
                if self.until.contains_key(&key) {
                    o.available = false;
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(t: &str) -> OfferingKey {
        OfferingKey {
            instance_type: t.into(),
            zone: "us-east-1a".into(),
            capacity_type: CapacityType::Spot,
        }
    }

    #[test]
    fn an_unavailable_offering_returns_after_three_minutes() {
        let mut u = Unavailable::default();
        u.mark(key("m5.large"), 100.0);
        assert!(u.contains(&key("m5.large"), 100.0 + UNAVAILABLE_TTL_SECONDS - 1.0));
        assert!(!u.contains(&key("m5.large"), 100.0 + UNAVAILABLE_TTL_SECONDS));
        assert!(!u.contains(&key("c5.large"), 100.0));
    }
}

//! Kubernetes adapters: everything that speaks to an API server, and nothing that decides. Data
//! flows API server → [`caches`] (reflectors on pods, nodes, DaemonSets, PodDisruptionBudgets,
//! joiner's ConfigMap, NodePools, NodeClaims, EC2NodeClasses; the numerous kinds kept in domain
//! form, converted once per watch event, see [`cached`]) → [`snapshot`] (the same conversions a
//! dump goes through, into domain types) → decisions (`controller`) → [`cluster::KubeCluster`]
//! (NodeClaims, taints, evictions, deletes) → API server. [`lifecycle`] carries NodeClaims from
//! launch to registration and initialization and drains what users delete; [`lease`] elects the one
//! replica that acts; [`status`] reports conditions on NodeClaims and NodePools. [`claims`] is the
//! NodeClaim format joiner writes and reads back; [`events`] publishes Events, thinned as Karpenter
//! thins them.

pub mod cached;
pub mod caches;
pub mod claims;
pub mod cluster;
pub mod events;
pub mod lease;
pub mod lifecycle;
pub mod snapshot;
pub mod status;

/// Failures talking to the API server.
#[derive(Debug, thiserror::Error)]
pub enum K8sError {
    /// kube's error is in the message and deliberately not a `source` (no `#[from]`): `main`
    /// prints the source chain too (`{e:#}`), which would repeat it.
    #[error("kubernetes api: {0}")]
    Api(kube::Error),
    #[error("kubeconfig: {0}")]
    Config(String),
    #[error("a watch cache closed before it synced")]
    CacheClosed,
}

impl From<kube::Error> for K8sError {
    fn from(e: kube::Error) -> Self {
        K8sError::Api(e)
    }
}

//! The cluster side of the controller: what it reads and the few writes it makes. The simulator
//! implements it in memory (`sim::engine::cluster`); the Kubernetes adapter implements it with
//! reflectors and the API server (NodeClaims, taints, the Eviction API, deletes).

use crate::cloud::Instance;
use crate::domain::ClusterSnapshot;
use crate::optimizer::NewNode;

/// The Eviction API refused: a PodDisruptionBudget allows no disruption now (HTTP 429).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("eviction of {pod} refused: {reason}")]
pub struct EvictionRefused {
    pub pod: String,
    pub reason: String,
}

pub trait Cluster {
    /// The cluster the decisions read: registered nodes, every pod, NodePools, DaemonSets,
    /// PodDisruptionBudgets with their status, cost weights.
    fn snapshot(&self) -> &ClusterSnapshot;
    /// Nodes launched for NodeClaims that have not registered yet, as planned (name, node).
    fn in_flight(&self) -> Vec<(&str, &NewNode)>;
    /// Records the NodeClaim `name` for an instance just launched; the node registers on its own.
    fn claim_launched(&mut self, name: &str, node: &NewNode, instance: &Instance);
    /// Puts or removes the `karpenter.sh/disrupted:NoSchedule` taint, so nothing new lands there.
    fn set_disrupted(&mut self, node: &str, disrupted: bool);
    /// Evicts a bound pod through the Eviction API; its controller recreates it pending.
    fn evict(&mut self, pod: &str) -> Result<(), EvictionRefused>;
    /// Deletes a node (registered or in flight) and its NodeClaim once its instance is gone.
    /// Returns how many reschedulable pods were still bound to it (they go pending).
    fn delete_node(&mut self, node: &str) -> usize;
}

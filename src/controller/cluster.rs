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
    /// The name of the next NodeClaim of `nodepool`; `seq` counts the controller's launches. The
    /// in-cluster host appends a random suffix instead, as `generateName` does, so names never
    /// repeat across restarts.
    fn claim_name(&mut self, nodepool: &str, seq: u64) -> String {
        format!("{nodepool}-{seq:05}")
    }
    /// Records the NodeClaim `name` before its launch, so a crash between the launch and its
    /// record cannot leak an instance. False: the claim could not be recorded; nothing launches.
    fn claim_created(&mut self, _name: &str, _node: &NewNode) -> bool {
        true
    }
    /// [`Cluster::claim_created`] for all of a plan's new nodes before any of them launches; one
    /// answer per claim, in order. The in-cluster host writes them concurrently.
    fn claims_created(&mut self, claims: &[(String, &NewNode)]) -> Vec<bool> {
        claims
            .iter()
            .map(|(name, node)| self.claim_created(name, node))
            .collect()
    }
    /// The launch of claim `name` failed (no capacity, provider error): the claim goes.
    fn claim_failed(&mut self, _name: &str) {}
    /// Whether the node launched for claim `name` is Initialized (Ready, startup taints gone):
    /// disruption deletes nothing before its replacements are. The simulator registers nodes
    /// initialized.
    fn initialized(&self, _name: &str) -> bool {
        true
    }
    /// Records the NodeClaim `name` for an instance just launched; the node registers on its own.
    fn claim_launched(&mut self, name: &str, node: &NewNode, instance: &Instance);
    /// [`Cluster::claim_launched`] for a batch of launches; the in-cluster host records them
    /// concurrently.
    fn claims_launched(&mut self, launched: Vec<(String, NewNode, Instance)>) {
        for (name, node, instance) in &launched {
            self.claim_launched(name, node, instance);
        }
    }
    /// No offering can hold pending pod `pod` now; `why` says what stands in the way.
    fn unschedulable(&mut self, _pod: &str, _why: &str) {}
    /// A decision of `phase` fell back from the MILP to Karpenter's rules because the solver
    /// failed; `why` is the solver's note. The plan is still carried out.
    fn solver_fell_back(&mut self, _phase: &str, _why: &str) {}
    /// A disruption command missed its deadline and was rolled back: `nodes` went back into
    /// service; `why` says what was left undone.
    fn disruption_timed_out(&mut self, _nodes: &[String], _why: &str) {}
    /// Something Karpenter reports as an Event (see [`super::report::Notice`]).
    fn notify(&mut self, _notice: super::report::Notice) {}
    /// Puts or removes the `karpenter.sh/disrupted:NoSchedule` taint, so nothing new lands there.
    fn set_disrupted(&mut self, node: &str, disrupted: bool);
    /// Evicts a bound pod through the Eviction API; its controller recreates it pending.
    fn evict(&mut self, pod: &str) -> Result<(), EvictionRefused>;
    /// Whether nothing holds `node` any more, so its instance may go: no reschedulable pod is
    /// left on it. The in-cluster host also waits for evicted pods to finish terminating (each
    /// within its grace period), which the simulator's evictions do at once.
    fn drained(&mut self, node: &str) -> bool {
        !self
            .snapshot()
            .pods
            .iter()
            .any(|p| p.node_name.as_deref() == Some(node) && p.is_reschedulable())
    }
    /// Deletes a node (registered or in flight) and its NodeClaim once its instance is gone.
    /// Returns how many reschedulable pods were still bound to it (they go pending).
    fn delete_node(&mut self, node: &str) -> usize;
}

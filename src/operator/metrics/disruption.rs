//! Disruption as the snapshot shows it: nodes that took the `karpenter.sh/disrupted` taint since
//! the last step were chosen by a command (or are reclaimed after an interruption), and the
//! candidate filter says why each may go. From these come Karpenter's disrupted-NodeClaim and
//! decision counters, its eligible-node gauge, and joiner's savings counter.

use std::collections::BTreeSet;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use std::sync::atomic::AtomicU64;

use super::karpenter::{DecisionLabels, DisruptedLabels, EligibleLabels, Karpenter};
use crate::catalog::Catalog;
use crate::disruption::candidates::{Candidates, NodeInfo};
use crate::disruption::timing::Timestamp;
use crate::domain::labels::CAPACITY_TYPE;
use crate::domain::{ClusterSnapshot, ConsolidationPolicy, Node, DISRUPTED_TAINT};
use crate::optimizer::problem::node_price;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct SavingsLabels {
    pub reason: &'static str,
}

pub type Savings = Family<SavingsLabels, Counter<f64, AtomicU64>>;

/// Why a node may be disrupted, as Karpenter's metrics name the reasons.
fn reason_of(c: &NodeInfo) -> &'static str {
    if c.drift.is_some() {
        "drifted"
    } else if c.expired {
        "expired"
    } else if c.empty() {
        "empty"
    } else {
        "underutilized"
    }
}

fn policy_of(snap: &ClusterSnapshot, pool: &str) -> Option<ConsolidationPolicy> {
    snap.nodepools
        .iter()
        .find(|p| p.name == pool)
        .map(|p| p.disruption.consolidation_policy)
}

/// The nodes carrying the disrupted taint.
pub fn tainted(snap: &ClusterSnapshot) -> BTreeSet<String> {
    snap.nodes
        .iter()
        .filter(|n| n.taints.iter().any(|t| t.key == DISRUPTED_TAINT))
        .map(|n| n.name.clone())
        .collect()
}

/// What one step saw of disruption.
pub struct Step<'a> {
    pub snap: &'a ClusterSnapshot,
    pub catalog: &'a Catalog,
    pub at: Timestamp,
    /// Nodes tainted at the step before.
    pub tainted_before: &'a BTreeSet<String>,
    /// NodeClaims that appeared in this step.
    pub new_claims: &'a [crate::domain::NodeClaim],
}

impl Karpenter {
    /// Sets the eligible-node gauge and counts the nodes newly tainted as one decision; returns
    /// the disruption reason of the new claims when they replace disrupted nodes.
    pub fn count_disruption(&self, savings: &Savings, step: &Step) -> Option<&'static str> {
        let snap = step.snap;
        let candidates = Candidates::build(snap, step.catalog, step.at);
        self.set_eligible(snap, &candidates);
        let chosen: Vec<&NodeInfo> = candidates
            .nodes
            .iter()
            .filter(|c| {
                !step.tainted_before.contains(&c.name)
                    && snap.nodes[c.node]
                        .taints
                        .iter()
                        .any(|t| t.key == DISRUPTED_TAINT)
            })
            .collect();
        let first = chosen.first()?;
        let reason = reason_of(first);
        for c in &chosen {
            let node: &Node = &snap.nodes[c.node];
            let policy = policy_of(snap, &c.pool).map(|p| p.as_str().to_string());
            self.nodeclaims_disrupted
                .get_or_create(&DisruptedLabels {
                    reason: reason_of(c).to_string(),
                    nodepool: c.pool.clone(),
                    capacity_type: node.labels.get(CAPACITY_TYPE).cloned().unwrap_or_default(),
                    consolidation_policy: policy.unwrap_or_default(),
                    termination_mode: "graceful",
                })
                .inc();
        }
        let replaces = !step.new_claims.is_empty();
        let consolidation_type = match reason {
            "empty" => "empty",
            "underutilized" if chosen.len() == 1 => "single",
            "underutilized" => "multi",
            _ => "",
        };
        self.decisions
            .get_or_create(&DecisionLabels {
                decision: if replaces { "replace" } else { "delete" },
                reason: reason.to_string(),
                consolidation_type,
            })
            .inc();
        let freed: f64 = chosen.iter().map(|c| c.price).sum();
        let bought: f64 = step
            .new_claims
            .iter()
            .map(|c| {
                let n = Node::new(
                    &c.name,
                    c.labels.clone(),
                    Default::default(),
                    Default::default(),
                );
                node_price(&n, step.catalog)
            })
            .sum();
        let saved = (freed - bought).max(0.0);
        if matches!(reason, "empty" | "underutilized") {
            savings
                .get_or_create(&SavingsLabels { reason })
                .inc_by(saved);
        }
        replaces.then_some(reason)
    }

    /// Karpenter's eligible nodes: consolidation candidates per method, and drifted nodes; none
    /// that a rule blocks.
    fn set_eligible(&self, snap: &ClusterSnapshot, candidates: &Candidates) {
        let open = || candidates.nodes.iter().filter(|c| c.block.is_none());
        let underutilized = open()
            .filter(|c| {
                c.consolidatable
                    && policy_of(snap, &c.pool).is_some_and(|p| p != ConsolidationPolicy::WhenEmpty)
            })
            .count();
        let counts = [
            (
                "empty",
                open().filter(|c| c.consolidatable && c.empty()).count(),
            ),
            ("underutilized", underutilized),
            ("drifted", open().filter(|c| c.drift.is_some()).count()),
        ];
        for (reason, n) in counts {
            self.eligible
                .get_or_create(&EligibleLabels { reason })
                .set(n as i64);
        }
    }
}

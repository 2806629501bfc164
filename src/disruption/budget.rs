//! Karpenter v1 disruption budgets: how many nodes of a NodePool may be disrupted right now for a
//! given reason. [`allowed_disruptions`] is Karpenter's `NodePool.MustGetAllowedDisruptions` (the
//! minimum over the active budgets that cover the reason, percentages rounded up, failing closed on
//! a malformed budget), and [`BudgetTable`] is `BuildDisruptionBudgetMapping`: that allowance per
//! NodePool and reason, less the nodes already disrupting, decremented as candidates are chosen.

use std::collections::{BTreeMap, HashSet};

use serde::{Deserialize, Serialize};

use super::timing::{parse_go_duration, schedule_active, Timestamp};
use crate::domain::{Budget, ClusterSnapshot};

/// Why a node is disrupted. Budgets limit the first three; expiration is forceful in Karpenter v1
/// (the NodeClaim is deleted when `expireAfter` passes) and never waits for a budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Reason {
    Empty,
    Underutilized,
    Drifted,
    Expired,
}

impl Reason {
    /// The reasons a budget can name, in the order [`BudgetTable::entries`] reports them.
    pub const BUDGETED: [Reason; 3] = [Reason::Empty, Reason::Underutilized, Reason::Drifted];

    /// The name as written in `spec.disruption.budgets[].reasons` and in Karpenter's metrics.
    pub fn as_str(&self) -> &'static str {
        match self {
            Reason::Empty => "Empty",
            Reason::Underutilized => "Underutilized",
            Reason::Drifted => "Drifted",
            Reason::Expired => "Expired",
        }
    }

    fn budget_index(self) -> Option<usize> {
        Reason::BUDGETED.iter().position(|&r| r == self)
    }
}

impl std::fmt::Display for Reason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What one budget says at an instant.
enum Limit {
    Inactive,
    Nodes(usize),
    Malformed,
}

/// Karpenter's `Budget.GetAllowedDisruptions`: the schedule decides first, so an inactive budget's
/// `nodes` is never read; an active one allows a count, or a percentage of `num_nodes` rounded up
/// (10% of 15 nodes is 2: like PDB maxUnavailable, a small pool still makes progress).
fn budget_limit(budget: &Budget, num_nodes: usize, now: Timestamp) -> Limit {
    let active = match (&budget.schedule, &budget.duration) {
        (None, None) => true,
        (Some(schedule), Some(duration)) => {
            match parse_go_duration(duration).and_then(|d| schedule_active(schedule, d, now)) {
                Ok(active) => active,
                Err(_) => return Limit::Malformed,
            }
        }
        // The CRD requires both or neither; half a schedule has no meaning, so fail closed.
        _ => return Limit::Malformed,
    };
    if !active {
        return Limit::Inactive;
    }
    let nodes = budget.nodes.trim();
    let allowed = match nodes.strip_suffix('%') {
        Some(percent) => percent
            .parse::<u64>()
            .ok()
            .map(|p| (u128::from(p) * num_nodes as u128).div_ceil(100)),
        None => nodes.parse::<u64>().ok().map(u128::from),
    };
    match allowed {
        // Nothing can disrupt more nodes than the pool has, so counts are capped at `num_nodes`,
        // which is also what "unlimited" means here.
        Some(n) => Limit::Nodes(n.min(num_nodes as u128) as usize),
        None => Limit::Malformed,
    }
}

/// How many of a NodePool's `num_nodes` nodes may be disrupted for `reason` at `now`: the minimum
/// over the active budgets whose `reasons` is empty or names `reason`; `num_nodes` (unlimited)
/// when none applies, and always for [`Reason::Expired`].
///
/// A budget whose schedule, duration or (while active) nodes cannot be parsed blocks every reason
/// of the pool, not just its own: Karpenter aggregates the errors of all budgets and then returns
/// 0, since it cannot know what the operator meant.
pub fn allowed_disruptions(
    budgets: &[Budget],
    reason: Reason,
    num_nodes: usize,
    now: Timestamp,
) -> usize {
    if reason == Reason::Expired {
        return num_nodes;
    }
    let mut allowed = num_nodes;
    for budget in budgets {
        let applies =
            budget.reasons.is_empty() || budget.reasons.iter().any(|r| r == reason.as_str());
        match budget_limit(budget, num_nodes, now) {
            Limit::Malformed => return 0,
            Limit::Nodes(n) if applies => allowed = allowed.min(n),
            Limit::Nodes(_) | Limit::Inactive => {}
        }
    }
    allowed
}

/// The disruption allowance of one NodePool.
#[derive(Debug, Clone, PartialEq, Eq)]
struct PoolAllowance {
    /// Nodes of the pool; reported as the allowance for [`Reason::Expired`].
    nodes: usize,
    /// Remaining allowed disruptions, indexed like [`Reason::BUDGETED`].
    remaining: [usize; 3],
}

/// Allowed disruptions per (NodePool, reason) at one instant, consumed as a disruption pass picks
/// candidates so that one pass never exceeds a budget.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BudgetTable {
    pools: BTreeMap<String, PoolAllowance>,
}

impl BudgetTable {
    /// Karpenter's `BuildDisruptionBudgetMapping` over the snapshot's NodePools: a pool's nodes are
    /// those labelled `karpenter.sh/nodepool: <pool>`; the ones NotReady or being deleted (the Node
    /// or its NodeClaim) are already disrupting and use up allowance before anything new may start.
    pub fn build(snapshot: &ClusterSnapshot, now: Timestamp) -> BudgetTable {
        let deleting_claims: HashSet<&str> = snapshot
            .node_claims
            .iter()
            .filter(|c| c.deleting)
            .flat_map(|c| c.node_name.iter().chain(c.provider_id.iter()))
            .map(String::as_str)
            .collect();
        let claim_deleting = |node: &crate::domain::Node| {
            deleting_claims.contains(node.name.as_str())
                || node
                    .provider_id
                    .as_deref()
                    .is_some_and(|id| deleting_claims.contains(id))
        };
        let pools = snapshot
            .nodepools
            .iter()
            .map(|pool| {
                let members: Vec<_> = snapshot
                    .nodes
                    .iter()
                    .filter(|n| n.nodepool() == Some(pool.name.as_str()))
                    .collect();
                let disrupting = members
                    .iter()
                    .filter(|n| !n.ready || n.deleting || claim_deleting(n))
                    .count();
                let remaining = Reason::BUDGETED.map(|reason| {
                    allowed_disruptions(&pool.disruption.budgets, reason, members.len(), now)
                        .saturating_sub(disrupting)
                });
                (
                    pool.name.clone(),
                    PoolAllowance {
                        nodes: members.len(),
                        remaining,
                    },
                )
            })
            .collect();
        BudgetTable { pools }
    }

    /// Disruptions still allowed; 0 for a pool the table doesn't know. For [`Reason::Expired`] it
    /// is the pool's node count, as expiration is not limited.
    pub fn allowed(&self, pool: &str, reason: Reason) -> usize {
        let Some(entry) = self.pools.get(pool) else {
            return 0;
        };
        match reason.budget_index() {
            Some(i) => entry.remaining[i],
            None => entry.nodes,
        }
    }

    /// Uses one disruption of `pool` for `reason`: true (and one fewer left) if the budget allows
    /// it, false if it is exhausted or the pool unknown. Expiration always proceeds.
    pub fn take(&mut self, pool: &str, reason: Reason) -> bool {
        let Some(i) = reason.budget_index() else {
            return true;
        };
        match self.pools.get_mut(pool) {
            Some(entry) if entry.remaining[i] > 0 => {
                entry.remaining[i] -= 1;
                true
            }
            _ => false,
        }
    }

    /// (pool, reason, allowed) for every pool and budgeted reason, pools by name, for reporting
    /// (Karpenter's `karpenter_nodepools_allowed_disruptions`).
    pub fn entries(&self) -> impl Iterator<Item = (&str, Reason, usize)> + '_ {
        self.pools.iter().flat_map(|(name, entry)| {
            Reason::BUDGETED
                .into_iter()
                .zip(entry.remaining)
                .map(move |(reason, n)| (name.as_str(), reason, n))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::disruption::timing::parse_timestamp;
    use crate::domain::{Labels, Node, NodePool, Resources, NODEPOOL};

    fn now() -> Timestamp {
        // Karpenter's budget tests run at this instant, a Thursday.
        parse_timestamp("2000-06-15T12:30:30Z").unwrap()
    }

    fn budget(nodes: &str, reasons: &[&str], schedule: Option<(&str, &str)>) -> Budget {
        Budget {
            nodes: nodes.into(),
            reasons: reasons.iter().map(|r| r.to_string()).collect(),
            schedule: schedule.map(|(s, _)| s.into()),
            duration: schedule.map(|(_, d)| d.into()),
        }
    }

    fn allowed(budgets: &[Budget], reason: Reason, num_nodes: usize) -> usize {
        allowed_disruptions(budgets, reason, num_nodes, now())
    }

    #[test]
    fn reason_names() {
        for reason in [
            Reason::Empty,
            Reason::Underutilized,
            Reason::Drifted,
            Reason::Expired,
        ] {
            assert_eq!(
                serde_json::to_string(&reason).unwrap(),
                format!("\"{}\"", reason.as_str())
            );
            assert_eq!(
                serde_json::from_str::<Reason>(&format!("\"{reason}\"")).unwrap(),
                reason
            );
        }
    }

    #[test]
    fn d1_counts_and_percentages() {
        for (nodes, expected) in [
            ("30%", 3),
            ("100%", 10),
            ("0%", 0),
            ("0", 0),
            ("5", 5),
            ("50", 10),
        ] {
            assert_eq!(
                allowed(&[budget(nodes, &[], None)], Reason::Empty, 10),
                expected,
                "{nodes}"
            );
        }
        assert_eq!(allowed(&[budget("10%", &[], None)], Reason::Drifted, 15), 2);
        assert_eq!(allowed(&[budget("1%", &[], None)], Reason::Drifted, 1), 1);
        assert_eq!(allowed(&[budget("10%", &[], None)], Reason::Drifted, 0), 0);
    }

    #[test]
    fn no_budget_is_unlimited() {
        assert_eq!(allowed(&[], Reason::Underutilized, 7), 7);
        let weekly = budget("0", &[], Some(("@weekly", "1h")));
        assert_eq!(
            allowed(&[weekly], Reason::Underutilized, 7),
            7,
            "an inactive budget doesn't constrain"
        );
        let drift_only = budget("1", &["Drifted"], None);
        assert_eq!(allowed(&[drift_only], Reason::Empty, 7), 7);
    }

    fn d2_budgets() -> Vec<Budget> {
        let always = Some(("* * * * *", "1h"));
        vec![
            budget("10", &[], always),
            budget("100", &[], always),
            budget("100%", &[], always),
            budget("15", &["Drifted", "Underutilized"], always),
            budget("5", &["Drifted"], always),
            budget(
                "0",
                &["Underutilized", "Drifted", "Empty"],
                Some(("@weekly", "1h")),
            ),
            budget("4", &["Empty"], always),
        ]
    }

    #[test]
    fn d2_minimum_per_reason() {
        let budgets = d2_budgets();
        assert_eq!(allowed(&budgets, Reason::Empty, 100), 4);
        assert_eq!(allowed(&budgets, Reason::Drifted, 100), 5);
        assert_eq!(allowed(&budgets, Reason::Underutilized, 100), 10);
    }

    #[test]
    fn active_zero_budget_blocks() {
        let mut budgets = d2_budgets();
        budgets[5].schedule = Some("* * * * *".into());
        for reason in Reason::BUDGETED {
            assert_eq!(allowed(&budgets, reason, 100), 0, "{reason}");
        }
        assert_eq!(allowed(&budgets, Reason::Expired, 100), 100);
    }

    #[test]
    fn malformed_budgets_fail_closed() {
        let ok = budget("100%", &[], None);
        for bad in [
            budget("1000a%", &[], None),
            budget("ten", &["Drifted"], None),
            budget("5", &[], Some(("@wrongly", "1h"))),
            budget("5", &[], Some(("@daily", "1d"))),
            Budget {
                duration: None,
                ..budget("5", &[], Some(("@daily", "1h")))
            },
        ] {
            // A malformed budget blocks every reason, even one it doesn't name.
            assert_eq!(
                allowed(&[ok.clone(), bad.clone()], Reason::Empty, 10),
                0,
                "{bad:?}"
            );
        }
        // An inactive budget's nodes are not read, as in Karpenter.
        assert_eq!(
            allowed(
                &[budget("bad", &[], Some(("@yearly", "1h")))],
                Reason::Empty,
                10
            ),
            10
        );
    }

    #[test]
    fn expired_is_unlimited() {
        assert_eq!(allowed(&[budget("0", &[], None)], Reason::Expired, 12), 12);
    }

    fn node(name: &str, pool: &str, ready: bool) -> Node {
        Node {
            name: name.into(),
            labels: Labels::from([(NODEPOOL.to_string(), pool.to_string())]),
            taints: vec![],
            capacity: Resources::new(),
            allocatable: Resources::new(),
            unschedulable: false,
            ready,
            provider_id: None,
            created: None,
            annotations: Labels::new(),
            deleting: false,
        }
    }

    fn snapshot(pools: &[(&str, &str)], nodes: Vec<Node>) -> ClusterSnapshot {
        let nodepools = pools
            .iter()
            .map(|(name, nodes)| {
                let mut pool = NodePool::unconstrained(name);
                pool.disruption.budgets = vec![budget(nodes, &[], None)];
                pool
            })
            .collect();
        ClusterSnapshot {
            nodes: nodes.into_iter().map(std::sync::Arc::new).collect(),
            nodepools,
            ..ClusterSnapshot::default()
        }
    }

    #[test]
    fn disrupting_nodes_use_up_the_budget() {
        let mut nodes: Vec<_> = (0..10)
            .map(|i| node(&format!("a{i}"), "a", i >= 2))
            .collect();
        nodes.push(node("b0", "b", true));
        let table =
            BudgetTable::build(&snapshot(&[("a", "50%"), ("b", "1")], nodes.clone()), now());
        assert_eq!(
            table.allowed("a", Reason::Underutilized),
            3,
            "50% of 10 minus 2 NotReady"
        );
        assert_eq!(table.allowed("b", Reason::Empty), 1);

        nodes[2].deleting = true;
        let table = BudgetTable::build(&snapshot(&[("a", "20%"), ("b", "1")], nodes), now());
        assert_eq!(table.allowed("a", Reason::Drifted), 0, "never below zero");
        assert_eq!(table.allowed("a", Reason::Expired), 10);
    }

    #[test]
    fn take_decrements_until_exhausted() {
        let nodes = (0..4).map(|i| node(&format!("n{i}"), "a", true)).collect();
        let mut table = BudgetTable::build(&snapshot(&[("a", "2")], nodes), now());
        assert!(table.take("a", Reason::Empty));
        assert!(table.take("a", Reason::Empty));
        assert!(!table.take("a", Reason::Empty));
        assert_eq!(table.allowed("a", Reason::Empty), 0);
        assert_eq!(
            table.allowed("a", Reason::Drifted),
            2,
            "reasons are counted apart"
        );
        assert!(table.take("a", Reason::Expired));
        assert!(!table.take("unknown", Reason::Drifted));
        assert_eq!(table.allowed("unknown", Reason::Drifted), 0);
        let entries: Vec<_> = table.entries().collect();
        assert_eq!(
            entries,
            vec![
                ("a", Reason::Empty, 0),
                ("a", Reason::Underutilized, 2),
                ("a", Reason::Drifted, 2)
            ]
        );
    }
}

//! `consolidationPolicy: Balanced`: a consolidation of a NodePool's nodes is taken only when its
//! share of the pool's hourly cost saved is at least `1/k` of its share of the pool's disruption
//! cost (k is `consolidationThreshold`, 2 by default), as Karpenter scores its moves. A node's
//! disruption cost here is Karpenter's scoring one: 1 for the node plus `max(0, EvictionCost)` of
//! each pod an eviction would reschedule (1 per pod unless `pod-deletion-cost` or priority says
//! otherwise). The totals are over every node of the pool, candidates or not. With savings `s` and
//! disruption `d` of a move, and the pool's cost `S` and disruption `D`, the move passes when
//! `s > 0` and `k * s * D >= d * S`: linear in the move, which is how the selection model carries it.

use std::collections::BTreeMap;

use super::candidates::{Candidates, NodeInfo};

/// A Balanced NodePool's threshold and totals.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PoolScore {
    /// k (`consolidationThreshold`).
    pub k: f64,
    /// Hourly price of all the pool's nodes.
    pub cost: f64,
    /// Disruption cost of all the pool's nodes.
    pub disruption: f64,
}

impl PoolScore {
    /// Whether a move saving `savings` per hour at disruption cost `disruption` passes.
    pub fn passes(&self, savings: f64, disruption: f64) -> bool {
        savings > 0.0 && self.k * savings * self.disruption >= disruption * self.cost
    }

    /// The move's score: savings share over disruption share (it passes at `1/k` and above).
    pub fn score(&self, savings: f64, disruption: f64) -> f64 {
        (savings / self.cost) / (disruption / self.disruption)
    }
}

/// The Balanced NodePools of a decision, by name.
#[derive(Debug, Clone, Default)]
pub struct Balanced {
    pub pools: BTreeMap<String, PoolScore>,
}

impl Balanced {
    pub fn build(snapshot: &crate::domain::ClusterSnapshot, cands: &Candidates) -> Balanced {
        let mut pools: BTreeMap<String, PoolScore> = snapshot
            .nodepools
            .iter()
            .filter_map(|p| {
                let k = p.disruption.balanced_threshold()?;
                Some((
                    p.name.clone(),
                    PoolScore {
                        k,
                        cost: 0.0,
                        disruption: 0.0,
                    },
                ))
            })
            .collect();
        for n in &cands.nodes {
            if let Some(p) = pools.get_mut(&n.pool) {
                p.cost += n.price;
                p.disruption += n.score_disruption;
            }
        }
        Balanced { pools }
    }

    pub fn get(&self, pool: &str) -> Option<&PoolScore> {
        self.pools.get(pool)
    }

    /// Why a command deleting `nodes` and launching `launched` per hour fails a Balanced pool of
    /// its nodes, or None when it passes every one. Each pool is charged the whole launch: exact
    /// when the nodes share one pool (Karpenter scores a move against its source pool), stricter
    /// otherwise.
    pub fn refusal(&self, nodes: &[&NodeInfo], launched: f64) -> Option<String> {
        let mut by_pool: BTreeMap<&str, (f64, f64)> = BTreeMap::new();
        for n in nodes {
            let e = by_pool.entry(n.pool.as_str()).or_default();
            e.0 += n.price;
            e.1 += n.score_disruption;
        }
        by_pool.into_iter().find_map(|(pool, (removed, disruption))| {
            let p = self.get(pool)?;
            let savings = removed - launched;
            (!p.passes(savings, disruption)).then(|| {
                format!(
                    "nodepool {pool} is Balanced: score {:.2} < 1/{} (saves {savings:.4}/h of {:.4}/h, disrupts {disruption:.1} of {:.1})",
                    p.score(savings, disruption),
                    p.k,
                    p.cost,
                    p.disruption
                )
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // the design's example pool: ten nodes, $58.08/day, 80 pods of cost 1 (plus 1 per node)
    fn pool() -> PoolScore {
        PoolScore {
            k: 2.0,
            cost: 58.08,
            disruption: 90.0,
        }
    }

    #[test]
    fn a_large_saving_for_few_evictions_passes() {
        // an oversized node's 3 pods onto a half-price node: 12.5% of the cost for 4/90
        assert!(pool().passes(7.26, 4.0));
        assert!((pool().score(7.26, 4.0) - (7.26 / 58.08) / (4.0 / 90.0)).abs() < 1e-12);
    }

    #[test]
    fn a_marginal_saving_for_many_evictions_fails() {
        // 8 pods (9 with the node) for 4.2% of the cost: score 0.37 < 0.5
        assert!(!pool().passes(2.42, 9.0));
        // a larger k lets it through
        assert!(PoolScore { k: 3.0, ..pool() }.passes(2.42, 9.0));
    }

    #[test]
    fn the_boundary_passes_and_no_saving_never_does() {
        let p = PoolScore {
            k: 2.0,
            cost: 10.0,
            disruption: 10.0,
        };
        // savings share 0.1, disruption share 0.2: score exactly 1/k
        assert!(p.passes(1.0, 2.0));
        assert!(!p.passes(0.999, 2.0));
        assert!(!p.passes(0.0, 0.0));
        assert!(!p.passes(-1.0, 1.0));
    }
}

//! Local improvement of a finished placement: every new node is relaunched as the cheaper offering
//! that holds the same pods with the same topology domains and lowers price plus preference
//! penalties most, and nodes whose pods have zonal preferences are tried in other zones. Rounding a
//! fractional LP and repairing leftovers often leaves nodes sized for pods that went elsewhere;
//! this takes the slack back without touching any placement. Pools with limits or minValues are
//! left alone (a different type changes what the limit counts, and the fallback set must keep
//! minValues).

use super::extract::{alternatives, Keep};
use super::preferred;
use super::problem::Problem;
use super::state::{NodeKind, State};

/// Relaunches each new node as the cheaper alternative that lowers the objective most: its price
/// plus what its pods' preferences cost there (preferred node terms, and preferred pod terms on
/// zone-like keys, which change with the zone). Where no preference can change, that is the
/// cheapest alternative. Returns how many nodes changed.
pub fn downsize(p: &Problem, state: &mut State<'_>) -> usize {
    let mut changed = 0;
    for i in 0..state.nodes.len() {
        let node = &state.nodes[i];
        let NodeKind::New { shape, offering } = node.kind else {
            continue;
        };
        let pool = &p.pools[p.shapes[shape].pool];
        if node.placed.is_empty() || pool.remaining.is_some() || !pool.min_values.is_empty() {
            continue;
        }
        let current = p.offering(shape, offering).cost;
        let preferences = Preferences::on(p, state, i);
        // without preferences that could change, the cheapest alternative is the answer
        let first_only = preferences.is_none();
        let options = alternatives(p, node, Keep::Rules, &p.by_cost, |found, next| {
            (first_only && !found.is_empty()) || p.offering(next.0, next.1).cost >= current - 1e-12
        });
        let Some(&cheapest) = options.first() else {
            continue;
        };
        if first_only {
            state.relaunch(i, cheapest);
            changed += 1;
            continue;
        }
        let (mut best, mut best_value) =
            ((shape, offering), current + preferences.value(p, state, i));
        for to in options {
            state.relaunch(i, to);
            let value = p.offering(to.0, to.1).cost + preferences.value(p, state, i);
            if value < best_value - 1e-9 {
                (best, best_value) = (to, value);
            }
        }
        state.relaunch(i, best);
        changed += usize::from(best != (shape, offering));
    }
    changed
}

/// The preferences whose cost can change when node `i` moves to another offering.
struct Preferences {
    /// Zone-like preferred pod rules counting the node's pods.
    rules: Vec<usize>,
    /// Whether running pods' zone-like terms select some of them.
    shunned: bool,
    /// Whether some of them have preferred node terms.
    node_terms: bool,
}

impl Preferences {
    fn on(p: &Problem, state: &State<'_>, i: usize) -> Preferences {
        let placed = || {
            state.nodes[i]
                .placed
                .iter()
                .filter(|(_, &c)| c > 0)
                .map(|(&k, _)| k)
        };
        Preferences {
            rules: state.preferred_rules_on(i),
            shunned: placed().any(|k| p.topology.shunned_zone_keys(k).next().is_some()),
            node_terms: placed()
                .any(|k| !p.classes[k].constraints.preferred_node_affinity.is_empty()),
        }
    }

    fn is_none(&self) -> bool {
        self.rules.is_empty() && !self.shunned && !self.node_terms
    }

    /// What these preferences cost with node `i` where it is now.
    fn value(&self, p: &Problem, state: &State<'_>, i: usize) -> f64 {
        let mut total = preferred::zone_penalty(p, state, self.rules.iter().copied());
        if self.shunned {
            total += preferred::shunned_zone_penalty(p, state);
        }
        if self.node_terms {
            total += state.nodes[i].preference_penalty(p);
        }
        total
    }
}

/// Moves whole new nodes to another offering of their type (another zone, say) when that lowers
/// the penalty of preferred pod terms on zone-like keys by more than any price difference and any
/// preferred node term the move leaves unmet: the integer program sees only the hostname part of
/// those terms. Nodes holding pods that a spread or a required affinity on a zone-like key counts
/// stay where they are. Returns the moves made.
pub fn rezone(p: &Problem, state: &mut State<'_>) -> usize {
    if p.topology.preferred.iter().all(|r| r.is_host())
        && p.topology.shunned.iter().all(|s| s.is_host())
    {
        return 0;
    }
    let touched: Vec<bool> = (0..p.classes.len())
        .map(|k| {
            p.topology.preferred_touching(k).any(|r| !r.is_host())
                || p.topology.shunned_zone_keys(k).next().is_some()
        })
        .collect();
    let mut pinned: Vec<bool> = p
        .topology
        .inverse_forbidden
        .iter()
        .map(|f| !f.is_empty())
        .collect();
    let zonal_rules = p
        .topology
        .spreads
        .iter()
        .filter(|g| !g.is_host())
        .map(|g| (g.owner, &g.members));
    for (owner, members) in zonal_rules.chain(
        p.topology
            .affinities
            .iter()
            .filter(|r| !r.is_host())
            .map(|r| (r.owner, &r.members)),
    ) {
        pinned[owner] = true;
        for &m in members {
            pinned[m] = true;
        }
    }
    let mut moves = 0;
    // a move can unlock another (two replicas that share a zone: either may leave), so a few passes
    for _ in 0..REZONE_PASSES {
        let before = moves;
        for i in 0..state.nodes.len() {
            let NodeKind::New { shape, offering } = state.nodes[i].kind else {
                continue;
            };
            let ks: Vec<usize> = state.nodes[i]
                .placed
                .iter()
                .filter(|(_, &c)| c > 0)
                .map(|(&k, _)| k)
                .collect();
            if !ks.iter().any(|&k| touched[k]) || ks.iter().any(|&k| pinned[k]) {
                continue;
            }
            // only the rules that count this node's pods change with its zone, and a preferred
            // node term (on the zone, say) may be met here and missed there
            let preferences = Preferences::on(p, state, i);
            let mut current = p.offering(shape, offering).cost + preferences.value(p, state, i);
            for to in 0..p.shapes[shape].offerings.len() {
                let NodeKind::New { offering: from, .. } = state.nodes[i].kind else {
                    break;
                };
                if to == from || !state.can_relaunch(i, to) {
                    continue;
                }
                state.relaunch(i, (shape, to));
                let after = p.offering(shape, to).cost + preferences.value(p, state, i);
                if after < current - 1e-9 {
                    current = after;
                    moves += 1;
                } else {
                    state.relaunch(i, (shape, from));
                }
            }
        }
        if moves == before {
            break;
        }
    }
    moves
}

/// Passes of [`rezone`] over the plan's nodes.
const REZONE_PASSES: usize = 3;

/// Whether every new node of a pool with minValues can still be launched from enough distinct
/// values (its own offering and the alternatives that hold the same pods).
pub fn min_values_hold(p: &Problem, state: &State<'_>) -> bool {
    state
        .new_nodes()
        .filter(|(_, n)| !n.placed.is_empty())
        .all(|(_, n)| {
            let NodeKind::New { shape, offering } = n.kind else {
                return true;
            };
            let pool = &p.pools[p.shapes[shape].pool];
            if pool.min_values.is_empty() {
                return true;
            }
            let mut options = alternatives(p, n, Keep::Rules, &p.by_price, |_, _| false);
            options.push((shape, offering));
            super::extract::min_values_met(p, pool, &options)
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::CapacityType;

    const CATALOG: &str = include_str!("../../fixtures/catalogs/test-f0.json");

    /// web-0 of `scenario` alone on a default-instance-type node in test-zone-1, relaunched by
    /// `downsize`: the instance type it ends on and the plan's objective.
    fn downsized(scenario: &str) -> (String, f64) {
        let snapshot = crate::snapshot::parse_snapshot(scenario, "test").expect("scenario parses");
        let p = Problem::build(
            &snapshot,
            &crate::catalog::Catalog::from_json(CATALOG, "test-f0").expect("catalog parses"),
        );
        let mut state = State::new(&p);
        let (s, o) = p
            .find_offering(
                "default",
                "default-instance-type",
                "test-zone-1",
                CapacityType::OnDemand,
            )
            .expect("offering");
        let node = state.open(s, o);
        state.place(0, node);
        downsize(&p, &mut state);
        let NodeKind::New { shape, offering } = state.nodes[node].kind else {
            unreachable!("a new node stays new")
        };
        let objective = p.offering(shape, offering).price
            + p.preference_penalty(0, &state.nodes[node].labels, &p.shapes[shape].taints);
        (p.shapes[shape].instance_type.clone(), objective)
    }

    #[test]
    fn a_cheaper_type_is_taken_when_it_saves_more_than_the_preference_it_misses() {
        // the weight-50 term costs 0.05 $/h unmet; small-instance-type saves 0.40
        let (ty, objective) = downsized(include_str!(
            "../../fixtures/scenarios/preferred-instance-type-priced.yaml"
        ));
        assert_eq!(ty, "small-instance-type");
        assert!((objective - 0.45).abs() < 1e-9, "{objective}");
    }

    #[test]
    fn a_preferred_type_worth_more_than_the_saving_is_kept() {
        // at 0.01 $/h per unit the same term costs 0.50 unmet: more than the 0.40 saved
        let (ty, objective) = downsized(include_str!(
            "../../fixtures/scenarios/preferred-instance-type-held.yaml"
        ));
        assert_eq!(ty, "default-instance-type");
        assert!((objective - 0.80).abs() < 1e-9, "{objective}");
    }
}

//! Local improvement of a finished placement: every new node is relaunched as the cheapest offering
//! that holds the same pods with the same topology domains. Rounding a fractional LP and repairing
//! leftovers often leaves nodes sized for pods that went elsewhere; this takes the slack back without
//! touching any placement. Pools with limits or minValues are left alone (a different type changes
//! what the limit counts, and the fallback set must keep minValues).

use super::extract::alternatives;
use super::preferred;
use super::problem::Problem;
use super::state::{NodeKind, State};

/// Relaunches each new node as its cheapest alternative; returns how many nodes changed.
pub fn downsize(p: &Problem, state: &mut State<'_>) -> usize {
    let mut changed = 0;
    for i in 0..state.nodes.len() {
        let node = &state.nodes[i];
        let NodeKind::New { shape, offering } = node.kind else { continue };
        let pool = &p.pools[p.shapes[shape].pool];
        if node.placed.is_empty() || pool.remaining.is_some() || !pool.min_values.is_empty() {
            continue;
        }
        let current = p.offering(shape, offering);
        let Some(&(s, o)) = alternatives(p, node, &p.by_cost, |found, next| !found.is_empty() || p.offering(next.0, next.1).cost >= current.cost).first() else {
            continue;
        };
        if p.offering(s, o).cost >= current.cost - 1e-12 {
            continue;
        }
        state.relaunch(i, (s, o));
        changed += 1;
    }
    changed
}

/// Moves whole new nodes to another offering of their type (another zone, say) when that lowers
/// the penalty of preferred pod terms on zone-like keys by more than any price difference: the
/// integer program sees only the hostname part of those terms. Nodes holding pods that a spread
/// or a required affinity on a zone-like key counts stay where they are. Returns the moves made.
pub fn rezone(p: &Problem, state: &mut State<'_>) -> usize {
    if p.topology.preferred.iter().all(|r| r.is_host()) {
        return 0;
    }
    let touched: Vec<bool> = (0..p.classes.len()).map(|k| p.topology.preferred_touching(k).any(|r| !r.is_host())).collect();
    let mut pinned: Vec<bool> = p.topology.inverse_forbidden.iter().map(|f| !f.is_empty()).collect();
    let zonal_rules = p.topology.spreads.iter().filter(|g| !g.is_host()).map(|g| (g.owner, &g.members));
    for (owner, members) in zonal_rules.chain(p.topology.affinities.iter().filter(|r| !r.is_host()).map(|r| (r.owner, &r.members))) {
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
            let NodeKind::New { shape, offering } = state.nodes[i].kind else { continue };
            let ks: Vec<usize> = state.nodes[i].placed.iter().filter(|(_, &c)| c > 0).map(|(&k, _)| k).collect();
            if !ks.iter().any(|&k| touched[k]) || ks.iter().any(|&k| pinned[k]) {
                continue;
            }
            // only the rules that count this node's pods change with its zone
            let rules = state.preferred_rules_on(i);
            let mut current = p.offering(shape, offering).cost + preferred::zone_penalty(p, state, rules.iter().copied());
            for to in 0..p.shapes[shape].offerings.len() {
                let NodeKind::New { offering: from, .. } = state.nodes[i].kind else { break };
                if to == from || !state.can_relaunch(i, to) {
                    continue;
                }
                state.relaunch(i, (shape, to));
                let after = p.offering(shape, to).cost + preferred::zone_penalty(p, state, rules.iter().copied());
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
    state.new_nodes().filter(|(_, n)| !n.placed.is_empty()).all(|(_, n)| {
        let NodeKind::New { shape, offering } = n.kind else { return true };
        let pool = &p.pools[p.shapes[shape].pool];
        if pool.min_values.is_empty() {
            return true;
        }
        let mut options = alternatives(p, n, &p.by_price, |_, _| false);
        options.push((shape, offering));
        super::extract::min_values_met(p, pool, &options)
    })
}

//! Large-neighbourhood search on the chosen plan. Rounding an LP leaves most nodes well packed and a
//! few poorly: nodes sized for pods that went elsewhere, small nodes the repair opened one pod at a
//! time. Each step takes the nodes that waste the most (cost times the share of their tightest
//! resource left idle), returns their pods to demand and plans those pods again with the MILP, seeded
//! with the nodes they came from. The untouched nodes and the new ones are replayed together through
//! every rule; the result replaces the plan only when it scores lower. A step that finds nothing
//! widens the next neighbourhood.

use std::time::{Duration, Instant};

use super::milp::columns::{Bin, BinInfo, Column};
use super::milp::{self, replay};
use super::problem::Problem;
use super::state::{NodeKind, State};
use super::{greedy, improve, pattern_cost, score, Leftover, SolveSettings};

/// Nodes a first neighbourhood takes: a sixth of the plan's, within these bounds.
const FIRST_NODES: (usize, usize) = (3, 12);
/// A neighbourhood never returns more pods than this to demand: the sub-solve must stay small
/// next to the one it improves.
const MAX_POD_SHARE: f64 = 0.35;
/// The sub-solve's candidates replayed with the rest of the plan, best guess first.
const CANDIDATES: usize = 2;
/// The shortest sub-solve worth starting, seconds: below it column generation does not get past its
/// seed patterns.
const MIN_STEP_SECONDS: f64 = 0.15;

/// What a search ended with: the plan, and how many steps ran and improved it.
pub struct Searched<'p> {
    pub state: State<'p>,
    pub left: Leftover,
    pub steps: usize,
    pub improved: usize,
}

/// Improves `state` until `until` (measured from `start`) by re-planning its most wasteful nodes.
/// `replay` is what replaying one candidate of the whole plan took: a step replays up to
/// [`CANDIDATES`] of them after its sub-solve. `integer`: whether sub-solves may run HiGHS's
/// integer solve.
#[allow(clippy::too_many_arguments)]
pub fn search<'p>(p: &'p Problem, settings: &SolveSettings, bins: &[BinInfo], state: State<'p>, left: Leftover, start: Instant, until: Duration, replay: Duration, integer: bool) -> Searched<'p> {
    let mut best = (state, left);
    let mut best_score = score(p, &best.0, &best.1);
    let (mut steps, mut improved) = (0, 0);
    let placed_nodes = best.0.nodes.iter().filter(|n| !n.placed.is_empty()).count();
    let mut size = (placed_nodes / 6).clamp(FIRST_NODES.0, FIRST_NODES.1);
    // how many of the most wasteful nodes the next neighbourhood passes over: once the pod cap stops
    // it from growing, a failed neighbourhood gives way to the next nodes down the ranking
    let mut skip = 0;
    let mut last: Vec<usize> = Vec::new();
    // what a step takes beyond its sub-solve's limit: the replays, and the sub-solve's own overrun
    let mut overhead = CANDIDATES as f64 * replay.as_secs_f64();
    loop {
        let left_s = until.as_secs_f64() - start.elapsed().as_secs_f64() - overhead;
        // half the time left keeps room for a second try
        let seconds = if left_s >= 2.0 * MIN_STEP_SECONDS { left_s * 0.5 } else { left_s };
        if seconds < MIN_STEP_SECONDS {
            break;
        }
        let Some(hood) = neighbourhood(p, &best.0, size, skip) else { break };
        if hood == last {
            break;
        }
        steps += 1;
        let sub = SolveSettings { time_limit: Duration::from_secs_f64(seconds), lower_bound: false, ..settings.clone() };
        let began = Instant::now();
        let found = step(p, &sub, bins, &best.0, &hood, integer);
        overhead = overhead.max(began.elapsed().as_secs_f64() - seconds);
        tracing::trace!(step = steps, seconds = began.elapsed().as_secs_f64(), limit = seconds, "neighbourhood solved");
        match found {
            Some((state, left, sc)) if sc < best_score - 1e-9 => {
                best_score = sc;
                tracing::debug!(step = steps, nodes = hood.len(), score = best_score, "neighbourhood improved the plan");
                best = (state, left);
                improved += 1;
            }
            _ => {
                tracing::debug!(step = steps, nodes = hood.len(), skip, "neighbourhood left the plan as it was");
                if hood.len() < size {
                    skip += hood.len().div_ceil(2);
                } else {
                    size += size.div_ceil(2);
                }
                last = hood;
                continue;
            }
        }
        (skip, last) = (0, Vec::new());
    }
    Searched { state: best.0, left: best.1, steps, improved }
}

/// The `size` new nodes that waste the most after the first `skip`, within the pod cap; None when
/// fewer than two are left (one node alone re-planned is what downsizing already did).
fn neighbourhood(p: &Problem, state: &State<'_>, size: usize, skip: usize) -> Option<Vec<usize>> {
    let mut ranked: Vec<(f64, usize)> = state.new_nodes().filter(|(_, n)| !n.placed.is_empty()).map(|(i, _)| (waste(p, state, i), i)).filter(|(w, _)| *w > 1e-9).collect();
    if ranked.len() < 2 {
        return None;
    }
    ranked.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    let cap = ((p.total_pods() as f64 * MAX_POD_SHARE) as usize).max(1);
    let mut pods = 0;
    let mut hood = Vec::new();
    for (_, i) in ranked.into_iter().skip(skip) {
        let n = state.nodes[i].pod_count();
        if hood.len() >= size || (pods + n > cap && hood.len() >= 2) {
            break;
        }
        pods += n;
        hood.push(i);
    }
    (hood.len() >= 2).then_some(hood)
}

/// Cost of a new node times the share of its tightest resource left idle.
fn waste(p: &Problem, state: &State<'_>, i: usize) -> f64 {
    let n = &state.nodes[i];
    let NodeKind::New { shape, offering } = n.kind else { return 0.0 };
    let o = p.offering(shape, offering);
    let used = o.alloc.iter().zip(&n.free).filter(|(a, _)| **a > 0).map(|(a, f)| (a - f) as f64 / *a as f64).fold(0.0, f64::max);
    o.cost * (1.0 - used.min(1.0))
}

/// One step: the neighbourhood's pods planned again, then every node replayed and repaired; the best
/// result with its score.
fn step<'p>(p: &'p Problem, settings: &SolveSettings, bins: &[BinInfo], state: &State<'p>, hood: &[usize], integer: bool) -> Option<(State<'p>, Leftover, f64)> {
    let mut kept = Vec::new();
    let mut taken = Vec::new();
    for (i, _) in state.nodes.iter().enumerate().filter(|(_, n)| !n.placed.is_empty()) {
        let col = column_of(p, state, i);
        if hood.contains(&i) {
            taken.push((col, 1));
        } else {
            kept.push((col, 1));
        }
    }
    let mut demand = vec![0u32; p.classes.len()];
    for (col, _) in &taken {
        for &(k, c) in &col.counts {
            demand[k] += c;
        }
    }
    // the nodes being re-planned seed the sub-solve, so its answer is never worse than they are
    let (seed, _) = replay(p, &taken);
    let (answer, _) = milp::solve(p, settings, &seed, &demand, milp::bins_for(p, bins, &demand), integer).ok()?;
    let mut best: Option<(State<'p>, Leftover, f64)> = None;
    for (_, chosen) in answer.candidates.iter().take(CANDIDATES) {
        let mut all = kept.clone();
        all.extend(chosen.iter().cloned());
        let (replayed, rejected) = replay(p, &all);
        let (mut s, l) = greedy::repair(p, replayed, &rejected);
        improve::downsize(p, &mut s);
        if !improve::min_values_hold(p, &s) {
            continue;
        }
        let sc = score(p, &s, &l);
        if best.as_ref().is_none_or(|b| sc < b.2 - 1e-9) {
            best = Some((s, l, sc));
        }
    }
    best
}

/// A placed node as a pattern of its own bin.
fn column_of(p: &Problem, state: &State<'_>, i: usize) -> Column {
    let n = &state.nodes[i];
    let counts: Vec<(usize, u32)> = n.placed.iter().filter(|(_, &c)| c > 0).map(|(&k, &c)| (k, c as u32)).collect();
    let bin = match n.kind {
        NodeKind::Existing(e) => Bin::Existing(e),
        NodeKind::New { shape, offering } => Bin::New { shape, offering },
    };
    Column { bin, cost: pattern_cost(p, bin, &n.labels, counts.iter().copied()), counts }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::catalog::{Arch, CapacityType, Catalog, InstanceType, Offering};
    use crate::domain::{ClusterSnapshot, NodePool, Pod, PodConstraints, Quantity, Resources};
    use crate::optimizer::milp::bins;

    /// Four one-core pods; a one-core type at 0.12 and a four-core type at 0.2 (after reservations
    /// and the larger type's room: one and four pods).
    fn four_pods() -> Problem {
        let mut types = Vec::new();
        for (name, vcpu, price) in [("one.large", 2, 0.12), ("four.xlarge", 5, 0.2)] {
            let mut it = InstanceType::new(name, vcpu, 16384, Arch::Amd64);
            it.max_pods = Some(20);
            it.offerings.push(Offering { zone: "z1".into(), capacity_type: CapacityType::OnDemand, price, available: true, price_estimated: false, interruption_band: None });
            types.push(it);
        }
        let catalog = Catalog { region: "test".into(), instance_types: types, provenance: None };
        let pods = (0..4)
            .map(|i| {
                let requests = Resources::new().with("cpu", Quantity::from_milli(1000)).with("memory", Quantity::from_mib(256)).with("pods", Quantity::from_units(1));
                let c = PodConstraints { namespace: "default".into(), requests, ..Default::default() };
                Arc::new(Pod { uid: format!("uid-{i}"), ..Pod::new(format!("web-{i}"), c).owned_by("ReplicaSet", "web") })
            })
            .collect();
        let snapshot = ClusterSnapshot { pods, nodepools: vec![NodePool::unconstrained("default")], ..Default::default() };
        Problem::build(&snapshot, &catalog)
    }

    /// Searches from `copies` four-core nodes each holding `pods` pods: (search, score before).
    fn search_from(p: &Problem, pods: u32, copies: u32) -> (Searched<'_>, f64) {
        let s = p.shapes.iter().position(|s| s.instance_type == "four.xlarge").expect("four.xlarge shape");
        let column = Column { bin: Bin::New { shape: s, offering: 0 }, counts: vec![(0, pods)], cost: 0.2 };
        let (state, rejected) = replay(p, &[(column, copies)]);
        assert!(rejected.is_empty());
        let before = score(p, &state, &Leftover::new());
        (search(p, &SolveSettings::default(), &bins(p), state, Leftover::new(), Instant::now(), Duration::from_secs(60), Duration::ZERO, true), before)
    }

    #[test]
    fn neighbourhoods_pack_pods_spread_one_per_node_onto_one_node() {
        let p = four_pods();
        // the worst plan that still places everything: each pod alone on a four-pod node
        let (found, before) = search_from(&p, 1, 4);
        assert!(found.left.is_empty());
        assert_eq!(found.state.placed_of(0), 4);
        let after = score(&p, &found.state, &found.left);
        assert!((before - 0.8).abs() < 1e-9, "{before}");
        // one four-pod node is the optimum, and each step only keeps what scores lower
        assert!((after - 0.2).abs() < 1e-9, "{after} after {} steps", found.steps);
        assert!(found.improved >= 1 && found.improved <= found.steps);
    }

    #[test]
    fn a_plan_of_one_full_node_has_no_neighbourhood() {
        let p = four_pods();
        let (found, _) = search_from(&p, 4, 1);
        assert_eq!((found.steps, found.improved), (0, 0));
        assert!((score(&p, &found.state, &found.left) - 0.2).abs() < 1e-9);
    }
}

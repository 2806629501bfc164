//! Large-neighbourhood search on the chosen plan. Rounding an LP leaves most nodes well packed and
//! a few poorly: nodes sized for pods that went elsewhere, nodes of a type whose shape does not
//! match their pods', small nodes the repair opened a few pods at a time. Each step takes the nodes
//! a ranking of the new nodes ([`Waste`]) calls most wasteful, returns their pods to demand and
//! plans those pods again with the MILP, seeded with the nodes they came from. The untouched nodes
//! and the new ones are replayed together through every rule; the result replaces the plan only
//! when it scores lower. A step that finds nothing widens its ranking's next neighbourhood.
//!
//! A search alone ranks by idle cost. When several run side by side (`SolveSettings::searches`),
//! three rankings take turns in each, each search starting at another, so they take other paths; a
//! ranking that has nothing new to offer leaves its turns to the others until the plan changes.
//! When every ranking has run out, neighbourhoods drawn at random use the time left, until the
//! clock ends the search or [`RANDOM_PATIENCE`] of them in a row have found nothing.

use std::time::{Duration, Instant};

use super::milp::columns::{Bin, BinInfo, Column};
use super::milp::{self, replay};
use super::problem::Problem;
use super::state::{NodeKind, State};
use super::{greedy, improve, pattern_cost, score, Leftover, SolveSettings};
use crate::workload::Rng;

/// Nodes a first neighbourhood takes: a sixth of the plan's, within these bounds.
const FIRST_NODES: (usize, usize) = (3, 12);
/// A neighbourhood never returns more pods than this to demand: the sub-solve must stay small
/// next to the one it improves.
const MAX_POD_SHARE: f64 = 0.35;
/// What a node may cost, as a share of the plan's dearest new node, to count as small.
const SMALL_NODE: f64 = 0.1;
/// The sub-solve's candidates replayed with the rest of the plan, best guess first.
const CANDIDATES: usize = 2;
/// Random neighbourhoods in a row that may leave the plan as it was before the search ends: a
/// controller's solve should not hold its pods for the whole limit on a plan no step improves.
const RANDOM_PATIENCE: usize = 24;
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
/// integer solve. `search` numbers this search among the `searches` run side by side; they pick the
/// rankings.
#[allow(clippy::too_many_arguments)]
pub fn search<'p>(
    p: &'p Problem,
    settings: &SolveSettings,
    bins: &[BinInfo],
    state: State<'p>,
    left: Leftover,
    start: Instant,
    until: Duration,
    replay: Duration,
    integer: bool,
    (search, searches): (usize, usize),
) -> Searched<'p> {
    let mut best = (state, left);
    let mut best_score = score(p, &best.0, &best.1);
    let (mut steps, mut improved) = (0, 0);
    let placed_nodes = best.0.nodes.iter().filter(|n| !n.placed.is_empty()).count();
    let first = (placed_nodes / 6).clamp(FIRST_NODES.0, FIRST_NODES.1);
    // alone, the other rankings only cost the search steps: on the provisioning benchmark it ended
    // at 5.02-5.03 $/h with them against 4.59 without, at 1,000 pods; side by side, two searches
    // that both use them did better on the scale-in benchmark than one that ranks by idle cost
    // beside one that uses them (15-17 of 20 runs within 3% of the bound, against 10)
    let mut rankings = match searches {
        0 | 1 => vec![Ranking::new(Waste::Cost, first)],
        _ => vec![
            Ranking::new(Waste::Small, usize::MAX),
            Ranking::new(Waste::Cost, first),
            Ranking::new(Waste::Mismatch, first),
        ],
    };
    // what a step takes beyond its sub-solve's limit: the replays, and the sub-solve's own overrun
    let mut overhead = CANDIDATES as f64 * replay.as_secs_f64();
    let mut turn = search % rankings.len();
    // random neighbourhoods are drawn from a fixed seed per search, so a solve is repeatable
    // for as many steps as its clock allows
    let mut draws = Rng(0x5EED_0000 + search as u64);
    let mut fruitless = 0;
    // one copy of the problem per search, its spread counts set for each step's neighbourhood
    let mut around = p
        .topology
        .spreads
        .iter()
        .any(|g| !g.is_host())
        .then(|| p.clone());
    loop {
        let left_s = until.as_secs_f64() - start.elapsed().as_secs_f64() - overhead;
        // half the time left keeps room for a second try
        let seconds = if left_s >= 2.0 * MIN_STEP_SECONDS {
            left_s * 0.5
        } else {
            left_s
        };
        if seconds < MIN_STEP_SECONDS {
            break;
        }
        // the rankings take turns; one that has run out of new neighbourhoods leaves them to the
        // others, and once all have, random neighbourhoods use the time left
        let next = (0..rankings.len())
            .map(|i| (turn + i) % rankings.len())
            .find(|&i| !rankings[i].done);
        let hood = match next {
            Some(r) => {
                turn = r + 1;
                let ranking = &mut rankings[r];
                let Some(hood) =
                    neighbourhood(p, &best.0, ranking.waste, ranking.size, ranking.skip)
                        .filter(|h| *h != ranking.last)
                else {
                    ranking.done = true;
                    continue;
                };
                hood
            }
            None if fruitless >= RANDOM_PATIENCE => break,
            None => match random_neighbourhood(p, &best.0, first, &mut draws) {
                Some(hood) => {
                    fruitless += 1;
                    hood
                }
                None => break,
            },
        };
        steps += 1;
        let sub = SolveSettings {
            time_limit: Duration::from_secs_f64(seconds),
            lower_bound: false,
            ..settings.clone()
        };
        let began = Instant::now();
        let found = step(p, around.as_mut(), &sub, bins, &best.0, &hood, integer);
        overhead = overhead.max(began.elapsed().as_secs_f64() - seconds);
        tracing::trace!(
            step = steps,
            seconds = began.elapsed().as_secs_f64(),
            limit = seconds,
            "neighbourhood solved"
        );
        match found {
            Some((state, left, sc)) if sc < best_score - 1e-9 => {
                best_score = sc;
                tracing::debug!(step = steps, nodes = hood.len(), ranking = ?next.map(|r| rankings[r].waste), score = best_score, "neighbourhood improved the plan");
                best = (state, left);
                improved += 1;
                fruitless = 0;
                // a new plan: every ranking starts over from its most wasteful nodes
                for r in &mut rankings {
                    (r.skip, r.last, r.done) = (0, Vec::new(), false);
                }
            }
            _ => {
                tracing::debug!(step = steps, nodes = hood.len(), ranking = ?next.map(|r| rankings[r].waste), "neighbourhood left the plan as it was");
                if let Some(ranking) = next.map(|r| &mut rankings[r]) {
                    if hood.len() < ranking.size {
                        ranking.skip += hood.len().div_ceil(2);
                    } else {
                        ranking.size = ranking.size.saturating_add(ranking.size.div_ceil(2));
                    }
                    ranking.last = hood;
                }
            }
        }
    }
    Searched {
        state: best.0,
        left: best.1,
        steps,
        improved,
    }
}

/// Between two and `2 * size` new nodes drawn at random, within the pod cap: once the rankings
/// have nothing new to offer, nodes that no ranking puts together (one of each zone, a full node
/// beside an idle one) may still re-plan for less. None when fewer than two new nodes hold pods.
fn random_neighbourhood(
    p: &Problem,
    state: &State<'_>,
    size: usize,
    draws: &mut Rng,
) -> Option<Vec<usize>> {
    let mut nodes: Vec<usize> = state
        .new_nodes()
        .filter(|(_, n)| !n.placed.is_empty())
        .map(|(i, _)| i)
        .collect();
    if nodes.len() < 2 {
        return None;
    }
    let want = 2 + draws.below((2 * size).max(3) - 1);
    let cap = ((p.total_pods() as f64 * MAX_POD_SHARE) as usize).max(1);
    let (mut hood, mut pods) = (Vec::new(), 0);
    while hood.len() < want && !nodes.is_empty() {
        let i = nodes.swap_remove(draws.below(nodes.len()));
        let n = state.nodes[i].pod_count();
        if pods + n > cap && hood.len() >= 2 {
            break;
        }
        pods += n;
        hood.push(i);
    }
    hood.sort_unstable();
    (hood.len() >= 2).then_some(hood)
}

/// How a ranking measures a new node's waste.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Waste {
    /// Its cost times the share of its tightest resource left idle: big nodes sized for pods that
    /// went elsewhere.
    Cost,
    /// Its cost less what the cheapest offering of its pool and zone would cost, pro rata, for the
    /// resources its pods use: a node whose tightest resource is full but whose other ones idle
    /// (a general-purpose type holding cpu-heavy pods), or a small node that pays the reservations
    /// and DaemonSets a larger one would share.
    Mismatch,
    /// Every node that costs less than [`SMALL_NODE`] of the dearest, at once: small nodes, each
    /// well filled, that a larger node would hold for less (rounding and repair open them a few
    /// pods at a time; 14 of them, three pods each, in one plan of the scale-in benchmark).
    Small,
}

/// One ranking's place in the search: the next neighbourhood's size, how many of the most wasteful
/// nodes it passes over (once the pod cap stops it from growing, a failed neighbourhood gives way
/// to the next nodes down the ranking), the last one tried, and whether it has run out.
struct Ranking {
    waste: Waste,
    size: usize,
    skip: usize,
    last: Vec<usize>,
    done: bool,
}

impl Ranking {
    fn new(waste: Waste, size: usize) -> Self {
        Ranking {
            waste,
            size,
            skip: 0,
            last: Vec::new(),
            done: false,
        }
    }
}

/// The `size` new nodes that waste the most after the first `skip`, within the pod cap; None when
/// fewer than two are left (one node alone re-planned is what downsizing already did).
fn neighbourhood(
    p: &Problem,
    state: &State<'_>,
    by: Waste,
    size: usize,
    skip: usize,
) -> Option<Vec<usize>> {
    let mut ranked: Vec<(f64, usize)> = state
        .new_nodes()
        .filter(|(_, n)| !n.placed.is_empty())
        .map(|(i, _)| (waste(p, state, i, by), i))
        .filter(|(w, _)| *w > 1e-9)
        .collect();
    if by == Waste::Small {
        let dearest = ranked
            .iter()
            .map(|&(_, i)| cost(p, state, i))
            .fold(0.0, f64::max);
        ranked.retain(|&(_, i)| cost(p, state, i) < SMALL_NODE * dearest);
    }
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

/// How wasteful new node `i` is by `by` (see [`Waste`]); 0 for a running node.
fn waste(p: &Problem, state: &State<'_>, i: usize, by: Waste) -> f64 {
    let n = &state.nodes[i];
    let NodeKind::New { shape, offering } = n.kind else {
        return 0.0;
    };
    let o = p.offering(shape, offering);
    let used = o
        .alloc
        .iter()
        .zip(&n.free)
        .filter(|(a, _)| **a > 0)
        .map(|(a, f)| (a - f) as f64 / *a as f64)
        .fold(0.0, f64::max);
    match by {
        Waste::Cost => o.cost * (1.0 - used.min(1.0)),
        Waste::Mismatch => o.cost - pro_rata(p, shape, &o.zone, &o.alloc, &n.free),
        // the cheapest first
        Waste::Small => 1.0 / o.cost.max(1e-9),
    }
}

/// What new node `i` costs; 0 for a running node.
fn cost(p: &Problem, state: &State<'_>, i: usize) -> f64 {
    match state.nodes[i].kind {
        NodeKind::New { shape, offering } => p.offering(shape, offering).cost,
        NodeKind::Existing(_) => 0.0,
    }
}

/// The least that any offering of `shape`'s pool in `zone` costs for the share of a node the used
/// resources (`alloc` less `free`) would take of it, fractions of nodes allowed.
fn pro_rata(p: &Problem, shape: usize, zone: &str, alloc: &[i64], free: &[i64]) -> f64 {
    let used: Vec<i64> = alloc.iter().zip(free).map(|(a, f)| a - f).collect();
    let pool = p.shapes[shape].pool;
    p.shapes
        .iter()
        .filter(|s| s.pool == pool)
        .flat_map(|s| s.offerings.iter())
        .filter(|o| o.zone == zone)
        .map(|o| o.cost * super::problem::room_share(&used, &o.alloc))
        .fold(f64::INFINITY, f64::min)
}

/// One step: the neighbourhood's pods planned again, then every node replayed and repaired; the
/// best result with its score.
fn step<'p>(
    p: &'p Problem,
    around: Option<&mut Problem>,
    settings: &SolveSettings,
    bins: &[BinInfo],
    state: &State<'p>,
    hood: &[usize],
    integer: bool,
) -> Option<(State<'p>, Leftover, f64)> {
    let mut kept = Vec::new();
    let mut taken = Vec::new();
    for (i, _) in state
        .nodes
        .iter()
        .enumerate()
        .filter(|(_, n)| !n.placed.is_empty())
    {
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
    let sub: &Problem = around.map_or(p, |q| if count_kept(p, q, state, hood) { q } else { p });
    let (answer, _) = milp::solve(
        sub,
        settings,
        &seed,
        &demand,
        milp::bins_for(p, bins, &demand),
        integer,
    )
    .ok()?;
    let mut best: Option<(State<'p>, Leftover, f64)> = None;
    for (_, chosen) in answer.candidates.iter().take(CANDIDATES) {
        let mut all = kept.clone();
        all.extend(chosen.iter().cloned());
        let (replayed, rejected) = replay(p, &all);
        let (mut s, l) = greedy::repair(p, replayed, &rejected);
        improve::downsize(p, &mut s);
        improve::rezone(p, &mut s);
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

/// Sets `q` (a copy of `p`) to `p` with the pods the plan keeps outside the neighbourhood counted
/// as running in every spread group on a zone-like key; false when they hold none. Without them the
/// sub-solve spreads the neighbourhood's pods as if they were the group's only ones; the replay
/// then turns away the nodes that tip the skew, and the repair places those pods a few at a time on
/// small nodes.
fn count_kept(p: &Problem, q: &mut Problem, state: &State<'_>, hood: &[usize]) -> bool {
    let mut any = false;
    for (gi, g) in p
        .topology
        .spreads
        .iter()
        .enumerate()
        .filter(|(_, g)| !g.is_host())
    {
        // the plan's counts (running and placed) less what the neighbourhood's nodes hold
        let mut counts = state.spread_counts(gi).clone();
        for &i in hood.iter().filter(|&&i| state.spread_counts_on(gi, i)) {
            let n = &state.nodes[i];
            let Some(count) = n.labels.get(&g.key).and_then(|d| counts.get_mut(d)) else {
                continue;
            };
            *count -= g
                .members
                .iter()
                .map(|k| n.placed.get(k).copied().unwrap_or(0) as i64)
                .sum::<i64>();
        }
        counts.retain(|d, c| *c != 0 || g.existing.contains_key(d));
        any |= counts != g.existing;
        q.topology.spreads[gi].existing = counts;
    }
    any
}

/// A placed node as a pattern of its own bin.
fn column_of(p: &Problem, state: &State<'_>, i: usize) -> Column {
    let n = &state.nodes[i];
    let counts: Vec<(usize, u32)> = n
        .placed
        .iter()
        .filter(|(_, &c)| c > 0)
        .map(|(&k, &c)| (k, c as u32))
        .collect();
    let bin = match n.kind {
        NodeKind::Existing(e) => Bin::Existing(e),
        NodeKind::New { shape, offering } => Bin::New { shape, offering },
    };
    Column {
        bin,
        cost: pattern_cost(p, bin, &n.labels, counts.iter().copied()),
        counts,
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::catalog::{Arch, CapacityType, Catalog, InstanceType, Offering};
    use crate::domain::{ClusterSnapshot, NodePool, Pod, PodConstraints, Quantity, Resources};
    use crate::optimizer::milp::bins;

    /// `pods` one-core pods against one on-demand offering in zone z1 per (type, vcpus, price).
    fn problem(types: &[(&str, u32, f64)], pods: usize) -> Problem {
        let types = types
            .iter()
            .map(|&(name, vcpu, price)| {
                let mut it = InstanceType::new(name, vcpu, 16384, Arch::Amd64);
                it.max_pods = Some(20);
                it.offerings.push(Offering {
                    zone: "z1".into(),
                    capacity_type: CapacityType::OnDemand,
                    price,
                    available: true,
                    price_estimated: false,
                    interruption_band: None,
                });
                it
            })
            .collect();
        let catalog = Catalog {
            region: "test".into(),
            instance_types: types,
            provenance: None,
        };
        let pods = (0..pods)
            .map(|i| {
                let requests = Resources::new()
                    .with("cpu", Quantity::from_milli(1000))
                    .with("memory", Quantity::from_mib(256))
                    .with("pods", Quantity::from_units(1));
                let c = PodConstraints {
                    namespace: "default".into(),
                    requests,
                    ..Default::default()
                };
                Arc::new(Pod {
                    uid: format!("uid-{i}"),
                    ..Pod::new(format!("web-{i}"), c).owned_by("ReplicaSet", "web")
                })
            })
            .collect();
        let snapshot = ClusterSnapshot {
            pods,
            nodepools: vec![NodePool::unconstrained("default")],
            ..Default::default()
        };
        Problem::build(&snapshot, &catalog)
    }

    /// Four one-core pods; a one-core type at 0.12 and a four-core type at 0.2 (after reservations
    /// and the larger type's room: one and four pods).
    fn four_pods() -> Problem {
        problem(&[("one.large", 2, 0.12), ("four.xlarge", 5, 0.2)], 4)
    }

    /// A plan of `nodes` (type, pods) pairs, replayed.
    fn plan<'p>(p: &'p Problem, nodes: &[(&str, u32)]) -> State<'p> {
        let chosen: Vec<(Column, u32)> = nodes
            .iter()
            .map(|&(t, pods)| {
                let s = p
                    .shapes
                    .iter()
                    .position(|s| s.instance_type == t)
                    .expect("shape");
                (
                    Column {
                        bin: Bin::New {
                            shape: s,
                            offering: 0,
                        },
                        counts: vec![(0, pods)],
                        cost: p.offering(s, 0).cost,
                    },
                    1,
                )
            })
            .collect();
        let (state, rejected) = replay(p, &chosen);
        assert!(rejected.is_empty());
        state
    }

    /// Searches from `copies` four-core nodes each holding `pods` pods: (search, score before).
    fn search_from(p: &Problem, pods: u32, copies: u32) -> (Searched<'_>, f64) {
        let s = p
            .shapes
            .iter()
            .position(|s| s.instance_type == "four.xlarge")
            .expect("four.xlarge shape");
        let column = Column {
            bin: Bin::New {
                shape: s,
                offering: 0,
            },
            counts: vec![(0, pods)],
            cost: 0.2,
        };
        let (state, rejected) = replay(p, &[(column, copies)]);
        assert!(rejected.is_empty());
        let before = score(p, &state, &Leftover::new());
        (
            search(
                p,
                &SolveSettings::default(),
                &bins(p),
                state,
                Leftover::new(),
                Instant::now(),
                Duration::from_secs(60),
                Duration::ZERO,
                true,
                (0, 1),
            ),
            before,
        )
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
        assert!(
            (after - 0.2).abs() < 1e-9,
            "{after} after {} steps",
            found.steps
        );
        assert!(found.improved >= 1 && found.improved <= found.steps);
    }

    #[test]
    fn random_neighbourhoods_are_repeatable_and_reach_every_node() {
        let p = problem(&[("one.large", 2, 0.12)], 6);
        let state = plan(&p, &[("one.large", 1); 6]);
        let draw = |seed| {
            let mut d = Rng(seed);
            (0..40)
                .map(|_| random_neighbourhood(&p, &state, 2, &mut d).expect("six nodes"))
                .collect::<Vec<_>>()
        };
        let hoods = draw(7);
        assert_eq!(hoods, draw(7));
        for h in &hoods {
            assert!(
                (2..=4).contains(&h.len()) && h.windows(2).all(|w| w[0] < w[1]),
                "{h:?}"
            );
        }
        let reached: std::collections::BTreeSet<usize> = hoods.concat().into_iter().collect();
        assert_eq!(reached.len(), 6);
        let p = problem(&[("one.large", 2, 0.12)], 1);
        let one = plan(&p, &[("one.large", 1)]);
        assert_eq!(random_neighbourhood(&p, &one, 2, &mut Rng(7)), None);
    }

    #[test]
    fn a_plan_of_one_full_node_has_no_neighbourhood() {
        let p = four_pods();
        let (found, _) = search_from(&p, 4, 1);
        assert_eq!((found.steps, found.improved), (0, 0));
        assert!((score(&p, &found.state, &found.left) - 0.2).abs() < 1e-9);
    }

    #[test]
    fn a_node_of_a_type_dear_for_its_pods_wastes_what_the_cheaper_type_would_save() {
        let p = four_pods();
        let state = plan(&p, &[("one.large", 1), ("four.xlarge", 3)]);
        let (one, four) = (0, 1);
        // one.large is full (one pod) yet pays 0.12 for a pod four.xlarge hosts for a quarter of
        // 0.2 at most (its cpu share; pods and memory take less of it)
        let mismatch = waste(&p, &state, one, Waste::Mismatch);
        assert!(
            mismatch > 0.12 - 0.2 / 4.0 - 1e-9 && mismatch < 0.12 - 0.2 / 5.0 + 1e-9,
            "{mismatch}"
        );
        // idle room alone ranks it lower: its pod takes half its cpu
        assert!(waste(&p, &state, one, Waste::Cost) < mismatch);
        // the cheapest offering for its own pods is itself, pro rata: what stays idle
        let w = waste(&p, &state, four, Waste::Mismatch);
        assert!(w > 0.0 && w < 0.2 * 0.5, "{w}");
    }

    #[test]
    fn the_small_ranking_takes_every_node_below_a_tenth_of_the_dearest_at_once() {
        let types = [("one.large", 2, 0.012), ("big.8xlarge", 33, 0.5)];
        // 20 pods: the four small nodes' pods stay within the pod cap (7)
        let p = problem(&types, 20);
        let state = plan(
            &p,
            &[
                ("big.8xlarge", 16),
                ("one.large", 1),
                ("one.large", 1),
                ("one.large", 1),
                ("one.large", 1),
            ],
        );
        assert_eq!(
            neighbourhood(&p, &state, Waste::Small, usize::MAX, 0),
            Some(vec![1, 2, 3, 4])
        );
        // by cost times idle share the big node leads
        assert_eq!(
            neighbourhood(&p, &state, Waste::Cost, 2, 0).map(|h| h[0]),
            Some(0)
        );
    }

    /// Sub-solves count the pods the plan keeps outside the neighbourhood in each zonal spread, on
    /// top of the running ones, and start from the running ones again at every step.
    #[test]
    fn a_neighbourhood_sub_solve_counts_the_kept_pods_of_its_zonal_spreads() {
        use crate::domain::labels::ZONE;
        let p = crate::optimizer::fixtures::zone_spread(4);
        let group = p
            .topology
            .spreads
            .iter()
            .position(|g| g.key == ZONE)
            .expect("zonal spread group");
        // one pod per node: two nodes in z1, two in z2
        let chosen: Vec<(Column, u32)> = (0..p.shapes[0].offerings.len())
            .map(|o| {
                (
                    Column {
                        bin: Bin::New {
                            shape: 0,
                            offering: o,
                        },
                        counts: vec![(0, 1)],
                        cost: 0.1,
                    },
                    2,
                )
            })
            .collect();
        let (state, rejected) = replay(&p, &chosen);
        assert!(rejected.is_empty() && state.placed_of(0) == 4);
        let zone_of = |i: usize| {
            state.nodes[i]
                .labels
                .get(ZONE)
                .cloned()
                .expect("zone label")
        };
        let hood: Vec<usize> = (0..state.nodes.len())
            .filter(|&i| zone_of(i) == "z1")
            .take(1)
            .chain(
                (0..state.nodes.len())
                    .filter(|&i| zone_of(i) == "z2")
                    .take(2),
            )
            .collect();
        let mut q = p.clone();
        assert!(count_kept(&p, &mut q, &state, &hood));
        // only the z1 node outside the neighbourhood is left to count
        assert_eq!(
            q.topology.spreads[group].existing,
            [("z1".to_string(), 1)].into()
        );
        // a neighbourhood of every node keeps nothing: the counts go back to the running pods
        let all: Vec<usize> = (0..state.nodes.len()).collect();
        assert!(!count_kept(&p, &mut q, &state, &all));
        assert_eq!(
            q.topology.spreads[group].existing,
            p.topology.spreads[group].existing
        );
    }

    #[test]
    fn every_search_finds_the_optimum_of_a_small_plan() {
        let p = problem(&[("one.large", 2, 0.012), ("big.8xlarge", 33, 0.5)], 6);
        let state = plan(
            &p,
            &[
                ("big.8xlarge", 2),
                ("one.large", 1),
                ("one.large", 1),
                ("one.large", 1),
                ("one.large", 1),
            ],
        );
        // the optimum, six pods on six small nodes (0.072)
        for which in [(0, 1), (0, 2), (1, 2), (2, 3)] {
            let found = search(
                &p,
                &SolveSettings::default(),
                &bins(&p),
                state.clone(),
                Leftover::new(),
                Instant::now(),
                Duration::from_secs(60),
                Duration::ZERO,
                true,
                which,
            );
            assert!(found.left.is_empty());
            let after = score(&p, &found.state, &found.left);
            assert!(
                (after - 0.072).abs() < 1e-9,
                "search {which:?}: {after} after {} steps",
                found.steps
            );
        }
    }
}

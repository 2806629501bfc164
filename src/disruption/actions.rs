//! The MILP strategy end to end: the selection model picks the removals, the provisioning core
//! plans the cluster they leave (re-checking every scheduling rule, and keeping a node whose pods
//! would find no place), and the plan is cut into independent actions — nodes that share a
//! replacement belong to one action. Actions that save less than `minSavings`, or replace spot with
//! spot without enough cheaper spot types, are dropped. The lower bound is the aggregated
//! provisioning bound over every candidate's pods with every candidate an optional, priced bin.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Instant;

use crate::catalog::{CapacityType, Catalog};
use crate::domain::ClusterSnapshot;
use crate::optimizer::greedy;
use crate::optimizer::milp::{self, bins, bound, MilpError, MipStatus};
use crate::optimizer::problem::Problem;
use crate::optimizer::state::State;
use crate::optimizer::{solve_seeded, NewNode, Plan, SeedNode, SolveSettings, Strategy};

use super::candidates::NodeInfo;
use super::edit::without_nodes;
use super::held;
use super::model::{self, Limits, Selection};
use super::plan::{Action, Blocked, DisruptionPlan, DisruptionReport, DisruptionStatus, Move};
use super::{
    assemble, cheaper_spot_types, cluster_cost, delete_only, round6, unbound_on, without_pending,
    DisruptionError, DisruptionSettings, DisruptionStrategy, Reason, Triage,
};

pub(crate) fn decide(
    snapshot: &ClusterSnapshot,
    catalog: &Catalog,
    settings: &DisruptionSettings,
    t: &Triage<'_>,
    start: Instant,
) -> Result<DisruptionPlan, DisruptionError> {
    // a margin for what runs after the last timed phase (actions, fingerprint)
    let budget = settings.time_limit.as_secs_f64() * 0.85;
    let base = without_pending(snapshot);
    let mut notes = Vec::new();
    let pending = snapshot.pods.len() - base.pods.len();
    if pending > 0 {
        notes.push(format!("{pending} pending pods left to the provisioner"));
    }
    let mut forced: BTreeMap<String, Reason> =
        t.forced.iter().map(|(n, r)| (n.name.clone(), *r)).collect();
    let home = home_of(
        snapshot,
        t.cands
            .nodes
            .iter()
            .filter(|n| forced.contains_key(&n.name) || t.open.iter().any(|o| o.name == n.name)),
    );
    // the bound depends only on the triage: it runs on a second core while the selection and the
    // re-solve run, with the time they are expected to take
    std::thread::scope(|scope| {
        let bound = settings.lower_bound.then(|| {
            let (base, home) = (&base, &home);
            scope.spawn(move || {
                let mut notes = Vec::new();
                let seconds = budget * BOUND_SHARE - start.elapsed().as_secs_f64();
                (
                    lower_bound(base, catalog, t, home, settings, seconds, &mut notes),
                    notes,
                )
            })
        });
        let decided = decide_actions(
            snapshot,
            catalog,
            settings,
            t,
            start,
            budget,
            &base,
            &home,
            &mut forced,
            &mut notes,
        );
        let (lower_bound, bound_notes) = match bound.map(|h| h.join()) {
            Some(Ok(b)) => b,
            Some(Err(_)) => (
                0.0,
                vec!["no lower bound: the bound thread panicked".to_string()],
            ),
            None => (0.0, vec![]),
        };
        notes.extend(bound_notes);
        decided.map(|d| finish(snapshot, catalog, settings, t, start, d, lower_bound, notes))
    })
}

/// The share of the decision's budget the lower bound may run for, beside the selection and the
/// re-solve (which take 0.4 and the rest of it). It ends before the re-solve's neighbourhood search
/// starts, which then runs two searches side by side.
const BOUND_SHARE: f64 = 0.7;

/// The selection model, then the re-solve of the cluster it leaves, until every action pays.
#[allow(clippy::too_many_arguments)]
fn decide_actions(
    snapshot: &ClusterSnapshot,
    catalog: &Catalog,
    settings: &DisruptionSettings,
    t: &Triage<'_>,
    start: Instant,
    budget: f64,
    base: &ClusterSnapshot,
    home: &BTreeMap<String, String>,
    forced: &mut BTreeMap<String, Reason>,
    notes: &mut Vec<String>,
) -> Result<Decided, DisruptionError> {
    // a failed selection model is the caller's to handle (it falls back to Karpenter's rules)
    let selection = select(base, catalog, settings, t, forced, home, budget * 0.4)?;
    let mut remove = selection
        .as_ref()
        .map(|s| s.remove.clone())
        .unwrap_or_default();
    tracing::debug!(
        seconds = start.elapsed().as_secs_f64(),
        removed = remove.len(),
        status = selection.as_ref().map(|s| s.status.as_str()),
        mip_gap = selection.as_ref().and_then(|s| s.mip_gap),
        "selection done"
    );
    let seed = selection
        .as_ref()
        .map(|s| s.seed.clone())
        .unwrap_or_default();
    let mut blocked = t.blocked.clone();
    // the provisioning core plans the cluster the removals leave; a node whose pods find no place
    // stays, and so do the nodes of an action that does not pay, after which the rest is re-planned
    // (their instance types come back into the catalog)
    let mut actions;
    loop {
        let after_plan = replan(
            base,
            catalog,
            settings,
            t,
            home,
            forced,
            &mut remove,
            &mut blocked,
            &seed,
            budget,
            start,
        )?;
        let reasons: BTreeMap<&str, Reason> = forced
            .iter()
            .map(|(n, r)| (n.as_str(), *r))
            .chain(remove.iter().map(|n| (n.as_str(), Reason::Underutilized)))
            .collect();
        actions = split(&after_plan, home, &reasons, t, notes);
        let mut room = held::Room::new(base, &settings.held);
        let refused: Vec<String> = actions
            .iter()
            .filter(|a| {
                !worth_it(a, t, settings, &snapshot.weights, &mut blocked)
                    || !keeps_room(a, base, room.as_mut(), &mut blocked)
            })
            .flat_map(|a| a.delete.clone())
            .collect();
        if refused.is_empty() {
            break;
        }
        let before = remove.len() + forced.len();
        for n in &refused {
            remove.remove(n);
            // an empty node is forced only by emptiness, which the held room may refuse
            if forced.get(n) == Some(&Reason::Empty) {
                forced.remove(n);
            }
        }
        if remove.len() + forced.len() == before {
            // nothing left to take back: the refused actions stand refused, the rest go ahead
            actions.retain(|a| !a.delete.iter().any(|n| refused.contains(n)));
            break;
        }
    }
    tracing::debug!(
        seconds = start.elapsed().as_secs_f64(),
        actions = actions.len(),
        "re-solve done"
    );
    Ok(Decided {
        selection,
        actions,
        blocked,
    })
}

/// What the selection and the re-solve decided, before the bound is known.
struct Decided {
    selection: Option<Selection>,
    actions: Vec<Action>,
    blocked: Vec<Blocked>,
}

/// The disruption plan from the decided actions and the bound.
#[allow(clippy::too_many_arguments)]
fn finish(
    snapshot: &ClusterSnapshot,
    catalog: &Catalog,
    settings: &DisruptionSettings,
    t: &Triage<'_>,
    start: Instant,
    decided: Decided,
    lower_bound: f64,
    notes: Vec<String>,
) -> DisruptionPlan {
    let Decided {
        selection,
        actions,
        blocked,
    } = decided;
    let cost_before = cluster_cost(snapshot, catalog);
    let savings: f64 = actions.iter().map(|a| a.savings_per_hour).sum();
    let none = t.open.is_empty() && t.forced.is_empty();
    let (mip_status, mip_gap, variables, constraints, classes) = match &selection {
        Some(s) => (
            Some(s.status),
            s.mip_gap,
            s.variables,
            s.constraints,
            s.classes,
        ),
        None => (None, None, 0, 0, 0),
    };
    // "optimal" is a certified claim, as for provisioning: the hourly cost after is within the gap
    // target of the lower bound; a selection model that closed its own gap is only "feasible"
    let after = cost_before - savings;
    let certified =
        after <= 0.0 || (after - lower_bound.min(cost_before)) / after <= settings.gap + 1e-9;
    let status = match mip_status {
        None if none => DisruptionStatus::NoCandidates,
        _ if certified => DisruptionStatus::Optimal,
        Some(MipStatus::TimeLimit) => DisruptionStatus::TimeLimit,
        _ => DisruptionStatus::Feasible,
    };
    let solver = DisruptionReport {
        status,
        strategy: DisruptionStrategy::Milp,
        seconds: start.elapsed().as_secs_f64(),
        candidates: t.open.len(),
        pod_classes: classes,
        variables,
        constraints,
        mip_gap,
        notes,
    };
    assemble(cost_before, t, actions, blocked, lower_bound, solver)
}

/// Plans the cluster without the forced and removed nodes, keeping (and blocking) every node whose
/// pods would find no place, until all displaced pods are placed.
#[allow(clippy::too_many_arguments)]
fn replan(
    base: &ClusterSnapshot,
    catalog: &Catalog,
    settings: &DisruptionSettings,
    t: &Triage<'_>,
    home: &BTreeMap<String, String>,
    forced: &mut BTreeMap<String, Reason>,
    remove: &mut BTreeSet<String>,
    blocked: &mut Vec<Blocked>,
    seed: &[SeedNode],
    budget: f64,
    start: Instant,
) -> Result<Plan, DisruptionError> {
    loop {
        let gone: BTreeSet<String> = forced.keys().chain(remove.iter()).cloned().collect();
        let after = without_nodes(base, &gone);
        let types: BTreeSet<&str> = t
            .cands
            .nodes
            .iter()
            .filter(|n| remove.contains(&n.name))
            .map(|n| n.instance_type.as_str())
            .collect();
        let cat = without_types(catalog, &types);
        // the re-solve keeps to its limit (building, replaying and the neighbourhood search
        // included); the rest is for extracting its plan and the fallback lists
        let left = ((budget - start.elapsed().as_secs_f64()) * 0.95).max(budget * 0.1);
        // the bound's thread is done by the time the re-solve's neighbourhood search starts (see
        // BOUND_SHARE): the second core runs a second search
        let solve = SolveSettings {
            searches: 2,
            ..settings.solve(left, Strategy::Milp)
        };
        let plan = solve_seeded(&after, &cat, &solve, seed)?.plan;
        let mut changed = false;
        for u in &plan.unschedulable {
            let Some(node) = home.get(&u.pod) else {
                continue;
            };
            let drifted = forced.get(node) == Some(&Reason::Drifted);
            if remove.remove(node) || (drifted && forced.remove(node).is_some()) {
                blocked.push(Blocked {
                    node: node.clone(),
                    reason: format!("pod {} cannot be rescheduled: {}", u.pod, u.message),
                });
                changed = true;
            }
        }
        if !changed {
            return Ok(plan);
        }
    }
}

/// Each reschedulable pod of `nodes`, keyed by pod, with its node.
pub(crate) fn home_of<'a>(
    snapshot: &ClusterSnapshot,
    nodes: impl Iterator<Item = &'a NodeInfo>,
) -> BTreeMap<String, String> {
    nodes
        .flat_map(|n| {
            n.pods
                .iter()
                .map(move |&p| (snapshot.pods[p].key(), n.name.clone()))
        })
        .collect()
}

pub(crate) fn without_types(catalog: &Catalog, types: &BTreeSet<&str>) -> Catalog {
    let mut out = catalog.clone();
    out.instance_types
        .retain(|it| !types.contains(it.name.as_str()));
    out
}

fn select(
    base: &ClusterSnapshot,
    catalog: &Catalog,
    settings: &DisruptionSettings,
    t: &Triage<'_>,
    forced: &BTreeMap<String, Reason>,
    home: &BTreeMap<String, String>,
    seconds: f64,
) -> Result<Option<Selection>, MilpError> {
    if t.open.is_empty() {
        return Ok(None);
    }
    let forced_names: BTreeSet<String> = forced.keys().cloned().collect();
    let open: BTreeSet<String> = t.open.iter().map(|n| n.name.clone()).collect();
    let without_forced = without_nodes(base, &forced_names);
    let keep = unbound_on(&without_forced, &open);
    let gone = without_nodes(&without_forced, &open);
    let open_home: BTreeMap<String, String> = home
        .iter()
        .filter(|(_, n)| open.contains(*n))
        .map(|(p, n)| (p.clone(), n.clone()))
        .collect();
    let limits = Limits {
        budget: &t.underutilized,
        settings: &settings.solve(seconds, Strategy::Milp),
        balanced: &t.balanced,
    };
    model::select(&keep, &gone, catalog, &t.open, &open_home, &limits).map(Some)
}

/// Cuts the plan of the cluster after into actions: removed nodes that share a launched node form
/// one action; empty removals form one Empty action.
fn split(
    after: &Plan,
    home: &BTreeMap<String, String>,
    reasons: &BTreeMap<&str, Reason>,
    t: &Triage<'_>,
    notes: &mut Vec<String>,
) -> Vec<Action> {
    let dest = after.destinations();
    let launched: BTreeMap<&str, &NewNode> =
        after.nodes.iter().map(|n| (n.id.as_str(), n)).collect();
    // union-find over removed nodes, joined through the launched nodes their pods go to
    let names: Vec<&str> = reasons.keys().copied().collect();
    let mut parent: Vec<usize> = (0..names.len()).collect();
    fn root(parent: &mut [usize], mut i: usize) -> usize {
        while parent[i] != i {
            parent[i] = parent[parent[i]];
            i = parent[i];
        }
        i
    }
    let mut owner_of_launch: BTreeMap<&str, usize> = BTreeMap::new();
    let mut moves: Vec<Vec<Move>> = vec![Vec::new(); names.len()];
    for (pod, node) in home {
        let Ok(i) = names.binary_search(&node.as_str()) else {
            continue;
        };
        // only an expired node's pod can be without a place (forceful): it goes back to pending
        let Some(&to) = dest.get(pod.as_str()) else {
            notes.push(format!(
                "pod {pod} on expired node {node} has no place and will be pending"
            ));
            continue;
        };
        moves[i].push(Move {
            pod: pod.clone(),
            from: node.clone(),
            to: to.to_string(),
        });
        if launched.contains_key(to) {
            let j = *owner_of_launch.entry(to).or_insert(i);
            let (a, b) = (root(&mut parent, i), root(&mut parent, j));
            parent[a] = b;
        }
    }
    let mut groups: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
    for i in 0..names.len() {
        groups.entry(root(&mut parent, i)).or_default().push(i);
    }
    let price = |n: &str| t.cands.find(n).map_or(0.0, |c| c.price);
    let cost = |n: &str| t.cands.find(n).map_or(0.0, |c| c.disruption_cost);
    let mut actions = Vec::new();
    let mut empties: Vec<&NodeInfo> = Vec::new();
    for members in groups.into_values() {
        let delete: Vec<String> = members.iter().map(|&i| names[i].to_string()).collect();
        if members.iter().all(|&i| reasons[names[i]] == Reason::Empty) {
            empties.extend(delete.iter().filter_map(|n| t.cands.find(n)));
            continue;
        }
        let mut launch: Vec<NewNode> = owner_of_launch
            .iter()
            .filter(|(_, &i)| members.contains(&root(&mut parent, i)))
            .map(|(id, _)| launched[id].clone())
            .collect();
        launch.sort_by(|a, b| a.id.cmp(&b.id));
        let reason = members
            .iter()
            .map(|&i| reasons[names[i]])
            .max_by_key(|r| rank(*r))
            .unwrap_or(Reason::Underutilized);
        let mut mv: Vec<Move> = members.iter().flat_map(|&i| moves[i].clone()).collect();
        mv.sort();
        actions.push(Action {
            reason,
            savings_per_hour: round6(
                delete.iter().map(|n| price(n)).sum::<f64>()
                    - launch.iter().map(|n| n.price).sum::<f64>(),
            ),
            disruption_cost: round6(delete.iter().map(|n| cost(n)).sum()),
            delete,
            launch,
            moves: mv,
        });
    }
    if !empties.is_empty() {
        actions.insert(0, delete_only(Reason::Empty, &empties));
    }
    actions
}

fn rank(r: Reason) -> u8 {
    match r {
        Reason::Expired => 3,
        Reason::Drifted => 2,
        Reason::Underutilized => 1,
        Reason::Empty => 0,
    }
}

/// A voluntary consolidation leaves the room held for returning demand free.
fn keeps_room(
    a: &Action,
    base: &ClusterSnapshot,
    room: Option<&mut held::Room>,
    blocked: &mut Vec<Blocked>,
) -> bool {
    let Some(room) = room else {
        return true;
    };
    match room.admit(a, base) {
        Ok(()) => true,
        Err(why) => {
            tracing::debug!(nodes = ?a.delete, reason = %why, "consolidation refused");
            blocked.extend(a.delete.iter().map(|n| Blocked {
                node: n.clone(),
                reason: why.clone(),
            }));
            false
        }
    }
}

/// Consolidation actions must pay: at least `minSavings`, and a spot node goes to spot capacity
/// only with enough cheaper spot types to choose from. Forced actions always stand.
fn worth_it(
    a: &Action,
    t: &Triage<'_>,
    settings: &DisruptionSettings,
    w: &crate::domain::CostWeights,
    blocked: &mut Vec<Blocked>,
) -> bool {
    if a.reason != Reason::Underutilized {
        return true;
    }
    let mut refuse = |why: String| {
        tracing::debug!(nodes = ?a.delete, reason = %why, "consolidation refused");
        blocked.extend(a.delete.iter().map(|n| Blocked {
            node: n.clone(),
            reason: why.clone(),
        }));
        false
    };
    if a.savings_per_hour < w.min_savings {
        return refuse(format!(
            "replacing it saves ${:.4}/h, below minSavings ${}/h",
            a.savings_per_hour, w.min_savings
        ));
    }
    // the evictions, the node disruptions and the replacements' launches are paid once; the
    // savings must pay them back, a node's disruption over its payback horizon and a launch
    // within paybackHours
    let one_off = a.disruption_cost + w.per_hour(w.node_launch) * a.launch.len() as f64;
    if a.savings_per_hour < one_off {
        return refuse(format!(
            "replacing it saves ${:.4}/h, less than its evictions and launches cost paid back \
             over paybackHours {} to paybackMaxHours {} by node age (${:.4}/h)",
            a.savings_per_hour, w.payback_hours, w.payback_max_hours, one_off
        ));
    }
    let every_spot = a
        .delete
        .iter()
        .all(|n| t.cands.find(n).is_some_and(|c| c.spot));
    let spot_launch = a
        .launch
        .iter()
        .any(|l| l.capacity_type == CapacityType::Spot);
    if every_spot && spot_launch && !settings.spot_to_spot {
        return refuse(
            "spot-to-spot consolidation is off (feature gate SpotToSpotConsolidation)".into(),
        );
    }
    // Karpenter asks for flexibility only when one spot node is replaced (single-node
    // consolidation); replacing several spot nodes is taken on price alone
    let all_spot = a.delete.len() == 1 && every_spot;
    let removed: f64 = a
        .delete
        .iter()
        .filter_map(|n| t.cands.find(n))
        .map(|c| c.price)
        .sum();
    for l in a
        .launch
        .iter()
        .filter(|l| all_spot && l.capacity_type == CapacityType::Spot)
    {
        let found = cheaper_spot_types(l, removed);
        if found < settings.spot_to_spot_min_types {
            return refuse(format!(
                "spot-to-spot replacement needs {} cheaper spot types, found {found}",
                settings.spot_to_spot_min_types
            ));
        }
    }
    true
}

/// Fixed nodes' prices plus a bound over every consolidation candidate's and forced node's pods,
/// where each candidate is an optional bin at its price and new offerings are open at their price
/// (no spot-risk surcharge, no preference penalties: this bounds dollars, not the objective). The
/// larger of the aggregated LP and, when pricing proved it converged, the pattern LP.
fn lower_bound(
    base: &ClusterSnapshot,
    catalog: &Catalog,
    t: &Triage<'_>,
    home: &BTreeMap<String, String>,
    settings: &DisruptionSettings,
    seconds: f64,
    notes: &mut Vec<String>,
) -> f64 {
    // only expiry removes a node for sure; an empty or drifted node may yet be kept, so it is an
    // optional bin like any consolidation candidate
    let forced_names: BTreeSet<String> = t
        .forced
        .iter()
        .filter(|(_, r)| *r == Reason::Expired)
        .map(|(n, _)| n.name.clone())
        .collect();
    let open: BTreeSet<String> = t
        .open
        .iter()
        .map(|n| n.name.clone())
        .chain(
            t.forced
                .iter()
                .filter(|(_, r)| *r != Reason::Expired)
                .map(|(n, _)| n.name.clone()),
        )
        .collect();
    let snap = unbound_on(&without_nodes(base, &forced_names), &open);
    let mut p = Problem::build(&snap, catalog);
    for shape in Arc::make_mut(&mut p.shapes).iter_mut() {
        for o in &mut shape.offerings {
            o.cost = o.price;
        }
    }
    p.weights.preferred_node_affinity = 0.0;
    p.weights.prefer_no_schedule = 0.0;
    p.weights.schedule_anyway_skew = 0.0;
    p.weights.preferred_pod_affinity = 0.0;
    p.weights.preferred_pod_anti_affinity = 0.0;
    for n in &mut p.existing {
        if open.contains(&n.name) {
            n.keep_cost = n.price;
        }
    }
    let fixed: f64 = snap
        .nodes
        .iter()
        .filter(|n| !open.contains(&n.name))
        .map(|n| crate::optimizer::problem::node_price(n, catalog))
        .sum();
    let demand: Vec<u32> = p.classes.iter().map(|c| c.demand() as u32).collect();
    if demand.iter().all(|&d| d == 0) {
        return fixed;
    }
    let start = Instant::now();
    tracing::debug!(seconds, "bound problem built");
    let mut best = match bound::lower_bound(&p, &bins(&p), &demand, seconds.max(0.3)) {
        Ok(v) => v,
        Err(e) => {
            notes.push(format!("no aggregated bound: {e}"));
            0.0
        }
    };
    tracing::debug!(
        seconds = start.elapsed().as_secs_f64(),
        bound = best,
        "aggregated bound done"
    );
    // the pattern LP is tighter: it keeps pods whole, and a kept node keeps its own pods (the
    // aggregated LP above may not assume that: it has no way to put them back where they are)
    p.set_home(home);
    let left = seconds - start.elapsed().as_secs_f64();
    // as for provisioning, only where the LP's value bounds plans (soft rules: see lp_bounds_plans)
    if left > 0.2 && milp::lp_bounds_plans(&p) {
        let (greedy_state, _) = greedy::seed(&p, State::new(&p), &p.class_demands());
        if let Ok(milp::Generation { bound: Some(b), .. }) = milp::columns_and_bound(
            &p,
            &settings.solve(left, Strategy::Milp),
            &greedy_state,
            &demand,
            milp::Unproven::Large,
        ) {
            let b = milp::safe_pattern_bound(b, p.total_pods() as f64);
            if b > best {
                notes.push("lower bound from the pattern lp".into());
                best = b;
            }
        }
    }
    fixed + best
}

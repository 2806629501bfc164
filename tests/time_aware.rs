//! The time-aware cost weights (docs/tuning-cost-weights.md, "Decisions over time"), each on a
//! small case with a hand-computed answer: a launch charge per new node in the objective, room
//! bought ahead for a growing workload (`trendHeadroom`), one-off costs paid back over
//! `paybackHours`, and new nodes left to settle (`settleMinutes`).
//!
//! Run with `cargo test --release --test time_aware`.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use joiner::catalog::Catalog;
use joiner::disruption::timing::parse_timestamp;
use joiner::disruption::{consolidate, DisruptionPlan, DisruptionSettings, DisruptionStrategy};
use joiner::domain::ClusterSnapshot;
use joiner::optimizer::{self, headroom, Plan, SolveSettings, Strategy};

const NOW: &str = "2026-11-30T12:00:00Z";

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn catalog(name: &str) -> Catalog {
    Catalog::from_file(&root().join(format!("fixtures/catalogs/{name}.json"))).expect("catalog")
}

fn snapshot(path: &str) -> ClusterSnapshot {
    joiner::snapshot::load_snapshot(&root().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn solve(snap: &ClusterSnapshot) -> Plan {
    let settings = SolveSettings {
        strategy: Strategy::Milp,
        time_limit: Duration::from_secs(10),
        ..SolveSettings::default()
    };
    optimizer::solve(snap, &catalog("test-small"), &settings).expect("solve")
}

fn one_pending_replica() -> ClusterSnapshot {
    snapshot("fixtures/scenarios/time-aware/one-pending-replica.yaml")
}

fn web_grew_by(pods: usize) -> BTreeMap<headroom::Workload, usize> {
    [(
        (
            "default".to_string(),
            "ReplicaSet".to_string(),
            "web-5c9d".to_string(),
        ),
        pods,
    )]
    .into()
}

fn types(plan: &Plan) -> Vec<&str> {
    plan.nodes
        .iter()
        .map(|n| n.instance_type.as_str())
        .collect()
}

#[test]
fn the_launch_charge_is_paid_per_new_node_over_the_payback_time() {
    let mut snap = one_pending_replica();
    let plain = solve(&snap);
    snap.weights.node_launch = 0.3;
    snap.weights.payback_hours = 2.0;
    let charged = solve(&snap);
    assert_eq!(types(&plain), ["small.large"]);
    assert_eq!(types(&charged), ["small.large"]);
    assert!((plain.objective - plain.cost_per_hour).abs() < 1e-9);
    assert!(
        (charged.objective - charged.cost_per_hour - 0.3 / 2.0).abs() < 1e-9,
        "objective {} for ${}/h of nodes",
        charged.objective,
        charged.cost_per_hour
    );
}

#[test]
fn a_growing_workload_gets_room_for_its_next_replicas_and_the_plan_names_no_stand_in() {
    let mut snap = one_pending_replica();
    snap.weights.trend_headroom = 0.5;
    let (with, added) = headroom::add(&snap, &web_grew_by(4));
    assert_eq!(added, 2, "half of the 4 pods gained");
    let mut plan = solve(&with);
    assert_eq!(
        headroom::strip(&mut plan),
        2,
        "both stand-ins held: {plan:?}"
    );
    assert_eq!(types(&plan), ["medium.xlarge"], "{plan:?}");
    assert_eq!(plan.nodes[0].pods, ["default/web-5c9d-a"]);
    assert!(plan.unschedulable.is_empty(), "{:?}", plan.unschedulable);
    assert_eq!(
        plan.lower_bound, 0.0,
        "the bound was for the problem with stand-ins"
    );
    if let Err(v) = joiner::verify::verify(&snap, &catalog("test-small"), &plan) {
        panic!("the stripped plan breaks a rule: {v:?}");
    }
}

#[test]
fn without_growth_or_with_headroom_off_the_plan_is_sized_to_the_pending_pods() {
    let mut snap = one_pending_replica();
    snap.weights.trend_headroom = 0.5;
    assert_eq!(headroom::add(&snap, &BTreeMap::new()).1, 0);
    snap.weights.trend_headroom = 0.0;
    let (same, added) = headroom::add(&snap, &web_grew_by(4));
    assert_eq!(added, 0);
    assert_eq!(types(&solve(&same)), ["small.large"]);
}

#[test]
fn stand_ins_alone_never_launch_a_node() {
    let mut snap = one_pending_replica();
    snap.weights.trend_headroom = 8.0;
    let (with, added) = headroom::add(&snap, &web_grew_by(4));
    assert_eq!(added, 32);
    let mut plan = solve(&with);
    headroom::strip(&mut plan);
    assert!(
        plan.nodes.iter().all(|n| !n.pods.is_empty()),
        "{:?}",
        plan.nodes
    );
    assert_eq!(
        plan.nodes.len(),
        1,
        "one node for the one real pod: {plan:?}"
    );
}

// ------------------------------------------------------------------ disruption

/// The disruption fixture with one $16/h node holding one small pod that a $0.20/h type holds
/// (tests/disruption.rs, `expensive_node_with_one_small_pod_is_replaced_by_one_cheaper_node`); the
/// node was created 36 h before [`NOW`].
fn replaceable() -> (ClusterSnapshot, Catalog) {
    (
        snapshot("fixtures/disruption/replace-expensive-node.yaml"),
        catalog("test-assorted"),
    )
}

fn disrupt(snap: &ClusterSnapshot, cat: &Catalog, strategy: DisruptionStrategy) -> DisruptionPlan {
    let mut s = DisruptionSettings::new(parse_timestamp(NOW).unwrap());
    s.strategy = strategy;
    s.time_limit = Duration::from_secs(5);
    consolidate(snap, cat, &s).expect("consolidate")
}

fn blocked_for(plan: &DisruptionPlan, text: &str) -> bool {
    plan.blocked.iter().any(|b| b.reason.contains(text))
}

#[test]
fn a_node_younger_than_settle_minutes_is_left_alone_by_joiner_only() {
    let (mut snap, cat) = replaceable();
    snap.weights.settle_minutes = 36.0 * 60.0 + 1.0;
    let young = disrupt(&snap, &cat, DisruptionStrategy::Milp);
    assert!(young.actions.is_empty(), "{:?}", young.actions);
    assert!(blocked_for(&young, "settling"), "{:?}", young.blocked);
    let karpenter = disrupt(&snap, &cat, DisruptionStrategy::Baseline);
    assert_eq!(
        karpenter.actions.len(),
        1,
        "the baseline has no settling time"
    );
    snap.weights.settle_minutes = 36.0 * 60.0 - 1.0;
    let settled = disrupt(&snap, &cat, DisruptionStrategy::Milp);
    assert_eq!(settled.actions.len(), 1, "{:?}", settled.blocked);
}

#[test]
fn a_consolidation_is_taken_only_when_its_savings_pay_its_evictions_back_in_time() {
    let (mut snap, cat) = replaceable();
    // one pod evicted at $40 once, one node disrupted at $0: $20/h over 2 h, more than the
    // $15.80/h saved; over 4 h, $10/h, less
    snap.weights.pod_eviction = 40.0;
    snap.weights.node_disruption = 0.0;
    snap.weights.payback_hours = 2.0;
    // the node's age would lengthen the payback time: off here
    snap.weights.payback_max_hours = 0.0;
    let short = disrupt(&snap, &cat, DisruptionStrategy::Milp);
    assert!(short.actions.is_empty(), "{:?}", short.actions);
    snap.weights.payback_hours = 4.0;
    let long = disrupt(&snap, &cat, DisruptionStrategy::Milp);
    assert_eq!(long.actions.len(), 1, "{:?}", long.blocked);
}

#[test]
fn a_replacement_s_launch_counts_against_the_savings() {
    let (mut snap, cat) = replaceable();
    snap.weights.pod_eviction = 0.0;
    snap.weights.node_disruption = 0.0;
    snap.weights.payback_hours = 1.0;
    // the replacement's launch at $16 once outweighs $15.80/h over an hour
    snap.weights.node_launch = 16.0;
    let plan = disrupt(&snap, &cat, DisruptionStrategy::Milp);
    assert!(plan.actions.is_empty(), "{:?}", plan.actions);
    snap.weights.node_launch = 15.0;
    let plan = disrupt(&snap, &cat, DisruptionStrategy::Milp);
    assert_eq!(plan.actions.len(), 1, "{:?}", plan.blocked);
}

#[test]
fn a_node_that_has_run_long_pays_its_evictions_back_over_its_age_up_to_the_cap() {
    let (mut snap, cat) = replaceable();
    // the node is 36 h old: with the cap at 24 h, one pod evicted at $380 once costs $15.83/h,
    // more than the $15.80/h saved, and at $378, $15.75/h, less
    snap.weights.node_disruption = 0.0;
    snap.weights.payback_hours = 2.0;
    snap.weights.payback_max_hours = 24.0;
    snap.weights.pod_eviction = 380.0;
    let dear = disrupt(&snap, &cat, DisruptionStrategy::Milp);
    assert!(dear.actions.is_empty(), "{:?}", dear.actions);
    snap.weights.pod_eviction = 378.0;
    let cheap = disrupt(&snap, &cat, DisruptionStrategy::Milp);
    assert_eq!(cheap.actions.len(), 1, "{:?}", cheap.blocked);
    // with a cap of 48 h its 36 h of age count: $760 once is $21.1/h, $560 once $15.6/h
    snap.weights.payback_max_hours = 48.0;
    snap.weights.pod_eviction = 760.0;
    assert!(disrupt(&snap, &cat, DisruptionStrategy::Milp)
        .actions
        .is_empty());
    snap.weights.pod_eviction = 560.0;
    assert_eq!(
        disrupt(&snap, &cat, DisruptionStrategy::Milp).actions.len(),
        1
    );
}

#[test]
fn a_consolidation_that_takes_room_held_for_returning_demand_is_refused_by_joiner_only() {
    let (snap, cat) = replaceable();
    let mut s = DisruptionSettings::new(parse_timestamp(NOW).unwrap());
    s.time_limit = Duration::from_secs(5);
    let free = consolidate(&snap, &cat, &s).expect("consolidate");
    assert_eq!(free.actions.len(), 1, "{:?}", free.blocked);
    // the 1-cpu replacement leaves under a cpu free where the 32-cpu node left 31: holding 8 cpu
    // for returning replicas refuses it
    s.held =
        joiner::domain::Resources::new().with("cpu", joiner::domain::Quantity::from_milli(8_000));
    let held = consolidate(&snap, &cat, &s).expect("consolidate");
    assert!(held.actions.is_empty(), "{:?}", held.actions);
    assert!(
        blocked_for(&held, "keeps room for workloads that fell and rose again"),
        "{:?}",
        held.blocked
    );
    s.strategy = DisruptionStrategy::Baseline;
    let karpenter = consolidate(&snap, &cat, &s).expect("consolidate");
    assert_eq!(karpenter.actions.len(), 1, "the baseline holds nothing");
}

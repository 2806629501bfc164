//! Disruption scenarios (fixtures/disruption/*.yaml): Karpenter v1's disruption test cases (ids D1-D14 refer to
//! karpenter-reference.md section 10.7), expiration, and three snapshots on which the MILP strategy must beat
//! Karpenter's own consolidation (`--strategy baseline`). Every test loads its fixture and the catalog named in
//! the fixture's `# catalog:` header, runs `joiner::disruption::consolidate` at a fixed clock
//! (2026-11-30T12:00:00Z, 5 s, 1 thread), checks the invariants every plan must satisfy (see
//! [`check_invariants`]) and then the scenario's expected outcome.
//!
//! Run with `cargo test --release --test disruption`.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use joiner::catalog::Catalog;
use joiner::disruption::timing::parse_timestamp;
use joiner::disruption::{
    consolidate, DisruptionPlan, DisruptionSettings, DisruptionStrategy, Reason,
};
use joiner::domain::ClusterSnapshot;
use joiner::snapshot::load_snapshot;

use common::{catalog_name, manifest_dir, CapacityType, EPS};

const NOW: &str = "2026-11-30T12:00:00Z";
fn fixture_path(name: &str) -> PathBuf {
    manifest_dir()
        .join("fixtures/disruption")
        .join(format!("{name}.yaml"))
}

/// The catalog a fixture names in its `# catalog: NAME` header line (`us-east-1` is the bundled one).
fn catalog_for(name: &str) -> Catalog {
    let text = std::fs::read_to_string(fixture_path(name)).expect("fixture readable");
    let cat = catalog_name(&text).unwrap_or_else(|| panic!("{name}: no `# catalog:` header"));
    if cat == "us-east-1" {
        return Catalog::bundled("us-east-1").expect("bundled us-east-1");
    }
    Catalog::from_file(
        &manifest_dir()
            .join("fixtures/catalogs")
            .join(format!("{cat}.json")),
    )
    .expect("catalog loads")
}

fn settings(strategy: DisruptionStrategy) -> DisruptionSettings {
    let mut s = DisruptionSettings::new(parse_timestamp(NOW).unwrap());
    s.strategy = strategy;
    s.time_limit = std::time::Duration::from_secs(5);
    s.threads = 1;
    s
}

struct Case {
    name: &'static str,
    snapshot: ClusterSnapshot,
    catalog: Catalog,
    plan: DisruptionPlan,
}

fn load(name: &'static str) -> (ClusterSnapshot, Catalog) {
    let snapshot = load_snapshot(&fixture_path(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
    (snapshot, catalog_for(name))
}

fn run_on(name: &'static str, snapshot: ClusterSnapshot, catalog: Catalog) -> Case {
    let plan = consolidate(&snapshot, &catalog, &settings(DisruptionStrategy::Milp))
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    let case = Case {
        name,
        snapshot,
        catalog,
        plan,
    };
    check_invariants(&case);
    case
}

fn run(name: &'static str) -> Case {
    let (snapshot, catalog) = load(name);
    run_on(name, snapshot, catalog)
}

fn summary(p: &DisruptionPlan) -> String {
    let mut s = format!(
        "cost {:.4} -> {:.4} (lb {:.4}, savings {:.4})\n",
        p.cost_before_per_hour, p.cost_after_per_hour, p.lower_bound, p.savings_per_hour
    );
    for a in &p.actions {
        let launch: Vec<String> = a
            .launch
            .iter()
            .map(|l| {
                format!(
                    "{}:{}@{}/{:?}${}",
                    l.id, l.instance_type, l.zone, l.capacity_type, l.price
                )
            })
            .collect();
        s += &format!(
            "  {:?} delete {:?} launch {:?} moves {}\n",
            a.reason,
            a.delete,
            launch,
            a.moves.len()
        );
    }
    for b in &p.blocked {
        s += &format!("  blocked {}: {}\n", b.node, b.reason);
    }
    s += &format!(
        "  solver: {} candidates {} classes {} vars {} rows {} gap {:?}\n",
        p.solver.status,
        p.solver.candidates,
        p.solver.pod_classes,
        p.solver.variables,
        p.solver.constraints,
        p.solver.mip_gap
    );
    for n in &p.solver.notes {
        s += &format!("  note: {n}\n");
    }
    s
}

/// What every plan must satisfy: cost after within [lower bound, cost before]; each reschedulable pod of a
/// deleted node has exactly one move, from that node, to a node launched by the same action or an existing
/// node that stays; moves only for pods of deleted nodes; no node deleted twice; savings add up; no launched
/// node has the instance type of a node deleted for Underutilized.
fn check_invariants(c: &Case) {
    let p = &c.plan;
    let ctx = format!("{}\n{}", c.name, summary(p));
    assert!(
        p.cost_after_per_hour >= p.lower_bound - EPS,
        "cost after below the lower bound: {ctx}"
    );
    assert!(
        (p.cost_before_per_hour - p.savings_per_hour - p.cost_after_per_hour).abs() < 1e-5,
        "{ctx}"
    );
    let sum: f64 = p.actions.iter().map(|a| a.savings_per_hour).sum();
    assert!((sum - p.savings_per_hour).abs() < 1e-5, "{ctx}");
    let deleted: Vec<&String> = p.actions.iter().flat_map(|a| &a.delete).collect();
    let deleted_set: BTreeSet<&String> = deleted.iter().copied().collect();
    assert_eq!(
        deleted.len(),
        deleted_set.len(),
        "a node deleted twice: {ctx}"
    );
    let node_names: BTreeSet<&String> = c.snapshot.nodes.iter().map(|n| &n.name).collect();
    for d in &deleted_set {
        assert!(
            node_names.contains(d),
            "deleted node {d} not in the snapshot: {ctx}"
        );
        assert!(
            !p.blocked.iter().any(|b| &&b.node == d),
            "{d} both deleted and blocked: {ctx}"
        );
    }
    let mut moves_of: BTreeMap<&str, usize> = BTreeMap::new();
    for a in &p.actions {
        let launch_ids: BTreeSet<&str> = a.launch.iter().map(|l| l.id.as_str()).collect();
        for m in &a.moves {
            *moves_of.entry(m.pod.as_str()).or_default() += 1;
            assert!(
                a.delete.contains(&m.from),
                "move {m:?} from a node its action does not delete: {ctx}"
            );
            let to_existing = node_names.contains(&m.to) && !deleted_set.contains(&m.to);
            assert!(
                launch_ids.contains(m.to.as_str()) || to_existing,
                "move {m:?} to nowhere: {ctx}"
            );
        }
        let placed: usize = a.launch.iter().map(|l| l.pods.len()).sum();
        assert!(
            placed <= a.moves.len(),
            "launched nodes hold pods that are not moved: {ctx}"
        );
    }
    for pod in &c.snapshot.pods {
        let on_deleted = pod
            .node_name
            .as_ref()
            .is_some_and(|n| deleted_set.contains(n));
        let n = moves_of.get(pod.key().as_str()).copied().unwrap_or(0);
        if on_deleted && pod.is_reschedulable() {
            assert_eq!(
                n,
                1,
                "pod {} of a deleted node must move exactly once: {ctx}",
                pod.key()
            );
        } else {
            assert_eq!(
                n,
                0,
                "pod {} is moved but its node stays (or it is not reschedulable): {ctx}",
                pod.key()
            );
        }
    }
    let underutilized_types: BTreeSet<String> = p
        .actions
        .iter()
        .filter(|a| a.reason == Reason::Underutilized)
        .flat_map(|a| &a.delete)
        .map(|n| instance_type(&c.snapshot, n))
        .collect();
    for l in p.actions.iter().flat_map(|a| &a.launch) {
        assert!(
            !underutilized_types.contains(&l.instance_type),
            "launches {} which an Underutilized action removes: {ctx}",
            l.instance_type
        );
        let price = c
            .catalog
            .instance_types
            .iter()
            .find(|t| t.name == l.instance_type)
            .unwrap_or_else(|| {
                panic!(
                    "launched type {} not in the catalog: {ctx}",
                    l.instance_type
                )
            })
            .offerings
            .iter()
            .find(|o| o.zone == l.zone && o.capacity_type == l.capacity_type)
            .map(|o| o.price);
        assert!(
            price.is_some_and(|x| (x - l.price).abs() < EPS),
            "launch {} priced {} but the catalog says {price:?}: {ctx}",
            l.id,
            l.price
        );
    }
}

fn instance_type(s: &ClusterSnapshot, node: &str) -> String {
    s.nodes
        .iter()
        .find(|n| n.name == node)
        .and_then(|n| n.labels.get("node.kubernetes.io/instance-type").cloned())
        .unwrap_or_default()
}

fn zone_of(s: &ClusterSnapshot, node: &str) -> String {
    s.nodes
        .iter()
        .find(|n| n.name == node)
        .and_then(|n| n.labels.get("topology.kubernetes.io/zone").cloned())
        .unwrap_or_default()
}

fn deleted(p: &DisruptionPlan) -> BTreeSet<String> {
    p.actions
        .iter()
        .flat_map(|a| a.delete.iter().cloned())
        .collect()
}

fn deleted_for(p: &DisruptionPlan, reason: Reason) -> BTreeSet<String> {
    p.actions
        .iter()
        .filter(|a| a.reason == reason)
        .flat_map(|a| a.delete.iter().cloned())
        .collect()
}

fn launches(p: &DisruptionPlan) -> Vec<&joiner::optimizer::NewNode> {
    p.actions.iter().flat_map(|a| &a.launch).collect()
}

fn blocked_reason<'a>(p: &'a DisruptionPlan, node: &str) -> Option<&'a str> {
    p.blocked
        .iter()
        .find(|b| b.node == node)
        .map(|b| b.reason.as_str())
}

fn set(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|s| s.to_string()).collect()
}

fn node_names(prefix_count: &[(usize, usize)]) -> BTreeSet<String> {
    prefix_count
        .iter()
        .map(|(a, b)| format!("ip-10-0-{a}-{b}.test"))
        .collect()
}

fn assert_no_action(c: &Case) {
    let p = &c.plan;
    assert!(
        p.actions.is_empty(),
        "{}: expected no action\n{}",
        c.name,
        summary(p)
    );
    assert!(p.savings_per_hour.abs() < EPS, "{}", c.name);
    assert!(
        (p.cost_after_per_hour - p.cost_before_per_hour).abs() < EPS,
        "{}",
        c.name
    );
}

// ------------------------------------------------------------------ D1: empty nodes and budgets

fn empty_nodes_with_budget(name: &'static str, expected: usize) {
    let c = run(name);
    let p = &c.plan;
    let ctx = format!("{name}\n{}", summary(p));
    let all: Vec<String> = (10..20).map(|i| format!("ip-10-0-1-{i}.test")).collect();
    let want: BTreeSet<String> = all.iter().take(expected).cloned().collect();
    assert_eq!(deleted(p), want, "{ctx}");
    assert_eq!(deleted_for(p, Reason::Empty), want, "{ctx}");
    assert!(launches(p).is_empty(), "{ctx}");
    assert_eq!(p.evictions(), 0, "{ctx}");
    if expected > 0 {
        assert_eq!(p.actions.len(), 1, "empty nodes go in one command: {ctx}");
    }
    assert!(
        (p.savings_per_hour - 0.4 * expected as f64).abs() < 1e-5,
        "{ctx}"
    );
    for n in all.iter().skip(expected) {
        let why = blocked_reason(p, n).unwrap_or_else(|| panic!("{n} not blocked: {ctx}"));
        assert!(
            why.contains("budget") && why.contains("Empty"),
            "{n}: {why}"
        );
    }
    let empty = p
        .budgets
        .iter()
        .find(|b| b.nodepool == "default" && b.reason == Reason::Empty)
        .expect("budget row");
    assert_eq!(
        (empty.allowed, empty.planned),
        (expected, expected),
        "{ctx}"
    );
}

#[test]
fn empty_nodes_respect_30_percent_budget() {
    empty_nodes_with_budget("empty-nodes-budget-30-percent", 3);
}

#[test]
fn empty_nodes_all_deleted_with_100_percent_budget() {
    empty_nodes_with_budget("empty-nodes-budget-100-percent", 10);
}

#[test]
fn empty_nodes_kept_with_0_percent_budget() {
    empty_nodes_with_budget("empty-nodes-budget-0-percent", 0);
}

// ------------------------------------------------------------------ D2: budget reasons and schedules

#[test]
fn empty_only_zero_budget_blocks_emptiness_but_not_underutilized() {
    let c = run("budget-reason-empty-zero");
    let p = &c.plan;
    let ctx = summary(p);
    let small = "ip-10-0-1-10.test";
    assert!(!deleted(p).contains(small), "{ctx}");
    let why = blocked_reason(p, small).unwrap_or_else(|| panic!("empty node not blocked: {ctx}"));
    assert!(why.contains("budget") && why.contains("Empty"), "{why}");
    assert_eq!(
        deleted_for(p, Reason::Underutilized),
        node_names(&[(2, 10), (3, 10)]),
        "{ctx}"
    );
    assert!(deleted_for(p, Reason::Empty).is_empty(), "{ctx}");
    assert!(p.savings_per_hour > 0.0, "{ctx}");
    let b = |r: Reason| {
        p.budgets
            .iter()
            .find(|b| b.nodepool == "default" && b.reason == r)
            .map(|b| b.allowed)
    };
    assert_eq!(b(Reason::Empty), Some(0), "{ctx}");
    assert_eq!(b(Reason::Underutilized), Some(3), "{ctx}");
}

#[test]
fn active_schedule_budget_with_zero_nodes_blocks() {
    let c = run("budget-schedule-active");
    assert_no_action(&c);
    for n in ["ip-10-0-1-10.test", "ip-10-0-2-10.test"] {
        let why = blocked_reason(&c.plan, n)
            .unwrap_or_else(|| panic!("{n} not blocked: {}", summary(&c.plan)));
        assert!(why.contains("budget"), "{n}: {why}");
    }
}

#[test]
fn inactive_schedule_budget_does_not_block() {
    let c = run("budget-schedule-inactive");
    let p = &c.plan;
    assert_eq!(
        deleted_for(p, Reason::Empty),
        node_names(&[(1, 10), (2, 10)]),
        "{}",
        summary(p)
    );
    assert!(launches(p).is_empty());
    assert!((p.savings_per_hour - 0.8).abs() < 1e-5, "{}", summary(p));
    assert!(p.blocked.is_empty(), "{}", summary(p));
}

// ------------------------------------------------------------------ D3 / D4: single node

#[test]
fn expensive_node_with_one_small_pod_is_replaced_by_one_cheaper_node() {
    let c = run("replace-expensive-node");
    let p = &c.plan;
    let ctx = summary(p);
    assert_eq!(p.actions.len(), 1, "{ctx}");
    let a = &p.actions[0];
    assert_eq!(a.reason, Reason::Underutilized, "{ctx}");
    assert_eq!(a.delete, ["ip-10-0-1-10.test"], "{ctx}");
    assert_eq!(a.launch.len(), 1, "{ctx}");
    let l = &a.launch[0];
    assert_ne!(l.instance_type, "it-32cpu-128gi", "{ctx}");
    assert_eq!(l.capacity_type, CapacityType::OnDemand, "{ctx}");
    assert!(l.price < 16.0, "{ctx}");
    assert_eq!(
        l.instance_type, "it-1cpu-1gi",
        "the cheapest type that holds the pod: {ctx}"
    );
    assert_eq!(a.moves.len(), 1);
    assert_eq!(a.moves[0].to, l.id, "{ctx}");
    assert!((p.savings_per_hour - 15.8).abs() < 1e-5, "{ctx}");
    assert!((p.cost_after_per_hour - 0.2).abs() < 1e-5, "{ctx}");
}

#[test]
fn no_action_when_only_more_expensive_on_demand_options_exist() {
    let c = run("no-cheaper-on-demand-option");
    assert_no_action(&c);
    assert!((c.plan.cost_before_per_hour - 1.2).abs() < EPS);
}

// ------------------------------------------------------------------ D6: PodDisruptionBudget

#[test]
fn pdb_with_zero_allowed_disruptions_blocks_its_node_only() {
    let c = run("pdb-blocks-one-node");
    let p = &c.plan;
    let ctx = summary(p);
    let why = blocked_reason(p, "ip-10-0-2-10.test")
        .unwrap_or_else(|| panic!("PDB node not blocked: {ctx}"));
    assert!(why.contains("pdb") && why.contains("default/db"), "{why}");
    assert_eq!(deleted(p), set(&["ip-10-0-1-10.test"]), "{ctx}");
    assert_eq!(
        deleted_for(p, Reason::Underutilized),
        set(&["ip-10-0-1-10.test"]),
        "{ctx}"
    );
    assert!(launches(p).is_empty(), "{ctx}");
    assert!(
        p.actions[0]
            .moves
            .iter()
            .all(|m| m.to == "ip-10-0-2-10.test"),
        "{ctx}"
    );
    assert!((p.savings_per_hour - 0.8).abs() < 1e-5, "{ctx}");
}

// ------------------------------------------------------------------ D7 / D8: multi-node

#[test]
fn three_expensive_nodes_become_one_cheaper_node() {
    let c = run("three-nodes-to-one");
    let p = &c.plan;
    let ctx = summary(p);
    assert_eq!(p.actions.len(), 1, "{ctx}");
    let a = &p.actions[0];
    assert_eq!(a.reason, Reason::Underutilized, "{ctx}");
    assert_eq!(
        a.delete.iter().cloned().collect::<BTreeSet<_>>(),
        node_names(&[(1, 10), (2, 10), (3, 10)]),
        "{ctx}"
    );
    assert_eq!(a.launch.len(), 1, "{ctx}");
    assert_ne!(a.launch[0].instance_type, "it-32cpu-128gi");
    assert_eq!(a.launch[0].capacity_type, CapacityType::OnDemand);
    assert_eq!(a.launch[0].pods.len(), 3, "{ctx}");
    assert!(
        (a.launch[0].price - 0.8).abs() < 1e-5,
        "cheapest holder of 3 CPU/3Gi is it-4cpu-4gi: {ctx}"
    );
    assert!((p.savings_per_hour - 47.2).abs() < 1e-5, "{ctx}");
}

#[test]
fn only_the_emptier_of_two_cheapest_nodes_is_deleted() {
    let c = run("delete-emptier-cheapest-node");
    let p = &c.plan;
    let ctx = summary(p);
    assert_eq!(deleted(p), set(&["ip-10-0-1-10.test"]), "{ctx}");
    assert!(
        launches(p).is_empty(),
        "no launch, in particular no small-instance-type: {ctx}"
    );
    assert_eq!(p.actions[0].moves.len(), 1);
    assert_eq!(p.actions[0].moves[0].to, "ip-10-0-2-10.test", "{ctx}");
    assert!((p.savings_per_hour - 0.4).abs() < 1e-5, "{ctx}");
}

// ------------------------------------------------------------------ D9 / D10: topology

#[test]
fn zonal_spread_is_kept_when_a_node_is_replaced() {
    let c = run("zone-spread-replacement");
    let p = &c.plan;
    let ctx = summary(p);
    assert_eq!(deleted(p), set(&["ip-10-0-2-10.test"]), "{ctx}");
    let l = launches(p);
    assert_eq!(l.len(), 1, "{ctx}");
    assert_eq!(l[0].zone, "test-zone-2", "{ctx}");
    assert_eq!(
        l[0].labels
            .get("topology.kubernetes.io/zone")
            .map(String::as_str),
        Some("test-zone-2"),
        "{ctx}"
    );
    assert!(l[0].price < 4.0, "{ctx}");
    // pods per zone once the plan is carried out
    let launch_zone: BTreeMap<&str, &str> =
        l.iter().map(|n| (n.id.as_str(), n.zone.as_str())).collect();
    let moved: BTreeMap<&str, &str> = p
        .actions
        .iter()
        .flat_map(|a| &a.moves)
        .map(|m| (m.pod.as_str(), m.to.as_str()))
        .collect();
    let mut per_zone: BTreeMap<String, usize> = BTreeMap::new();
    for pod in c
        .snapshot
        .pods
        .iter()
        .filter(|p| p.labels.get("app").map(String::as_str) == Some("web"))
    {
        let key = pod.key();
        let zone = match moved.get(key.as_str()) {
            Some(to) => launch_zone
                .get(to)
                .map(|z| z.to_string())
                .unwrap_or_else(|| zone_of(&c.snapshot, to)),
            None => zone_of(&c.snapshot, pod.node_name.as_deref().unwrap()),
        };
        *per_zone.entry(zone).or_default() += 1;
    }
    let want: BTreeMap<String, usize> = ["test-zone-1", "test-zone-2", "test-zone-3"]
        .iter()
        .map(|z| (z.to_string(), 1))
        .collect();
    assert_eq!(per_zone, want, "{ctx}");
    assert!(p.savings_per_hour > 0.0, "{ctx}");
}

/// Same fixture: Karpenter's single-node consolidation replaces the zone-2 node by the cheapest type that holds
/// the pod (it-1cpu-1gi, $0.20), saving $3.80/h.
#[test]
fn zonal_replacement_uses_the_cheapest_type_in_the_zone() {
    let c = run("zone-spread-replacement");
    let p = &c.plan;
    let ctx = summary(p);
    let l = launches(p);
    assert_eq!(l.len(), 1, "{ctx}");
    assert_eq!(
        (l[0].instance_type.as_str(), l[0].zone.as_str()),
        ("it-1cpu-1gi", "test-zone-2"),
        "{ctx}"
    );
    assert!((p.savings_per_hour - 3.8).abs() < 1e-5, "{ctx}");
    assert!((p.cost_after_per_hour - 0.6).abs() < 1e-5, "{ctx}");
}

#[test]
fn hostname_anti_affinity_on_cheapest_nodes_means_no_action() {
    let c = run("hostname-anti-affinity-no-action");
    assert_no_action(&c);
}

#[test]
fn preferred_anti_affinity_does_not_block_a_merge_the_way_required_anti_affinity_does() {
    // the D10 fixture with its required hostname anti-affinity made a weight-100 preference: three
    // db pods on one node pay 3 x $0.10/h at the default weight, less than the $0.80/h two nodes cost
    let (mut s, cat) = load("hostname-anti-affinity-no-action");
    for pod in &mut s.pods {
        let c = std::sync::Arc::make_mut(&mut std::sync::Arc::make_mut(pod).constraints);
        let terms = std::mem::take(&mut c.pod_anti_affinity);
        c.preferred_pod_anti_affinity = terms
            .into_iter()
            .map(|term| joiner::domain::Weighted { weight: 100, term })
            .collect();
    }
    let c = run_on("hostname-anti-affinity-no-action", s, cat);
    assert_eq!(deleted(&c.plan).len(), 2, "{}", summary(&c.plan));
    assert!(launches(&c.plan).is_empty(), "{}", summary(&c.plan));
}

// ------------------------------------------------------------------ D13 / D14

#[test]
fn daemonset_only_node_is_empty_and_deleted() {
    let c = run("daemonset-only-node-is-empty");
    let p = &c.plan;
    let ctx = summary(p);
    assert_eq!(deleted(p), set(&["ip-10-0-1-10.test"]), "{ctx}");
    assert_eq!(
        deleted_for(p, Reason::Empty),
        set(&["ip-10-0-1-10.test"]),
        "{ctx}"
    );
    assert!(launches(p).is_empty(), "{ctx}");
    assert_eq!(p.evictions(), 0, "DaemonSet pods are not moved: {ctx}");
    assert!((p.savings_per_hour - 0.4).abs() < 1e-5, "{ctx}");
}

#[test]
fn do_not_disrupt_on_pods_and_nodes_blocks_until_its_duration_elapses() {
    let c = run("do-not-disrupt");
    let p = &c.plan;
    let ctx = summary(p);
    for (n, words) in [
        (
            "ip-10-0-1-10.test",
            &["pod default/pinned-0", "do-not-disrupt"][..],
        ),
        ("ip-10-0-2-10.test", &["node", "do-not-disrupt"][..]),
        (
            "ip-10-0-4-10.test",
            &["pod default/cold-9a8b7-a1b2c", "do-not-disrupt"][..],
        ),
    ] {
        assert!(!deleted(p).contains(n), "{n}: {ctx}");
        let why = blocked_reason(p, n).unwrap_or_else(|| panic!("{n} not blocked: {ctx}"));
        for w in words {
            assert!(why.contains(w), "{n}: {why:?} lacks {w:?}");
        }
    }
    assert!(
        blocked_reason(p, "ip-10-0-3-10.test").is_none(),
        "elapsed do-not-disrupt still blocks: {ctx}"
    );
    assert_eq!(
        deleted_for(p, Reason::Underutilized),
        node_names(&[(3, 10), (5, 10)]),
        "{ctx}"
    );
    assert!(p.savings_per_hour > 0.0, "{ctx}");
}

// ------------------------------------------------------------------ D12: drift

#[test]
fn drifted_node_is_replaced_by_several_smaller_nodes() {
    let c = run("drift-replace-one-with-three");
    let p = &c.plan;
    let ctx = summary(p);
    assert_eq!(p.actions.len(), 1, "{ctx}");
    let a = &p.actions[0];
    assert_eq!(a.reason, Reason::Drifted, "{ctx}");
    assert_eq!(a.delete, ["ip-10-0-1-10.test"], "{ctx}");
    assert_eq!(a.launch.len(), 3, "{ctx}");
    for l in &a.launch {
        assert_eq!(l.instance_type, "it-3cpu-6gi", "{ctx}");
        assert_eq!(l.capacity_type, CapacityType::OnDemand, "{ctx}");
        assert_eq!(l.pods.len(), 1, "{ctx}");
    }
    let targets: BTreeSet<&str> = a.moves.iter().map(|m| m.to.as_str()).collect();
    assert_eq!(
        targets.len(),
        3,
        "each worker on its own replacement: {ctx}"
    );
    assert!(
        (a.savings_per_hour - (2.4 - 2.7)).abs() < 1e-5,
        "drift has no price check: {ctx}"
    );
}

// ------------------------------------------------------------------ expiration

#[test]
fn expired_node_is_deleted_even_when_budgets_are_zero() {
    let c = run("expired-node-ignores-budget");
    let p = &c.plan;
    let ctx = summary(p);
    assert_eq!(deleted(p), set(&["ip-10-0-1-10.test"]), "{ctx}");
    assert_eq!(
        deleted_for(p, Reason::Expired),
        set(&["ip-10-0-1-10.test"]),
        "{ctx}"
    );
    assert!(launches(p).is_empty(), "{ctx}");
    assert_eq!(p.actions[0].moves.len(), 1, "{ctx}");
    assert_eq!(p.actions[0].moves[0].to, "ip-10-0-2-10.test", "{ctx}");
    let why = blocked_reason(p, "ip-10-0-2-10.test")
        .unwrap_or_else(|| panic!("young node not blocked: {ctx}"));
    assert!(why.contains("budget"), "{why}");
    assert!((p.savings_per_hour - 0.8).abs() < 1e-5, "{ctx}");
}

// ------------------------------------------------------------------ joiner against Karpenter's consolidation

/// Hourly price of every node of `s`.
fn cluster_price(s: &ClusterSnapshot, catalog: &Catalog) -> f64 {
    s.nodes
        .iter()
        .map(|n| joiner::optimizer::problem::node_price(n, catalog))
        .sum()
}

/// The baseline's end state: Karpenter's consolidation pass repeated, each plan carried out, until it finds nothing.
fn baseline_end_cost(c: &Case) -> (f64, usize) {
    let (end, plans) = joiner::disruption::baseline::run_to_fixpoint(
        &c.snapshot,
        &c.catalog,
        &settings(DisruptionStrategy::Baseline),
        50,
    )
    .unwrap_or_else(|e| panic!("{}: baseline: {e}", c.name));
    (cluster_price(&end, &c.catalog), plans.len())
}

fn assert_beats_baseline(c: &Case) -> f64 {
    let p = &c.plan;
    let (baseline, rounds) = baseline_end_cost(c);
    assert!(
        p.cost_after_per_hour < baseline - 1e-4,
        "{}: milp {:.4} is not below the baseline's end state {baseline:.4} after {rounds} rounds\n{}",
        c.name,
        p.cost_after_per_hour,
        summary(p)
    );
    assert!(
        baseline < p.cost_before_per_hour,
        "{}: the baseline should improve too ({baseline:.4})",
        c.name
    );
    eprintln!(
        "{}: before {:.4}, milp {:.4}, baseline {baseline:.4} ({rounds} rounds), lower bound {:.4}",
        c.name, p.cost_before_per_hour, p.cost_after_per_hour, p.lower_bound
    );
    baseline
}

#[test]
fn oversized_node_splits_into_two_cheaper_nodes_and_beats_baseline() {
    let c = run("beat-baseline-split-oversized-node");
    let p = &c.plan;
    let ctx = summary(p);
    assert_eq!(
        deleted_for(p, Reason::Underutilized),
        set(&["ip-10-0-1-10.ec2.internal"]),
        "{ctx}"
    );
    assert_eq!(launches(p).len(), 2, "{ctx}");
    assert!(
        launches(p)
            .iter()
            .all(|l| l.capacity_type == CapacityType::OnDemand && l.instance_type != "m5.4xlarge"),
        "{ctx}"
    );
    assert_beats_baseline(&c);
}

#[test]
fn cpu_optimized_nodes_move_to_memory_richer_types_and_beat_baseline() {
    let c = run("beat-baseline-cpu-nodes-to-memory-types");
    let p = &c.plan;
    let ctx = summary(p);
    let all: BTreeSet<String> = (1..=4)
        .map(|i| format!("ip-10-0-{i}-20.ec2.internal"))
        .collect();
    assert_eq!(deleted(p), all, "{ctx}");
    for l in launches(p) {
        let t = c
            .catalog
            .instance_types
            .iter()
            .find(|t| t.name == l.instance_type)
            .unwrap();
        assert!(
            !l.instance_type.starts_with('c'),
            "compute-optimized launch {}: {ctx}",
            l.instance_type
        );
        assert!(
            t.memory_mib >= 4096 * u64::from(t.vcpu),
            "{} has < 4 GiB per vCPU: {ctx}",
            l.instance_type
        );
    }
    assert_beats_baseline(&c);
}

#[test]
fn fifty_nodes_pack_into_twenty_or_fewer_and_beat_baseline() {
    let c = run("beat-baseline-fifty-nodes-into-twenty");
    let p = &c.plan;
    let ctx = summary(p);
    assert!(p.deleted_nodes() >= 30, "{ctx}");
    assert!(p.cost_after_per_hour <= 1.92 + EPS, "{ctx}");
    assert_beats_baseline(&c);
}

/// The fingerprint covers what the plan acts on: a change on a deleted node (a new pod there) changes
/// it, a change on a node the plan does not touch does not, and the same inputs give the same value.
#[test]
fn fingerprint_changes_only_with_the_inputs_the_plan_acts_on() {
    let (snapshot, catalog) = load("three-nodes-to-one");
    let plan = run_on("three-nodes-to-one", snapshot.clone(), catalog.clone()).plan;
    assert_eq!(plan.fingerprint.len(), 64, "sha-256 hex");
    let again = consolidate(&snapshot, &catalog, &settings(DisruptionStrategy::Milp)).unwrap();
    assert_eq!(
        plan.fingerprint, again.fingerprint,
        "same inputs, same fingerprint"
    );
    let deleted = plan.actions[0].delete[0].clone();
    let mut touched = snapshot.clone();
    let mut extra = touched
        .pods
        .iter()
        .find(|p| p.node_name.as_deref() == Some(deleted.as_str()))
        .expect("a pod on the deleted node")
        .clone();
    std::sync::Arc::make_mut(&mut extra).name.push_str("-new");
    touched.pods.push(extra);
    assert_ne!(
        joiner::disruption::fingerprint::of(&touched, &catalog, &plan),
        plan.fingerprint,
        "a new pod on a deleted node"
    );
    let mut elsewhere = snapshot.clone();
    elsewhere.nodes.push(
        joiner::domain::Node {
            name: "unrelated".into(),
            ..(*snapshot.nodes[0]).clone()
        }
        .into(),
    );
    assert_eq!(
        joiner::disruption::fingerprint::of(&elsewhere, &catalog, &plan),
        plan.fingerprint,
        "a node the plan does not touch"
    );
}

/// Applying a plan gives a cluster with the deleted nodes gone, every moved pod bound where the plan
/// said and the launched nodes registered; consolidating that cluster again finds nothing to save.
#[test]
fn applying_a_plan_leaves_nothing_more_to_consolidate() {
    let (snapshot, catalog) = load("beat-baseline-fifty-nodes-into-twenty");
    let plan = run_on(
        "beat-baseline-fifty-nodes-into-twenty",
        snapshot.clone(),
        catalog.clone(),
    )
    .plan;
    let after =
        joiner::disruption::edit::with_disruption(&snapshot, &catalog, &plan, "applied-", NOW);
    let deleted = deleted(&plan);
    assert!(after.nodes.iter().all(|n| !deleted.contains(&n.name)));
    assert_eq!(
        after.nodes.len(),
        snapshot.nodes.len() - deleted.len() + launches(&plan).len()
    );
    assert!(
        after
            .pods
            .iter()
            .filter(|p| !p.is_daemonset_pod())
            .all(|p| p.node_name.is_some()),
        "every pod bound"
    );
    let second = consolidate(&after, &catalog, &settings(DisruptionStrategy::Milp)).unwrap();
    assert!(
        second.savings_per_hour < 0.05 * plan.savings_per_hour,
        "second pass still saves {}: {}",
        second.savings_per_hour,
        summary(&second)
    );
}

/// A fixture with its first NodePool restricted to spot and every node relabelled spot.
fn spot_only(name: &'static str) -> (ClusterSnapshot, Catalog) {
    let (mut snapshot, catalog) = load(name);
    for r in &mut snapshot.nodepools[0].requirements {
        if r.key == "karpenter.sh/capacity-type" {
            *r = joiner::domain::Requirement::in_values("karpenter.sh/capacity-type", &["spot"]);
        }
    }
    for n in &mut snapshot.nodes {
        std::sync::Arc::make_mut(n)
            .labels
            .insert("karpenter.sh/capacity-type".into(), "spot".into());
    }
    (snapshot, catalog)
}

/// Karpenter D5: a spot node is replaced by spot capacity only when enough cheaper spot instance types
/// could be launched (`spot_to_spot_min_types`, Karpenter's 15). The replace-expensive-node fixture is
/// turned into a spot-only pool with a spot node.
#[test]
fn spot_to_spot_replacement_needs_enough_cheaper_spot_types() {
    let (snapshot, catalog) = spot_only("replace-expensive-node");
    let node = snapshot.nodes[0].name.clone();
    let decide = |min_types: usize| {
        let mut s = settings(DisruptionStrategy::Milp);
        s.spot_to_spot_min_types = min_types;
        consolidate(&snapshot, &catalog, &s).unwrap()
    };
    let flexible = decide(1);
    assert_eq!(deleted(&flexible), set(&[&node]), "{}", summary(&flexible));
    assert!(
        launches(&flexible)
            .iter()
            .all(|l| l.capacity_type == CapacityType::Spot),
        "{}",
        summary(&flexible)
    );
    let rigid = decide(1000);
    assert!(deleted(&rigid).is_empty(), "{}", summary(&rigid));
    assert!(
        blocked_reason(&rigid, &node).is_some_and(|r| r.contains("spot-to-spot")),
        "{}",
        summary(&rigid)
    );
}

/// The decision does not depend on the order objects come in: the snapshot with its nodes, pods and
/// NodeClaims reversed gets a plan of the same cost after and the same deleted nodes.
#[test]
fn plans_do_not_depend_on_object_order() {
    for name in [
        "three-nodes-to-one",
        "beat-baseline-cpu-nodes-to-memory-types",
        "pdb-blocks-one-node",
        "empty-nodes-budget-30-percent",
        "zone-spread-replacement",
    ] {
        let (snapshot, catalog) = load(name);
        let plan = run_on(name, snapshot.clone(), catalog.clone()).plan;
        let mut reversed = snapshot;
        reversed.nodes.reverse();
        reversed.pods.reverse();
        reversed.node_claims.reverse();
        let other = run_on(name, reversed, catalog).plan;
        assert!(
            (plan.cost_after_per_hour - other.cost_after_per_hour).abs() < 1e-6,
            "{name}: {} vs {}",
            summary(&plan),
            summary(&other)
        );
        assert_eq!(deleted(&plan), deleted(&other), "{name}");
    }
}

/// A cluster with nothing pending is planned without calling the solver on an empty model: the
/// provisioning plan is empty and certified, not a solver failure.
#[test]
fn nothing_pending_is_an_empty_optimal_plan() {
    let (snapshot, catalog) = load("three-nodes-to-one");
    assert!(snapshot.pending_pods().next().is_none());
    let plan = joiner::optimizer::solve(
        &snapshot,
        &catalog,
        &joiner::optimizer::SolveSettings::default(),
    )
    .unwrap();
    assert!(plan.nodes.is_empty() && plan.unschedulable.is_empty());
    assert_eq!(
        plan.solver.status,
        joiner::optimizer::PlanStatus::Optimal,
        "{:?}",
        plan.solver
    );
}

/// Karpenter asks spot-to-spot flexibility of single-node consolidation only: its multi-node pass
/// replaces several spot nodes with one on price alone. The three-nodes-to-one fixture made
/// spot-only (three of the dearest type, one small pod each) still merges under a 1,000-type
/// flexibility rule, for both strategies; the same rule still holds a single spot node (test above).
#[test]
fn replacing_several_spot_nodes_is_not_held_by_the_flexibility_rule() {
    let (snapshot, catalog) = spot_only("three-nodes-to-one");
    for strategy in [DisruptionStrategy::Milp, DisruptionStrategy::Baseline] {
        let mut s = settings(strategy);
        s.spot_to_spot_min_types = 1000;
        let plan = consolidate(&snapshot, &catalog, &s).unwrap();
        // all three go and one cheap spot node replaces them (deleting two and keeping a $16/h node is dearer)
        assert_eq!(deleted(&plan).len(), 3, "{strategy:?}: {}", summary(&plan));
        assert_eq!(launches(&plan).len(), 1, "{strategy:?}: {}", summary(&plan));
        assert!(
            plan.blocked
                .iter()
                .all(|b| !b.reason.contains("spot-to-spot")),
            "{strategy:?}: {}",
            summary(&plan)
        );
    }
}

/// Karpenter's SpotToSpotConsolidation feature gate, off: no consolidation replaces spot nodes with
/// spot capacity, single-node (the spot-only replace-expensive-node fixture) or multi-node (the
/// spot-only three-nodes-to-one), for both strategies; the single node is held with the gate named.
/// The same fixtures are replaced with spot capacity with the gate on (the two tests above).
#[test]
fn spot_to_spot_consolidation_switched_off_replaces_no_spot_node_with_spot() {
    for name in ["replace-expensive-node", "three-nodes-to-one"] {
        let (snapshot, catalog) = spot_only(name);
        for strategy in [DisruptionStrategy::Milp, DisruptionStrategy::Baseline] {
            let mut s = settings(strategy);
            s.spot_to_spot_min_types = 1;
            s.spot_to_spot = false;
            let plan = consolidate(&snapshot, &catalog, &s).unwrap();
            assert!(
                launches(&plan).is_empty(),
                "{name} {strategy:?}: {}",
                summary(&plan)
            );
            if name == "replace-expensive-node" {
                let node = &snapshot.nodes[0].name;
                assert!(
                    deleted(&plan).is_empty(),
                    "{strategy:?}: {}",
                    summary(&plan)
                );
                // the model's refusal is a blocked node; Karpenter's rules note it, as Karpenter
                // logs it
                let named = |r: &str| r.contains("SpotToSpotConsolidation") && r.contains(node);
                assert!(
                    blocked_reason(&plan, node)
                        .is_some_and(|r| r.contains("SpotToSpotConsolidation"))
                        || plan.solver.notes.iter().any(|n| named(n)),
                    "{strategy:?}: {}",
                    summary(&plan)
                );
            }
        }
    }
}

/// With almost no time, HiGHS stops the selection model inside its presolve, before any answer of
/// its own; the start the model is given (every candidate the budgets let go removed, their pods
/// covered by new-node patterns) still answers, so the decision stays the model's own instead of
/// falling back to Karpenter's rules, and the scale-in is consolidated.
#[test]
fn a_selection_stopped_before_its_first_answer_still_answers_with_its_start() {
    let catalog = Catalog::bundled("us-east-1").expect("bundled us-east-1");
    let snapshot = joiner::scalein::scale_in(150, 1500, 0.6, 1, &catalog);
    let mut s = settings(DisruptionStrategy::Milp);
    s.time_limit = std::time::Duration::from_millis(200);
    let plan = consolidate(&snapshot, &catalog, &s).unwrap();
    assert_ne!(
        plan.solver.status,
        joiner::disruption::DisruptionStatus::FallbackBaseline,
        "{:?}",
        plan.solver
    );
    assert!(deleted(&plan).len() >= 100, "{}", summary(&plan));
    assert!(
        plan.cost_after_per_hour < 0.5 * plan.cost_before_per_hour,
        "{}",
        summary(&plan)
    );
}

// ------------------------------------------------------------------ consolidationPolicy: Balanced

/// The cluster of `balanced-keeps-a-costly-move` with its pool's policy and threshold replaced.
fn with_policy(
    snapshot: &ClusterSnapshot,
    policy: joiner::domain::ConsolidationPolicy,
    threshold: Option<f64>,
) -> ClusterSnapshot {
    let mut s = snapshot.clone();
    for pool in &mut s.nodepools {
        pool.disruption.consolidation_policy = policy;
        pool.disruption.consolidation_threshold = threshold;
    }
    s
}

/// Balanced at k = 0.5 keeps both nodes: deleting either saves too little of the pool's cost for
/// its share of the pool's evictions. The same cluster under WhenEmptyOrUnderutilized, and under
/// Balanced at the default k = 2, deletes the emptier node, with both strategies.
#[test]
fn balanced_keeps_a_move_whose_savings_do_not_pay_for_its_evictions() {
    use joiner::domain::ConsolidationPolicy::{Balanced, WhenEmptyOrUnderutilized};
    let name = "balanced-keeps-a-costly-move";
    let (snapshot, catalog) = load(name);
    assert_eq!(
        snapshot.nodepools[0].disruption.balanced_threshold(),
        Some(0.5)
    );
    for strategy in [DisruptionStrategy::Milp, DisruptionStrategy::Baseline] {
        let decide = |s: &ClusterSnapshot| {
            let plan = consolidate(s, &catalog, &settings(strategy))
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            (deleted(&plan), summary(&plan))
        };
        let (gone, ctx) = decide(&snapshot);
        assert!(gone.is_empty(), "{strategy:?} under Balanced: {ctx}");
        for (policy, k) in [(WhenEmptyOrUnderutilized, None), (Balanced, None)] {
            let (gone, ctx) = decide(&with_policy(&snapshot, policy, k));
            assert_eq!(
                gone,
                set(&["ip-10-0-1-10.test"]),
                "{strategy:?} under {policy}: {ctx}"
            );
        }
    }
    assert_no_action(&run(name));
}

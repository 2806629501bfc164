//! `joiner simulate` on the small scenarios of fixtures/scenarios/simulate/: a run whose figures are
//! computed by hand, capacity shortages and spot interruptions handled without losing a pod,
//! consolidation after a scale-down, pods no offering can hold, determinism, and scenario errors
//! that name the field.

use std::path::PathBuf;

use joiner::sim::{self, RunReport, Scenario, SimError, SimStrategy};

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures/scenarios/simulate")
}

fn scenario(name: &str) -> Scenario {
    Scenario::load(&dir().join(format!("{name}.yaml"))).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn run(sc: &Scenario, strategy: SimStrategy) -> RunReport {
    sim::run(sc, strategy, sc.seed, &mut |_| {})
        .unwrap_or_else(|e| panic!("{} {strategy:?}: {e}", sc.name))
}

const BOTH: [SimStrategy; 2] = [SimStrategy::Milp, SimStrategy::Greedy];

/// The header of one-pod-hand-computed.yaml walks through these numbers.
#[test]
fn one_pod_run_matches_the_hand_computation() {
    let sc = scenario("one-pod-hand-computed");
    for strategy in BOTH {
        let r = run(&sc, strategy);
        let s = &r.summary;
        let expected = 0.20 * (1815.0 - 1.0) / 3600.0;
        assert!(
            (s.total_cost - expected).abs() < 1e-9,
            "{strategy:?}: cost {} vs {expected}",
            s.total_cost
        );
        assert_eq!(
            (
                s.instances_launched,
                s.instances_terminated,
                s.peak_nodes,
                s.final_nodes
            ),
            (1, 1, 1, 0),
            "{strategy:?}"
        );
        assert_eq!(
            (s.pending_seconds.p50, s.pending_seconds.p99),
            (41.0, 41.0),
            "{strategy:?}"
        );
        assert_eq!(
            (s.pods_started, s.pods_evicted, s.disruptions_executed),
            (1, 0, 1),
            "{strategy:?}"
        );
        let at = |h: f64| {
            r.series
                .iter()
                .find(|x| (x.hours - h).abs() < 1e-9)
                .unwrap_or_else(|| panic!("no sample at {h} h"))
        };
        assert_eq!(
            (at(0.25).nodes, at(0.25).cost_per_hour),
            (1, 0.2),
            "{strategy:?}: a quarter in"
        );
        assert_eq!(
            (at(0.75).nodes, at(0.75).cost_per_hour),
            (0, 0.0),
            "{strategy:?}: after the scale-in"
        );
    }
}

#[test]
fn ice_and_a_spot_interruption_lose_no_pod() {
    let sc = scenario("spot-interruption-and-ice");
    for strategy in BOTH {
        let s = run(&sc, strategy).summary;
        assert!(
            s.ice_events >= 1,
            "{strategy:?}: the cheapest spot type had no capacity: {s:?}"
        );
        assert_eq!(s.interruptions_handled, 1, "{strategy:?}: {s:?}");
        assert!(
            s.pods_evicted >= 1,
            "{strategy:?}: the interrupted node's pods were evicted: {s:?}"
        );
        assert!(
            (1..=s.pods_evicted).contains(&s.pods_evicted_by_interruption),
            "{strategy:?}: the interrupted node's pods count as evicted by interruption: {s:?}"
        );
        assert!(
            s.instances_launched >= 2,
            "{strategy:?}: capacity replaced the interrupted node: {s:?}"
        );
        assert_eq!(s.pods_started, 4, "{strategy:?}: {s:?}");
        assert_eq!(
            (s.pending_at_end, s.unschedulable_pods),
            (0, 0),
            "{strategy:?}: every pod runs at the end: {s:?}"
        );
    }
}

#[test]
fn a_scale_down_is_consolidated_and_only_the_impossible_pod_stays_pending() {
    let sc = scenario("scale-down");
    for strategy in BOTH {
        let r = run(&sc, strategy);
        let s = &r.summary;
        let peak_cost = r.series.iter().map(|x| x.cost_per_hour).fold(0.0, f64::max);
        let last = r.series.last().unwrap();
        assert!(
            last.cost_per_hour < 0.5 * peak_cost,
            "{strategy:?}: {} $/h at the end, {peak_cost} at the peak",
            last.cost_per_hour
        );
        assert!(s.final_nodes < s.peak_nodes, "{strategy:?}: {s:?}");
        assert!(s.disruptions_executed >= 1, "{strategy:?}: {s:?}");
        // no spot interruption here: every eviction is consolidation's
        assert_eq!(s.pods_evicted_by_interruption, 0, "{strategy:?}: {s:?}");
        // the 1000-CPU pod fits no offering; the ten batch pods all ran
        assert_eq!(
            (s.unschedulable_pods, s.pending_at_end),
            (1, 0),
            "{strategy:?}: {s:?}"
        );
        assert_eq!(s.pods_started, 10, "{strategy:?}: {s:?}");
        assert_eq!(last.pending_pods, 1, "{strategy:?}");
    }
}

/// Nodes launched in one step register together, so a hard zone spread sees every new zone before
/// kube-scheduler's stand-in binds: four pods a zone, never one zone filled first.
#[test]
fn nodes_launched_together_keep_a_hard_zone_spread() {
    let sc = scenario("spread-nodes-register-together");
    for strategy in BOTH {
        let (r, kept) = sim::run_keeping(&sc, strategy, sc.seed, Some(60.0), &mut |_| {})
            .unwrap_or_else(|e| panic!("{strategy:?}: {e}"));
        assert_eq!(r.summary.pending_at_end, 0, "{strategy:?}: {:?}", r.summary);
        let (_, end) = kept.last().expect("snapshots");
        let mut per_zone = std::collections::BTreeMap::<&str, usize>::new();
        for pod in end
            .pods
            .iter()
            .filter(|p| p.labels.get("app").map(String::as_str) == Some("web"))
        {
            let node = pod.node_name.as_deref().expect("bound");
            let node = end.nodes.iter().find(|n| n.name == node).expect("node");
            let zone = node.labels.get(joiner::domain::labels::ZONE).expect("zone");
            *per_zone.entry(zone.as_str()).or_default() += 1;
        }
        assert_eq!(
            per_zone.values().copied().collect::<Vec<_>>(),
            vec![4, 4, 4],
            "{strategy:?}: pods per zone {per_zone:?}"
        );
    }
}

/// Same scenario and seed, same run: every figure but the solver's wall-clock seconds.
#[test]
fn runs_are_deterministic() {
    let mut sc = scenario("spot-interruption-and-ice");
    sc.interruption_rate_scale = 50_000.0;
    for strategy in BOTH {
        let strip = |mut r: RunReport| {
            r.wall_seconds = 0.0;
            r.summary.solver_seconds = Default::default();
            r
        };
        let a = strip(run(&sc, strategy));
        let b = strip(run(&sc, strategy));
        assert!(
            a.summary.interruptions_handled > 1,
            "{strategy:?}: the raised rate interrupts: {:?}",
            a.summary
        );
        assert_eq!(a, b, "{strategy:?}");
    }
}

fn parse_err(text: &str) -> String {
    match Scenario::parse(text, "test.yaml", Some(&dir())) {
        Err(SimError::Scenario(m)) => m,
        Err(e) => panic!("unexpected error kind: {e}"),
        Ok(_) => panic!("accepted: {text}"),
    }
}

const POOL: &str = "manifests:\n- {apiVersion: karpenter.sh/v1, kind: NodePool, metadata: {name: d}, spec: {template: {spec: {requirements: []}}}}\n";

#[test]
fn bad_scenarios_name_the_field() {
    let m = parse_err(&format!("name: x\nduration: 1h\n{POOL}workloads:\n- name: w\n  template: {{spec: {{containers: []}}}}\n  replicaz: {{constant: 1}}\n"));
    assert!(m.contains("workloads[0]") && m.contains("replicaz"), "{m}");
    let m = parse_err(&format!("name: x\nduration: 5 parsecs\n{POOL}"));
    assert!(m.contains("duration"), "{m}");
    let m = parse_err(&format!("name: x\nduration: 0s\n{POOL}"));
    assert!(
        m.contains("duration") && m.contains("must be positive"),
        "{m}"
    );
    let m = parse_err(&format!("name: x\nduration: 1h\n{POOL}workloads:\n- name: w\n  template: {{spec: {{containers: []}}}}\n"));
    assert!(m.contains("workloads[0].replicas"), "{m}");
    let m = parse_err(&format!("name: x\nduration: 1h\n{POOL}workloads:\n- name: w\n  template: {{spec: {{containers: []}}}}\n  replicas: {{diurnal: {{min: 5, max: 2, peak: 1h}}}}\n"));
    assert!(
        m.contains("workloads[0].replicas.diurnal") && m.contains("min 5 is above max 2"),
        "{m}"
    );
    let m = parse_err(&format!(
        "name: x\nduration: 1h\n{POOL}events:\n- {{kind: meteor, at: 1h}}\n"
    ));
    assert!(m.contains("events[0].kind") && m.contains("meteor"), "{m}");
    let twice = "- name: w\n  template: {spec: {containers: []}}\n  replicas: {constant: 1}\n";
    let m = parse_err(&format!(
        "name: x\nduration: 1h\n{POOL}workloads:\n{twice}{twice}"
    ));
    assert!(
        m.contains("workloads[1].name") && m.contains("named twice"),
        "{m}"
    );
    let m = parse_err("name: x\nduration: 1h\n");
    assert!(m.contains("no NodePool"), "{m}");
    let m = parse_err(&format!(
        "name: x\nduration: 1h\ncatalog: nowhere.json\n{POOL}"
    ));
    assert!(m.contains("catalog"), "{m}");
}

#[test]
fn the_bundled_default_scenario_reads() {
    let sc = Scenario::bundled_default().unwrap();
    assert_eq!(sc.name, "default");
    assert!(
        sc.workloads.len() >= 4 && !sc.events.is_empty(),
        "{} workloads",
        sc.workloads.len()
    );
}

/// A scenario built on a cluster dump: its nodes run and are billed from the start, its bound pods
/// stay, and its pending pods are scheduled on free room first, then on new capacity.
#[test]
fn a_cluster_dump_is_the_starting_point() {
    let sc = scenario("from-dump");
    assert_eq!(sc.cluster.nodes.len(), 2);
    for strategy in BOTH {
        let r = run(&sc, strategy);
        let s = &r.summary;
        assert_eq!(
            (r.series[0].nodes, r.series[0].cost_per_hour),
            (2, 1.6),
            "{strategy:?}: the dump's two nodes are billed at once"
        );
        assert_eq!(s.instances_launched, 1, "{strategy:?}: {s:?}");
        assert_eq!(s.pods_started, 3, "{strategy:?}: {s:?}");
        assert_eq!(
            (s.pending_seconds.p50, s.pending_seconds.p99),
            (0.0, 41.0),
            "{strategy:?}: {s:?}"
        );
        assert_eq!(s.pending_at_end, 0, "{strategy:?}: {s:?}");
        assert!(
            s.total_cost >= 0.8 * 0.5 + 0.4 * (1800.0 - 1.0) / 3600.0 - 1e-9,
            "{strategy:?}: at least the busy node and the new one all along: {s:?}"
        );
    }
}

//! Topology spread's `nodeAffinityPolicy` and `nodeTaintsPolicy`, on the snapshots in
//! `fixtures/topology-policies/` (each file's header computes the expected plans by hand). Every
//! snapshot is solved by the real binary with both strategies, as `tests/scenarios.rs` does, and each
//! plan must pass joiner's own feasibility check. plan-check is not run: it counts every node for every
//! spread, whatever the policies, so it does not model them.
//!
//! A file is written with one policy; the other is the same file with the policy added to each pending
//! pod's spread, which is how the two answers are compared.

#[allow(unused_imports)] // the shared harness re-exports more than this file uses
mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::*;
use joiner::catalog::Catalog;
use joiner::verify::{verify, Violation};

/// The spread as the fixtures write it on every pending pod.
const SPREAD: &str = "whenUnsatisfiable: DoNotSchedule, labelSelector: {matchLabels: {app: web}}}";

/// One strategy's plan for a snapshot, with joiner's own check's verdict.
struct Solved {
    label: &'static str,
    plan: Plan,
    verdict: Result<(), Vec<Violation>>,
}

/// `fixtures/topology-policies/<name>.yaml`, with `policy` (e.g. `nodeTaintsPolicy: Honor`) added
/// to each pending pod's spread when given, written to a file of its own.
fn snapshot(name: &str, policy: Option<&str>) -> PathBuf {
    let path = manifest_dir().join(format!("fixtures/topology-policies/{name}.yaml"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{name}: {e}"));
    let Some(policy) = policy else {
        return path;
    };
    assert!(
        text.contains(SPREAD),
        "{name}: no spread to add {policy} to"
    );
    let changed = text.replace(SPREAD, &SPREAD.replace("}}}", &format!("}}}}, {policy}}}")));
    let dir = std::env::temp_dir().join(format!("joiner-topology-policies-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let file = policy.split(':').next().unwrap_or("policy");
    let out = dir.join(format!("{name}.{file}.yaml"));
    std::fs::write(&out, changed).expect("snapshot written");
    out
}

fn catalog() -> PathBuf {
    manifest_dir().join("fixtures/catalogs/test-f0.json")
}

/// Solves `snapshot` with both strategies and checks both plans with joiner's own check.
fn solve_both(snapshot: &Path) -> [Solved; 2] {
    [Strategy::Milp, Strategy::Greedy].map(|strategy| solve(snapshot, strategy))
}

fn solve(snapshot: &Path, strategy: Strategy) -> Solved {
    let label = match strategy {
        Strategy::Milp => "milp",
        Strategy::Greedy => "greedy",
    };
    let out = Command::new(env!("CARGO_BIN_EXE_joiner"))
        .arg("solve")
        .arg("--snapshot")
        .arg(snapshot)
        .arg("--catalog")
        .arg(catalog())
        .args([
            "--strategy",
            label,
            "--output",
            "json",
            "--time-limit",
            "20",
        ])
        .args(["--threads", "1"])
        .env_remove("JOINER_GAP")
        .output()
        .expect("the joiner binary runs");
    assert!(
        matches!(out.status.code(), Some(0) | Some(3)),
        "{} ({label}): joiner solve failed ({}):\n{}",
        snapshot.display(),
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let plan: Plan = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("{label}: plan JSON does not parse: {e}\n{stdout}"));
    Solved {
        label,
        verdict: check(snapshot, &plan),
        plan,
    }
}

/// joiner's own feasibility check of `plan` against `snapshot`.
fn check(snapshot: &Path, plan: &Plan) -> Result<(), Vec<Violation>> {
    let parsed = joiner::snapshot::load_snapshot(snapshot).expect("snapshot parses");
    let catalog = Catalog::from_file(&catalog()).expect("catalog parses");
    verify(&parsed, &catalog, plan)
}

fn assert_feasible(s: &Solved) {
    if let Err(v) = &s.verdict {
        let list: Vec<String> = v.iter().map(|v| format!("  {v}")).collect();
        panic!(
            "{}: joiner's own check rejects the plan:\n{}\n{}",
            s.label,
            list.join("\n"),
            summary(&s.plan)
        );
    }
}

/// Every pod placed, `zones` pods per zone (the web pods), at `cost`.
fn assert_all_placed(s: &Solved, zones: &[(&str, usize)], cost: f64) {
    assert_feasible(s);
    let p = &s.plan;
    assert!(p.unschedulable.is_empty(), "{}\n{}", s.label, summary(p));
    let want: std::collections::BTreeMap<String, usize> =
        zones.iter().map(|&(z, n)| (z.to_string(), n)).collect();
    assert_eq!(
        per_zone(p, "default/web-"),
        want,
        "{}\n{}",
        s.label,
        summary(p)
    );
    assert_cost(s.label, p, cost);
}

/// 2 + 2 placed in test-zone-1 and test-zone-2, 2 unschedulable for topology, at $0.80.
fn assert_two_per_zone_and_two_left(s: &Solved) {
    assert_feasible(s);
    let p = &s.plan;
    assert_eq!(
        per_zone(p, "default/web-"),
        [
            ("test-zone-1".to_string(), 2),
            ("test-zone-2".to_string(), 2)
        ]
        .into(),
        "{}\n{}",
        s.label,
        summary(p)
    );
    let reasons: Vec<UnschedulableReason> = unschedulable(p).into_values().collect();
    assert_eq!(
        reasons,
        [UnschedulableReason::Topology; 2],
        "{}\n{}",
        s.label,
        summary(p)
    );
    assert_cost(s.label, p, 0.80);
}

#[test]
fn honoured_affinity_leaves_out_the_zone_the_pods_selector_rejects() {
    for s in solve_both(&snapshot("affinity-zone-selector", None)) {
        assert_all_placed(&s, &[("test-zone-1", 3), ("test-zone-2", 3)], 0.80);
    }
}

#[test]
fn ignored_affinity_counts_the_rejected_zone_and_caps_the_others() {
    let ignore = snapshot("affinity-zone-selector", Some("nodeAffinityPolicy: Ignore"));
    for s in solve_both(&ignore) {
        assert_two_per_zone_and_two_left(&s);
    }
}

#[test]
fn the_checker_rejects_a_plan_for_honor_under_ignore() {
    // the 3 + 3 split is feasible under Honor and breaks the skew once test-zone-3's pod counts
    let honor = solve(&snapshot("affinity-zone-selector", None), Strategy::Milp);
    assert_feasible(&honor);
    let ignore = snapshot("affinity-zone-selector", Some("nodeAffinityPolicy: Ignore"));
    let violations = check(&ignore, &honor.plan).expect_err("3 + 3 breaks the skew under Ignore");
    assert!(
        violations
            .iter()
            .all(|v| matches!(v, Violation::Spread { min: 1, .. })),
        "{violations:?}"
    );
}

#[test]
fn honoured_affinity_does_not_count_pods_on_another_pools_node() {
    for s in solve_both(&snapshot("affinity-pool-selector", None)) {
        assert_feasible(&s);
        let p = &s.plan;
        assert!(p.unschedulable.is_empty(), "{}\n{}", s.label, summary(p));
        let mut counts: Vec<usize> = per_zone(p, "default/web-").into_values().collect();
        counts.sort_unstable();
        assert_eq!(counts, [1, 1, 2], "{}\n{}", s.label, summary(p));
        assert_cost(s.label, p, 1.20);
    }
}

#[test]
fn ignored_affinity_counts_pods_on_another_pools_node() {
    let ignore = snapshot("affinity-pool-selector", Some("nodeAffinityPolicy: Ignore"));
    for s in solve_both(&ignore) {
        assert_all_placed(&s, &[("test-zone-2", 2), ("test-zone-3", 2)], 0.80);
    }
}

#[test]
fn ignored_taints_count_the_tainted_nodes_domain() {
    for s in solve_both(&snapshot("tainted-domain", None)) {
        assert_two_per_zone_and_two_left(&s);
    }
}

#[test]
fn honoured_taints_leave_out_the_tainted_nodes_domain() {
    let honor = snapshot("tainted-domain", Some("nodeTaintsPolicy: Honor"));
    for s in solve_both(&honor) {
        assert_all_placed(&s, &[("test-zone-1", 3), ("test-zone-2", 3)], 0.80);
    }
}

#[test]
fn an_unknown_policy_is_an_error_naming_the_field() {
    let bad = snapshot("tainted-domain", Some("nodeTaintsPolicy: Sometimes"));
    let err = joiner::snapshot::load_snapshot(&bad)
        .expect_err("Sometimes is no policy")
        .to_string();
    assert!(
        err.contains("topologySpreadConstraints[0].nodeTaintsPolicy") && err.contains("Sometimes"),
        "{err}"
    );
}

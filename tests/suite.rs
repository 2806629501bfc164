//! `joiner simulate --suite DIR` through the binary, on a tiny suite: a short scenario (spot
//! shortages and an interruption, one hour) and a malformed one. The good one reports the three
//! strategies, every figure, the ratios and the re-packing bound; the bad one is named with its
//! field and the exit code says a file failed; two runs print the same JSON apart from wall-clock
//! fields.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures")
}

/// A fresh directory holding `good.yaml` (spot-interruption-and-ice with its catalog path made
/// absolute) and `bad.yaml` (a workload field misspelt).
fn suite_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("joiner-suite-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let text = std::fs::read_to_string(
        fixtures().join("scenarios/simulate/spot-interruption-and-ice.yaml"),
    )
    .unwrap();
    let catalog = fixtures().join("catalogs/test-assorted.json");
    let good = text.replace(
        "catalog: ../../catalogs/test-assorted.json",
        &format!("catalog: {}", catalog.display()),
    );
    assert_ne!(good, text, "the fixture names its catalog as expected");
    std::fs::write(dir.join("good.yaml"), good).unwrap();
    let bad = text.replacen("replicas:", "replicaz:", 1);
    std::fs::write(dir.join("bad.yaml"), bad).unwrap();
    dir
}

/// Runs the suite; returns the exit code, the JSON on stdout and stderr.
fn run_suite(dir: &Path) -> (Option<i32>, Value, String) {
    run_suite_with(dir, &[])
}

fn run_suite_with(dir: &Path, extra: &[&str]) -> (Option<i32>, Value, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_joiner"))
        .args(["simulate", "--suite"])
        .arg(dir)
        .args(extra)
        .arg("--out")
        .arg(dir.join("out"))
        .args(["-o", "json"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let json: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("stdout is not JSON ({e}); stderr: {stderr}"));
    (out.status.code(), json, stderr)
}

const FIGURES: [&str; 9] = [
    "total_cost",
    "pending_pod_hours",
    "served_pod_hours",
    "cost_per_served_pod_hour",
    "pods_evicted",
    "instances_launched",
    "peak_nodes",
    "short_lived_nodes",
    "pending_seconds",
];

#[test]
fn a_suite_runs_the_good_file_with_three_strategies_and_names_the_bad_one() {
    let dir = suite_dir("report");
    let (code, json, stderr) = run_suite(&dir);
    assert_eq!(
        code,
        Some(1),
        "a failed file fails the command; stderr: {stderr}"
    );
    let failed = json["failed"].as_array().unwrap();
    assert_eq!(failed.len(), 1, "{json}");
    assert!(failed[0]["file"].as_str().unwrap().ends_with("bad.yaml"));
    let error = failed[0]["error"].as_str().unwrap();
    assert!(
        error.contains("bad.yaml") && error.contains("workloads[0].replicaz"),
        "{error}"
    );
    assert!(stderr.contains("1 of 2 scenario files failed"), "{stderr}");

    let days = json["scenarios"].as_array().unwrap();
    assert_eq!(days.len(), 1);
    let day = &days[0];
    assert_eq!(day["scenario"], "spot-interruption-and-ice");
    let runs = day["runs"].as_array().unwrap();
    let names: Vec<&str> = runs
        .iter()
        .map(|r| r["strategy"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["joiner", "karpenter", "karpenter-balanced"]);
    for r in runs {
        let s = &r["summary"];
        for f in FIGURES {
            assert!(!s[f].is_null(), "{} has no {f}: {s}", r["strategy"]);
        }
        assert!(s["pending_seconds"]["p95"].is_number() && s["pending_seconds"]["p99"].is_number());
        assert!(s["total_cost"].as_f64().unwrap() > 0.0);
        assert!(s["served_pod_hours"].as_f64().unwrap() > 0.0);
        let per = s["total_cost"].as_f64().unwrap() / s["served_pod_hours"].as_f64().unwrap();
        assert!((s["cost_per_served_pod_hour"].as_f64().unwrap() - per).abs() < 1e-9);
    }
    let ratios = day["ratios"].as_array().unwrap();
    let against: Vec<&str> = ratios
        .iter()
        .map(|r| r["strategy"].as_str().unwrap())
        .collect();
    assert_eq!(against, ["joiner", "karpenter-balanced"]);
    let cost = |i: usize| runs[i]["summary"]["total_cost"].as_f64().unwrap();
    assert!((ratios[0]["total_cost"].as_f64().unwrap() - cost(0) / cost(1)).abs() < 1e-9);

    // hourly samples of the bound over the hour: at 0 h and at 1 h
    let bound = day["bound"].as_array().unwrap();
    let hours: Vec<f64> = bound.iter().map(|b| b["hours"].as_f64().unwrap()).collect();
    assert_eq!(hours, [0.0, 1.0]);
    // the bound is taken on the pods running in joiner's run: its cost rate is never below it
    for b in bound {
        let at = b["hours"].as_f64().unwrap();
        let lower = b["cost_per_hour"]
            .as_f64()
            .expect("the bound's solve succeeds");
        let sample = runs[0]["series"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["hours"].as_f64() == Some(at))
            .unwrap_or_else(|| panic!("no sample at {at} h"));
        let rate = sample["cost_per_hour"].as_f64().unwrap();
        assert!(
            rate >= lower - 1e-9,
            "at {at} h: {rate} $/h is below the bound {lower}"
        );
    }
    assert!(
        bound.iter().any(|b| b["pods"].as_u64() > Some(0)),
        "some sample has running pods: {bound:?}"
    );
    let chart = std::fs::read_to_string(dir.join("out/good.svg")).unwrap();
    for label in ["re-pack lower bound", "joiner", "karpenter-balanced"] {
        assert!(chart.contains(label), "{label}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The JSON without the fields measured on the wall clock.
fn without_wall_clock(mut v: Value) -> Value {
    fn strip(v: &mut Value) {
        match v {
            Value::Object(m) => {
                m.remove("wall_seconds");
                m.remove("bound_wall_seconds");
                m.remove("solver_seconds");
                m.values_mut().for_each(strip);
            }
            Value::Array(a) => a.iter_mut().for_each(strip),
            _ => {}
        }
    }
    strip(&mut v);
    v
}

#[test]
fn suite_runs_are_deterministic() {
    let dir = suite_dir("twice");
    let (_, first, _) = run_suite(&dir);
    let (_, second, _) = run_suite(&dir);
    assert!(
        first["scenarios"][0]["runs"][0]["summary"]["solves"]
            .as_u64()
            .unwrap()
            > 0
    );
    assert_eq!(without_wall_clock(first), without_wall_clock(second));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `--seeds` runs each file once per seed, charts each, and sums joiner's ratios up over the seeds:
/// the median and the worst agree with the per-seed runs.
#[test]
fn a_suite_over_seeds_sums_up_each_scenario() {
    let dir = suite_dir("seeds");
    std::fs::remove_file(dir.join("bad.yaml")).unwrap();
    let (code, json, stderr) = run_suite_with(&dir, &["--seeds", "3-5"]);
    assert_eq!(code, Some(0), "{stderr}");
    let days = json["scenarios"].as_array().unwrap();
    let seeds: Vec<u64> = days.iter().map(|d| d["seed"].as_u64().unwrap()).collect();
    assert_eq!(seeds, [3, 4, 5]);
    for s in seeds {
        assert!(
            dir.join(format!("out/good-seed{s}.svg")).exists(),
            "seed {s}"
        );
    }
    let over = json["over_seeds"].as_array().unwrap();
    assert_eq!(over.len(), 1, "{json}");
    assert_eq!(over[0]["seeds"], serde_json::json!([3, 4, 5]));
    let mut launches: Vec<f64> = days
        .iter()
        .map(|d| {
            let n = |i: usize| {
                d["runs"][i]["summary"]["instances_launched"]
                    .as_f64()
                    .unwrap()
            };
            n(0) / n(1)
        })
        .collect();
    launches.sort_by(f64::total_cmp);
    let spread = &over[0]["instances_launched"];
    assert_eq!(spread["median"].as_f64(), Some(launches[1]), "{spread}");
    assert_eq!(spread["worst"].as_f64(), Some(launches[2]), "{spread}");
    std::fs::remove_dir_all(&dir).unwrap();
}

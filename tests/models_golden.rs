//! Golden tests over models/, the MILP dumps of the reference scenarios written by
//! `scripts/dump-models.sh` (`joiner solve-dump` per scenario into `models/<scenario>.{lp,mps,json}`).
//!
//! - `every_scenario_has_a_dump`: each scenario in fixtures/scenarios has its three files in models/, and
//!   models/ holds nothing for a scenario that no longer exists.
//! - `dumps_reproduce`: re-running the script's solve-dump command writes the committed JSON again, except
//!   for wall-clock `seconds` fields. A difference means the optimizer's answer or model changed: check it
//!   is intended, then run `scripts/dump-models.sh` and commit models/.
//! - `mps_optimum_matches_recorded_objective`: HiGHS alone, reading the committed `.mps`, finds the
//!   integer program's optimum the JSON records for it (`model.mip_objective`; until solve-dump writes that
//!   field, the value rebuilt from the plan, see `recorded_objective`).
//!
//! models/ is regenerated with `scripts/dump-models.sh`; this test re-runs that script's solve-dump
//! arguments (its `DUMP_ARGS` line) with the binary cargo built for the test.

#[allow(unused_imports)] // the shared harness re-exports more than this file uses
mod common;

use std::ffi::{c_void, CString};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use common::{catalog_name, manifest_dir, scenario_names, scenarios_dir};

fn models_dir() -> PathBuf {
    manifest_dir().join("models")
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}

fn read_json(path: &Path) -> Value {
    serde_json::from_str(&read(path))
        .unwrap_or_else(|e| panic!("{} is not JSON: {e}", path.display()))
}

/// The solve-dump arguments of scripts/dump-models.sh (its `DUMP_ARGS=(...)` line), so this test re-runs
/// exactly the command that wrote the committed dumps.
fn dump_args() -> Vec<String> {
    let script = manifest_dir().join("scripts/dump-models.sh");
    let text = read(&script);
    let inner = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("DUMP_ARGS=(")?.strip_suffix(')'))
        .unwrap_or_else(|| panic!("{} has no one-line `DUMP_ARGS=(...)`", script.display()));
    inner.split_whitespace().map(str::to_string).collect()
}

/// The catalog file a scenario names in its `# catalog: NAME` header.
fn catalog_of(name: &str) -> PathBuf {
    let snapshot = scenarios_dir().join(format!("{name}.yaml"));
    let cat = catalog_name(&read(&snapshot))
        .unwrap_or_else(|| panic!("scenario {name} has no `# catalog: NAME` header line"));
    let path = manifest_dir().join(format!("fixtures/catalogs/{cat}.json"));
    assert!(
        path.is_file(),
        "scenario {name}: catalog {} does not exist",
        path.display()
    );
    path
}

/// Scenarios with a committed `models/<name>.json`.
fn dumped_scenarios() -> Vec<String> {
    let names: Vec<String> = scenario_names()
        .into_iter()
        .filter(|n| models_dir().join(format!("{n}.json")).is_file())
        .collect();
    assert!(
        !names.is_empty(),
        "models/ holds no scenario dump; run scripts/dump-models.sh"
    );
    names
}

/// Runs `joiner solve-dump` on a scenario the way scripts/dump-models.sh does, writing `<out>.{lp,mps,json}`.
fn solve_dump(name: &str, out: &Path) -> Result<(), String> {
    let result = Command::new(env!("CARGO_BIN_EXE_joiner"))
        .arg("solve-dump")
        .arg("--snapshot")
        .arg(scenarios_dir().join(format!("{name}.yaml")))
        .arg("--catalog")
        .arg(catalog_of(name))
        .args(dump_args())
        .arg("--out")
        .arg(out)
        .env_remove("JOINER_SNAPSHOT")
        .env_remove("JOINER_CATALOG")
        .env_remove("JOINER_REGION")
        .env_remove("JOINER_TIME_LIMIT")
        .env_remove("JOINER_GAP")
        .env_remove("JOINER_THREADS")
        .output()
        .map_err(|e| format!("cannot run joiner: {e}"))?;
    if !result.status.success() {
        return Err(format!(
            "joiner solve-dump failed ({}):\n{}",
            result.status,
            String::from_utf8_lossy(&result.stderr)
        ));
    }
    Ok(())
}

// ------------------------------------------------------------------ (c) models/ is complete

#[test]
fn every_scenario_has_a_dump() {
    let scenarios = scenario_names();
    assert!(
        !scenarios.is_empty(),
        "fixtures/scenarios holds no scenario"
    );
    let mut problems = Vec::new();
    for name in &scenarios {
        let json = models_dir().join(format!("{name}.json"));
        if !json.is_file() {
            problems.push(format!("{name}: models/{name}.json is missing"));
            continue;
        }
        // solve-dump writes no .lp/.mps when there was no integer program (JSON `model: null`)
        if read_json(&json)["model"].is_null() {
            continue;
        }
        for ext in ["lp", "mps"] {
            if !models_dir().join(format!("{name}.{ext}")).is_file() {
                problems.push(format!("{name}: models/{name}.{ext} is missing"));
            }
        }
    }
    if let Ok(entries) = std::fs::read_dir(models_dir()) {
        for entry in entries.flatten() {
            let path = entry.path();
            let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("");
            let stem = path
                .file_stem()
                .and_then(|s| s.to_str())
                .unwrap_or("")
                .to_string();
            if ["json", "lp", "mps"].contains(&ext) && !scenarios.contains(&stem) {
                problems.push(format!(
                    "models/{stem}.{ext} has no scenario fixtures/scenarios/{stem}.yaml"
                ));
            }
        }
    }
    assert!(
        problems.is_empty(),
        "models/ is out of step with fixtures/scenarios (run scripts/dump-models.sh):\n  {}",
        problems.join("\n  ")
    );
}

// ------------------------------------------------------------------ (a) dumps reproduce

/// Drops every `seconds` field (wall-clock time, e.g. `plan.solver.seconds`) at any depth.
fn without_wall_clock(v: &mut Value) {
    match v {
        Value::Object(map) => {
            map.remove("seconds");
            map.values_mut().for_each(without_wall_clock);
        }
        Value::Array(items) => items.iter_mut().for_each(without_wall_clock),
        _ => {}
    }
}

fn short(v: &Value) -> String {
    let s = v.to_string();
    if s.chars().count() > 160 {
        format!("{}...", s.chars().take(160).collect::<String>())
    } else {
        s
    }
}

/// Differences between two JSON values, one line per path: `path: committed -> new`.
fn json_diff(path: &str, old: &Value, new: &Value, out: &mut Vec<String>) {
    match (old, new) {
        (Value::Object(a), Value::Object(b)) => {
            for (k, va) in a {
                let p = format!("{path}.{k}");
                match b.get(k) {
                    Some(vb) => json_diff(&p, va, vb, out),
                    None => out.push(format!("{p}: {} -> (absent)", short(va))),
                }
            }
            for (k, vb) in b.iter().filter(|(k, _)| !a.contains_key(*k)) {
                out.push(format!("{path}.{k}: (absent) -> {}", short(vb)));
            }
        }
        (Value::Array(a), Value::Array(b)) => {
            if a.len() != b.len() {
                out.push(format!("{path}: {} items -> {} items", a.len(), b.len()));
            }
            for (i, (va, vb)) in a.iter().zip(b).enumerate() {
                json_diff(&format!("{path}[{i}]"), va, vb, out);
            }
            for (i, va) in a.iter().enumerate().skip(b.len()) {
                out.push(format!("{path}[{i}]: {} -> (absent)", short(va)));
            }
            for (i, vb) in b.iter().enumerate().skip(a.len()) {
                out.push(format!("{path}[{i}]: (absent) -> {}", short(vb)));
            }
        }
        _ if old != new => out.push(format!("{path}: {} -> {}", short(old), short(new))),
        _ => {}
    }
}

#[test]
fn dumps_reproduce() {
    let dir = std::env::temp_dir().join(format!("joiner-models-golden-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let names = dumped_scenarios();
    let mut report = String::new();
    for name in &names {
        let out = dir.join(name);
        if let Err(e) = solve_dump(name, &out) {
            let _ = writeln!(report, "{name}: {e}");
            continue;
        }
        let mut committed = read_json(&models_dir().join(format!("{name}.json")));
        let mut fresh = read_json(&out.with_extension("json"));
        without_wall_clock(&mut committed);
        without_wall_clock(&mut fresh);
        let mut lines = Vec::new();
        json_diff("", &committed, &fresh, &mut lines);
        if !lines.is_empty() {
            let _ = writeln!(
                report,
                "models/{name}.json (committed -> now), {} differences:",
                lines.len()
            );
            for l in lines.iter().take(40) {
                let _ = writeln!(report, "  {l}");
            }
            if lines.len() > 40 {
                let _ = writeln!(report, "  ... {} more", lines.len() - 40);
            }
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        report.is_empty(),
        "solve-dump no longer reproduces the committed models/ (wall-clock `seconds` ignored). If the change is \
         intended, run scripts/dump-models.sh and commit models/.\n{report}"
    );
}

// ------------------------------------------------------------------ (b) the .mps optimum

/// A HiGHS instance through the C API, destroyed on drop.
struct Highs(*mut c_void);

impl Drop for Highs {
    fn drop(&mut self) {
        // SAFETY: the pointer came from Highs_create and is destroyed once
        unsafe { highs_sys::Highs_destroy(self.0) }
    }
}

fn c_string(s: &str) -> CString {
    CString::new(s).expect("no NUL in the string")
}

/// The optimum HiGHS finds for the model file on its own: quiet, solved to gap 0 (the dumps are made
/// with `--gap 0`, so both solves prove the same optimum).
fn highs_optimum(path: &Path) -> Result<f64, String> {
    // SAFETY: every call gets the live instance created here and valid NUL-terminated strings
    unsafe {
        let h = Highs(highs_sys::Highs_create());
        if h.0.is_null() {
            return Err("Highs_create returned null".into());
        }
        highs_sys::Highs_setBoolOptionValue(h.0, c_string("output_flag").as_ptr(), 0);
        highs_sys::Highs_setDoubleOptionValue(h.0, c_string("mip_rel_gap").as_ptr(), 0.0);
        highs_sys::Highs_setDoubleOptionValue(h.0, c_string("time_limit").as_ptr(), 300.0);
        let file = c_string(&path.display().to_string());
        if highs_sys::Highs_readModel(h.0, file.as_ptr()) == highs_sys::STATUS_ERROR {
            return Err("Highs_readModel failed".into());
        }
        if highs_sys::Highs_run(h.0) == highs_sys::STATUS_ERROR {
            return Err("Highs_run failed".into());
        }
        let status = highs_sys::Highs_getModelStatus(h.0);
        if status != highs_sys::MODEL_STATUS_OPTIMAL {
            return Err(format!(
                "HiGHS model status {status}, not optimal ({})",
                highs_sys::MODEL_STATUS_OPTIMAL
            ));
        }
        Ok(highs_sys::Highs_getObjectiveValue(h.0))
    }
}

const PLAN_DERIVED: &str =
    "plan.objective + unschedulablePod x unplaced model pods, as model.mip_objective is absent";

/// The integer program's objective the JSON records, and where it comes from.
///
/// `model.mip_objective` is HiGHS's objective for the integer program solve-dump wrote. Until solve-dump
/// records it, the value is rebuilt from the plan: `plan.objective` (node costs with spot risk, plus
/// preference penalties) plus the `unschedulablePod` weight for each pod of the model's classes the plan
/// leaves unplaced. That equals the program's optimum only when the plan is HiGHS's integer answer
/// replayed unchanged and no ScheduleAnyway skew is penalised; the message says which value was used.
fn recorded_objective(name: &str, json: &Value) -> Result<(f64, &'static str), String> {
    if let Some(v) = json["model"].get("mip_objective") {
        return v
            .as_f64()
            .map(|v| (v, "model.mip_objective"))
            .ok_or_else(|| format!("model.mip_objective is {v}, not a number"));
    }
    let plan = &json["plan"];
    let objective = plan["objective"]
        .as_f64()
        .ok_or("plan.objective is not a number")?;
    let count = |v: &Value| v.as_array().map_or(0, |a| a.len());
    let placed: usize = plan["nodes"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|n| count(&n["pods"]))
        .sum::<usize>()
        + plan["existing"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|e| count(&e["pods"]))
            .sum::<usize>();
    let in_model: u64 = json["model"]["pod_classes"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c["pods"].as_u64())
        .sum();
    let snapshot = joiner::snapshot::load_snapshot(&scenarios_dir().join(format!("{name}.yaml")))
        .map_err(|e| format!("reading the scenario: {e}"))?;
    let unplaced = (in_model as f64 - placed as f64).max(0.0);
    Ok((
        objective + unplaced * snapshot.weights.unschedulable_pod,
        PLAN_DERIVED,
    ))
}

#[test]
fn mps_optimum_matches_recorded_objective() {
    let mut failures = Vec::new();
    let names = dumped_scenarios();
    for name in names.iter() {
        let json = read_json(&models_dir().join(format!("{name}.json")));
        // the plan's status certifies the plan against the lower bound; what HiGHS proved about the
        // integer program it was given is the model's own status
        let status = json["model"]["mip_status"].as_str().unwrap_or("?");
        if json["model"].is_null() {
            failures.push(format!(
                "{name}: the dump holds no integer program (solver status {status})"
            ));
            continue;
        }
        if status != "optimal" {
            // a time-limited dump records no proven optimum, and is not reproducible either
            failures.push(format!("{name}: the dump's integer solve ended {status}, not optimal; raise the time limit in DUMP_ARGS"));
            continue;
        }
        let mps = models_dir().join(format!("{name}.mps"));
        let optimum = match highs_optimum(&mps) {
            Ok(v) => v,
            Err(e) => {
                failures.push(format!("{name}: {}: {e}", mps.display()));
                continue;
            }
        };
        let (recorded, source) = match recorded_objective(name, &json) {
            Ok(r) => r,
            Err(e) => {
                failures.push(format!("{name}: no recorded objective: {e}"));
                continue;
            }
        };
        // plan objectives are rounded to 6 decimals; HiGHS's own tolerances are far below that
        if (optimum - recorded).abs() > 2e-6 * recorded.abs().max(1.0) {
            let notes = json["plan"]["solver"]["notes"].to_string();
            let hint = if source == PLAN_DERIVED {
                "; the plan joiner kept is not HiGHS's integer answer (the replay rejected it or another candidate won)"
            } else {
                ""
            };
            failures.push(format!("{name}: .mps optimum {optimum} != {recorded} ({source}; solver notes {notes}){hint}"));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} dumps: HiGHS's optimum of the .mps is not the objective the JSON records:\n  {}",
        failures.len(),
        names.len(),
        failures.join("\n  ")
    );
}

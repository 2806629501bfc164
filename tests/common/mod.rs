//! Harness for the reference scenarios in `fixtures/scenarios/`: runs the real `joiner` binary with both
//! strategies, parses the JSON plans, runs the independent checker `plan-check` on every plan, and offers
//! small queries (where did a pod go, pods per zone, ...) for the per-scenario expectations.
//!
//! Each scenario file names its catalog in its header (`# catalog: test-f0` -> `fixtures/catalogs/test-f0.json`).
//! plan-check is found at `../shared/tools/plan-check` beside the repository, or at `$JOINER_PLAN_CHECK`;
//! it runs under `$JOINER_PYTHON` (default `python3`, which needs PyYAML). A missing checker fails the test.

#![allow(dead_code)]

mod plan_text;
pub use plan_text::summary;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

pub use joiner::catalog::CapacityType;
use joiner::optimizer::plan::NewNode;
pub use joiner::optimizer::{Plan, Strategy, UnschedulableReason};

/// Prices in the fixtures have at most 4 decimals; plans round to 6.
pub const EPS: f64 = 1e-6;

pub fn manifest_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

pub fn scenarios_dir() -> PathBuf {
    manifest_dir().join("fixtures/scenarios")
}

/// Names (file stems) of every scenario file.
pub fn scenario_names() -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(scenarios_dir())
        .expect("fixtures/scenarios is readable")
        .filter_map(|e| {
            let p = e.ok()?.path();
            if p.extension()? != "yaml" {
                return None;
            }
            Some(p.file_stem()?.to_string_lossy().into_owned())
        })
        .collect();
    names.sort();
    names
}

/// The catalog a scenario names in its `# catalog: NAME` header line.
pub fn catalog_name(scenario_text: &str) -> Option<String> {
    scenario_text
        .lines()
        .take_while(|l| l.starts_with('#') || l.trim().is_empty())
        .find_map(|l| l.strip_prefix("# catalog:"))
        .map(|s| s.trim().to_string())
}

/// plan-check: `$JOINER_PLAN_CHECK`, else `../shared/tools/plan-check` beside the repository.
pub fn plan_check_path() -> PathBuf {
    let path = match std::env::var_os("JOINER_PLAN_CHECK") {
        Some(p) => PathBuf::from(p),
        None => manifest_dir().join("../shared/tools/plan-check"),
    };
    assert!(
        path.is_file(),
        "plan-check not found at {} (set JOINER_PLAN_CHECK to its path; CI clones the repository with shared/ beside it). \
         The scenario tests verify every plan with it and cannot pass without it.",
        path.display()
    );
    path
}

pub fn python() -> String {
    std::env::var("JOINER_PYTHON").unwrap_or_else(|_| "python3".to_string())
}

/// One strategy's plan for a scenario and plan-check's verdict on it.
pub struct Solved {
    pub strategy: Strategy,
    pub plan: Plan,
    pub plan_file: PathBuf,
    pub check_ok: bool,
    pub check_output: String,
}

impl Solved {
    pub fn label(&self) -> &'static str {
        match self.strategy {
            Strategy::Milp => "milp",
            Strategy::Greedy => "greedy",
        }
    }
}

/// Both plans for one scenario.
pub struct Outcome {
    pub name: String,
    pub snapshot: PathBuf,
    pub catalog: PathBuf,
    pub milp: Solved,
    pub greedy: Solved,
}

/// Runs a scenario with both strategies and plan-check, and asserts what every scenario must satisfy:
/// both plans pass plan-check, and the MILP places at least as many pods as greedy and, placing as many,
/// costs no more.
pub fn scenario(name: &str) -> Outcome {
    let o = Outcome::run(name);
    o.assert_plan_check();
    o.assert_milp_not_worse();
    o
}

impl Outcome {
    /// Solves with both strategies and runs plan-check on both plans, asserting nothing about them.
    pub fn run(name: &str) -> Outcome {
        let checker = plan_check_path();
        let snapshot = scenarios_dir().join(format!("{name}.yaml"));
        let text = std::fs::read_to_string(&snapshot)
            .unwrap_or_else(|e| panic!("scenario {}: {e}", snapshot.display()));
        let cat = catalog_name(&text)
            .unwrap_or_else(|| panic!("scenario {name} has no `# catalog: NAME` header line"));
        let catalog = manifest_dir().join(format!("fixtures/catalogs/{cat}.json"));
        assert!(
            catalog.is_file(),
            "scenario {name}: catalog {} does not exist",
            catalog.display()
        );
        let milp = solve(name, &snapshot, &catalog, Strategy::Milp, &checker);
        let greedy = solve(name, &snapshot, &catalog, Strategy::Greedy, &checker);
        Outcome {
            name: name.to_string(),
            snapshot,
            catalog,
            milp,
            greedy,
        }
    }

    pub fn both(&self) -> [&Solved; 2] {
        [&self.milp, &self.greedy]
    }

    pub fn assert_plan_check(&self) {
        for s in self.both() {
            assert!(
                s.check_ok,
                "{} ({}): plan-check rejects the plan {}:\n{}\nplan:\n{}",
                self.name,
                s.label(),
                s.plan_file.display(),
                s.check_output,
                summary(&s.plan)
            );
        }
    }

    pub fn assert_milp_not_worse(&self) {
        let (m, g) = (&self.milp.plan, &self.greedy.plan);
        let (pm, pg) = (placed_count(m), placed_count(g));
        assert!(
            pm >= pg,
            "{}: milp places {pm} pods, greedy {pg}\nmilp:\n{}\ngreedy:\n{}",
            self.name,
            summary(m),
            summary(g)
        );
        if pm == pg {
            assert!(
                m.cost_per_hour <= g.cost_per_hour + EPS,
                "{}: milp ${} > greedy ${}\nmilp:\n{}\ngreedy:\n{}",
                self.name,
                m.cost_per_hour,
                g.cost_per_hour,
                summary(m),
                summary(g)
            );
        }
    }

    pub fn assert_milp_strictly_cheaper(&self) {
        let (m, g) = (&self.milp.plan, &self.greedy.plan);
        assert!(
            m.cost_per_hour < g.cost_per_hour - EPS,
            "{}: expected milp (${}) strictly cheaper than greedy (${})\nmilp:\n{}\ngreedy:\n{}",
            self.name,
            m.cost_per_hour,
            g.cost_per_hour,
            summary(m),
            summary(g)
        );
    }
}

fn solve(
    name: &str,
    snapshot: &Path,
    catalog: &Path,
    strategy: Strategy,
    checker: &Path,
) -> Solved {
    let label = match strategy {
        Strategy::Milp => "milp",
        Strategy::Greedy => "greedy",
    };
    let out = Command::new(env!("CARGO_BIN_EXE_joiner"))
        .arg("solve")
        .arg("--snapshot")
        .arg(snapshot)
        .arg("--catalog")
        .arg(catalog)
        .args([
            "--strategy",
            label,
            "--output",
            "json",
            "--time-limit",
            "20",
            "--threads",
            "1",
        ])
        .env_remove("JOINER_GAP")
        .output()
        .expect("the joiner binary runs");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{name} ({label}): joiner solve failed ({}):\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let plan: Plan = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("{name} ({label}): plan JSON does not parse: {e}\n{stdout}"));
    let dir = std::env::temp_dir().join(format!("joiner-scenarios-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let plan_file = dir.join(format!("{name}.{label}.json"));
    std::fs::write(&plan_file, &stdout).expect("plan file written");
    let check = Command::new(python())
        .arg(checker)
        .arg(snapshot)
        .arg(catalog)
        .arg(&plan_file)
        .output()
        .unwrap_or_else(|e| {
            panic!(
                "cannot run plan-check with {} (set JOINER_PYTHON; it needs PyYAML): {e}",
                python()
            )
        });
    let check_output = format!(
        "{}{}",
        String::from_utf8_lossy(&check.stdout),
        String::from_utf8_lossy(&check.stderr)
    );
    assert!(
        matches!(check.status.code(), Some(0) | Some(1)),
        "{name} ({label}): plan-check could not check the plan ({}):\n{check_output}",
        check.status
    );
    Solved {
        strategy,
        plan,
        plan_file,
        check_ok: check.status.success(),
        check_output,
    }
}

// ------------------------------------------------------------------ queries on a plan

/// Pods the plan places (on new or existing nodes).
pub fn placed_count(p: &Plan) -> usize {
    p.nodes.iter().map(|n| n.pods.len()).sum::<usize>()
        + p.existing.iter().map(|e| e.pods.len()).sum::<usize>()
}

/// `namespace/name` -> reason, for every unschedulable pod.
pub fn unschedulable(p: &Plan) -> BTreeMap<String, UnschedulableReason> {
    p.unschedulable
        .iter()
        .map(|u| (u.pod.clone(), u.reason))
        .collect()
}

/// The new node holding `pod`.
pub fn node_of<'p>(p: &'p Plan, pod: &str) -> Option<&'p NewNode> {
    p.nodes.iter().find(|n| n.pods.iter().any(|x| x == pod))
}

/// The node (new node id or existing node name) holding `pod`.
pub fn host_of(p: &Plan, pod: &str) -> Option<String> {
    node_of(p, pod).map(|n| n.id.clone()).or_else(|| {
        p.existing
            .iter()
            .find(|e| e.pods.iter().any(|x| x == pod))
            .map(|e| e.node.clone())
    })
}

/// Instance types of the new nodes, sorted.
pub fn types(p: &Plan) -> Vec<&str> {
    let mut t: Vec<&str> = p.nodes.iter().map(|n| n.instance_type.as_str()).collect();
    t.sort();
    t
}

/// Zones of the new nodes, sorted.
pub fn zones(p: &Plan) -> Vec<&str> {
    let mut z: Vec<&str> = p.nodes.iter().map(|n| n.zone.as_str()).collect();
    z.sort();
    z
}

/// Pods whose name starts with `prefix` (e.g. `default/web-`), per zone of their new node.
pub fn per_zone(p: &Plan, prefix: &str) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    for n in &p.nodes {
        let c = n.pods.iter().filter(|x| x.starts_with(prefix)).count();
        if c > 0 {
            *out.entry(n.zone.clone()).or_insert(0) += c;
        }
    }
    out
}

/// Pods whose name starts with `prefix` on each new node that holds any.
pub fn per_node(p: &Plan, prefix: &str) -> Vec<usize> {
    p.nodes
        .iter()
        .map(|n| n.pods.iter().filter(|x| x.starts_with(prefix)).count())
        .filter(|&c| c > 0)
        .collect()
}

pub fn set<'a>(items: impl IntoIterator<Item = &'a str>) -> BTreeSet<String> {
    items.into_iter().map(str::to_string).collect()
}

pub fn pods_of(n: &NewNode) -> BTreeSet<String> {
    n.pods.iter().cloned().collect()
}

pub fn assert_cost(label: &str, p: &Plan, expected: f64) {
    assert!(
        (p.cost_per_hour - expected).abs() < EPS,
        "{label}: cost ${} != expected ${expected}\n{}",
        p.cost_per_hour,
        summary(p)
    );
}

//! Harness for the reference scenarios in `fixtures/scenarios/`: runs the real `joiner` binary with
//! both strategies, parses the JSON plans, has every plan verified, and offers small queries (where
//! did a pod go, pods per zone, ...) for the per-scenario expectations.
//!
//! Each scenario file names its catalog in its header (`# catalog: test-f0` ->
//! `fixtures/catalogs/test-f0.json`).
//!
//! Every plan is verified by joiner's own feasibility check, `joiner::verify::verify`, which
//! re-derives from the snapshot and the catalog alone whether the plan can be carried out. Where
//! the independent checker `plan-check` is present (`$JOINER_PLAN_CHECK`, else
//! `../shared/tools/plan-check` beside the repository), every plan must pass it too; it runs under
//! `$JOINER_PYTHON` (default `python3`, which needs PyYAML). A clone on its own has no plan-check,
//! and its tests pass on the own check alone, except when the environment variable `CI` is set: CI
//! clones the repository with `shared/` beside it, so there a missing plan-check fails the test.

#![allow(dead_code)]

mod plan_text;
pub use plan_text::summary;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

pub use joiner::catalog::CapacityType;
use joiner::catalog::Catalog;
use joiner::domain::ClusterSnapshot;
use joiner::optimizer::plan::NewNode;
pub use joiner::optimizer::{Plan, Strategy, UnschedulableReason};
use joiner::verify::{verify, Violation};

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

/// plan-check where it is present: `$JOINER_PLAN_CHECK`, else `../shared/tools/plan-check` beside
/// the repository. None when it is absent, unless `CI` is set: then its absence fails the test.
pub fn plan_check_path() -> Option<PathBuf> {
    let path = match std::env::var_os("JOINER_PLAN_CHECK") {
        Some(p) => PathBuf::from(p),
        None => manifest_dir().join("../shared/tools/plan-check"),
    };
    if path.is_file() {
        return Some(path);
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "plan-check not found at {}, and CI is set: CI clones the repository with shared/ \
         beside it and verifies every plan with plan-check as well as with joiner's own check (set \
         JOINER_PLAN_CHECK to its path, or unset CI to rely on the own check alone)",
        path.display()
    );
    None
}

pub fn python() -> String {
    std::env::var("JOINER_PYTHON").unwrap_or_else(|_| "python3".to_string())
}

/// plan-check's verdict on a plan.
pub struct PlanCheck {
    pub ok: bool,
    pub output: String,
}

/// One strategy's plan for a scenario and the verdicts on it.
pub struct Solved {
    pub strategy: Strategy,
    pub plan: Plan,
    pub plan_file: PathBuf,
    /// joiner's own feasibility check.
    pub verdict: Result<(), Vec<Violation>>,
    /// plan-check's, where it is present.
    pub plan_check: Option<PlanCheck>,
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

/// Runs a scenario with both strategies and verifies both plans, and asserts what every scenario
/// must satisfy: both plans are feasible (joiner's own check, and plan-check where present), and
/// the MILP places at least as many pods as greedy and, placing as many, costs no more.
pub fn scenario(name: &str) -> Outcome {
    let o = Outcome::run(name);
    o.assert_feasible();
    o.assert_milp_not_worse();
    o
}

impl Outcome {
    /// Solves with both strategies and verifies both plans, asserting nothing about them.
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
        let inputs = Inputs {
            name,
            snapshot: &snapshot,
            catalog: &catalog,
            parsed: (
                joiner::snapshot::load_snapshot(&snapshot)
                    .unwrap_or_else(|e| panic!("scenario {name}: {e}")),
                Catalog::from_file(&catalog).unwrap_or_else(|e| panic!("scenario {name}: {e}")),
            ),
            checker: checker.as_deref(),
        };
        let milp = inputs.solve(Strategy::Milp);
        let greedy = inputs.solve(Strategy::Greedy);
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

    /// Both plans pass joiner's own check and, where it ran, plan-check.
    pub fn assert_feasible(&self) {
        for s in self.both() {
            if let Err(violations) = &s.verdict {
                let list: Vec<String> = violations.iter().map(|v| format!("  {v}")).collect();
                panic!(
                    "{} ({}): joiner's own check rejects the plan {}:\n{}\nplan:\n{}",
                    self.name,
                    s.label(),
                    s.plan_file.display(),
                    list.join("\n"),
                    summary(&s.plan)
                );
            }
            if let Some(check) = s.plan_check.as_ref().filter(|c| !c.ok) {
                panic!(
                    "{} ({}): plan-check rejects the plan {} that joiner's own check \
                     accepts:\n{}\nplan:\n{}",
                    self.name,
                    s.label(),
                    s.plan_file.display(),
                    check.output,
                    summary(&s.plan)
                );
            }
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

/// What solving one scenario needs: its files, their parsed contents and plan-check's path.
struct Inputs<'a> {
    name: &'a str,
    snapshot: &'a Path,
    catalog: &'a Path,
    parsed: (ClusterSnapshot, Catalog),
    checker: Option<&'a Path>,
}

impl Inputs<'_> {
    fn solve(&self, strategy: Strategy) -> Solved {
        let name = self.name;
        let label = match strategy {
            Strategy::Milp => "milp",
            Strategy::Greedy => "greedy",
        };
        let out = Command::new(env!("CARGO_BIN_EXE_joiner"))
            .arg("solve")
            .arg("--snapshot")
            .arg(self.snapshot)
            .arg("--catalog")
            .arg(self.catalog)
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
        // the plan is printed either way; exit code 3 says that it leaves pods unschedulable
        let code = out.status.code();
        assert!(
            matches!(code, Some(0) | Some(3)),
            "{name} ({label}): joiner solve failed ({}):\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        let plan: Plan = serde_json::from_str(&stdout).unwrap_or_else(|e| {
            panic!("{name} ({label}): plan JSON does not parse: {e}\n{stdout}")
        });
        assert_eq!(
            code == Some(3),
            !plan.unschedulable.is_empty(),
            "{name} ({label}): exit code {code:?} with {} unschedulable pods",
            plan.unschedulable.len()
        );
        let dir = std::env::temp_dir().join(format!("joiner-scenarios-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let plan_file = dir.join(format!("{name}.{label}.json"));
        std::fs::write(&plan_file, &stdout).expect("plan file written");
        let (snapshot, catalog) = &self.parsed;
        Solved {
            strategy,
            verdict: verify(snapshot, catalog, &plan),
            plan_check: self
                .checker
                .map(|checker| self.plan_check(checker, &plan_file, label)),
            plan,
            plan_file,
        }
    }

    fn plan_check(&self, checker: &Path, plan_file: &Path, label: &str) -> PlanCheck {
        let check = Command::new(python())
            .arg(checker)
            .arg(self.snapshot)
            .arg(self.catalog)
            .arg(plan_file)
            .output()
            .unwrap_or_else(|e| {
                panic!(
                    "cannot run plan-check with {} (set JOINER_PYTHON; it needs PyYAML): {e}",
                    python()
                )
            });
        let output = format!(
            "{}{}",
            String::from_utf8_lossy(&check.stdout),
            String::from_utf8_lossy(&check.stderr)
        );
        assert!(
            matches!(check.status.code(), Some(0) | Some(1)),
            "{} ({label}): plan-check could not check the plan ({}):\n{output}",
            self.name,
            check.status
        );
        PlanCheck {
            ok: check.status.success(),
            output,
        }
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

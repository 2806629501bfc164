//! The `joiner` binary's contract with scripts (docs/cli.md): exit code 0 on success, 1 on a
//! runtime error, 2 on a usage error, 3 when `solve` or `consolidate` leaves pods unschedulable (0
//! again with `--allow-unschedulable`), and `-o json|yaml` documents on stdout alone.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use joiner::disruption::DisruptionPlan;
use joiner::optimizer::Plan;

fn path(relative: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(relative)
}

/// A bundled scenario and the catalog its `# catalog:` header names.
fn scenario(name: &str) -> [PathBuf; 2] {
    let snapshot = path(&format!("fixtures/scenarios/{name}.yaml"));
    let text = std::fs::read_to_string(&snapshot).expect("the scenario");
    let catalog = text
        .lines()
        .find_map(|l| l.strip_prefix("# catalog: "))
        .expect("a `# catalog:` header");
    [
        snapshot,
        path(&format!("fixtures/catalogs/{}.json", catalog.trim())),
    ]
}

/// The scenario whose 2Ti pod no instance type holds.
fn too_large() -> [PathBuf; 2] {
    scenario("pod-larger-than-any-type")
}

/// `joiner <command> --snapshot S --catalog C <extra>`, without the environment's fallbacks.
fn joiner(command: &str, [snapshot, catalog]: &[PathBuf; 2], extra: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_joiner"))
        .arg(command)
        .arg("--snapshot")
        .arg(snapshot)
        .arg("--catalog")
        .arg(catalog)
        .args(["--time-limit", "20", "--threads", "1"])
        .args(extra)
        .env_remove("JOINER_GAP")
        .env_remove("JOINER_TIME_LIMIT")
        .env_remove("JOINER_THREADS")
        .env_remove("JOINER_CATALOG")
        .env_remove("JOINER_REGION")
        .env_remove("JOINER_NOW")
        .stdin(Stdio::null())
        .output()
        .expect("the joiner binary runs")
}

fn code(out: &Output) -> Option<i32> {
    out.status.code()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn solve_exits_3_when_a_pod_is_left_unschedulable() {
    let out = joiner("solve", &too_large(), &["-o", "json"]);
    let stderr = text(&out.stderr);
    assert_eq!(code(&out), Some(3), "stderr:\n{stderr}");
    let plan: Plan = serde_json::from_slice(&out.stdout).expect("the plan as JSON on stdout");
    let pods: Vec<&str> = plan.unschedulable.iter().map(|u| u.pod.as_str()).collect();
    assert_eq!(pods, ["default/huge"]);
    assert!(
        stderr.contains("1 pod left unschedulable: default/huge"),
        "{stderr}"
    );
}

#[test]
fn solve_allow_unschedulable_exits_0_with_the_same_plan() {
    let out = joiner(
        "solve",
        &too_large(),
        &["--output", "yaml", "--allow-unschedulable"],
    );
    assert_eq!(code(&out), Some(0), "stderr:\n{}", text(&out.stderr));
    let plan: Plan = serde_yaml_ng::from_slice(&out.stdout).expect("the plan as YAML on stdout");
    assert_eq!(plan.unschedulable.len(), 1);
    assert_eq!(plan.nodes.len(), 1, "the normal pod still gets its node");
}

#[test]
fn consolidate_exits_3_when_pending_pods_cannot_all_be_placed() {
    let out = joiner(
        "consolidate",
        &too_large(),
        &["-o", "json", "--now", "2026-01-01T00:00:00Z"],
    );
    let stderr = text(&out.stderr);
    assert_eq!(code(&out), Some(3), "stderr:\n{stderr}");
    let plan: DisruptionPlan =
        serde_json::from_slice(&out.stdout).expect("the disruption plan as JSON on stdout");
    assert!(plan.actions.is_empty(), "{:?}", plan.actions);
    assert!(stderr.contains("default/huge"), "{stderr}");
    assert!(!stderr.contains("default/normal"), "{stderr}");

    let allowed = joiner(
        "consolidate",
        &too_large(),
        &["--now", "2026-01-01T00:00:00Z", "--allow-unschedulable"],
    );
    assert_eq!(code(&allowed), Some(0), "{}", text(&allowed.stderr));
}

#[test]
fn a_plan_that_places_every_pod_exits_0() {
    let input = scenario("binpack-small-pods");
    for command in ["solve", "consolidate"] {
        let out = joiner(command, &input, &["-o", "json"]);
        assert_eq!(
            code(&out),
            Some(0),
            "{command}: stderr:\n{}",
            text(&out.stderr)
        );
        let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON on stdout");
        assert!(doc.is_object(), "{command}: {doc}");
    }
}

#[test]
fn a_bad_input_file_exits_1() {
    let [_, catalog] = too_large();
    let input = [
        path("fixtures/bad-input/quantity-negative-cpu.yaml"),
        catalog,
    ];
    let out = joiner("solve", &input, &[]);
    let stderr = text(&out.stderr);
    assert_eq!(code(&out), Some(1), "stderr:\n{stderr}");
    assert!(
        stderr.contains("error: Pod shop/quantity-negative-cpu"),
        "{stderr}"
    );
    assert!(out.stdout.is_empty(), "{}", text(&out.stdout));
}

#[test]
fn usage_errors_exit_2() {
    let cases: [&[&str]; 3] = [
        &["--no-such-flag"],
        &["-o", "xml"],
        &["--time-limit", "soon"],
    ];
    for extra in cases {
        let out = joiner("solve", &too_large(), extra);
        let stderr = text(&out.stderr);
        assert_eq!(code(&out), Some(2), "{extra:?}: stderr:\n{stderr}");
        assert!(stderr.contains("try '--help'"), "{extra:?}: {stderr}");
    }
}

#[test]
fn the_controller_requires_a_cloud_provider() {
    let out = Command::new(env!("CARGO_BIN_EXE_joiner"))
        .args(["controller", "--cluster-name", "test"])
        .env_remove("JOINER_CLOUD_PROVIDER")
        .stdin(Stdio::null())
        .output()
        .expect("the joiner binary runs");
    let stderr = text(&out.stderr);
    assert_eq!(code(&out), Some(2), "stderr:\n{stderr}");
    assert!(stderr.contains("--cloud-provider"), "{stderr}");
}

/// The flag lines of a `--help` with no sentence of help: neither on the line (after two spaces)
/// nor on the next.
fn flags_without_help(help: &str) -> Vec<String> {
    let lines: Vec<&str> = help.lines().collect();
    lines
        .iter()
        .enumerate()
        .filter(|(_, l)| l.starts_with("  -") || l.starts_with("      --"))
        .filter(|(_, l)| !l.trim().contains("  "))
        .filter(|(i, _)| {
            let next = lines.get(i + 1).map_or("", |n| n.trim());
            next.is_empty() || next.starts_with('[')
        })
        .map(|(_, l)| l.trim().to_string())
        .collect()
}

#[test]
fn every_command_describes_every_flag() {
    let commands: [&[&str]; 11] = [
        &[],
        &["solve"],
        &["solve-dump"],
        &["consolidate"],
        &["bench"],
        &["bench-disruption"],
        &["simulate"],
        &["controller"],
        &["catalog", "build"],
        &["catalog", "live"],
        &["crds"],
    ];
    for command in commands {
        let out = Command::new(env!("CARGO_BIN_EXE_joiner"))
            .args(command)
            .arg("--help")
            .output()
            .expect("the joiner binary runs");
        assert_eq!(code(&out), Some(0), "{command:?} --help");
        let help = text(&out.stdout);
        assert!(help.contains("--log-level"), "{command:?}: {help}");
        let bare = flags_without_help(&help);
        assert!(bare.is_empty(), "{command:?}: flags without help: {bare:?}");
    }
}

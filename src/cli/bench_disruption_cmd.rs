//! `joiner bench-disruption`: the scale-in benchmark (`joiner::scalein`) against the bundled
//! catalog, joiner's MILP consolidation (one decision) and Karpenter's baseline (passes to a
//! fixpoint) in the same run, as one table of cluster cost, lower bound, decision time and
//! evictions, or as JSON. The clock is fixed at `joiner::scalein::NOW` so every run decides on the
//! same inputs.

use std::process::ExitCode;
use std::time::Instant;

use clap::Args;
use serde::Serialize;

use joiner::catalog::Catalog;
use joiner::disruption::{self, baseline, timing, DisruptionSettings, DisruptionStatus};
use joiner::domain::ClusterSnapshot;

use super::output::OutputArg;
use super::progress::Progress;

#[derive(Debug, Args)]
pub struct BenchDisruptionArgs {
    /// Running nodes before consolidation.
    #[arg(long, default_value_t = 500)]
    pub nodes: usize,
    /// Deployment pods left running after the load drop.
    #[arg(long, default_value_t = 5000)]
    pub pods: usize,
    /// Fraction of the pods the drop removed: pods before = pods / (1 - drop).
    #[arg(long, default_value_t = 0.6)]
    pub drop: f64,
    /// Seed of the generated cluster: the same seed gives the same nodes and pods.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Limit for each decision, seconds.
    #[arg(long, default_value_t = 5.0)]
    pub time_limit: f64,
    /// Baseline passes at most.
    #[arg(long, default_value_t = 50)]
    pub max_rounds: usize,
    /// Overrides the cost weight `podEviction` ($ once per evicted pod, paid back over `paybackHours`): higher values make
    /// joiner trade savings for fewer evictions.
    #[arg(long)]
    pub pod_eviction: Option<f64>,
    #[command(flatten)]
    pub output: OutputArg,
}

/// The benchmark's outcome, one field per table cell.
#[derive(Debug, Serialize)]
struct Report {
    nodes: usize,
    pods_after: usize,
    drop: f64,
    seed: u64,
    now: String,
    time_limit_s: f64,
    nodes_before: usize,
    cost_before_per_hour: f64,
    joiner: Side,
    baseline: Side,
    /// joiner cost after / baseline cost after.
    cost_ratio: f64,
    /// joiner evictions / baseline evictions.
    evictions_ratio: f64,
}

#[derive(Debug, Serialize)]
struct Side {
    nodes_after: usize,
    cost_after_per_hour: f64,
    /// Certified lower bound of the MILP's decision (joiner only).
    lower_bound: Option<f64>,
    /// (cost after - lower bound) / cost after (joiner only).
    gap: Option<f64>,
    seconds: f64,
    rounds: usize,
    pods_evicted: usize,
    nodes_deleted: usize,
    nodes_launched: usize,
    status: SideStatus,
}

/// How a side's decision ended: joiner's solver status, or how the baseline's passes stopped.
#[derive(Debug, Serialize)]
#[serde(untagged)]
enum SideStatus {
    Decision(DisruptionStatus),
    Baseline(BaselineEnd),
}

impl SideStatus {
    fn as_str(&self) -> &'static str {
        match self {
            SideStatus::Decision(s) => s.as_str(),
            SideStatus::Baseline(b) => b.as_str(),
        }
    }
}

/// Why the baseline stopped: a pass found nothing more to do, or `--max-rounds` passes ran.
#[derive(Debug, Clone, Copy, Serialize)]
#[serde(rename_all = "kebab-case")]
enum BaselineEnd {
    Fixpoint,
    MaxRounds,
}

impl BaselineEnd {
    fn as_str(self) -> &'static str {
        match self {
            BaselineEnd::Fixpoint => "fixpoint",
            BaselineEnd::MaxRounds => "max-rounds",
        }
    }
}

pub fn run(args: BenchDisruptionArgs) -> anyhow::Result<ExitCode> {
    validate(&args)?;
    let mut progress = Progress::start(
        "bench-disruption",
        3,
        &format!(
            "{} nodes, {} pods after a {:.0}% drop; joiner's decision, then Karpenter's baseline",
            args.nodes,
            args.pods,
            args.drop * 100.0
        ),
    );
    progress.phase("building the scale-in cluster");
    let catalog = Catalog::bundled("us-east-1")?;
    let snapshot = cluster(&args, &catalog)?;
    progress.phase_done(&format!(
        "{} nodes, {} pods",
        snapshot.nodes.len(),
        snapshot.pods.len()
    ));
    let mut settings = DisruptionSettings::new(timing::parse_timestamp(joiner::scalein::NOW)?);
    settings.time_limit = super::seconds("--time-limit", args.time_limit)?;

    progress.phase(&format!(
        "joiner's MILP decision (limit {}s)",
        args.time_limit
    ));
    let joiner = joiner_side(&snapshot, &catalog, &settings)?;
    progress.phase_done(&format!(
        "joiner: {} nodes deleted, {} launched",
        joiner.nodes_deleted, joiner.nodes_launched
    ));

    progress.phase(&format!(
        "Karpenter's baseline to a fixpoint (at most {} passes)",
        args.max_rounds
    ));
    let baseline = baseline_side(&snapshot, &catalog, &settings, args.max_rounds)?;
    progress.phase_done(&format!(
        "baseline: {} passes, {} nodes deleted",
        baseline.rounds, baseline.nodes_deleted
    ));
    progress.finish("done");

    let report = Report {
        nodes: args.nodes,
        pods_after: args.pods,
        drop: args.drop,
        seed: args.seed,
        now: joiner::scalein::NOW.into(),
        time_limit_s: args.time_limit,
        nodes_before: snapshot.nodes.len(),
        cost_before_per_hour: cost(&snapshot, &catalog),
        cost_ratio: joiner.cost_after_per_hour / baseline.cost_after_per_hour.max(1e-9),
        evictions_ratio: joiner.pods_evicted as f64 / (baseline.pods_evicted.max(1)) as f64,
        joiner,
        baseline,
    };
    args.output.print(&report, || table(&report))?;
    Ok(ExitCode::SUCCESS)
}

fn validate(args: &BenchDisruptionArgs) -> anyhow::Result<()> {
    anyhow::ensure!(args.nodes > 0, "--nodes must be at least 1");
    anyhow::ensure!(
        args.drop.is_finite() && (0.0..=0.95).contains(&args.drop),
        "--drop must be in [0, 0.95]"
    );
    anyhow::ensure!(
        args.time_limit.is_finite() && args.time_limit > 0.0,
        "--time-limit must be a positive number of seconds"
    );
    anyhow::ensure!(args.max_rounds > 0, "--max-rounds must be at least 1");
    if let Some(w) = args.pod_eviction {
        anyhow::ensure!(
            w.is_finite() && w >= 0.0,
            "--pod-eviction must be a non-negative number"
        );
    }
    Ok(())
}

/// The scale-in cluster the flags describe, or an error when its nodes cannot hold its pods.
fn cluster(args: &BenchDisruptionArgs, catalog: &Catalog) -> anyhow::Result<ClusterSnapshot> {
    let mut snapshot =
        joiner::scalein::scale_in(args.nodes, args.pods, args.drop, args.seed, catalog);
    if let Some(w) = args.pod_eviction {
        snapshot.weights.pod_eviction = w;
    }
    let running = snapshot
        .pods
        .iter()
        .filter(|p| !p.is_daemonset_pod())
        .count();
    anyhow::ensure!(
        snapshot.nodes.len() == args.nodes && running == args.pods,
        "{} nodes cannot hold {:.0} pods before the drop ({} nodes, {running} pods built); lower \
        --pods or --drop",
        args.nodes,
        args.pods as f64 / (1.0 - args.drop),
        snapshot.nodes.len()
    );
    Ok(snapshot)
}

/// The cluster's hourly price, rounded to the micro-dollar.
fn cost(snapshot: &ClusterSnapshot, catalog: &Catalog) -> f64 {
    (disruption::cluster_cost(snapshot, catalog) * 1e6).round() / 1e6
}

/// joiner's one MILP decision.
fn joiner_side(
    snapshot: &ClusterSnapshot,
    catalog: &Catalog,
    settings: &DisruptionSettings,
) -> anyhow::Result<Side> {
    let t = Instant::now();
    let plan = disruption::consolidate(snapshot, catalog, settings)?;
    let seconds = t.elapsed().as_secs_f64();
    let launched: usize = plan.actions.iter().map(|a| a.launch.len()).sum();
    Ok(Side {
        nodes_after: snapshot.nodes.len() - plan.deleted_nodes() + launched,
        cost_after_per_hour: plan.cost_after_per_hour,
        lower_bound: Some(plan.lower_bound),
        gap: Some(
            (plan.cost_after_per_hour - plan.lower_bound) / plan.cost_after_per_hour.max(1e-9),
        ),
        seconds,
        rounds: 1,
        pods_evicted: plan.evictions(),
        nodes_deleted: plan.deleted_nodes(),
        nodes_launched: launched,
        status: SideStatus::Decision(plan.solver.status),
    })
}

/// Karpenter's baseline, pass after pass until it finds nothing or reaches `max_rounds`.
fn baseline_side(
    snapshot: &ClusterSnapshot,
    catalog: &Catalog,
    settings: &DisruptionSettings,
    max_rounds: usize,
) -> anyhow::Result<Side> {
    let t = Instant::now();
    // run_to_fixpoint runs the baseline strategy whatever `settings.strategy` says
    let (after, plans) = baseline::run_to_fixpoint(snapshot, catalog, settings, max_rounds)?;
    let seconds = t.elapsed().as_secs_f64();
    Ok(Side {
        nodes_after: after.nodes.len(),
        cost_after_per_hour: cost(&after, catalog),
        lower_bound: None,
        gap: None,
        seconds,
        rounds: plans.len(),
        pods_evicted: plans.iter().map(|p| p.evictions()).sum(),
        nodes_deleted: plans.iter().map(|p| p.deleted_nodes()).sum(),
        nodes_launched: plans
            .iter()
            .flat_map(|p| &p.actions)
            .map(|a| a.launch.len())
            .sum(),
        status: SideStatus::Baseline(if plans.len() >= max_rounds {
            BaselineEnd::MaxRounds
        } else {
            BaselineEnd::Fixpoint
        }),
    })
}

/// The report as one table: a row per measure, joiner and the baseline side by side.
fn table(r: &Report) -> String {
    use std::fmt::Write as _;
    let mut s = String::new();
    let w = &mut s;
    let pods_before = (r.pods_after as f64 / (1.0 - r.drop)).round();
    let _ = writeln!(
        w,
        "scale-in: {} nodes, {pods_before:.0} -> {} deployment pods (drop {:.2}), seed {}, \
        us-east-1, now {}, time limit {}s",
        r.nodes, r.pods_after, r.drop, r.seed, r.now, r.time_limit_s
    );
    let (j, b) = (&r.joiner, &r.baseline);
    let opt =
        |v: Option<f64>, digits: usize| v.map_or("-".to_string(), |v| format!("{v:.digits$}"));
    let per_saved = |side: &Side| {
        side.pods_evicted as f64 / (r.cost_before_per_hour - side.cost_after_per_hour).max(1e-9)
    };
    let rows: [(&str, String, String, String); 12] = [
        (
            "nodes before",
            r.nodes_before.to_string(),
            r.nodes_before.to_string(),
            String::new(),
        ),
        (
            "nodes after",
            j.nodes_after.to_string(),
            b.nodes_after.to_string(),
            format!("{:.3}", j.nodes_after as f64 / b.nodes_after.max(1) as f64),
        ),
        (
            "cost before $/h",
            format!("{:.4}", r.cost_before_per_hour),
            format!("{:.4}", r.cost_before_per_hour),
            String::new(),
        ),
        (
            "cost after $/h",
            format!("{:.4}", j.cost_after_per_hour),
            format!("{:.4}", b.cost_after_per_hour),
            format!("{:.3}", r.cost_ratio),
        ),
        (
            "lower bound $/h",
            opt(j.lower_bound, 4),
            opt(b.lower_bound, 4),
            String::new(),
        ),
        (
            "gap (after-bound)/after",
            opt(j.gap.map(|g| g * 100.0), 2) + "%",
            "-".into(),
            String::new(),
        ),
        (
            "decision seconds",
            format!("{:.3}", j.seconds),
            format!("{:.3}", b.seconds),
            format!("{:.3}", j.seconds / b.seconds.max(1e-9)),
        ),
        (
            "rounds",
            j.rounds.to_string(),
            b.rounds.to_string(),
            String::new(),
        ),
        (
            "pods evicted",
            j.pods_evicted.to_string(),
            b.pods_evicted.to_string(),
            format!("{:.3}", r.evictions_ratio),
        ),
        (
            "evictions per $/h saved",
            format!("{:.2}", per_saved(j)),
            format!("{:.2}", per_saved(b)),
            format!("{:.3}", per_saved(j) / per_saved(b).max(1e-9)),
        ),
        (
            "nodes deleted / launched",
            format!("{} / {}", j.nodes_deleted, j.nodes_launched),
            format!("{} / {}", b.nodes_deleted, b.nodes_launched),
            String::new(),
        ),
        (
            "status",
            j.status.as_str().to_string(),
            b.status.as_str().to_string(),
            String::new(),
        ),
    ];
    let _ = writeln!(
        w,
        "{:<26} {:>14} {:>14} {:>16}",
        "", "joiner (milp)", "baseline", "joiner/baseline"
    );
    for (name, a, c, ratio) in rows {
        let _ = writeln!(w, "{name:<26} {a:>14} {c:>14} {ratio:>16}");
    }
    s
}

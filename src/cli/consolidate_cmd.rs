//! `joiner consolidate`: read a snapshot and a catalog, decide which nodes to delete or replace,
//! and print the disruption plan as JSON, YAML or a table. It exits 3 when the cluster the decision
//! leaves cannot run every pod: once its actions are carried out, a provisioning solve of the pods
//! then pending (the snapshot's pending pods and any evicted pod without a place) leaves some
//! unschedulable.

use std::process::ExitCode;

use clap::Args;

use joiner::catalog::Catalog;
use joiner::disruption::{
    self, edit, timing, DisruptionPlan, DisruptionSettings, DisruptionStrategy,
};
use joiner::domain::ClusterSnapshot;
use joiner::optimizer::{self, SolveSettings};

use super::output::{OutputArg, UnschedulableGate};
use super::solve_cmd::InputArgs;

#[derive(Debug, Args)]
pub struct ConsolidateArgs {
    #[command(flatten)]
    pub input: InputArgs,
    /// Decision method.
    #[arg(long, value_enum, default_value = "milp")]
    pub strategy: DisruptionStrategy,
    /// The decision's clock (RFC 3339): budgets' schedules, consolidateAfter, expireAfter and
    /// do-not-disrupt durations are read against it. Defaults to the current time.
    #[arg(long, env = "JOINER_NOW")]
    pub now: Option<String>,
    /// Wall-clock limit for the whole decision, in seconds.
    #[arg(long, env = "JOINER_TIME_LIMIT", default_value_t = 5.0)]
    pub time_limit: f64,
    /// Relative MIP gap at which the solver stops.
    #[arg(long, env = "JOINER_GAP", default_value_t = 0.01)]
    pub gap: f64,
    /// HiGHS threads.
    #[arg(long, env = "JOINER_THREADS", default_value_t = 1)]
    pub threads: u32,
    /// Cheaper spot instance types a spot-to-spot replacement needs (Karpenter: 15).
    #[arg(long, default_value_t = 15)]
    pub spot_to_spot_min_types: usize,
    #[command(flatten)]
    pub output: OutputArg,
    #[command(flatten)]
    pub gate: UnschedulableGate,
}

impl ConsolidateArgs {
    pub fn settings(&self) -> anyhow::Result<DisruptionSettings> {
        anyhow::ensure!(
            self.time_limit.is_finite() && self.time_limit > 0.0,
            "--time-limit must be a positive number of seconds"
        );
        let now = match &self.now {
            Some(t) => timing::parse_timestamp(t)?,
            None => chrono::Utc::now(),
        };
        let mut s = DisruptionSettings::new(now);
        s.strategy = self.strategy;
        s.time_limit = super::seconds("--time-limit", self.time_limit)?;
        s.gap = self.gap;
        s.threads = self.threads;
        s.spot_to_spot_min_types = self.spot_to_spot_min_types;
        Ok(s)
    }
}

pub fn run(args: ConsolidateArgs) -> anyhow::Result<ExitCode> {
    let settings = args.settings()?;
    let (snapshot, catalog) = args.input.load()?;
    let plan = disruption::consolidate(&snapshot, &catalog, &settings)?;
    args.output.print(&plan, || table(&plan))?;
    if args.gate.allow_unschedulable {
        return Ok(ExitCode::SUCCESS);
    }
    let left = unschedulable_after(&snapshot, &catalog, &plan, &settings)?;
    Ok(args.gate.exit(left.iter().map(String::as_str)))
}

/// The pods a provisioning solve cannot place once `plan` is carried out: pending before the
/// decision or evicted by it without a place. Each is `namespace/name`.
fn unschedulable_after(
    snapshot: &ClusterSnapshot,
    catalog: &Catalog,
    plan: &DisruptionPlan,
    settings: &DisruptionSettings,
) -> anyhow::Result<Vec<String>> {
    let now = settings.now.to_rfc3339();
    let after = edit::with_disruption(snapshot, catalog, plan, "consolidated-", &now);
    if !after.pods.iter().any(|p| p.is_pending()) {
        return Ok(Vec::new());
    }
    let solve = SolveSettings {
        time_limit: settings.time_limit,
        gap: settings.gap,
        threads: settings.threads,
        // only where pods can go matters here, not how close the plan is to the cheapest
        lower_bound: false,
        ..SolveSettings::default()
    };
    let provisioning = optimizer::solve(&after, catalog, &solve)?;
    Ok(provisioning
        .unschedulable
        .into_iter()
        .map(|u| u.pod)
        .collect())
}

/// The disruption plan as a person reads it at a terminal.
pub fn table(plan: &DisruptionPlan) -> String {
    use std::fmt::Write as _;
    let mut s = String::new();
    let w = &mut s;
    let _ = writeln!(
        w,
        "{:<4} {:<14} {:<40} {:<40} {:>6} {:>10}",
        "#", "REASON", "DELETE", "LAUNCH", "MOVES", "SAVES $/H"
    );
    for (i, a) in plan.actions.iter().enumerate() {
        let _ = writeln!(
            w,
            "{:<4} {:<14} {:<40} {:<40} {:>6} {:>10.4}",
            i + 1,
            a.reason.as_str(),
            summary(&a.delete),
            launches(a),
            a.moves.len(),
            a.savings_per_hour
        );
    }
    for b in &plan.blocked {
        let _ = writeln!(w, "blocked {}: {}", b.node, b.reason);
    }
    let _ = writeln!(
        w,
        "\n{} actions deleting {} nodes, evicting {} pods: ${:.4}/h -> ${:.4}/h (saves ${:.4}/h; \
        lower bound ${:.4}/h); disruption cost {:.4}; {} in {:.2}s",
        plan.actions.len(),
        plan.deleted_nodes(),
        plan.evictions(),
        plan.cost_before_per_hour,
        plan.cost_after_per_hour,
        plan.savings_per_hour,
        plan.lower_bound,
        plan.disruption_cost,
        plan.solver.status,
        plan.solver.seconds
    );
    for note in &plan.solver.notes {
        let _ = writeln!(w, "note: {note}");
    }
    s
}

/// Up to three names, or a count.
fn summary(names: &[String]) -> String {
    match names.len() {
        0..=3 => names.join(","),
        n => format!("{},{} and {} more", names[0], names[1], n - 2),
    }
}

/// Launched nodes counted by instance type and capacity type.
fn launches(a: &joiner::disruption::Action) -> String {
    let mut by: std::collections::BTreeMap<(String, &str), usize> =
        std::collections::BTreeMap::new();
    for n in &a.launch {
        *by.entry((n.instance_type.clone(), n.capacity_type.as_str()))
            .or_default() += 1;
    }
    let parts: Vec<String> = by
        .iter()
        .map(|((t, c), n)| format!("{n}x {t} {c}"))
        .collect();
    if parts.is_empty() {
        "-".into()
    } else {
        parts.join(", ")
    }
}

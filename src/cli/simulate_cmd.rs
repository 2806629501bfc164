//! `joiner simulate`: runs a scenario once per strategy, prints the summary table side by side (or
//! the whole report as JSON or YAML), and writes `report.json` and the charts to `--out`.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::{Args, ValueEnum};
use indicatif::{ProgressBar, ProgressStyle};

use joiner::sim::{self, charts, Report, RunReport, Scenario, SimStrategy};

use super::output::OutputArg;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Which {
    /// joiner's decisions only.
    Milp,
    /// Karpenter's decisions only.
    Greedy,
    /// Both, one after the other, side by side in the table.
    Both,
}

#[derive(Debug, Args)]
pub struct SimulateArgs {
    /// Scenario file (docs/simulate.md); the bundled default when omitted.
    #[arg(long, env = "JOINER_SCENARIO")]
    scenario: Option<PathBuf>,
    /// Whose decisions to simulate: joiner's (`milp`), Karpenter's (`greedy`) or both.
    #[arg(long, value_enum, default_value = "both")]
    strategy: Which,
    /// Seed for spot interruptions; the scenario's own seed when omitted.
    #[arg(long)]
    seed: Option<u64>,
    /// Directory for report.json and the SVG charts.
    #[arg(long, default_value = "simulate-out")]
    out: PathBuf,
    #[command(flatten)]
    output: OutputArg,
}

pub fn run(args: SimulateArgs) -> anyhow::Result<std::process::ExitCode> {
    let scenario = match &args.scenario {
        Some(path) => Scenario::load(path)?,
        None => Scenario::bundled_default()?,
    };
    let seed = args.seed.unwrap_or(scenario.seed);
    let strategies = match args.strategy {
        Which::Milp => vec![SimStrategy::Milp],
        Which::Greedy => vec![SimStrategy::Greedy],
        Which::Both => vec![SimStrategy::Milp, SimStrategy::Greedy],
    };
    eprintln!(
        "scenario {}: {:.1} h simulated, seed {seed}",
        scenario.name,
        scenario.duration / 3600.0
    );
    let count = strategies.len();
    let mut runs = Vec::new();
    for (i, s) in strategies.into_iter().enumerate() {
        eprintln!("[{}/{count}] {}: simulating", i + 1, s.as_str());
        let bar = progress_bar(s);
        let run = sim::run(&scenario, s, seed, &mut |f| {
            bar.set_position((f * 1000.0) as u64)
        })?;
        bar.finish_and_clear();
        eprintln!(
            "[{}/{count}] {}: done in {:.1} s",
            i + 1,
            s.as_str(),
            run.wall_seconds
        );
        runs.push(run);
    }
    let report = Report {
        scenario: scenario.name.clone(),
        seed,
        runs,
    };
    write_files(&args.out, &report)?;
    args.output.print(&report, || table(&report.runs))?;
    Ok(std::process::ExitCode::SUCCESS)
}

/// `report.json` and the SVG charts in `out`, named on stderr.
fn write_files(out: &Path, report: &Report) -> anyhow::Result<()> {
    std::fs::create_dir_all(out).with_context(|| format!("cannot create {}", out.display()))?;
    let json = out.join("report.json");
    std::fs::write(&json, serde_json::to_string_pretty(report)?)
        .with_context(|| format!("cannot write {}", json.display()))?;
    let charts = charts::write_all(out, &report.runs)?;
    eprintln!(
        "wrote {} and {}",
        json.display(),
        charts
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    );
    Ok(())
}

fn progress_bar(s: SimStrategy) -> ProgressBar {
    if !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(1000);
    if let Ok(style) = ProgressStyle::with_template(
        "{prefix:>7} [{bar:40}] {percent:>3}% of virtual time, {elapsed}",
    ) {
        bar.set_style(style.progress_chars("=> "));
    }
    bar.set_prefix(s.as_str());
    bar
}

/// One row per figure, one column per strategy.
pub fn table(runs: &[RunReport]) -> String {
    type Row = (&'static str, fn(&RunReport) -> String);
    let rows: [Row; 19] = [
        ("total cost $", |r| format!("{:.2}", r.summary.total_cost)),
        ("average $/h", |r| {
            format!("{:.3}", r.summary.average_cost_per_hour)
        }),
        ("peak nodes", |r| r.summary.peak_nodes.to_string()),
        ("final nodes", |r| r.summary.final_nodes.to_string()),
        ("pending p50 s", |r| {
            format!("{:.1}", r.summary.pending_seconds.p50)
        }),
        ("pending p95 s", |r| {
            format!("{:.1}", r.summary.pending_seconds.p95)
        }),
        ("pending p99 s", |r| {
            format!("{:.1}", r.summary.pending_seconds.p99)
        }),
        ("pods started", |r| r.summary.pods_started.to_string()),
        ("pods evicted", |r| r.summary.pods_evicted.to_string()),
        ("interruptions", |r| {
            r.summary.interruptions_handled.to_string()
        }),
        ("ICE events", |r| r.summary.ice_events.to_string()),
        ("launched", |r| r.summary.instances_launched.to_string()),
        ("disruptions", |r| {
            format!(
                "{} (+{} dropped)",
                r.summary.disruptions_executed, r.summary.disruptions_abandoned
            )
        }),
        ("solves", |r| r.summary.solves.to_string()),
        ("solve p50 s", |r| {
            format!("{:.3}", r.summary.solver_seconds.p50)
        }),
        ("solve p99 s", |r| {
            format!("{:.3}", r.summary.solver_seconds.p99)
        }),
        ("time-limited", |r| {
            r.summary.time_limited_solves.to_string()
        }),
        ("unschedulable", |r| {
            r.summary.unschedulable_pods.to_string()
        }),
        ("pending at end", |r| r.summary.pending_at_end.to_string()),
    ];
    let mut out = format!("{:<16}", "");
    for r in runs {
        out.push_str(&format!("{:>20}", r.strategy));
    }
    out.push('\n');
    for (name, f) in rows {
        out.push_str(&format!("{name:<16}"));
        for r in runs {
            out.push_str(&format!("{:>20}", f(r)));
        }
        out.push('\n');
    }
    out
}

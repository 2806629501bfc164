//! `joiner simulate`: runs a scenario once per strategy, prints the summary table side by side (or
//! the whole report as JSON or YAML), and writes `report.json` and the charts to `--out`. With
//! `--suite DIR` it runs every scenario of a directory with joiner, Karpenter and Karpenter
//! Balanced, and writes `suite.json` and one cost chart per scenario.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::{Args, ValueEnum};
use indicatif::{ProgressBar, ProgressStyle};

use joiner::sim::suite::{self, DayResult, SuiteFailure, SuiteReport, SuiteStrategy};
use joiner::sim::{self, charts, Report, RunReport, Scenario, SimStrategy};

use super::output::{Exit, OutputArg};

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
    /// Run every scenario file (*.yaml) of this directory with joiner, Karpenter and Karpenter
    /// Balanced, side by side (docs/simulate.md, "The day suite"). `--strategy` does not apply.
    #[arg(long, conflicts_with = "scenario")]
    suite: Option<PathBuf>,
    /// Whose decisions to simulate: joiner's (`milp`), Karpenter's (`greedy`) or both.
    #[arg(long, value_enum, default_value = "both")]
    strategy: Which,
    /// Seed for spot interruptions; the scenario's own seed when omitted.
    #[arg(long)]
    seed: Option<u64>,
    /// With `--suite`: run every scenario once per seed (numbers or ranges, `1-5,11`) and add
    /// joiner's ratios over the seeds, median and worst, per scenario.
    #[arg(long, value_delimiter = ',', value_parser = super::bench_cmd::parse_seeds, requires = "suite", conflicts_with = "seed")]
    seeds: Vec<Vec<u64>>,
    /// Sets a cost weight over the scenario's (a `joiner-cost-weights` key, e.g.
    /// `settleMinutes=0`), for every run; repeatable. docs/tuning-cost-weights.md lists the keys.
    #[arg(long = "weight", value_name = "KEY=VALUE")]
    weights: Vec<String>,
    /// Directory for report.json and the SVG charts.
    #[arg(long, default_value = "simulate-out")]
    out: PathBuf,
    #[command(flatten)]
    output: OutputArg,
}

pub fn run(args: SimulateArgs) -> anyhow::Result<std::process::ExitCode> {
    if let Some(dir) = &args.suite {
        return run_suite(dir, &args);
    }
    let mut scenario = match &args.scenario {
        Some(path) => Scenario::load(path)?,
        None => Scenario::bundled_default()?,
    };
    override_weights(&mut scenario, &args.weights)?;
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
        let bar = progress_bar(s.as_str());
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

/// Applies `--weight KEY=VALUE` settings over the scenario's cost weights.
fn override_weights(scenario: &mut Scenario, settings: &[String]) -> anyhow::Result<()> {
    let mut data = std::collections::BTreeMap::new();
    for s in settings {
        let (key, value) = s
            .split_once('=')
            .with_context(|| format!("--weight {s:?}: expected KEY=VALUE"))?;
        data.insert(key.trim().to_string(), value.trim().to_string());
    }
    scenario
        .cluster
        .weights
        .apply(&data)
        .with_context(|| "--weight".to_string())
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

fn progress_bar(name: &str) -> ProgressBar {
    if !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(1000);
    if let Ok(style) = ProgressStyle::with_template(
        "{prefix:>7} [{bar:40}] {percent:>3}% of virtual time, {elapsed}",
    ) {
        bar.set_style(style.progress_chars("=> "));
    }
    bar.set_prefix(name.to_string());
    bar
}

/// One row per figure, one column per strategy.
pub fn table(runs: &[RunReport]) -> String {
    type Row = (&'static str, fn(&RunReport) -> String);
    let rows: [Row; 21] = [
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
        ("  by interruption", |r| {
            r.summary.pods_evicted_by_interruption.to_string()
        }),
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
        ("zone violations", |r| {
            r.summary.volume_zone_violations.to_string()
        }),
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

/// `--suite DIR`: each scenario file with the three strategies; a file that fails is reported and
/// the others still run; exit code 1 when any failed.
fn run_suite(dir: &Path, args: &SimulateArgs) -> anyhow::Result<std::process::ExitCode> {
    let files = suite::scenario_files(dir)?;
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("cannot create {}", args.out.display()))?;
    let mut report = SuiteReport {
        scenarios: vec![],
        failed: vec![],
        over_seeds: vec![],
    };
    let seeds: Vec<Option<u64>> = match args.seeds.concat() {
        s if s.is_empty() => vec![args.seed],
        s => s.into_iter().map(Some).collect(),
    };
    let count = files.len();
    for (i, path) in files.iter().enumerate() {
        let file = path.display().to_string();
        for &seed in &seeds {
            eprintln!("[{}/{count}] {file}{}", i + 1, seed_note(seeds.len(), seed));
            match run_one(path, args, seed, seeds.len() > 1) {
                Ok(day) => report.scenarios.push(day),
                Err(e) => {
                    eprintln!("error: {e:#}");
                    report.failed.push(SuiteFailure {
                        file: file.clone(),
                        error: format!("{e:#}"),
                    });
                }
            }
        }
    }
    if seeds.len() > 1 {
        report.over_seeds = suite::over_seeds(&report.scenarios);
    }
    let json = args.out.join("suite.json");
    std::fs::write(&json, serde_json::to_string_pretty(&report)?)
        .with_context(|| format!("cannot write {}", json.display()))?;
    eprintln!("wrote {}", json.display());
    args.output.print(&report, || suite_table(&report))?;
    if report.failed.is_empty() {
        Ok(std::process::ExitCode::SUCCESS)
    } else {
        eprintln!(
            "error: {} of {count} scenario files failed: {}",
            report.failed.len(),
            report
                .failed
                .iter()
                .map(|f| f.file.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        );
        Ok(Exit::Runtime.into())
    }
}

fn seed_note(seeds: usize, seed: Option<u64>) -> String {
    match seed {
        Some(s) if seeds > 1 => format!(", seed {s}"),
        _ => String::new(),
    }
}

/// One scenario of the suite with `seed` (its own when None), its chart written to `--out`
/// (named after the seed too when `per_seed`).
fn run_one(
    path: &Path,
    args: &SimulateArgs,
    seed: Option<u64>,
    per_seed: bool,
) -> anyhow::Result<DayResult> {
    let mut scenario = Scenario::load(path)?;
    override_weights(&mut scenario, &args.weights)?;
    let seed = seed.unwrap_or(scenario.seed);
    let mut bars: Vec<(SuiteStrategy, ProgressBar)> = vec![];
    let mut day = suite::run_day(&scenario, &path.display().to_string(), seed, &mut |s, f| {
        if bars.last().is_none_or(|b| b.0 != s) {
            if let Some((_, b)) = bars.last() {
                b.finish_and_clear();
            }
            bars.push((s, progress_bar(s.as_str())));
        }
        if let Some((_, b)) = bars.last() {
            b.set_position((f * 1000.0) as u64);
        }
    })?;
    if let Some((_, b)) = bars.last() {
        b.finish_and_clear();
    }
    for r in &day.runs {
        eprintln!("  {}: {:.1} s", r.strategy, r.wall_seconds);
    }
    eprintln!(
        "  re-pack bound at {} samples: {:.1} s",
        day.bound.len(),
        day.bound_wall_seconds
    );
    let stem = path
        .file_stem()
        .map_or_else(|| "scenario".into(), |s| s.to_string_lossy().into_owned());
    let chart = match per_seed {
        true => args.out.join(format!("{stem}-seed{seed}.svg")),
        false => args.out.join(format!("{stem}.svg")),
    };
    let bound: Vec<(f64, f64)> = day
        .bound
        .iter()
        .filter_map(|b| b.cost_per_hour.map(|c| (b.hours, c)))
        .collect();
    let title = format!(
        "{}: cost per hour; dashed: re-pack lower bound, hourly, {} s solves",
        day.scenario,
        suite::BOUND_TIME_LIMIT
    );
    let label = "re-pack lower bound".to_string();
    charts::write_suite_chart(&chart, &title, &day.runs, &bound, &label)?;
    eprintln!("  wrote {}", chart.display());
    day.chart = Some(chart.display().to_string());
    Ok(day)
}

/// Per scenario, one row per figure: the three strategies, then joiner and Karpenter Balanced over
/// Karpenter.
pub fn suite_table(report: &SuiteReport) -> String {
    type Row = (&'static str, fn(&RunReport) -> f64, usize);
    #[rustfmt::skip]
    let rows: [Row; 10] = [
        ("total cost $", |r| r.summary.total_cost, 2),
        ("$ / served pod-h", |r| r.summary.cost_per_served_pod_hour, 4),
        ("pending pod-h", |r| r.summary.pending_pod_hours, 2),
        ("pending p95 s", |r| r.summary.pending_seconds.p95, 1),
        ("pending p99 s", |r| r.summary.pending_seconds.p99, 1),
        ("pods evicted", |r| r.summary.pods_evicted as f64, 0),
        ("  by interruption", |r| r.summary.pods_evicted_by_interruption as f64, 0),
        ("launched", |r| r.summary.instances_launched as f64, 0),
        ("peak nodes", |r| r.summary.peak_nodes as f64, 0),
        ("short-lived nodes", |r| r.summary.short_lived_nodes as f64, 0),
    ];
    let mut out = String::new();
    for day in &report.scenarios {
        out.push_str(&format!(
            "{} ({}, {:.0} h)\n",
            day.scenario, day.file, day.hours
        ));
        out.push_str(&format!("{:<18}", ""));
        for r in &day.runs {
            out.push_str(&format!("{:>19}", r.strategy));
        }
        out.push_str(&format!("{:>12}{:>12}\n", "joiner/K", "balanced/K"));
        for (name, f, digits) in rows {
            out.push_str(&format!("{name:<18}"));
            for r in &day.runs {
                out.push_str(&format!("{:>19.*}", digits, f(r)));
            }
            let base = f(&day.runs[1]);
            for i in [0, 2] {
                let cell = match base {
                    0.0 => "-".to_string(),
                    b => format!("{:.2}", f(&day.runs[i]) / b),
                };
                out.push_str(&format!("{cell:>12}"));
            }
            out.push('\n');
        }
        out.push('\n');
    }
    out.push_str(&over_seeds_table(&report.over_seeds));
    for f in &report.failed {
        out.push_str(&format!("failed: {}\n", f.error));
    }
    out
}

/// joiner's ratios over the seeds, median / worst per scenario; empty for a single seed.
fn over_seeds_table(rows: &[suite::SeedSummary]) -> String {
    if rows.is_empty() {
        return String::new();
    }
    let cell = |s: &suite::Spread| {
        let f = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.2}"));
        let zero = match s.over_zero {
            0 => String::new(),
            n => format!(" (+{n} over 0)"),
        };
        format!("{} / {}{zero}", f(s.median), f(s.worst))
    };
    let mut out = String::from(
        "joiner over the seeds, median / worst: $ per served pod-h, pods evicted over Karpenter \
         Balanced's, launches and pending pod-h over Karpenter's\n",
    );
    let w = rows
        .iter()
        .map(|r| r.scenario.len())
        .max()
        .unwrap_or(0)
        .max(8);
    out.push_str(&format!(
        "{:<w$}{:>6}{:>22}{:>22}{:>22}{:>22}\n",
        "scenario", "seeds", "$/served pod-h", "evicted / Balanced", "launched", "pending pod-h"
    ));
    for r in rows {
        out.push_str(&format!(
            "{:<w$}{:>6}{:>22}{:>22}{:>22}{:>22}\n",
            r.scenario,
            r.seeds.len(),
            cell(&r.cost_per_served_pod_hour),
            cell(&r.pods_evicted_vs_balanced),
            cell(&r.instances_launched),
            cell(&r.pending_pod_hours),
        ));
    }
    out
}

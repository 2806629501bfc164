//! `joiner bench`: generated pod batches planned against a catalog by the MILP and by greedy in
//! the same run. Every (mix, pod count, seed) is one case; with several seeds each (mix, pod
//! count) is summarised over them (median, p90 and worst gap and cost ratio, see
//! [`super::bench_summary`]), since one draw says little about the next. Table, JSON or YAML.

use std::process::ExitCode;
use std::time::Instant;

use clap::Args;
use serde::Serialize;

use joiner::catalog::{CapacityType, Catalog};
use joiner::optimizer::{self, Plan, PlanStatus, SolveSettings, Strategy};

use super::bench_summary::{self, Summary};
use super::output::{write_stdout, OutputArg};
use super::progress::Progress;

#[derive(Debug, Args)]
pub struct BenchArgs {
    /// Pod counts to run, comma separated.
    #[arg(long, value_delimiter = ',', default_value = "100,1000,5000,10000")]
    pub pods: Vec<usize>,
    /// Bundled catalog to plan against (us-east-1, us-west-2 or eu-west-1).
    #[arg(long, default_value = "us-east-1")]
    pub region: String,
    /// MILP time limit per case, seconds.
    #[arg(long, default_value_t = 10.0)]
    pub time_limit: f64,
    /// Seeds of the generated pods, comma separated, each a number or a range `A-B`: the same
    /// seed gives the same workload. With more than one, each mix and pod count is summarised
    /// over the seeds.
    #[arg(long, alias = "seed", value_delimiter = ',', default_value = "42", value_parser = parse_seeds)]
    pub seeds: Vec<Vec<u64>>,
    /// The pod mixes, comma separated: Karpenter's diverse benchmark mix; its generic pods alone
    /// (no placement rules: plain bin packing); one whose rules are all preferences (preferred
    /// pod anti-affinity per node and per zone, priced by the cost weights); service Deployments
    /// of 20-25 replicas (40% with a required zone spread, 15% with required hostname
    /// anti-affinity, 10% on-demand only); or small batches of 2 to 8 such Deployments.
    #[arg(long, value_enum, value_delimiter = ',', default_value = "diverse")]
    pub mix: Vec<Mix>,
    /// Plan against the catalog's on-demand offerings only, so that the ratio to greedy measures
    /// packing alone, not spot against on-demand.
    #[arg(long)]
    pub on_demand_only: bool,
    #[command(flatten)]
    pub output: OutputArg,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Mix {
    Diverse,
    Generic,
    Preferred,
    Deployments,
    Small,
}

impl Mix {
    /// The mix as `--mix` and the JSON name it (both lowercase its variant).
    pub(super) fn name(self) -> String {
        format!("{self:?}").to_lowercase()
    }
}

/// `7`, or `1-20` for every seed from 1 to 20.
pub(super) fn parse_seeds(s: &str) -> Result<Vec<u64>, String> {
    let number = |t: &str| {
        t.trim()
            .parse::<u64>()
            .map_err(|_| format!("{t:?} is not a seed (a number, or a range like 1-20)"))
    };
    match s.split_once('-') {
        None => Ok(vec![number(s)?]),
        Some((a, b)) => {
            let (a, b) = (number(a)?, number(b)?);
            if a > b || b - a >= 10_000 {
                return Err(format!("{s:?} is not a range of at most 10,000 seeds"));
            }
            Ok((a..=b).collect())
        }
    }
}

/// The benchmark's outcome: the catalog, every case, and a summary per mix and pod count.
#[derive(Debug, Serialize)]
struct Report {
    region: String,
    on_demand_only: bool,
    instance_types: usize,
    offerings: usize,
    seeds: Vec<u64>,
    time_limit_s: f64,
    cases: Vec<Case>,
    summaries: Vec<Summary>,
}

/// One mix, pod count and seed, MILP against greedy.
#[derive(Debug, Clone, Serialize)]
pub(super) struct Case {
    pub mix: Mix,
    pub seed: u64,
    pub pods: usize,
    pub pod_classes: usize,
    pub milp_seconds: f64,
    pub milp_cost_per_hour: f64,
    pub lower_bound: f64,
    /// The MILP plan's relative gap to its certified lower bound.
    pub gap: f64,
    pub greedy_seconds: f64,
    pub greedy_cost_per_hour: f64,
    /// MILP cost / greedy cost.
    pub cost_ratio: f64,
    pub unschedulable: usize,
    pub greedy_unschedulable: usize,
    pub status: PlanStatus,
    pub milp_objective: f64,
    pub greedy_objective: f64,
    /// What the MILP's solve noted: where its plan and its bound came from.
    pub notes: Vec<String>,
}

pub fn run(args: BenchArgs) -> anyhow::Result<ExitCode> {
    let time_limit = super::seconds("--time-limit", args.time_limit)?;
    let mut catalog = Catalog::bundled(&args.region)?;
    if args.on_demand_only {
        for t in &mut catalog.instance_types {
            t.offerings
                .retain(|o| o.capacity_type == CapacityType::OnDemand);
        }
        catalog.instance_types.retain(|t| !t.offerings.is_empty());
    }
    let seeds: Vec<u64> = args.seeds.iter().flatten().copied().collect();
    let mut report = Report {
        region: args.region.clone(),
        on_demand_only: args.on_demand_only,
        instance_types: catalog.instance_types.len(),
        offerings: catalog
            .instance_types
            .iter()
            .map(|t| t.offerings.len())
            .sum(),
        seeds: seeds.clone(),
        time_limit_s: args.time_limit,
        cases: Vec::new(),
        summaries: Vec::new(),
    };
    let table = !args.output.is_document();
    if table {
        write_stdout(&header(&report))?;
    }
    let total = args.mix.len() * args.pods.len() * seeds.len();
    let mut progress = Progress::start(
        "bench",
        total,
        &format!(
            "{total} cases, MILP (limit {}s) and greedy each",
            args.time_limit
        ),
    );
    for &mix in &args.mix {
        for &n in &args.pods {
            let first = report.cases.len();
            for &seed in &seeds {
                progress.phase(&format!("{} {n} pods seed {seed}", mix.name()));
                let case = one_case(mix, seed, &catalog, n, time_limit)?;
                progress.phase_done(&format!(
                    "gap {:.2}%, milp/greedy {:.3}, milp {:.2} s",
                    case.gap * 100.0,
                    case.cost_ratio,
                    case.milp_seconds
                ));
                if table {
                    write_stdout(&row(&case))?;
                }
                report.cases.push(case);
            }
            if seeds.len() > 1 {
                report
                    .summaries
                    .push(bench_summary::summarise(&report.cases[first..]));
            }
        }
    }
    progress.finish(&format!("{} cases", report.cases.len()));
    if table && !report.summaries.is_empty() {
        write_stdout(&bench_summary::table(&report.summaries))?;
    }
    if !table {
        args.output.print(&report, String::new)?;
    }
    Ok(ExitCode::SUCCESS)
}

/// Solves `n` pods of the mix with the MILP, then with greedy.
fn one_case(
    mix: Mix,
    seed: u64,
    catalog: &Catalog,
    n: usize,
    time_limit: std::time::Duration,
) -> anyhow::Result<Case> {
    let snapshot = match mix {
        Mix::Diverse => joiner::workload::diverse(n, seed),
        Mix::Generic => joiner::workload::generic(n, seed),
        Mix::Preferred => joiner::workload::preferring(n, seed),
        Mix::Deployments => joiner::workload::deployments(n, seed),
        Mix::Small => joiner::workload::small(n, seed),
    };
    let mut settings = SolveSettings {
        time_limit,
        ..Default::default()
    };
    let t = Instant::now();
    let milp = optimizer::solve(&snapshot, catalog, &settings)?;
    let milp_seconds = t.elapsed().as_secs_f64();
    settings.strategy = Strategy::Greedy;
    let t = Instant::now();
    let greedy = optimizer::solve(&snapshot, catalog, &settings)?;
    // greedy's own time excludes the bound it also computes; report the plan time from the solver
    let greedy_seconds = t.elapsed().as_secs_f64().min(greedy.solver.seconds);
    Ok(case(
        (mix, seed, n),
        &milp,
        milp_seconds,
        &greedy,
        greedy_seconds,
    ))
}

fn case(
    (mix, seed, n): (Mix, u64, usize),
    milp: &Plan,
    milp_seconds: f64,
    greedy: &Plan,
    greedy_seconds: f64,
) -> Case {
    Case {
        mix,
        seed,
        pods: n,
        pod_classes: milp.solver.pod_classes,
        milp_seconds,
        milp_cost_per_hour: milp.cost_per_hour,
        lower_bound: milp.lower_bound,
        gap: milp.solver.gap,
        greedy_seconds,
        greedy_cost_per_hour: greedy.cost_per_hour,
        cost_ratio: milp.cost_per_hour / greedy.cost_per_hour.max(1e-9),
        unschedulable: milp.unschedulable.len(),
        greedy_unschedulable: greedy.unschedulable.len(),
        status: milp.solver.status,
        milp_objective: milp.objective,
        greedy_objective: greedy.objective,
        notes: milp.solver.notes.clone(),
    }
}

fn header(r: &Report) -> String {
    format!(
        "catalog {}{}: {} instance types, {} offerings\n\
         {:>11} {:>5} {:>6} {:>7} {:>8} {:>10} {:>10} {:>7} {:>8} {:>10} {:>7} {:>5} {:>9} {:>9} {:>10}\n",
        r.region,
        if r.on_demand_only { " (on-demand only)" } else { "" },
        r.instance_types,
        r.offerings,
        "mix",
        "seed",
        "pods",
        "classes",
        "milp_s",
        "milp_$/h",
        "bound_$/h",
        "gap%",
        "greedy_s",
        "greedy_$/h",
        "m/g",
        "unsch",
        "status",
        "milp_obj",
        "greedy_obj"
    )
}

fn row(c: &Case) -> String {
    format!(
        "{:>11} {:>5} {:>6} {:>7} {:>8.3} {:>10.4} {:>10.4} {:>7.2} {:>8.3} {:>10.4} {:>7.3} \
         {:>5} {:>9} {:>9.4} {:>10.4}\n",
        c.mix.name(),
        c.seed,
        c.pods,
        c.pod_classes,
        c.milp_seconds,
        c.milp_cost_per_hour,
        c.lower_bound,
        c.gap * 100.0,
        c.greedy_seconds,
        c.greedy_cost_per_hour,
        c.cost_ratio,
        c.unschedulable,
        c.status.as_str(),
        c.milp_objective,
        c.greedy_objective
    )
}

#[cfg(test)]
mod tests {
    use super::parse_seeds;

    #[test]
    fn seeds_are_numbers_or_ranges() {
        assert_eq!(parse_seeds("7"), Ok(vec![7]));
        assert_eq!(parse_seeds("1-4"), Ok(vec![1, 2, 3, 4]));
        assert!(parse_seeds("4-1").is_err());
        assert!(parse_seeds("x").unwrap_err().contains("\"x\""));
    }
}

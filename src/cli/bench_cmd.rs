//! `joiner bench`: the diverse-mix benchmark against a catalog, MILP and greedy in the same run, as
//! a table of solve seconds, plan cost, lower bound and the ratios between them, or as JSON or
//! YAML.

use std::process::ExitCode;
use std::time::Instant;

use clap::Args;
use serde::Serialize;

use joiner::catalog::Catalog;
use joiner::optimizer::{self, Plan, PlanStatus, SolveSettings, Strategy};

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
    /// Seed of the generated pods: the same seed gives the same workload.
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// The pod mix: Karpenter's diverse benchmark mix, its generic pods alone (no placement rules:
    /// plain bin packing), or one whose rules are all preferences (preferred pod anti-affinity per
    /// node and per zone, priced by the cost weights).
    #[arg(long, value_enum, default_value_t = Mix::Diverse)]
    pub mix: Mix,
    #[command(flatten)]
    pub output: OutputArg,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Mix {
    Diverse,
    Generic,
    Preferred,
}

/// The benchmark's outcome: the catalog and workload, and one case per pod count.
#[derive(Debug, Serialize)]
struct Report {
    region: String,
    instance_types: usize,
    offerings: usize,
    seed: u64,
    mix: Mix,
    time_limit_s: f64,
    cases: Vec<Case>,
}

/// One pod count, MILP against greedy.
#[derive(Debug, Serialize)]
struct Case {
    pods: usize,
    pod_classes: usize,
    milp_seconds: f64,
    milp_cost_per_hour: f64,
    lower_bound: f64,
    /// The MILP plan's relative gap to its certified lower bound.
    gap: f64,
    greedy_seconds: f64,
    greedy_cost_per_hour: f64,
    /// MILP cost / greedy cost.
    cost_ratio: f64,
    unschedulable: usize,
    status: PlanStatus,
    milp_objective: f64,
    greedy_objective: f64,
}

pub fn run(args: BenchArgs) -> anyhow::Result<ExitCode> {
    let time_limit = super::seconds("--time-limit", args.time_limit)?;
    let catalog = Catalog::bundled(&args.region)?;
    let mut report = Report {
        region: args.region.clone(),
        instance_types: catalog.instance_types.len(),
        offerings: catalog
            .instance_types
            .iter()
            .map(|t| t.offerings.len())
            .sum(),
        seed: args.seed,
        mix: args.mix,
        time_limit_s: args.time_limit,
        cases: Vec::new(),
    };
    let table = !args.output.is_document();
    if table {
        write_stdout(&header(&report))?;
    }
    let mut progress = Progress::start(
        "bench",
        args.pods.len(),
        &format!(
            "{} cases, MILP (limit {}s) and greedy each",
            args.pods.len(),
            args.time_limit
        ),
    );
    for &n in &args.pods {
        progress.phase(&format!("{n} pods"));
        let case = one_case(&args, &catalog, n, time_limit)?;
        progress.phase_done(&format!(
            "{n} pods: milp {:.3} s, greedy {:.3} s",
            case.milp_seconds, case.greedy_seconds
        ));
        if table {
            write_stdout(&row(&case))?;
        }
        report.cases.push(case);
    }
    progress.finish(&format!("{} cases", report.cases.len()));
    if !table {
        args.output.print(&report, String::new)?;
    }
    Ok(ExitCode::SUCCESS)
}

/// Solves `n` pods of the mix with the MILP, then with greedy.
fn one_case(
    args: &BenchArgs,
    catalog: &Catalog,
    n: usize,
    time_limit: std::time::Duration,
) -> anyhow::Result<Case> {
    let snapshot = match args.mix {
        Mix::Diverse => joiner::workload::diverse(n, args.seed),
        Mix::Generic => joiner::workload::generic(n, args.seed),
        Mix::Preferred => joiner::workload::preferring(n, args.seed),
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
    Ok(case(n, &milp, milp_seconds, &greedy, greedy_seconds))
}

fn case(n: usize, milp: &Plan, milp_seconds: f64, greedy: &Plan, greedy_seconds: f64) -> Case {
    Case {
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
        status: milp.solver.status,
        milp_objective: milp.objective,
        greedy_objective: greedy.objective,
    }
}

fn header(r: &Report) -> String {
    format!(
        "catalog {}: {} instance types, {} offerings; seed {}\n\
         {:>6} {:>7} {:>9} {:>10} {:>10} {:>7} {:>9} {:>10} {:>10} {:>6} {:>6} {:>9} {:>10}\n",
        r.region,
        r.instance_types,
        r.offerings,
        r.seed,
        "pods",
        "classes",
        "milp_s",
        "milp_$/h",
        "bound_$/h",
        "gap%",
        "greedy_s",
        "greedy_$/h",
        "milp/greedy",
        "unsch",
        "status",
        "milp_obj",
        "greedy_obj"
    )
}

fn row(c: &Case) -> String {
    format!(
        "{:>6} {:>7} {:>9.3} {:>10.4} {:>10.4} {:>7.2} {:>9.3} {:>10.4} {:>10.3} {:>6} {:>6} \
        {:>9.4} {:>10.4}\n",
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

//! `joiner bench`: the diverse-mix benchmark against a catalog, MILP and greedy in the same run, as a
//! table of solve seconds, plan cost, lower bound and the ratios between them.

use std::process::ExitCode;
use std::time::Instant;

use clap::Args;

use joiner::catalog::Catalog;
use joiner::optimizer::{self, SolveSettings, Strategy};

#[derive(Debug, Args)]
pub struct BenchArgs {
    /// Pod counts to run, comma separated.
    #[arg(long, value_delimiter = ',', default_value = "100,1000,5000,10000")]
    pub pods: Vec<usize>,
    #[arg(long, default_value = "us-east-1")]
    pub region: String,
    /// MILP time limit per case, seconds.
    #[arg(long, default_value_t = 10.0)]
    pub time_limit: f64,
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// The pod mix: Karpenter's diverse benchmark mix, its generic pods alone (no placement rules:
    /// plain bin packing), or one whose rules are all preferences (preferred pod anti-affinity per
    /// node and per zone, priced by the cost weights).
    #[arg(long, value_enum, default_value_t = Mix::Diverse)]
    pub mix: Mix,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Mix {
    Diverse,
    Generic,
    Preferred,
}

pub fn run(args: BenchArgs) -> anyhow::Result<ExitCode> {
    let catalog = Catalog::bundled(&args.region)?;
    let offerings: usize = catalog
        .instance_types
        .iter()
        .map(|t| t.offerings.len())
        .sum();
    println!(
        "catalog {}: {} instance types, {} offerings; seed {}",
        args.region,
        catalog.instance_types.len(),
        offerings,
        args.seed
    );
    println!(
        "{:>6} {:>7} {:>9} {:>10} {:>10} {:>7} {:>9} {:>10} {:>10} {:>6} {:>6} {:>9} {:>10}",
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
    );
    for &n in &args.pods {
        let snapshot = match args.mix {
            Mix::Diverse => joiner::workload::diverse(n, args.seed),
            Mix::Generic => joiner::workload::generic(n, args.seed),
            Mix::Preferred => joiner::workload::preferring(n, args.seed),
        };
        let mut settings = SolveSettings {
            time_limit: super::seconds("--time-limit", args.time_limit)?,
            ..Default::default()
        };
        let t = Instant::now();
        let milp = optimizer::solve(&snapshot, &catalog, &settings)?;
        let milp_s = t.elapsed().as_secs_f64();
        settings.strategy = Strategy::Greedy;
        let t = Instant::now();
        let greedy = optimizer::solve(&snapshot, &catalog, &settings)?;
        // greedy's own time excludes the bound it also computes; report the plan time from the solver
        let greedy_s = t.elapsed().as_secs_f64().min(greedy.solver.seconds);
        println!(
            "{:>6} {:>7} {:>9.3} {:>10.4} {:>10.4} {:>7.2} {:>9.3} {:>10.4} {:>10.3} {:>6} {:>6} {:>9.4} {:>10.4}",
            n,
            milp.solver.pod_classes,
            milp_s,
            milp.cost_per_hour,
            milp.lower_bound,
            milp.solver.gap * 100.0,
            greedy_s,
            greedy.cost_per_hour,
            milp.cost_per_hour / greedy.cost_per_hour.max(1e-9),
            milp.unschedulable.len(),
            milp.solver.status,
            milp.objective,
            greedy.objective
        );
    }
    Ok(ExitCode::SUCCESS)
}

//! `joiner solve` and `joiner solve-dump`: read a snapshot and a catalog, plan, and print the plan
//! as JSON, YAML or a table (exit 3 when it leaves pods unschedulable), or write the model and its
//! summary for inspection.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::Args;

use joiner::catalog::Catalog;
use joiner::optimizer::{self, Plan, SolveSettings, Strategy};

use super::output::{OutputArg, UnschedulableGate};

/// The decision inputs every command reads: a snapshot and a catalog.
#[derive(Debug, Args)]
pub struct InputArgs {
    /// Cluster snapshot: a YAML stream of Kubernetes objects (`kubectl get ... -o yaml`).
    #[arg(long, env = "JOINER_SNAPSHOT")]
    pub snapshot: PathBuf,
    /// Catalog JSON file (docs/catalog.md); overrides --region.
    #[arg(long, env = "JOINER_CATALOG")]
    pub catalog: Option<PathBuf>,
    /// Bundled catalog to use when --catalog is not given.
    #[arg(long, env = "JOINER_REGION", default_value = "us-east-1")]
    pub region: String,
}

impl InputArgs {
    pub fn load(&self) -> anyhow::Result<(joiner::domain::ClusterSnapshot, Catalog)> {
        let snapshot = joiner::snapshot::load_snapshot(&self.snapshot)?;
        for w in &snapshot.warnings {
            tracing::warn!("{w}");
        }
        let catalog = match &self.catalog {
            Some(path) => Catalog::from_file(path)?,
            None => Catalog::bundled(&self.region)?,
        };
        Ok((snapshot, catalog))
    }
}

#[derive(Debug, Args)]
pub struct SolveArgs {
    #[command(flatten)]
    pub input: InputArgs,
    /// Decision method.
    #[arg(long, value_enum, default_value = "milp")]
    pub strategy: Strategy,
    /// Solver wall-clock limit in seconds.
    #[arg(long, env = "JOINER_TIME_LIMIT", default_value_t = 10.0)]
    pub time_limit: f64,
    /// Relative MIP gap at which the solver stops.
    #[arg(long, env = "JOINER_GAP", default_value_t = 0.01)]
    pub gap: f64,
    /// HiGHS threads.
    #[arg(long, env = "JOINER_THREADS", default_value_t = 1)]
    pub threads: u32,
    /// Fallback offerings listed per new node.
    #[arg(long, default_value_t = 20)]
    pub max_fallbacks: usize,
}

impl SolveArgs {
    pub fn settings(&self) -> anyhow::Result<SolveSettings> {
        let s = SolveSettings {
            strategy: self.strategy,
            time_limit: super::seconds("--time-limit", self.time_limit)?,
            gap: self.gap,
            threads: self.threads,
            max_fallbacks: self.max_fallbacks,
            lower_bound: true,
            fault: None,
            searches: 1,
        };
        s.validate()?;
        Ok(s)
    }

    pub fn load(&self) -> anyhow::Result<(joiner::domain::ClusterSnapshot, Catalog)> {
        self.input.load()
    }
}

/// `joiner solve`: the solve flags, the output format and the unschedulable gate.
#[derive(Debug, Args)]
pub struct SolveCmd {
    #[command(flatten)]
    pub args: SolveArgs,
    #[command(flatten)]
    pub output: OutputArg,
    #[command(flatten)]
    pub gate: UnschedulableGate,
}

pub fn solve(cmd: SolveCmd) -> anyhow::Result<ExitCode> {
    let settings = cmd.args.settings()?;
    let (snapshot, catalog) = cmd.args.load()?;
    let plan = optimizer::solve(&snapshot, &catalog, &settings)?;
    cmd.output.print(&plan, || table(&plan))?;
    Ok(cmd
        .gate
        .exit(plan.unschedulable.iter().map(|u| u.pod.as_str())))
}

pub fn dump(args: SolveArgs, out: PathBuf) -> anyhow::Result<ExitCode> {
    let mut settings = args.settings()?;
    settings.strategy = Strategy::Milp;
    let (snapshot, catalog) = args.load()?;
    let solved = optimizer::solve_detailed(&snapshot, &catalog, &settings)?;
    if let Some(dir) = out.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    let summary = solved
        .model
        .as_ref()
        .map(|m| optimizer::milp::dump::summary(&solved.problem, m));
    if let Some(m) = &solved.model {
        optimizer::milp::dump::write_model(&solved.problem, m, &out).map_err(anyhow::Error::msg)?;
    }
    let json = serde_json::json!({ "model": summary, "plan": solved.plan });
    let path = out.with_extension("json");
    std::fs::write(&path, serde_json::to_string_pretty(&json)? + "\n")
        .with_context(|| format!("writing {}", path.display()))?;
    eprintln!("wrote {}.{{lp,mps,json}}", out.display());
    Ok(ExitCode::SUCCESS)
}

/// The plan as a person reads it at a terminal.
pub fn table(plan: &Plan) -> String {
    let mut s = String::new();
    let w = &mut s;
    use std::fmt::Write as _;
    let _ = writeln!(
        w,
        "{:<12} {:<10} {:<20} {:<12} {:<10} {:>9} {:>5}",
        "NODE", "NODEPOOL", "INSTANCE TYPE", "ZONE", "CAPACITY", "$/HOUR", "PODS"
    );
    for n in &plan.nodes {
        let _ = writeln!(
            w,
            "{:<12} {:<10} {:<20} {:<12} {:<10} {:>9.4} {:>5}",
            n.id,
            n.nodepool,
            n.instance_type,
            n.zone,
            n.capacity_type.as_str(),
            n.price,
            n.pods.len()
        );
    }
    for e in &plan.existing {
        let _ = writeln!(
            w,
            "{:<12} {:<10} {:<20} {:<12} {:<10} {:>9} {:>5}",
            e.node,
            "(existing)",
            "",
            "",
            "",
            "",
            e.pods.len()
        );
    }
    for v in &plan.volumes {
        let _ = writeln!(w, "volume {} in {} (for {})", v.claim, v.zone, v.pod);
    }
    for u in &plan.unschedulable {
        let _ = writeln!(w, "unschedulable {}: {} ({:?})", u.pod, u.message, u.reason);
    }
    let _ = writeln!(
        w,
        "\n{} new nodes, ${:.4}/h; objective {:.4}, lower bound {:.4}, gap {:.2}%; {} pod \
        classes; {} in {:.2}s",
        plan.nodes.len(),
        plan.cost_per_hour,
        plan.objective,
        plan.lower_bound,
        plan.solver.gap * 100.0,
        plan.solver.pod_classes,
        plan.solver.status,
        plan.solver.seconds
    );
    for note in &plan.solver.notes {
        let _ = writeln!(w, "note: {note}");
    }
    s
}

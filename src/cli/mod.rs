//! Subcommands: `solve`, `solve-dump`, `consolidate`, `controller`, `simulate`, `bench`,
//! `bench-disruption`, `catalog build`, `catalog live` and `crds`. Each reads its inputs, calls the
//! pure decision core, and prints or writes the result; nothing here makes decisions. docs/cli.md
//! describes the commands, their output formats and exit codes.

mod bench_cmd;
mod bench_disruption_cmd;
mod catalog_cmd;
mod consolidate_cmd;
mod controller_cmd;
mod crds_cmd;
pub mod output;
mod progress;
mod simulate_cmd;
mod solve_cmd;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(
    name = "joiner",
    version,
    about = "Plans EC2 capacity for Kubernetes by mixed-integer optimization"
)]
pub struct Cli {
    /// Log filter (tracing env-filter syntax).
    // the highs crate logs a warning for every solve stopped by its time limit, which joiner
    // reports itself
    #[arg(
        long,
        global = true,
        env = "JOINER_LOG",
        default_value = "warn,highs=error"
    )]
    pub log_level: String,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Plan the cheapest placement of the snapshot's pending pods.
    Solve(solve_cmd::SolveCmd),
    /// Solve with the MILP and write the model (`.lp`, `.mps`) and a JSON summary.
    SolveDump {
        #[command(flatten)]
        args: solve_cmd::SolveArgs,
        /// Output path without extension, e.g. models/binpack.
        #[arg(long)]
        out: std::path::PathBuf,
    },
    /// Decide which running nodes to delete or replace (consolidation, emptiness, drift, expiry).
    Consolidate(consolidate_cmd::ConsolidateArgs),
    /// Run the diverse-mix benchmark, MILP against greedy.
    Bench(bench_cmd::BenchArgs),
    /// Run the scale-in benchmark, MILP consolidation against Karpenter's baseline.
    BenchDisruption(bench_disruption_cmd::BenchDisruptionArgs),
    /// Simulate a cluster over time with joiner's decisions and Karpenter's, side by side.
    Simulate(simulate_cmd::SimulateArgs),
    /// Run the in-cluster autoscaler against a Kubernetes API server.
    Controller(Box<controller_cmd::ControllerArgs>),
    /// Build or inspect instance catalogs.
    #[command(subcommand)]
    Catalog(catalog_cmd::CatalogCommand),
    /// Print the NodePool, NodeClaim and EC2NodeClass CustomResourceDefinitions.
    Crds(crds_cmd::CrdsArgs),
}

/// A `--time-limit` in seconds as a `Duration`: positive, finite and no larger than a `Duration`
/// holds (`1e20` must be an error, not a panic).
pub(crate) fn seconds(flag: &str, value: f64) -> anyhow::Result<std::time::Duration> {
    anyhow::ensure!(
        value.is_finite() && value > 0.0,
        "{flag} must be a positive number of seconds"
    );
    std::time::Duration::try_from_secs_f64(value)
        .map_err(|_| anyhow::anyhow!("{flag} {value} is too large"))
}

pub fn init_tracing(filter: &str) {
    let filter = tracing_subscriber::EnvFilter::try_new(filter).unwrap_or_else(|_| "warn".into());
    // colours only on a terminal: `kubectl logs` and log shippers get plain text
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(ansi)
        .init();
}

pub fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Catalog(c) => catalog_cmd::run(c),
        Command::Bench(a) => bench_cmd::run(a),
        Command::BenchDisruption(a) => bench_disruption_cmd::run(a),
        Command::Consolidate(a) => consolidate_cmd::run(a),
        Command::Controller(a) => controller_cmd::run(*a),
        Command::Crds(a) => crds_cmd::run(a),
        Command::Simulate(a) => simulate_cmd::run(a),
        Command::Solve(a) => solve_cmd::solve(a),
        Command::SolveDump { args, out } => solve_cmd::dump(args, out),
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::Cli;

    /// Every flag of every subcommand, with the path of subcommands that leads to it.
    fn flags(cmd: &clap::Command, path: &str, out: &mut Vec<(String, Option<String>)>) {
        for arg in cmd.get_arguments() {
            let id = arg.get_id().as_str();
            if id == "help" || id == "version" {
                continue;
            }
            let help = arg.get_help().map(|h| h.to_string());
            out.push((format!("{path} --{id}"), help));
        }
        for sub in cmd.get_subcommands() {
            flags(sub, &format!("{path} {}", sub.get_name()), out);
        }
    }

    #[test]
    fn the_command_line_is_well_formed() {
        Cli::command().debug_assert();
    }

    #[test]
    fn every_flag_has_help() {
        let mut all = Vec::new();
        flags(&Cli::command(), "joiner", &mut all);
        assert!(all.len() > 60, "only {} flags found", all.len());
        let missing: Vec<&str> = all
            .iter()
            .filter(|(_, help)| help.as_deref().is_none_or(|h| h.trim().is_empty()))
            .map(|(flag, _)| flag.as_str())
            .collect();
        assert!(missing.is_empty(), "flags without help: {missing:?}");
    }

    #[test]
    fn the_controller_requires_a_cloud_provider() {
        let cmd = Cli::command();
        let controller = cmd
            .find_subcommand("controller")
            .expect("a controller subcommand");
        let arg = controller
            .get_arguments()
            .find(|a| a.get_id() == "cloud_provider")
            .expect("--cloud-provider");
        assert!(arg.is_required_set() && arg.get_default_values().is_empty());
    }
}

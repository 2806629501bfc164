//! Subcommands: `solve`, `solve-dump`, `consolidate`, `controller`, `simulate`, `bench`,
//! `bench-disruption`, `catalog build`, `catalog live`, `crds` and `top`. Each reads its inputs,
//! calls the pure decision core, and prints or writes the result; nothing here makes decisions
//! (`top` shows them, read-only). docs/cli.md
//! describes the commands, their output formats and exit codes.

mod bench_cmd;
mod bench_disruption_cmd;
mod bench_summary;
mod catalog_cmd;
mod consolidate_cmd;
mod controller_cmd;
mod crds_cmd;
pub mod output;
mod progress;
mod simulate_cmd;
mod solve_cmd;
mod top_cmd;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(
    name = "joiner",
    version,
    about = "Plans EC2 capacity for Kubernetes by mixed-integer optimization"
)]
pub struct Cli {
    /// Log filter (tracing env-filter syntax, e.g. `debug` or `info,joiner::cloud=debug`);
    /// `info,highs=error` for `controller`, `warn,highs=error` for the other commands. A filter
    /// that does not parse is an error.
    #[arg(long, global = true, env = "JOINER_LOG", value_parser = log_filter)]
    pub log_level: Option<String>,
    /// Log line format: `text` for people, `json` (one object a line) for log shippers.
    #[arg(
        long,
        global = true,
        env = "JOINER_LOG_FORMAT",
        value_enum,
        default_value = "text"
    )]
    pub log_format: LogFormat,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines, coloured on a terminal.
    Text,
    /// One JSON object a line: `timestamp`, `level`, `target`, `message` and the event's fields.
    Json,
}

/// The levels a bare directive may name. The env-filter syntax also reads a bare word as a target
/// at every level, so a misspelt level (`infoo`) would silently keep every line of joiner out;
/// a target is written `target=level` instead.
const LEVELS: [&str; 6] = ["trace", "debug", "info", "warn", "error", "off"];

/// `--log-level`, checked: every directive parses, and a bare one is a level.
fn log_filter(text: &str) -> Result<String, String> {
    for directive in text.split(',').map(str::trim).filter(|d| !d.is_empty()) {
        let bare = !directive.contains(['=', ':', '[']);
        if bare && !LEVELS.contains(&directive.to_ascii_lowercase().as_str()) {
            return Err(format!(
                "`{directive}` is not a level ({}); a target is written `target=level`",
                LEVELS.join(", ")
            ));
        }
    }
    tracing_subscriber::EnvFilter::try_new(text)
        .map(|_| text.to_string())
        .map_err(|e| format!("not a tracing filter: {e}"))
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
    /// Watch a cluster read-only: its nodes, their cost, and what joiner would do now.
    Top(Box<top_cmd::TopArgs>),
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

/// Installs the log subscriber `cli` asks for, on stderr.
pub fn init_tracing(cli: &Cli) {
    // the highs crate logs a warning for every solve stopped by its time limit, which joiner
    // reports itself; the controller tells what it does at info, the one-shot commands only
    // what goes wrong
    let default = match cli.command {
        Command::Controller(_) => "info,highs=error",
        _ => "warn,highs=error",
    };
    let text = cli.log_level.as_deref().unwrap_or(default);
    // the flag's parser checked it: this only falls back if the environment changed under us
    let filter = tracing_subscriber::EnvFilter::try_new(text).unwrap_or_else(|_| default.into());
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match cli.log_format {
        LogFormat::Text => {
            // colours only on a terminal: `kubectl logs` and log shippers get plain text
            let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
            builder.with_ansi(ansi).init();
        }
        LogFormat::Json => builder
            .json()
            .flatten_event(true)
            .with_current_span(false)
            .with_span_list(false)
            .init(),
    }
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
        Command::Top(a) => top_cmd::run(*a),
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
    fn a_log_filter_is_levels_and_target_directives() {
        for good in [
            "info",
            "WARN",
            "info,highs=error",
            "joiner::cloud=debug",
            "off",
        ] {
            assert_eq!(super::log_filter(good).as_deref(), Ok(good));
        }
        for bad in ["verbose", "info,infoo", "joiner=loud"] {
            let e = super::log_filter(bad).expect_err(bad);
            assert!(!e.is_empty(), "{bad}");
        }
        assert!(super::log_filter("verbose")
            .unwrap_err()
            .contains("`verbose`"));
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

//! The `joiner` command line. Parses flags (with environment fallbacks), validates them into typed
//! settings once, and hands off to the subcommand modules in `cli/`.

mod cli;

use clap::Parser;

fn main() -> std::process::ExitCode {
    let args = cli::Cli::parse();
    cli::init_tracing(&args.log_level);
    match cli::run(args) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::ExitCode::from(2)
        }
    }
}

//! The `joiner` command line. Parses flags (with environment fallbacks), validates them into typed
//! settings once, and hands off to the subcommand modules in `cli/`. Exit codes: 0 success, 1 a
//! runtime error (its chain on stderr), 2 a usage error (clap's), 3 pods left unschedulable
//! (`solve`, `consolidate`; docs/cli.md).

mod cli;

use clap::Parser;

use cli::output::Exit;

fn main() -> std::process::ExitCode {
    let args = match cli::Cli::try_parse() {
        Ok(args) => args,
        Err(e) => {
            // --help and --version come this way too, and succeed
            let _ = e.print();
            return if e.use_stderr() {
                Exit::Usage
            } else {
                Exit::Success
            }
            .into();
        }
    };
    cli::init_tracing(&args);
    match cli::run(args) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            Exit::Runtime.into()
        }
    }
}

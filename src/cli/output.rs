//! What every command shares about its result: the output format of structured results
//! (`-o json|yaml|table`), the exit codes, and the gate that turns pods left unschedulable into
//! exit code 3. docs/cli.md documents all three.

use std::io::Write;
use std::process::ExitCode;

use clap::{Args, ValueEnum};
use serde::Serialize;

/// How a command's structured result is printed on stdout.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Output {
    /// Pretty-printed JSON, for programs.
    Json,
    /// YAML, for programs and people.
    Yaml,
    /// Aligned columns, for people at a terminal.
    Table,
}

/// The `-o/--output` flag of commands with a structured result.
#[derive(Debug, Clone, Copy, Args)]
pub struct OutputArg {
    /// Output format on stdout. Progress and notes go to stderr, so stdout holds only the result.
    #[arg(short = 'o', long = "output", value_enum, default_value = "table")]
    pub format: Output,
}

impl OutputArg {
    /// Whether the result is a document (JSON or YAML) rather than the table.
    pub fn is_document(self) -> bool {
        self.format != Output::Table
    }

    /// Prints `value` as JSON or YAML, or `table()` as it is.
    pub fn print<T: Serialize>(
        self,
        value: &T,
        table: impl FnOnce() -> String,
    ) -> anyhow::Result<()> {
        let text = match self.format {
            Output::Json => serde_json::to_string_pretty(value)? + "\n",
            Output::Yaml => serde_yaml_ng::to_string(value)?,
            Output::Table => table(),
        };
        write_stdout(&text)
    }
}

/// Writes to stdout; a reader that stops early (`joiner solve ... | head`) is not an error.
pub fn write_stdout(text: &str) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => Ok(other?),
    }
}

/// joiner's exit codes (docs/cli.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// The command did what it was asked.
    Success = 0,
    /// A runtime error: bad input file, solver failure, API error. The error chain is on stderr.
    Runtime = 1,
    /// A usage error: unknown flag, missing or malformed value (clap's message on stderr).
    Usage = 2,
    /// The plan leaves pods unschedulable (`solve`, `consolidate`), unless `--allow-unschedulable`.
    Unschedulable = 3,
}

impl From<Exit> for ExitCode {
    fn from(e: Exit) -> ExitCode {
        ExitCode::from(e as u8)
    }
}

/// The `--allow-unschedulable` flag: whether pods left unschedulable fail the command.
#[derive(Debug, Clone, Copy, Args)]
pub struct UnschedulableGate {
    /// Exit 0 even when pods are left unschedulable. Without it such a result exits 3, so that a CI
    /// pipeline can gate on it.
    #[arg(long)]
    pub allow_unschedulable: bool,
}

impl UnschedulableGate {
    /// Exit 3 when `pods` (their `namespace/name`) is not empty and the flag is off; the pods are
    /// named on stderr either way.
    pub fn exit<'a>(self, pods: impl IntoIterator<Item = &'a str>) -> ExitCode {
        let pods: Vec<&str> = pods.into_iter().collect();
        if pods.is_empty() {
            return Exit::Success.into();
        }
        let shown = match pods.len() {
            0..=5 => pods.join(", "),
            n => format!("{} and {} more", pods[..5].join(", "), n - 5),
        };
        let count = match pods.len() {
            1 => "1 pod".to_string(),
            n => format!("{n} pods"),
        };
        if self.allow_unschedulable {
            eprintln!("{count} left unschedulable: {shown}");
            return Exit::Success.into();
        }
        eprintln!(
            "error: {count} left unschedulable: {shown} \
            (exit code 3; --allow-unschedulable exits 0)"
        );
        Exit::Unschedulable.into()
    }
}

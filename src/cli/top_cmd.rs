//! `joiner top`: watches a cluster read-only and shows its nodes, what they cost, and what joiner
//! would do now, in a terminal UI; `--once` prints one frame (JSON, YAML or the screen as text)
//! and exits. The view itself is `joiner::top`; this is its command line and its terminal.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Args;
use crossterm::event::{self, Event, KeyCode, KeyEvent, KeyEventKind, KeyModifiers};

use joiner::catalog::Catalog;
use joiner::top::decide::Limits;
use joiner::top::model::{Key, View};
use joiner::top::watch::{self, Latest, Status, WatchSettings};
use joiner::top::{render, TopError};

use super::output::{write_stdout, Output, OutputArg};

#[derive(Debug, Args)]
pub struct TopArgs {
    /// Kubeconfig file; in-cluster configuration (or ~/.kube/config) when omitted.
    #[arg(long)]
    kubeconfig: Option<PathBuf>,
    /// Kubeconfig context to use instead of the current one.
    #[arg(long)]
    context: Option<String>,
    /// Catalog JSON file (docs/catalog.md); overrides --region.
    #[arg(long, env = "JOINER_CATALOG")]
    catalog: Option<PathBuf>,
    /// Bundled catalog to use when --catalog is not given.
    #[arg(long, env = "JOINER_REGION", default_value = "us-east-1")]
    region: String,
    /// Namespace of joiner's cost-weight ConfigMap (joiner-cost-weights).
    #[arg(long, env = "SYSTEM_NAMESPACE", default_value = "kube-system")]
    namespace: String,
    /// Wall-clock limit in seconds of each decision a frame shows (the pending pods' plan,
    /// consolidation, the re-packing bound).
    #[arg(long, default_value_t = 2.0)]
    time_limit: f64,
    /// Seconds between frames when nothing changes (ages and clocks move on).
    #[arg(long, default_value_t = 10.0)]
    refresh: f64,
    /// Print one frame and exit, instead of the interactive view.
    #[arg(long)]
    once: bool,
    /// Seconds `--once` waits for the watches to sync and the first frame.
    #[arg(long, default_value_t = 60.0)]
    wait: f64,
    /// Width in columns of `--once -o table`.
    #[arg(long, default_value_t = 140)]
    width: u16,
    #[command(flatten)]
    output: OutputArg,
}

pub fn run(args: TopArgs) -> anyhow::Result<ExitCode> {
    let limit = super::seconds("--time-limit", args.time_limit)?;
    let catalog = match &args.catalog {
        Some(path) => Catalog::from_file(path)?,
        None => Catalog::bundled(&args.region)?,
    };
    let latest = watch::start(WatchSettings {
        kubeconfig: args.kubeconfig.clone(),
        context: args.context.clone(),
        namespace: args.namespace.clone(),
        catalog,
        limits: Limits {
            solve: limit,
            consolidate: limit,
            bound: limit,
        },
        refresh: super::seconds("--refresh", args.refresh)?,
    })?;
    if args.once {
        once(&args, &latest)?;
    } else {
        interactive(&latest)?;
    }
    Ok(ExitCode::SUCCESS)
}

fn once(args: &TopArgs, latest: &Latest) -> anyhow::Result<()> {
    let wait = super::seconds("--wait", args.wait)?;
    let frame = match latest.wait(wait) {
        Status::Ready { frame, .. } => frame,
        Status::Failed(e) => return Err(TopError::Watch(e).into()),
        Status::Connecting => return Err(TopError::NoFrame(wait).into()),
    };
    if args.output.format == Output::Table {
        return write_stdout(&render::text(&frame, args.width).map_err(TopError::Terminal)?);
    }
    args.output.print(&*frame, String::new)
}

fn interactive(latest: &Latest) -> Result<(), TopError> {
    let mut terminal = ratatui::try_init().map_err(TopError::Terminal)?;
    let result = ui(&mut terminal, latest);
    ratatui::restore();
    result
}

/// Redraws on a new frame, a key or a resize, until a quit key.
fn ui(terminal: &mut ratatui::DefaultTerminal, latest: &Latest) -> Result<(), TopError> {
    let mut view = View::default();
    let mut drawn = None;
    let mut dirty = true;
    loop {
        let status = latest.get();
        let seq = match &status {
            Status::Ready { seq, .. } => Some(*seq),
            _ => None,
        };
        if dirty || seq != drawn {
            terminal
                .draw(|f| render::draw(f, &status, &view))
                .map_err(TopError::Terminal)?;
            drawn = seq;
            dirty = false;
        }
        if !event::poll(Duration::from_millis(200)).map_err(TopError::Terminal)? {
            continue;
        }
        match event::read().map_err(TopError::Terminal)? {
            Event::Key(k) if k.kind == KeyEventKind::Press => {
                let Some(key) = key(k) else { continue };
                let quit = match &status {
                    Status::Ready { frame, .. } => view.key(key, frame),
                    _ => key == Key::Quit,
                };
                if quit {
                    return Ok(());
                }
                dirty = true;
            }
            Event::Resize(..) => dirty = true,
            _ => {}
        }
    }
}

fn key(k: KeyEvent) -> Option<Key> {
    Some(match k.code {
        KeyCode::Char('c') if k.modifiers.contains(KeyModifiers::CONTROL) => Key::Quit,
        KeyCode::Char('q') => Key::Quit,
        KeyCode::Char('s') => Key::Sort,
        KeyCode::Char('p') => Key::Pool,
        KeyCode::Up | KeyCode::Char('k') => Key::Up,
        KeyCode::Down | KeyCode::Char('j') => Key::Down,
        KeyCode::Enter => Key::Toggle,
        KeyCode::Esc => Key::Back,
        _ => return None,
    })
}

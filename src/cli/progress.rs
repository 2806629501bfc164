//! Progress of long commands on stderr: one line per phase (`[2/3] ...`) and a closing line with
//! the elapsed time, whatever stderr is; on a terminal, a spinner with the running phase's elapsed
//! time as well. Nothing goes to stdout, so `-o json` stays parseable.

use std::io::IsTerminal;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};

pub struct Progress {
    command: &'static str,
    total: usize,
    done: usize,
    started: Instant,
    phase_started: Instant,
    spinner: ProgressBar,
}

impl Progress {
    /// Starts a command of `total` phases and says so.
    pub fn start(command: &'static str, total: usize, what: &str) -> Progress {
        let spinner = if std::io::stderr().is_terminal() {
            let s = ProgressBar::new_spinner();
            if let Ok(style) = ProgressStyle::with_template("{spinner} {msg} ({elapsed})") {
                s.set_style(style);
            }
            s.enable_steady_tick(Duration::from_millis(120));
            s
        } else {
            ProgressBar::hidden()
        };
        let p = Progress {
            command,
            total,
            done: 0,
            started: Instant::now(),
            phase_started: Instant::now(),
            spinner,
        };
        p.line(&format!("{command}: {what}"));
        p
    }

    /// Begins the next phase.
    pub fn phase(&mut self, what: &str) {
        self.done += 1;
        self.phase_started = Instant::now();
        let text = format!("[{}/{}] {what}", self.done, self.total);
        self.line(&format!("{}: {text}", self.command));
        self.spinner.set_message(text);
    }

    /// Says how the running phase ended and how long it took.
    pub fn phase_done(&self, what: &str) {
        let seconds = self.phase_started.elapsed().as_secs_f64();
        self.line(&format!(
            "{}: [{}/{}] {what} ({seconds:.1} s)",
            self.command, self.done, self.total
        ));
    }

    /// The closing line, with the whole command's time.
    pub fn finish(self, what: &str) {
        self.spinner.finish_and_clear();
        let seconds = self.started.elapsed().as_secs_f64();
        eprintln!("{}: {what} in {seconds:.1} s", self.command);
    }

    fn line(&self, text: &str) {
        self.spinner.suspend(|| eprintln!("{text}"));
    }
}

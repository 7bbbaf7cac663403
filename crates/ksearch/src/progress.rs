//! Progress of a run on stderr: one redrawn line on a terminal, a line per round otherwise.

use std::io::{IsTerminal, Write};

use ksearch_engine::{Observer, Progress};

#[derive(Debug)]
pub(crate) struct ProgressLine {
    tty: bool,
    quiet: bool,
    budget: Option<u64>,
    round: u64,
    best: Option<f64>,
    action: String,
    spent_usd: f64,
}

impl ProgressLine {
    pub(crate) fn new(quiet: bool, budget: Option<u64>) -> Self {
        Self {
            tty: std::io::stderr().is_terminal(),
            quiet,
            budget,
            round: 0,
            best: None,
            action: String::new(),
            spent_usd: 0.0,
        }
    }

    fn draw(&self, status: &str) {
        let budget = self.budget.map_or_else(String::new, |b| format!("/{b}"));
        let best = self.best.map_or_else(|| "-".into(), |b| format!("{b:.2}×"));
        let cost = if self.spent_usd > 0.0 {
            format!(" · ${:.4}", self.spent_usd)
        } else {
            String::new()
        };
        let line = format!(
            "round {}{budget} · best {best}{cost} · {} · {status}",
            self.round, self.action
        );
        let mut err = std::io::stderr().lock();
        if self.tty {
            let shown: String = line.chars().take(120).collect();
            let _ = write!(err, "\r\x1b[2K{shown}");
        } else {
            let _ = writeln!(err, "{line}");
        }
        let _ = err.flush();
    }
}

impl Observer for ProgressLine {
    fn progress(&mut self, event: &Progress<'_>) {
        if self.quiet {
            return;
        }
        match event {
            Progress::CycleStarted { node, title, .. } => {
                self.action = format!("node {node}: {title}");
            }
            Progress::AttemptStarted { round, kind, .. } => {
                self.round = *round;
                if self.tty {
                    self.draw(&format!("{kind:?} …").to_lowercase());
                }
            }
            Progress::AttemptFinished {
                round,
                status,
                speedup,
                best_speedup,
                spent_usd,
            } => {
                self.round = *round;
                self.spent_usd = *spent_usd;
                if best_speedup.is_some() {
                    self.best = *best_speedup;
                }
                let s = speedup.map_or_else(String::new, |s| format!(" {s:.2}×"));
                self.draw(&format!("{status}{s}"));
            }
            Progress::CycleEnded { .. } => {}
            Progress::Stopped { reason } => {
                let mut err = std::io::stderr().lock();
                if self.tty {
                    let _ = writeln!(err);
                }
                let _ = writeln!(err, "{}", format!("stopped: {reason:?}").to_lowercase());
            }
        }
    }
}

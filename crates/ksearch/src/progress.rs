//! Progress of a run (and of `ksearch eval`) on stderr. On a terminal, one line redrawn by
//! indicatif: the round, the best speedup so far, what is being done (the proposer's work, or
//! the evaluation's phase and workload) and the time spent on it, with a line kept above it
//! for every finished round. Elsewhere (a log file, a pipe), a line for each round started,
//! each evaluation phase and each round finished. `--quiet` shows nothing.

use std::io::{IsTerminal, Write};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};
use ksearch_core::protocol::Phase;
use ksearch_core::record::AttemptKind;
use ksearch_engine::{Observer, Progress, StopReason};
use ksearch_eval::PhaseObserver;

/// Where progress goes: a redrawn line on a terminal, printed lines elsewhere, or nowhere.
#[derive(Debug, Clone)]
struct Output {
    bar: Option<ProgressBar>,
    quiet: bool,
    /// When the current step (a proposer call, an evaluation) started.
    step: Arc<Mutex<Instant>>,
}

impl Output {
    fn new(quiet: bool, lines: bool) -> Self {
        let bar = (!quiet && std::io::stderr().is_terminal()).then(|| {
            let bar = ProgressBar::new_spinner();
            bar.set_style(
                ProgressStyle::with_template("{spinner} {prefix}{msg} · {elapsed}")
                    .unwrap_or_else(|_| ProgressStyle::default_spinner()),
            );
            bar.enable_steady_tick(Duration::from_millis(200));
            bar
        });
        Self {
            bar,
            quiet: quiet || (!lines && !std::io::stderr().is_terminal()),
            step: Arc::new(Mutex::new(Instant::now())),
        }
    }

    /// A line that stays: above the redrawn one on a terminal.
    fn line(&self, text: &str) {
        if self.quiet {
            return;
        }
        let text = &*ksearch_core::printable::printable(text);
        match &self.bar {
            Some(bar) => bar.println(text),
            None => {
                let _ = writeln!(std::io::stderr().lock(), "{text}");
            }
        }
    }

    /// A new step: what it is, on the redrawn line (its clock restarted); on a log, a line when
    /// `log` says so.
    fn step(&self, prefix: &str, log: bool) {
        *self
            .step
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Instant::now();
        match &self.bar {
            Some(bar) => {
                bar.set_prefix(prefix.to_owned());
                bar.set_message("");
                bar.reset_elapsed();
            }
            None if log => self.line(prefix),
            None => {}
        }
    }

    fn elapsed(&self) -> Duration {
        self.step
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .elapsed()
    }

    /// Told each evaluation phase by the evaluator.
    fn phase_observer(&self) -> PhaseObserver {
        let out = self.clone();
        Box::new(move |phase, workload| {
            let what = phase_words(phase, workload);
            match &out.bar {
                Some(bar) => bar.set_message(format!(" · {what}")),
                None => out.line(&format!("  {what} ({:.1} s)", out.elapsed().as_secs_f64())),
            }
        })
    }

    fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

/// `checking workload `small``.
fn phase_words(phase: Phase, workload: Option<&str>) -> String {
    let verb = match phase {
        Phase::Compile => "compiling",
        Phase::Check => "checking",
        Phase::Timing => "timing",
        Phase::Recheck => "checking again after timing",
    };
    match workload {
        Some(w) => format!("{verb} workload `{w}`"),
        None => verb.to_owned(),
    }
}

/// The progress of `ksearch run` and `ksearch resume`.
#[derive(Debug)]
pub(crate) struct RunProgress {
    out: Output,
    budget: Option<u64>,
    round: u64,
    best: Option<f64>,
    action: String,
    spent_usd: f64,
    /// Rounds under way, each with its action and when it started: with several evaluations
    /// at once, a round's finished line names its own.
    started: std::collections::BTreeMap<u64, (String, Instant)>,
}

impl RunProgress {
    pub(crate) fn new(quiet: bool, budget: Option<u64>) -> Self {
        Self {
            out: Output::new(quiet, true),
            budget,
            round: 0,
            best: None,
            action: String::new(),
            spent_usd: 0.0,
            started: std::collections::BTreeMap::new(),
        }
    }

    /// The run's best so far when this session starts (a resume): shown from the first line,
    /// not `-` until a round finishes.
    pub(crate) fn with_best(mut self, best: Option<f64>) -> Self {
        self.best = best;
        self
    }

    /// For the evaluator: each phase of an evaluation, as it starts.
    pub(crate) fn phase_observer(&self) -> PhaseObserver {
        self.out.phase_observer()
    }

    /// A line before the run starts (its directory).
    pub(crate) fn note(&self, text: &str) {
        self.out.line(text);
    }

    fn head(&self) -> String {
        let budget = self.budget.map_or_else(String::new, |b| format!("/{b}"));
        let best = self.best.map_or_else(|| "-".into(), |b| format!("{b:.2}×"));
        let cost = if self.spent_usd > 0.0 {
            format!(" · ${:.4}", self.spent_usd)
        } else {
            String::new()
        };
        format!("round {}{budget} · best {best}{cost}", self.round)
    }
}

impl Observer for RunProgress {
    fn progress(&mut self, event: &Progress<'_>) {
        match event {
            Progress::Proposing { what } => {
                let head = self.head();
                self.out.step(&format!("{head} · asking for {what}"), false);
            }
            Progress::CycleStarted { node, title, .. } => {
                self.action = format!("node {node}: {title}");
            }
            Progress::AttemptStarted {
                round,
                kind,
                node,
                title,
            } => {
                self.round = *round;
                // Said here too: a resumed session's first round has no CycleStarted before it.
                self.action = format!("node {node}: {title}");
                self.started
                    .insert(*round, (self.action.clone(), Instant::now()));
                let line = if *kind == AttemptKind::Seed {
                    "measuring the seed (its speedup over the baseline is the run's starting point)"
                        .to_owned()
                } else {
                    format!("{} · {} · {}", self.head(), kind.as_str(), self.action)
                };
                self.out.step(&line, true);
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
                let (action, took) = match self.started.remove(round) {
                    Some((action, at)) => (action, at.elapsed().as_secs_f64()),
                    None => (self.action.clone(), self.out.elapsed().as_secs_f64()),
                };
                let line = if *round == 0 {
                    format!("seed {status}{s} over the baseline ({took:.1} s)")
                } else {
                    format!("{} · {action} · {status}{s} ({took:.1} s)", self.head())
                };
                self.out.line(&line);
            }
            Progress::CycleEnded { .. } => {}
            Progress::Caveats { caveats, .. } => {
                for caveat in *caveats {
                    self.out.line(&format!("caveat: {caveat}"));
                }
            }
            Progress::Stopped { reason } => {
                self.out.finish();
                self.out.line(&format!("stopped: {}", stop_words(*reason)));
            }
        }
    }
}

/// Why a session stopped, in words (the progress line's last line, the run's summary).
pub(crate) fn stop_words(reason: StopReason) -> &'static str {
    match reason {
        StopReason::Iterations => "round budget spent",
        StopReason::Time => "time budget spent",
        StopReason::Interrupted => "interrupted (resume to continue)",
        StopReason::Exhausted => "nothing left to try",
        StopReason::Cost => "cost cap reached (resume with a higher --max-cost to continue)",
        StopReason::UnusableModel => "the model's answers could not be used (try another model)",
    }
}

/// The progress of `ksearch eval`: the phase on a terminal, nothing elsewhere (the report
/// follows at once).
#[derive(Debug)]
pub(crate) struct EvalProgress {
    out: Output,
}

impl EvalProgress {
    pub(crate) fn new(what: &str) -> Self {
        let out = Output::new(false, false);
        out.step(what, false);
        Self { out }
    }

    pub(crate) fn phase_observer(&self) -> PhaseObserver {
        self.out.phase_observer()
    }
}

impl Drop for EvalProgress {
    fn drop(&mut self) {
        self.out.finish();
    }
}

#[cfg(test)]
mod tests {
    use super::phase_words;
    use ksearch_core::protocol::Phase;

    #[test]
    fn phases_read_as_what_is_being_done() {
        assert_eq!(phase_words(Phase::Compile, None), "compiling");
        assert_eq!(
            phase_words(Phase::Timing, Some("square1024")),
            "timing workload `square1024`"
        );
    }
}

//! Evaluating a round: the evaluation recorded as in flight before it starts, a lost one
//! counted, and what comes back admitted only when its numbers can be believed.

use super::*;

impl<'e> Engine<'e> {
    /// Evaluate the candidate of `round`, recording first that its evaluation is in flight. If
    /// the orchestrator has already died during this evaluation [`MAX_LOST_EVALUATIONS`]
    /// times, it is not run again: the outcome is `crashed`, saying so.
    pub(super) fn evaluate_round(
        &mut self,
        round: u64,
        source: &Source,
        contenders: Contenders<'_>,
    ) -> Result<Evaluation, EngineError> {
        if self.replay_abandons(round) {
            return Err(EvalError::Cancelled.into());
        }
        let lost = self
            .state
            .evaluating
            .filter(|f| f.round == round)
            .map_or(0, |f| f.lost);
        if lost >= MAX_LOST_EVALUATIONS {
            self.state.evaluating = None;
            return Ok(self.lost_evaluation(lost));
        }
        self.state.evaluating = Some(InFlight { round, lost });
        self.commit(&[], &[])?;
        let result = self.timed_evaluate(source, contenders);
        self.state.evaluating = None;
        self.settle(round, result)
    }

    /// What an evaluation of `round` that came back (or failed) is to the run: its numbers
    /// admitted, or a later round's judge failure recorded as this attempt's, or the error
    /// that stops the run.
    pub(super) fn settle(
        &mut self,
        round: u64,
        result: Result<Evaluation, EngineError>,
    ) -> Result<Evaluation, EngineError> {
        match result {
            Ok(mut evaluation) => {
                self.judge_failures = 0;
                self.note_other_toolchain(round, &mut evaluation);
                self.admit(round, evaluation)
            }
            // A later round's judge that fails (its harness, or the task's own code beside this
            // candidate, with which it shares the machine) fails this attempt: the seed's round
            // showed that both work, and a candidate can make them fail (a malformed message to
            // the judge, the device's memory held). Several in a row: the judge itself is
            // broken, and the run stops on the error.
            Err(EngineError::Eval(e @ (EvalError::Worker { .. } | EvalError::Task { .. })))
                if round > 0 && self.judge_failures + 1 < MAX_JUDGE_FAILURES =>
            {
                self.judge_failures += 1;
                let evaluation = self.unevaluated(
                    Status::RuntimeError,
                    format!("the evaluation failed beside this candidate, which is recorded as failing: {e}"),
                );
                self.admit(round, evaluation)
            }
            Err(e) => {
                // Abandoned (Ctrl-C) or failed, but the orchestrator did not die: say so on
                // disk, so that a resume runs it again as new. (Best effort: the error that
                // stops the run is the one to report.)
                let _ = self.commit(&[], &[]);
                Err(e)
            }
        }
    }

    /// An evaluation measured with another toolchain than the seed (a run resumed on another
    /// GPU, or after the compiler changed) carries a caveat saying both; the first of a session
    /// is also shown as it comes.
    fn note_other_toolchain(&mut self, round: u64, evaluation: &mut Evaluation) {
        let seed = self
            .seed_evaluation()
            .and_then(|e| e.result.compile.as_ref());
        let now = evaluation.result.compile.as_ref();
        let Some(caveat) = seed.zip(now).filter(|_| round > 0).and_then(|(seed, now)| {
            ksearch_core::caveats::other_toolchain(&now.compiler, &seed.compiler)
        }) else {
            return;
        };
        if !self.told_other_toolchain {
            self.told_other_toolchain = true;
            self.observer.progress(&Progress::Caveats {
                round,
                caveats: std::slice::from_ref(&caveat),
            });
        }
        evaluation.caveats.push(caveat);
    }

    /// The seed's evaluation, once measured: every later one is read beside it.
    pub(super) fn seed_evaluation(&self) -> Option<&Evaluation> {
        self.attempts
            .iter()
            .find(|a| a.round == 0)
            .and_then(|a| a.evaluation.as_ref())
    }

    /// The outcome of an evaluation that killed the orchestrator every time it ran.
    pub(super) fn lost_evaluation(&self, times: u32) -> Evaluation {
        self.unevaluated(
            Status::Crashed,
            format!(
                "the orchestrator (ksearch) died {times} times while this candidate was being evaluated, and the run was resumed each time; it is recorded as crashed and not evaluated again"
            ),
        )
    }

    /// An evaluation that measured nothing, with its status and why.
    pub(super) fn unevaluated(&self, status: Status, message: String) -> Evaluation {
        let baseline = self
            .seed_evaluation()
            .map(|e| e.baseline.clone())
            .unwrap_or_default();
        Evaluation {
            result: EvaluateResult {
                id: 0,
                status,
                message,
                compile: None,
                workloads: Vec::new(),
                phases: Phases::default(),
                output: CapturedOutput::default(),
                sandbox: None,
                described: Vec::new(),
            },
            speedup: None,
            speedup_vs_parent: None,
            baseline,
            wall_s: 0.0,
            load: None,
            caveats: Vec::new(),
        }
    }

    /// Admit an evaluation into the run: one holding a number that is not finite, or a time
    /// or speedup that is not positive, is not believed. It becomes `rejected`, saying which
    /// number, and none of its numbers are kept.
    pub(super) fn admit(&mut self, round: u64, e: Evaluation) -> Result<Evaluation, EngineError> {
        let Some(problem) = implausible(&e) else {
            return Ok(e);
        };
        self.event(&RunEvent::EvaluationNotAdmitted {
            round,
            problem: problem.clone(),
        })?;
        let compile = e
            .result
            .compile
            .map(|c| ksearch_core::protocol::CompileReport {
                seconds: if c.seconds.is_finite() {
                    c.seconds
                } else {
                    0.0
                },
                ..c
            });
        Ok(Evaluation {
            result: EvaluateResult {
                id: e.result.id,
                status: Status::Rejected,
                message: format!(
                    "the evaluation reported {problem} (it said `{}`: {}); no number from it is kept",
                    e.result.status, e.result.message
                ),
                compile,
                workloads: Vec::new(),
                phases: Phases::default(),
                output: e.result.output,
                sandbox: e.result.sandbox,
                described: e.result.described,
            },
            speedup: None,
            speedup_vs_parent: None,
            baseline: e.baseline,
            wall_s: if e.wall_s.is_finite() && e.wall_s >= 0.0 {
                e.wall_s
            } else {
                0.0
            },
            load: e.load.filter(|l| l.load_1m.is_finite()),
            caveats: e.caveats,
        })
    }

    pub(super) fn timed_evaluate(
        &mut self,
        source: &Source,
        contenders: Contenders<'_>,
    ) -> Result<Evaluation, EngineError> {
        let started = Instant::now();
        // The seed's evaluation sets the limit of every later one (unless the user set it).
        let seed_wall = self.seed_evaluation().map(|e| e.wall_s);
        let (limit, why) = self.config.eval.round_timeout(seed_wall);
        let result = self.evaluator.evaluate(
            &self.task,
            source,
            contenders,
            &crate::eval_options(&self.config.eval, limit),
        );
        self.state.eval_s += started.elapsed().as_secs_f64();
        let mut evaluation = result?;
        if evaluation.result.status == Status::Timeout {
            evaluation.result.message = format!("{} (the limit: {why})", evaluation.result.message);
        }
        Ok(evaluation)
    }
}

/// A paired ratio whose numbers are all finite, or none: a ratio that would be infinite (a
/// time of zero) is not a measurement.
#[cfg(test)]
pub(super) fn finite(c: Option<PairedRatio>) -> Option<PairedRatio> {
    c.filter(PairedRatio::is_finite)
}

/// Why an evaluation cannot be believed, if it cannot: a number that is not finite, or a time
/// or speedup that is not positive.
pub(super) fn implausible(e: &Evaluation) -> Option<String> {
    if let Some(at) = non_finite_path(e) {
        return Some(format!("a number that is not finite (`{at}`)"));
    }
    for (name, s) in [
        ("speedup", &e.speedup),
        ("speedup_vs_parent", &e.speedup_vs_parent),
    ] {
        let Some(s) = s else { continue };
        if s.geomean <= 0.0 {
            return Some(format!("a speedup that is not positive (`{name}.geomean`)"));
        }
        for w in &s.workloads {
            if w.speedup <= 0.0 || w.candidate_ms <= 0.0 || w.other_ms <= 0.0 {
                return Some(format!(
                    "a time or speedup that is not positive (`{name}`, workload `{}`)",
                    w.workload
                ));
            }
        }
    }
    for w in &e.result.workloads {
        for t in &w.timings {
            let s = &t.stats;
            if s.median_ms <= 0.0 || s.samples_ms.iter().any(|x| *x <= 0.0) {
                return Some(format!(
                    "a time that is not positive (workload `{}`, {})",
                    w.name, t.label
                ));
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use ksearch_core::protocol::{ContenderTiming, Role, WorkloadReport};
    use ksearch_core::score::{Speedup, WorkloadSpeedup};
    use ksearch_core::stats::TimingStats;

    fn evaluation(candidate_ms: f64, baseline_ms: f64) -> Evaluation {
        let timing = |role, ms: f64| ContenderTiming {
            role,
            label: format!("{role:?}"),
            stats: TimingStats::from_samples(vec![ms; 5], 1),
        };
        Evaluation {
            result: EvaluateResult {
                id: 1,
                status: Status::Passed,
                message: String::new(),
                compile: None,
                workloads: vec![WorkloadReport {
                    name: "small".into(),
                    status: Status::Passed,
                    message: None,
                    errors: None,
                    timings: vec![
                        timing(Role::Candidate, candidate_ms),
                        timing(Role::Baseline, baseline_ms),
                    ],
                }],
                phases: Phases::default(),
                output: CapturedOutput::default(),
                sandbox: None,
                described: Vec::new(),
            },
            speedup: Some(Speedup {
                geomean: baseline_ms / candidate_ms,
                workloads: vec![WorkloadSpeedup {
                    workload: "small".into(),
                    candidate_ms,
                    other_ms: baseline_ms,
                    speedup: baseline_ms / candidate_ms,
                }],
            }),
            speedup_vs_parent: None,
            baseline: "reference".into(),
            wall_s: 1.0,
            load: None,
            caveats: Vec::new(),
        }
    }

    #[test]
    fn plausible_evaluations_are_admitted_and_impossible_ones_named() {
        assert_eq!(implausible(&evaluation(0.5, 1.0)), None);
        // A time of zero: an infinite speedup.
        let e = implausible(&evaluation(0.0, 1.0)).unwrap();
        assert!(
            e.contains("not finite") && e.contains("speedup.geomean"),
            "{e}"
        );
        let mut nan = evaluation(0.5, 1.0);
        nan.result.workloads[0].timings[1].stats.p90_ms = f64::NAN;
        let e = implausible(&nan).unwrap();
        assert!(
            e.contains("result.workloads[0].timings[1].stats.p90_ms"),
            "{e}"
        );
        let mut negative = evaluation(0.5, 1.0);
        negative.result.workloads[0].timings[0].stats.samples_ms[2] = -0.1;
        assert!(implausible(&negative).unwrap().contains("not positive"));
        let mut zero_speedup = evaluation(0.5, 1.0);
        zero_speedup.speedup.as_mut().unwrap().geomean = 0.0;
        assert!(implausible(&zero_speedup).unwrap().contains("not positive"));
    }

    #[test]
    fn paired_ratios_that_are_not_finite_are_dropped() {
        let c = |ratio, lo, hi| {
            Some(PairedRatio {
                ratio,
                interval: (lo, hi),
                verdict: Gate::Better,
            })
        };
        assert!(finite(c(1.5, 1.2, 1.8)).is_some());
        assert!(finite(c(f64::INFINITY, 1.2, 1.8)).is_none());
        assert!(finite(c(1.5, f64::NAN, 1.8)).is_none());
        assert!(finite(c(1.5, 1.2, f64::INFINITY)).is_none());
        assert!(finite(c(0.0, 0.0, 0.0)).is_none());
        assert!(finite(None).is_none());
    }
}

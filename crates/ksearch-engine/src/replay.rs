//! Replaying a recorded run: evaluations come from its store instead of a worker, so a replay
//! (with the LLM journal answering every model call) retraces the run without network or
//! hardware. A request the record does not have means the replay diverged: an error, never a
//! guess. A session that ran several evaluations at once is replayed through the executor
//! side: the recorded evaluations finish in the recorded order.

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::AtomicBool;

use ksearch_core::record::{AttemptRecord, Evaluation};
use ksearch_core::task::{Source, Task};
use ksearch_eval::executor::{Executor, Finished, Job};
use ksearch_eval::{Contenders, EvalError, EvalOptions, Evaluator};
use ksearch_store::content_hash;

/// One recorded `evaluation_finished` event: which round finished next, where, and when.
#[derive(Debug, Clone, PartialEq)]
pub struct FinishedRecord {
    pub round: u64,
    pub slot: u32,
    pub place: String,
    pub started_unix: f64,
    pub finished_unix: f64,
    pub retried: Vec<String>,
}

/// Answers evaluations from a recorded run, in the order they were made.
#[derive(Debug)]
pub struct ReplayEvaluator {
    /// By candidate source hash: the recorded evaluations of that source (with their rounds),
    /// oldest first.
    recorded: BTreeMap<String, Vec<(u64, Evaluation)>>,
    /// By round: the recorded attempt's source hash.
    hashes: BTreeMap<u64, String>,
    /// Set for a run with sessions of several evaluations at once: the order they finished.
    finishing: Option<VecDeque<FinishedRecord>>,
    /// Submitted and not yet finished, by round.
    in_flight: BTreeMap<u64, Result<Evaluation, EvalError>>,
}

impl ReplayEvaluator {
    /// From the recorded run's attempts, in round order.
    pub fn from_attempts(attempts: &[AttemptRecord]) -> Self {
        let mut recorded: BTreeMap<String, Vec<(u64, Evaluation)>> = BTreeMap::new();
        let mut hashes = BTreeMap::new();
        for a in attempts {
            hashes.insert(a.round, a.source_hash.clone());
            if let Some(e) = &a.evaluation {
                recorded
                    .entry(a.source_hash.clone())
                    .or_default()
                    .push((a.round, e.clone()));
            }
        }
        Self {
            recorded,
            hashes,
            finishing: None,
            in_flight: BTreeMap::new(),
        }
    }

    /// Finish the evaluations of the sessions that ran several at once in this order (the
    /// recorded `evaluation_finished` events, all sessions).
    #[must_use]
    pub fn finishing(mut self, order: Vec<FinishedRecord>) -> Self {
        self.finishing = Some(order.into());
        self
    }

    /// The recorded evaluation of `round`, if it is of `candidate`.
    fn take_round(&mut self, round: u64, candidate: &Source) -> Result<Evaluation, EvalError> {
        let hash = content_hash(&candidate.text);
        let diverged = || EvalError::Worker {
            message: format!(
                "the recorded run has no evaluation of {} ({hash}) in round {round}; the replay diverged",
                candidate.file
            ),
        };
        if self.hashes.get(&round) != Some(&hash) {
            return Err(diverged());
        }
        let list = self.recorded.get_mut(&hash).ok_or_else(diverged)?;
        let at = list
            .iter()
            .position(|(r, _)| *r == round)
            .ok_or_else(diverged)?;
        Ok(list.remove(at).1)
    }
}

impl Evaluator for ReplayEvaluator {
    fn evaluate(
        &mut self,
        _task: &Task,
        candidate: &Source,
        _contenders: Contenders<'_>,
        _options: &EvalOptions,
    ) -> Result<Evaluation, EvalError> {
        let hash = content_hash(&candidate.text);
        match self.recorded.get_mut(&hash) {
            Some(list) if !list.is_empty() => Ok(list.remove(0).1),
            _ => Err(EvalError::Worker {
                message: format!(
                    "the recorded run has no evaluation of {} ({hash}); the replay diverged",
                    candidate.file
                ),
            }),
        }
    }

    fn executor(&mut self) -> Option<&mut dyn Executor> {
        if self.finishing.is_some() {
            Some(self)
        } else {
            None
        }
    }
}

impl Executor for ReplayEvaluator {
    fn slots(&self) -> usize {
        // The replay runs each session with its recorded number of evaluations at once.
        usize::MAX
    }

    fn describe(&self) -> String {
        "the recorded run's evaluations, in the order they finished".into()
    }

    fn in_flight(&self) -> usize {
        self.in_flight.len()
    }

    fn submit(&mut self, job: Job) -> Result<(), EvalError> {
        let result = self.take_round(job.round, &job.candidate);
        self.in_flight.insert(job.round, result);
        Ok(())
    }

    /// The next recorded evaluation to finish. One the replay has not started is a
    /// divergence, reported as that round's error.
    fn next(&mut self, _stop: &AtomicBool) -> Option<Finished> {
        if self.in_flight.is_empty() {
            return None;
        }
        let next = self.finishing.as_mut()?.pop_front()?;
        let (round, result) = match self.in_flight.remove(&next.round) {
            Some(result) => (next.round, result),
            None => {
                let (&round, _) = self.in_flight.iter().next()?;
                let started: Vec<u64> = self.in_flight.keys().copied().collect();
                self.in_flight.remove(&round);
                (
                    round,
                    Err(EvalError::Worker {
                        message: format!(
                            "the recorded run finished round {} next, which the replay has not started (it is evaluating rounds {started:?})",
                            next.round
                        ),
                    }),
                )
            }
        };
        Some(Finished {
            round,
            slot: next.slot as usize,
            place: next.place,
            started_unix: next.started_unix,
            finished_unix: next.finished_unix,
            retried: next.retried,
            result,
        })
    }

    fn cancel_all(&mut self) {
        self.in_flight.clear();
    }
}

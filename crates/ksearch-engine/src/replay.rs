//! Replaying a recorded run: evaluations come from its store instead of a worker, so a replay
//! (with the LLM journal answering every model call) retraces the run without network or
//! hardware. A request the record does not have means the replay diverged: an error, never a
//! guess.

use std::collections::BTreeMap;

use ksearch_core::record::{AttemptRecord, Evaluation};
use ksearch_core::task::{Source, Task};
use ksearch_eval::{Contenders, EvalError, EvalOptions, Evaluator};
use ksearch_store::content_hash;

/// Answers evaluations from a recorded run, in the order they were made.
#[derive(Debug)]
pub struct ReplayEvaluator {
    /// By candidate source hash: the recorded evaluations of that source, oldest first.
    recorded: BTreeMap<String, Vec<Evaluation>>,
}

impl ReplayEvaluator {
    /// From the recorded run's attempts, in round order.
    pub fn from_attempts(attempts: &[AttemptRecord]) -> Self {
        let mut recorded: BTreeMap<String, Vec<Evaluation>> = BTreeMap::new();
        for a in attempts {
            if let Some(e) = &a.evaluation {
                recorded
                    .entry(a.source_hash.clone())
                    .or_default()
                    .push(e.clone());
            }
        }
        Self { recorded }
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
            Some(list) if !list.is_empty() => Ok(list.remove(0)),
            _ => Err(EvalError::Worker {
                message: format!(
                    "the recorded run has no evaluation of {} ({hash}); the replay diverged",
                    candidate.file
                ),
            }),
        }
    }
}

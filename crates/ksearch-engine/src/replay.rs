//! Replaying a recorded run: evaluations come from its store instead of a worker, so a replay
//! (with the LLM journal answering every model call) retraces the run without network or
//! hardware. A request the record does not have means the replay diverged: an error, never a
//! guess.

use std::collections::BTreeMap;
use std::path::Path;

use ksearch_core::record::Evaluation;
use ksearch_core::task::{Source, Task};
use ksearch_eval::{Compare, EvalError, EvalOptions, Evaluator};
use ksearch_store::{RunStore, StoreError, content_hash};

/// Answers evaluations from a recorded run, in the order they were made.
#[derive(Debug)]
pub struct ReplayEvaluator {
    /// By candidate source hash: the recorded evaluations of that source, oldest first.
    recorded: BTreeMap<String, Vec<Evaluation>>,
}

impl ReplayEvaluator {
    pub fn from_run(dir: &Path) -> Result<Self, StoreError> {
        let snap = RunStore::open(dir)?.snapshot()?;
        let mut recorded: BTreeMap<String, Vec<Evaluation>> = BTreeMap::new();
        for a in snap.attempts {
            if let Some(e) = a.evaluation {
                recorded.entry(a.source_hash).or_default().push(e);
            }
        }
        Ok(Self { recorded })
    }
}

impl Evaluator for ReplayEvaluator {
    fn evaluate(
        &mut self,
        _task: &Task,
        candidate: &Source,
        _compare: Compare<'_>,
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

//! Several evaluations at once: an [`Executor`] takes owned [`Job`]s and hands back each
//! [`Finished`] evaluation as it ends, in the order they end. Two kinds:
//!
//! - [`LocalPool`]: slots on this machine, each a long-lived thread with its own
//!   [`crate::LocalEvaluator`] (its own judge), its own CPUs (the thread's affinity, which the
//!   judge inherits) and, for a GPU task, its own GPU (`CUDA_VISIBLE_DEVICES`);
//! - [`SlurmExecutor`]: each evaluation a Slurm job running `ksearch eval-job` on a node, its
//!   request and result as files in a directory the nodes share.
//!
//! A candidate and the contenders it is paired with are always in one request, so they are
//! timed together on the same device by construction.

mod devices;
mod job_file;
mod local;
mod slurm;
mod slurm_cli;

use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::{SystemTime, UNIX_EPOCH};

use ksearch_core::task::{Source, Task};

use crate::error::EvalError;
use crate::evaluator::{Contenders, EvalOptions, Evaluation};

pub(crate) use devices::process_cpus;
pub use devices::{SlotPlan, local_slots, slots_note, visible_gpus};
pub use job_file::{JOB_FORMAT, JobError, JobFile, JobOutcome, run_job_file};
pub use local::{EvaluatorFactory, LocalPool, with_env};
pub use slurm::{NodeOptions, SlurmExecutor, SlurmSettings};

/// One evaluation, owned, so that it can go to another thread or another machine.
#[derive(Debug, Clone)]
pub struct Job {
    /// The attempt's round (0: the seed); finished evaluations are matched to it.
    pub round: u64,
    pub task: Arc<Task>,
    pub candidate: Source,
    pub parent: Option<Source>,
    pub incumbent: Option<Source>,
    /// Time the task's `[[comparisons]]` too (a run's seed).
    pub comparisons: bool,
    pub options: EvalOptions,
}

impl Job {
    /// The contenders it is timed with, borrowed.
    pub fn contenders(&self) -> Contenders<'_> {
        Contenders {
            parent: self.parent.as_ref(),
            incumbent: self.incumbent.as_ref(),
            comparisons: self.comparisons,
        }
    }
}

/// An evaluation that ended.
#[derive(Debug)]
pub struct Finished {
    pub round: u64,
    /// The slot it ran in: 0 to [`Executor::slots`] − 1.
    pub slot: usize,
    /// Where it ran, in words: `cpu 1`, `cuda device 0, cpus 0-7`, `slurm job 12 on node3`.
    pub place: String,
    /// When it started and ended, seconds since the Unix epoch.
    pub started_unix: f64,
    pub finished_unix: f64,
    /// Each run of it that was lost and started again before this one (a cancelled or
    /// preempted Slurm job), in words.
    pub retried: Vec<String>,
    pub result: Result<Evaluation, EvalError>,
}

/// Runs up to [`Executor::slots`] evaluations at once.
pub trait Executor {
    /// The most evaluations in flight at once.
    fn slots(&self) -> usize;
    /// Where it evaluates, in one line (`2 slots on this machine: cpu 0, cpu 1`).
    fn describe(&self) -> String;
    /// Evaluations in flight.
    fn in_flight(&self) -> usize;
    /// Start `job` in a free slot (there must be one). An error means nothing can be started
    /// at all (the scheduler refused the job); an evaluation's own failure comes back from
    /// [`Executor::next`].
    fn submit(&mut self, job: Job) -> Result<(), EvalError>;
    /// The next evaluation to end, waiting for it. `None` when nothing is in flight, or as soon
    /// as `stop` is set (the evaluations in flight are then still running).
    fn next(&mut self, stop: &AtomicBool) -> Option<Finished>;
    /// Abandon every evaluation in flight (Ctrl-C): its worker or job is stopped and nothing
    /// comes back from it.
    fn cancel_all(&mut self);
}

/// Now, in seconds since the Unix epoch.
pub(crate) fn now_unix() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// One evaluation through `executor`, waited for (a run's seed): what [`crate::Evaluator`]
/// asks of it. Abandoned (`Cancelled`) once `cancel` is set.
pub(crate) fn evaluate_one(
    executor: &mut dyn Executor,
    cancel: Option<&AtomicBool>,
    task: &Task,
    candidate: &Source,
    contenders: Contenders<'_>,
    options: &EvalOptions,
) -> Result<Evaluation, EvalError> {
    let job = Job {
        round: 0,
        task: Arc::new(task.clone()),
        candidate: candidate.clone(),
        parent: contenders.parent.cloned(),
        incumbent: contenders.incumbent.cloned(),
        comparisons: contenders.comparisons,
        options: options.clone(),
    };
    executor.submit(job)?;
    let never = AtomicBool::new(false);
    let stop = cancel.unwrap_or(&never);
    match executor.next(stop) {
        Some(f) => f.result,
        None => {
            executor.cancel_all();
            Err(EvalError::Cancelled)
        }
    }
}

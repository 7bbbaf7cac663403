//! A cluster job's two files: the request the orchestrator writes (everything the evaluation
//! needs: the task, the request it built, the limit, the backend's options) and the outcome
//! `ksearch eval-job` writes back. The orchestrator stays the only writer of the run: a job
//! writes nothing but its outcome file.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use ksearch_core::protocol::EvaluateRequest;
use ksearch_core::task::Task;
use serde::{Deserialize, Serialize};

use super::now_unix;
use crate::backend::{BackendOptions, backend_for};
use crate::error::EvalError;
use crate::evaluator::{Evaluation, LocalEvaluator, MachineCheck};

/// Version of the job files.
pub const JOB_FORMAT: u32 = 1;

/// What the orchestrator sends with a job.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct JobFile {
    pub format: u32,
    pub task: Task,
    /// Built by the orchestrator, which holds the result against it.
    pub request: EvaluateRequest,
    pub timeout_s: f64,
    /// The backend's options (`--python`, `--target`, `--hardware`), as the run has them.
    pub python: Option<PathBuf>,
    pub target: Option<String>,
    pub hardware: Option<String>,
}

/// What a job failed with, when it could not evaluate at all.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobError {
    /// `task`: the task's own code failed; `worker`: anything else.
    pub kind: String,
    pub message: String,
}

/// What `ksearch eval-job` writes back.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct JobOutcome {
    pub format: u32,
    /// The node it ran on.
    pub host: String,
    pub started_unix: f64,
    pub finished_unix: f64,
    #[serde(default)]
    pub evaluation: Option<Evaluation>,
    #[serde(default)]
    pub error: Option<JobError>,
}

impl JobOutcome {
    /// The evaluation, or the error it reported, as the local path would have returned it.
    pub fn into_result(self) -> Result<Evaluation, EvalError> {
        match (self.evaluation, self.error) {
            (Some(e), _) => Ok(e),
            (None, Some(e)) if e.kind == "task" => Err(EvalError::Task { message: e.message }),
            (None, Some(e)) => Err(EvalError::Worker {
                message: format!("on {}: {}", self.host, e.message),
            }),
            (None, None) => Err(EvalError::Worker {
                message: format!("the job on {} reported nothing", self.host),
            }),
        }
    }
}

fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "an unnamed host".into())
}

/// Write `value` to `path` whole or not at all: a temporary file beside it, renamed.
pub(crate) fn write_json<T: Serialize>(path: &Path, value: &T) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut tmp = tempfile::NamedTempFile::new_in(dir)?;
    serde_json::to_writer(&mut tmp, value)?;
    tmp.as_file().sync_all()?;
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(())
}

fn evaluate(
    job: &JobFile,
    exe: PathBuf,
    check: Option<MachineCheck>,
) -> Result<Evaluation, EvalError> {
    let started = Instant::now();
    if job.format != JOB_FORMAT {
        return Err(EvalError::Worker {
            message: format!(
                "the job file is of format {}, this ksearch reads {JOB_FORMAT}: the nodes run another ksearch than the orchestrator",
                job.format
            ),
        });
    }
    let options = BackendOptions {
        ksearch_exe: exe,
        python: job.python.clone(),
        target: job.target.clone(),
        hardware: job.hardware.clone(),
    };
    let backend = backend_for(&job.task, &options)?;
    crate::dependencies::require_available(&job.task, backend.python())?;
    let mut evaluator = LocalEvaluator::new(backend);
    if let Some(check) = check {
        evaluator.set_machine_check(check);
    }
    let timeout = Duration::from_secs_f64(if job.timeout_s.is_finite() && job.timeout_s > 0.0 {
        job.timeout_s
    } else {
        crate::DEFAULT_TIMEOUT.as_secs_f64()
    });
    evaluator.evaluate_request(&job.task, &job.request, timeout, started)
}

/// `ksearch eval-job JOB RESULT`: evaluate the job in `job` on this machine and write its
/// outcome to `result`. Returns the exit code: 0 once the outcome is written (whatever the
/// candidate did), 1 when it could not be.
pub fn run_job_file(job: &Path, result: &Path, exe: PathBuf, check: Option<MachineCheck>) -> i32 {
    let started_unix = now_unix();
    let outcome = std::fs::read(job)
        .map_err(|e| EvalError::Worker {
            message: format!("cannot read the job file {}: {e}", job.display()),
        })
        .and_then(|bytes| {
            serde_json::from_slice::<JobFile>(&bytes).map_err(|e| EvalError::Worker {
                message: format!("the job file {} is unreadable: {e}", job.display()),
            })
        })
        .and_then(|job| evaluate(&job, exe, check));
    let (evaluation, error) = match outcome {
        Ok(e) => (Some(e), None),
        Err(EvalError::Task { message }) => (
            None,
            Some(JobError {
                kind: "task".into(),
                message,
            }),
        ),
        Err(e) => (
            None,
            Some(JobError {
                kind: "worker".into(),
                message: e.to_string(),
            }),
        ),
    };
    let outcome = JobOutcome {
        format: JOB_FORMAT,
        host: host_name(),
        started_unix,
        finished_unix: now_unix(),
        evaluation,
        error,
    };
    match write_json(result, &outcome) {
        Ok(()) => 0,
        Err(e) => {
            let _ = writeln!(
                std::io::stderr().lock(),
                "ksearch eval-job: cannot write {}: {e}",
                result.display()
            );
            1
        }
    }
}

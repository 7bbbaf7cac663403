//! Evaluation backends behind one trait, chosen at run time from the task.

use std::path::PathBuf;
use std::time::Duration;

use ksearch_core::static_check::{Violation, check_candidate};
use ksearch_core::task::{BackendKind, TaskSpec};

use crate::error::EvalError;
use crate::worker_process::WorkerCommand;

/// What the orchestrator needs to know about a backend; the work itself happens in its worker.
pub trait Backend: std::fmt::Debug {
    /// How to start a worker for this backend.
    fn worker_command(&self) -> WorkerCommand;
    /// Checks made before a candidate is sent to a worker.
    fn static_check(&self, spec: &TaskSpec, source: &str) -> Vec<Violation> {
        check_candidate(spec, source)
    }
}

/// C on the CPU; its worker is the ksearch binary itself (`ksearch worker c`).
#[derive(Debug, Clone)]
pub struct CBackend {
    pub ksearch_exe: PathBuf,
}

impl Backend for CBackend {
    fn static_check(&self, spec: &TaskSpec, source: &str) -> Vec<Violation> {
        let mut v = check_candidate(spec, source);
        v.extend(crate::knowledge_checks::check(
            source,
            ksearch_knowledge::Backend::C,
            ksearch_knowledge::Target::Cpu,
            None,
        ));
        v
    }

    fn worker_command(&self) -> WorkerCommand {
        WorkerCommand {
            program: self.ksearch_exe.clone(),
            args: vec!["worker".into(), "c".into()],
            env: Vec::new(),
            startup_timeout: Duration::from_secs(30),
        }
    }
}

/// What selecting a backend may need.
#[derive(Debug, Clone, Default)]
pub struct BackendOptions {
    /// The binary that hosts built-in workers (`ksearch worker c`).
    pub ksearch_exe: PathBuf,
    /// The Python interpreter for the mlx harness; `python3` when unset.
    pub python: Option<PathBuf>,
    /// The mlx target: `metal` or `cuda`; the GPU MLX finds when unset.
    pub target: Option<String>,
    /// The device whose limits the knowledge rules check against (a name from
    /// `ksearch knowledge hardware`); the local GPU when unset.
    pub hardware: Option<String>,
}

/// The backend for a task, chosen at run time.
pub fn backend_for(
    kind: BackendKind,
    options: &BackendOptions,
) -> Result<Box<dyn Backend>, EvalError> {
    match kind {
        BackendKind::C => Ok(Box::new(CBackend {
            ksearch_exe: options.ksearch_exe.clone(),
        })),
        BackendKind::Mlx => Ok(Box::new(crate::mlx_backend::MlxBackend::new(
            options.python.clone(),
            options.target.clone(),
            crate::knowledge_checks::hardware(options.hardware.as_deref())?,
            options.ksearch_exe.clone(),
        )?)),
    }
}

//! Evaluation backends behind one trait, chosen at run time from the task.

use std::path::{Path, PathBuf};
use std::time::Duration;

use ksearch_core::contract::c_contract;
use ksearch_core::static_check::{Violation, check_candidate};
use ksearch_core::task::{BackendKind, TaskSpec};

use crate::error::EvalError;
use crate::worker_process::WorkerCommand;

/// What the orchestrator needs to know about a backend; the work itself happens in its worker.
pub trait Backend: std::fmt::Debug {
    fn kind(&self) -> BackendKind;
    /// How to start a worker for this backend.
    fn worker_command(&self) -> WorkerCommand;
    /// The candidate contract for a task, in words, for docs and prompts.
    fn contract(&self, spec: &TaskSpec) -> String;
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
    fn kind(&self) -> BackendKind {
        BackendKind::C
    }

    fn worker_command(&self) -> WorkerCommand {
        WorkerCommand {
            program: self.ksearch_exe.clone(),
            args: vec!["worker".into(), "c".into()],
            env: Vec::new(),
            startup_timeout: Duration::from_secs(30),
        }
    }

    fn contract(&self, spec: &TaskSpec) -> String {
        c_contract(spec)
    }
}

/// The backend for a task. `ksearch_exe` is the binary that hosts built-in workers.
pub fn backend_for(kind: BackendKind, ksearch_exe: &Path) -> Result<Box<dyn Backend>, EvalError> {
    match kind {
        BackendKind::C => Ok(Box::new(CBackend {
            ksearch_exe: ksearch_exe.to_owned(),
        })),
        BackendKind::Mlx => Err(EvalError::BackendUnavailable {
            backend: "mlx".into(),
            reason: "this build of ksearch has no mlx worker yet".into(),
        }),
    }
}

//! The evaluation side of a backend: how its worker starts, which checks run before a candidate
//! reaches it, and what this machine can build of a candidate without running it. The backend's
//! facts (contract, file names, targets, …) are `ksearch_core::backend`'s; this module is the
//! one place in ksearch-eval that matches on every [`BackendKind`].

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use ksearch_core::static_check::{Violation, check_candidate};
use ksearch_core::task::{BackendKind, Task, TaskSpec};

use crate::error::EvalError;
use crate::worker_process::WorkerCommand;

/// The Python the Python backends run when none is named (`--python`).
pub const DEFAULT_PYTHON: &str = "python3";

/// What the orchestrator needs to evaluate a backend's candidates; the work itself happens in
/// its worker.
pub trait BackendEval: std::fmt::Debug {
    /// How to start a worker for this backend.
    fn worker_command(&self) -> WorkerCommand;
    /// The Python its worker runs Python implementations in, where it has one: the baselines'
    /// modules are asked of it (`crate::dependencies`).
    fn python(&self) -> Option<&Path> {
        None
    }
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

impl BackendEval for CBackend {
    fn static_check(&self, spec: &TaskSpec, source: &str) -> Vec<Violation> {
        let mut v = check_candidate(spec, source);
        let c = BackendKind::C.backend();
        for &target in c.targets() {
            v.extend(crate::knowledge_checks::check(
                source,
                c.language(),
                target,
                None,
            ));
        }
        v
    }

    fn worker_command(&self) -> WorkerCommand {
        WorkerCommand {
            program: self.ksearch_exe.clone(),
            args: vec!["worker".into(), BackendKind::C.name().into()],
            env: Vec::new(),
            startup_timeout: Duration::from_secs(30),
            current_dir: None,
        }
    }
}

/// What selecting a backend may need.
#[derive(Debug, Clone, Default)]
pub struct BackendOptions {
    /// The binary that hosts built-in workers (`ksearch worker c`).
    pub ksearch_exe: PathBuf,
    /// The Python interpreter for the mlx and torch harness; `python3` when unset.
    pub python: Option<PathBuf>,
    /// The mlx target (`metal` or `cuda`; the GPU MLX finds when unset) or the torch target
    /// (`cuda` or `cpu`).
    pub target: Option<String>,
    /// The device whose limits the knowledge rules check against (a name from
    /// `ksearch knowledge hardware`); the local GPU when unset.
    pub hardware: Option<String>,
}

/// The evaluation side of a task's backend, chosen at run time: the task's own worker where it
/// names one (`[worker]`; the options do not apply to it), else the backend's.
pub fn backend_for(
    task: &Task,
    options: &BackendOptions,
) -> Result<Box<dyn BackendEval>, EvalError> {
    if let Some(worker) = &task.worker {
        return Ok(Box::new(crate::external_backend::ExternalBackend {
            worker: worker.clone(),
        }));
    }
    match task.spec.backend {
        BackendKind::C => Ok(Box::new(CBackend {
            ksearch_exe: options.ksearch_exe.clone(),
        })),
        BackendKind::Mlx => Ok(Box::new(crate::mlx_backend::MlxBackend::new(
            options.python.clone(),
            options.target.clone(),
            crate::knowledge_checks::hardware(options.hardware.as_deref())?,
            options.ksearch_exe.clone(),
        )?)),
        BackendKind::Torch => Ok(Box::new(crate::torch_backend::TorchBackend::new(
            options.python.clone(),
            options.target.clone(),
            options.ksearch_exe.clone(),
        )?)),
    }
}

/// The processes the ksearch binary itself hosts for a backend: `ksearch worker NAME` (the
/// judge) and `ksearch runner NAME` (one contender, in its sandbox). Each returns the exit code.
#[derive(Debug, Clone, Copy)]
pub struct BuiltinProcesses {
    pub worker: fn() -> i32,
    pub runner: fn() -> i32,
}

/// The processes ksearch hosts for `kind`; `None` where the worker is another program (the
/// `mlx` and `torch` backends' is the Python harness).
pub fn builtin_processes(kind: BackendKind) -> Option<BuiltinProcesses> {
    match kind {
        BackendKind::C => Some(BuiltinProcesses {
            worker: crate::c_worker::run,
            runner: crate::c_worker::run_runner,
        }),
        BackendKind::Mlx | BackendKind::Torch => None,
    }
}

/// Build a candidate as far as this machine can without running it (`ksearch space check`):
/// C with the compiler and the flags the evaluator builds candidates with, a Python module to
/// bytecode. `file` is where the source is written; a shared object goes beside it.
pub fn build_only(kind: BackendKind, source: &str, file: &Path) -> Result<(), String> {
    fs_err::write(file, source).map_err(|e| e.to_string())?;
    let output = match kind {
        BackendKind::C => {
            let cc = crate::c_worker::Driver::c();
            Command::new(&cc.program)
                .args(&cc.args)
                .args(crate::c_worker::CANDIDATE_FLAGS)
                .arg("-o")
                .arg(file.with_extension("so"))
                .arg(file)
                .output()
                .map_err(|e| format!("cannot run `{}`: {e}", cc.program))?
        }
        BackendKind::Mlx | BackendKind::Torch => Command::new(DEFAULT_PYTHON)
            .args([
                "-c",
                "import sys; compile(open(sys.argv[1]).read(), sys.argv[1], 'exec')",
            ])
            .arg(file)
            .output()
            .map_err(|e| format!("cannot run {DEFAULT_PYTHON}: {e}"))?,
    };
    if output.status.success() {
        Ok(())
    } else {
        Err(format!(
            "does not compile:\n{}",
            String::from_utf8_lossy(&output.stderr).trim()
        ))
    }
}

/// What [`build_only`] leaves unchecked, when it is not the whole build.
pub fn build_only_caveat(kind: BackendKind) -> Option<&'static str> {
    match kind {
        BackendKind::C => None,
        BackendKind::Mlx => Some(
            "the mlx modules were compiled as Python only: their CUDA and Metal kernels compile when MLX runs them on a GPU",
        ),
        BackendKind::Torch => Some(
            "the torch modules were compiled as Python only: their Triton and CUDA C++ kernels compile when they first run on a GPU",
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_c_backend_is_hosted_by_the_binary() {
        let hosted: Vec<_> = BackendKind::ALL
            .into_iter()
            .filter(|k| builtin_processes(*k).is_some())
            .collect();
        assert_eq!(hosted, [BackendKind::C]);
    }

    #[test]
    fn a_c_build_fails_with_the_compilers_message() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("point.c");
        assert_eq!(
            build_only(BackendKind::C, "void f(void) {}\n", &file),
            Ok(())
        );
        assert!(dir.path().join("point.so").exists());
        let err = build_only(BackendKind::C, "int oops = ;\n", &file).unwrap_err();
        assert!(err.starts_with("does not compile:\n"), "{err}");
        assert!(err.contains("point.c"), "{err}");
    }
}

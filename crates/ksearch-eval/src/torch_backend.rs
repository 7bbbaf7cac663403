//! The `torch` backend: candidates are Python modules on PyTorch tensors (Triton, CUDA C++
//! through `torch.utils.cpp_extension`, or a `.cu` file's C ABI). The worker is the same Python
//! harness as the `mlx` backend's, started with `--backend torch` (`docs/torch.md`).

use std::path::{Path, PathBuf};

use ksearch_core::task::BackendKind;

use crate::backend::BackendEval;
use crate::error::EvalError;
use crate::mlx_backend::{cache_root, harness_command, unpack_harness};
use crate::worker_process::WorkerCommand;

/// PyTorch through the Python harness.
#[derive(Debug, Clone)]
pub struct TorchBackend {
    pub python: PathBuf,
    /// `cuda` or `cpu` (PyTorch's CPU build, for tests); `None` for CUDA where PyTorch sees a
    /// GPU, else the CPU.
    pub target: Option<String>,
    harness_root: PathBuf,
    sandbox_exe: PathBuf,
}

impl TorchBackend {
    /// `sandbox_exe` is the ksearch binary, whose launcher confines the harness's runners.
    pub fn new(
        python: Option<PathBuf>,
        target: Option<String>,
        sandbox_exe: PathBuf,
    ) -> Result<Self, EvalError> {
        let torch = BackendKind::Torch.backend();
        if let Some(t) = &target
            && torch.target_named(t).is_none()
        {
            return Err(EvalError::Options(format!(
                "unknown torch target `{t}` (expected cuda or cpu)"
            )));
        }
        Ok(Self {
            python: python.unwrap_or_else(|| PathBuf::from(crate::backend::DEFAULT_PYTHON)),
            target,
            harness_root: unpack_harness(&cache_root())?,
            sandbox_exe,
        })
    }
}

/// The core checks only: the knowledge layer's CUDA rules read CUDA C++ sources, and a torch
/// candidate is a Python module whose kernels are strings or Triton functions.
impl BackendEval for TorchBackend {
    fn python(&self) -> Option<&Path> {
        Some(&self.python)
    }

    fn worker_command(&self) -> WorkerCommand {
        harness_command(
            &self.python,
            &self.harness_root,
            &self.sandbox_exe,
            BackendKind::Torch,
            self.target.as_deref(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_worker_is_the_harness_with_the_torch_backend() {
        let b = TorchBackend::new(None, Some("cpu".into()), "/bin/ksearch".into()).unwrap();
        let w = b.worker_command();
        assert_eq!(
            w.args,
            [
                "-m",
                "ksearch_harness",
                "--backend",
                "torch",
                "--target",
                "cpu"
            ]
        );
        assert!(
            w.env
                .iter()
                .any(|(k, v)| k == "KSEARCH_SANDBOX_EXE" && v == "/bin/ksearch")
        );
        let err = TorchBackend::new(None, Some("metal".into()), "/bin/ksearch".into());
        assert!(err.is_err());
    }
}

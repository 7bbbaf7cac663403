//! Backends: what a task's candidates are written in, and every fact that follows from it.
//!
//! A task names its backend (`backend = "c"` in `task.toml`, a [`BackendKind`]); the rest of
//! ksearch asks the backend's [`Backend`] facts instead of matching on kinds. The one place that
//! matches on every kind here is [`BackendKind::backend`]; the evaluation side of a backend
//! (its worker) lives in `ksearch-eval`, which matches once more. Adding a kind is a compile
//! error in exactly those two places, and a test fails until it is in [`BackendKind::ALL`].

mod c;
mod mlx;
mod torch;

use std::fmt;
use std::str::FromStr;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::dtype::Dtype;
use crate::platform::{Language, Target};
use crate::static_check::Violation;
use crate::task::TaskSpec;

/// Which backend a task's candidates are written for (`backend` in `task.toml`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum BackendKind {
    /// C functions compiled by the system C compiler and run on the CPU.
    C,
    /// Python modules building kernels with MLX (`mx.fast.metal_kernel` / `mx.fast.cuda_kernel`).
    Mlx,
    /// Python modules on PyTorch tensors, with Triton or CUDA C++ kernels (`docs/torch.md`).
    Torch,
}

impl BackendKind {
    /// Every backend, in the order lists of them are shown.
    pub const ALL: [BackendKind; 3] = [BackendKind::C, BackendKind::Mlx, BackendKind::Torch];

    /// This backend's facts.
    pub fn backend(self) -> &'static dyn Backend {
        match self {
            BackendKind::C => &c::C,
            BackendKind::Mlx => &mlx::Mlx,
            BackendKind::Torch => &torch::Torch,
        }
    }

    /// The name a task file and the command line use: `c`, `mlx`, `torch`.
    pub fn name(self) -> &'static str {
        self.backend().name()
    }
}

impl fmt::Display for BackendKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A backend name that is not one ksearch has.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("unknown backend `{given}` (expected one of: {})", BackendKind::ALL.map(BackendKind::name).join(", "))]
pub struct UnknownBackend {
    pub given: String,
}

impl FromStr for BackendKind {
    type Err = UnknownBackend;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        BackendKind::ALL
            .into_iter()
            .find(|k| k.name() == s)
            .ok_or_else(|| UnknownBackend {
                given: s.to_owned(),
            })
    }
}

/// How a candidate of a backend is written down.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CandidateFormat {
    /// The info strings of the code fences a model's answer may put the candidate in.
    pub fences: &'static [&'static str],
    /// The file name a candidate gets in prompts and compiler messages: `candidate.c`.
    pub file_name: &'static str,
}

/// What `ksearch export` writes for a backend's kernel (besides `provenance.json`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExportLayout {
    /// `NAME.h` (the prototype and the contract) and `NAME.c` (the kernel).
    CHeaderAndSource,
    /// A Python package `NAME/` on MLX: `__init__.py` (documented entry point) and
    /// `_candidate.py`.
    MlxPackage,
    /// A Python package `NAME/` on PyTorch: `__init__.py` (the op, calling the candidate as the
    /// harness does), `_candidate.py`, `_calling.py` (the harness's calling convention) and,
    /// where the reference gives models their constructor arguments, `_reference.py`.
    TorchPackage,
}

/// What a baseline or comparison of a backend may need that a machine can lack (`libs` or
/// `modules` in `task.toml`); where it is missing, the implementation is left out and the user
/// is told how to install it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dependency {
    /// Libraries it links, as `-l<name>` (`libs`): the C compiler is asked.
    Library,
    /// Python modules it imports (`modules`): the worker's Python is asked.
    PythonModule,
}

/// Everything specific to one backend that is a plain fact: no IO, no processes. The evaluation
/// side (how its worker starts, which rules run before it) is `ksearch-eval`'s `BackendEval`.
pub trait Backend: fmt::Debug + Sync {
    /// Which backend this is.
    fn kind(&self) -> BackendKind;

    /// The name a task file and the command line use: `c`, `mlx`.
    fn name(&self) -> &'static str;

    /// A phrase for prompts: what candidates are and where they run.
    fn description(&self) -> &'static str;

    /// How a candidate is written down: fence languages and file name.
    fn candidate(&self) -> CandidateFormat;

    /// Whether a task's tensors may have this dtype (task validation asks).
    fn supports_dtype(&self, dtype: Dtype) -> bool;

    /// The candidate contract in words, for docs and prompts.
    fn contract(&self, spec: &TaskSpec) -> String;

    /// This backend's checks of a candidate's source, after the common ones
    /// (`static_check::check_candidate` calls it); violations are appended to `out`.
    fn check(&self, spec: &TaskSpec, source: &str, out: &mut Vec<Violation>);

    /// The language the knowledge layer files this backend's tactics and rules under.
    fn language(&self) -> Language;

    /// The targets candidates run on, the default first: a run without a target and without a
    /// known device of one of them takes the first.
    fn targets(&self) -> &'static [Target];

    /// The `target` a template space's templates see: `device` is the target of the device the
    /// run is for, when one is known.
    fn space_target(&self, device: Option<Target>) -> &'static str;

    /// What `ksearch export` writes.
    fn export_layout(&self) -> ExportLayout;

    /// What its baselines and comparisons may need that a machine can lack.
    fn dependency(&self) -> Dependency;

    /// Whether candidates are native code the system's C (or C++) compiler builds and the CPU
    /// runs as it is: a task's `[build]` (flags, libraries) applies, and the CPU machine model
    /// (the fraction of the machine's peak a kernel reaches) describes its kernels.
    fn native(&self) -> bool;

    /// The library the kernel itself runs on, when the worker reports its version in the
    /// compile step's `compiler` line as `NAME VERSION …` (the export's provenance names it).
    fn kernel_library(&self) -> Option<&'static str>;

    /// The target named `name` (`cuda`, `metal`, …) when this backend runs on it.
    fn target_named(&self, name: &str) -> Option<Target> {
        self.targets().iter().copied().find(|t| t.name() == name)
    }

    /// The target a run is for: the one named (when this backend runs on it), else the device's
    /// (when it is one of this backend's), else the default.
    fn target_for(&self, named: Option<&str>, device: Option<Target>) -> Target {
        let targets = self.targets();
        named
            .and_then(|n| self.target_named(n))
            .or_else(|| device.filter(|d| targets.contains(d)))
            .unwrap_or(targets[0])
    }
}

#[cfg(test)]
mod tests;

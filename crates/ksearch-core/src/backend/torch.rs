//! The `torch` backend: Python modules on PyTorch tensors whose `run` (or KernelBench-style
//! `ModelNew`) may launch Triton kernels, CUDA C++ built with `torch.utils.cpp_extension`, or a
//! `.cu` file's C ABI; judged by the Python harness on NVIDIA GPUs (and on PyTorch's CPU build
//! for tests).

use super::{Backend, BackendKind, CandidateFormat, Dependency, ExportLayout};
use crate::dtype::Dtype;
use crate::platform::{Language, Target};
use crate::static_check::Violation;
use crate::task::TaskSpec;

#[derive(Debug)]
pub(super) struct Torch;

impl Backend for Torch {
    fn kind(&self) -> BackendKind {
        BackendKind::Torch
    }

    fn name(&self) -> &'static str {
        "torch"
    }

    fn description(&self) -> &'static str {
        "PyTorch modules with Triton or CUDA C++ kernels on NVIDIA GPUs"
    }

    fn candidate(&self) -> CandidateFormat {
        CandidateFormat {
            fences: &["python", "py"],
            file_name: "candidate.py",
        }
    }

    /// PyTorch has every dtype a task can declare.
    fn supports_dtype(&self, _dtype: Dtype) -> bool {
        true
    }

    fn contract(&self, spec: &TaskSpec) -> String {
        crate::contract::torch_contract(spec)
    }

    fn check(&self, spec: &TaskSpec, source: &str, out: &mut Vec<Violation>) {
        crate::static_check::check_torch_entry(spec, source, out);
    }

    /// Its kernels are CUDA C++ and Triton: the knowledge layer's CUDA facts and tactics.
    fn language(&self) -> Language {
        Language::Cuda
    }

    /// CUDA first; the CPU is PyTorch's CPU build, for tests.
    fn targets(&self) -> &'static [Target] {
        &[Target::Cuda, Target::Cpu]
    }

    fn space_target(&self, device: Option<Target>) -> &'static str {
        device.map_or("cuda", Target::name)
    }

    fn export_layout(&self) -> ExportLayout {
        ExportLayout::TorchPackage
    }

    fn dependency(&self) -> Dependency {
        Dependency::PythonModule
    }

    fn native(&self) -> bool {
        false
    }

    fn kernel_library(&self) -> Option<&'static str> {
        Some("torch")
    }
}

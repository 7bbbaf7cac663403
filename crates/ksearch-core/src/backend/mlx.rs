//! The `mlx` backend: Python modules whose `run` builds kernels with `mx.fast.metal_kernel`
//! (Apple GPUs) or `mx.fast.cuda_kernel` (NVIDIA GPUs), judged by the Python harness.

use super::{Backend, BackendKind, CandidateFormat, Dependency, ExportLayout};
use crate::dtype::Dtype;
use crate::platform::{Language, Target};
use crate::static_check::Violation;
use crate::task::TaskSpec;

#[derive(Debug)]
pub(super) struct Mlx;

impl Backend for Mlx {
    fn kind(&self) -> BackendKind {
        BackendKind::Mlx
    }

    fn name(&self) -> &'static str {
        "mlx"
    }

    fn description(&self) -> &'static str {
        "MLX custom kernels on Apple and NVIDIA GPUs"
    }

    fn candidate(&self) -> CandidateFormat {
        CandidateFormat {
            fences: &["python", "py"],
            file_name: "candidate.py",
        }
    }

    /// The harness says which dtypes each target has when it meets one it lacks.
    fn supports_dtype(&self, _dtype: Dtype) -> bool {
        true
    }

    fn contract(&self, spec: &TaskSpec) -> String {
        crate::contract::mlx_contract(spec)
    }

    fn check(&self, spec: &TaskSpec, source: &str, out: &mut Vec<Violation>) {
        crate::static_check::check_python_entry(spec, source, out);
    }

    fn language(&self) -> Language {
        Language::Mlx
    }

    /// CUDA first: with no target named and no Apple GPU detected, a run is for NVIDIA.
    fn targets(&self) -> &'static [Target] {
        &[Target::Cuda, Target::Metal]
    }

    fn space_target(&self, device: Option<Target>) -> &'static str {
        device.map_or("any", Target::name)
    }

    fn export_layout(&self) -> ExportLayout {
        ExportLayout::MlxPackage
    }

    fn dependency(&self) -> Dependency {
        Dependency::PythonModule
    }

    fn native(&self) -> bool {
        false
    }

    fn kernel_library(&self) -> Option<&'static str> {
        Some("mlx")
    }
}

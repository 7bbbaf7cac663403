//! The `c` backend: one C function per candidate, compiled by the system compiler, run on the
//! CPU by a Rust runner.

use super::{Backend, BackendKind, CandidateFormat, Dependency, ExportLayout};
use crate::dtype::Dtype;
use crate::platform::{Language, Target};
use crate::static_check::Violation;
use crate::task::TaskSpec;

#[derive(Debug)]
pub(super) struct C;

impl Backend for C {
    fn kind(&self) -> BackendKind {
        BackendKind::C
    }

    fn name(&self) -> &'static str {
        "c"
    }

    fn description(&self) -> &'static str {
        "C on CPUs"
    }

    fn candidate(&self) -> CandidateFormat {
        CandidateFormat {
            fences: &["c", "cpp", "c++"],
            file_name: "candidate.c",
        }
    }

    fn supports_dtype(&self, dtype: Dtype) -> bool {
        dtype.c_type().is_some()
    }

    fn contract(&self, spec: &TaskSpec) -> String {
        crate::contract::c_contract(spec)
    }

    fn check(&self, spec: &TaskSpec, source: &str, out: &mut Vec<Violation>) {
        crate::static_check::check_c(spec, source, out);
    }

    fn language(&self) -> Language {
        Language::C
    }

    fn targets(&self) -> &'static [Target] {
        &[Target::Cpu]
    }

    fn space_target(&self, _device: Option<Target>) -> &'static str {
        "c"
    }

    fn export_layout(&self) -> ExportLayout {
        ExportLayout::CHeaderAndSource
    }

    fn dependency(&self) -> Dependency {
        Dependency::Library
    }

    fn native(&self) -> bool {
        true
    }

    fn kernel_library(&self) -> Option<&'static str> {
        None
    }
}

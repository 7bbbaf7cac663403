//! The knowledge layer: reviewed data in `knowledge/` (TOML) and the code that loads, renders
//! and enforces it.
//!
//! - `hardware/`: one file per device (limits, bandwidths, peaks, pitfalls), every number with
//!   its provenance ([`Fact`]), unknowns said to be unknown;
//! - `translation/`: CUDA concepts and their Metal and MLX equivalents;
//! - `patterns/`: optimization tactics with the kernel classes they fit and their expected
//!   effect on the tree's three impact axes;
//! - `assertions/`: rules checked on every candidate before it is compiled ([`Knowledge::check`]).
//!
//! The whole directory is embedded at build time ([`Knowledge::builtin`]); a directory can be
//! loaded instead ([`Knowledge::load_dir`]). Loading validates everything and reports each
//! problem with its file, line and field.

mod assertion;
mod check;
pub mod cli;
mod detect;
mod fact;
mod hardware;
mod host;
mod load;
mod pattern;
mod platform;
mod render;
mod translation;

use std::path::Path;

use ksearch_core::task::KernelClass;

pub use assertion::{Rule, RuleKind, RuleSpec, Scope, TokenSpec};
pub use detect::{Detection, detect_local, detect_with, normalize};
pub use fact::{Fact, FactStatus, Unit, format_value};
pub use hardware::{
    Compute, CpuModel, CpuSection, Hardware, LIMIT_FIELDS, Matrix, Memory, OnChip, Pitfall, Vendor,
};
pub use host::{CacheSizes, HostCpu, SIMD_FLAGS, read_caches};
pub use ksearch_core::static_check::Violation;
pub use load::LoadError;
pub use pattern::{Pattern, PatternImpact, PatternImpacts, Sketch};
pub use platform::{InvalidPlatform, Language, ParseError, Platform, Target};
pub use render::{ContextRequest, DEFAULT_BUDGET_CHARS, Level};
pub use translation::{Example, Translation};

mod builtin {
    include!(concat!(env!("OUT_DIR"), "/builtin_files.rs"));
}

/// The hardware file of the CPU host the builtin proposer's cost models use.
pub const CPU_HOST_ID: &str = "generic-x86-64";

/// Everything in `knowledge/`, validated.
#[derive(Debug, Clone)]
pub struct Knowledge {
    /// Sorted by id.
    pub hardware: Vec<Hardware>,
    /// In file order (files sorted by name).
    pub translations: Vec<Translation>,
    pub patterns: Vec<Pattern>,
    pub rules: Vec<Rule>,
}

impl Knowledge {
    /// The knowledge embedded in this build (the repository's `knowledge/` directory).
    pub fn builtin() -> Result<Knowledge, LoadError> {
        let files: Vec<load::SourceFile> = builtin::FILES
            .iter()
            .map(|(rel, text)| load::SourceFile {
                rel: (*rel).to_owned(),
                display: format!("knowledge/{rel}"),
                text: (*text).to_owned(),
            })
            .collect();
        load::load(&files)
    }

    /// The paths (relative to `knowledge/`) of the embedded files.
    pub fn builtin_files() -> impl Iterator<Item = (&'static str, &'static str)> {
        builtin::FILES.iter().copied()
    }

    /// Load a directory laid out like `knowledge/`.
    pub fn load_dir(dir: &Path) -> Result<Knowledge, LoadError> {
        let files = load::read_dir(dir)?;
        load::load(&files)
    }

    /// A device by its exact id (`h200`, `m3-max`).
    pub fn hardware(&self, id: &str) -> Option<&Hardware> {
        self.hardware.iter().find(|h| h.id == id)
    }

    /// A device by id, alias or a name as tools print it ("NVIDIA H200", "Apple M3 Max").
    pub fn find_hardware(&self, name: &str) -> Option<&Hardware> {
        self.hardware(name.trim())
            .or_else(|| detect::match_name(&self.hardware, name))
    }

    /// The device to use: the `explicit` name when given (an error when no file matches it),
    /// else the local GPU when detection finds one that has a file, else `None`.
    pub fn select_hardware(
        &self,
        explicit: Option<&str>,
    ) -> Result<Option<&Hardware>, cli::CliError> {
        match explicit {
            Some(name) => cli::resolve_hardware(self, name).map(Some),
            None => Ok(detect_local(self)
                .and_then(|d| d.hardware)
                .and_then(|id| self.hardware(&id))),
        }
    }

    /// A translation entry by id or alias (`syncthreads`, `__syncthreads`).
    pub fn translation(&self, topic: &str) -> Option<&Translation> {
        self.translations.iter().find(|t| t.answers_to(topic))
    }

    pub fn pattern(&self, id: &str) -> Option<&Pattern> {
        self.patterns.iter().find(|p| p.id == id)
    }

    pub fn rule(&self, id: &str) -> Option<&Rule> {
        self.rules.iter().find(|r| r.id() == id)
    }

    /// Tactics that fit a kernel class, in file order.
    pub fn patterns_for(&self, class: KernelClass) -> impl Iterator<Item = &Pattern> {
        self.patterns.iter().filter(move |p| p.fits(class))
    }

    /// The rules checked on a platform's candidates.
    pub fn rules_for(&self, platform: Platform) -> impl Iterator<Item = &Rule> {
        self.rules.iter().filter(move |r| r.applies_to(platform))
    }

    /// Every violation of the assertions that apply to `platform`, in source order. Limits come
    /// from `hardware` when given (and when it publishes them), else from each rule's fallback.
    pub fn check(
        &self,
        source: &str,
        platform: Platform,
        hardware: Option<&Hardware>,
    ) -> Vec<Violation> {
        check::check(self.rules_for(platform), source, platform, hardware)
    }

    /// The prompt context for a request; empty for [`Level::None`].
    pub fn render_context(&self, req: &ContextRequest) -> String {
        render::render(self, req)
    }
}

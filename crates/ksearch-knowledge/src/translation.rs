//! CUDA concepts and their Metal and MLX equivalents (`knowledge/translation/*.toml`).

use ksearch_core::task::KernelClass;
use serde::{Deserialize, Serialize};

use crate::platform::Platform;

/// One file: a list of `[[entry]]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct TranslationFile {
    #[serde(rename = "entry")]
    pub(crate) entries: Vec<Translation>,
}

/// One CUDA concept and what it becomes in Metal and in MLX custom kernels.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Translation {
    pub id: String,
    /// The concept in words: "Block-wide barrier".
    pub concept: String,
    /// Other names `ksearch knowledge show` finds it by (e.g. `__syncthreads`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub aliases: Vec<String>,
    /// 1 (niche) – 3 (every port needs it); decides what prompts keep when space is short.
    pub importance: u8,
    /// Kernel classes where it matters most; empty means all.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub classes: Vec<KernelClass>,
    /// The CUDA side.
    pub cuda: String,
    /// The Metal Shading Language equivalent.
    pub metal: String,
    /// In an `mx.fast.metal_kernel` body (and, where it differs, `mx.fast.cuda_kernel`).
    pub mlx: String,
    pub limits: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pitfalls: Vec<String>,
    pub example: Example,
    pub source: String,
    /// Related entries (translation ids).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub see_also: Vec<String>,
    /// Platforms whose prompts include it (`metal`, `mlx/metal`, `mlx/cuda`); default: `metal`
    /// and `mlx/metal`, since an `mx.fast.cuda_kernel` body is CUDA already.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub applies_to: Vec<String>,
}

/// One line of code per side.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Example {
    pub cuda: String,
    pub metal: String,
    pub mlx: String,
}

impl Translation {
    /// Whether prompts for `platform` include this entry.
    pub fn applies_to(&self, platform: Platform) -> bool {
        if self.applies_to.is_empty() {
            return matches!(platform, Platform::METAL | Platform::MLX_METAL);
        }
        self.applies_to
            .iter()
            .any(|p| p.parse::<Platform>().is_ok_and(|p| p == platform))
    }

    /// Whether `topic` names this entry: its id, an alias, or (case-insensitively) either.
    pub fn answers_to(&self, topic: &str) -> bool {
        let t = topic.trim().to_ascii_lowercase();
        let t = t.trim_end_matches("()");
        self.id.eq_ignore_ascii_case(t)
            || self
                .aliases
                .iter()
                .any(|a| a.to_ascii_lowercase().trim_end_matches("()") == t)
    }
}

//! Optimization tactics (`knowledge/patterns/*.toml`, one per file).

use ksearch_core::task::KernelClass;
use ksearch_core::tree::Risk;
use serde::{Deserialize, Serialize};

use crate::platform::{Language, Platform, Target};

/// One tactic, with the kernel classes it fits and its expected effect.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Pattern {
    pub id: String,
    pub title: String,
    /// Kernel classes it fits, best fit first.
    pub classes: Vec<KernelClass>,
    /// 1 (niche) – 3 (usually the first thing to try); decides what prompts keep.
    pub importance: u8,
    /// What to do, in two or three sentences.
    pub summary: String,
    pub preconditions: Vec<String>,
    pub impact: PatternImpacts,
    pub sketch: Sketch,
    /// Translation entries the tactic relies on.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub translations: Vec<String>,
    pub source: String,
}

/// The expected effect on the tree's three axes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PatternImpacts {
    pub memory_bandwidth: PatternImpact,
    pub register_pressure: PatternImpact,
    pub compute_fit: PatternImpact,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PatternImpact {
    /// 0–10: how much it helps on this axis.
    pub rating: f64,
    pub risk: Risk,
    pub notes: String,
}

/// How the tactic looks per language; at least one is given.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Sketch {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub c: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cuda: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metal: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mlx: Option<String>,
}

impl Sketch {
    /// The sketch to show for a platform: an MLX kernel body is Metal or CUDA code, so MLX
    /// falls back to the sketch of its target's language.
    pub fn for_platform(&self, platform: Platform) -> Option<&str> {
        match (platform.language, platform.target) {
            (Language::C, _) => self.c.as_deref(),
            (Language::Cuda, _) => self.cuda.as_deref(),
            (Language::Metal, _) => self.metal.as_deref(),
            (Language::Mlx, Target::Cuda) => self.cuda.as_deref(),
            (Language::Mlx, _) => self.mlx.as_deref().or(self.metal.as_deref()),
        }
    }

    /// The sketch written for exactly this language.
    pub fn for_language(&self, language: Language) -> Option<&str> {
        match language {
            Language::C => self.c.as_deref(),
            Language::Cuda => self.cuda.as_deref(),
            Language::Metal => self.metal.as_deref(),
            Language::Mlx => self.mlx.as_deref(),
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.c.is_none() && self.cuda.is_none() && self.metal.is_none() && self.mlx.is_none()
    }
}

impl Pattern {
    pub fn fits(&self, class: KernelClass) -> bool {
        self.classes.contains(&class)
    }
}

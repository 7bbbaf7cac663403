//! What a kernel is written in (its [`Language`], in the knowledge layer's terms) and what it
//! runs on (its [`Target`]). A backend names one language and the targets it runs on; the
//! knowledge layer pairs them into platforms.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use thiserror::Error;

/// The language a kernel is written in, as the knowledge layer files its facts, tactics and
/// rules (not a backend: CUDA C++ and Metal are languages knowledge is translated from and to).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Language {
    /// C for the CPU (the `c` backend's candidates).
    C,
    /// CUDA C++.
    Cuda,
    /// The Metal Shading Language.
    Metal,
    /// Python modules building kernels with `mx.fast.metal_kernel` / `mx.fast.cuda_kernel`.
    Mlx,
}

impl Language {
    pub const ALL: [Language; 4] = [Language::C, Language::Cuda, Language::Metal, Language::Mlx];

    pub fn name(self) -> &'static str {
        match self {
            Language::C => "c",
            Language::Cuda => "cuda",
            Language::Metal => "metal",
            Language::Mlx => "mlx",
        }
    }

    /// The one target this language implies; `None` for MLX, which runs on Metal or CUDA.
    pub fn default_target(self) -> Option<Target> {
        match self {
            Language::C => Some(Target::Cpu),
            Language::Cuda => Some(Target::Cuda),
            Language::Metal => Some(Target::Metal),
            Language::Mlx => None,
        }
    }
}

impl fmt::Display for Language {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A language, target or platform name that is not one ksearch knows.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("unknown {what} `{given}` (expected one of: {expected})")]
pub struct ParseError {
    pub what: &'static str,
    pub given: String,
    pub expected: &'static str,
}

impl FromStr for Language {
    type Err = ParseError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "c" => Ok(Language::C),
            "cuda" => Ok(Language::Cuda),
            "metal" | "msl" => Ok(Language::Metal),
            "mlx" => Ok(Language::Mlx),
            // The knowledge command's flag is `--backend`: its users know the word.
            _ => Err(ParseError {
                what: "backend",
                given: s.to_owned(),
                expected: "c, cuda, metal, mlx",
            }),
        }
    }
}

/// The hardware a kernel runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Target {
    Cpu,
    /// NVIDIA GPUs.
    Cuda,
    /// Apple GPUs.
    Metal,
}

impl Target {
    pub fn name(self) -> &'static str {
        match self {
            Target::Cpu => "cpu",
            Target::Cuda => "cuda",
            Target::Metal => "metal",
        }
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Target {
    type Err = ParseError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "cpu" => Ok(Target::Cpu),
            "cuda" | "nvidia" => Ok(Target::Cuda),
            "metal" | "apple" => Ok(Target::Metal),
            _ => Err(ParseError {
                what: "target",
                given: s.to_owned(),
                expected: "cpu, cuda, metal",
            }),
        }
    }
}

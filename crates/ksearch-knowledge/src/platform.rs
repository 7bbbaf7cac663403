//! What a kernel is written in (its backend) and what it runs on (its target).

use std::fmt;
use std::str::FromStr;

use ksearch_core::task::BackendKind;
use serde::{Deserialize, Serialize};
use thiserror::Error;

/// The language a kernel is written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Backend {
    /// C for the CPU (the `c` evaluation backend).
    C,
    /// CUDA C++.
    Cuda,
    /// The Metal Shading Language.
    Metal,
    /// Python modules building kernels with `mx.fast.metal_kernel` / `mx.fast.cuda_kernel`.
    Mlx,
}

impl Backend {
    pub const ALL: [Backend; 4] = [Backend::C, Backend::Cuda, Backend::Metal, Backend::Mlx];

    pub fn name(self) -> &'static str {
        match self {
            Backend::C => "c",
            Backend::Cuda => "cuda",
            Backend::Metal => "metal",
            Backend::Mlx => "mlx",
        }
    }

    /// The one target this backend implies; `None` for MLX, which runs on Metal or CUDA.
    pub fn default_target(self) -> Option<Target> {
        match self {
            Backend::C => Some(Target::Cpu),
            Backend::Cuda => Some(Target::Cuda),
            Backend::Metal => Some(Target::Metal),
            Backend::Mlx => None,
        }
    }
}

impl From<BackendKind> for Backend {
    fn from(kind: BackendKind) -> Self {
        match kind {
            BackendKind::C => Backend::C,
            BackendKind::Mlx => Backend::Mlx,
        }
    }
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A backend, target or platform name that is not one ksearch knows.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("unknown {what} `{given}` (expected one of: {expected})")]
pub struct ParseError {
    pub what: &'static str,
    pub given: String,
    pub expected: &'static str,
}

impl FromStr for Backend {
    type Err = ParseError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "c" => Ok(Backend::C),
            "cuda" => Ok(Backend::Cuda),
            "metal" | "msl" => Ok(Backend::Metal),
            "mlx" => Ok(Backend::Mlx),
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

/// A backend on a target: `c`, `cuda`, `metal`, `mlx/metal` or `mlx/cuda`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Platform {
    pub backend: Backend,
    pub target: Target,
}

/// The combinations that exist.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error(
    "backend `{backend}` does not run on target `{target}` (valid: c on cpu, cuda on cuda, metal on metal, mlx on metal or cuda)"
)]
pub struct InvalidPlatform {
    pub backend: Backend,
    pub target: Target,
}

impl Platform {
    pub const C: Platform = Platform {
        backend: Backend::C,
        target: Target::Cpu,
    };
    pub const CUDA: Platform = Platform {
        backend: Backend::Cuda,
        target: Target::Cuda,
    };
    pub const METAL: Platform = Platform {
        backend: Backend::Metal,
        target: Target::Metal,
    };
    pub const MLX_METAL: Platform = Platform {
        backend: Backend::Mlx,
        target: Target::Metal,
    };
    pub const MLX_CUDA: Platform = Platform {
        backend: Backend::Mlx,
        target: Target::Cuda,
    };
    pub const ALL: [Platform; 5] = [
        Platform::C,
        Platform::CUDA,
        Platform::METAL,
        Platform::MLX_METAL,
        Platform::MLX_CUDA,
    ];

    pub fn new(backend: Backend, target: Target) -> Result<Platform, InvalidPlatform> {
        let p = Platform { backend, target };
        if Platform::ALL.contains(&p) {
            Ok(p)
        } else {
            Err(InvalidPlatform { backend, target })
        }
    }

    pub fn name(self) -> &'static str {
        match (self.backend, self.target) {
            (Backend::Mlx, Target::Metal) => "mlx/metal",
            (Backend::Mlx, Target::Cuda) => "mlx/cuda",
            (Backend::Mlx, Target::Cpu) => "mlx/cpu",
            (b, _) => b.name(),
        }
    }

    /// A phrase for prompts: "MLX (Metal)", "CUDA C++".
    pub fn describe(self) -> &'static str {
        match (self.backend, self.target) {
            (Backend::C, _) => "C on the CPU",
            (Backend::Cuda, _) => "CUDA C++",
            (Backend::Metal, _) => "Metal (MSL)",
            (Backend::Mlx, Target::Metal) => "MLX custom Metal kernels (mx.fast.metal_kernel)",
            (Backend::Mlx, _) => "MLX custom CUDA kernels (mx.fast.cuda_kernel)",
        }
    }

    pub fn is_gpu(self) -> bool {
        self.target != Target::Cpu
    }
}

impl fmt::Display for Platform {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Platform {
    type Err = ParseError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let err = || ParseError {
            what: "platform",
            given: s.to_owned(),
            expected: "c, cuda, metal, mlx/metal, mlx/cuda",
        };
        let lower = s.trim().to_ascii_lowercase();
        let (backend, target) = match lower.split_once('/') {
            Some((b, t)) => (
                b.parse::<Backend>().map_err(|_| err())?,
                t.parse::<Target>().map_err(|_| err())?,
            ),
            None => {
                let b = lower.parse::<Backend>().map_err(|_| err())?;
                (b, b.default_target().ok_or_else(err)?)
            }
        };
        Platform::new(backend, target).map_err(|_| err())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn platforms_parse_and_print() {
        for p in Platform::ALL {
            assert_eq!(p.name().parse::<Platform>(), Ok(p));
        }
        assert!("mlx".parse::<Platform>().is_err());
        assert!("c/metal".parse::<Platform>().is_err());
        assert_eq!("MSL".parse::<Backend>(), Ok(Backend::Metal));
        assert!(Platform::new(Backend::Cuda, Target::Metal).is_err());
    }
}

//! A language on a target: the platforms the knowledge layer files its facts and rules under.
//! [`Language`] and [`Target`] themselves live in `ksearch-core`, where backends name them.

use std::fmt;
use std::str::FromStr;

pub use ksearch_core::platform::{Language, ParseError, Target};
use thiserror::Error;

/// A language on a target: `c`, `cuda`, `metal`, `mlx/metal` or `mlx/cuda`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Platform {
    pub language: Language,
    pub target: Target,
}

/// The combinations that exist.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error(
    "backend `{language}` does not run on target `{target}` (valid: c on cpu, cuda on cuda, metal on metal, mlx on metal or cuda)"
)]
pub struct InvalidPlatform {
    pub language: Language,
    pub target: Target,
}

impl Platform {
    pub const C: Platform = Platform {
        language: Language::C,
        target: Target::Cpu,
    };
    pub const CUDA: Platform = Platform {
        language: Language::Cuda,
        target: Target::Cuda,
    };
    pub const METAL: Platform = Platform {
        language: Language::Metal,
        target: Target::Metal,
    };
    pub const MLX_METAL: Platform = Platform {
        language: Language::Mlx,
        target: Target::Metal,
    };
    pub const MLX_CUDA: Platform = Platform {
        language: Language::Mlx,
        target: Target::Cuda,
    };
    pub const ALL: [Platform; 5] = [
        Platform::C,
        Platform::CUDA,
        Platform::METAL,
        Platform::MLX_METAL,
        Platform::MLX_CUDA,
    ];

    pub fn new(language: Language, target: Target) -> Result<Platform, InvalidPlatform> {
        let p = Platform { language, target };
        if Platform::ALL.contains(&p) {
            Ok(p)
        } else {
            Err(InvalidPlatform { language, target })
        }
    }

    pub fn name(self) -> &'static str {
        match (self.language, self.target) {
            (Language::Mlx, Target::Metal) => "mlx/metal",
            (Language::Mlx, Target::Cuda) => "mlx/cuda",
            (Language::Mlx, Target::Cpu) => "mlx/cpu",
            (l, _) => l.name(),
        }
    }

    /// A phrase for prompts: "MLX (Metal)", "CUDA C++".
    pub fn describe(self) -> &'static str {
        match (self.language, self.target) {
            (Language::C, _) => "C on the CPU",
            (Language::Cuda, _) => "CUDA C++",
            (Language::Metal, _) => "Metal (MSL)",
            (Language::Mlx, Target::Metal) => "MLX custom Metal kernels (mx.fast.metal_kernel)",
            (Language::Mlx, _) => "MLX custom CUDA kernels (mx.fast.cuda_kernel)",
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
        let (language, target) = match lower.split_once('/') {
            Some((l, t)) => (
                l.parse::<Language>().map_err(|_| err())?,
                t.parse::<Target>().map_err(|_| err())?,
            ),
            None => {
                let l = lower.parse::<Language>().map_err(|_| err())?;
                (l, l.default_target().ok_or_else(err)?)
            }
        };
        Platform::new(language, target).map_err(|_| err())
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
        assert_eq!("MSL".parse::<Language>(), Ok(Language::Metal));
        assert!(Platform::new(Language::Cuda, Target::Metal).is_err());
    }
}

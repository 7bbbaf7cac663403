//! Element types a task can declare.

use std::fmt;

use serde::{Deserialize, Serialize};

/// The element type of a tensor in a task.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Dtype {
    F16,
    Bf16,
    F32,
    F64,
    I32,
    I64,
}

impl Dtype {
    pub const ALL: [Dtype; 6] = [
        Dtype::F16,
        Dtype::Bf16,
        Dtype::F32,
        Dtype::F64,
        Dtype::I32,
        Dtype::I64,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Dtype::F16 => "f16",
            Dtype::Bf16 => "bf16",
            Dtype::F32 => "f32",
            Dtype::F64 => "f64",
            Dtype::I32 => "i32",
            Dtype::I64 => "i64",
        }
    }

    pub fn size_bytes(self) -> usize {
        match self {
            Dtype::F16 | Dtype::Bf16 => 2,
            Dtype::F32 | Dtype::I32 => 4,
            Dtype::F64 | Dtype::I64 => 8,
        }
    }

    pub fn is_float(self) -> bool {
        matches!(self, Dtype::F16 | Dtype::Bf16 | Dtype::F32 | Dtype::F64)
    }

    /// The C type a candidate of the `c` backend sees, if that backend supports the dtype.
    pub fn c_type(self) -> Option<&'static str> {
        match self {
            Dtype::F32 => Some("float"),
            Dtype::F64 => Some("double"),
            Dtype::I32 => Some("int32_t"),
            Dtype::I64 => Some("int64_t"),
            Dtype::F16 | Dtype::Bf16 => None,
        }
    }
}

impl fmt::Display for Dtype {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

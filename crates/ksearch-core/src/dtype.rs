//! Element types a task can declare.

use std::fmt;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The element type of a tensor in a task.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Dtype {
    F16,
    Bf16,
    F32,
    F64,
    I32,
    I64,
    /// 8-bit float, 4 exponent and 3 mantissa bits, no infinities (`torch.float8_e4m3fn`).
    F8e4m3,
    /// 8-bit float, 5 exponent and 2 mantissa bits (`torch.float8_e5m2`).
    F8e5m2,
    I8,
    I16,
    Bool,
}

impl Dtype {
    pub const ALL: [Dtype; 11] = [
        Dtype::F16,
        Dtype::Bf16,
        Dtype::F32,
        Dtype::F64,
        Dtype::I32,
        Dtype::I64,
        Dtype::F8e4m3,
        Dtype::F8e5m2,
        Dtype::I8,
        Dtype::I16,
        Dtype::Bool,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Dtype::F16 => "f16",
            Dtype::Bf16 => "bf16",
            Dtype::F32 => "f32",
            Dtype::F64 => "f64",
            Dtype::I32 => "i32",
            Dtype::I64 => "i64",
            Dtype::F8e4m3 => "f8e4m3",
            Dtype::F8e5m2 => "f8e5m2",
            Dtype::I8 => "i8",
            Dtype::I16 => "i16",
            Dtype::Bool => "bool",
        }
    }

    pub fn size_bytes(self) -> usize {
        match self {
            Dtype::F8e4m3 | Dtype::F8e5m2 | Dtype::I8 | Dtype::Bool => 1,
            Dtype::F16 | Dtype::Bf16 | Dtype::I16 => 2,
            Dtype::F32 | Dtype::I32 => 4,
            Dtype::F64 | Dtype::I64 => 8,
        }
    }

    pub fn is_float(self) -> bool {
        matches!(
            self,
            Dtype::F16 | Dtype::Bf16 | Dtype::F32 | Dtype::F64 | Dtype::F8e4m3 | Dtype::F8e5m2
        )
    }

    /// The C type a candidate of the `c` backend sees, if that backend supports the dtype.
    pub fn c_type(self) -> Option<&'static str> {
        match self {
            Dtype::F32 => Some("float"),
            Dtype::F64 => Some("double"),
            Dtype::I32 => Some("int32_t"),
            Dtype::I64 => Some("int64_t"),
            Dtype::F16
            | Dtype::Bf16
            | Dtype::F8e4m3
            | Dtype::F8e5m2
            | Dtype::I8
            | Dtype::I16
            | Dtype::Bool => None,
        }
    }
}

impl fmt::Display for Dtype {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

//! Template families of the builtin proposer: for each built-in CPU task, a C code generator
//! over a small space of knobs, where changing one knob is one optimization tactic, and an
//! analytical cost model that ranks the points of the space.
//!
//! Every family's [`Family::seed`] renders the task's naive seed algorithm; the search walks the
//! space from there one knob at a time.

mod c_source;
mod estimates;
mod family;
mod knobs;
mod matches;
mod registry;

pub mod linear_recurrence;
pub mod matmul;
pub mod softmax;

#[cfg(test)]
pub(crate) mod test_support;

pub use family::{Cost, Family, Knob, KnobValue, Point};
pub use knobs::{neighbours, point_of, value};
pub use registry::{all, for_task};

pub(crate) use c_source::{c_stream_helpers, c_vector_preamble, header};
pub(crate) use estimates::{axis, impact};
pub(crate) use knobs::{in_space, values};
pub(crate) use matches::spec_is;

use super::machine::Machine;

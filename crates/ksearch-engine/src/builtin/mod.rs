//! The builtin proposer: no LLM, a knowledge-driven template space per task family.

pub mod families;
pub mod machine;
mod proposer;
pub mod space;

pub use proposer::BuiltinProposer;

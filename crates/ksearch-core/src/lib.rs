//! The pure core of ksearch: task format, worker protocol types, statistics and scoring.
//! Nothing here performs IO.

pub mod contract;
pub mod dtype;
pub mod location;
pub mod protocol;
pub mod rng;
pub mod score;
pub mod static_check;
pub mod stats;
pub mod task;
pub mod tree;

pub use dtype::Dtype;
pub use task::{Task, TaskError, TaskSpec, parse_task};

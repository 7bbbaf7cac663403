//! The pure core of ksearch: task format, worker protocol types, statistics and scoring.
//! Nothing here performs IO.

pub mod axis_expr;
pub mod backend;
pub mod build;
pub mod calibration;
pub mod caveats;
pub mod contract;
pub mod dtype;
pub mod external_worker;
pub mod file_kind;
pub mod gate;
pub mod implementation;
pub mod location;
pub mod platform;
pub mod printable;
pub mod protocol;
pub mod record;
pub mod rng;
pub mod score;
pub mod selection;
pub mod space;
pub mod static_check;
pub mod stats;
pub mod suggest;
pub mod task;
pub mod tree;
pub mod tree_edit;
pub mod units;

pub use dtype::Dtype;
pub use task::{Task, TaskError, TaskSpec, parse_task};

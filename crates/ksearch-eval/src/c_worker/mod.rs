//! The `c` backend: C candidates compiled by the system compiler and run on the CPU.
//!
//! `ksearch worker c` is the judge: it owns inputs, references, expected outputs, verification
//! and timing. `ksearch runner c` is a runner: started by the judge in a sandbox, fresh for every
//! contender of every evaluation, it loads one kernel and calls it when told.

mod contender;
mod futex;
mod gauntlet;
mod kernel;
mod link;
mod pool;
mod reference_fault;
mod runner;
mod settle;
mod tensors;
mod timing;
mod verify;
mod worker;

pub use kernel::CANDIDATE_FLAGS;
pub(crate) use kernel::Driver;
pub use runner::run as run_runner;
pub use worker::run;

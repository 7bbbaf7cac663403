//! The `c` backend's worker: C candidates compiled by the system compiler and run on the CPU.

mod buffers;
mod gauntlet;
mod kernel;
mod timing;
mod worker;

pub use worker::run;

//! Reports of a ksearch run: the self-contained HTML report (`ksearch report`), one node in the
//! terminal (`ksearch show`) and the best kernel exported for use (`ksearch export`).
//!
//! Everything but [`load`], [`export::write`] and [`output`] is a pure function of a loaded [`RunData`], so
//! the renderings can be tested on hand-built runs.

mod data;
pub mod diff;
pub mod export;
mod format;
pub mod html;
pub mod output;
/// A hand-built run for tests and the example (feature `test-support`).
#[cfg(feature = "test-support")]
pub mod sample;
pub mod show;

pub use data::{ReportError, RunData, load, node_status, run_id};

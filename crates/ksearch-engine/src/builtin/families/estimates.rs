//! What the cost models and impact ratings share: a workload's axis value, an impact rating.

use ksearch_core::task::Workload;
use ksearch_core::tree::{Impact, Risk};

/// The axis value of a workload, at least 1.
pub(crate) fn axis(workload: &Workload, name: &str) -> f64 {
    workload.axes.get(name).copied().unwrap_or(1).max(1) as f64
}

/// An impact rating with risk and notes.
pub(crate) fn impact(rating: f64, risk: Risk, notes: impl Into<String>) -> Impact {
    Impact {
        rating: rating.clamp(0.0, 10.0),
        risk,
        notes: notes.into(),
    }
}

//! Summaries of timing samples.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The `q` quantile (0..=1) of sorted samples, by linear interpolation between order statistics.
pub fn quantile(sorted: &[f64], q: f64) -> f64 {
    assert!(!sorted.is_empty(), "quantile of no samples");
    let pos = q.clamp(0.0, 1.0) * (sorted.len() - 1) as f64;
    let lo = pos.floor() as usize;
    let hi = pos.ceil() as usize;
    let frac = pos - lo as f64;
    sorted[lo] + (sorted[hi] - sorted[lo]) * frac
}

/// Median and spread of per-call times of one contender on one workload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TimingStats {
    pub median_ms: f64,
    pub p10_ms: f64,
    pub p90_ms: f64,
    /// Number of samples; each sample is the mean of `calls_per_sample` back-to-back calls.
    pub runs: usize,
    pub calls_per_sample: usize,
    /// Per-call time of each sample in the order taken; sample `i` of two contenders timed in
    /// the same run were taken in the same interleaved round.
    pub samples_ms: Vec<f64>,
}

impl TimingStats {
    pub fn from_samples(samples_ms: Vec<f64>, calls_per_sample: usize) -> Self {
        let mut sorted = samples_ms.clone();
        sorted.sort_by(f64::total_cmp);
        Self {
            median_ms: quantile(&sorted, 0.5),
            p10_ms: quantile(&sorted, 0.1),
            p90_ms: quantile(&sorted, 0.9),
            runs: samples_ms.len(),
            calls_per_sample,
            samples_ms,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_interpolate() {
        let s = [1.0, 2.0, 3.0, 4.0, 5.0];
        assert_eq!(quantile(&s, 0.5), 3.0);
        assert_eq!(quantile(&s, 0.0), 1.0);
        assert_eq!(quantile(&s, 1.0), 5.0);
        assert!((quantile(&s, 0.1) - 1.4).abs() < 1e-12);
        assert_eq!(quantile(&[2.0, 4.0], 0.5), 3.0);
    }

    #[test]
    fn stats_keep_sample_order() {
        let t = TimingStats::from_samples(vec![3.0, 1.0, 2.0], 4);
        assert_eq!(t.median_ms, 2.0);
        assert_eq!(t.samples_ms, vec![3.0, 1.0, 2.0]);
        assert_eq!((t.runs, t.calls_per_sample), (3, 4));
    }
}

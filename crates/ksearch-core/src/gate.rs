//! The acceptance gate: is a candidate faster than another kernel timed with it, beyond noise?
//!
//! Rule: the two were timed in the same worker, interleaved round by round, so sample `i` of
//! each was taken in the same round. For every workload, resample the rounds with replacement
//! (the same rounds for both kernels, keeping the pairing) and take the ratio of medians
//! `median(other) / median(candidate)`; combine workloads by geometric mean. Repeat 2000 times.
//! The candidate is **better** when the 2.5th percentile of that distribution is above 1.0,
//! **worse** when the 97.5th percentile is below 1.0, otherwise the **same**.

use serde::{Deserialize, Serialize};

use crate::protocol::{EvaluateResult, Role};
use crate::rng::Rng;
use crate::stats::quantile;
use crate::tree::Gate;

pub const RESAMPLES: usize = 2000;
/// Two-sided 95% interval.
pub const LEVEL: f64 = 0.95;

/// What the gate reads from two kernels timed together: their ratio of medians, its resampled
/// interval and the verdict.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct PairedRatio {
    /// Geometric mean over workloads of median(other) / median(candidate).
    pub ratio: f64,
    pub interval: (f64, f64),
    pub verdict: Gate,
}

impl PairedRatio {
    /// Whether every number of it is finite (and the ratio positive): only then is it a
    /// measurement; resampling a timing that holds zeros or infinities gives none.
    pub fn is_finite(&self) -> bool {
        self.ratio.is_finite()
            && self.ratio > 0.0
            && self.interval.0.is_finite()
            && self.interval.1.is_finite()
    }
}

fn median(xs: &mut [f64]) -> f64 {
    xs.sort_by(f64::total_cmp);
    quantile(xs, 0.5)
}

/// The paired ratio of samples per workload: `(candidate samples, other samples)`.
pub fn paired_ratio(workloads: &[(&[f64], &[f64])], seed: u64) -> Option<PairedRatio> {
    paired_ratio_at(workloads, seed, RESAMPLES, LEVEL)
}

/// [`paired_ratio`] with `resamples` resamples instead of [`RESAMPLES`] and an interval at
/// `level` instead of [`LEVEL`] (its verdict read from that interval): a judge asking, while it
/// times, whether it may stop.
pub fn paired_ratio_at(
    workloads: &[(&[f64], &[f64])],
    seed: u64,
    resamples: usize,
    level: f64,
) -> Option<PairedRatio> {
    let pairs: Vec<(&[f64], &[f64])> = workloads
        .iter()
        .map(|(c, o)| {
            let n = c.len().min(o.len());
            (&c[..n], &o[..n])
        })
        .collect();
    if pairs.is_empty() || pairs.iter().any(|(c, _)| c.is_empty()) {
        return None;
    }
    let log_ratio = |c: &mut Vec<f64>, o: &mut Vec<f64>| (median(o) / median(c)).ln();
    let point = pairs
        .iter()
        .map(|(c, o)| log_ratio(&mut c.to_vec(), &mut o.to_vec()))
        .sum::<f64>()
        / pairs.len() as f64;
    let mut rng = Rng::new(seed);
    let mut dist = Vec::with_capacity(resamples.max(1));
    let (mut bc, mut bo) = (Vec::new(), Vec::new());
    for _ in 0..resamples.max(1) {
        let mut sum = 0.0;
        for (c, o) in &pairs {
            bc.clear();
            bo.clear();
            for _ in 0..c.len() {
                let i = (rng.next_u64() % c.len() as u64) as usize;
                bc.push(c[i]);
                bo.push(o[i]);
            }
            sum += log_ratio(&mut bc, &mut bo);
        }
        dist.push((sum / pairs.len() as f64).exp());
    }
    dist.sort_by(f64::total_cmp);
    let tail = (1.0 - level) / 2.0;
    let interval = (quantile(&dist, tail), quantile(&dist, 1.0 - tail));
    let verdict = if interval.0 > 1.0 {
        Gate::Better
    } else if interval.1 < 1.0 {
        Gate::Worse
    } else {
        Gate::Same
    };
    Some(PairedRatio {
        ratio: point.exp(),
        interval,
        verdict,
    })
}

/// The paired ratio of the candidate of `result` over the contender of `role` timed alongside it.
pub fn vs_contender(result: &EvaluateResult, role: Role, seed: u64) -> Option<PairedRatio> {
    let mut pairs = Vec::new();
    for w in &result.workloads {
        let c = w.timing(Role::Candidate)?;
        let o = w.timing(role)?;
        pairs.push((c.samples_ms.as_slice(), o.samples_ms.as_slice()));
    }
    paired_ratio(&pairs, seed)
}

/// A cycle's best attempt against its node's parent timed with it: the acceptance gate's
/// verdict when the attempt becomes the node's solution. Seeded by the run's seed and the
/// attempt's round, so the cycle's end and a view of the cycle under way read the same.
pub fn vs_parent(result: &EvaluateResult, run_seed: u64, round: u64) -> Option<PairedRatio> {
    vs_contender(result, Role::Parent, run_seed ^ round).filter(PairedRatio::is_finite)
}

/// An attempt against the cycle's best attempt (the incumbent) timed with it: the paired ratio
/// that decides whether the attempt improves on it, and that its feedback quotes. The resampling
/// is seeded by the run's seed and the attempt's round, so it reads the same every time.
pub fn vs_incumbent(result: &EvaluateResult, run_seed: u64, round: u64) -> Option<PairedRatio> {
    vs_contender(result, Role::Incumbent, run_seed ^ round).filter(PairedRatio::is_finite)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn noisy(base: f64, n: usize, seed: u64) -> Vec<f64> {
        let mut r = Rng::new(seed);
        (0..n)
            .map(|_| base * (1.0 + 0.05 * r.normal(0.0, 1.0)))
            .collect()
    }

    #[test]
    fn a_clear_gain_is_better_and_a_clear_loss_worse() {
        let c = noisy(1.0, 20, 1);
        let o = noisy(1.3, 20, 2);
        let r = paired_ratio(&[(&c, &o)], 7).unwrap();
        assert_eq!(r.verdict, Gate::Better, "{r:?}");
        assert!((r.ratio - 1.3).abs() < 0.1);
        let r = paired_ratio(&[(&o, &c)], 7).unwrap();
        assert_eq!(r.verdict, Gate::Worse, "{r:?}");
    }

    #[test]
    fn noise_alone_is_the_same() {
        let c = noisy(1.0, 20, 3);
        let o = noisy(1.0, 20, 4);
        let r = paired_ratio(&[(&c, &o)], 7).unwrap();
        assert_eq!(r.verdict, Gate::Same, "{r:?}");
        assert!(r.interval.0 < 1.0 && r.interval.1 > 1.0);
    }

    #[test]
    fn a_small_gain_within_wide_noise_is_not_accepted() {
        // 3% apart in truth, 30% noise, 6 rounds: not distinguishable.
        let mut r = Rng::new(9);
        let c: Vec<f64> = (0..6)
            .map(|_| 1.0 + 0.3 * r.normal(0.0, 1.0).abs())
            .collect();
        let o: Vec<f64> = (0..6)
            .map(|_| 1.03 + 0.3 * r.normal(0.0, 1.0).abs())
            .collect();
        assert_eq!(paired_ratio(&[(&c, &o)], 1).unwrap().verdict, Gate::Same);
    }

    #[test]
    fn pairing_detects_a_steady_gain_under_shared_drift() {
        // Both kernels drift together by ±50%; the candidate is always 10% faster in its round.
        let drift: Vec<f64> = (0..12)
            .map(|i| 1.0 + 0.5 * (i as f64 / 3.0).sin())
            .collect();
        let o: Vec<f64> = drift.iter().map(|d| d * 1.1).collect();
        assert_eq!(
            paired_ratio(&[(&drift, &o)], 1).unwrap().verdict,
            Gate::Better
        );
    }

    #[test]
    fn workloads_combine_by_geometric_mean_and_the_result_is_deterministic() {
        let (c1, o1) = (vec![1.0; 5], vec![4.0; 5]);
        let (c2, o2) = (vec![1.0; 5], vec![1.0; 5]);
        let r = paired_ratio(&[(&c1, &o1), (&c2, &o2)], 3).unwrap();
        assert!((r.ratio - 2.0).abs() < 1e-12);
        assert_eq!(r, paired_ratio(&[(&c1, &o1), (&c2, &o2)], 3).unwrap());
        assert!(paired_ratio(&[], 1).is_none());
    }
}

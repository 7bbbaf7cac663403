//! When a workload's timing may stop before `min_time_ms`: once the candidate's paired
//! intervals with every other contender are tight (the Python judge's `stats.settled` holds the
//! same rule).

/// Relative half-width of a paired interval at which timing may stop before `min_time_ms`.
pub(crate) const SETTLED_HALF_WIDTH: f64 = 0.01;

/// Resamples of the interval read while timing (the gate itself takes `gate::RESAMPLES`).
const SETTLE_RESAMPLES: usize = 400;

/// Whether the candidate's (contender 0's) paired ratio with every other contender is known
/// within [`SETTLED_HALF_WIDTH`] after `rounds` rounds: its 95% interval, resampled over the
/// rounds as the acceptance gate does, lies within that share of the ratio on both sides. Read
/// at `min_runs` rounds and then each time the rounds grew by half (a dozen readings in a
/// thousand rounds). A tight interval says where the ratio lies, whatever it is, so stopping on
/// it does not favour any verdict; a ratio nearer 1 than the half-width may read "same" where
/// longer timing would have read "better" or "worse".
pub(crate) fn settled(samples: &[Vec<f64>], rounds: usize, min_runs: usize) -> bool {
    if samples.len() < 2 || !is_look(rounds, min_runs.max(2)) {
        return false;
    }
    let candidate = &samples[0];
    samples[1..].iter().enumerate().all(|(j, other)| {
        ksearch_core::gate::paired_ratio_resampled(
            &[(candidate, other)],
            0x05E7_71ED ^ j as u64,
            SETTLE_RESAMPLES,
        )
        .filter(ksearch_core::gate::PairedRatio::is_finite)
        .is_some_and(|r| {
            r.interval.0 >= r.ratio * (1.0 - SETTLED_HALF_WIDTH)
                && r.interval.1 <= r.ratio * (1.0 + SETTLED_HALF_WIDTH)
        })
    })
}

/// The rounds at which [`settled`] reads: `first`, then each ×1.5 (rounded up).
fn is_look(rounds: usize, first: usize) -> bool {
    let mut look = first;
    while look < rounds {
        look = (look * 3).div_ceil(2);
    }
    look == rounds
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timing_settles_when_every_paired_interval_is_tight() {
        let steady = |base: f64, n: usize| -> Vec<f64> {
            (0..n)
                .map(|i| base * (1.0 + 0.001 * (i % 3) as f64))
                .collect()
        };
        let noisy = |base: f64, n: usize| -> Vec<f64> {
            (0..n)
                .map(|i| base * (1.0 + 0.3 * (i % 4) as f64))
                .collect()
        };
        let tight = vec![steady(1.0, 23), steady(2.0, 23), steady(0.5, 23)];
        assert!(settled(&tight, 23, 10));
        // Only at the looks (10, 15, 23, 35, ...), never before `min_runs`.
        assert!(!settled(&tight, 22, 10));
        assert!(!settled(&tight, 23, 25));
        assert!(
            (1..200)
                .filter(|&r| is_look(r, 10))
                .eq([10, 15, 23, 35, 53, 80, 120, 180])
        );
        // One loose pair keeps it timing.
        let loose = vec![steady(1.0, 23), steady(2.0, 23), noisy(0.5, 23)];
        assert!(!settled(&loose, 23, 10));
        // A contender alone has nothing to settle against.
        assert!(!settled(&[steady(1.0, 23)], 23, 10));
    }
}

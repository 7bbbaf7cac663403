//! When a workload's timing may stop before `min_time_ms`: once the candidate's paired ratio
//! with every other contender is known, within a percent or decided (the Python judge's
//! `stats.settled` holds the same rule).

/// Relative half-width of a paired interval at which timing may stop before `min_time_ms`.
pub(crate) const SETTLED_HALF_WIDTH: f64 = 0.01;
/// A pair whose verdict is decided stops sooner: its interval at [`DECIDED_LEVEL`] lies past
/// this margin around 1 (above 1.02 or below 1/1.02), and its 95% interval within
/// [`DECIDED_HALF_WIDTH`] of its ratio.
const DECIDED_MARGIN: f64 = 1.02;
const DECIDED_LEVEL: f64 = 0.995;
const DECIDED_HALF_WIDTH: f64 = 0.03;

/// Resamples of the interval read while timing (the gate itself takes `gate::RESAMPLES`).
const SETTLE_RESAMPLES: usize = 1000;

/// Whether the candidate's (contender 0's) paired ratio with every other contender is known
/// after `rounds` rounds, resampled over the rounds as the acceptance gate does: its 95%
/// interval lies within [`SETTLED_HALF_WIDTH`] of the ratio on both sides (where the ratio is,
/// whatever it is), or its verdict is decided (its 99.5% interval clear of 1 by 2%, and its 95%
/// interval within 3% of the ratio). Read at `min_runs` rounds and then each time the rounds
/// grew by half (a dozen readings in a thousand rounds). A tight interval favours no verdict; a
/// decided one is read at a level that keeps the chance of a verdict the full timing would not
/// give under the gate's own 5% over those readings. A ratio within a percent of 1 may read
/// "same" where longer timing would have read "better" or "worse".
pub(crate) fn settled(samples: &[Vec<f64>], rounds: usize, min_runs: usize) -> bool {
    if samples.len() < 2 || !is_look(rounds, min_runs.max(2)) {
        return false;
    }
    let candidate = &samples[0];
    samples[1..].iter().enumerate().all(|(j, other)| {
        let at = |level| {
            ksearch_core::gate::paired_ratio_at(
                &[(candidate, other)],
                0x05E7_71ED ^ j as u64,
                SETTLE_RESAMPLES,
                level,
            )
            .filter(ksearch_core::gate::PairedRatio::is_finite)
        };
        let (Some(r), Some(wide)) = (at(ksearch_core::gate::LEVEL), at(DECIDED_LEVEL)) else {
            return false;
        };
        let within =
            |h: f64| r.interval.0 >= r.ratio * (1.0 - h) && r.interval.1 <= r.ratio * (1.0 + h);
        let decided = wide.interval.0 > DECIDED_MARGIN || wide.interval.1 < 1.0 / DECIDED_MARGIN;
        within(SETTLED_HALF_WIDTH) || (decided && within(DECIDED_HALF_WIDTH))
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
        // A pair 10% apart with a spread of 4% (not the same in both) is decided long before
        // it is within 1%; one 0.5% apart is neither.
        let spread = |base: f64, n: usize, step: usize| -> Vec<f64> {
            (0..n)
                .map(|i| base * (1.0 + 0.04 * ((i * step) % 5) as f64 / 4.0))
                .collect()
        };
        let apart = vec![spread(1.0, 23, 7), spread(1.1, 23, 3)];
        assert!(settled(&apart, 23, 10));
        let close = vec![spread(1.0, 23, 7), spread(1.005, 23, 3)];
        assert!(!settled(&close, 23, 10));
        // One loose pair keeps it timing.
        let loose = vec![steady(1.0, 23), steady(2.0, 23), noisy(0.5, 23)];
        assert!(!settled(&loose, 23, 10));
        // A contender alone has nothing to settle against.
        assert!(!settled(&[steady(1.0, 23)], 23, 10));
    }
}

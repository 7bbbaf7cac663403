//! The charts' log scale: mapping values to pixels, and ticks with labels.

/// Nice tick values for a log axis between `lo` and `hi`.
pub(super) fn log_ticks(lo: f64, hi: f64) -> Vec<f64> {
    let mantissas: &[&[f64]] = &[
        &[1.0],
        &[1.0, 2.0, 5.0],
        &[1.0, 1.5, 2.0, 3.0, 5.0, 7.0],
        &[
            1.0, 1.1, 1.2, 1.3, 1.5, 1.7, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 8.0,
        ],
    ];
    let mut best = Vec::new();
    for ms in mantissas {
        let mut ticks = Vec::new();
        let (e0, e1) = (lo.log10().floor() as i32 - 1, hi.log10().ceil() as i32 + 1);
        for e in e0..=e1 {
            for m in *ms {
                let v = m * 10f64.powi(e);
                if v >= lo * 0.999 && v <= hi * 1.001 {
                    ticks.push(v);
                }
            }
        }
        if ticks.len() > 9 {
            break;
        }
        best = ticks;
        if best.len() >= 4 {
            break;
        }
    }
    best
}

pub(super) fn tick_label(v: f64) -> String {
    if v >= 10.0 || (v - v.round()).abs() < 1e-9 {
        format!("{v:.0}×")
    } else if v >= 1.0 {
        format!(
            "{}×",
            format!("{v:.2}")
                .trim_end_matches('0')
                .trim_end_matches('.')
        )
    } else {
        format!(
            "{}×",
            format!("{v:.3}")
                .trim_end_matches('0')
                .trim_end_matches('.')
        )
    }
}

/// A log-scale mapping of `[lo, hi]` onto `[bottom, top]` pixels.
pub(super) struct LogScale {
    pub(super) lo: f64,
    pub(super) hi: f64,
    a: f64,
    b: f64,
}

impl LogScale {
    pub(super) fn new(lo: f64, hi: f64, a: f64, b: f64) -> Self {
        let (lo, hi) = if hi / lo < 1.05 {
            (lo / 1.05, hi * 1.05)
        } else {
            (lo, hi)
        };
        Self { lo, hi, a, b }
    }

    pub(super) fn at(&self, v: f64) -> f64 {
        let t = (v.ln() - self.lo.ln()) / (self.hi.ln() - self.lo.ln());
        self.a + (self.b - self.a) * t
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_ticks_are_few_and_in_range() {
        for (lo, hi) in [(0.9, 1.3), (0.5, 40.0), (1.0, 2.0), (0.05, 300.0)] {
            let t = log_ticks(lo, hi);
            assert!((2..=9).contains(&t.len()), "{lo}..{hi}: {t:?}");
            assert!(t.iter().all(|v| *v >= lo * 0.999 && *v <= hi * 1.001));
        }
        assert_eq!(tick_label(1.5), "1.5×");
        assert_eq!(tick_label(20.0), "20×");
        assert_eq!(tick_label(0.25), "0.25×");
    }
}

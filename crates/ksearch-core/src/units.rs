//! Times for people to read: a latency stored in milliseconds shown in the unit that suits it
//! (`100 ns`, `80.00 µs`, `12.35 ms`, `1.500 s`) with four significant digits, so that a fast
//! kernel does not read as `0.0001 ms` and a slow one as `1500.000 ms`.

/// Significant digits shown.
const DIGITS: i32 = 4;

/// A unit of time, from nanoseconds to seconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum TimeUnit {
    Ns,
    Us,
    Ms,
    S,
}

impl TimeUnit {
    const ALL: [TimeUnit; 4] = [TimeUnit::Ns, TimeUnit::Us, TimeUnit::Ms, TimeUnit::S];

    /// Milliseconds in one of this unit.
    fn ms(self) -> f64 {
        match self {
            TimeUnit::Ns => 1e-6,
            TimeUnit::Us => 1e-3,
            TimeUnit::Ms => 1.0,
            TimeUnit::S => 1e3,
        }
    }

    pub fn symbol(self) -> &'static str {
        match self {
            TimeUnit::Ns => "ns",
            TimeUnit::Us => "µs",
            TimeUnit::Ms => "ms",
            TimeUnit::S => "s",
        }
    }

    /// The largest unit in which `ms` (once rounded to four significant digits) is at least
    /// one: nanoseconds for anything shorter than a microsecond, seconds for anything longer.
    pub fn for_ms(ms: f64) -> TimeUnit {
        let ms = ms.abs();
        if !ms.is_finite() || ms == 0.0 {
            return TimeUnit::Ms;
        }
        TimeUnit::ALL
            .into_iter()
            .rev()
            .find(|u| round_sig(ms / u.ms()) >= 1.0)
            .unwrap_or(TimeUnit::Ns)
    }

    /// `ms` in this unit as a number with four significant digits (no unit): `80.00`.
    pub fn number(self, ms: f64) -> String {
        significant(ms / self.ms())
    }

    /// `ms` in this unit with its symbol: `80.00 µs`.
    pub fn format(self, ms: f64) -> String {
        format!("{} {}", self.number(ms), self.symbol())
    }
}

/// A time given in milliseconds, in the unit that suits it: `100.0 ns`, `80.00 µs`,
/// `12.35 ms`, `1.500 s`; `-` when it is not a number.
pub fn time_ms(ms: f64) -> String {
    if !ms.is_finite() {
        return "-".into();
    }
    TimeUnit::for_ms(ms).format(ms)
}

/// A median with its spread, all in the median's unit: `80.00 µs (79.00–85.40)`.
pub fn time_ms_spread(median: f64, lo: f64, hi: f64) -> String {
    if !median.is_finite() {
        return "-".into();
    }
    let u = TimeUnit::for_ms(median);
    format!("{} ({}–{})", u.format(median), u.number(lo), u.number(hi))
}

/// Decimals that give `v` four significant digits (none for values of 1000 and more).
fn decimals(v: f64) -> usize {
    let mag = v.abs().log10().floor() as i32;
    (DIGITS - 1 - mag).max(0) as usize
}

/// `v` rounded to four significant digits.
fn round_sig(v: f64) -> f64 {
    if v == 0.0 || !v.is_finite() {
        return v;
    }
    significant(v).parse().unwrap_or(v)
}

/// `v` with four significant digits: `1.234`, `12.34`, `123.4`, `1234`, `12346`, `0.5000`.
fn significant(v: f64) -> String {
    if v == 0.0 {
        return "0".into();
    }
    if !v.is_finite() {
        return "-".into();
    }
    let d = decimals(v);
    let s = format!("{v:.d$}");
    // Rounding may carry into one more digit (9.9996 → 10.000): show it with one decimal less.
    let rounded: f64 = s.parse().unwrap_or(v);
    let d2 = decimals(rounded);
    if d2 < d { format!("{v:.d2$}") } else { s }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_read_in_the_unit_that_suits_them() {
        assert_eq!(time_ms(0.0001), "100.0 ns");
        assert_eq!(time_ms(0.000_012_3), "12.30 ns");
        assert_eq!(time_ms(0.08), "80.00 µs");
        assert_eq!(time_ms(0.1), "100.0 µs");
        assert_eq!(time_ms(0.68), "680.0 µs");
        assert_eq!(time_ms(3.6), "3.600 ms");
        assert_eq!(time_ms(12.3456), "12.35 ms");
        assert_eq!(time_ms(30.0), "30.00 ms");
        assert_eq!(time_ms(1500.0), "1.500 s");
        assert_eq!(time_ms(95_000.0), "95.00 s");
        assert_eq!(time_ms(12_345_678.0), "12346 s");
        assert_eq!(time_ms(0.000_000_5), "0.5000 ns");
        assert_eq!(time_ms(0.0), "0 ms");
        assert_eq!(time_ms(f64::NAN), "-");
        assert_eq!(time_ms(f64::INFINITY), "-");
    }

    #[test]
    fn rounding_up_moves_to_the_next_unit() {
        // 999.96 µs rounds to 1000 µs: shown as 1.000 ms, not 1000 µs.
        assert_eq!(time_ms(0.999_96), "1.000 ms");
        assert_eq!(time_ms(0.999_94), "999.9 µs");
        assert_eq!(time_ms(999.99), "1.000 s");
        // Inside a unit, a carry keeps four significant digits.
        assert_eq!(time_ms(9.999_96), "10.00 ms");
        assert_eq!(time_ms(99.999_6), "100.0 ms");
    }

    #[test]
    fn a_spread_is_in_the_unit_of_its_median() {
        assert_eq!(
            time_ms_spread(0.08, 0.079, 0.0854),
            "80.00 µs (79.00–85.40)"
        );
        assert_eq!(time_ms_spread(0.9, 0.8, 1.2), "900.0 µs (800.0–1200)");
        assert_eq!(time_ms_spread(f64::NAN, 1.0, 2.0), "-");
        assert_eq!(TimeUnit::for_ms(30.0).number(29.64), "29.64");
        assert_eq!(TimeUnit::Us.symbol(), "µs");
    }
}

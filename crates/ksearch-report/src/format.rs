//! Small formatting helpers shared by the renderings.

/// `2.31×`, or `-` when unknown.
pub(crate) fn x(v: Option<f64>) -> String {
    v.map_or_else(|| "-".into(), |v| format!("{v:.2}×"))
}

/// `1h 02m 03s`, `4m 05s`, `6.1s`.
pub(crate) fn duration(s: f64) -> String {
    let total = s.max(0.0);
    if total < 60.0 {
        return format!("{total:.1}s");
    }
    let secs = total.round() as u64;
    let (h, m, sec) = (secs / 3600, (secs % 3600) / 60, secs % 60);
    if h > 0 {
        format!("{h}h {m:02}m {sec:02}s")
    } else {
        format!("{m}m {sec:02}s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats() {
        assert_eq!(x(Some(2.345)), "2.35×");
        assert_eq!(x(None), "-");
        assert_eq!(duration(6.12), "6.1s");
        assert_eq!(duration(245.0), "4m 05s");
        assert_eq!(duration(3723.0), "1h 02m 03s");
    }
}

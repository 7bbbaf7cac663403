//! One number about a device, with where it comes from: published, measured, derived, estimated,
//! assumed, or explicitly unknown. The loader refuses a number without a source or note.

use std::fmt;

use serde::{Deserialize, Serialize};

/// How much a number can be trusted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FactStatus {
    /// From the vendor's datasheet, whitepaper, documentation or API.
    Published,
    /// Measured on real hardware; the source says by whom and how.
    Measured,
    /// Computed from published numbers; the note gives the formula.
    Derived,
    /// A third-party or unconfirmed figure; the note says why it is not firm.
    Estimate,
    /// A modelling assumption, not a property of any one machine.
    Assumption,
    /// Not published and not measured; `value` is absent and the note says so.
    Unknown,
}

impl FactStatus {
    pub fn name(self) -> &'static str {
        match self {
            FactStatus::Published => "published",
            FactStatus::Measured => "measured",
            FactStatus::Derived => "derived",
            FactStatus::Estimate => "estimate",
            FactStatus::Assumption => "assumption",
            FactStatus::Unknown => "unknown",
        }
    }
}

/// A number and its provenance: `{ value = 400, status = "published", source = "…" }`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Fact {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<f64>,
    pub status: FactStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// The unit a fact is written in; it comes from the field's name (`_bytes`, `_gbs`, …).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    Count,
    Bytes,
    GigaBytes,
    GigaBytesPerSecond,
    TeraFlops,
    GigaHertz,
    BytesPerCycle,
    Ratio,
}

impl Fact {
    /// The number, when it is known.
    pub fn value(&self) -> Option<f64> {
        match self.status {
            FactStatus::Unknown => None,
            _ => self.value,
        }
    }

    /// What is wrong with this fact as written, if anything: the sub-field and the message.
    pub(crate) fn problem(&self) -> Option<(&'static str, String)> {
        let missing = |what: &'static str| {
            Some((
                what,
                format!("a `{}` fact needs a `{what}`", self.status.name()),
            ))
        };
        if let Some(v) = self.value
            && (!v.is_finite() || v < 0.0)
        {
            return Some(("value", "must be a finite number ≥ 0".into()));
        }
        let has = |s: &Option<String>| s.as_deref().is_some_and(|t| !t.trim().is_empty());
        match self.status {
            FactStatus::Unknown => {
                if self.value.is_some() {
                    return Some((
                        "value",
                        "an `unknown` fact has no value: drop it, or give it a status".into(),
                    ));
                }
                if !has(&self.note) {
                    return missing("note");
                }
            }
            status => {
                if self.value.is_none() {
                    return missing("value");
                }
                let needs_source = matches!(
                    status,
                    FactStatus::Published
                        | FactStatus::Measured
                        | FactStatus::Derived
                        | FactStatus::Estimate
                );
                if needs_source && !has(&self.source) {
                    return missing("source");
                }
                let needs_note = matches!(
                    status,
                    FactStatus::Derived | FactStatus::Estimate | FactStatus::Assumption
                );
                if needs_note && !has(&self.note) {
                    return missing("note");
                }
            }
        }
        None
    }

    /// `400 GB/s`, `unknown`, `~14 TFLOPS (estimate)`.
    pub fn display(&self, unit: Unit) -> String {
        match (self.status, self.value) {
            (FactStatus::Unknown, _) | (_, None) => "unknown".to_owned(),
            (FactStatus::Published | FactStatus::Measured | FactStatus::Derived, Some(v)) => {
                format_value(v, unit)
            }
            (status, Some(v)) => format!("{} ({})", format_value(v, unit), status.name()),
        }
    }
}

/// A number in its unit, compactly: `32 KiB`, `4800 GB/s`, `989.4 TFLOPS`.
pub fn format_value(v: f64, unit: Unit) -> String {
    match unit {
        Unit::Count => format_number(v),
        Unit::Bytes => format_bytes(v),
        Unit::GigaBytes => format!("{} GB", format_number(v)),
        Unit::GigaBytesPerSecond => format!("{} GB/s", format_number(v)),
        Unit::TeraFlops => format!("{} TFLOPS", format_number(v)),
        Unit::GigaHertz => format!("{} GHz", format_number(v)),
        Unit::BytesPerCycle => format!("{} bytes/cycle", format_number(v)),
        Unit::Ratio => format!("{}×", format_number(v)),
    }
}

fn format_number(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{v:.0}")
    } else {
        let s = format!("{v:.3}");
        s.trim_end_matches('0').trim_end_matches('.').to_owned()
    }
}

fn format_bytes(v: f64) -> String {
    const KIB: f64 = 1024.0;
    const MIB: f64 = 1024.0 * 1024.0;
    if v >= MIB && (v / MIB).fract() == 0.0 {
        format!("{} MiB", format_number(v / MIB))
    } else if v >= KIB && (v / KIB).fract() == 0.0 {
        format!("{} KiB", format_number(v / KIB))
    } else if v >= MIB {
        format!("{} MiB", format_number((v / MIB * 10.0).round() / 10.0))
    } else {
        format!("{} bytes", format_number(v))
    }
}

impl fmt::Display for FactStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fact(value: Option<f64>, status: FactStatus, source: bool, note: bool) -> Fact {
        Fact {
            value,
            status,
            source: source.then(|| "datasheet".to_owned()),
            note: note.then(|| "why".to_owned()),
        }
    }

    #[test]
    fn provenance_is_required() {
        use FactStatus::*;
        assert!(fact(Some(1.0), Published, true, false).problem().is_none());
        assert_eq!(
            fact(Some(1.0), Published, false, false)
                .problem()
                .unwrap()
                .0,
            "source"
        );
        assert_eq!(
            fact(None, Published, true, false).problem().unwrap().0,
            "value"
        );
        assert_eq!(
            fact(Some(1.0), Estimate, true, false).problem().unwrap().0,
            "note"
        );
        assert!(fact(Some(8.0), Assumption, false, true).problem().is_none());
        assert!(fact(None, Unknown, false, true).problem().is_none());
        assert_eq!(
            fact(Some(3.0), Unknown, false, true).problem().unwrap().0,
            "value"
        );
        assert_eq!(
            fact(None, Unknown, true, false).problem().unwrap().0,
            "note"
        );
    }

    #[test]
    fn values_format_in_their_units() {
        assert_eq!(format_value(32768.0, Unit::Bytes), "32 KiB");
        assert_eq!(format_value(62914560.0, Unit::Bytes), "60 MiB");
        assert_eq!(format_value(49152.0, Unit::Bytes), "48 KiB");
        assert_eq!(format_value(989.4, Unit::TeraFlops), "989.4 TFLOPS");
        assert_eq!(format_value(4800.0, Unit::GigaBytesPerSecond), "4800 GB/s");
        assert_eq!(format_value(100.0, Unit::Bytes), "100 bytes");
        let f = fact(Some(14.2), FactStatus::Estimate, true, true);
        assert_eq!(f.display(Unit::TeraFlops), "14.2 TFLOPS (estimate)");
    }
}

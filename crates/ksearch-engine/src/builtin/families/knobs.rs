//! Moving through a family's space: a point's neighbours, its knobs' values, building points
//! and knob values.

use super::{Family, Knob, KnobValue, Point};

/// Every valid point one knob change away from `point`: (knob, value, point).
pub fn neighbours(family: &dyn Family, point: &Point) -> Vec<(String, i64, Point)> {
    let mut out = Vec::new();
    for knob in family.knobs() {
        let current = value(point, &knob.name);
        for v in &knob.values {
            if v.value == current {
                continue;
            }
            let mut next = point.clone();
            next.insert(knob.name.clone(), v.value);
            if family.valid(&next) {
                out.push((knob.name.clone(), v.value, next));
            }
        }
    }
    out
}

/// The value of `knob` in `point`, 0 when absent.
pub fn value(point: &Point, knob: &str) -> i64 {
    point.get(knob).copied().unwrap_or(0)
}

/// Builds a point from pairs.
pub fn point_of(pairs: &[(&str, i64)]) -> Point {
    pairs.iter().map(|(k, v)| ((*k).to_owned(), *v)).collect()
}

/// Whether `point` sets exactly the knobs of `knobs`, each to one of its values.
pub(crate) fn in_space(knobs: &[Knob], point: &Point) -> bool {
    point.len() == knobs.len()
        && knobs.iter().all(|k| {
            point
                .get(&k.name)
                .is_some_and(|v| k.values.iter().any(|kv| kv.value == *v))
        })
}

/// Knob values with labels.
pub(crate) fn values(pairs: &[(i64, &str)]) -> Vec<KnobValue> {
    pairs
        .iter()
        .map(|(value, label)| KnobValue {
            value: *value,
            label: (*label).to_owned(),
        })
        .collect()
}

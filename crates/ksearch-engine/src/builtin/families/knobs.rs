//! Moving through a family's space: a config's neighbours, its knobs' values, building configs
//! and knob values.

use super::{Config, Family, Knob, KnobValue};

/// Every valid config one knob change away from `config`: (knob, value, config).
pub fn neighbours(family: &dyn Family, config: &Config) -> Vec<(String, i64, Config)> {
    let mut out = Vec::new();
    for knob in family.knobs() {
        let current = value(config, &knob.name);
        for v in &knob.values {
            if v.value == current {
                continue;
            }
            let mut next = config.clone();
            next.insert(knob.name.clone(), v.value);
            if family.valid(&next) {
                out.push((knob.name.clone(), v.value, next));
            }
        }
    }
    out
}

/// The value of `knob` in `config`, 0 when absent.
pub fn value(config: &Config, knob: &str) -> i64 {
    config.get(knob).copied().unwrap_or(0)
}

/// Builds a config from pairs.
pub fn config_of(pairs: &[(&str, i64)]) -> Config {
    pairs.iter().map(|(k, v)| ((*k).to_owned(), *v)).collect()
}

/// Whether `config` sets exactly the knobs of `knobs`, each to one of its values.
pub(crate) fn in_space(knobs: &[Knob], config: &Config) -> bool {
    config.len() == knobs.len()
        && knobs.iter().all(|k| {
            config
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

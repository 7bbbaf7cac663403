//! A run's evaluation settings as the evaluator takes them.

use std::time::Duration;

use ksearch_eval::EvalOptions;
use ksearch_run::{EvalSettings, MAX_TIMEOUT_S};

/// What the evaluator is given for `settings` with the limit `timeout_s`. Never panics: a limit
/// out of range (which [`EvalSettings::validate`] refuses before a run starts or resumes)
/// becomes the longest one allowed.
pub fn eval_options(settings: &EvalSettings, timeout_s: f64) -> EvalOptions {
    let timeout = if timeout_s.is_finite() && timeout_s > 0.0 {
        timeout_s.min(MAX_TIMEOUT_S)
    } else {
        MAX_TIMEOUT_S
    };
    EvalOptions {
        workloads: settings.workloads.clone(),
        seeds: settings.seeds,
        base_seed: settings.base_seed,
        timing: settings.timing,
        timeout: Duration::from_secs_f64(timeout),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_never_panic_whatever_the_timeout() {
        for v in [f64::NAN, f64::INFINITY, -1.0, 0.0, 1e20, 5.0] {
            let t = eval_options(&EvalSettings::default(), v).timeout;
            assert!(
                t.as_secs_f64() > 0.0 && t.as_secs_f64() <= MAX_TIMEOUT_S,
                "{v}"
            );
        }
    }
}

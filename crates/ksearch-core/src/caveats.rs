//! Caveats: what makes an evaluation's numbers less trustworthy than they look, said in words
//! beside them. A noisy spread, a busy machine, a baseline far below what the machine can do:
//! none changes a measurement, each changes how far a reader should trust it.

use serde::{Deserialize, Serialize};

use crate::protocol::EvaluateResult;
use crate::units::time_ms;

/// A spread at which a timing is called noisy: its p90 this many times its p10.
pub const NOISY_SPREAD: f64 = 2.0;

/// A production baseline reaching less than this fraction of the machine's peak (as the cost
/// model computes it) is suspect: a library that did not recognise the CPU, say.
pub const LOW_FRACTION_OF_PEAK: f64 = 0.10;

/// The machine's load while an evaluation ran.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct HostLoad {
    /// The one-minute load average when the evaluation ended (Linux's `/proc/loadavg`).
    pub load_1m: f64,
    /// CPUs this process may use.
    pub cpus: u32,
}

impl HostLoad {
    /// Runnable processes beyond the CPUs, counting this evaluation's own judge and runner
    /// (up to two) as expected: more means other work competed for the CPUs while it ran.
    pub fn busy(&self) -> bool {
        self.load_1m > f64::from(self.cpus) + 1.0
    }

    /// `load average 3.10 on 2 CPUs`.
    pub fn describe(&self) -> String {
        format!("load average {:.2} on {} CPUs", self.load_1m, self.cpus)
    }
}

/// Every timing of `result` whose p90 is at least [`NOISY_SPREAD`] times its p10, in words.
pub fn noisy_timings(result: &EvaluateResult) -> Vec<String> {
    let mut out = Vec::new();
    for w in &result.workloads {
        for t in &w.timings {
            let s = &t.stats;
            if s.p10_ms > 0.0 && s.p90_ms / s.p10_ms >= NOISY_SPREAD {
                out.push(format!(
                    "noisy timing: the {} `{}` on workload `{}` spread from {} (p10) to {} (p90), {:.1}×; the machine was likely busy or changing its clock, and its median is less certain than it looks",
                    t.role,
                    t.label,
                    w.name,
                    time_ms(s.p10_ms),
                    time_ms(s.p90_ms),
                    s.p90_ms / s.p10_ms
                ));
            }
        }
    }
    out
}

/// The caveat of a busy machine, if it was.
pub fn busy_machine(load: &HostLoad) -> Option<String> {
    load.busy().then(|| {
        format!(
            "busy machine: {} while this evaluation ran (its own judge and runner count for up to 2): other work competed for the CPUs, so times may be inflated and noisy",
            load.describe()
        )
    })
}

/// The caveat of an evaluation measured with another toolchain than the run's seed (the
/// compiler's or the library's description, which names the device on a GPU: a run resumed on
/// another GPU), if it was.
pub fn other_toolchain(now: &str, seed: &str) -> Option<String> {
    (now != seed).then(|| {
        format!(
            "other toolchain: measured with `{now}`, where this run's seed was measured with `{seed}`; each speedup is against the baseline of its own evaluation, but the tree now holds speedups from both"
        )
    })
}

/// How much of a machine's peak a baseline reached on one workload.
#[derive(Debug, Clone, PartialEq)]
pub struct PeakFraction {
    pub workload: String,
    /// Measured time over the least time the cost model allows on this machine, inverted: 1
    /// is the peak.
    pub fraction: f64,
    /// What bounds the peak on this workload, in words (`96.0 GFLOP/s` or `25.6 GB/s`).
    pub bound: String,
}

/// The caveat of a production baseline that reached a small fraction of the machine's peak on
/// every workload it was timed on (`fractions`), if it did.
pub fn weak_baseline(label: &str, machine: &str, fractions: &[PeakFraction]) -> Option<String> {
    let best = fractions
        .iter()
        .filter(|f| f.fraction.is_finite() && f.fraction > 0.0)
        .max_by(|a, b| a.fraction.total_cmp(&b.fraction))?;
    (best.fraction < LOW_FRACTION_OF_PEAK).then(|| {
        format!(
            "weak baseline: `{label}` reached at most {:.1}% of this machine's peak as the cost model computes it ({machine}; {} on workload `{}`); a library that did not recognise this CPU runs generic kernels, so speedups over it may flatter the candidate",
            100.0 * best.fraction,
            best.bound,
            best.workload
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{ContenderTiming, Phases, Role, Status, WorkloadReport};
    use crate::stats::TimingStats;

    fn result(samples: Vec<f64>) -> EvaluateResult {
        EvaluateResult {
            id: 1,
            status: Status::Passed,
            message: String::new(),
            compile: None,
            workloads: vec![WorkloadReport {
                name: "small".into(),
                status: Status::Passed,
                message: None,
                errors: None,
                timings: vec![ContenderTiming {
                    role: Role::Baseline,
                    label: "reference".into(),
                    stats: TimingStats::from_samples(samples, 1),
                }],
            }],
            phases: Phases::default(),
            output: Default::default(),
            sandbox: None,
            described: Vec::new(),
        }
    }

    #[test]
    fn an_extreme_spread_is_noted_and_a_tight_one_is_not() {
        assert!(noisy_timings(&result(vec![1.0, 1.01, 1.02, 1.03, 1.1])).is_empty());
        let noisy = noisy_timings(&result(vec![0.1, 0.1, 0.1, 1.2, 1.2, 1.2, 1.2]));
        assert_eq!(noisy.len(), 1, "{noisy:?}");
        assert!(
            noisy[0].contains("baseline `reference` on workload `small` spread from 100.0 µs (p10) to 1.200 ms (p90), 12.0×"),
            "{}",
            noisy[0]
        );
    }

    #[test]
    fn a_busy_machine_is_one_with_more_work_than_cpus_beyond_the_evaluation() {
        let load = |load_1m| HostLoad { load_1m, cpus: 2 };
        assert_eq!(busy_machine(&load(2.9)), None);
        let busy = busy_machine(&load(3.5)).unwrap();
        assert!(busy.contains("load average 3.50 on 2 CPUs"), "{busy}");
    }

    #[test]
    fn a_baseline_far_below_the_peak_is_named() {
        let f = |workload: &str, fraction| PeakFraction {
            workload: workload.into(),
            fraction,
            bound: "192.0 GFLOP/s".into(),
        };
        let weak = weak_baseline("BLAS", "AVX-512 at 3.0 GHz", &[f("a", 0.02), f("b", 0.044)]);
        let weak = weak.unwrap();
        assert!(
            weak.contains("`BLAS` reached at most 4.4% of this machine's peak")
                && weak.contains("workload `b`"),
            "{weak}"
        );
        assert_eq!(
            weak_baseline("BLAS", "m", &[f("a", 0.02), f("b", 0.6)]),
            None
        );
        assert_eq!(weak_baseline("BLAS", "m", &[]), None);
    }

    #[test]
    fn a_round_measured_with_another_toolchain_than_the_seed_says_both() {
        let h200 = "mlx 0.32.4 on NVIDIA H200 (cuda)";
        let h100 = "mlx 0.32.4 on NVIDIA H100 80GB HBM3 (cuda)";
        let said = other_toolchain(h100, h200).unwrap();
        assert!(
            said.contains(&format!("measured with `{h100}`"))
                && said.contains(&format!("seed was measured with `{h200}`")),
            "{said}"
        );
        assert_eq!(other_toolchain(h200, h200), None);
    }
}

//! Speedups: per workload, the contender's median time over the candidate's; overall, their
//! geometric mean.

use serde::{Deserialize, Serialize};

use crate::protocol::{EvaluateResult, Role, Status};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkloadSpeedup {
    pub workload: String,
    pub candidate_ms: f64,
    pub other_ms: f64,
    /// `other_ms / candidate_ms`: above 1 means the candidate is faster.
    pub speedup: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Speedup {
    /// Geometric mean of the per-workload speedups.
    pub geomean: f64,
    pub workloads: Vec<WorkloadSpeedup>,
}

pub fn geomean(values: &[f64]) -> f64 {
    if values.is_empty() {
        return f64::NAN;
    }
    (values.iter().map(|v| v.ln()).sum::<f64>() / values.len() as f64).exp()
}

/// The candidate's speedup over the contender with `role`, when the candidate passed and every
/// workload was timed against that contender.
pub fn speedup_over(result: &EvaluateResult, role: Role) -> Option<Speedup> {
    if result.status != Status::Passed || result.workloads.is_empty() {
        return None;
    }
    let mut workloads = Vec::new();
    for w in &result.workloads {
        let cand = w.timing(Role::Candidate)?;
        let other = w.timing(role)?;
        workloads.push(WorkloadSpeedup {
            workload: w.name.clone(),
            candidate_ms: cand.median_ms,
            other_ms: other.median_ms,
            speedup: other.median_ms / cand.median_ms,
        });
    }
    let geomean = geomean(&workloads.iter().map(|w| w.speedup).collect::<Vec<_>>());
    Some(Speedup { geomean, workloads })
}

/// The candidate's speedup over each `Comparison` contender, by label.
pub fn speedups_over_comparisons(result: &EvaluateResult) -> Vec<(String, Speedup)> {
    let mut labels: Vec<&str> = Vec::new();
    for w in &result.workloads {
        for t in w.timings.iter().filter(|t| t.role == Role::Comparison) {
            if !labels.contains(&t.label.as_str()) {
                labels.push(&t.label);
            }
        }
    }
    labels
        .into_iter()
        .filter_map(|label| {
            if result.status != Status::Passed {
                return None;
            }
            let mut workloads = Vec::new();
            for w in &result.workloads {
                let cand = w.timing(Role::Candidate)?;
                let other = &w
                    .timings
                    .iter()
                    .find(|t| t.role == Role::Comparison && t.label == label)?
                    .stats;
                workloads.push(WorkloadSpeedup {
                    workload: w.name.clone(),
                    candidate_ms: cand.median_ms,
                    other_ms: other.median_ms,
                    speedup: other.median_ms / cand.median_ms,
                });
            }
            let g = geomean(&workloads.iter().map(|w| w.speedup).collect::<Vec<_>>());
            Some((
                label.to_owned(),
                Speedup {
                    geomean: g,
                    workloads,
                },
            ))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{CapturedOutput, ContenderTiming, Phases, WorkloadReport};
    use crate::stats::TimingStats;

    fn timing(role: Role, ms: f64) -> ContenderTiming {
        ContenderTiming {
            role,
            label: role.to_string(),
            stats: TimingStats::from_samples(vec![ms], 1),
        }
    }

    fn result(status: Status, pairs: &[(f64, f64)]) -> EvaluateResult {
        EvaluateResult {
            id: 1,
            status,
            message: String::new(),
            compile: None,
            workloads: pairs
                .iter()
                .enumerate()
                .map(|(i, (c, b))| WorkloadReport {
                    name: format!("w{i}"),
                    status,
                    message: None,
                    errors: None,
                    timings: vec![timing(Role::Candidate, *c), timing(Role::Baseline, *b)],
                })
                .collect(),
            phases: Phases::default(),
            output: CapturedOutput::default(),
            sandbox: None,
            described: Vec::new(),
        }
    }

    #[test]
    fn speedup_is_the_geometric_mean_of_baseline_over_candidate() {
        let s = speedup_over(
            &result(Status::Passed, &[(1.0, 4.0), (2.0, 2.0)]),
            Role::Baseline,
        )
        .unwrap();
        assert!((s.geomean - 2.0).abs() < 1e-12);
        assert_eq!(s.workloads[0].speedup, 4.0);
        assert_eq!(s.workloads[1].speedup, 1.0);
    }

    #[test]
    fn no_speedup_without_a_pass_or_a_contender() {
        assert!(speedup_over(&result(Status::Incorrect, &[(1.0, 2.0)]), Role::Baseline).is_none());
        assert!(speedup_over(&result(Status::Passed, &[(1.0, 2.0)]), Role::Parent).is_none());
    }
}

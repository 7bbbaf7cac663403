//! Every result is checked against the request it answers before anyone believes it: the same
//! id, the workloads asked for in the order asked, a timing for exactly the contenders asked
//! for, and only finite, positive, ordered numbers. Nothing else reaches the caller, and with it
//! the run store: a result that fails is replaced by a `rejected` one that says why.

use ksearch_core::protocol::{
    EvaluateRequest, EvaluateResult, Phases, Role, Status, WorkloadReport,
};
use ksearch_core::stats::TimingStats;

/// Longest message kept from a worker.
const MAX_MESSAGE: usize = 16 * 1024;

fn finite_nonneg(x: f64, what: &str) -> Result<(), String> {
    if x.is_finite() && x >= 0.0 {
        Ok(())
    } else {
        Err(format!("{what} is {x}"))
    }
}

fn check_stats(s: &TimingStats, what: &str) -> Result<(), String> {
    for (v, name) in [
        (s.median_ms, "median"),
        (s.p10_ms, "p10"),
        (s.p90_ms, "p90"),
    ] {
        if !(v.is_finite() && v > 0.0) {
            return Err(format!(
                "{what}: {name} time {v} ms is not a positive finite number"
            ));
        }
    }
    if !(s.p10_ms <= s.median_ms && s.median_ms <= s.p90_ms) {
        return Err(format!(
            "{what}: times out of order (p10 {} ms, median {} ms, p90 {} ms)",
            s.p10_ms, s.median_ms, s.p90_ms
        ));
    }
    if s.runs == 0 || s.calls_per_sample == 0 {
        return Err(format!(
            "{what}: {} runs of {} calls",
            s.runs, s.calls_per_sample
        ));
    }
    if !s.samples_ms.is_empty() {
        if s.samples_ms.len() != s.runs {
            return Err(format!(
                "{what}: {} samples for {} runs",
                s.samples_ms.len(),
                s.runs
            ));
        }
        if let Some(bad) = s.samples_ms.iter().find(|v| !(v.is_finite() && **v > 0.0)) {
            return Err(format!("{what}: a sample of {bad} ms"));
        }
    }
    Ok(())
}

fn check_workload(req: &EvaluateRequest, w: &WorkloadReport, passed: bool) -> Result<(), String> {
    if let Some(e) = &w.errors {
        for (v, name) in [
            (e.max_abs_err, "max_abs_err"),
            (e.max_rel_err, "max_rel_err"),
            (e.norm_rel_err, "norm_rel_err"),
        ] {
            finite_nonneg(v, &format!("workload `{}`: {name}", w.name))?;
        }
    }
    if passed {
        if w.status != Status::Passed {
            return Err(format!(
                "workload `{}` is {} in a passed result",
                w.name, w.status
            ));
        }
        let e = w
            .errors
            .ok_or_else(|| format!("workload `{}` passed without being checked", w.name))?;
        if (e.seeds_checked as usize) < req.check.seeds.len() {
            return Err(format!(
                "workload `{}`: {} seeds checked of {}",
                w.name,
                e.seeds_checked,
                req.check.seeds.len()
            ));
        }
    }
    if w.timings.is_empty() {
        if passed && req.timing.is_some() {
            return Err(format!("workload `{}` passed untimed", w.name));
        }
        return Ok(());
    }
    let expected: Vec<(Role, &str)> =
        std::iter::once((Role::Candidate, req.candidate.file.as_str()))
            .chain(req.contenders.iter().map(|c| (c.role, c.label.as_str())))
            .collect();
    let got: Vec<(Role, &str)> = w
        .timings
        .iter()
        .map(|t| (t.role, t.label.as_str()))
        .collect();
    if got != expected {
        return Err(format!(
            "workload `{}` times {got:?}, but {expected:?} were asked for",
            w.name
        ));
    }
    for t in &w.timings {
        check_stats(
            &t.stats,
            &format!("workload `{}`, {} `{}`", w.name, t.role, t.label),
        )?;
    }
    Ok(())
}

fn check_phases(p: &Phases) -> Result<(), String> {
    finite_nonneg(p.compile_s, "compile time")?;
    finite_nonneg(p.check_s, "check time")?;
    finite_nonneg(p.timing_s, "timing time")
}

/// Whether `result` is a possible answer to `req`; why not.
pub(crate) fn check(req: &EvaluateRequest, result: &EvaluateResult) -> Result<(), String> {
    if result.id != req.id {
        return Err(format!(
            "it answers request {} instead of {}",
            result.id, req.id
        ));
    }
    check_phases(&result.phases)?;
    if let Some(c) = &result.compile {
        finite_nonneg(c.seconds, "compile seconds")?;
    }
    let passed = result.status == Status::Passed;
    if passed {
        let names: Vec<&str> = result.workloads.iter().map(|w| w.name.as_str()).collect();
        let asked: Vec<&str> = req.workloads.iter().map(|w| w.name.as_str()).collect();
        if names != asked {
            return Err(format!(
                "it reports workloads {names:?}, but {asked:?} were asked for"
            ));
        }
    } else if let Some(w) = result
        .workloads
        .iter()
        .find(|w| !req.workloads.iter().any(|r| r.name == w.name))
    {
        return Err(format!(
            "it reports workload `{}`, which was not asked for",
            w.name
        ));
    }
    for w in &result.workloads {
        check_workload(req, w, passed)?;
    }
    Ok(())
}

/// `result` if it checks out; otherwise a `rejected` result saying why.
pub(crate) fn validated(req: &EvaluateRequest, mut result: EvaluateResult) -> EvaluateResult {
    if result.message.len() > MAX_MESSAGE {
        let mut cut = MAX_MESSAGE;
        while !result.message.is_char_boundary(cut) {
            cut -= 1;
        }
        result.message.truncate(cut);
        result.message.push_str(" …");
    }
    // Only the task's own implementations describe themselves, each once, in one short line.
    result.described.retain(|d| {
        matches!(d.role, Role::Baseline | Role::Comparison)
            && req
                .contenders
                .iter()
                .any(|c| c.role == d.role && c.label == d.label)
    });
    result
        .described
        .dedup_by(|a, b| a.role == b.role && a.label == b.label);
    for d in &mut result.described {
        d.text = ksearch_core::protocol::Described::clean(&d.text);
    }
    result.described.retain(|d| !d.text.is_empty());
    match check(req, &result) {
        // A task's own worker is trusted as the user's code: its message stands, said to be its.
        Ok(()) if result.status == Status::Passed && req.task.worker.is_some() => EvaluateResult {
            message: format!(
                "{} (the task's own worker: its checks and timing are its own)",
                result.message
            ),
            ..result
        },
        Ok(()) if result.status == Status::Passed => EvaluateResult {
            message: req.passed_message(),
            ..result
        },
        Ok(()) => result,
        Err(why) => EvaluateResult {
            id: req.id,
            status: Status::Rejected,
            message: format!("the worker's result was refused: {why}"),
            compile: None,
            workloads: Vec::new(),
            phases: Phases::default(),
            output: result.output,
            sandbox: result.sandbox,
            described: Vec::new(),
        },
    }
}

/// A request of `cpu/softmax` (workload `small`, the reference as baseline), for tests here and
/// in the supervisor.
#[cfg(test)]
pub(crate) fn test_request(id: u64) -> EvaluateRequest {
    use ksearch_core::protocol::{CheckPlan, Contender, TimingPlan};
    use ksearch_core::task::{Source, Workload};
    let source = |file: &str| Source {
        file: file.into(),
        text: String::new(),
    };
    EvaluateRequest {
        id,
        task: ksearch_core::task::parse_task(
            include_str!("../../../tasks/cpu/softmax/task.toml"),
            "task.toml",
        )
        .expect("the softmax task parses"),
        reference: source("r.c"),
        candidate: source("c.c"),
        contenders: vec![Contender {
            role: Role::Baseline,
            label: "reference".into(),
            source: source("r.c"),
            libs: Vec::new(),
            env: Default::default(),
        }],
        workloads: vec![Workload {
            name: "small".into(),
            axes: Default::default(),
        }],
        check: CheckPlan::from_base_seed(1, 3),
        timing: Some(TimingPlan::default()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ksearch_core::protocol::{ContenderTiming, ErrorStats};

    fn request() -> EvaluateRequest {
        test_request(7)
    }

    fn stats(median: f64) -> TimingStats {
        TimingStats::from_samples(vec![median; 5], 1)
    }

    fn passed(candidate_ms: f64) -> EvaluateResult {
        EvaluateResult {
            id: 7,
            status: Status::Passed,
            message: "passed".into(),
            compile: None,
            workloads: vec![WorkloadReport {
                name: "small".into(),
                status: Status::Passed,
                message: None,
                errors: Some(ErrorStats {
                    max_abs_err: 0.0,
                    max_rel_err: 0.0,
                    norm_rel_err: 0.0,
                    seeds_checked: 4,
                }),
                timings: vec![
                    ContenderTiming {
                        role: Role::Candidate,
                        label: "c.c".into(),
                        stats: stats(candidate_ms),
                    },
                    ContenderTiming {
                        role: Role::Baseline,
                        label: "reference".into(),
                        stats: stats(1.0),
                    },
                ],
            }],
            phases: Phases::default(),
            output: Default::default(),
            sandbox: None,
            described: Vec::new(),
        }
    }

    #[test]
    fn an_honest_result_passes() {
        assert_eq!(check(&request(), &passed(0.5)), Ok(()));
    }

    #[test]
    fn impossible_results_are_refused() {
        let req = request();
        for (bad, why) in [
            (0.0, "positive"),
            (-1.0, "positive"),
            (f64::INFINITY, "positive"),
            (f64::NAN, "positive"),
        ] {
            let r = validated(&req, passed(bad));
            assert_eq!(r.status, Status::Rejected, "{bad}");
            assert!(r.message.contains(why), "{}", r.message);
            assert!(r.workloads.is_empty());
        }
        let mut wrong_id = passed(0.5);
        wrong_id.id = 8;
        assert!(check(&req, &wrong_id).unwrap_err().contains("request 8"));
        let mut missing = passed(0.5);
        missing.workloads[0].timings.pop();
        assert!(check(&req, &missing).unwrap_err().contains("asked for"));
        let mut extra = passed(0.5);
        extra.workloads.push(extra.workloads[0].clone());
        assert!(check(&req, &extra).is_err());
        let mut unordered = passed(0.5);
        unordered.workloads[0].timings[0].stats.p10_ms = 9.0;
        assert!(
            check(&req, &unordered)
                .unwrap_err()
                .contains("out of order")
        );
        let mut nan_err = passed(0.5);
        nan_err.workloads[0].errors.as_mut().unwrap().norm_rel_err = f64::NAN;
        assert!(check(&req, &nan_err).is_err());
        let mut unchecked = passed(0.5);
        unchecked.workloads[0]
            .errors
            .as_mut()
            .unwrap()
            .seeds_checked = 1;
        assert!(
            check(&req, &unchecked)
                .unwrap_err()
                .contains("seeds checked")
        );
    }

    #[test]
    fn only_the_tasks_own_implementations_describe_themselves() {
        use ksearch_core::protocol::Described;
        let mut r = passed(0.5);
        let d = |role, label: &str, text: &str| Described {
            role,
            label: label.into(),
            text: text.into(),
        };
        r.described = vec![
            d(Role::Candidate, "c.c", "I am the fastest"),
            d(Role::Baseline, "someone else", "not in the request"),
            d(Role::Baseline, "reference", "plain C\n -O2"),
            d(Role::Baseline, "reference", "a second one"),
        ];
        let r = validated(&request(), r);
        assert_eq!(r.status, Status::Passed);
        assert_eq!(
            r.described,
            vec![d(Role::Baseline, "reference", "plain C -O2")]
        );
        assert_eq!(r.description_of(Role::Baseline), Some("plain C -O2"));
    }
}

//! `ksearch eval TASK [CANDIDATE]`.

use std::io::Write;

use ksearch_core::gate::{self, PairedRatio};
use ksearch_core::protocol::{Role, Status, TimingPlan};
use ksearch_core::stats::TimingStats;
use ksearch_core::task::Task;
use ksearch_core::tree::Gate;
use ksearch_engine::EvalSettings;
use ksearch_eval::{
    BackendOptions, Contenders, Evaluation, Evaluator, LocalEvaluator, backend_for,
};
use serde::Serialize;

use crate::cli::{EvalArgs, EvalFlags};
use crate::exit_codes;

pub(crate) fn run(args: &EvalArgs) -> anyhow::Result<i32> {
    let (task, _) = without_missing_dependencies(
        crate::commands::load_task(&args.task)?,
        args.eval.python.as_deref(),
    )?;
    let candidate = match &args.candidate {
        Some(path) => ksearch_tasks::read_candidate(path)?,
        None => task.seed.clone(),
    };
    let settings = eval_settings(&args.eval)?;
    let options = ksearch_engine::eval_options(&settings, settings.timeout_s);
    let exe = std::env::current_exe()?;
    let mut evaluator = LocalEvaluator::new(backend_for(&task, &backend_options(exe, &settings))?);
    evaluator.set_machine_check(ksearch_engine::builtin::machine::weak_baseline);
    let against = args
        .against
        .as_deref()
        .map(ksearch_tasks::read_candidate)
        .transpose()?;
    let contenders = Contenders {
        parent: against.as_ref(),
        incumbent: None,
        comparisons: true,
    };
    // The limit is said up front: an evaluation never runs past it (an imported definition's
    // reference that is slow on the GPU included).
    let progress = crate::progress::EvalProgress::new(&format!(
        "{} · {} · stops at {} s",
        task.id, candidate.file, settings.timeout_s
    ));
    evaluator.set_phase_observer(progress.phase_observer());
    let evaluation = evaluator.evaluate(&task, &candidate, contenders, &options);
    drop(progress);
    // The parent here is the file `--against` names.
    let mut evaluation = evaluation.map_err(|e| match e {
        ksearch_eval::EvalError::Task { message } => ksearch_eval::EvalError::Task {
            message: as_against(&message),
        },
        e => e,
    })?;
    if evaluation.result.status == Status::Timeout && !settings.timeout_given {
        evaluation
            .result
            .message
            .push_str(" (the default limit; `--timeout` sets another)");
    }
    let against_file = against.as_ref().map(|a| a.file.as_str());
    let mut out = std::io::stdout().lock();
    if args.json {
        serde_json::to_writer(
            &mut out,
            &EvalJson::new(&task.id, &candidate.file, against_file, &evaluation),
        )?;
        writeln!(out)?;
    } else {
        write!(
            out,
            "{}",
            ksearch_core::printable::printable(&render_text(
                &task.id,
                &candidate.file,
                against_file,
                &evaluation
            ))
        )?;
    }
    Ok(exit_codes::OK)
}

/// A judge's message about the parent (`the parent `seed.c` does not build …`) as `eval` says
/// it: the parent is the file `--against` names.
fn as_against(message: &str) -> String {
    let Some(rest) = message.strip_prefix("the parent `") else {
        return message.to_owned();
    };
    match rest.split_once('`') {
        Some((file, tail)) => format!("the file given with --against (`{file}`){tail}"),
        None => message.to_owned(),
    }
}

/// The task as this machine can evaluate it: a baseline or comparison whose libraries the
/// linker does not find (or whose modules `python` does not) is left out (the reference becomes
/// the baseline), and the user is told once, on stderr, what is missing, what speedups are
/// quoted against and how to install it; the baseline left out is returned, for a run to
/// record. A `c` task without a C compiler here is refused, saying so and how to install one.
pub(crate) fn without_missing_dependencies(
    mut task: Task,
    python: Option<&str>,
) -> anyhow::Result<(Task, Option<ksearch_run::LeftOut>)> {
    use ksearch_eval::dependencies::{Installer, Part, drop_unavailable, require_compiler};
    require_compiler(&task)?;
    let installer = Installer::here();
    let mut stderr = std::io::stderr().lock();
    let mut baseline = None;
    for u in drop_unavailable(&mut task, python.map(std::path::Path::new)) {
        let _ = writeln!(stderr, "note: {}", u.notice(installer));
        if u.part == Part::Baseline {
            baseline = Some(ksearch_run::LeftOut {
                name: u.name.clone(),
                needs: u.needs(),
            });
        }
    }
    Ok((task, baseline))
}

/// How to start the task's backend.
pub(crate) fn backend_options(
    ksearch_exe: std::path::PathBuf,
    settings: &EvalSettings,
) -> BackendOptions {
    BackendOptions {
        ksearch_exe,
        python: settings.python.as_ref().map(Into::into),
        target: settings.target.clone(),
        hardware: settings.hardware.clone(),
    }
}

/// Evaluation settings from the command line.
pub(crate) fn eval_settings(f: &EvalFlags) -> anyhow::Result<EvalSettings> {
    if let Some((_, w)) = f
        .workloads
        .iter()
        .enumerate()
        .find(|(i, w)| f.workloads[..*i].contains(w))
    {
        return crate::error::usage(format!(
            "--workload `{w}` is given twice; each workload is evaluated once"
        ));
    }
    Ok(EvalSettings {
        workloads: f.workloads.clone(),
        seeds: f.seeds as usize,
        base_seed: f.input_seed,
        timing: (!f.no_timing).then_some(TimingPlan {
            warmup_ms: f.warmup_ms,
            min_runs: f.min_runs,
            min_time_ms: f.min_time_ms,
            max_time_ms: f.max_time_ms,
            ..TimingPlan::DEFAULT
        }),
        timeout_s: f
            .timeout
            .unwrap_or(ksearch_eval::DEFAULT_TIMEOUT.as_secs_f64()),
        timeout_given: f.timeout.is_some(),
        target: f.target.clone(),
        python: f.python.clone(),
        hardware: f.hardware.clone(),
        baseline_left_out: None,
    })
}

/// The `--json` shape of an evaluation (documented in README.md).
#[derive(Serialize)]
struct EvalJson<'a> {
    task: &'a str,
    candidate: &'a str,
    status: Status,
    message: &'a str,
    /// Geometric mean over workloads of baseline time / candidate time.
    speedup: Option<f64>,
    /// What speedups are quoted against, with what it said it ran where it describes itself.
    baseline: String,
    /// What the baseline said it ran (`ksearch_describe`), where it describes itself.
    baseline_description: Option<&'a str>,
    /// With `--against FILE`: the file, and the candidate's speedup over it (paired timing).
    against: Option<&'a str>,
    speedup_vs_against: Option<f64>,
    /// With `--against FILE`: the acceptance gate's verdict on the paired samples (the ratio,
    /// its 95% interval, `better` / `same` / `worse`), as a search judges a candidate.
    #[serde(skip_serializing_if = "Option::is_none")]
    vs_against: Option<PairedRatio>,
    /// The task's other implementations, timed alongside: the candidate's speedup over each.
    comparisons: Vec<ComparisonJson>,
    workloads: Vec<WorkloadJson<'a>>,
    time_s: TimeJson,
    compile: Option<CompileJson<'a>>,
    output: &'a ksearch_core::protocol::CapturedOutput,
    /// How the candidate was confined (absent when it never ran).
    sandbox: Option<&'a ksearch_core::protocol::Confinement>,
    /// The machine's load when the evaluation ended.
    load: Option<&'a ksearch_core::caveats::HostLoad>,
    /// What makes these numbers less trustworthy than they look, in words.
    caveats: &'a [String],
}

#[derive(Serialize)]
struct ComparisonJson {
    label: String,
    speedup: f64,
}

#[derive(Serialize)]
struct WorkloadJson<'a> {
    name: &'a str,
    status: Status,
    message: Option<&'a str>,
    max_abs_err: Option<f64>,
    max_rel_err: Option<f64>,
    norm_rel_err: Option<f64>,
    seeds_checked: Option<u32>,
    latency_ms: Option<LatencyJson>,
    baseline_latency_ms: Option<LatencyJson>,
    speedup: Option<f64>,
    /// With `--against FILE`: its latency in the same rounds, and the candidate's speedup over it.
    #[serde(skip_serializing_if = "Option::is_none")]
    against_latency_ms: Option<LatencyJson>,
    #[serde(skip_serializing_if = "Option::is_none")]
    speedup_vs_against: Option<f64>,
}

#[derive(Serialize)]
struct LatencyJson {
    median: f64,
    p10: f64,
    p90: f64,
    runs: usize,
    calls_per_sample: usize,
}

impl From<&TimingStats> for LatencyJson {
    fn from(t: &TimingStats) -> Self {
        Self {
            median: t.median_ms,
            p10: t.p10_ms,
            p90: t.p90_ms,
            runs: t.runs,
            calls_per_sample: t.calls_per_sample,
        }
    }
}

#[derive(Serialize)]
struct TimeJson {
    compile: f64,
    check: f64,
    timing: f64,
    total: f64,
}

#[derive(Serialize)]
struct CompileJson<'a> {
    command: &'a str,
    compiler: &'a str,
    log: &'a str,
}

impl<'a> EvalJson<'a> {
    fn new(task: &'a str, candidate: &'a str, against: Option<&'a str>, e: &'a Evaluation) -> Self {
        let r = &e.result;
        let workloads = r
            .workloads
            .iter()
            .map(|w| {
                let cand = w.timing(Role::Candidate);
                let base = w.timing(Role::Baseline);
                let other = against.and(w.timing(Role::Parent));
                WorkloadJson {
                    name: &w.name,
                    status: w.status,
                    message: w.message.as_deref(),
                    max_abs_err: w.errors.map(|e| e.max_abs_err),
                    max_rel_err: w.errors.map(|e| e.max_rel_err),
                    norm_rel_err: w.errors.map(|e| e.norm_rel_err),
                    seeds_checked: w.errors.map(|e| e.seeds_checked),
                    latency_ms: cand.map(LatencyJson::from),
                    baseline_latency_ms: base.map(LatencyJson::from),
                    speedup: cand.zip(base).map(|(c, b)| b.median_ms / c.median_ms),
                    against_latency_ms: other.map(LatencyJson::from),
                    speedup_vs_against: cand.zip(other).map(|(c, o)| o.median_ms / c.median_ms),
                }
            })
            .collect();
        Self {
            task,
            candidate,
            status: r.status,
            message: &r.message,
            speedup: e.speedup.as_ref().map(|s| s.geomean),
            baseline: e.baseline_label(),
            baseline_description: r.description_of(Role::Baseline),
            against,
            speedup_vs_against: e.speedup_vs_parent.as_ref().map(|s| s.geomean),
            vs_against: against
                .and_then(|_| gate::vs_contender(r, Role::Parent, 0))
                .filter(PairedRatio::is_finite),
            comparisons: ksearch_core::score::speedups_over_comparisons(r)
                .into_iter()
                .map(|(label, s)| ComparisonJson {
                    label,
                    speedup: s.geomean,
                })
                .collect(),
            workloads,
            time_s: TimeJson {
                compile: r.phases.compile_s,
                check: r.phases.check_s,
                timing: r.phases.timing_s,
                total: e.wall_s,
            },
            compile: r.compile.as_ref().map(|c| CompileJson {
                command: &c.command,
                compiler: &c.compiler,
                log: &c.log,
            }),
            output: &r.output,
            sandbox: r.sandbox.as_ref(),
            load: e.load.as_ref(),
            caveats: &e.caveats,
        }
    }
}

fn fmt_latency(t: Option<&TimingStats>) -> String {
    t.map_or_else(
        || "-".to_owned(),
        |t| ksearch_core::units::time_ms_spread(t.median_ms, t.p10_ms, t.p90_ms),
    )
}

fn render_text(task: &str, candidate: &str, against: Option<&str>, e: &Evaluation) -> String {
    use std::fmt::Write as _;
    let r = &e.result;
    let mut s = String::new();
    let _ = writeln!(s, "{task} · {candidate} · {}", r.status);
    let _ = writeln!(s, "  {}", r.message);
    if r.status == Status::CompileError
        && let Some(c) = &r.compile
    {
        let _ = writeln!(s, "\n  $ {}", c.command);
        for line in c.log.lines() {
            let _ = writeln!(s, "  | {line}");
        }
    }
    if !r.workloads.is_empty() {
        let _ = writeln!(
            s,
            "\n  {:12} {:10} {:>11} {:>11}  {:>32}  {:>32}  {:>8}",
            "workload",
            "status",
            "max abs err",
            "max rel err",
            "candidate (p10–p90)",
            "baseline (p10–p90)",
            "speedup"
        );
        for w in &r.workloads {
            let cand = w.timing(Role::Candidate);
            let base = w.timing(Role::Baseline);
            let speedup = cand.zip(base).map_or_else(
                || "-".to_owned(),
                |(c, b)| format!("{:.2}×", b.median_ms / c.median_ms),
            );
            let err = |f: fn(&ksearch_core::protocol::ErrorStats) -> f64| {
                w.errors
                    .as_ref()
                    .map_or_else(|| "-".to_owned(), |e| format!("{:.2e}", f(e)))
            };
            let _ = writeln!(
                s,
                "  {:12} {:10} {:>11} {:>11}  {:>32}  {:>32}  {:>8}",
                w.name,
                w.status.as_str(),
                err(|e| e.max_abs_err),
                err(|e| e.max_rel_err),
                fmt_latency(cand),
                fmt_latency(base),
                speedup
            );
        }
    }
    if let Some(sp) = &e.speedup {
        let over = match sp.workloads.len() {
            1 => "on its one workload".to_owned(),
            n => format!("geometric mean of {n} workloads"),
        };
        let _ = writeln!(
            s,
            "\n  speedup over {}: {:.2}× ({over})",
            e.baseline_label(),
            sp.geomean,
        );
    }
    if let (Some(file), Some(sp)) = (against, &e.speedup_vs_parent) {
        let per: Vec<String> = sp
            .workloads
            .iter()
            .map(|w| format!("{} {:.2}×", w.workload, w.speedup))
            .collect();
        let _ = writeln!(
            s,
            "  speedup over {file} (timed in the same worker): {:.2}× ({})",
            sp.geomean,
            per.join(", ")
        );
        if let Some(c) = gate::vs_contender(r, Role::Parent, 0).filter(PairedRatio::is_finite) {
            let _ = writeln!(
                s,
                "  acceptance gate on the paired samples: {:.2}× (95% interval {:.2}–{:.2}): {}",
                c.ratio,
                c.interval.0,
                c.interval.1,
                match c.verdict {
                    Gate::Better => "faster beyond noise",
                    Gate::Same => "not distinguishable",
                    Gate::Worse => "slower beyond noise",
                    Gate::Unmeasured => "not measured",
                }
            );
        }
    }
    if r.output.bytes > 0 {
        let _ = writeln!(
            s,
            "\n  candidate printed {} bytes; first: {:?}",
            r.output.bytes,
            r.output.head.chars().take(200).collect::<String>()
        );
    }
    if let Some(c) = r.sandbox.as_ref().filter(|c| !c.is_full()) {
        let _ = writeln!(s, "\n  note: the candidate ran {}", c.summary());
    }
    for caveat in &e.caveats {
        let _ = writeln!(s, "\n  caveat: {caveat}");
    }
    let p = &r.phases;
    let load = e
        .load
        .map_or_else(String::new, |l| format!(" · {}", l.describe()));
    let _ = writeln!(
        s,
        "\n  time: compile {:.2} s · check {:.2} s · timing {:.2} s · total {:.2} s{load}",
        p.compile_s, p.check_s, p.timing_s, e.wall_s
    );
    s
}

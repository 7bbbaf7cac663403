//! `ksearch run` and `ksearch resume`.

use std::io::Write;
use std::path::PathBuf;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use anyhow::Context;
use ksearch_core::task::Task;
use ksearch_engine::builtin::BuiltinProposer;
use ksearch_engine::builtin::machine::Machine;
use ksearch_engine::{
    Budget, DEFAULT_WINDOW, Engine, Parts, Proposer, RUN_FORMAT, RunConfig, RunSummary, StopReason,
    open_run,
};
use ksearch_eval::{LocalEvaluator, backend_for};

use super::eval::eval_settings;
use crate::cli::{OutputFlags, ResumeArgs, RunArgs};
use crate::exit_codes;
use crate::interrupt::stop_flag;
use crate::progress::ProgressLine;

fn proposer_for(model: &str, task: &Task) -> anyhow::Result<Box<dyn Proposer>> {
    match model {
        "builtin" => Ok(Box::new(BuiltinProposer::for_task(
            task,
            Machine::detect(),
        )?)),
        other => anyhow::bail!(
            "unknown model `{other}`: this build has the `builtin` proposer only (LLM providers are tracked in their own issue)"
        ),
    }
}

fn evaluator_for(task: &Task) -> anyhow::Result<LocalEvaluator> {
    let exe = std::env::current_exe().context("failed to find the ksearch executable")?;
    Ok(LocalEvaluator::new(backend_for(task.spec.backend, &exe)?))
}

/// One line about this machine's CPU.
fn hardware() -> String {
    let model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|c| {
            c.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_owned())
        })
        .unwrap_or_else(|| std::env::consts::ARCH.to_owned());
    let cores = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
    format!("{model}, {cores} cores")
}

/// `20261130-091502` in UTC.
fn utc_stamp(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}{m:02}{d:02}-{:02}{:02}{:02}",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

pub(crate) fn run(args: &RunArgs) -> anyhow::Result<i32> {
    let task = ksearch_tasks::load_task(&args.task)?;
    let eval = eval_settings(&args.eval)?;
    let proposer = proposer_for(&args.model, &task)?;
    let mut evaluator = evaluator_for(&task)?;
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let run_dir = args.run_dir.clone().unwrap_or_else(|| {
        PathBuf::from("ksearch-runs").join(format!("{}-{}", task.spec.name, utc_stamp(now)))
    });
    let config = RunConfig {
        format: RUN_FORMAT,
        ksearch_version: env!("CARGO_PKG_VERSION").into(),
        proposer: proposer.name(),
        seed: args.seed,
        window: args.window,
        max_cycle_attempts: 3 * args.window.max(DEFAULT_WINDOW),
        eval,
        created_unix: now,
        hardware: hardware(),
    };
    let stop = stop_flag();
    evaluator.set_cancel(stop.clone());
    let mut observer =
        ProgressLine::new(args.output.quiet || args.output.json, Some(args.iterations));
    let started = Instant::now();
    let parts = Parts {
        proposer,
        evaluator: &mut evaluator,
        observer: &mut observer,
        stop,
    };
    let mut engine = Engine::create(&run_dir, task, config, parts)
        .with_context(|| format!("failed to start the run in {}", run_dir.display()))?;
    let budget = Budget {
        rounds: Some(args.iterations),
        until: args.time.map(|t| started + t),
    };
    let summary = engine.run(budget)?;
    report(&summary, &args.output)
}

pub(crate) fn resume(args: &ResumeArgs) -> anyhow::Result<i32> {
    let run = open_run(&args.run_dir)?;
    let proposer = proposer_for(&run.config.proposer, &run.task)?;
    let mut evaluator = evaluator_for(&run.task)?;
    let stop = stop_flag();
    evaluator.set_cancel(stop.clone());
    let done = ksearch_engine::read_summary(&args.run_dir)
        .map(|(s, _, _)| s.rounds)
        .unwrap_or(0);
    let budget_rounds = args.iterations.map(|n| done + n);
    let mut observer = ProgressLine::new(args.output.quiet || args.output.json, budget_rounds);
    let started = Instant::now();
    let parts = Parts {
        proposer,
        evaluator: &mut evaluator,
        observer: &mut observer,
        stop,
    };
    let mut engine = Engine::resume(run, parts)
        .with_context(|| format!("failed to resume the run in {}", args.run_dir.display()))?;
    let summary = engine.run(Budget {
        rounds: budget_rounds,
        until: args.time.map(|t| started + t),
    })?;
    report(&summary, &args.output)
}

fn report(summary: &RunSummary, output: &OutputFlags) -> anyhow::Result<i32> {
    let mut out = std::io::stdout().lock();
    if output.json {
        serde_json::to_writer(&mut out, summary)?;
        writeln!(out)?;
    } else {
        write!(out, "{}", render_summary(summary))?;
    }
    Ok(exit_codes::OK)
}

fn x(v: Option<f64>) -> String {
    v.map_or_else(|| "-".into(), |v| format!("{v:.2}×"))
}

pub(crate) fn render_summary(s: &RunSummary) -> String {
    use std::fmt::Write as _;
    let mut o = String::new();
    let dir = s.run_dir.display();
    let reason = s.stop_reason.map_or("running", |r| match r {
        StopReason::Iterations => "round budget spent",
        StopReason::Time => "time budget spent",
        StopReason::Interrupted => "interrupted (resume to continue)",
        StopReason::Exhausted => "nothing left to try",
    });
    let _ = writeln!(o, "{} · {} proposer · {reason}", s.task, s.proposer);
    let _ = writeln!(
        o,
        "rounds {} · nodes {} · cycles {} · wall {:.1} s (evaluating {:.1} s, orchestrator {:.2}%)",
        s.rounds,
        s.nodes,
        s.cycles,
        s.wall_s,
        s.eval_s,
        100.0 * s.orchestrator_fraction
    );
    let _ = writeln!(
        o,
        "best: node {} `{}` — {} over {}, {} over the seed",
        s.best.node,
        s.best.title,
        x(s.best.speedup),
        s.baseline,
        x(s.best.speedup_vs_seed)
    );
    for (w, ms) in &s.best.latency_ms {
        let seed = s
            .seed_latency_ms
            .get(w)
            .map_or_else(|| "-".into(), |v| format!("{v:.4}"));
        let _ = writeln!(o, "  {w:<12} {ms:>10.4} ms   (seed {seed} ms)");
    }
    let c = &s.calibration;
    if !c.points.is_empty() {
        let _ = writeln!(
            o,
            "calibration: {} measured nodes · rank correlation {} · measured/predicted {}",
            c.points.len(),
            c.spearman.map_or_else(|| "-".into(), |v| format!("{v:.2}")),
            x(c.bias)
        );
    }
    let _ = writeln!(
        o,
        "see `ksearch tree {dir}`; continue with `ksearch resume {dir} --iterations N`"
    );
    o
}

#[cfg(test)]
mod tests {
    use super::utc_stamp;

    #[test]
    fn utc_stamps() {
        assert_eq!(utc_stamp(0), "19700101-000000");
        assert_eq!(utc_stamp(1_795_971_302), "20261129-165502");
        assert_eq!(utc_stamp(951_782_400), "20000229-000000");
    }
}

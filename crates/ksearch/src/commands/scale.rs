//! `--jobs` and `--executor` of `run` and `resume`: what evaluates a run's candidates. One at a
//! time on this machine as always; several at once in slots of their own (CPUs, and a GPU
//! each for a GPU task); or as Slurm jobs (`docs/scale.md`).

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use anyhow::Context;
use ksearch_core::task::{BackendKind, Task};
use ksearch_engine::builtin::machine;
use ksearch_engine::{EngineState, EvalSettings};
use ksearch_eval::executor::{
    EvaluatorFactory, LocalPool, NodeOptions, SlotPlan, SlurmExecutor, local_slots, slots_note,
    visible_gpus, with_env,
};
use ksearch_eval::{Evaluator, LocalEvaluator, PhaseObserver, backend_for};

use super::eval::backend_options;
use crate::cli::ScaleFlags;
use crate::ksearch_toml::KsearchToml;

/// What evaluates a session's candidates.
#[derive(Debug)]
pub(crate) enum Evaluators {
    /// One at a time, as always.
    One(LocalEvaluator),
    /// Several at once on this machine, and why fewer or slower than asked, if so.
    Pool(LocalPool, Option<String>),
    Slurm(SlurmExecutor),
}

impl Evaluators {
    pub(crate) fn as_dyn(&mut self) -> &mut dyn Evaluator {
        match self {
            Evaluators::One(e) => e,
            Evaluators::Pool(p, _) => p,
            Evaluators::Slurm(s) => s,
        }
    }

    /// Abandon what is evaluated once `stop` is set (Ctrl-C); each phase of an evaluation
    /// told to `phases` (one at a time only: the phases of several would interleave).
    pub(crate) fn start(&mut self, stop: &Arc<AtomicBool>, phases: PhaseObserver) {
        match self {
            Evaluators::One(e) => {
                e.set_cancel(stop.clone());
                e.set_phase_observer(phases);
            }
            Evaluators::Pool(p, _) => p.set_cancel(stop.clone()),
            Evaluators::Slurm(s) => s.set_cancel(stop.clone()),
        }
    }

    /// Where several evaluate at once, in lines for the progress output: how, and a caveat
    /// about it, if there is one. None for one at a time.
    pub(crate) fn describe(&mut self) -> Vec<String> {
        let note = match self {
            Evaluators::Pool(_, Some(note)) => Some(format!("note: {note}")),
            _ => None,
        };
        self.as_dyn()
            .executor()
            .map(|x| x.describe())
            .into_iter()
            .chain(note)
            .collect()
    }
}

/// Whether the task's candidates run on a GPU (one per local slot, `--gres` for a job).
pub(crate) fn gpu_task(task: &Task, settings: &EvalSettings) -> bool {
    if task.worker.is_some() {
        return settings.target.as_deref() == Some("cuda");
    }
    match task.spec.backend {
        BackendKind::C => false,
        BackendKind::Mlx => !matches!(settings.target.as_deref(), Some("numpy" | "cpu")),
        BackendKind::Torch => match settings.target.as_deref() {
            Some("cpu") => false,
            Some(_) => true,
            None => !visible_gpus().is_empty(),
        },
    }
}

/// One evaluator on this machine, as a run has always had.
pub(crate) fn local_evaluator(
    task: &Task,
    settings: &EvalSettings,
) -> anyhow::Result<LocalEvaluator> {
    let exe = std::env::current_exe().context("failed to find the ksearch executable")?;
    let mut evaluator = LocalEvaluator::new(backend_for(task, &backend_options(exe, settings))?);
    evaluator.set_machine_check(machine::weak_baseline);
    Ok(evaluator)
}

/// Whether a stored run needs the executor's engine whatever `--jobs` says: several cycles
/// open, or evaluations in flight, from a session that ran several at once.
pub(crate) fn run_has_several(snap: &ksearch_store::Snapshot, state: Option<&EngineState>) -> bool {
    let open: Vec<u64> = snap
        .cycles
        .iter()
        .filter(|c| c.outcome.is_none() && c.ended_round.is_none())
        .map(|c| c.id)
        .collect();
    let current = state.and_then(|s| s.current_cycle);
    open.len() > 1
        || open.iter().any(|c| Some(*c) != current)
        || state.is_some_and(|s| !s.evaluating_also.is_empty())
}

/// The evaluators `scale` asks for. `several`: the stored run has cycles going at once, which
/// the executor's engine continues even with `--jobs 1`.
pub(crate) fn evaluators(
    task: &Task,
    settings: &EvalSettings,
    scale: &ScaleFlags,
    run_dir: &Path,
    file_defaults: &KsearchToml,
    several: bool,
) -> anyhow::Result<Evaluators> {
    let jobs = scale.jobs as usize;
    let gpu = gpu_task(task, settings);
    if scale.executor == "slurm" {
        let s = &file_defaults.slurm;
        let run_dir = std::path::absolute(run_dir)
            .with_context(|| format!("cannot make {} absolute", run_dir.display()))?;
        let work_dir = s.work_dir.clone().unwrap_or_else(|| run_dir.join("slurm"));
        let tag = run_dir
            .file_name()
            .map_or_else(|| "run".into(), |n| n.to_string_lossy().into_owned());
        let node = NodeOptions {
            python: settings.python.as_ref().map(Into::into),
            target: settings.target.clone(),
            hardware: settings.hardware.clone(),
        };
        return Ok(Evaluators::Slurm(SlurmExecutor::new(
            s.settings(),
            node,
            jobs,
            gpu,
            work_dir,
            &tag,
        )?));
    }
    if jobs == 1 && !several {
        return Ok(Evaluators::One(local_evaluator(task, settings)?));
    }
    let exe = std::env::current_exe().context("failed to find the ksearch executable")?;
    let options = backend_options(exe, settings);
    let shared = Arc::new(task.clone());
    let factory: EvaluatorFactory = Arc::new(move |plan: &SlotPlan| {
        let backend = backend_for(&shared, &options)?;
        let mut e = LocalEvaluator::new(with_env(backend, &plan.env));
        e.set_machine_check(machine::weak_baseline);
        Ok(e)
    });
    let plans = local_slots(jobs, gpu);
    let note = slots_note(jobs, &plans);
    Ok(Evaluators::Pool(LocalPool::start(plans, &factory)?, note))
}

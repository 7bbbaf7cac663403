//! Evaluating a candidate for a task: static checks, then a worker under supervision, then the
//! speedups.

use std::time::{Duration, Instant};

use ksearch_core::caveats::{HostLoad, busy_machine, noisy_timings};
use ksearch_core::protocol::{
    CapturedOutput, CheckPlan, Contender, EvaluateRequest, EvaluateResult, Phases, Role, Status,
    TimingPlan,
};
pub use ksearch_core::record::Evaluation;
use ksearch_core::score::speedup_over;
use ksearch_core::task::{Source, Task};

use crate::backend::BackendEval;
use crate::error::EvalError;
use crate::supervisor::Supervisor;

/// Most input seeds one evaluation checks per workload (`--seeds`).
pub const MAX_SEEDS: usize = 64;

/// The wall-clock limit of an evaluation nothing else sets: `ksearch eval`'s, a run's seed's.
pub const DEFAULT_TIMEOUT: Duration =
    Duration::from_secs(ksearch_core::protocol::DEFAULT_TIMEOUT_S);

/// What to run: which workloads, how many seeds, how to time, how long to allow.
#[derive(Debug, Clone)]
pub struct EvalOptions {
    /// Workload names; empty means all of the task's.
    pub workloads: Vec<String>,
    /// Input seeds checked per workload: 1 to [`MAX_SEEDS`].
    pub seeds: usize,
    pub base_seed: u64,
    pub timing: Option<TimingPlan>,
    /// Wall-clock limit of one evaluation.
    pub timeout: Duration,
}

impl Default for EvalOptions {
    fn default() -> Self {
        Self {
            workloads: Vec::new(),
            seeds: ksearch_core::protocol::DEFAULT_SEEDS,
            base_seed: ksearch_core::protocol::DEFAULT_BASE_SEED,
            timing: Some(TimingPlan::DEFAULT),
            timeout: DEFAULT_TIMEOUT,
        }
    }
}

/// Kernels to time alongside a candidate, besides the baseline.
#[derive(Debug, Clone, Copy, Default)]
pub struct Contenders<'a> {
    pub parent: Option<&'a Source>,
    pub incumbent: Option<&'a Source>,
    /// The task's `[[comparisons]]` too. `ksearch eval` and a run's seed time them; a search's
    /// rounds do not (nothing in a round reads them, and a slow one, such as a per-step scan,
    /// can cost more than the rest of the evaluation).
    pub comparisons: bool,
}

/// Something that evaluates candidates: a local worker, or (through its [`Executor`]) several
/// at once, on this machine or as cluster jobs.
pub trait Evaluator {
    fn evaluate(
        &mut self,
        task: &Task,
        candidate: &Source,
        contenders: Contenders<'_>,
        options: &EvalOptions,
    ) -> Result<Evaluation, EvalError>;

    /// Where several evaluations can be in flight at once, the executor that runs them; the
    /// engine then keeps several cycles going. `None`: one evaluation at a time.
    fn executor(&mut self) -> Option<&mut dyn crate::executor::Executor> {
        None
    }
}

/// A check of an evaluation against what this machine can do: a caveat, if it finds one (the
/// engine's cost model has one for a weak production baseline).
pub type MachineCheck = fn(&Task, &Evaluation) -> Option<String>;

/// Evaluates on a worker process on this machine.
#[derive(Debug)]
pub struct LocalEvaluator {
    backend: Box<dyn BackendEval>,
    supervisor: Supervisor,
    next_id: u64,
    machine_check: Option<MachineCheck>,
}

impl LocalEvaluator {
    pub fn new(backend: Box<dyn BackendEval>) -> Self {
        let supervisor = Supervisor::new(backend.worker_command());
        Self {
            backend,
            supervisor,
            next_id: 1,
            machine_check: None,
        }
    }

    /// See [`Supervisor::set_phase_observer`].
    pub fn set_phase_observer(&mut self, observer: crate::supervisor::PhaseObserver) {
        self.supervisor.set_phase_observer(observer);
    }

    /// Add `check`'s caveat to every evaluation it finds one for.
    pub fn set_machine_check(&mut self, check: MachineCheck) {
        self.machine_check = Some(check);
    }

    pub fn supervisor(&self) -> &Supervisor {
        &self.supervisor
    }

    /// See [`Supervisor::set_cancel`].
    pub fn set_cancel(&mut self, flag: std::sync::Arc<std::sync::atomic::AtomicBool>) {
        self.supervisor.set_cancel(flag);
    }
}

/// The machine's one-minute load average and the CPUs this process may use (Linux): the
/// process's, not the calling thread's (an evaluation slot's thread is pinned to its own
/// CPUs, and the other slots' judges are no other work).
fn host_load() -> Option<HostLoad> {
    let text = fs_err::read_to_string("/proc/loadavg").ok()?;
    let load_1m: f64 = text.split_whitespace().next()?.parse().ok()?;
    let cpus = match crate::executor::process_cpus().len() {
        0 => std::thread::available_parallelism().map_or(1, std::num::NonZero::get),
        n => n,
    };
    (load_1m.is_finite() && load_1m >= 0.0).then_some(HostLoad {
        load_1m,
        cpus: u32::try_from(cpus).unwrap_or(u32::MAX),
    })
}

/// The request for one evaluation.
pub fn build_request(
    id: u64,
    task: &Task,
    candidate: &Source,
    contenders: Contenders<'_>,
    options: &EvalOptions,
) -> Result<EvaluateRequest, EvalError> {
    if options.seeds == 0 {
        return Err(EvalError::Options("at least one seed is needed".into()));
    }
    if options.seeds > MAX_SEEDS {
        return Err(EvalError::Options(format!(
            "{} seeds asked for; at most {MAX_SEEDS} are checked",
            options.seeds
        )));
    }
    let spec = &task.spec;
    let workloads = if options.workloads.is_empty() {
        spec.workloads.clone()
    } else {
        options
            .workloads
            .iter()
            .map(|name| {
                spec.workload(name)
                    .cloned()
                    .ok_or_else(|| EvalError::UnknownWorkload {
                        name: name.clone(),
                        task: task.id.clone(),
                        available: spec
                            .workloads
                            .iter()
                            .map(|w| w.name.as_str())
                            .collect::<Vec<_>>()
                            .join(", "),
                    })
            })
            .collect::<Result<_, _>>()?
    };
    let baseline = match &task.baseline {
        Some(b) => Contender {
            role: Role::Baseline,
            label: b.name.clone(),
            source: b.source.clone(),
            libs: b.libs.clone(),
            env: b.env.clone(),
        },
        None => Contender {
            role: Role::Baseline,
            label: task.baseline_name(),
            source: task.reference.clone(),
            libs: Vec::new(),
            env: Default::default(),
        },
    };
    let mut timed = vec![baseline];
    for c in task.comparisons.iter().filter(|_| contenders.comparisons) {
        timed.push(Contender {
            role: Role::Comparison,
            label: c.name.clone(),
            source: c.source.clone(),
            libs: c.libs.clone(),
            env: c.env.clone(),
        });
    }
    for (role, source) in [
        (Role::Parent, contenders.parent),
        (Role::Incumbent, contenders.incumbent),
    ] {
        if let Some(p) = source {
            timed.push(Contender {
                role,
                // The role is said beside it ("the parent `seed.c`").
                label: p.file.clone(),
                source: p.clone(),
                libs: Vec::new(),
                env: Default::default(),
            });
        }
    }
    Ok(EvaluateRequest {
        id,
        task: spec.clone(),
        reference: task.reference.clone(),
        candidate: candidate.clone(),
        contenders: timed,
        workloads,
        check: CheckPlan {
            // The check seeds follow `base_seed` (reproducible, and so predictable: a module
            // could carry the answers for them); the re-check after timing is on inputs no
            // candidate can predict, drawn anew for every evaluation.
            recheck_seed: crate::secret::seed(),
            ..CheckPlan::from_base_seed(options.base_seed, options.seeds)
        }
        .with_tolerances(spec),
        timing: options.timing,
    })
}

impl LocalEvaluator {
    /// Evaluate a request already built by [`build_request`] (here, or by an orchestrator on
    /// another machine that ships it with a cluster job): static checks, the worker, the
    /// speedups and caveats. `started` is when the evaluation began, for its wall time.
    pub fn evaluate_request(
        &mut self,
        task: &Task,
        request: &EvaluateRequest,
        timeout: Duration,
        started: Instant,
    ) -> Result<Evaluation, EvalError> {
        let id = request.id;
        let candidate = &request.candidate;
        let violations = self.backend.static_check(&task.spec, &candidate.text);
        let result = if violations.is_empty() {
            self.supervisor
                .evaluate(request, timeout)
                .map_err(|e| match e {
                    // A parent or incumbent is a candidate's code (or the file `eval --against`
                    // names), not the task's.
                    EvalError::Task { message }
                        if [Role::Parent, Role::Incumbent]
                            .iter()
                            .any(|r| message.starts_with(&format!("the {r} `"))) =>
                    {
                        EvalError::Task { message }
                    }
                    EvalError::Task { message } => EvalError::Task {
                        message: format!("the task `{}` is at fault: {message}", task.id),
                    },
                    e => e,
                })?
        } else {
            let message = violations
                .iter()
                .map(|v| match v.line {
                    Some(l) => format!("{}:{l}: {} [{}]", candidate.file, v.message, v.rule),
                    None => format!("{}: {} [{}]", candidate.file, v.message, v.rule),
                })
                .collect::<Vec<_>>()
                .join("; ");
            EvaluateResult {
                id,
                status: Status::Rejected,
                message,
                compile: None,
                workloads: Vec::new(),
                phases: Phases::default(),
                output: CapturedOutput::default(),
                sandbox: None,
                described: Vec::new(),
            }
        };
        let load = host_load();
        let mut caveats = noisy_timings(&result);
        caveats.extend(load.as_ref().and_then(busy_machine));
        let mut evaluation = Evaluation {
            speedup: speedup_over(&result, Role::Baseline),
            speedup_vs_parent: speedup_over(&result, Role::Parent),
            baseline: task.baseline_name(),
            result,
            wall_s: started.elapsed().as_secs_f64(),
            load,
            caveats,
        };
        if let Some(caveat) = self
            .machine_check
            .and_then(|check| check(task, &evaluation))
        {
            evaluation.caveats.push(caveat);
        }
        Ok(evaluation)
    }
}

impl Evaluator for LocalEvaluator {
    fn evaluate(
        &mut self,
        task: &Task,
        candidate: &Source,
        contenders: Contenders<'_>,
        options: &EvalOptions,
    ) -> Result<Evaluation, EvalError> {
        let started = Instant::now();
        let id = self.next_id;
        self.next_id += 1;
        crate::dependencies::require_available(task, self.backend.python())?;
        let request = build_request(id, task, candidate, contenders, options)?;
        self.evaluate_request(task, &request, options.timeout, started)
    }
}

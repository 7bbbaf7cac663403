//! Slots on this machine: one long-lived thread per slot, each with its own evaluator (its own
//! judge process, restarted whenever it is lost), pinned to the slot's CPUs. A judge dies with
//! the thread that started it (`PR_SET_PDEATHSIG`), so the threads live as long as the pool.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender, channel};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use ksearch_core::static_check::Violation;
use ksearch_core::task::TaskSpec;

use super::devices::SlotPlan;
use super::{Executor, Finished, Job, now_unix};
use crate::backend::BackendEval;
use crate::error::EvalError;
use crate::evaluator::{Evaluator, LocalEvaluator};

/// Makes a slot's evaluator, in the slot's own thread (an evaluator is not `Send`): the task's
/// backend with the slot's environment (see [`with_env`]).
pub type EvaluatorFactory =
    Arc<dyn Fn(&SlotPlan) -> Result<LocalEvaluator, EvalError> + Send + Sync>;

/// Where Ctrl-C is told (see [`LocalPool::set_cancel`]).
type Flag = Arc<AtomicBool>;

struct Slot {
    plan: SlotPlan,
    jobs: Option<Sender<Job>>,
    cancel: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    /// The round it is evaluating.
    busy: Option<u64>,
}

/// Evaluations on this machine, one per slot at a time.
pub struct LocalPool {
    slots: Vec<Slot>,
    finished: Receiver<Finished>,
    cancel: Option<Flag>,
}

impl std::fmt::Debug for LocalPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalPool")
            .field(
                "slots",
                &self.slots.iter().map(|s| &s.plan.place).collect::<Vec<_>>(),
            )
            .finish_non_exhaustive()
    }
}

impl LocalPool {
    /// One thread per plan, each making its evaluator with `factory` when its first job comes.
    pub fn start(plans: Vec<SlotPlan>, factory: &EvaluatorFactory) -> Result<Self, EvalError> {
        let (done, finished) = channel();
        let mut slots = Vec::new();
        for plan in plans {
            let (jobs, inbox) = channel::<Job>();
            let cancel = Arc::new(AtomicBool::new(false));
            let thread = {
                let (plan, cancel, done, factory) =
                    (plan.clone(), cancel.clone(), done.clone(), factory.clone());
                std::thread::Builder::new()
                    .name(format!("ksearch-slot-{}", plan.slot))
                    .spawn(move || slot_main(&plan, &inbox, &cancel, &done, &*factory))
                    .map_err(|e| EvalError::WorkerSpawn {
                        command: "an evaluation slot's thread".into(),
                        source: e,
                    })?
            };
            slots.push(Slot {
                plan,
                jobs: Some(jobs),
                cancel,
                thread: Some(thread),
                busy: None,
            });
        }
        Ok(Self {
            slots,
            finished,
            cancel: None,
        })
    }

    /// Abandon an evaluation waited for through [`Evaluator`] (a run's seed) once `flag` is
    /// set, e.g. by Ctrl-C.
    pub fn set_cancel(&mut self, flag: Flag) {
        self.cancel = Some(flag);
    }

    fn settle(&mut self, f: &Finished) {
        if let Some(s) = self.slots.get_mut(f.slot) {
            s.busy = None;
        }
    }
}

fn slot_main(
    plan: &SlotPlan,
    inbox: &Receiver<Job>,
    cancel: &Arc<AtomicBool>,
    done: &Sender<Finished>,
    factory: &(dyn Fn(&SlotPlan) -> Result<LocalEvaluator, EvalError> + Send + Sync),
) {
    // Every process this thread starts (the judge, and through it the runners and the
    // compiler) inherits this affinity.
    crate::sandbox::pin_to_cpus(&plan.cpus);
    let mut evaluator: Option<LocalEvaluator> = None;
    while let Ok(job) = inbox.recv() {
        let started_unix = now_unix();
        let result = match evaluator.as_mut() {
            Some(e) => Ok(e),
            None => factory(plan).map(|mut e| {
                e.set_cancel(cancel.clone());
                evaluator.insert(e)
            }),
        }
        .and_then(|e| e.evaluate(&job.task, &job.candidate, job.contenders(), &job.options));
        let finished = Finished {
            round: job.round,
            slot: plan.slot,
            place: plan.place.clone(),
            started_unix,
            finished_unix: now_unix(),
            retried: Vec::new(),
            result,
        };
        if done.send(finished).is_err() {
            return;
        }
    }
}

impl Evaluator for LocalPool {
    fn evaluate(
        &mut self,
        task: &ksearch_core::task::Task,
        candidate: &ksearch_core::task::Source,
        contenders: crate::Contenders<'_>,
        options: &crate::EvalOptions,
    ) -> Result<crate::Evaluation, EvalError> {
        let cancel = self.cancel.clone();
        super::evaluate_one(
            self,
            cancel.as_deref(),
            task,
            candidate,
            contenders,
            options,
        )
    }

    fn executor(&mut self) -> Option<&mut dyn Executor> {
        Some(self)
    }
}

impl Executor for LocalPool {
    fn slots(&self) -> usize {
        self.slots.len()
    }

    fn describe(&self) -> String {
        let places: Vec<&str> = self.slots.iter().map(|s| s.plan.place.as_str()).collect();
        format!(
            "{} evaluations at once on this machine: {}",
            self.slots.len(),
            places.join("; ")
        )
    }

    fn in_flight(&self) -> usize {
        self.slots.iter().filter(|s| s.busy.is_some()).count()
    }

    fn submit(&mut self, job: Job) -> Result<(), EvalError> {
        let round = job.round;
        let slot = self
            .slots
            .iter_mut()
            .find(|s| s.busy.is_none())
            .ok_or_else(|| EvalError::Options("every evaluation slot is busy".into()))?;
        let sent = slot.jobs.as_ref().is_some_and(|tx| tx.send(job).is_ok());
        if !sent {
            return Err(EvalError::Worker {
                message: format!("the evaluation slot on {} has stopped", slot.plan.place),
            });
        }
        slot.busy = Some(round);
        Ok(())
    }

    fn next(&mut self, stop: &AtomicBool) -> Option<Finished> {
        loop {
            if self.in_flight() == 0 || stop.load(Ordering::Relaxed) {
                return None;
            }
            match self.finished.recv_timeout(Duration::from_millis(100)) {
                Ok(f) => {
                    self.settle(&f);
                    return Some(f);
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => return None,
            }
        }
    }

    fn cancel_all(&mut self) {
        for s in self.slots.iter().filter(|s| s.busy.is_some()) {
            s.cancel.store(true, Ordering::Relaxed);
        }
        // Each supervisor notices within a tenth of a second and stops its judge (SIGTERM, a
        // grace, SIGKILL): wait for all of them, then make the slots usable again.
        let deadline = Instant::now() + Duration::from_secs(30);
        while self.in_flight() > 0 && Instant::now() < deadline {
            if let Ok(f) = self.finished.recv_timeout(Duration::from_millis(100)) {
                self.settle(&f);
            }
        }
        for s in &self.slots {
            s.cancel.store(false, Ordering::Relaxed);
        }
    }
}

impl Drop for LocalPool {
    fn drop(&mut self) {
        for s in &mut self.slots {
            s.cancel.store(true, Ordering::Relaxed);
            s.jobs = None;
        }
        for s in &mut self.slots {
            if let Some(t) = s.thread.take() {
                let _ = t.join();
            }
        }
    }
}

/// A backend whose worker gets `env` on top of its own (a slot's `CUDA_VISIBLE_DEVICES`).
#[derive(Debug)]
struct WithEnv {
    inner: Box<dyn BackendEval>,
    env: Vec<(String, String)>,
}

impl BackendEval for WithEnv {
    fn worker_command(&self) -> crate::WorkerCommand {
        let mut c = self.inner.worker_command();
        c.env.extend(self.env.iter().cloned());
        c
    }

    fn python(&self) -> Option<&std::path::Path> {
        self.inner.python()
    }

    fn static_check(&self, spec: &TaskSpec, source: &str) -> Vec<Violation> {
        self.inner.static_check(spec, source)
    }
}

/// `backend`, its worker started with `env` set too.
pub fn with_env(backend: Box<dyn BackendEval>, env: &[(String, String)]) -> Box<dyn BackendEval> {
    if env.is_empty() {
        return backend;
    }
    Box::new(WithEnv {
        inner: backend,
        env: env.to_vec(),
    })
}

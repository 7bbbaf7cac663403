//! The cycle loop (K-Search's search, made resumable). Every step is committed to the run store
//! before the next begins:
//!
//! 1. pick an executable open action (selection policy), start a cycle on it;
//! 2. attempt 1 implements the action from the parent's code; later attempts debug (nothing has
//!    passed yet) or improve (something has), each fed the previous evaluation;
//! 3. an attempt improves when it passes and, timed paired against the cycle's best, is better
//!    beyond noise (the first pass is the first best);
//! 4. the cycle ends after `window` attempts in a row without improvement, when the proposer has
//!    nothing more to try, or at `max_cycle_attempts`;
//! 5. a pass attaches the best attempt to the node, judged against the parent by the acceptance
//!    gate, and the proposer refines the tree; no pass goes to too-hard handling.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use ksearch_core::gate::{self, PairedRatio};
use ksearch_core::protocol::{CapturedOutput, EvaluateResult, Phases, Role, Status};
use ksearch_core::record::{
    AttemptKind, AttemptRecord, CycleOutcome, CycleRecord, Evaluation, LlmCallRecord,
};
use ksearch_core::selection;
use ksearch_core::task::{Source, Task};
use ksearch_core::tree::{Gate, NodeId, ROOT, Solution, Tree};
use ksearch_core::tree_edit::{self, EditOp, EditScript};
use ksearch_eval::{Contenders, EvalError, Evaluator};
use ksearch_store::{RunStore, Snapshot, StoreError, non_finite_path};
use thiserror::Error;

use crate::observer::{Observer, Progress};
use crate::proposer::{
    CycleEvidence, Evaluated, GenerateRequest, ProposeContext, ProposeError, Proposer, TooHard,
};
use ksearch_run::StoredRun;
use ksearch_run::events::RunEvent;
use ksearch_run::{
    ConfigError, CostStop, EngineState, InFlight, Position, RunConfig, SessionEnd, StopReason,
};
use ksearch_run::{RunSummary, summarize};

/// The proposer's view of the engine, borrowing only the fields it needs so the proposer itself
/// can be borrowed mutably beside it.
macro_rules! ctx {
    ($e:expr) => {
        ProposeContext {
            task: &$e.task,
            tree: &$e.tree,
            attempts: &$e.attempts,
            round: $e.state.next_round,
            seed: $e.config.seed,
            best_code: None,
        }
    };
}

pub use ksearch_core::selection::MAX_FAILED_CYCLES;
/// Cycles in a row that made no attempt at all before the search counts as exhausted.
const MAX_EMPTY_CYCLES: u32 = 25;
/// Times the orchestrator may die during one evaluation: after the first the evaluation runs
/// again on resume (the death may have had another cause); after the second the attempt is
/// recorded as `crashed` and never run again.
pub const MAX_LOST_EVALUATIONS: u32 = 2;

/// Judge failures in consecutive rounds after which the run stops on the error.
const MAX_JUDGE_FAILURES: u32 = 3;

#[derive(Debug, Error)]
pub enum EngineError {
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The stored run could not be read back (see [`ksearch_run::RunError`]).
    #[error(transparent)]
    Run(#[from] ksearch_run::RunError),
    #[error(transparent)]
    Eval(#[from] EvalError),
    #[error(transparent)]
    Propose(#[from] ProposeError),
    #[error("the task's seed kernel does not pass ({status}): {message}")]
    SeedFailed { status: Status, message: String },
    #[error("interrupted before the run was initialised; `ksearch resume` starts it again")]
    InterruptedDuringSetup,
    #[error("the run in {} is incomplete: {what}", dir.display())]
    Incomplete { dir: PathBuf, what: String },
    #[error("invalid configuration: {0}")]
    BadConfig(#[source] ConfigError),
    #[error("{} cannot be replayed: {why}", dir.display())]
    NotReplayable { dir: PathBuf, why: String },

    #[error("the replay diverged from the recorded run in session {session}: {detail}")]
    Diverged { session: u32, detail: String },
}

/// Budgets of one session of a run.
#[derive(Debug, Clone, Copy, Default)]
pub struct Budget {
    /// Rounds this session may add: the run's round budget becomes the rounds already done
    /// plus these. `None` keeps the run's budget (a new run then has none). Recorded before
    /// anything is measured, so it survives a kill at any point.
    pub rounds: Option<u64>,
    /// Stop starting attempts after this instant.
    pub until: Option<Instant>,
}

pub struct Engine<'e> {
    task: Task,
    config: RunConfig,
    store: RunStore,
    tree: Tree,
    attempts: Vec<AttemptRecord>,
    cycles: Vec<CycleRecord>,
    state: EngineState,
    proposer: Box<dyn Proposer + 'e>,
    evaluator: &'e mut dyn Evaluator,
    observer: &'e mut dyn Observer,
    stop: Arc<AtomicBool>,
    wall_base: f64,
    session_start: Instant,
    /// This session's time budget.
    until: Option<Instant>,
    /// Events waiting for the next commit.
    events: Vec<(String, serde_json::Value)>,
    /// The journal of model calls, all sessions (committed).
    llm_calls: Vec<LlmCallRecord>,
    /// Calls taken from the proposer and not yet committed.
    uncommitted_calls: Vec<LlmCallRecord>,
    /// Replaying: how the recorded session being replayed ended.
    target: Option<SessionEnd>,
    /// Rounds in a row, this session, whose judge failed.
    judge_failures: u32,
}

/// What one step came to.
enum Step {
    Continue,
    Stop(StopReason),
    /// Ctrl-C abandoned the evaluation of this round.
    Abandoned(u64),
}

impl std::fmt::Debug for Engine<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("run", &self.store.dir())
            .field("state", &self.state)
            .finish_non_exhaustive()
    }
}

/// Parts an engine is built from.
#[allow(missing_debug_implementations)] // trait objects without Debug
pub struct Parts<'e> {
    pub proposer: Box<dyn Proposer + 'e>,
    pub evaluator: &'e mut dyn Evaluator,
    pub observer: &'e mut dyn Observer,
    /// Set by Ctrl-C: the engine stops after saving; an evaluation in flight is abandoned.
    pub stop: Arc<AtomicBool>,
}

impl<'e> Engine<'e> {
    /// Start a new run in `dir`: record it with its round budget, measure the seed, build the
    /// initial world model.
    pub fn create(
        dir: &Path,
        task: Task,
        config: RunConfig,
        budget: Budget,
        parts: Parts<'e>,
    ) -> Result<Self, EngineError> {
        config.validate().map_err(EngineError::BadConfig)?;
        let mut store = RunStore::create(dir)?;
        let state = EngineState {
            next_round: 1,
            next_cycle: 1,
            current_cycle: None,
            next_node: 1,
            initialized: false,
            round_budget: budget.rounds,
            wall_s: 0.0,
            eval_s: 0.0,
            sessions: 1,
            stop_reason: None,
            empty_cycles: 0,
            evaluating: None,
            stop_detail: None,
        };
        let seed_hash = store.put_artifact(&task.seed)?;
        let seed_attempt = AttemptRecord {
            round: 0,
            node: ROOT,
            cycle: 0,
            kind: AttemptKind::Seed,
            source_hash: seed_hash,
            source_file: task.seed.file.clone(),
            note: "the task's seed kernel".into(),
            evaluation: None,
            improved: false,
            payload: serde_json::Value::Null,
        };
        store.transaction(|tx| {
            tx.set_meta(ksearch_run::META_TASK, &task)?;
            tx.set_meta(ksearch_run::META_CONFIG, &config)?;
            tx.put_attempt(&seed_attempt)?;
            tx.set_state(&state)
        })?;
        let snap = Snapshot {
            nodes: Vec::new(),
            cycles: Vec::new(),
            attempts: vec![seed_attempt],
            events: Vec::new(),
            llm_calls: Vec::new(),
        };
        let mut engine = Self::assemble(store, task, config, state, snap, budget, parts);
        engine.initialize()?;
        Ok(engine)
    }

    /// Continue a stored run (opened with [`open_run_writer`]). `budget.rounds` more rounds
    /// are recorded as the run's budget before anything else happens. An evaluation the
    /// orchestrator died during is counted: it runs once more, and after a second death the
    /// attempt is recorded as `crashed`.
    pub fn resume(run: StoredRun, budget: Budget, parts: Parts<'e>) -> Result<Self, EngineError> {
        let StoredRun {
            store,
            task,
            config,
        } = run;
        if !store.is_writer() {
            return Err(EngineError::Incomplete {
                dir: store.dir().to_owned(),
                what: "opened for reading only; a run is continued through open_run_writer".into(),
            });
        }
        let snap = store.snapshot()?;
        let mut state: EngineState = store.state()?.ok_or_else(|| EngineError::Incomplete {
            dir: store.dir().to_owned(),
            what: "no engine state".into(),
        })?;
        state.sessions += 1;
        if state.stop_reason.take().is_some() {
            // A session that stopped cleanly: the next one starts counting afresh. After a
            // kill the count goes on, as it would have without the kill.
            state.empty_cycles = 0;
        }
        let mut engine = Self::assemble(store, task, config, state, snap, budget, parts);
        // Before anything is written: an edited tree would make the search loop or panic.
        ksearch_run::check_tree(engine.store.dir(), &engine.tree)?;
        if engine.state.initialized && engine.tree.is_empty() {
            return Err(ksearch_run::RunError::Corrupt {
                path: engine.store.dir().join(ksearch_store::DB_FILE),
                what: "nodes: none, though the engine state says the seed was measured".into(),
            }
            .into());
        }
        if let Some(n) = budget.rounds {
            engine.state.round_budget = Some(engine.rounds_done().saturating_add(n));
        }
        if let Some(mut lost) = engine.state.evaluating {
            lost.lost += 1;
            engine.state.evaluating = Some(lost);
            let outcome = if lost.lost >= MAX_LOST_EVALUATIONS {
                "recorded as crashed"
            } else {
                "evaluated again"
            };
            engine.event(&RunEvent::EvaluationLost {
                round: lost.round,
                times: lost.lost,
                outcome: outcome.into(),
            })?;
        }
        // The budget (and any lost evaluation) is on disk before anything is measured.
        engine.commit(&[], &[])?;
        if !engine.state.initialized {
            engine.initialize()?;
        }
        Ok(engine)
    }

    fn assemble(
        store: RunStore,
        task: Task,
        config: RunConfig,
        state: EngineState,
        snap: Snapshot,
        budget: Budget,
        mut parts: Parts<'e>,
    ) -> Self {
        // Answers already paid for are reused rather than asked again.
        parts.proposer.restore_records(&snap.llm_calls);
        Self {
            task,
            config,
            store,
            tree: Tree::from_nodes(snap.nodes, state.next_node),
            attempts: snap.attempts,
            cycles: snap.cycles,
            llm_calls: snap.llm_calls,
            wall_base: state.wall_s,
            state,
            proposer: parts.proposer,
            evaluator: parts.evaluator,
            observer: parts.observer,
            stop: parts.stop,
            session_start: Instant::now(),
            until: budget.until,
            events: Vec::new(),
            uncommitted_calls: Vec::new(),
            target: None,
            judge_failures: 0,
        }
    }

    fn source_of(&self, hash: &str, file: &str) -> Result<Source, EngineError> {
        Ok(self.store.read_artifact(hash, file)?)
    }

    /// Measure the seed and build the initial world model.
    fn initialize(&mut self) -> Result<(), EngineError> {
        let seed = self
            .attempts
            .iter()
            .find(|a| a.round == 0)
            .cloned()
            .ok_or_else(|| EngineError::Incomplete {
                dir: self.store.dir().to_owned(),
                what: "no seed attempt".into(),
            })?;
        let evaluation = match seed.evaluation.clone() {
            Some(e) => e,
            None => {
                let source = self.source_of(&seed.source_hash, &seed.source_file)?;
                let contenders = Contenders {
                    comparisons: true,
                    ..Contenders::default()
                };
                self.observer.progress(&Progress::AttemptStarted {
                    round: 0,
                    kind: AttemptKind::Seed,
                    node: ROOT,
                    title: "the seed",
                });
                match self.evaluate_round(0, &source, contenders) {
                    Err(EngineError::Eval(EvalError::Cancelled)) => {
                        return Err(EngineError::InterruptedDuringSetup);
                    }
                    other => other?,
                }
            }
        };
        if evaluation.result.status != Status::Passed {
            // Not recorded: a resume measures the seed again (unless the orchestrator died
            // during it twice, which the state still says).
            return Err(EngineError::SeedFailed {
                status: evaluation.result.status,
                message: evaluation.result.message.clone(),
            });
        }
        let speedup = evaluation.speedup.as_ref().map(|s| s.geomean);
        self.observer.progress(&Progress::AttemptFinished {
            round: 0,
            status: evaluation.result.status,
            speedup,
            best_speedup: speedup,
            spent_usd: 0.0,
        });
        if !evaluation.caveats.is_empty() {
            self.observer.progress(&Progress::Caveats {
                round: 0,
                caveats: &evaluation.caveats,
            });
        }
        let seed = AttemptRecord {
            evaluation: Some(evaluation.clone()),
            ..seed
        };
        self.replace_attempt(seed.clone());
        self.tree = Tree::new(Vec::new(), solution_of(&seed, &evaluation, None));
        // The seed's measurement is kept before the model is asked: a resume after a pause or
        // an error there asks the same question (its prompt quotes these latencies) instead of
        // measuring again.
        self.commit(std::slice::from_ref(&seed), &[])?;
        self.observer.progress(&Progress::Proposing {
            what: "the initial world model",
        });
        let model = match self.proposer.init_world_model(&ctx!(self)) {
            Ok(model) => model,
            Err(e) => {
                // The calls already answered are kept: a resume (after a manual model's pause,
                // or a provider's error) answers the same requests from them.
                self.save_calls()?;
                return Err(e.into());
            }
        };
        for note in model.notes {
            self.tree.note(ROOT, note, 0);
        }
        let ids = tree_edit::insert_initial(&mut self.tree, model.actions, 0).map_err(|e| {
            ProposeError::Failed {
                proposer: self.proposer.name(),
                message: format!("its initial world model is invalid: {e}"),
            }
        })?;
        if ids.is_empty() {
            return Err(ProposeError::Failed {
                proposer: self.proposer.name(),
                message: "its initial world model has no actions".into(),
            }
            .into());
        }
        self.event(&RunEvent::WorldModel { actions: ids })?;
        self.state.initialized = true;
        self.commit(&[seed], &[])?;
        Ok(())
    }

    fn replace_attempt(&mut self, a: AttemptRecord) {
        match self.attempts.iter_mut().find(|x| x.round == a.round) {
            Some(slot) => *slot = a,
            None => self.attempts.push(a),
        }
    }

    /// Queue an event for the next commit. Its data must hold no NaN or infinity (JSON would
    /// turn one into `null` on the way in); one that does is a bug, refused here.
    fn event(&mut self, event: &RunEvent) -> Result<(), EngineError> {
        let (kind, value) = event.stored();
        if let Some(at) = non_finite_path(&value) {
            return Err(StoreError::NonFinite {
                path: self.store.dir().join(ksearch_store::DB_FILE),
                what: format!("event `{kind}`"),
                at,
            }
            .into());
        }
        self.events.push((kind, value));
        Ok(())
    }

    /// Move the proposer's new journal entries into the engine, to be committed.
    fn take_calls(&mut self) {
        let calls = self.proposer.take_records();
        self.uncommitted_calls.extend(calls);
    }

    /// Persist the model calls not yet committed, alone, marked as calls of a round that never
    /// finished (the round they belong to is not committed).
    fn save_calls(&mut self) -> Result<(), EngineError> {
        self.take_calls();
        let mut calls = std::mem::take(&mut self.uncommitted_calls);
        for c in &mut calls {
            c.unfinished_round = true;
        }
        if calls.is_empty() {
            return Ok(());
        }
        self.store.transaction(|tx| {
            for c in &calls {
                tx.add_llm_call(c)?;
            }
            Ok(())
        })?;
        self.llm_calls.extend(calls);
        Ok(())
    }

    /// Where the run stands now (model calls made, evaluations finished, next round and
    /// cycle): what a replay matches to stop where a recorded session stopped.
    fn position(&mut self) -> Position {
        self.take_calls();
        Position {
            calls: (replay_path(&self.llm_calls).count() + self.uncommitted_calls.len()) as u64,
            evaluations: self
                .attempts
                .iter()
                .filter(|a| a.evaluation.is_some())
                .count() as u64,
            next_round: self.state.next_round,
            next_cycle: self.state.next_cycle,
        }
    }

    /// Persist the tree, the given attempts and cycles, pending events and the state, in one
    /// transaction.
    fn commit(
        &mut self,
        attempts: &[AttemptRecord],
        cycles: &[CycleRecord],
    ) -> Result<(), EngineError> {
        self.state.wall_s = self.wall_base + self.session_start.elapsed().as_secs_f64();
        self.state.next_node = self.tree.next_id();
        self.take_calls();
        let events = std::mem::take(&mut self.events);
        let calls = std::mem::take(&mut self.uncommitted_calls);
        let round = self.state.next_round.saturating_sub(1);
        let (tree, state) = (&self.tree, &self.state);
        self.store.transaction(|tx| {
            tx.replace_nodes(tree.nodes())?;
            for c in &calls {
                tx.add_llm_call(c)?;
            }
            for a in attempts {
                tx.put_attempt(a)?;
            }
            for c in cycles {
                tx.put_cycle(c)?;
            }
            for (kind, data) in &events {
                tx.add_event(round, kind, data)?;
            }
            tx.set_state(state)
        })?;
        self.llm_calls.extend(calls);
        Ok(())
    }

    /// Evaluate the candidate of `round`, recording first that its evaluation is in flight. If
    /// the orchestrator has already died during this evaluation [`MAX_LOST_EVALUATIONS`]
    /// times, it is not run again: the outcome is `crashed`, saying so.
    fn evaluate_round(
        &mut self,
        round: u64,
        source: &Source,
        contenders: Contenders<'_>,
    ) -> Result<Evaluation, EngineError> {
        if self.replay_abandons(round) {
            return Err(EvalError::Cancelled.into());
        }
        let lost = self
            .state
            .evaluating
            .filter(|f| f.round == round)
            .map_or(0, |f| f.lost);
        if lost >= MAX_LOST_EVALUATIONS {
            self.state.evaluating = None;
            return Ok(self.lost_evaluation(lost));
        }
        self.state.evaluating = Some(InFlight { round, lost });
        self.commit(&[], &[])?;
        let result = self.timed_evaluate(source, contenders);
        self.state.evaluating = None;
        match result {
            Ok(evaluation) => {
                self.judge_failures = 0;
                self.admit(round, evaluation)
            }
            // A later round's judge that fails (its harness, or the task's own code beside this
            // candidate, with which it shares the machine) fails this attempt: the seed's round
            // showed that both work, and a candidate can make them fail (a malformed message to
            // the judge, the device's memory held). Several in a row: the judge itself is
            // broken, and the run stops on the error.
            Err(EngineError::Eval(e @ (EvalError::Worker { .. } | EvalError::Task { .. })))
                if round > 0 && self.judge_failures + 1 < MAX_JUDGE_FAILURES =>
            {
                self.judge_failures += 1;
                let evaluation = self.unevaluated(
                    Status::RuntimeError,
                    format!("the evaluation failed beside this candidate, which is recorded as failing: {e}"),
                );
                self.admit(round, evaluation)
            }
            Err(e) => {
                // Abandoned (Ctrl-C) or failed, but the orchestrator did not die: say so on
                // disk, so that a resume runs it again as new. (Best effort: the error that
                // stops the run is the one to report.)
                let _ = self.commit(&[], &[]);
                Err(e)
            }
        }
    }

    /// The outcome of an evaluation that killed the orchestrator every time it ran.
    fn lost_evaluation(&self, times: u32) -> Evaluation {
        self.unevaluated(
            Status::Crashed,
            format!(
                "the orchestrator (ksearch) died {times} times while this candidate was being evaluated, and the run was resumed each time; it is recorded as crashed and not evaluated again"
            ),
        )
    }

    /// An evaluation that measured nothing, with its status and why.
    fn unevaluated(&self, status: Status, message: String) -> Evaluation {
        let baseline = self
            .attempts
            .iter()
            .find(|a| a.round == 0)
            .and_then(|a| a.evaluation.as_ref())
            .map(|e| e.baseline.clone())
            .unwrap_or_default();
        Evaluation {
            result: EvaluateResult {
                id: 0,
                status,
                message,
                compile: None,
                workloads: Vec::new(),
                phases: Phases::default(),
                output: CapturedOutput::default(),
                sandbox: None,
                described: Vec::new(),
            },
            speedup: None,
            speedup_vs_parent: None,
            baseline,
            wall_s: 0.0,
            load: None,
            caveats: Vec::new(),
        }
    }

    /// Admit an evaluation into the run: one holding a number that is not finite, or a time
    /// or speedup that is not positive, is not believed. It becomes `rejected`, saying which
    /// number, and none of its numbers are kept.
    fn admit(&mut self, round: u64, e: Evaluation) -> Result<Evaluation, EngineError> {
        let Some(problem) = implausible(&e) else {
            return Ok(e);
        };
        self.event(&RunEvent::EvaluationNotAdmitted {
            round,
            problem: problem.clone(),
        })?;
        let compile = e
            .result
            .compile
            .map(|c| ksearch_core::protocol::CompileReport {
                seconds: if c.seconds.is_finite() {
                    c.seconds
                } else {
                    0.0
                },
                ..c
            });
        Ok(Evaluation {
            result: EvaluateResult {
                id: e.result.id,
                status: Status::Rejected,
                message: format!(
                    "the evaluation reported {problem} (it said `{}`: {}); no number from it is kept",
                    e.result.status, e.result.message
                ),
                compile,
                workloads: Vec::new(),
                phases: Phases::default(),
                output: e.result.output,
                sandbox: e.result.sandbox,
                described: e.result.described,
            },
            speedup: None,
            speedup_vs_parent: None,
            baseline: e.baseline,
            wall_s: if e.wall_s.is_finite() && e.wall_s >= 0.0 {
                e.wall_s
            } else {
                0.0
            },
            load: e.load.filter(|l| l.load_1m.is_finite()),
            caveats: e.caveats,
        })
    }

    fn timed_evaluate(
        &mut self,
        source: &Source,
        contenders: Contenders<'_>,
    ) -> Result<Evaluation, EngineError> {
        let started = Instant::now();
        // The seed's evaluation sets the limit of every later one (unless the user set it).
        let seed_wall = self
            .attempts
            .iter()
            .find(|a| a.round == 0)
            .and_then(|a| a.evaluation.as_ref())
            .map(|e| e.wall_s);
        let (limit, why) = self.config.eval.round_timeout(seed_wall);
        let result = self.evaluator.evaluate(
            &self.task,
            source,
            contenders,
            &crate::eval_options(&self.config.eval, limit),
        );
        self.state.eval_s += started.elapsed().as_secs_f64();
        let mut evaluation = result?;
        if evaluation.result.status == Status::Timeout {
            evaluation.result.message = format!("{} (the limit: {why})", evaluation.result.message);
        }
        Ok(evaluation)
    }

    fn rounds_done(&self) -> u64 {
        self.attempts
            .iter()
            .filter(|a| a.round > 0 && a.evaluation.is_some())
            .count() as u64
    }

    pub fn tree(&self) -> &Tree {
        &self.tree
    }

    /// The engine's state (budgets, counters), as last changed.
    pub fn state(&self) -> &EngineState {
        &self.state
    }

    pub fn summary(&self) -> RunSummary {
        summarize(
            self.store.dir(),
            &self.task,
            &self.config,
            &self.state,
            &self.tree,
            &self.attempts,
            &self.cycles,
            &self.llm_calls,
        )
    }

    /// Run one session until a budget is spent, the proposer runs dry, or `stop` is set.
    pub fn run(&mut self) -> Result<RunSummary, EngineError> {
        self.session()?;
        Ok(self.summary())
    }

    /// Replay a recorded run: every recorded session again, each stopped where and why the
    /// recorded one stopped (the proposer answering from the recorded journal, the evaluator
    /// from the recorded evaluations), until the record is used up. Anything else is a
    /// divergence, reported with where it happened.
    pub fn replay(&mut self, plan: &ReplayPlan) -> Result<RunSummary, EngineError> {
        for (i, end) in plan.sessions.iter().enumerate() {
            if i > 0 {
                // What `resume` does after a clean stop.
                self.state.sessions += 1;
                self.state.stop_reason = None;
                self.state.empty_cycles = 0;
            }
            self.target = Some(end.clone());
            let result = self.session();
            self.target = None;
            if self.stop.load(Ordering::Relaxed) && result.is_ok() {
                // Ctrl-C during the replay: it stops there, saved, like any run.
                return Ok(self.summary());
            }
            let session = self.state.sessions;
            let ended = result.map_err(|e| match e {
                EngineError::Diverged { .. } => e,
                other => EngineError::Diverged {
                    session,
                    detail: other.to_string(),
                },
            })?;
            if ended.reason != end.reason
                || ended.at != end.at
                || ended.abandoned_round != end.abandoned_round
            {
                return Err(EngineError::Diverged {
                    session,
                    detail: format!(
                        "the recorded session stopped ({}) at {}, the replay ({}) at {}",
                        end.reason.as_str(),
                        end.at,
                        ended.reason.as_str(),
                        ended.at
                    ),
                });
            }
        }
        let at = self.position();
        if at != plan.end {
            return Err(EngineError::Diverged {
                session: self.state.sessions,
                detail: format!(
                    "the recorded run ended at {}, the replay at {at}: the record was not used up",
                    plan.end
                ),
            });
        }
        Ok(self.summary())
    }

    /// Replaying, whether the recorded session stops at this loop top.
    fn replay_stops_here(&mut self) -> Result<Option<StopReason>, EngineError> {
        let Some(t) = self.target.clone() else {
            return Ok(None);
        };
        let at = self.position();
        let at_top = matches!(
            t.reason,
            StopReason::Iterations | StopReason::Time | StopReason::Interrupted
        ) && t.abandoned_round.is_none();
        if at_top && at == t.at {
            return Ok(Some(t.reason));
        }
        if at.calls > t.at.calls
            || at.evaluations > t.at.evaluations
            || at.next_round > t.at.next_round
            || at.next_cycle > t.at.next_cycle
        {
            return Err(EngineError::Diverged {
                session: self.state.sessions,
                detail: format!(
                    "the recorded session stopped ({}) at {}, and the replay went past it to {at}",
                    t.reason.as_str(),
                    t.at
                ),
            });
        }
        Ok(None)
    }

    /// Replaying, whether the recorded session abandoned this round's evaluation (Ctrl-C).
    fn replay_abandons(&mut self, round: u64) -> bool {
        match self.target.clone() {
            Some(t) if t.reason == StopReason::Interrupted && t.abandoned_round == Some(round) => {
                self.position() == t.at
            }
            _ => false,
        }
    }

    /// One session: loop until a stop, then record how it ended.
    fn session(&mut self) -> Result<SessionEnd, EngineError> {
        let mut abandoned = None;
        let mut cost = None;
        let mut unusable = None;
        let reason = loop {
            if self.stop.load(Ordering::Relaxed) {
                break StopReason::Interrupted;
            }
            if self.target.is_some() {
                if let Some(reason) = self.replay_stops_here()? {
                    break reason;
                }
            } else {
                if self
                    .state
                    .round_budget
                    .is_some_and(|b| self.rounds_done() >= b)
                {
                    break StopReason::Iterations;
                }
                if self.until.is_some_and(|t| Instant::now() >= t) {
                    break StopReason::Time;
                }
            }
            match self.step() {
                Ok(Step::Continue) => {}
                Ok(Step::Stop(reason)) => break reason,
                Ok(Step::Abandoned(round)) => {
                    abandoned = Some(round);
                    break StopReason::Interrupted;
                }
                Err(EngineError::Propose(ProposeError::Budget {
                    spent_usd,
                    next_usd,
                    cap_usd,
                })) => {
                    cost = Some(self.cost_stop(spent_usd, next_usd, cap_usd)?);
                    break StopReason::Cost;
                }
                // A model that never gives usable code stops the run (its calls are kept, as
                // for a cost stop), rather than going round empty cycles.
                Err(EngineError::Propose(e @ ProposeError::Unusable { .. })) => {
                    let detail = e.to_string();
                    self.event(&RunEvent::UnusableModel {
                        detail: detail.clone(),
                    })?;
                    unusable = Some(detail);
                    break StopReason::UnusableModel;
                }
                Err(e) => {
                    // The model calls this round already paid for are kept: a resume answers
                    // the same requests from them instead of paying again.
                    self.save_calls()?;
                    return Err(e);
                }
            }
        };
        let at = self.position();
        // A budget ends the session, not the search: attach what the current cycle has found
        // so the result counts. An interrupted cycle stays open and resumes where it was; so
        // does one stopped by the cost cap, since closing it would need a model call.
        if matches!(reason, StopReason::Iterations | StopReason::Time)
            && let Some(c) = self.state.current_cycle
            && self.cycle(c).best_round.is_some()
            && !self
                .attempts
                .iter()
                .any(|a| a.cycle == c && a.evaluation.is_none())
        {
            match self.end_cycle(c) {
                Ok(()) => {}
                // The cap refuses the call that would close it: it stays open, as after a
                // cost stop, and the next session closes it.
                Err(EngineError::Propose(ProposeError::Budget {
                    spent_usd,
                    next_usd,
                    cap_usd,
                })) => cost = Some(self.cost_stop(spent_usd, next_usd, cap_usd)?),
                Err(e) => {
                    // As in the loop: the calls this cycle's end already made are kept.
                    self.save_calls()?;
                    return Err(e);
                }
            }
        }
        let end = SessionEnd {
            session: self.state.sessions,
            reason,
            at,
            abandoned_round: abandoned,
            cost,
        };
        self.state.stop_reason = Some(reason);
        self.state.stop_detail = unusable;
        self.state.evaluating = None;
        self.event(&RunEvent::SessionEnded(end.clone()))?;
        self.commit(&[], &[])?;
        self.observer.progress(&Progress::Stopped { reason });
        Ok(end)
    }

    /// The cost cap refused a call: record it.
    fn cost_stop(
        &mut self,
        spent_usd: f64,
        next_usd: f64,
        cap_usd: f64,
    ) -> Result<CostStop, EngineError> {
        let stop = CostStop {
            call: self.position().calls,
            spent_usd,
            next_usd,
            cap_usd,
        };
        self.event(&RunEvent::CostCap(stop))?;
        Ok(stop)
    }

    /// One step: start a cycle, or make and evaluate one attempt, or end a cycle.
    fn step(&mut self) -> Result<Step, EngineError> {
        let cycle_id = match self.state.current_cycle {
            Some(c) => c,
            None => match self.start_cycle()? {
                Some(c) => c,
                None => return Ok(Step::Stop(StopReason::Exhausted)),
            },
        };
        let cycle = self.cycle(cycle_id).clone();
        let pending = self
            .attempts
            .iter()
            .find(|a| a.cycle == cycle_id && a.evaluation.is_none())
            .cloned();
        let attempt = match pending {
            Some(a) => a,
            None => {
                if cycle.stagnation >= self.config.window
                    || cycle.attempts >= self.config.max_cycle_attempts
                {
                    self.end_cycle(cycle_id)?;
                    return Ok(self.exhausted());
                }
                let kind = if cycle.attempts == 0 {
                    AttemptKind::Implement
                } else if cycle.best_round.is_none() {
                    AttemptKind::Debug
                } else {
                    AttemptKind::Improve
                };
                let what = format!("{} node {}", kind.as_str(), cycle.node);
                self.observer.progress(&Progress::Proposing { what: &what });
                match self.generate(&cycle, kind)? {
                    Some(a) => a,
                    None => {
                        self.end_cycle(cycle_id)?;
                        return Ok(self.exhausted());
                    }
                }
            }
        };
        let title = self
            .tree
            .get(attempt.node)
            .map_or_else(String::new, |n| n.action.title.clone());
        self.observer.progress(&Progress::AttemptStarted {
            round: attempt.round,
            kind: attempt.kind,
            node: attempt.node,
            title: &title,
        });
        let round = attempt.round;
        match self.evaluate_attempt(attempt, &cycle) {
            Err(EngineError::Eval(EvalError::Cancelled)) => return Ok(Step::Abandoned(round)),
            other => other?,
        }
        self.state.empty_cycles = 0;
        let cycle = self.cycle(cycle_id).clone();
        if cycle.stagnation >= self.config.window
            || cycle.attempts >= self.config.max_cycle_attempts
        {
            self.end_cycle(cycle_id)?;
        }
        Ok(Step::Continue)
    }

    fn exhausted(&self) -> Step {
        if self.state.empty_cycles >= MAX_EMPTY_CYCLES {
            Step::Stop(StopReason::Exhausted)
        } else {
            Step::Continue
        }
    }

    fn cycle(&self, id: u64) -> &CycleRecord {
        self.cycles
            .iter()
            .find(|c| c.id == id)
            .expect("current cycle is recorded")
    }

    fn cycle_mut(&mut self, id: u64) -> &mut CycleRecord {
        self.cycles
            .iter_mut()
            .find(|c| c.id == id)
            .expect("current cycle is recorded")
    }

    fn selectable(&self) -> Option<NodeId> {
        selection::select(&self.tree)
    }

    fn start_cycle(&mut self) -> Result<Option<u64>, EngineError> {
        let node = match self.selectable() {
            Some(n) => n,
            None => {
                let best = self.tree.best().solution.clone();
                let code = match best {
                    Some(s) => Some(self.source_of(&s.source_hash, &s.source_file)?.text),
                    None => None,
                };
                let ctx = ProposeContext {
                    best_code: code.as_deref(),
                    ..ctx!(self)
                };
                self.observer.progress(&Progress::Proposing {
                    what: "new actions (no open one is left to work on)",
                });
                let script = self.proposer.propose_actions(&ctx)?;
                self.apply_edits(script)?;
                self.commit(&[], &[])?;
                match self.selectable() {
                    Some(n) => n,
                    None => return Ok(None),
                }
            }
        };
        let cycle = CycleRecord {
            id: self.state.next_cycle,
            node,
            started_round: self.state.next_round,
            ended_round: None,
            outcome: None,
            best_round: None,
            stagnation: 0,
            attempts: 0,
        };
        self.state.next_cycle += 1;
        self.state.current_cycle = Some(cycle.id);
        self.event(&RunEvent::CycleStarted {
            cycle: cycle.id,
            node,
            ranking: selection::ranked(&self.tree),
        })?;
        self.cycles.push(cycle.clone());
        self.commit(&[], std::slice::from_ref(&cycle))?;
        let title = self
            .tree
            .get(node)
            .map_or_else(String::new, |n| n.action.title.clone());
        self.observer.progress(&Progress::CycleStarted {
            cycle: cycle.id,
            node,
            title: &title,
        });
        Ok(Some(cycle.id))
    }

    /// The solution source of `node`'s parent: what its action starts from.
    fn parent_source(&self, node: NodeId) -> Result<Source, EngineError> {
        let parent = self.tree.get(node).and_then(|n| n.parent).unwrap_or(ROOT);
        let sol = self
            .tree
            .get(parent)
            .and_then(|p| p.solution.as_ref())
            .ok_or_else(|| EngineError::Incomplete {
                dir: self.store.dir().to_owned(),
                what: format!(
                    "node {node} is being worked on but its parent {parent} has no solution"
                ),
            })?;
        self.source_of(&sol.source_hash, &sol.source_file)
    }

    fn generate(
        &mut self,
        cycle: &CycleRecord,
        kind: AttemptKind,
    ) -> Result<Option<AttemptRecord>, EngineError> {
        let parent_source = self.parent_source(cycle.node)?;
        let cycle_attempts: Vec<&AttemptRecord> = self
            .attempts
            .iter()
            .filter(|a| a.cycle == cycle.id)
            .collect();
        let load = |a: &AttemptRecord| self.source_of(&a.source_hash, &a.source_file);
        let previous = cycle_attempts.last().copied();
        let best = cycle
            .best_round
            .and_then(|r| cycle_attempts.iter().copied().find(|a| a.round == r));
        let previous_source = previous.map(load).transpose()?;
        let best_source = best.map(load).transpose()?;
        let req = GenerateRequest {
            node: cycle.node,
            kind,
            parent_source: &parent_source,
            previous: evaluated(previous, previous_source.as_ref()),
            best: evaluated(best, best_source.as_ref()),
            cycle_attempts: &cycle_attempts,
        };
        let Some(candidate) = self.proposer.generate(&ctx!(self), &req)? else {
            return Ok(None);
        };
        let hash = self.store.put_artifact(&candidate.source)?;
        let attempt = AttemptRecord {
            round: self.state.next_round,
            node: cycle.node,
            cycle: cycle.id,
            kind,
            source_hash: hash,
            source_file: candidate.source.file.clone(),
            note: candidate.note,
            evaluation: None,
            improved: false,
            payload: candidate.payload,
        };
        self.state.next_round += 1;
        self.attempts.push(attempt.clone());
        self.commit(std::slice::from_ref(&attempt), &[])?;
        Ok(Some(attempt))
    }

    fn evaluate_attempt(
        &mut self,
        attempt: AttemptRecord,
        cycle: &CycleRecord,
    ) -> Result<(), EngineError> {
        let source = self.source_of(&attempt.source_hash, &attempt.source_file)?;
        let parent = self.parent_source(attempt.node)?;
        let incumbent = match cycle.best_round {
            Some(r) if r != attempt.round => {
                let best = self
                    .attempts
                    .iter()
                    .find(|a| a.round == r)
                    .cloned()
                    .expect("best attempt is recorded");
                Some(self.source_of(&best.source_hash, &best.source_file)?)
            }
            _ => None,
        };
        let evaluation = self.evaluate_round(
            attempt.round,
            &source,
            Contenders {
                parent: Some(&parent),
                incumbent: incumbent.as_ref(),
                comparisons: false,
            },
        )?;
        let passed = evaluation.result.status == Status::Passed;
        let vs_incumbent = incumbent
            .as_ref()
            .and_then(|_| gate::vs_incumbent(&evaluation.result, self.config.seed, attempt.round));
        let improved = passed
            && (incumbent.is_none() || vs_incumbent.is_some_and(|c| c.verdict == Gate::Better));
        let status = evaluation.result.status;
        let speedup = evaluation.speedup.as_ref().map(|s| s.geomean);
        if let Some(c) = vs_incumbent {
            self.event(&RunEvent::VsIncumbent {
                round: attempt.round,
                ratio: c,
            })?;
        }
        let attempt = AttemptRecord {
            evaluation: Some(evaluation),
            improved,
            ..attempt
        };
        self.replace_attempt(attempt.clone());
        let c = self.cycle_mut(cycle.id);
        c.attempts += 1;
        if improved {
            c.best_round = Some(attempt.round);
            c.stagnation = 0;
        } else {
            c.stagnation += 1;
        }
        let c = c.clone();
        self.commit(std::slice::from_ref(&attempt), &[c])?;
        let cycle_best = c_best_speedup(&self.attempts, self.cycle(cycle.id));
        let best_speedup = self
            .tree
            .best()
            .solution
            .as_ref()
            .and_then(|s| s.speedup)
            .into_iter()
            .chain(cycle_best)
            .reduce(f64::max);
        let spent_usd = self.llm_calls.iter().filter_map(|c| c.cost_usd).sum();
        self.observer.progress(&Progress::AttemptFinished {
            round: attempt.round,
            status,
            speedup,
            best_speedup,
            spent_usd,
        });
        Ok(())
    }

    /// End a cycle: attach and refine, or too-hard handling. If a proposer call fails (the cost
    /// cap, a provider error), the tree and pending events are left as they were, so the cycle
    /// can be ended again later.
    fn end_cycle(&mut self, cycle_id: u64) -> Result<(), EngineError> {
        let (tree, events) = (self.tree.clone(), self.events.len());
        let empty_cycles = self.state.empty_cycles;
        let result = self.end_cycle_inner(cycle_id);
        if result.is_err() {
            self.tree = tree;
            self.events.truncate(events);
            self.state.empty_cycles = empty_cycles;
        }
        result
    }

    fn end_cycle_inner(&mut self, cycle_id: u64) -> Result<(), EngineError> {
        let mut cycle = self.cycle(cycle_id).clone();
        let node = cycle.node;
        let round = self.state.next_round.saturating_sub(1);
        let attempts: Vec<AttemptRecord> = self
            .attempts
            .iter()
            .filter(|a| a.cycle == cycle_id)
            .cloned()
            .collect();
        let refs: Vec<&AttemptRecord> = attempts.iter().collect();
        if attempts.is_empty() {
            self.state.empty_cycles += 1;
        }
        let best = cycle
            .best_round
            .and_then(|r| attempts.iter().find(|a| a.round == r));
        let passed = best.is_some();
        if let Some(best) = best {
            let eval = best
                .evaluation
                .as_ref()
                .expect("the best attempt was evaluated");
            let vs_parent = finite(gate::vs_contender(
                &eval.result,
                Role::Parent,
                self.config.seed ^ best.round,
            ));
            let solution = solution_of(best, eval, vs_parent);
            self.tree.attach(node, solution, round);
            self.tree.note(node, gate_note(vs_parent), round);
            self.event(&RunEvent::Attached {
                node,
                round: best.round,
                vs_parent,
            })?;
            let code = self.source_of(&best.source_hash, &best.source_file)?;
            let evidence = CycleEvidence {
                node,
                cycle: &cycle,
                attempts: &refs,
                best: Some(best),
                vs_parent,
                solution_code: Some(&code.text),
            };
            let what = format!("refine the tree after node {node} passed");
            self.observer.progress(&Progress::Proposing { what: &what });
            let script = self.proposer.refine(&ctx!(self), &evidence)?;
            self.apply_edits(script)?;
            if let Some(id) = tree_edit::ensure_continuation(&mut self.tree, node, round) {
                self.event(&RunEvent::FallbackChild { node, child: id })?;
            }
            cycle.outcome = Some(CycleOutcome::Passed);
        } else {
            self.tree.record_failed_cycle(node, round);
            let evidence = CycleEvidence {
                node,
                cycle: &cycle,
                attempts: &refs,
                best: None,
                vs_parent: None,
                solution_code: None,
            };
            let what = format!("decide about node {node}, which passed nothing");
            self.observer.progress(&Progress::Proposing { what: &what });
            let decision = self.proposer.too_hard(&ctx!(self), &evidence)?;
            self.event(&RunEvent::TooHard {
                node,
                decision: format!("{decision:?}"),
            })?;
            let op = match decision {
                TooHard::Downgrade(changes) => EditOp::Update { node, changes },
                TooHard::Split(into) => EditOp::Split { node, into },
                TooHard::Delete => EditOp::Delete { node },
            };
            self.apply_edits(EditScript { ops: vec![op] })?;
            cycle.outcome = Some(CycleOutcome::Failed);
        }
        cycle.ended_round = Some(round);
        *self.cycle_mut(cycle_id) = cycle.clone();
        self.state.current_cycle = None;
        self.commit(&[], &[cycle])?;
        self.observer.progress(&Progress::CycleEnded {
            cycle: cycle_id,
            node,
            passed,
        });
        Ok(())
    }

    /// Apply a proposer's script; a rejected one goes back to the proposer with the exact error,
    /// twice at most, then is dropped. Every outcome is recorded as an event.
    fn apply_edits(&mut self, script: EditScript) -> Result<Vec<NodeId>, EngineError> {
        let mut script = script;
        let round = self.state.next_round.saturating_sub(1);
        for _ in 0..3 {
            if script.ops.is_empty() {
                return Ok(Vec::new());
            }
            match tree_edit::apply(&mut self.tree, &script, round) {
                Ok(ids) => {
                    self.event(&RunEvent::Edit {
                        ops: script.ops.clone(),
                        created: ids.clone(),
                    })?;
                    return Ok(ids);
                }
                Err(e) => {
                    self.event(&RunEvent::EditRejected {
                        ops: script.ops.clone(),
                        error: e.to_string(),
                    })?;
                    match self.proposer.revise_edit(&ctx!(self), &script, &e)? {
                        Some(revised) => script = revised,
                        None => return Ok(Vec::new()),
                    }
                }
            }
        }
        Ok(Vec::new())
    }
}

/// A paired ratio whose numbers are all finite, or none: a ratio that would be infinite (a
/// time of zero) is not a measurement.
fn finite(c: Option<PairedRatio>) -> Option<PairedRatio> {
    c.filter(PairedRatio::is_finite)
}

/// Why an evaluation cannot be believed, if it cannot: a number that is not finite, or a time
/// or speedup that is not positive.
fn implausible(e: &Evaluation) -> Option<String> {
    if let Some(at) = non_finite_path(e) {
        return Some(format!("a number that is not finite (`{at}`)"));
    }
    for (name, s) in [
        ("speedup", &e.speedup),
        ("speedup_vs_parent", &e.speedup_vs_parent),
    ] {
        let Some(s) = s else { continue };
        if s.geomean <= 0.0 {
            return Some(format!("a speedup that is not positive (`{name}.geomean`)"));
        }
        for w in &s.workloads {
            if w.speedup <= 0.0 || w.candidate_ms <= 0.0 || w.other_ms <= 0.0 {
                return Some(format!(
                    "a time or speedup that is not positive (`{name}`, workload `{}`)",
                    w.workload
                ));
            }
        }
    }
    for w in &e.result.workloads {
        for t in &w.timings {
            let s = &t.stats;
            if s.median_ms <= 0.0 || s.samples_ms.iter().any(|x| *x <= 0.0) {
                return Some(format!(
                    "a time that is not positive (workload `{}`, {})",
                    w.name, t.label
                ));
            }
        }
    }
    None
}

/// What a replay must reproduce of a recorded run: how each of its sessions ended, and where
/// the whole record ends.
#[derive(Debug, Clone, PartialEq)]
pub struct ReplayPlan {
    /// Every session that stopped cleanly, in order (sessions ended by a kill or an error left
    /// no end: the next session simply went on from the last commit).
    pub sessions: Vec<SessionEnd>,
    /// Where the recorded run stands: every model call and evaluation it holds.
    pub end: Position,
}

/// The recorded calls a replay follows: all but those of rounds that never finished (a session
/// that ended on a provider error kept them for the resume, which went on from the last commit
/// and reused them; the replay goes that same way).
pub fn replay_path(calls: &[LlmCallRecord]) -> impl Iterator<Item = &LlmCallRecord> {
    calls.iter().filter(|c| !c.unfinished_round)
}

impl ReplayPlan {
    /// The plan of the run recorded in `dir`: its `session_ended` events and final position.
    pub fn of(dir: &Path, state: &EngineState, snap: &Snapshot) -> Result<Self, EngineError> {
        let refuse = |why: String| EngineError::NotReplayable {
            dir: dir.to_owned(),
            why,
        };
        let Some(last) = state.stop_reason else {
            return Err(refuse(
                "it did not stop cleanly (it was killed, failed, or is still running); `ksearch resume` it until it stops, then replay it".into(),
            ));
        };
        let sessions: Vec<SessionEnd> = ksearch_run::events::decode(&snap.events)
            .map_err(refuse)?
            .into_iter()
            .filter_map(|(_, e)| match e {
                RunEvent::SessionEnded(end) => Some(end),
                _ => None,
            })
            .collect();
        match sessions.last() {
            None => {
                return Err(refuse(
                    "it was recorded by an older ksearch, which did not record where its sessions ended".into(),
                ));
            }
            Some(end) if end.reason != last => {
                return Err(refuse(format!(
                    "its last recorded session ended ({}) but the run says it stopped ({})",
                    end.reason.as_str(),
                    last.as_str()
                )));
            }
            Some(_) => {}
        }
        Ok(Self {
            sessions,
            end: Position {
                calls: replay_path(&snap.llm_calls).count() as u64,
                evaluations: snap
                    .attempts
                    .iter()
                    .filter(|a| a.evaluation.is_some())
                    .count() as u64,
                next_round: state.next_round,
                next_cycle: state.next_cycle,
            },
        })
    }

    /// The model calls the cost cap refused, in order: a replay refuses them again.
    pub fn cost_stops(&self) -> Vec<CostStop> {
        self.sessions.iter().filter_map(|s| s.cost).collect()
    }
}

fn evaluated<'a>(
    attempt: Option<&'a AttemptRecord>,
    source: Option<&'a Source>,
) -> Option<Evaluated<'a>> {
    let (attempt, source) = (attempt?, source?);
    Some(Evaluated {
        source,
        attempt,
        evaluation: attempt.evaluation.as_ref()?,
    })
}

/// Speedup of a cycle's best attempt so far.
fn c_best_speedup(attempts: &[AttemptRecord], cycle: &CycleRecord) -> Option<f64> {
    let r = cycle.best_round?;
    attempts.iter().find(|a| a.round == r)?.speedup()
}

fn solution_of(
    best: &AttemptRecord,
    eval: &Evaluation,
    vs_parent: Option<PairedRatio>,
) -> Solution {
    Solution {
        round: best.round,
        source_hash: best.source_hash.clone(),
        source_file: best.source_file.clone(),
        speedup: eval.speedup.as_ref().map(|s| s.geomean),
        speedup_vs_parent: vs_parent.map(|c| c.ratio),
        vs_parent_interval: vs_parent.map(|c| c.interval),
        gate: vs_parent.map_or(Gate::Unmeasured, |c| c.verdict),
        latency_ms: eval.result.medians(Role::Candidate),
        baseline_ms: eval.result.medians(Role::Baseline),
    }
}

fn gate_note(c: Option<PairedRatio>) -> String {
    match c {
        Some(c) => format!(
            "measured {:.2}× the parent (95% interval {:.2}–{:.2}): {}",
            c.ratio,
            c.interval.0,
            c.interval.1,
            match c.verdict {
                Gate::Better => "better than the parent",
                Gate::Worse => "worse than the parent",
                Gate::Same => "not distinguishable from the parent",
                Gate::Unmeasured => "unmeasured",
            }
        ),
        None => "not timed against the parent".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ksearch_core::protocol::{ContenderTiming, WorkloadReport};
    use ksearch_core::score::{Speedup, WorkloadSpeedup};
    use ksearch_core::stats::TimingStats;

    fn evaluation(candidate_ms: f64, baseline_ms: f64) -> Evaluation {
        let timing = |role, ms: f64| ContenderTiming {
            role,
            label: format!("{role:?}"),
            stats: TimingStats::from_samples(vec![ms; 5], 1),
        };
        Evaluation {
            result: EvaluateResult {
                id: 1,
                status: Status::Passed,
                message: String::new(),
                compile: None,
                workloads: vec![WorkloadReport {
                    name: "small".into(),
                    status: Status::Passed,
                    message: None,
                    errors: None,
                    timings: vec![
                        timing(Role::Candidate, candidate_ms),
                        timing(Role::Baseline, baseline_ms),
                    ],
                }],
                phases: Phases::default(),
                output: CapturedOutput::default(),
                sandbox: None,
                described: Vec::new(),
            },
            speedup: Some(Speedup {
                geomean: baseline_ms / candidate_ms,
                workloads: vec![WorkloadSpeedup {
                    workload: "small".into(),
                    candidate_ms,
                    other_ms: baseline_ms,
                    speedup: baseline_ms / candidate_ms,
                }],
            }),
            speedup_vs_parent: None,
            baseline: "reference".into(),
            wall_s: 1.0,
            load: None,
            caveats: Vec::new(),
        }
    }

    #[test]
    fn plausible_evaluations_are_admitted_and_impossible_ones_named() {
        assert_eq!(implausible(&evaluation(0.5, 1.0)), None);
        // A time of zero: an infinite speedup.
        let e = implausible(&evaluation(0.0, 1.0)).unwrap();
        assert!(
            e.contains("not finite") && e.contains("speedup.geomean"),
            "{e}"
        );
        let mut nan = evaluation(0.5, 1.0);
        nan.result.workloads[0].timings[1].stats.p90_ms = f64::NAN;
        let e = implausible(&nan).unwrap();
        assert!(
            e.contains("result.workloads[0].timings[1].stats.p90_ms"),
            "{e}"
        );
        let mut negative = evaluation(0.5, 1.0);
        negative.result.workloads[0].timings[0].stats.samples_ms[2] = -0.1;
        assert!(implausible(&negative).unwrap().contains("not positive"));
        let mut zero_speedup = evaluation(0.5, 1.0);
        zero_speedup.speedup.as_mut().unwrap().geomean = 0.0;
        assert!(implausible(&zero_speedup).unwrap().contains("not positive"));
    }

    #[test]
    fn paired_ratios_that_are_not_finite_are_dropped() {
        let c = |ratio, lo, hi| {
            Some(PairedRatio {
                ratio,
                interval: (lo, hi),
                verdict: Gate::Better,
            })
        };
        assert!(finite(c(1.5, 1.2, 1.8)).is_some());
        assert!(finite(c(f64::INFINITY, 1.2, 1.8)).is_none());
        assert!(finite(c(1.5, f64::NAN, 1.8)).is_none());
        assert!(finite(c(1.5, 1.2, f64::INFINITY)).is_none());
        assert!(finite(c(0.0, 0.0, 0.0)).is_none());
        assert!(finite(None).is_none());
    }

    fn state(stop: Option<StopReason>) -> EngineState {
        EngineState {
            next_round: 4,
            next_cycle: 2,
            current_cycle: None,
            next_node: 5,
            initialized: true,
            round_budget: Some(3),
            wall_s: 1.0,
            eval_s: 0.5,
            sessions: 2,
            stop_reason: stop,
            empty_cycles: 0,
            evaluating: None,
            stop_detail: None,
        }
    }

    fn end(session: u32, reason: StopReason, calls: u64) -> SessionEnd {
        SessionEnd {
            session,
            reason,
            at: Position {
                calls,
                evaluations: 3,
                next_round: 3,
                next_cycle: 2,
            },
            abandoned_round: None,
            cost: (reason == StopReason::Cost).then_some(CostStop {
                call: calls,
                spent_usd: 0.01,
                next_usd: 0.005,
                cap_usd: 0.012,
            }),
        }
    }

    fn snapshot(ends: &[SessionEnd]) -> Snapshot {
        Snapshot {
            nodes: Vec::new(),
            cycles: Vec::new(),
            attempts: Vec::new(),
            events: ends
                .iter()
                .map(|e| {
                    let (kind, data) = RunEvent::SessionEnded(e.clone()).stored();
                    (3, kind, data)
                })
                .chain([(
                    3,
                    "edit".to_owned(),
                    serde_json::json!({"ops": [], "created": []}),
                )])
                .collect(),
            llm_calls: Vec::new(),
        }
    }

    #[test]
    fn a_replay_plan_is_every_recorded_session_end() {
        let dir = Path::new("/runs/x");
        let ends = [
            end(1, StopReason::Cost, 5),
            end(2, StopReason::Iterations, 9),
        ];
        let plan =
            ReplayPlan::of(dir, &state(Some(StopReason::Iterations)), &snapshot(&ends)).unwrap();
        assert_eq!(plan.sessions, ends);
        assert_eq!(plan.cost_stops().len(), 1);
        assert_eq!(plan.cost_stops()[0].call, 5);
        assert_eq!(
            plan.end,
            Position {
                calls: 0,
                evaluations: 0,
                next_round: 4,
                next_cycle: 2
            }
        );
    }

    #[test]
    fn a_run_that_did_not_stop_cleanly_or_recorded_no_sessions_is_not_replayed() {
        let dir = Path::new("/runs/x");
        let ends = [end(1, StopReason::Iterations, 9)];
        let e = ReplayPlan::of(dir, &state(None), &snapshot(&ends)).unwrap_err();
        assert!(e.to_string().contains("did not stop cleanly"), "{e}");
        let e = ReplayPlan::of(dir, &state(Some(StopReason::Time)), &snapshot(&[])).unwrap_err();
        assert!(e.to_string().contains("older ksearch"), "{e}");
        let e = ReplayPlan::of(dir, &state(Some(StopReason::Time)), &snapshot(&ends)).unwrap_err();
        assert!(e.to_string().contains("stopped (time)"), "{e}");
    }
}

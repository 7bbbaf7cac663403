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
//!
//! Here: the engine, its creation and resumption, and its commits to the store. `session` holds
//! the loop of one session, `cycle` a cycle's steps (1 to 5), `evaluation` how a round is
//! evaluated and what is admitted of it, and `replay` the replay of a recorded run.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use ksearch_core::gate::{self, PairedRatio};
use ksearch_core::protocol::{CapturedOutput, EvaluateResult, Phases, Status};
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

mod concurrent;
mod cycle;
mod evaluation;
mod replay;
mod session;

pub use replay::{ReplayPlan, replay_path};

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
    /// This session said that its evaluations' toolchain is not the seed's (once is enough).
    told_other_toolchain: bool,
    /// Evaluations in flight through the executor, by round (several at once).
    flights: std::collections::BTreeMap<u64, concurrent::Flight>,
    /// Since when at least one of them has been in flight (the time counted as evaluating).
    busy_since: Option<Instant>,
    /// The cycle being ended while others are open: its own node's edits are not refused.
    closing: Option<u64>,
    /// This session runs several cycles at once (through the executor).
    several: bool,
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
            evaluating_also: Vec::new(),
            stop_detail: None,
            refine_owed: None,
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
        // Several were in flight at once (`--jobs`): each is counted the same way.
        for mut lost in std::mem::take(&mut engine.state.evaluating_also) {
            lost.lost += 1;
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
            engine.state.evaluating_also.push(lost);
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
            told_other_toolchain: false,
            flights: std::collections::BTreeMap::new(),
            busy_since: None,
            closing: None,
            several: false,
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
        self.tree = Tree::new(Vec::new(), Solution::of(&seed, &evaluation, None));
        // The seed's measurement is kept before the model is asked: a resume after a pause or
        // an error there asks the same question (its prompt quotes these latencies) instead of
        // measuring again.
        self.commit(std::slice::from_ref(&seed), &[])?;
        // A run with no rounds to go (`--iterations 0`) asks for no world model: the first
        // session with rounds (a resume with `--iterations N`) does.
        if self
            .state
            .round_budget
            .is_some_and(|b| self.rounds_done() >= b)
        {
            return Ok(());
        }
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

    /// The tree as the viewers show it: with the best attempt so far of a cycle under way on
    /// its node ([`ksearch_run::with_open_cycles`]).
    fn live_tree(&self) -> Tree {
        ksearch_run::with_open_cycles(&self.tree, &self.attempts, &self.cycles, self.config.seed)
    }

    pub fn summary(&self) -> RunSummary {
        summarize(
            self.store.dir(),
            &self.task,
            &self.config,
            &self.state,
            &self.live_tree(),
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

    /// The best executable node to start a cycle on (as [`selection::select`] picks), among
    /// those no open cycle works on.
    fn selectable(&self) -> Option<NodeId> {
        self.free_ranking()
            .into_iter()
            .find(|(id, _)| {
                self.tree
                    .get(*id)
                    .is_some_and(|n| n.failed_cycles < MAX_FAILED_CYCLES)
            })
            .map(|(id, _)| id)
    }
}

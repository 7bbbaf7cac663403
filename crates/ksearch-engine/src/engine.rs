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

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use ksearch_core::gate::{self, Comparison};
use ksearch_core::protocol::{Role, Status};
use ksearch_core::record::{
    AttemptKind, AttemptRecord, CycleOutcome, CycleRecord, Evaluation, LlmCallRecord,
};
use ksearch_core::selection;
use ksearch_core::task::{Source, Task};
use ksearch_core::tree::{Gate, NodeId, ROOT, Solution, Tree};
use ksearch_core::tree_edit::{self, EditOp, EditScript};
use ksearch_eval::{Compare, EvalError, Evaluator};
use ksearch_store::{RunStore, Snapshot, StoreError};
use serde::Serialize;
use thiserror::Error;

use crate::observer::{Observer, Progress};
use crate::proposer::{
    CycleEvidence, Evaluated, GenerateRequest, ProposeContext, ProposeError, Proposer, TooHard,
};
use crate::run_config::{EngineState, RunConfig, StopReason};
use crate::summary::{RunSummary, summarize};

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

const META_TASK: &str = "task";
const META_CONFIG: &str = "config";
/// Cycles that pass nothing before a node is no longer selected.
pub const MAX_FAILED_CYCLES: u32 = 3;
/// Cycles in a row that made no attempt at all before the search counts as exhausted.
const MAX_EMPTY_CYCLES: u32 = 25;

#[derive(Debug, Error)]
pub enum EngineError {
    #[error(transparent)]
    Store(#[from] StoreError),
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
}

/// Budgets of one session of a run.
#[derive(Debug, Clone, Copy, Default)]
pub struct Budget {
    /// Total rounds the run may reach (rounds already done count).
    pub rounds: Option<u64>,
    /// Stop starting attempts after this instant.
    pub until: Option<Instant>,
}

/// A run read back from its directory.
#[derive(Debug)]
pub struct StoredRun {
    pub store: RunStore,
    pub task: Task,
    pub config: RunConfig,
}

/// Open a run directory and read what it is.
pub fn open_run(dir: &Path) -> Result<StoredRun, EngineError> {
    let store = RunStore::open(dir)?;
    let incomplete = |what: &str| EngineError::Incomplete {
        dir: dir.to_owned(),
        what: what.to_owned(),
    };
    let task = store
        .meta::<Task>(META_TASK)?
        .ok_or_else(|| incomplete("no task recorded"))?;
    let config = store
        .meta::<RunConfig>(META_CONFIG)?
        .ok_or_else(|| incomplete("no configuration recorded"))?;
    Ok(StoredRun {
        store,
        task,
        config,
    })
}

/// Everything a finished or running run has recorded, read back without an engine.
#[derive(Debug)]
pub struct RunRecords {
    pub run: StoredRun,
    pub state: EngineState,
    pub tree: Tree,
    pub summary: RunSummary,
    /// Every attempt in round order, the seed (round 0) first.
    pub attempts: Vec<AttemptRecord>,
    pub cycles: Vec<CycleRecord>,
    /// `(round, kind, data)` in the order written.
    pub events: Vec<(u64, String, serde_json::Value)>,
    pub llm_calls: Vec<LlmCallRecord>,
}

/// Read a finished or running run whole, for display.
pub fn read_run(dir: &Path) -> Result<RunRecords, EngineError> {
    let run = open_run(dir)?;
    let snap = run.store.snapshot()?;
    let state: EngineState = run.store.state()?.ok_or_else(|| EngineError::Incomplete {
        dir: dir.to_owned(),
        what: "no engine state".into(),
    })?;
    if snap.nodes.is_empty() {
        return Err(EngineError::Incomplete {
            dir: dir.to_owned(),
            what: "the seed has not been measured yet".into(),
        });
    }
    let tree = Tree::from_nodes(snap.nodes, state.next_node);
    let summary = summarize(
        dir,
        &run.task,
        &run.config,
        &state,
        &tree,
        &snap.attempts,
        &snap.cycles,
        &snap.llm_calls,
    );
    Ok(RunRecords {
        run,
        state,
        tree,
        summary,
        attempts: snap.attempts,
        cycles: snap.cycles,
        events: snap.events,
        llm_calls: snap.llm_calls,
    })
}

/// A run's summary, tree and attempts, for display.
pub fn read_summary(dir: &Path) -> Result<(RunSummary, Tree, Vec<AttemptRecord>), EngineError> {
    let r = read_run(dir)?;
    Ok((r.summary, r.tree, r.attempts))
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
    empty_cycles: u32,
    /// Events waiting for the next commit.
    events: Vec<(String, serde_json::Value)>,
    /// The journal of model calls, all sessions.
    llm_calls: Vec<LlmCallRecord>,
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
    /// Start a new run in `dir`: record it, measure the seed, build the initial world model.
    pub fn create(
        dir: &Path,
        task: Task,
        config: RunConfig,
        parts: Parts<'e>,
    ) -> Result<Self, EngineError> {
        let mut store = RunStore::create(dir)?;
        let state = EngineState {
            next_round: 1,
            next_cycle: 1,
            current_cycle: None,
            next_node: 1,
            initialized: false,
            round_budget: None,
            wall_s: 0.0,
            eval_s: 0.0,
            sessions: 1,
            stop_reason: None,
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
            tx.set_meta(META_TASK, &task)?;
            tx.set_meta(META_CONFIG, &config)?;
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
        Self::assemble(store, task, config, state, snap, parts)
    }

    /// Continue a stored run.
    pub fn resume(run: StoredRun, parts: Parts<'e>) -> Result<Self, EngineError> {
        let StoredRun {
            store,
            task,
            config,
        } = run;
        let snap = store.snapshot()?;
        let mut state: EngineState = store.state()?.ok_or_else(|| EngineError::Incomplete {
            dir: store.dir().to_owned(),
            what: "no engine state".into(),
        })?;
        state.sessions += 1;
        state.stop_reason = None;
        Self::assemble(store, task, config, state, snap, parts)
    }

    fn assemble(
        store: RunStore,
        task: Task,
        config: RunConfig,
        state: EngineState,
        snap: Snapshot,
        mut parts: Parts<'e>,
    ) -> Result<Self, EngineError> {
        // Answers already paid for are reused rather than asked again.
        parts.proposer.restore_records(&snap.llm_calls);
        let mut engine = Self {
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
            empty_cycles: 0,
            events: Vec::new(),
        };
        if !engine.state.initialized {
            engine.initialize()?;
        }
        Ok(engine)
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
                match self.timed_evaluate(&source, Compare::default()) {
                    Err(EngineError::Eval(EvalError::Cancelled)) => {
                        return Err(EngineError::InterruptedDuringSetup);
                    }
                    other => other?,
                }
            }
        };
        if evaluation.result.status != Status::Passed {
            return Err(EngineError::SeedFailed {
                status: evaluation.result.status,
                message: evaluation.result.message.clone(),
            });
        }
        let seed = AttemptRecord {
            evaluation: Some(evaluation.clone()),
            ..seed
        };
        self.replace_attempt(seed.clone());
        let solution = Solution {
            round: 0,
            source_hash: seed.source_hash.clone(),
            source_file: seed.source_file.clone(),
            speedup: evaluation.speedup.as_ref().map(|s| s.geomean),
            speedup_vs_parent: None,
            vs_parent_interval: None,
            gate: Gate::Unmeasured,
            latency_ms: latencies(&evaluation),
        };
        self.tree = Tree::new(Vec::new(), solution);
        let model = self.proposer.init_world_model(&ctx!(self))?;
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
        self.event("world_model", &serde_json::json!({ "actions": ids }));
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

    fn event<T: Serialize>(&mut self, kind: &str, data: &T) {
        self.events.push((
            kind.to_owned(),
            serde_json::to_value(data).expect("events serialize"),
        ));
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
        let events = std::mem::take(&mut self.events);
        let calls = self.proposer.take_records();
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

    fn timed_evaluate(
        &mut self,
        source: &Source,
        compare: Compare<'_>,
    ) -> Result<Evaluation, EngineError> {
        let started = Instant::now();
        let result =
            self.evaluator
                .evaluate(&self.task, source, compare, &self.config.eval.options());
        self.state.eval_s += started.elapsed().as_secs_f64();
        Ok(result?)
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

    /// Run until a budget is spent, the proposer runs dry, or `stop` is set.
    pub fn run(&mut self, budget: Budget) -> Result<RunSummary, EngineError> {
        if budget.rounds.is_some() {
            self.state.round_budget = budget.rounds;
        }
        let reason = loop {
            if self.stop.load(Ordering::Relaxed) {
                break StopReason::Interrupted;
            }
            if self
                .state
                .round_budget
                .is_some_and(|b| self.rounds_done() >= b)
            {
                break StopReason::Iterations;
            }
            if budget.until.is_some_and(|t| Instant::now() >= t) {
                break StopReason::Time;
            }
            match self.step() {
                Ok(Some(reason)) => break reason,
                Ok(None) => {}
                Err(EngineError::Propose(ProposeError::Budget {
                    spent_usd,
                    next_usd,
                    cap_usd,
                })) => {
                    self.event("cost_cap", &serde_json::json!({ "spent_usd": spent_usd, "next_usd": next_usd, "cap_usd": cap_usd }));
                    break StopReason::Cost;
                }
                Err(e) => return Err(e),
            }
        };
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
            self.end_cycle(c)?;
        }
        self.state.stop_reason = Some(reason);
        self.commit(&[], &[])?;
        self.observer.progress(&Progress::Stopped { reason });
        Ok(self.summary())
    }

    /// One step: start a cycle, or make and evaluate one attempt, or end a cycle.
    fn step(&mut self) -> Result<Option<StopReason>, EngineError> {
        let cycle_id = match self.state.current_cycle {
            Some(c) => c,
            None => match self.start_cycle()? {
                Some(c) => c,
                None => return Ok(Some(StopReason::Exhausted)),
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
        match self.evaluate_attempt(attempt, &cycle) {
            Err(EngineError::Eval(EvalError::Cancelled)) => {
                return Ok(Some(StopReason::Interrupted));
            }
            other => other?,
        }
        self.empty_cycles = 0;
        let cycle = self.cycle(cycle_id).clone();
        if cycle.stagnation >= self.config.window
            || cycle.attempts >= self.config.max_cycle_attempts
        {
            self.end_cycle(cycle_id)?;
        }
        Ok(None)
    }

    fn exhausted(&self) -> Option<StopReason> {
        (self.empty_cycles >= MAX_EMPTY_CYCLES).then_some(StopReason::Exhausted)
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
        selection::ranked(&self.tree)
            .into_iter()
            .find(|(id, _)| {
                self.tree
                    .get(*id)
                    .is_some_and(|n| n.failed_cycles < MAX_FAILED_CYCLES)
            })
            .map(|(id, _)| id)
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
        self.event("cycle_started", &serde_json::json!({ "cycle": cycle.id, "node": node, "ranking": selection::ranked(&self.tree) }));
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
        let evaluation = self.timed_evaluate(
            &source,
            Compare {
                parent: Some(&parent),
                incumbent: incumbent.as_ref(),
            },
        )?;
        let passed = evaluation.result.status == Status::Passed;
        let vs_incumbent = incumbent.as_ref().and_then(|_| {
            gate::compare_in(
                &evaluation.result,
                Role::Incumbent,
                self.config.seed ^ attempt.round,
            )
        });
        let improved = passed
            && (incumbent.is_none() || vs_incumbent.is_some_and(|c| c.verdict == Gate::Better));
        let status = evaluation.result.status;
        let speedup = evaluation.speedup.as_ref().map(|s| s.geomean);
        if let Some(c) = vs_incumbent {
            self.event(
                "vs_incumbent",
                &serde_json::json!({ "round": attempt.round, "comparison": c }),
            );
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
        let result = self.end_cycle_inner(cycle_id);
        if result.is_err() {
            self.tree = tree;
            self.events.truncate(events);
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
            self.empty_cycles += 1;
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
            let vs_parent =
                gate::compare_in(&eval.result, Role::Parent, self.config.seed ^ best.round);
            let solution = solution_of(best, eval, vs_parent);
            self.tree.attach(node, solution, round);
            self.tree.note(node, gate_note(vs_parent), round);
            self.event(
                "attached",
                &serde_json::json!({ "node": node, "round": best.round, "vs_parent": vs_parent }),
            );
            let code = self.source_of(&best.source_hash, &best.source_file)?;
            let evidence = CycleEvidence {
                node,
                cycle: &cycle,
                attempts: &refs,
                best: Some(best),
                vs_parent,
                solution_code: Some(&code.text),
            };
            let script = self.proposer.refine(&ctx!(self), &evidence)?;
            self.apply_edits(script)?;
            if let Some(id) = tree_edit::ensure_continuation(&mut self.tree, node, round) {
                self.event(
                    "fallback_child",
                    &serde_json::json!({ "node": node, "child": id }),
                );
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
            let decision = self.proposer.too_hard(&ctx!(self), &evidence)?;
            self.event(
                "too_hard",
                &serde_json::json!({ "node": node, "decision": format!("{decision:?}") }),
            );
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
                    self.event(
                        "edit",
                        &serde_json::json!({ "ops": script.ops, "created": ids }),
                    );
                    return Ok(ids);
                }
                Err(e) => {
                    self.event(
                        "edit_rejected",
                        &serde_json::json!({ "ops": script.ops, "error": e.to_string() }),
                    );
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

fn latencies(e: &Evaluation) -> BTreeMap<String, f64> {
    e.result
        .workloads
        .iter()
        .filter_map(|w| Some((w.name.clone(), w.timing(Role::Candidate)?.median_ms)))
        .collect()
}

fn solution_of(best: &AttemptRecord, eval: &Evaluation, vs_parent: Option<Comparison>) -> Solution {
    Solution {
        round: best.round,
        source_hash: best.source_hash.clone(),
        source_file: best.source_file.clone(),
        speedup: eval.speedup.as_ref().map(|s| s.geomean),
        speedup_vs_parent: vs_parent.map(|c| c.ratio),
        vs_parent_interval: vs_parent.map(|c| c.interval),
        gate: vs_parent.map_or(Gate::Unmeasured, |c| c.verdict),
        latency_ms: latencies(eval),
    }
}

fn gate_note(c: Option<Comparison>) -> String {
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

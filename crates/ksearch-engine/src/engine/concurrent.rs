//! Several evaluations in flight at once, through the evaluator's executor (`--jobs N` on this
//! machine, or `--executor slurm`). The engine thread stays the only writer of the run: it
//! generates attempts (the proposer's calls overlap the evaluations in flight), hands each to
//! the executor, and records each evaluation as it finishes, in the order they finish.
//!
//! Each cycle has at most one attempt in flight (its next attempt depends on that one's
//! evaluation); several cycles, on different open actions, go on at once. A slot that comes
//! free continues the oldest open cycle that has nothing in flight, else starts a cycle on the
//! best action no open cycle works on; when every executable action is taken, it waits for an
//! evaluation to finish. An edit that would split or delete the node of another open cycle is
//! refused and sent back to the proposer with the reason.
//!
//! The order the evaluations finished in is recorded (`evaluation_finished` events, with the
//! slot and the place that ran each and when), and how many ran at once (`SessionEnd::jobs`):
//! given the same results in the same order the engine takes the same steps, so a replay that
//! finishes the recorded evaluations in the recorded order reaches the same tree.
//!
//! A session that stops for a budget lets the evaluations in flight finish and records them;
//! Ctrl-C abandons them (they run again on resume); a proposer's failure records those that
//! finish, then stops.

use std::collections::BTreeSet;
use std::sync::Arc;

use ksearch_core::tree_edit::EditError;
use ksearch_eval::executor::{Finished, Job};

use super::*;

/// An attempt whose evaluation is in flight.
#[derive(Debug, Clone)]
pub(super) struct Flight {
    attempt: AttemptRecord,
    /// Timed against its cycle's best so far.
    incumbent: bool,
    /// Where its wall-clock limit comes from, for a timeout's message.
    limit_why: String,
}

/// What one try to start work came to.
enum Advance {
    /// An evaluation was started.
    Started,
    /// Something else changed (a cycle started or ended, an owed refine was made, an attempt
    /// recorded without an evaluation): look again.
    Again,
    /// Nothing can start until an evaluation in flight finishes.
    Wait,
    Stop(StopReason),
}

impl<'e> Engine<'e> {
    /// Whether this session runs its evaluations through an executor: a live run whose
    /// evaluator has one, or the replay of a session that did.
    pub(super) fn concurrent(&mut self) -> bool {
        match &self.target {
            Some(t) => t.jobs.is_some(),
            None => self.evaluator.executor().is_some(),
        }
    }

    /// The most evaluations in flight at once this session: the executor's slots, or the
    /// recorded session's.
    fn jobs(&mut self) -> usize {
        let recorded = self.target.as_ref().and_then(|t| t.jobs);
        match recorded {
            Some(j) => j as usize,
            None => self.evaluator.executor().map_or(1, |x| x.slots()),
        }
        .max(1)
    }

    /// One session with up to [`Self::jobs`] evaluations in flight: loop until a stop, then
    /// record how it ended (as [`Self::session`] does for one at a time).
    pub(super) fn concurrent_session(&mut self) -> Result<SessionEnd, EngineError> {
        let jobs = self.jobs();
        self.several = true;
        let ended = self.concurrent_session_inner(jobs);
        self.several = false;
        ended
    }

    fn concurrent_session_inner(&mut self, jobs: usize) -> Result<SessionEnd, EngineError> {
        let stopped = self.concurrent_loop(jobs);
        let at = self.position();
        let (mut cost, mut unusable, mut abandoned) = (None, None, None);
        let reason = match stopped {
            Ok(StopReason::Interrupted) => {
                abandoned = self.abandon_flights();
                StopReason::Interrupted
            }
            // A budget, or nothing left: what is in flight finishes and counts.
            Ok(reason) => match self.drain(true) {
                Ok(()) => reason,
                Err(e) => self.clean_stop(e, &mut cost, &mut unusable)?,
            },
            Err(e) => self.clean_stop(e, &mut cost, &mut unusable)?,
        };
        if matches!(reason, StopReason::Iterations | StopReason::Time) {
            self.close_for_budget()?;
        }
        let end = SessionEnd {
            session: self.state.sessions,
            reason,
            at,
            abandoned_round: abandoned,
            cost,
            jobs: Some(u32::try_from(jobs).unwrap_or(u32::MAX)),
        };
        self.state.stop_reason = Some(reason);
        self.state.stop_detail = unusable;
        self.state.evaluating = None;
        self.state.evaluating_also.clear();
        self.event(&RunEvent::SessionEnded(end.clone()))?;
        self.commit(&[], &[])?;
        self.observer.progress(&Progress::Stopped { reason });
        Ok(end)
    }

    /// A failure that ends the session cleanly (the cost cap, a model that gives nothing
    /// usable) is recorded as such once the evaluations in flight are; any other is returned,
    /// after keeping the model calls already paid for and what finishes of the evaluations in
    /// flight (or abandoning them, when the run itself failed).
    fn clean_stop(
        &mut self,
        e: EngineError,
        cost: &mut Option<CostStop>,
        unusable: &mut Option<String>,
    ) -> Result<StopReason, EngineError> {
        match e {
            EngineError::Propose(ProposeError::Budget {
                spent_usd,
                next_usd,
                cap_usd,
            }) => {
                *cost = Some(self.cost_stop(spent_usd, next_usd, cap_usd)?);
                self.drain_or_abandon()?;
                Ok(StopReason::Cost)
            }
            EngineError::Propose(e @ ProposeError::Unusable { .. }) => {
                let detail = e.to_string();
                self.event(&RunEvent::UnusableModel {
                    detail: detail.clone(),
                })?;
                *unusable = Some(detail);
                self.drain_or_abandon()?;
                Ok(StopReason::UnusableModel)
            }
            e => {
                // As for one at a time: the calls this step already paid for are kept, marked
                // as a round's that never finished.
                self.save_calls()?;
                if matches!(e, EngineError::Propose(_)) {
                    // A pause for a manual model's answer, a provider's error: what is being
                    // evaluated is worth keeping.
                    let _ = self.drain(false);
                }
                self.abandon_flights();
                let _ = self.commit(&[], &[]);
                Err(e)
            }
        }
    }

    /// Record what finishes of the evaluations in flight without asking the proposer anything
    /// more; if that fails, abandon the rest.
    fn drain_or_abandon(&mut self) -> Result<(), EngineError> {
        let drained = self.drain(false);
        self.abandon_flights();
        drained
    }

    fn concurrent_loop(&mut self, jobs: usize) -> Result<StopReason, EngineError> {
        loop {
            if self.stop.load(Ordering::Relaxed) {
                return Ok(StopReason::Interrupted);
            }
            if let Some(reason) = self.stops_here()? {
                return Ok(reason);
            }
            if self.flights.len() < jobs {
                match self.advance()? {
                    Advance::Started | Advance::Again => continue,
                    Advance::Stop(reason) => return Ok(reason),
                    Advance::Wait => {}
                }
            }
            if self.flights.is_empty() {
                // Nothing in flight and nothing to start.
                return Ok(StopReason::Exhausted);
            }
            match self.next_finished() {
                Some(f) => self.complete(f, true)?,
                None if self.stop.load(Ordering::Relaxed) => {}
                None => return Err(self.executor_gone()),
            }
        }
    }

    /// The executor gave nothing back though evaluations are in flight.
    fn executor_gone(&self) -> EngineError {
        match &self.target {
            Some(_) => EngineError::Diverged {
                session: self.state.sessions,
                detail: format!(
                    "rounds {:?} are being evaluated, and the record has no more evaluations finishing",
                    self.flights.keys().collect::<Vec<_>>()
                ),
            },
            None => EvalError::Worker {
                message: "the executor stopped with evaluations in flight".into(),
            }
            .into(),
        }
    }

    /// At the loop's top: whether a budget (or, replaying, the recorded session) stops here.
    /// The round budget counts the evaluations in flight.
    fn stops_here(&mut self) -> Result<Option<StopReason>, EngineError> {
        if let Some(t) = self.target.clone() {
            let at = self.position();
            if at == t.at
                && matches!(
                    t.reason,
                    StopReason::Iterations | StopReason::Time | StopReason::Interrupted
                )
            {
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
            return Ok(None);
        }
        let started = self.rounds_done() + self.flights.len() as u64;
        if self.state.round_budget.is_some_and(|b| started >= b) {
            return Ok(Some(StopReason::Iterations));
        }
        if self.until.is_some_and(|t| Instant::now() >= t) {
            return Ok(Some(StopReason::Time));
        }
        Ok(None)
    }

    /// Open cycles (started, not ended), oldest first.
    fn open_cycles(&self) -> Vec<u64> {
        self.cycles
            .iter()
            .filter(|c| c.outcome.is_none() && c.ended_round.is_none())
            .map(|c| c.id)
            .collect()
    }

    /// Start what can be started now: the owed refine, the next attempt of an open cycle with
    /// nothing in flight, or a new cycle.
    fn advance(&mut self) -> Result<Advance, EngineError> {
        if let Some(c) = self.state.refine_owed {
            self.pay_refine(c)?;
            return Ok(Advance::Again);
        }
        let busy: BTreeSet<u64> = self.flights.values().map(|f| f.attempt.cycle).collect();
        // An idle cycle whose attempt has no evaluation yet (one lost in flight when a run was
        // killed) goes first: that attempt is already counted in the rounds, and new attempts of
        // another cycle could spend the round budget before it is evaluated.
        let idle: Vec<u64> = self
            .open_cycles()
            .into_iter()
            .filter(|c| !busy.contains(c))
            .collect();
        let pending = idle.iter().copied().find(|&c| {
            self.attempts
                .iter()
                .any(|a| a.cycle == c && a.evaluation.is_none())
        });
        if let Some(cycle_id) = pending.or_else(|| idle.first().copied()) {
            return self.continue_cycle(cycle_id);
        }
        if self.selectable().is_none() && !self.flights.is_empty() {
            // Every action that could be worked on is: new actions are asked for only when
            // nothing is in flight, as one at a time would.
            return Ok(Advance::Wait);
        }
        match self.start_cycle()? {
            Some(_) => Ok(Advance::Again),
            None if self.flights.is_empty() => Ok(Advance::Stop(StopReason::Exhausted)),
            None => Ok(Advance::Wait),
        }
    }

    /// The next step of an open cycle with nothing in flight: its pending attempt, its end, or
    /// its next attempt (as [`Self::step`] does for the current cycle).
    fn continue_cycle(&mut self, cycle_id: u64) -> Result<Advance, EngineError> {
        let cycle = self.cycle(cycle_id).clone();
        let pending = self
            .attempts
            .iter()
            .find(|a| a.cycle == cycle_id && a.evaluation.is_none())
            .cloned();
        if let Some(a) = pending {
            return self.dispatch(a);
        }
        if self.cycle_spent(&cycle) {
            self.close_cycle(cycle_id)?;
            return Ok(self.exhausted_advance());
        }
        let kind = cycle::next_kind(&cycle);
        let what = format!("{} node {}", kind.as_str(), cycle.node);
        self.observer.progress(&Progress::Proposing { what: &what });
        match self.generate(&cycle, kind)? {
            Some(a) => self.dispatch(a),
            None => {
                self.close_cycle(cycle_id)?;
                Ok(self.exhausted_advance())
            }
        }
    }

    fn exhausted_advance(&self) -> Advance {
        match self.exhausted() {
            Step::Stop(reason) => Advance::Stop(reason),
            _ => Advance::Again,
        }
    }

    /// End a cycle among others: its node's edits are its own (see [`Self::busy_edit`]), and
    /// `current_cycle` names an open cycle while any is.
    fn close_cycle(&mut self, cycle_id: u64) -> Result<(), EngineError> {
        self.closing = Some(cycle_id);
        let ended = self.end_cycle(cycle_id);
        self.closing = None;
        self.state.current_cycle = self.open_cycles().first().copied();
        ended
    }

    /// A budget ended the session: the oldest open cycle with a pass and nothing in flight is
    /// closed as one at a time closes its current cycle (attached, its refine owed to the next
    /// session); any other stays open, shown with its best attempt so far, and goes on in the
    /// next session.
    fn close_for_budget(&mut self) -> Result<(), EngineError> {
        if self.state.refine_owed.is_some() {
            return Ok(());
        }
        let done = self.open_cycles().into_iter().find(|&c| {
            self.cycle(c).best_round.is_some()
                && !self
                    .attempts
                    .iter()
                    .any(|a| a.cycle == c && a.evaluation.is_none())
        });
        if let Some(c) = done {
            self.closing = Some(c);
            let ended = self.end_cycle_for_budget(c);
            self.closing = None;
            self.state.current_cycle = self.open_cycles().first().copied();
            ended?;
        }
        Ok(())
    }

    /// The record of the evaluation of `round` in flight, if the state has one (a resumed run
    /// finds those the orchestrator died during).
    fn in_flight_mark(&self, round: u64) -> Option<InFlight> {
        self.state
            .evaluating
            .iter()
            .chain(&self.state.evaluating_also)
            .find(|f| f.round == round)
            .copied()
    }

    fn mark(&mut self, f: InFlight) {
        self.unmark(f.round);
        if self.state.evaluating.is_none() {
            self.state.evaluating = Some(f);
        } else {
            self.state.evaluating_also.push(f);
        }
    }

    fn unmark(&mut self, round: u64) {
        if self.state.evaluating.is_some_and(|f| f.round == round) {
            self.state.evaluating = if self.state.evaluating_also.is_empty() {
                None
            } else {
                Some(self.state.evaluating_also.remove(0))
            };
        } else {
            self.state.evaluating_also.retain(|f| f.round != round);
        }
    }

    /// Hand `attempt`'s evaluation to the executor, recording first that it is in flight (an
    /// evaluation the orchestrator has died during too often is recorded as crashed instead).
    fn dispatch(&mut self, attempt: AttemptRecord) -> Result<Advance, EngineError> {
        let round = attempt.round;
        let cycle = self.cycle(attempt.cycle).clone();
        let title = self
            .tree
            .get(attempt.node)
            .map_or_else(String::new, |n| n.action.title.clone());
        self.observer.progress(&Progress::AttemptStarted {
            round,
            kind: attempt.kind,
            node: attempt.node,
            title: &title,
        });
        let (source, parent, incumbent) = self.sources_of(&attempt, &cycle)?;
        let lost = self.in_flight_mark(round).map_or(0, |f| f.lost);
        if lost >= MAX_LOST_EVALUATIONS {
            self.unmark(round);
            let evaluation = self.lost_evaluation(lost);
            self.record_evaluation(attempt, cycle.id, incumbent.is_some(), evaluation)?;
            self.state.empty_cycles = 0;
            self.close_if_done(cycle.id)?;
            return Ok(Advance::Again);
        }
        self.mark(InFlight { round, lost });
        self.commit(&[], &[])?;
        let seed_wall = self.seed_evaluation().map(|e| e.wall_s);
        let (limit, limit_why) = self.config.eval.round_timeout(seed_wall);
        let job = Job {
            round,
            task: Arc::new(self.task.clone()),
            candidate: source,
            parent: Some(parent),
            incumbent: incumbent.clone(),
            comparisons: false,
            options: crate::eval_options(&self.config.eval, limit),
        };
        let submitted = match self.evaluator.executor() {
            Some(x) => x.submit(job),
            None => Err(EvalError::Worker {
                message: "no executor to run several evaluations at once".into(),
            }),
        };
        if let Err(e) = submitted {
            self.unmark(round);
            let _ = self.commit(&[], &[]);
            return Err(e.into());
        }
        if self.flights.is_empty() {
            self.busy_since = Some(Instant::now());
        }
        self.flights.insert(
            round,
            Flight {
                attempt,
                incumbent: incumbent.is_some(),
                limit_why,
            },
        );
        Ok(Advance::Started)
    }

    /// The next evaluation to finish, waiting for it; `None` on Ctrl-C or when the executor
    /// has nothing more.
    fn next_finished(&mut self) -> Option<Finished> {
        let stop = self.stop.clone();
        self.evaluator.executor()?.next(&stop)
    }

    /// Time evaluating: while at least one evaluation is in flight.
    fn idle_now(&mut self) {
        if let Some(since) = self.busy_since.take() {
            self.state.eval_s += since.elapsed().as_secs_f64();
        }
    }

    /// Record an evaluation that finished; end its cycle when it is done (`end_cycles`: not
    /// while a failure is stopping the session, which asks the proposer nothing more).
    fn complete(&mut self, f: Finished, end_cycles: bool) -> Result<(), EngineError> {
        let Some(flight) = self.flights.remove(&f.round) else {
            return Err(EvalError::Worker {
                message: format!(
                    "the executor finished round {}, which was not in flight",
                    f.round
                ),
            }
            .into());
        };
        if self.flights.is_empty() {
            self.idle_now();
        }
        if self.target.is_some()
            && let Err(e) = &f.result
        {
            return Err(EngineError::Diverged {
                session: self.state.sessions,
                detail: e.to_string(),
            });
        }
        self.unmark(f.round);
        self.event(&RunEvent::EvaluationFinished {
            round: f.round,
            slot: u32::try_from(f.slot).unwrap_or(u32::MAX),
            place: f.place,
            started_unix: f.started_unix,
            finished_unix: f.finished_unix,
            retried: f.retried,
        })?;
        let result = f.result.map_err(EngineError::from).map(|mut e| {
            if e.result.status == Status::Timeout {
                e.result.message =
                    format!("{} (the limit: {})", e.result.message, flight.limit_why);
            }
            e
        });
        let evaluation = self.settle(f.round, result)?;
        let cycle_id = flight.attempt.cycle;
        self.record_evaluation(flight.attempt, cycle_id, flight.incumbent, evaluation)?;
        self.state.empty_cycles = 0;
        if end_cycles {
            self.close_if_done(cycle_id)?;
        }
        Ok(())
    }

    fn close_if_done(&mut self, cycle_id: u64) -> Result<(), EngineError> {
        let c = self.cycle(cycle_id);
        if c.stagnation >= self.config.window || c.attempts >= self.config.max_cycle_attempts {
            self.close_cycle(cycle_id)?;
        }
        Ok(())
    }

    /// Wait for every evaluation in flight and record it (`end_cycles`: and end the cycles
    /// they finish, as in the loop). A proposer's failure while ending a cycle stops the
    /// asking, not the recording, and is returned at the end.
    fn drain(&mut self, end_cycles: bool) -> Result<(), EngineError> {
        let mut failed = None;
        while !self.flights.is_empty() {
            let Some(f) = self.next_finished() else {
                // Ctrl-C while waiting: the rest is abandoned, as any interruption.
                self.abandon_flights();
                break;
            };
            match self.complete(f, end_cycles && failed.is_none()) {
                Ok(()) => {}
                Err(e @ EngineError::Propose(_)) if failed.is_none() => failed = Some(e),
                Err(e) => {
                    self.abandon_flights();
                    return Err(e);
                }
            }
        }
        failed.map_or(Ok(()), Err)
    }

    /// Abandon every evaluation in flight (Ctrl-C): its worker or job is stopped and its
    /// attempt stays pending, to run again on resume. The first such round, if any.
    fn abandon_flights(&mut self) -> Option<u64> {
        if self.flights.is_empty() {
            return None;
        }
        if let Some(x) = self.evaluator.executor() {
            x.cancel_all();
        }
        let rounds: Vec<u64> = self.flights.keys().copied().collect();
        for r in &rounds {
            self.unmark(*r);
        }
        self.flights.clear();
        self.idle_now();
        rounds.first().copied()
    }

    /// Nodes other open cycles work on: none of them may be split or deleted from under it.
    /// (One cycle at a time, the only open cycle is the one whose end edits the tree.)
    fn busy_nodes(&self) -> BTreeSet<NodeId> {
        if !self.several {
            return BTreeSet::new();
        }
        self.cycles
            .iter()
            .filter(|c| {
                c.outcome.is_none() && c.ended_round.is_none() && Some(c.id) != self.closing
            })
            .map(|c| c.node)
            .collect()
    }

    /// An edit op that would split or delete a node another open cycle works on, refused with
    /// the reason (never the case with one cycle at a time).
    pub(super) fn busy_edit(&self, script: &EditScript) -> Option<EditError> {
        let busy = self.busy_nodes();
        if busy.is_empty() {
            return None;
        }
        script.ops.iter().enumerate().find_map(|(i, op)| {
            let (node, name) = match op {
                EditOp::Split { node, .. } => (*node, "split"),
                EditOp::Delete { node } => (*node, "delete"),
                EditOp::Update { .. } | EditOp::Insert { .. } => return None,
            };
            busy.contains(&node).then(|| EditError {
                index: Some(i),
                op: name.into(),
                message: format!(
                    "node {node} is being worked on (a cycle on it is under way, with several evaluations running at once); it can be split or deleted once that cycle ends"
                ),
            })
        })
    }

    /// Executable nodes no open cycle works on, best first: what a new cycle may start on.
    pub(super) fn free_ranking(&self) -> Vec<(NodeId, f64)> {
        let busy = self.busy_nodes();
        selection::ranked(&self.tree)
            .into_iter()
            .filter(|(id, _)| !busy.contains(id))
            .collect()
    }
}

//! One session of the search: the loop that steps cycles until a budget, a stop or the end of
//! the record, and how the session ended, recorded.

use super::*;

impl<'e> Engine<'e> {
    /// One session: loop until a stop, then record how it ended.
    pub(super) fn session(&mut self) -> Result<SessionEnd, EngineError> {
        if self.concurrent() {
            return self.concurrent_session();
        }
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
        // so the result counts, and leave its refine call to the next session (a run out of
        // rounds asks for nothing more). An interrupted cycle stays open and resumes where it
        // was; so does one stopped by the cost cap.
        if matches!(reason, StopReason::Iterations | StopReason::Time)
            && let Some(c) = self.state.current_cycle
            && self.cycle(c).best_round.is_some()
            && !self
                .attempts
                .iter()
                .any(|a| a.cycle == c && a.evaluation.is_none())
        {
            self.end_cycle_for_budget(c)?;
        }
        let end = SessionEnd {
            session: self.state.sessions,
            reason,
            at,
            abandoned_round: abandoned,
            cost,
            jobs: None,
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
    pub(super) fn cost_stop(
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
    pub(super) fn step(&mut self) -> Result<Step, EngineError> {
        // The refine call the last session's budget left owed comes first.
        if let Some(c) = self.state.refine_owed {
            self.pay_refine(c)?;
            return Ok(Step::Continue);
        }
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
                if self.cycle_spent(&cycle) {
                    self.end_cycle(cycle_id)?;
                    return Ok(self.exhausted());
                }
                let kind = cycle::next_kind(&cycle);
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

    pub(super) fn exhausted(&self) -> Step {
        if self.state.empty_cycles >= MAX_EMPTY_CYCLES {
            Step::Stop(StopReason::Exhausted)
        } else {
            Step::Continue
        }
    }
}

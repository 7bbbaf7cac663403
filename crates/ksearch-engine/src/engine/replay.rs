//! Replaying a recorded run: each recorded session again, stopped where and why it stopped.

use super::*;

impl<'e> Engine<'e> {
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
        // A run recorded before a budget's end left the refine call owed made it at the end of
        // its last session: the record holds that call, which the replay makes too.
        if let Some(c) = self.state.refine_owed
            && self.position() != plan.end
        {
            let session = self.state.sessions;
            self.pay_refine(c).map_err(|e| EngineError::Diverged {
                session,
                detail: e.to_string(),
            })?;
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
    pub(super) fn replay_stops_here(&mut self) -> Result<Option<StopReason>, EngineError> {
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
    pub(super) fn replay_abandons(&mut self, round: u64) -> bool {
        match self.target.clone() {
            Some(t) if t.reason == StopReason::Interrupted && t.abandoned_round == Some(round) => {
                self.position() == t.at
            }
            _ => false,
        }
    }
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
    /// The order in which the evaluations of sessions with several at once finished.
    pub finishing: Vec<crate::replay::FinishedRecord>,
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
        let events = ksearch_run::events::decode(&snap.events).map_err(refuse)?;
        let sessions: Vec<SessionEnd> = events
            .iter()
            .filter_map(|(_, e)| match e {
                RunEvent::SessionEnded(end) => Some(end.clone()),
                _ => None,
            })
            .collect();
        let finishing = events
            .into_iter()
            .filter_map(|(_, e)| match e {
                RunEvent::EvaluationFinished {
                    round,
                    slot,
                    place,
                    started_unix,
                    finished_unix,
                    retried,
                } => Some(crate::replay::FinishedRecord {
                    round,
                    slot,
                    place,
                    started_unix,
                    finished_unix,
                    retried,
                }),
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
            finishing,
        })
    }

    /// The model calls the cost cap refused, in order: a replay refuses them again.
    pub fn cost_stops(&self) -> Vec<CostStop> {
        self.sessions.iter().filter_map(|s| s.cost).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
            evaluating_also: Vec::new(),
            stop_detail: None,
            refine_owed: None,
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
            jobs: None,
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

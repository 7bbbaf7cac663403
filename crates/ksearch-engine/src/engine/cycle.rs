//! One cycle on one node: its start, each attempt generated and evaluated, its end (the best
//! attempt attached, or the action handed back as too hard), and the proposer's edits applied.

use super::*;

impl<'e> Engine<'e> {
    pub(super) fn start_cycle(&mut self) -> Result<Option<u64>, EngineError> {
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
    pub(super) fn parent_source(&self, node: NodeId) -> Result<Source, EngineError> {
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

    pub(super) fn generate(
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

    pub(super) fn evaluate_attempt(
        &mut self,
        attempt: AttemptRecord,
        cycle: &CycleRecord,
    ) -> Result<(), EngineError> {
        let (source, parent, incumbent) = self.sources_of(&attempt, cycle)?;
        let evaluation = self.evaluate_round(
            attempt.round,
            &source,
            Contenders {
                parent: Some(&parent),
                incumbent: incumbent.as_ref(),
                comparisons: false,
            },
        )?;
        self.record_evaluation(attempt, cycle.id, incumbent.is_some(), evaluation)
    }

    /// An attempt's source, its parent's solution and the cycle's best so far (the incumbent,
    /// unless it is this attempt): what it is evaluated with.
    pub(super) fn sources_of(
        &self,
        attempt: &AttemptRecord,
        cycle: &CycleRecord,
    ) -> Result<(Source, Source, Option<Source>), EngineError> {
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
        Ok((source, parent, incumbent))
    }

    /// Record an attempt's evaluation (timed with the cycle's incumbent when `incumbent`):
    /// whether it improves on the cycle's best, the cycle's counters, the commit.
    pub(super) fn record_evaluation(
        &mut self,
        attempt: AttemptRecord,
        cycle_id: u64,
        incumbent: bool,
        evaluation: Evaluation,
    ) -> Result<(), EngineError> {
        let passed = evaluation.result.status == Status::Passed;
        let vs_incumbent = incumbent
            .then(|| gate::vs_incumbent(&evaluation.result, self.config.seed, attempt.round))
            .flatten();
        let improved =
            passed && (!incumbent || vs_incumbent.is_some_and(|c| c.verdict == Gate::Better));
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
        let c = self.cycle_mut(cycle_id);
        c.attempts += 1;
        if improved {
            c.best_round = Some(attempt.round);
            c.stagnation = 0;
        } else {
            c.stagnation += 1;
        }
        let c = c.clone();
        self.commit(std::slice::from_ref(&attempt), &[c])?;
        // The run's best as `ksearch tree` shows it now: the tree's, with this cycle's best
        // attempt on its node as the cycle's end will judge it (a pass the gate finds no
        // faster than its parent is no best), so it never goes down when the cycle ends.
        let best_speedup = self
            .live_tree()
            .best()
            .solution
            .as_ref()
            .and_then(|s| s.speedup);
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
    pub(super) fn end_cycle(&mut self, cycle_id: u64) -> Result<(), EngineError> {
        self.ending(cycle_id, true)
    }

    /// End a cycle with a pass when a budget ends the session: its best attempt is attached
    /// (so it counts, and every view shows it), and the refine call is left owed to the next
    /// session (`refine_owed`), which makes it first: a run out of rounds asks for nothing.
    pub(super) fn end_cycle_for_budget(&mut self, cycle_id: u64) -> Result<(), EngineError> {
        self.ending(cycle_id, false)
    }

    fn ending(&mut self, cycle_id: u64, refine: bool) -> Result<(), EngineError> {
        let (tree, events) = (self.tree.clone(), self.events.len());
        let empty_cycles = self.state.empty_cycles;
        let result = self.end_cycle_inner(cycle_id, refine);
        if result.is_err() {
            self.tree = tree;
            self.events.truncate(events);
            self.state.empty_cycles = empty_cycles;
        }
        result
    }

    fn end_cycle_inner(&mut self, cycle_id: u64, refine: bool) -> Result<(), EngineError> {
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
            let vs_parent = gate::vs_parent(&eval.result, self.config.seed, best.round);
            let solution = Solution::of(best, eval, vs_parent);
            self.tree.attach(node, solution, round);
            self.tree.note(node, gate_note(vs_parent), round);
            self.event(&RunEvent::Attached {
                node,
                round: best.round,
                vs_parent,
            })?;
            if refine {
                self.refine_after(&cycle, &refs, best, vs_parent)?;
            } else {
                self.state.refine_owed = Some(cycle_id);
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

    /// Ask the proposer to refine the tree after `cycle` attached `best` to its node, and apply
    /// its edits (keeping an open child to go on from).
    fn refine_after(
        &mut self,
        cycle: &CycleRecord,
        attempts: &[&AttemptRecord],
        best: &AttemptRecord,
        vs_parent: Option<PairedRatio>,
    ) -> Result<(), EngineError> {
        let node = cycle.node;
        let round = self.state.next_round.saturating_sub(1);
        let code = self.source_of(&best.source_hash, &best.source_file)?;
        let evidence = CycleEvidence {
            node,
            cycle,
            attempts,
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
        Ok(())
    }

    /// The refine a budget's end left owed ([`Self::end_cycle_for_budget`]), asked now. If the
    /// proposer's call fails, the tree and pending events are left as they were and it stays
    /// owed.
    pub(super) fn pay_refine(&mut self, cycle_id: u64) -> Result<(), EngineError> {
        let (tree, events) = (self.tree.clone(), self.events.len());
        let result = self.pay_refine_inner(cycle_id);
        if result.is_err() {
            self.tree = tree;
            self.events.truncate(events);
        }
        result
    }

    fn pay_refine_inner(&mut self, cycle_id: u64) -> Result<(), EngineError> {
        // The cycle as it stood when its end asked for the refine: the same question.
        let cycle = CycleRecord {
            ended_round: None,
            outcome: None,
            ..self.cycle(cycle_id).clone()
        };
        let attempts: Vec<AttemptRecord> = self
            .attempts
            .iter()
            .filter(|a| a.cycle == cycle_id)
            .cloned()
            .collect();
        let refs: Vec<&AttemptRecord> = attempts.iter().collect();
        let best = cycle
            .best_round
            .and_then(|r| attempts.iter().find(|a| a.round == r));
        if let Some(best) = best
            && let Some(eval) = &best.evaluation
        {
            let vs_parent = gate::vs_parent(&eval.result, self.config.seed, best.round);
            self.refine_after(&cycle, &refs, best, vs_parent)?;
        }
        self.state.refine_owed = None;
        self.commit(&[], &[])
    }

    /// Apply a proposer's script; a rejected one goes back to the proposer with the exact error,
    /// twice at most, then is dropped. Every outcome is recorded as an event.
    pub(super) fn apply_edits(&mut self, script: EditScript) -> Result<Vec<NodeId>, EngineError> {
        let mut script = script;
        let round = self.state.next_round.saturating_sub(1);
        for _ in 0..3 {
            if script.ops.is_empty() {
                return Ok(Vec::new());
            }
            let applied = match self.busy_edit(&script) {
                Some(e) => Err(e),
                None => tree_edit::apply(&mut self.tree, &script, round),
            };
            match applied {
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

/// What a cycle's next attempt is: it implements its action first, debugs until an attempt
/// passed, then improves.
pub(super) fn next_kind(cycle: &CycleRecord) -> AttemptKind {
    if cycle.attempts == 0 {
        AttemptKind::Implement
    } else if cycle.best_round.is_none() {
        AttemptKind::Debug
    } else {
        AttemptKind::Improve
    }
}

impl Engine<'_> {
    /// Whether a cycle has had its attempts: `window` in a row without improvement, or
    /// `max_cycle_attempts` in all.
    pub(super) fn cycle_spent(&self, cycle: &CycleRecord) -> bool {
        cycle.stagnation >= self.config.window || cycle.attempts >= self.config.max_cycle_attempts
    }
}

pub(super) fn gate_note(c: Option<PairedRatio>) -> String {
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

pub(super) fn evaluated<'a>(
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

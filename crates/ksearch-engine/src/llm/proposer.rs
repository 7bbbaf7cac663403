use std::time::Instant;

use ksearch_core::gate;
use ksearch_core::protocol::Role;
use ksearch_core::record::{AttemptKind, LlmCallRecord, ModelRole, TokenUsage};
use ksearch_core::static_check::MAX_SOURCE_BYTES;
use ksearch_core::task::{Source, TaskSpec};
use ksearch_core::tree::{Action, Impacts, NewNode, ROOT};
use ksearch_core::tree_edit::{self, EditScript, NodeUpdate};
use ksearch_core::units::time_ms;
use ksearch_llm::{Completion, CompletionRequest, LlmClient, Message, MessageRole, PriceTable};
use serde::Serialize;

use super::journal::{Journal, request_key};
use super::parse::{
    ProposeJson, RefineJson, STOP_WORD, TooHardJson, WorldModelJson, answer_prose, extract_code,
    parse_json, says_stop,
};
use super::prompts::{
    AttemptView, NodeView, ParentView, Prompts, TaskView, evidence_attempts, frontier_view,
    gate_text, num, path_view,
};
use crate::proposer::{
    Candidate, CycleEvidence, GenerateRequest, ProposeContext, ProposeError, Proposer, TooHard,
    WorldModel,
};

/// Hardware and translation context for prompts; the knowledge layer implements it.
pub trait KnowledgeSource: std::fmt::Debug {
    fn context(&self, spec: &TaskSpec) -> String;
}

/// No knowledge beyond the task itself.
#[derive(Debug, Default)]
pub struct NoKnowledge;

impl KnowledgeSource for NoKnowledge {
    fn context(&self, _: &TaskSpec) -> String {
        String::new()
    }
}

#[derive(Debug)]
pub struct LlmSettings {
    pub reasoning: Box<dyn LlmClient>,
    pub codegen: Box<dyn LlmClient>,
    pub prices: PriceTable,
    /// Stop before a call would take the run's spend above this.
    pub max_cost_usd: Option<f64>,
    pub knowledge: Box<dyn KnowledgeSource>,
    /// The backend's candidate contract for the task, in words.
    pub contract: String,
    /// Fence languages a candidate may come in (`c`, `python`, …).
    pub code_languages: Vec<String>,
    /// File name of generated candidates, e.g. `candidate.c`.
    pub candidate_file: String,
    pub max_output_tokens: u32,
    /// Times an unusable answer is sent back with the exact error before falling back.
    pub repairs: u32,
}

#[derive(Debug)]
pub struct LlmProposer {
    s: LlmSettings,
    prompts: Prompts,
    pub journal: Journal,
    /// Questions in a row that got nothing usable, every re-ask spent.
    unusable_in_a_row: u32,
}

/// Questions in a row without a usable answer (each asked `1 + repairs` times) after which
/// the model is taken to be unusable and the run stops, instead of going round empty cycles.
pub(crate) const MAX_UNUSABLE_IN_A_ROW: u32 = 3;

/// What went wrong with an answer, to send back.
struct Unusable(String);

impl LlmProposer {
    pub fn new(settings: LlmSettings) -> Self {
        Self {
            s: settings,
            prompts: Prompts::new(),
            journal: Journal::default(),
            unusable_in_a_row: 0,
        }
    }

    fn name_for(&self) -> String {
        format!(
            "llm ({} / {})",
            self.s.reasoning.spec(),
            self.s.codegen.spec()
        )
    }

    fn fail(&self, message: String) -> ProposeError {
        ProposeError::Failed {
            proposer: self.name_for(),
            message,
        }
    }

    fn render(&self, name: &str, ctx: &impl Serialize) -> Result<String, ProposeError> {
        self.prompts.render(name, ctx).map_err(|e| self.fail(e))
    }

    fn system(&self, task: &TaskView) -> Result<String, ProposeError> {
        self.render("system.j2", &serde_json::json!({ "task": task }))
    }

    fn client(&self, role: ModelRole) -> &dyn LlmClient {
        match role {
            ModelRole::Reasoning => self.s.reasoning.as_ref(),
            ModelRole::Codegen => self.s.codegen.as_ref(),
        }
    }

    /// One call, answered from the journal when it holds this exact request.
    fn call(
        &mut self,
        role: ModelRole,
        purpose: &str,
        round: u64,
        messages: Vec<Message>,
        expected: &str,
    ) -> Result<Completion, ProposeError> {
        let spec = self.client(role).spec().clone();
        let request = CompletionRequest {
            messages,
            max_output_tokens: Some(self.s.max_output_tokens),
            temperature: None,
        };
        let key = request_key(&spec, &request);
        if let Some(r) = self.journal.refusal_due() {
            return Err(ProposeError::Budget {
                spent_usd: r.spent_usd,
                next_usd: r.next_usd,
                cap_usd: r.cap_usd,
            });
        }
        let started = Instant::now();
        let (completion, replayed) = match self.journal.take_answer(&key) {
            Some(c) => (c, true),
            None if self.journal.replay_only => {
                return Err(self.fail(format!(
                    "the journal has no answer for this {purpose} request (round {round}); the replay diverged from the recorded run"
                )));
            }
            None => {
                if let Some(cap) = self.s.max_cost_usd {
                    let estimate = self.estimate(&spec, &request);
                    if self.journal.spent_usd + estimate > cap {
                        return Err(ProposeError::Budget {
                            spent_usd: self.journal.spent_usd,
                            next_usd: estimate,
                            cap_usd: cap,
                        });
                    }
                }
                let about = ksearch_llm::CallAbout {
                    role: role_name(role),
                    purpose,
                    round,
                    expected,
                    key: &key,
                };
                let c = match self.client(role).complete_about(&request, &about) {
                    Ok(c) => c,
                    // A manual model's call waits for its answer: the run pauses.
                    Err(ksearch_llm::LlmError::Pending {
                        call,
                        prompt,
                        answer,
                    }) => {
                        return Err(ProposeError::Pending {
                            call,
                            prompt,
                            answer,
                        });
                    }
                    Err(e) => {
                        return Err(self.fail(format!("{purpose} call to {spec} failed: {e}")));
                    }
                };
                (c, false)
            }
        };
        let usage = TokenUsage {
            input: completion.usage.input_tokens,
            output: completion.usage.output_tokens,
            cached_input: completion.usage.cached_input_tokens,
            reasoning: completion.usage.reasoning_tokens,
        };
        let cost_usd = if replayed {
            Some(0.0)
        } else {
            self.s.prices.cost_usd(&spec, &completion.usage)
        };
        self.journal.record(LlmCallRecord {
            key,
            role,
            model: spec.to_string(),
            purpose: purpose.to_owned(),
            round,
            request: serde_json::to_value(&request).expect("requests serialize"),
            response: serde_json::to_value(&completion).expect("completions serialize"),
            usage,
            cost_usd,
            replayed,
            seconds: started.elapsed().as_secs_f64(),
            unfinished_round: false,
        });
        Ok(completion)
    }

    /// The most a call could cost: its prompt (about 4 characters a token) and a full answer.
    fn estimate(&self, spec: &ksearch_llm::ModelSpec, request: &CompletionRequest) -> f64 {
        let chars: usize = request.messages.iter().map(|m| m.content.len()).sum();
        let usage = ksearch_llm::Usage {
            input_tokens: (chars / 4) as u64 + 1,
            output_tokens: u64::from(self.s.max_output_tokens),
            ..ksearch_llm::Usage::default()
        };
        self.s.prices.cost_usd(spec, &usage).unwrap_or(0.0)
    }

    #[allow(clippy::too_many_arguments)] // every argument is a different part of one call
    /// Ask, and keep asking with the exact error (up to `repairs` times) until `accept` takes
    /// the answer. `Ok(None)` when it never does.
    fn ask<T>(
        &mut self,
        role: ModelRole,
        purpose: &str,
        round: u64,
        system: String,
        prompt: String,
        expected: &str,
        mut accept: impl FnMut(&str) -> Result<T, Unusable>,
    ) -> Result<Option<T>, ProposeError> {
        let mut messages = vec![
            Message {
                role: MessageRole::System,
                content: system,
            },
            Message {
                role: MessageRole::User,
                content: prompt,
            },
        ];
        let mut last_fault = String::new();
        let mut model = String::new();
        for attempt in 0..=self.s.repairs {
            let p = if attempt == 0 {
                purpose.to_owned()
            } else {
                format!("{purpose}/repair")
            };
            let answer = self.call(role, &p, round, messages.clone(), expected)?;
            model = self.client(role).spec().to_string();
            // An empty or cut-off answer is not sent back (an empty turn is refused by some
            // providers; a cut-off one is not worth its tokens, and its code would be cut off
            // mid-loop): the question is asked again, saying what went wrong.
            let fault = if answer.is_empty() {
                Some("empty")
            } else if answer.is_truncated() {
                Some("truncated")
            } else {
                None
            };
            if let Some(fault) = fault {
                last_fault = format!(
                    "{fault} (finish reason {})",
                    answer.finish_reason.as_deref().unwrap_or("not given")
                );
                let note = self.render(
                    "unusable.j2",
                    &serde_json::json!({
                        "fault": fault,
                        "finish_reason": answer.finish_reason,
                        "max_output_tokens": self.s.max_output_tokens,
                        "answer_cap_mib": ksearch_llm::MAX_ANSWER_BYTES >> 20,
                        "expected": expected,
                    }),
                )?;
                let last = messages
                    .iter_mut()
                    .rev()
                    .find(|m| m.role == MessageRole::User)
                    .expect("a prompt has a user message");
                last.content = format!("{}\n\n{note}", last.content);
                continue;
            }
            match accept(&answer.text) {
                Ok(v) => {
                    self.unusable_in_a_row = 0;
                    return Ok(Some(v));
                }
                Err(Unusable(error)) => {
                    last_fault.clone_from(&error);
                    let repair = self.render(
                        "repair.j2",
                        &serde_json::json!({ "error": error, "expected": expected }),
                    )?;
                    messages.push(Message {
                        role: MessageRole::Assistant,
                        content: answer.text,
                    });
                    messages.push(Message {
                        role: MessageRole::User,
                        content: repair,
                    });
                }
            }
        }
        self.unusable_in_a_row += 1;
        if self.unusable_in_a_row >= MAX_UNUSABLE_IN_A_ROW {
            return Err(ProposeError::Unusable {
                model,
                questions: self.unusable_in_a_row,
                asks: 1 + self.s.repairs,
                last: last_fault,
            });
        }
        Ok(None)
    }

    fn task_view(&self, ctx: &ProposeContext<'_>) -> TaskView {
        TaskView::new(ctx.task, &self.s.contract)
    }

    fn base_ctx(&self, ctx: &ProposeContext<'_>) -> serde_json::Map<String, serde_json::Value> {
        let mut m = serde_json::Map::new();
        m.insert(
            "task".into(),
            serde_json::to_value(self.task_view(ctx)).expect("views serialize"),
        );
        m.insert(
            "knowledge".into(),
            self.s.knowledge.context(&ctx.task.spec).into(),
        );
        m
    }

    /// Generic actions when a model never produces a usable world model.
    fn fallback_world_model() -> Vec<NewNode> {
        let action =
            |title: &str, description: &str, difficulty: u8, score: f64, expected: f64| NewNode {
                decision: title.into(),
                action: Action {
                    title: title.into(),
                    description: description.into(),
                    difficulty,
                    score,
                    expected_speedup: expected,
                    rationale: "Fallback action: the model's world model could not be used.".into(),
                },
                rating: 5.0,
                confidence: 0.2,
                impacts: Impacts::default(),
                payload: serde_json::Value::Null,
            };
        vec![
            action(
                "Restructure loops for contiguous access",
                "Reorder loops so the innermost loop walks memory contiguously.",
                2,
                0.5,
                2.0,
            ),
            action(
                "Vectorize the innermost loop",
                "Make the innermost loop use the hardware's vector width explicitly.",
                3,
                0.4,
                2.0,
            ),
            action(
                "Block for the cache",
                "Tile the loops so each block's working set fits in cache.",
                3,
                0.4,
                1.5,
            ),
        ]
    }
}

impl Proposer for LlmProposer {
    fn name(&self) -> String {
        self.name_for()
    }

    fn init_world_model(&mut self, ctx: &ProposeContext<'_>) -> Result<WorldModel, ProposeError> {
        let mut c = self.base_ctx(ctx);
        // The seed's measurement (round 0) timed the baseline alongside it.
        let seed_eval = ctx
            .attempts
            .iter()
            .find(|a| a.round == 0)
            .and_then(|a| a.evaluation.as_ref());
        let baseline_ms = |w: &str| {
            seed_eval
                .and_then(|e| e.result.workloads.iter().find(|x| x.name == w))
                .and_then(|x| x.timing(Role::Baseline))
                .map(|t| t.median_ms)
        };
        let seed_latency = ctx.tree.root().solution.as_ref().map(|s| {
            s.latency_ms
                .iter()
                .map(|(w, v)| {
                    let base = baseline_ms(w)
                        .map(|b| format!(" (baseline {})", time_ms(b)))
                        .unwrap_or_default();
                    (w.clone(), format!("{}{base}", time_ms(*v)))
                })
                .collect::<std::collections::BTreeMap<_, _>>()
        });
        c.insert(
            "seed_latency".into(),
            serde_json::to_value(seed_latency).expect("serializes"),
        );
        let prompt = self.render("world_model.j2", &c)?;
        let system = self.system(&self.task_view(ctx))?;
        let got = self.ask(
            ModelRole::Reasoning,
            "world_model",
            ctx.round,
            system,
            prompt,
            "the world model as ONE JSON object in a ```json block",
            |text| {
                parse_json::<WorldModelJson>(text)
                    .and_then(WorldModelJson::check)
                    .map_err(Unusable)
            },
        )?;
        Ok(match got {
            Some((notes, actions)) => WorldModel { notes, actions },
            None => WorldModel {
                notes: vec!["the model gave no usable world model; ksearch started from generic fallback actions".into()],
                actions: Self::fallback_world_model(),
            },
        })
    }

    fn propose_actions(&mut self, ctx: &ProposeContext<'_>) -> Result<EditScript, ProposeError> {
        let best = ctx.tree.best();
        let mut solved: Vec<&ksearch_core::tree::Node> =
            ctx.tree.nodes().filter(|n| !n.is_open()).collect();
        solved.sort_by(|a, b| {
            let s = |n: &ksearch_core::tree::Node| {
                n.solution.as_ref().and_then(|s| s.speedup).unwrap_or(0.0)
            };
            s(b).total_cmp(&s(a)).then(a.id.cmp(&b.id))
        });
        let solved_view: Vec<_> = solved
            .iter()
            .flat_map(|n| path_view(ctx.tree, n.id).into_iter().last())
            .collect();
        let mut c = self.base_ctx(ctx);
        c.insert(
            "solved".into(),
            serde_json::to_value(solved_view).expect("serializes"),
        );
        c.insert(
            "best".into(),
            serde_json::json!({ "id": best.id, "code": ctx.best_code.unwrap_or("").trim_end() }),
        );
        let prompt = self.render("propose.j2", &c)?;
        let system = self.system(&self.task_view(ctx))?;
        let tree = ctx.tree.clone();
        let round = ctx.round;
        let got = self.ask(
            ModelRole::Reasoning,
            "propose",
            round,
            system,
            prompt,
            "ONE JSON object `{\"edits\": [...]}` in a ```json block",
            |text| {
                let script = parse_json::<ProposeJson>(text)
                    .and_then(ProposeJson::into_script)
                    .map_err(Unusable)?;
                tree_edit::apply(&mut tree.clone(), &script, round)
                    .map_err(|e| Unusable(e.to_string()))?;
                Ok(script)
            },
        )?;
        Ok(got.unwrap_or_default())
    }

    fn generate(
        &mut self,
        ctx: &ProposeContext<'_>,
        req: &GenerateRequest<'_>,
    ) -> Result<Option<Candidate>, ProposeError> {
        let node = ctx
            .tree
            .get(req.node)
            .ok_or_else(|| self.fail(format!("node {} is not in the tree", req.node)))?;
        let parent = ctx
            .tree
            .get(node.parent.unwrap_or(ROOT))
            .ok_or_else(|| self.fail("the node's parent is missing".into()))?;
        let mut c = self.base_ctx(ctx);
        c.insert(
            "node".into(),
            serde_json::to_value(NodeView::new(ctx.tree, node)).expect("serializes"),
        );
        c.insert(
            "parent".into(),
            serde_json::to_value(ParentView::new(parent, &req.parent_source.text))
                .expect("serializes"),
        );
        let (template, purpose) = match req.kind {
            AttemptKind::Implement => ("implement.j2", "implement"),
            AttemptKind::Debug => ("debug.j2", "debug"),
            AttemptKind::Improve => ("improve.j2", "improve"),
            AttemptKind::Seed => return Ok(None),
        };
        if let Some(p) = req.previous {
            // The same paired ratio the engine judged the attempt by.
            let vs_best = gate::vs_incumbent(&p.evaluation.result, ctx.seed, p.attempt.round);
            c.insert(
                "last".into(),
                serde_json::to_value(AttemptView::new(
                    p.attempt,
                    p.evaluation,
                    &p.source.text,
                    vs_best,
                ))
                .expect("serializes"),
            );
        } else if req.kind != AttemptKind::Implement {
            return Ok(None);
        }
        if let Some(b) = req.best {
            c.insert(
                "best".into(),
                serde_json::to_value(AttemptView::new(
                    b.attempt,
                    b.evaluation,
                    &b.source.text,
                    None,
                ))
                .expect("serializes"),
            );
        } else if req.kind == AttemptKind::Improve {
            return Ok(None);
        }
        c.insert("stop_word".into(), STOP_WORD.into());
        let prompt = self.render(template, &c)?;
        let system = self.system(&self.task_view(ctx))?;
        // Debug and improve prompts offer the stop word; an implement prompt does not.
        let may_stop = req.kind != AttemptKind::Implement;
        let expected = if may_stop {
            format!("the complete source file in ONE fenced code block, or `{STOP_WORD}`")
        } else {
            "the complete source file in ONE fenced code block".to_owned()
        };
        let languages = self.s.code_languages.clone();
        let got = self.ask(
            ModelRole::Codegen,
            purpose,
            ctx.round,
            system,
            prompt,
            &expected,
            |text| {
                if may_stop && says_stop(text, &languages) {
                    return Ok(None);
                }
                self_code(text, &languages).map(|code| Some((code, answer_prose(text))))
            },
        )?;
        // `Some(None)`: the model said there is nothing more to try, which ends the cycle.
        Ok(got.flatten().map(|(text, prose)| Candidate {
            source: Source {
                file: self.s.candidate_file.clone(),
                text,
            },
            note: if prose.is_empty() {
                format!("{purpose}: {}", node.action.title)
            } else {
                format!("{purpose}: {prose}")
            },
            payload: serde_json::Value::Null,
        }))
    }

    fn refine(
        &mut self,
        ctx: &ProposeContext<'_>,
        evidence: &CycleEvidence<'_>,
    ) -> Result<EditScript, ProposeError> {
        let node = ctx
            .tree
            .get(evidence.node)
            .ok_or_else(|| self.fail(format!("node {} is not in the tree", evidence.node)))?;
        let mut c = self.base_ctx(ctx);
        c.insert(
            "node".into(),
            serde_json::to_value(NodeView::new(ctx.tree, node)).expect("serializes"),
        );
        c.insert(
            "path".into(),
            serde_json::to_value(path_view(ctx.tree, node.id)).expect("serializes"),
        );
        c.insert(
            "frontier".into(),
            serde_json::to_value(frontier_view(ctx.tree)).expect("serializes"),
        );
        let cmp = evidence.vs_parent;
        c.insert(
            "evidence".into(),
            serde_json::json!({
                "measured": cmp.map_or_else(|| "-".to_owned(), |c| num(c.ratio)),
                "interval": cmp.map_or_else(|| "-".to_owned(), |c| format!("{}–{}", num(c.interval.0), num(c.interval.1))),
                "gate": cmp.map_or_else(|| "not measured".to_owned(), |c| gate_text(c.verdict)),
                "attempts": evidence_attempts(evidence.attempts),
                "code": evidence.solution_code.unwrap_or("").trim_end(),
            }),
        );
        let prompt = self.render("refine.j2", &c)?;
        let system = self.system(&self.task_view(ctx))?;
        let (tree, round, solved) = (ctx.tree.clone(), ctx.round, node.id);
        let got = self.ask(ModelRole::Reasoning, "refine", round, system, prompt, "ONE JSON object with `reflection` and `edits` in a ```json block", |text| {
            let (reflection, mut script) = parse_json::<RefineJson>(text).and_then(RefineJson::into_script).map_err(Unusable)?;
            let note = format!(
                "reflection: {} | followed the action: {} | beliefs: {} | prediction gap: {}",
                reflection.code_summary, reflection.followed_action, reflection.belief_changes, reflection.prediction_gap
            );
            script.ops.push(tree_edit::EditOp::Update { node: solved, changes: NodeUpdate { note: Some(note), ..NodeUpdate::default() } });
            let mut probe = tree.clone();
            tree_edit::apply(&mut probe, &script, round).map_err(|e| Unusable(e.to_string()))?;
            if !tree_edit::has_continuation(&probe, solved) {
                return Err(Unusable(format!("node {solved} must keep at least one open child of difficulty below 5: insert one")));
            }
            Ok(script)
        })?;
        // Unusable after the repairs: no edits; the engine inserts the continuation fallback.
        Ok(got.unwrap_or_default())
    }

    fn too_hard(
        &mut self,
        ctx: &ProposeContext<'_>,
        evidence: &CycleEvidence<'_>,
    ) -> Result<TooHard, ProposeError> {
        let node = ctx
            .tree
            .get(evidence.node)
            .ok_or_else(|| self.fail(format!("node {} is not in the tree", evidence.node)))?;
        let has_children = ctx.tree.children(node.id).next().is_some();
        let mut c = self.base_ctx(ctx);
        c.insert(
            "node".into(),
            serde_json::to_value(NodeView::new(ctx.tree, node)).expect("serializes"),
        );
        c.insert(
            "evidence".into(),
            serde_json::json!({ "attempts": evidence_attempts(evidence.attempts) }),
        );
        c.insert("last".into(), serde_json::Value::Null);
        let prompt = self.render("too_hard.j2", &c)?;
        let system = self.system(&self.task_view(ctx))?;
        let got = self.ask(
            ModelRole::Reasoning,
            "too_hard",
            ctx.round,
            system,
            prompt,
            "ONE JSON object with `decision` in a ```json block",
            |text| {
                let decision = parse_json::<TooHardJson>(text).map_err(Unusable)?;
                match decision {
                    TooHardJson::Downgrade {
                        mut changes,
                        reason,
                    } => {
                        if changes.note.is_none() && !reason.is_empty() {
                            changes.note = Some(format!("downgraded: {reason}"));
                        }
                        Ok(TooHard::Downgrade(changes))
                    }
                    TooHardJson::Split { .. } | TooHardJson::Delete { .. } if has_children => Err(
                        Unusable("the node has children, so it can only be downgraded".into()),
                    ),
                    TooHardJson::Split { into } => {
                        if !(2..=3).contains(&into.len()) {
                            return Err(Unusable(format!(
                                "a split needs 2–3 smaller steps, got {}",
                                into.len()
                            )));
                        }
                        let nodes = into
                            .into_iter()
                            .enumerate()
                            .map(|(i, a)| a.into_node(&format!("into[{i}]")))
                            .collect::<Result<Vec<_>, _>>()
                            .map_err(Unusable)?;
                        Ok(TooHard::Split(nodes))
                    }
                    TooHardJson::Delete { .. } => Ok(TooHard::Delete),
                }
            },
        )?;
        Ok(got.unwrap_or_else(|| {
            TooHard::halved(
                node,
                "downgraded by the engine: the model's decision could not be used",
            )
        }))
    }

    fn take_records(&mut self) -> Vec<LlmCallRecord> {
        self.journal.take_fresh()
    }

    fn restore_records(&mut self, records: &[LlmCallRecord]) {
        self.journal.restore(records, true);
    }
}

fn role_name(role: ModelRole) -> &'static str {
    match role {
        ModelRole::Reasoning => "reasoning",
        ModelRole::Codegen => "codegen",
    }
}

fn self_code(text: &str, languages: &[String]) -> Result<String, Unusable> {
    let langs: Vec<&str> = languages.iter().map(String::as_str).collect();
    match extract_code(text, &langs) {
        // The static check would refuse it, and the run store keeps no larger source.
        Some(code) if code.len() > MAX_SOURCE_BYTES => Err(Unusable(format!(
            "its source file has {} bytes; a candidate may have at most {MAX_SOURCE_BYTES}",
            code.len()
        ))),
        Some(code) if code.trim().len() > 10 => Ok(code),
        _ => Err(Unusable(format!(
            "it contains no source file; put the complete file in one fenced block (```{})",
            langs.first().copied().unwrap_or("")
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_source_larger_than_a_candidate_may_be_is_unusable() {
        let c = ["c".to_owned()];
        // `int x; /*…*/` and a newline: 12 bytes and the comment's.
        let answer = |n: usize| format!("```c\nint x; /*{}*/\n```\n", "x".repeat(n));
        let fits = answer(MAX_SOURCE_BYTES - 12);
        assert_eq!(
            self_code(&fits, &c).map(|s| s.len()).ok(),
            Some(MAX_SOURCE_BYTES)
        );
        let over = answer(MAX_SOURCE_BYTES - 11);
        let Err(Unusable(why)) = self_code(&over, &c) else {
            panic!("an oversized source was taken");
        };
        assert!(
            why.contains(&format!("at most {MAX_SOURCE_BYTES}")),
            "{why}"
        );
    }
}

//! Every prompt, rendered through the real proposer for a fixed run state and snapshotted; the
//! client is a recorder that answers each call with a usable canned reply.

use std::sync::{Arc, Mutex};

use ksearch_core::protocol::{
    CapturedOutput, CompileReport, ContenderTiming, ErrorStats, EvaluateResult, Phases, Role,
    Status, WorkloadReport,
};
use ksearch_core::record::{AttemptKind, AttemptRecord, CycleRecord, Evaluation};
use ksearch_core::score::{Speedup, WorkloadSpeedup};
use ksearch_core::stats::TimingStats;
use ksearch_core::task::{Source, Task, parse_task};
use ksearch_core::tree::{Action, Gate, Impacts, NewNode, Solution, Tree};
use ksearch_core::tree_edit::{EditOp, EditScript, apply};
use ksearch_llm::{
    Completion, CompletionRequest, LlmClient, LlmError, ModelSpec, PriceTable, Usage,
};

use super::{LlmProposer, LlmSettings, NoKnowledge};
use crate::proposer::{CycleEvidence, Evaluated, GenerateRequest, ProposeContext, Proposer};

/// The feedback of debug and improve rounds: timing against the best attempt, the stop word.
mod feedback;

/// Answers each call with the next canned text, recording what was asked.
/// An answer's text and why generation stopped.
type Answer = (String, Option<String>);

#[derive(Debug)]
struct Recorder {
    spec: ModelSpec,
    seen: Arc<Mutex<Vec<CompletionRequest>>>,
    answers: Arc<Mutex<Vec<Answer>>>,
}

impl LlmClient for Recorder {
    fn spec(&self) -> &ModelSpec {
        &self.spec
    }
    fn complete(&self, req: &CompletionRequest) -> Result<Completion, LlmError> {
        self.seen.lock().unwrap().push(req.clone());
        let (text, finish_reason) = self.answers.lock().unwrap().remove(0);
        Ok(Completion {
            text,
            usage: Usage::default(),
            model: "m".into(),
            finish_reason,
            http_attempts: 1,
        })
    }
}

fn task() -> Task {
    let spec = parse_task(
        include_str!("../../../../tasks/cpu/softmax/task.toml"),
        "task.toml",
    )
    .unwrap();
    Task {
        id: "cpu/softmax".into(),
        spec,
        reference: Source {
            file: "reference.c".into(),
            text: include_str!("../../../../tasks/cpu/softmax/reference.c").into(),
        },
        seed: Source {
            file: "seed.c".into(),
            text: include_str!("../../../../tasks/cpu/softmax/seed.c").into(),
        },
        baseline: None,
        comparisons: Vec::new(),
        space: None,
        worker: None,
    }
}

fn timing(ms: f64) -> TimingStats {
    TimingStats::from_samples(vec![ms * 0.98, ms, ms * 1.03], 4)
}

fn evaluation(status: Status, ms: Option<f64>) -> Evaluation {
    let workloads = match ms {
        Some(ms) => vec![WorkloadReport {
            name: "small".into(),
            status,
            message: None,
            errors: Some(ErrorStats {
                max_abs_err: 3e-8,
                max_rel_err: 1e-6,
                norm_rel_err: 2e-8,
                seeds_checked: 4,
            }),
            timings: vec![
                ContenderTiming {
                    role: Role::Candidate,
                    label: "candidate.c".into(),
                    stats: timing(ms),
                },
                ContenderTiming {
                    role: Role::Baseline,
                    label: "reference".into(),
                    stats: timing(0.68),
                },
                ContenderTiming {
                    role: Role::Parent,
                    label: "parent".into(),
                    stats: timing(0.24),
                },
            ],
        }],
        None => Vec::new(),
    };
    let speedup = ms.map(|ms| Speedup {
        geomean: 0.68 / ms,
        workloads: vec![WorkloadSpeedup {
            workload: "small".into(),
            candidate_ms: ms,
            other_ms: 0.68,
            speedup: 0.68 / ms,
        }],
    });
    let vs_parent = ms.map(|ms| Speedup {
        geomean: 0.24 / ms,
        workloads: vec![],
    });
    let compile = (status == Status::CompileError).then(|| CompileReport {
        command: "cc -O3".into(),
        compiler: "gcc 12".into(),
        seconds: 0.1,
        log: "candidate.c:12:16: error: expected expression before ';' token\n   12 | int oops = ;\n      |            ^\n".into(),
    });
    Evaluation {
        result: EvaluateResult {
            id: 1,
            status,
            message: if status == Status::Passed {
                "passed 1 workload(s) × 3 seed(s)".into()
            } else {
                "candidate.c:12:16: error: expected expression before ';' token".into()
            },
            compile,
            workloads,
            phases: Phases::default(),
            output: CapturedOutput::default(),
            sandbox: None,
            described: Vec::new(),
        },
        speedup,
        speedup_vs_parent: vs_parent,
        baseline: "reference (reference.c)".into(),
        wall_s: 1.0,
        load: None,
        caveats: Vec::new(),
    }
}

fn attempt(round: u64, kind: AttemptKind, e: Evaluation) -> AttemptRecord {
    AttemptRecord {
        round,
        node: 1,
        cycle: 1,
        kind,
        source_hash: format!("h{round}"),
        source_file: "candidate.c".into(),
        note: format!("{kind:?}"),
        evaluation: Some(e),
        improved: false,
        payload: serde_json::Value::Null,
    }
}

fn node(title: &str) -> NewNode {
    NewNode {
        decision: title.into(),
        action: Action {
            title: title.into(),
            description: format!("{title}; nothing else."),
            difficulty: 2,
            score: 0.6,
            expected_speedup: 1.25,
            rationale: "a division costs more than a multiply".into(),
        },
        rating: 6.0,
        confidence: 0.5,
        impacts: Impacts::default(),
        payload: serde_json::Value::Null,
    }
}

fn tree() -> Tree {
    let seed = Solution {
        round: 0,
        source_hash: "s".into(),
        source_file: "seed.c".into(),
        speedup: Some(2.83),
        speedup_vs_parent: None,
        vs_parent_interval: None,
        gate: Gate::Unmeasured,
        latency_ms: [("small".to_owned(), 0.24)].into(),
        baseline_ms: Default::default(),
    };
    let mut t = Tree::new(vec!["classification: reduction".into()], seed);
    apply(
        &mut t,
        &EditScript {
            ops: vec![
                EditOp::Insert {
                    parent: 0,
                    node: node("Multiply by the reciprocal"),
                },
                EditOp::Insert {
                    parent: 0,
                    node: node("Fuse exp and sum"),
                },
            ],
        },
        0,
    )
    .unwrap();
    t
}

const CODE: &str = "#include <stdint.h>\nvoid softmax(const float *restrict x, float *restrict y, int64_t rows, int64_t cols) { /* … */ }\n";

fn json_block(v: &serde_json::Value) -> String {
    format!("```json\n{v}\n```")
}

/// Every prompt the proposer sends while `drive` runs, with `answers` fed back in order.
fn prompts(answers: Vec<String>, drive: impl FnOnce(&mut LlmProposer)) -> String {
    prompts_with(answers.into_iter().map(|a| (a, None)).collect(), 1, drive)
}

/// As [`prompts`], with each answer's finish reason, and `repairs` re-asks.
fn prompts_with(
    answers: Vec<Answer>,
    repairs: u32,
    drive: impl FnOnce(&mut LlmProposer),
) -> String {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let answers = Arc::new(Mutex::new(answers));
    let client = || {
        Box::new(Recorder {
            spec: "openai:test-model".parse().unwrap(),
            seen: Arc::clone(&seen),
            answers: Arc::clone(&answers),
        })
    };
    let mut p = LlmProposer::new(LlmSettings {
        reasoning: client(),
        codegen: client(),
        prices: PriceTable::builtin(),
        max_cost_usd: None,
        knowledge: Box::new(NoKnowledge),
        contract: ksearch_core::contract::c_contract(&task().spec),
        code_languages: vec!["c".into()],
        candidate_file: "candidate.c".into(),
        max_output_tokens: 4096,
        repairs,
    });
    drive(&mut p);
    let seen = seen.lock().unwrap();
    seen.iter()
        .enumerate()
        .map(|(i, r)| {
            let body = r
                .messages
                .iter()
                .map(|m| format!("--- {:?} ---\n{}", m.role, m.content))
                .collect::<Vec<_>>()
                .join("\n");
            format!("===== request {i} =====\n{body}")
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn ctx<'a>(
    task: &'a Task,
    tree: &'a Tree,
    attempts: &'a [AttemptRecord],
    best_code: Option<&'a str>,
) -> ProposeContext<'a> {
    ProposeContext {
        task,
        tree,
        attempts,
        round: 4,
        seed: 0,
        best_code,
    }
}

fn action_json() -> serde_json::Value {
    serde_json::json!({"title": "Vectorize the exp pass", "description": "d", "difficulty": 3, "score": 0.5, "expected_speedup": 1.8, "rationale": "r", "rating": 6, "confidence": 0.5})
}

#[test]
fn world_model_prompt_and_its_repair() {
    let task = task();
    let tree = tree();
    let good = json_block(
        &serde_json::json!({"classification": "c", "canonical_form": "f", "data_layout": "l",
        "bottlenecks": [{"regime": "a", "hypothesis": "h"}, {"regime": "b", "hypothesis": "h"}, {"regime": "c", "hypothesis": "h"}],
        "knobs": ["k"], "skeleton": "s", "kernel_families": ["x", "y"], "actions": [action_json(), action_json(), action_json()]}),
    );
    let text = prompts(vec!["no json here".into(), good], |p| {
        let wm = p.init_world_model(&ctx(&task, &tree, &[], None)).unwrap();
        assert_eq!(wm.actions.len(), 3);
    });
    insta::assert_snapshot!(text);
}

#[test]
fn implement_debug_and_improve_prompts() {
    let task = task();
    let tree = tree();
    let parent = task.seed.clone();
    let broken = Source {
        file: "candidate.c".into(),
        text: "int oops = ;\n".into(),
    };
    let best = Source {
        file: "candidate.c".into(),
        text: CODE.into(),
    };
    let a_fail = attempt(
        1,
        AttemptKind::Implement,
        evaluation(Status::CompileError, None),
    );
    let a_pass = attempt(
        2,
        AttemptKind::Debug,
        evaluation(Status::Passed, Some(0.21)),
    );
    let attempts = vec![a_fail.clone(), a_pass.clone()];
    let code = format!("```c\n{CODE}```");
    let text = prompts(vec![code.clone(), code.clone(), code], |p| {
        let c = ctx(&task, &tree, &attempts, None);
        let generate = |p: &mut LlmProposer, kind, previous, best, cycle: &[&AttemptRecord]| {
            p.generate(
                &c,
                &GenerateRequest {
                    node: 1,
                    kind,
                    parent_source: &parent,
                    previous,
                    best,
                    cycle_attempts: cycle,
                },
            )
            .unwrap()
            .unwrap()
        };
        generate(p, AttemptKind::Implement, None, None, &[]);
        let failed = Evaluated {
            source: &broken,
            attempt: &a_fail,
            evaluation: a_fail.evaluation.as_ref().unwrap(),
        };
        generate(p, AttemptKind::Debug, Some(failed), None, &[&a_fail]);
        let passed = Evaluated {
            source: &best,
            attempt: &a_pass,
            evaluation: a_pass.evaluation.as_ref().unwrap(),
        };
        generate(
            p,
            AttemptKind::Improve,
            Some(passed),
            Some(passed),
            &[&a_fail, &a_pass],
        );
    });
    insta::assert_snapshot!(text);
}

#[test]
fn refine_too_hard_and_propose_prompts() {
    let task = task();
    let mut tree = tree();
    let a_pass = attempt(
        2,
        AttemptKind::Implement,
        evaluation(Status::Passed, Some(0.21)),
    );
    tree.attach(
        1,
        Solution {
            round: 2,
            source_hash: "h2".into(),
            source_file: "candidate.c".into(),
            speedup: Some(3.24),
            speedup_vs_parent: Some(1.14),
            vs_parent_interval: Some((1.1, 1.18)),
            gate: Gate::Better,
            latency_ms: [("small".to_owned(), 0.21)].into(),
            baseline_ms: Default::default(),
        },
        2,
    );
    let attempts = vec![a_pass.clone()];
    let cycle = CycleRecord {
        id: 1,
        node: 1,
        started_round: 2,
        ended_round: Some(2),
        outcome: None,
        best_round: Some(2),
        stagnation: 0,
        attempts: 1,
    };
    let cmp = ksearch_core::gate::PairedRatio {
        ratio: 1.14,
        interval: (1.1, 1.18),
        verdict: Gate::Better,
    };
    let refine = json_block(
        &serde_json::json!({"reflection": {"code_summary": "c", "followed_action": true, "belief_changes": "b", "prediction_gap": "g"},
        "edits": [{"op": "insert", "parent": 1, "node": action_json()}]}),
    );
    let too_hard = json_block(
        &serde_json::json!({"decision": "downgrade", "changes": {"score": 0.2}, "reason": "the fusion breaks vectorization"}),
    );
    let propose = json_block(
        &serde_json::json!({"edits": [{"op": "insert", "parent": 1, "node": action_json()}]}),
    );
    let text = prompts(vec![refine, too_hard, propose], |p| {
        let c = ctx(&task, &tree, &attempts, Some(CODE));
        let script = p
            .refine(
                &c,
                &CycleEvidence {
                    node: 1,
                    cycle: &cycle,
                    attempts: &[&a_pass],
                    best: Some(&a_pass),
                    vs_parent: Some(cmp),
                    solution_code: Some(CODE),
                },
            )
            .unwrap();
        assert_eq!(script.ops.len(), 2, "the insert and the reflection note");
        let failed = attempt(
            3,
            AttemptKind::Implement,
            evaluation(Status::CompileError, None),
        );
        let decision = p
            .too_hard(
                &c,
                &CycleEvidence {
                    node: 2,
                    cycle: &cycle,
                    attempts: &[&failed],
                    best: None,
                    vs_parent: None,
                    solution_code: None,
                },
            )
            .unwrap();
        assert!(matches!(decision, crate::TooHard::Downgrade(_)));
        assert_eq!(p.propose_actions(&c).unwrap().ops.len(), 1);
    });
    insta::assert_snapshot!(text);
}

/// An empty answer (every token spent on reasoning) and one cut off at the output limit are
/// asked again with a note saying so, never sent back as turns; the third answer is used.
#[test]
fn empty_and_cut_off_answers_are_asked_again_not_sent_back() {
    let task = task();
    let tree = tree();
    let parent = task.seed.clone();
    let cut = format!("```c\n{}", &CODE[..CODE.len() / 2]);
    let answers = vec![
        (String::new(), Some("length".to_owned())),
        (cut, Some("length".to_owned())),
        (format!("```c\n{CODE}```"), Some("stop".to_owned())),
    ];
    let mut used = None;
    let text = prompts_with(answers, 2, |p| {
        let c = ctx(&task, &tree, &[], None);
        used = p
            .generate(
                &c,
                &GenerateRequest {
                    node: 1,
                    kind: AttemptKind::Implement,
                    parent_source: &parent,
                    previous: None,
                    best: None,
                    cycle_attempts: &[],
                },
            )
            .unwrap();
    });
    let used = used.expect("the third answer is used");
    assert_eq!(used.source.text.trim(), CODE.trim());
    assert!(!text.contains("--- Assistant ---"), "{text}");
    assert!(text.contains("Your previous answer was empty"), "{text}");
    assert!(
        text.contains("cut off at the output limit (4096 tokens)"),
        "{text}"
    );
    insta::assert_snapshot!(text);
}

/// An answer over the size ksearch takes (cut and marked by the client) is asked again, saying
/// so, as a cut-off one is.
#[test]
fn an_answer_over_the_cap_is_asked_again_saying_so() {
    let task = task();
    let tree = tree();
    let parent = task.seed.clone();
    let answers = vec![
        (
            "y".repeat(100),
            Some(ksearch_llm::ANSWER_OVER_CAP.to_owned()),
        ),
        (format!("```c\n{CODE}```"), Some("stop".to_owned())),
    ];
    let mut used = None;
    let text = prompts_with(answers, 2, |p| {
        let c = ctx(&task, &tree, &[], None);
        used = p
            .generate(
                &c,
                &GenerateRequest {
                    node: 1,
                    kind: AttemptKind::Implement,
                    parent_source: &parent,
                    previous: None,
                    best: None,
                    cycle_attempts: &[],
                },
            )
            .unwrap();
    });
    assert!(used.is_some(), "the second answer is used");
    assert!(!text.contains("yyyy"), "not sent back: {text}");
    assert!(
        text.contains("Your previous answer was longer than the 4 MiB ksearch takes"),
        "{text}"
    );
}

#[test]
fn three_questions_in_a_row_without_a_usable_answer_give_the_model_up() {
    let task = task();
    let tree = tree();
    let parent = task.seed.clone();
    let empty = || (String::new(), Some("length".to_owned()));
    // One re-ask per question: two questions get nothing, one a usable answer, then three
    // get nothing. The usable one starts the count again, so only the sixth gives up.
    let mut answers: Vec<Answer> = (0..4).map(|_| empty()).collect();
    answers.push((format!("```c\n{CODE}```"), Some("stop".to_owned())));
    answers.extend((0..6).map(|_| empty()));
    let mut outcomes = Vec::new();
    prompts_with(answers, 1, |p| {
        let c = ctx(&task, &tree, &[], None);
        let req = GenerateRequest {
            node: 1,
            kind: AttemptKind::Implement,
            parent_source: &parent,
            previous: None,
            best: None,
            cycle_attempts: &[],
        };
        for _ in 0..6 {
            outcomes.push(match p.generate(&c, &req) {
                Ok(Some(_)) => "code".to_owned(),
                Ok(None) => "nothing".to_owned(),
                Err(e) => e.to_string(),
            });
        }
    });
    assert_eq!(
        outcomes[..5],
        ["nothing", "nothing", "code", "nothing", "nothing"]
    );
    assert_eq!(
        outcomes[5],
        "the model openai:test-model gave no usable answer to 3 questions in a row (each asked 2 times); the last fault: empty (finish reason length)"
    );
}

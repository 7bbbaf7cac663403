//! A small hand-built run, the same every time: for snapshot tests of the renderings and for
//! trying them without running a search. Not a real measurement.

use ksearch_run::events::RunEvent;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use ksearch_core::protocol::{
    CapturedOutput, CompileReport, ContenderTiming, ErrorStats, EvaluateResult, Phases, Role,
    Status, WorkloadReport,
};
use ksearch_core::record::{
    AttemptKind, AttemptRecord, CycleOutcome, CycleRecord, Evaluation, LlmCallRecord, ModelRole,
    TokenUsage,
};
use ksearch_core::score::{Speedup, WorkloadSpeedup};
use ksearch_core::stats::TimingStats;
use ksearch_core::task::{BackendKind, Task};
use ksearch_core::tree::{Action, Gate, Impact, Impacts, NewNode, Risk, Solution, Tree};
use ksearch_core::tree_edit::{EditOp, EditScript, apply};
use ksearch_run::{EngineState, RunConfig, StopReason};
use ksearch_store::{RunStore, StoreError, content_hash};
use serde_json::json;

use crate::data::RunData;

const TASK_TOML: &str = r#"format = 1
name = "softmax"
description = "Row-wise softmax of a float32 matrix."
class = "reduction"
backend = "c"
axes = ["rows", "cols"]

[[inputs]]
name = "x"
shape = ["rows", "cols"]
dtype = "f32"

[[outputs]]
name = "y"
shape = ["rows", "cols"]
dtype = "f32"

[[workloads]]
name = "small"
axes = { rows = 61, cols = 1000 }

[[workloads]]
name = "wide"
axes = { rows = 128, cols = 32768 }

[reference]
file = "reference.c"

[seed]
file = "seed.c"
"#;

const SEED: &str = "#include <math.h>
#include <stdint.h>

void softmax(const float *restrict x, float *restrict y, int64_t rows, int64_t cols) {
    for (int64_t r = 0; r < rows; r++) {
        float m = x[r * cols];
        for (int64_t c = 1; c < cols; c++) m = fmaxf(m, x[r * cols + c]);
        float s = 0.0f;
        for (int64_t c = 0; c < cols; c++) s += expf(x[r * cols + c] - m);
        for (int64_t c = 0; c < cols; c++) y[r * cols + c] = expf(x[r * cols + c] - m) / s;
    }
}
";

const VECTORIZED: &str = "#include <math.h>
#include <stdint.h>

void softmax(const float *restrict x, float *restrict y, int64_t rows, int64_t cols) {
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = x + r * cols;
        float *yr = y + r * cols;
        float m = xr[0];
        #pragma omp simd reduction(max:m)
        for (int64_t c = 1; c < cols; c++) m = fmaxf(m, xr[c]);
        float s = 0.0f;
        #pragma omp simd reduction(+:s)
        for (int64_t c = 0; c < cols; c++) { yr[c] = expf(xr[c] - m); s += yr[c]; }
        for (int64_t c = 0; c < cols; c++) y[r * cols + c] = yr[c] / s;
    }
}
";

const RECIPROCAL: &str = "#include <math.h>
#include <stdint.h>

void softmax(const float *restrict x, float *restrict y, int64_t rows, int64_t cols) {
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = x + r * cols;
        float *yr = y + r * cols;
        float m = xr[0];
        #pragma omp simd reduction(max:m)
        for (int64_t c = 1; c < cols; c++) m = fmaxf(m, xr[c]);
        float s = 0.0f;
        #pragma omp simd reduction(+:s)
        for (int64_t c = 0; c < cols; c++) { yr[c] = expf(xr[c] - m); s += yr[c]; }
        const float inv = 1.0f / s;
        #pragma omp simd
        for (int64_t c = 0; c < cols; c++) yr[c] *= inv;
    }
}
";

const TILED: &str = "/* rows in tiles of 4 */\n";
const BROKEN: &str = "void softmax(const float *x, float *y, long rows, long cols) { unroll(4) }\n";
const WRONG: &str = "/* unrolled by 4, drops the remainder */\n";
const HANG: &str = "/* a two-pass online softmax that never ends */\n";

const SEED_PY: &str = "import mlx.core as mx


def run(x, *, rows, cols):
    return mx.softmax(x, axis=-1)
";

const VECTORIZED_PY: &str = "import mlx.core as mx


def run(x, *, rows, cols):
    e = mx.exp(x - mx.max(x, axis=-1, keepdims=True))
    return e / mx.sum(e, axis=-1, keepdims=True)
";

const RECIPROCAL_PY: &str = "import mlx.core as mx

# The harness sets this global before the module runs; so does the exported package.
_TARGET = KSEARCH_TARGET


def run(x, *, rows, cols):
    e = mx.exp(x - mx.max(x, axis=-1, keepdims=True))
    return e * (1.0 / mx.sum(e, axis=-1, keepdims=True))
";

const TILED_PY: &str = "# rows in tiles of 4\n";
const BROKEN_PY: &str = "def run(x, *, rows, cols):\n    return mx.softmax(x axis=-1)\n";
const WRONG_PY: &str = "# unrolled by 4, drops the remainder\n";
const HANG_PY: &str = "# a two-pass online softmax that never ends\n";

/// The sample's sources, in the language of its backend.
struct Sources {
    ext: &'static str,
    seed: &'static str,
    vectorized: &'static str,
    reciprocal: &'static str,
    tiled: &'static str,
    broken: &'static str,
    wrong: &'static str,
    hang: &'static str,
}

fn sources(backend: BackendKind) -> Sources {
    match backend {
        BackendKind::C => Sources {
            ext: "c",
            seed: SEED,
            vectorized: VECTORIZED,
            reciprocal: RECIPROCAL,
            tiled: TILED,
            broken: BROKEN,
            wrong: WRONG,
            hang: HANG,
        },
        BackendKind::Mlx | BackendKind::Torch => Sources {
            ext: "py",
            seed: SEED_PY,
            vectorized: VECTORIZED_PY,
            reciprocal: RECIPROCAL_PY,
            tiled: TILED_PY,
            broken: BROKEN_PY,
            wrong: WRONG_PY,
            hang: HANG_PY,
        },
    }
}

fn action(title: &str, expected: f64, difficulty: u8) -> Action {
    Action {
        title: title.into(),
        description: format!("{title}, keeping everything else."),
        difficulty,
        score: 0.5,
        expected_speedup: expected,
        rationale: format!("cost model: {expected:.2}× over the parent"),
    }
}

fn new_node(title: &str, expected: f64, difficulty: u8, rating: f64) -> NewNode {
    NewNode {
        decision: format!("{title} (from the parent's code)"),
        action: action(title, expected, difficulty),
        rating,
        confidence: 0.6,
        impacts: Impacts {
            memory_bandwidth: Impact {
                rating: 2.0,
                risk: Risk::Low,
                notes: String::new(),
            },
            register_pressure: Impact {
                rating: 4.0,
                risk: Risk::Medium,
                notes: "more live vectors".into(),
            },
            compute_fit: Impact {
                rating: 7.0,
                risk: Risk::Low,
                notes: "uses the full vector width".into(),
            },
        },
        payload: serde_json::Value::Null,
    }
}

fn timing(median: f64) -> TimingStats {
    TimingStats::from_samples(
        vec![median * 1.02, median, median * 0.98, median * 1.10, median],
        4,
    )
}

/// A passing evaluation: per workload the candidate's, the parent's and the baseline's median.
/// Per workload: name, candidate median, parent median (if timed), baseline median.
type Row<'a> = (&'a str, f64, Option<f64>, f64);

fn passed(round: u64, rows: &[Row<'_>]) -> Evaluation {
    let workloads = rows
        .iter()
        .map(|(name, cand, parent, base)| {
            let mut timings = vec![ContenderTiming {
                role: Role::Candidate,
                label: "candidate".into(),
                stats: timing(*cand),
            }];
            if let Some(p) = parent {
                timings.push(ContenderTiming {
                    role: Role::Parent,
                    label: "parent".into(),
                    stats: timing(*p),
                });
            }
            timings.push(ContenderTiming {
                role: Role::Baseline,
                label: "reference (reference.c)".into(),
                stats: timing(*base),
            });
            WorkloadReport {
                name: (*name).into(),
                status: Status::Passed,
                message: None,
                errors: Some(ErrorStats {
                    max_abs_err: 3.0e-8,
                    max_rel_err: 2.0e-6,
                    norm_rel_err: 4.0e-8,
                    seeds_checked: 4,
                }),
                timings,
            }
        })
        .collect();
    let over = |pick: &dyn Fn(&Row<'_>) -> Option<f64>| {
        let ws: Option<Vec<WorkloadSpeedup>> = rows
            .iter()
            .map(|r| {
                pick(r).map(|other| WorkloadSpeedup {
                    workload: r.0.into(),
                    candidate_ms: r.1,
                    other_ms: other,
                    speedup: other / r.1,
                })
            })
            .collect();
        ws.map(|workloads| Speedup {
            geomean: ksearch_core::score::geomean(
                &workloads.iter().map(|w| w.speedup).collect::<Vec<_>>(),
            ),
            workloads,
        })
    };
    Evaluation {
        result: EvaluateResult {
            id: round,
            status: Status::Passed,
            message: "passed 2 workload(s) × 3 seed(s) and a re-check after timing".into(),
            compile: Some(CompileReport {
                command: "cc -O3 -march=native -shared -fPIC -o candidate.so candidate.c -lm"
                    .into(),
                compiler: "cc (Debian 12.2.0-14) 12.2.0".into(),
                seconds: 0.21,
                log: String::new(),
            }),
            workloads,
            phases: Phases {
                compile_s: 0.21,
                check_s: 0.05,
                timing_s: 0.9,
            },
            output: CapturedOutput::default(),
            sandbox: None,
            described: Vec::new(),
        },
        speedup: over(&|r| Some(r.3)),
        speedup_vs_parent: over(&|r| r.2),
        baseline: "reference (reference.c)".into(),
        wall_s: 1.25,
        load: None,
        caveats: Vec::new(),
    }
}

fn failed(round: u64, status: Status, message: &str, log: &str) -> Evaluation {
    Evaluation {
        result: EvaluateResult {
            id: round,
            status,
            message: message.into(),
            compile: Some(CompileReport {
                command: "cc -O3 -march=native -shared -fPIC -o candidate.so candidate.c -lm"
                    .into(),
                compiler: "cc (Debian 12.2.0-14) 12.2.0".into(),
                seconds: 0.1,
                log: log.into(),
            }),
            workloads: Vec::new(),
            phases: Phases {
                compile_s: 0.1,
                check_s: 0.0,
                timing_s: 0.0,
            },
            output: CapturedOutput::default(),
            sandbox: None,
            described: Vec::new(),
        },
        speedup: None,
        speedup_vs_parent: None,
        baseline: "reference (reference.c)".into(),
        wall_s: 0.2,
        load: None,
        caveats: Vec::new(),
    }
}

fn solution(round: u64, text: &str, file: &str, eval: &Evaluation, gate: Gate) -> Solution {
    let vs_parent = eval.speedup_vs_parent.as_ref().map(|s| s.geomean);
    Solution {
        round,
        source_hash: content_hash(text),
        source_file: file.into(),
        speedup: eval.speedup.as_ref().map(|s| s.geomean),
        speedup_vs_parent: vs_parent,
        vs_parent_interval: vs_parent.map(|v| (v * 0.96, v * 1.04)),
        gate,
        latency_ms: eval.result.medians(Role::Candidate),
        baseline_ms: eval.result.medians(Role::Baseline),
    }
}

#[allow(clippy::too_many_arguments)]
fn attempt(
    ext: &str,
    round: u64,
    node: u32,
    cycle: u64,
    kind: AttemptKind,
    text: &str,
    note: &str,
    evaluation: Option<Evaluation>,
    improved: bool,
) -> AttemptRecord {
    AttemptRecord {
        round,
        node,
        cycle,
        kind,
        source_hash: content_hash(text),
        source_file: format!("softmax_r{round}.{ext}"),
        note: note.into(),
        evaluation,
        improved,
        payload: serde_json::Value::Null,
    }
}

/// The sample run: a softmax task, 7 rounds, a tree of 7 nodes (one removed after failing),
/// every attempt status the engine produces in a run like this one.
pub fn run_data(backend: BackendKind) -> RunData {
    let src = sources(backend);
    let ext = src.ext;
    let mut spec =
        ksearch_core::parse_task(TASK_TOML, "task.toml").expect("the sample task parses");
    spec.backend = backend;
    spec.reference.file = format!("reference.{ext}");
    spec.seed.file = format!("seed.{ext}");
    let task: Task = serde_json::from_value(json!({
        "id": format!("{}/softmax", if backend == BackendKind::C { "cpu" } else { "mlx" }),
        "spec": spec,
        "reference": { "file": format!("reference.{ext}"), "text": src.seed },
        "seed": { "file": format!("seed.{ext}"), "text": src.seed },
        "baseline": null,
    }))
    .expect("the sample task deserialises");
    let config: RunConfig = serde_json::from_value(json!({
        "format": 1,
        "ksearch_version": "0.1.0",
        "proposer": "llm",
        "llm": {
            "reasoning": "openai:gpt-5",
            "codegen": "openai:gpt-5-mini",
            "base_url": null,
            "max_cost_usd": 5.0,
            "reasoning_effort": "medium",
            "max_output_tokens": 16000,
        },
        "seed": 7,
        "window": 5,
        "max_cycle_attempts": 15,
        "eval": ksearch_run::EvalSettings::default(),
        "created_unix": 1_767_225_600u64,
        "hardware": "Sample CPU @ 3.0GHz, 8 cores, AVX2",
    }))
    .expect("the sample config deserialises");

    let seed_eval = passed(
        0,
        &[("small", 0.25, None, 0.68), ("wide", 11.0, None, 30.0)],
    );
    let e1 = passed(
        1,
        &[
            ("small", 0.10, Some(0.25), 0.68),
            ("wide", 4.5, Some(11.0), 30.0),
        ],
    );
    let e2 = passed(
        2,
        &[
            ("small", 0.11, Some(0.25), 0.68),
            ("wide", 4.6, Some(11.0), 30.0),
        ],
    );
    let e3 = passed(
        3,
        &[
            ("small", 0.245, Some(0.25), 0.68),
            ("wide", 10.9, Some(11.0), 30.0),
        ],
    );
    let e6 = passed(
        6,
        &[
            ("small", 0.08, Some(0.10), 0.68),
            ("wide", 3.6, Some(4.5), 30.0),
        ],
    );

    let mut tree = Tree::new(
        vec!["the task's seed kernel, measured once (round 0)".into()],
        solution(
            0,
            src.seed,
            &format!("seed.{ext}"),
            &seed_eval,
            Gate::Unmeasured,
        ),
    );
    let ins = |parent, n| EditOp::Insert { parent, node: n };
    apply(
        &mut tree,
        &EditScript {
            ops: vec![
                ins(0, new_node("vectorize the row loops", 2.0, 2, 7.5)),
                ins(0, new_node("tile rows by 4", 1.3, 3, 5.0)),
                ins(0, new_node("unroll the exp loop by 4", 1.2, 2, 4.0)),
            ],
        },
        0,
    )
    .expect("the sample world model applies");
    tree.attach(
        1,
        solution(
            1,
            src.vectorized,
            &format!("softmax_r1.{ext}"),
            &e1,
            Gate::Better,
        ),
        2,
    );
    tree.note(
        1,
        "measured 2.46× the parent (95% interval 2.36–2.56): better than the parent".into(),
        2,
    );
    apply(
        &mut tree,
        &EditScript {
            ops: vec![
                ins(1, new_node("multiply by the reciprocal", 1.2, 1, 6.0)),
                ins(1, new_node("online softmax in two passes", 1.4, 4, 5.5)),
            ],
        },
        2,
    )
    .expect("the sample refine applies");
    tree.attach(
        2,
        solution(3, src.tiled, &format!("softmax_r3.{ext}"), &e3, Gate::Same),
        3,
    );
    tree.note(
        2,
        "measured 1.01× the parent: the same as the parent".into(),
        3,
    );
    tree.record_failed_cycle(3, 5);
    tree.note(
        3,
        "cycle 3 passed nothing: compile_error, incorrect".into(),
        5,
    );
    tree.attach(
        4,
        solution(
            6,
            src.reciprocal,
            &format!("softmax_r6.{ext}"),
            &e6,
            Gate::Better,
        ),
        6,
    );
    // Node 5 ("online softmax") was split after a failed cycle: node 6 took its place and
    // node 5 is gone from the tree, but its attempt stays in the record.
    apply(
        &mut tree,
        &EditScript {
            ops: vec![EditOp::Split {
                node: 5,
                into: vec![
                    new_node("online max and sum in one pass", 1.2, 3, 5.0),
                    new_node("normalise in a second pass", 1.05, 2, 4.0),
                ],
            }],
        },
        7,
    )
    .expect("the sample split applies");

    let attempts = vec![
        attempt(
            ext,
            0,
            0,
            0,
            AttemptKind::Seed,
            src.seed,
            "the task's seed kernel",
            Some(seed_eval),
            false,
        ),
        attempt(
            ext,
            1,
            1,
            1,
            AttemptKind::Implement,
            src.vectorized,
            "vectorized the three row loops",
            Some(e1),
            true,
        ),
        attempt(
            ext,
            2,
            1,
            1,
            AttemptKind::Improve,
            src.vectorized,
            "fused the max into the load",
            Some(e2),
            false,
        ),
        attempt(
            ext,
            3,
            2,
            2,
            AttemptKind::Implement,
            src.tiled,
            "rows in tiles of 4",
            Some(e3),
            true,
        ),
        attempt(
            ext,
            4,
            3,
            3,
            AttemptKind::Implement,
            src.broken,
            "unrolled the exp loop",
            Some(failed(
                4,
                Status::CompileError,
                "softmax_r4.c:1:66: error: implicit declaration of function 'unroll'",
                "softmax_r4.c: In function 'softmax':\nsoftmax_r4.c:1:66: error: implicit declaration of function 'unroll'",
            )),
            false,
        ),
        attempt(
            ext,
            5,
            3,
            3,
            AttemptKind::Debug,
            src.wrong,
            "declared the helper",
            Some(failed(
                5,
                Status::Incorrect,
                "workload small, seed 1: y[0][996] = NaN, expected 0.00102 (max abs err NaN)",
                "",
            )),
            false,
        ),
        attempt(
            ext,
            6,
            4,
            4,
            AttemptKind::Implement,
            src.reciprocal,
            "one division per row",
            Some(e6),
            true,
        ),
        attempt(
            ext,
            7,
            5,
            5,
            AttemptKind::Implement,
            src.hang,
            "online softmax",
            Some(failed(
                7,
                Status::Timeout,
                "no result after 300 s: killed",
                "",
            )),
            false,
        ),
    ];
    let cycle = |id, node, start, end, outcome, best_round| CycleRecord {
        id,
        node,
        started_round: start,
        ended_round: Some(end),
        outcome: Some(outcome),
        best_round,
        stagnation: 1,
        attempts: u32::try_from(end - start + 1).unwrap_or(1),
    };
    let cycles = vec![
        cycle(1, 1, 1, 2, CycleOutcome::Passed, Some(1)),
        cycle(2, 2, 3, 3, CycleOutcome::Passed, Some(3)),
        cycle(3, 3, 4, 5, CycleOutcome::Failed, None),
        cycle(4, 4, 6, 6, CycleOutcome::Passed, Some(6)),
        cycle(5, 5, 7, 7, CycleOutcome::Failed, None),
    ];
    let too_hard = |node, decision: &str| RunEvent::TooHard {
        node,
        decision: decision.into(),
    };
    let events = vec![(5, too_hard(3, "Downgrade")), (7, too_hard(5, "Split"))];
    let state = EngineState {
        next_round: 8,
        next_cycle: 6,
        current_cycle: None,
        next_node: tree.next_id(),
        initialized: true,
        round_budget: Some(7),
        wall_s: 12.5,
        eval_s: 9.75,
        sessions: 1,
        stop_reason: Some(StopReason::Iterations),
        empty_cycles: 0,
        evaluating: None,
        evaluating_also: Vec::new(),
        stop_detail: None,
        refine_owed: None,
    };
    let dir = PathBuf::from("/runs/softmax-sample");
    let call =
        |key: &str, role, model: &str, purpose: &str, round, input, output, cost| LlmCallRecord {
            key: key.into(),
            role,
            model: model.into(),
            purpose: purpose.into(),
            round,
            request: json!({}),
            response: json!({}),
            usage: TokenUsage {
                input,
                output,
                cached_input: 0,
                reasoning: 0,
            },
            cost_usd: Some(cost),
            replayed: false,
            seconds: 3.5,
            unfinished_round: false,
        };
    let llm_calls = vec![
        call(
            "k0",
            ModelRole::Reasoning,
            "openai:gpt-5",
            "world_model",
            0,
            4200,
            1800,
            0.0233,
        ),
        call(
            "k1",
            ModelRole::Codegen,
            "openai:gpt-5-mini",
            "implement",
            1,
            3100,
            900,
            0.0026,
        ),
    ];
    let summary = ksearch_run::summarize(
        &dir, &task, &config, &state, &tree, &attempts, &cycles, &llm_calls,
    );
    let sources = [
        src.seed,
        src.vectorized,
        src.reciprocal,
        src.tiled,
        src.broken,
        src.wrong,
        src.hang,
    ]
    .iter()
    .map(|t| (content_hash(t), (*t).to_owned()))
    .collect::<BTreeMap<_, _>>();
    RunData {
        dir,
        task,
        config,
        state,
        summary,
        tree,
        attempts,
        cycles,
        events,
        llm_calls,
        sources,
    }
}

/// Write a run's records into a new run directory, as the engine would have (the meta keys
/// `task` and `config`, the engine state, nodes, cycles, attempts, events, artifacts).
pub fn write_run(data: &RunData, dir: &Path) -> Result<(), StoreError> {
    let mut store = RunStore::create(dir)?;
    for text in data.sources.values() {
        store.put_artifact(&ksearch_core::task::Source {
            file: String::new(),
            text: text.clone(),
        })?;
    }
    store.transaction(|tx| {
        tx.set_meta("task", &data.task)?;
        tx.set_meta("config", &data.config)?;
        tx.set_state(&data.state)?;
        for n in data.tree.nodes() {
            tx.put_node(n)?;
        }
        for c in &data.cycles {
            tx.put_cycle(c)?;
        }
        for a in &data.attempts {
            tx.put_attempt(a)?;
        }
        for (round, event) in &data.events {
            let (kind, value) = event.stored();
            tx.add_event(*round, &kind, &value)?;
        }
        for c in &data.llm_calls {
            tx.add_llm_call(c)?;
        }
        Ok(())
    })
}

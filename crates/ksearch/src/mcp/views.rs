//! What the MCP tools return: short JSON views of a run, quoting the numbers it measured.

use std::path::Path;

use ksearch_core::protocol::Role;
use ksearch_core::record::AttemptRecord;
use ksearch_core::tree::{Node, Tree};
use ksearch_llm::ManualCall;
use ksearch_run::RunSummary;
use serde_json::{Value, json};

/// Most characters of an evaluation's message quoted.
const MESSAGE_LIMIT: usize = 600;

fn clip(text: &str) -> String {
    if text.len() <= MESSAGE_LIMIT {
        return text.to_owned();
    }
    let mut end = MESSAGE_LIMIT;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

/// One evaluated attempt: status, speedups and the candidate's median latency per workload.
pub(super) fn attempt(a: &AttemptRecord) -> Value {
    let Some(e) = &a.evaluation else {
        return json!({ "round": a.round, "node": a.node, "kind": a.kind.as_str(), "status": "not evaluated" });
    };
    let latency: serde_json::Map<String, Value> = e
        .result
        .workloads
        .iter()
        .filter_map(|w| Some((w.name.clone(), json!(w.timing(Role::Candidate)?.median_ms))))
        .collect();
    json!({
        "round": a.round,
        "node": a.node,
        "kind": a.kind.as_str(),
        "status": e.result.status,
        "message": clip(&e.result.message),
        "speedup": e.speedup.as_ref().map(|s| s.geomean),
        "speedup_vs_parent": e.speedup_vs_parent.as_ref().map(|s| s.geomean),
        "baseline": e.baseline,
        "latency_ms": latency,
        "improved": a.improved,
    })
}

/// The run's numbers: rounds, best speedups, stop reason, model use.
pub(super) fn summary(s: &RunSummary) -> Value {
    json!({
        "run_dir": s.run_dir,
        "task": s.task,
        "rounds": s.rounds,
        "nodes": s.nodes,
        "stop_reason": s.stop_reason,
        "baseline": s.baseline,
        "best": best(s),
        "llm": s.llm,
    })
}

/// The best node and its latencies against the seed's.
pub(super) fn best(s: &RunSummary) -> Value {
    json!({
        "node": s.best.node,
        "title": s.best.title,
        "speedup": s.best.speedup,
        "speedup_vs_seed": s.best.speedup_vs_seed,
        "latency_ms": s.best.latency_ms,
        "seed_latency_ms": s.seed_latency_ms,
        "baseline": s.baseline,
    })
}

/// One node, short: its action, prediction and measurement.
pub(super) fn node(n: &Node) -> Value {
    json!({
        "id": n.id,
        "parent": n.parent,
        "title": n.action.title,
        "open": n.is_open(),
        "difficulty": n.action.difficulty,
        "score": n.action.score,
        "expected_speedup": n.action.expected_speedup,
        "measured_speedup": n.solution.as_ref().and_then(|s| s.speedup),
        "speedup_vs_parent": n.solution.as_ref().and_then(|s| s.speedup_vs_parent),
        "failed_cycles": n.failed_cycles,
    })
}

/// Every node, short.
pub(super) fn tree(t: &Tree) -> Value {
    Value::Array(t.nodes().map(node).collect())
}

/// The call a run waits for, with its whole prompt.
pub(super) fn pending(call: &ManualCall) -> Value {
    let prompt = fs_err::read_to_string(&call.prompt).unwrap_or_default();
    json!({
        "call": call.call,
        "role": call.role,
        "purpose": call.purpose,
        "round": call.round,
        "expected": call.expected,
        "answer_file": call.answer,
        "prompt": prompt,
    })
}

/// A run's summary, when it has one to read yet.
pub(super) fn read(run_dir: &Path) -> Option<(RunSummary, Tree, Vec<AttemptRecord>)> {
    ksearch_run::read_summary(run_dir).ok()
}

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

/// How the prompt file tells a person to answer (`ksearch answer`, then `ksearch resume`), up to
/// the blank line after it; an agent over MCP answers with a tool instead.
const FILE_ANSWER_NOTE: &str = "Answer as the model would:";

/// What an agent over MCP is told instead of [`FILE_ANSWER_NOTE`]'s paragraph.
const TOOL_ANSWER_NOTE: &str = "Answer as the model would: give only the answer's text to the \
`submit_answer` tool, with this run's `run_dir`; the run reads it, evaluates any kernel and \
returns the next call.";

/// A prompt file's text as an agent over MCP reads it: its note on how to answer names the
/// `submit_answer` tool, not `ksearch answer` and `ksearch resume`.
pub(super) fn for_tools(prompt: &str) -> String {
    let Some(start) = prompt.find(FILE_ANSWER_NOTE) else {
        return prompt.to_owned();
    };
    let end = prompt[start..]
        .find("\n\n")
        .map_or(prompt.len(), |i| start + i);
    format!("{}{TOOL_ANSWER_NOTE}{}", &prompt[..start], &prompt[end..])
}

/// The call a run waits for, with its whole prompt.
pub(super) fn pending(call: &ManualCall) -> Value {
    let prompt = for_tools(&fs_err::read_to_string(&call.prompt).unwrap_or_default());
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

/// A run's summary, or why there is none to read: no such directory, a run not yet
/// initialised (`not_yet`), or the error that reading it met.
#[allow(clippy::type_complexity)] // the parts of read_summary, and a tool error's two fields
pub(super) fn read_or_why(
    run_dir: &Path,
    not_yet: &'static str,
) -> Result<(RunSummary, Tree, Vec<AttemptRecord>), (&'static str, String)> {
    if !run_dir.is_dir() {
        return Err((
            "no such run",
            format!("{} is not a directory", run_dir.display()),
        ));
    }
    ksearch_run::read_summary(run_dir).map_err(|e| match e {
        ksearch_run::RunError::Incomplete { .. } => (not_yet, e.to_string()),
        e => ("cannot read the run", e.to_string()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_prompt_an_agent_reads_names_the_tool_that_answers() {
        let file = "# ksearch model call 3\n\n- call: 3\n\nAnswer as the model would: put only the answer's text in the answer file, or give it to `ksearch answer`.\nThen `ksearch resume` the run.\n\nThe conversation follows.\n";
        let tools = for_tools(file);
        assert!(tools.contains("`submit_answer` tool"), "{tools}");
        assert!(!tools.contains("ksearch answer"), "{tools}");
        assert!(!tools.contains("ksearch resume"), "{tools}");
        assert!(tools.starts_with("# ksearch model call 3\n\n- call: 3\n\n"));
        assert!(tools.ends_with("returns the next call.\n\nThe conversation follows.\n"));
        // The real template's note is the one replaced.
        let template = include_str!("../../../ksearch-llm/data/manual_prompt.md");
        assert!(!for_tools(template).contains("ksearch answer"));
        assert_eq!(for_tools("no note here"), "no note here");
    }
}

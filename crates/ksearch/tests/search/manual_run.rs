//! `--model manual` end to end: the run pauses at every model call with the prompt in a file,
//! the test answers as a model would (once with no usable format, to see the repair re-ask),
//! the run resumes, survives a kill, and ends with a summary, a report, an export and a replay
//! like any other LLM run.

use std::path::Path;
use std::process::Output;
use std::time::Duration;

use ksearch_llm::{ManualCall, pending_call};
use serde_json::Value;

use crate::kernels;
use crate::support::{QUICK, ksearch, shape, wait_for_store};

/// The pause's exit code (`exit_codes::PAUSED`).
const PAUSED: i32 = 4;

fn action(title: &str, score: f64, expected: f64) -> Value {
    serde_json::json!({
        "title": title, "description": format!("{title}, nothing else."), "difficulty": 2, "score": score,
        "expected_speedup": expected, "rationale": "fewer operations per element", "rating": 6, "confidence": 0.5,
        "impacts": {"memory_bandwidth": {"rating": 3, "risk": "low", "notes": ""},
                    "register_pressure": {"rating": 2, "risk": "low", "notes": ""},
                    "compute_fit": {"rating": 6, "risk": "medium", "notes": "fewer divisions"}}
    })
}

fn fenced_json(v: &Value) -> String {
    format!(
        "```json\n{}\n```\n",
        serde_json::to_string_pretty(v).unwrap()
    )
}

fn fenced_c(code: &str) -> String {
    format!("Only what the action asks.\n\n```c\n{code}```\n")
}

/// What a competent model would answer to a call for `purpose` whose prompt is `prompt`.
pub(crate) fn answer(purpose: &str, prompt: &str) -> String {
    match purpose {
        // The first world model forgets the format: the repair re-ask must follow.
        "world_model" => "The division in the last pass is the main cost.".into(),
        "world_model/repair" => {
            assert!(
                prompt.contains("could not be used"),
                "the re-ask states the error:\n{prompt}"
            );
            fenced_json(&serde_json::json!({
                "classification": "row-wise reduction", "canonical_form": "y = exp(x - max x) / sum exp(x - max x)",
                "data_layout": "rows contiguous", "bottlenecks": [
                    {"regime": "small rows", "hypothesis": "loop overhead"},
                    {"regime": "large rows", "hypothesis": "memory bandwidth"},
                    {"regime": "all", "hypothesis": "exp throughput"}],
                "knobs": ["reciprocal", "fusion"], "skeleton": "max; exp+sum; scale",
                "kernel_families": ["three-pass", "online two-pass"],
                "actions": [action("Multiply by the reciprocal", 0.6, 1.2), action("Fuse exp and sum", 0.9, 1.1), action("Unroll the max loop", 0.3, 1.05)]
            }))
        }
        // The best-scored action comes first: a kernel that does not compile, then the fix.
        "implement" => fenced_c(&kernels::broken()),
        "debug" | "improve" => fenced_c(&kernels::good()),
        "refine" => {
            let node: u64 = prompt
                .split("## Evidence from the cycle on node ")
                .nth(1)
                .and_then(|r| r.split_whitespace().next())
                .and_then(|n| n.parse().ok())
                .expect("the refine prompt names its node");
            fenced_json(&serde_json::json!({
                "reflection": {"code_summary": "scalar softmax", "followed_action": true, "belief_changes": "fusion alone does little", "prediction_gap": "exp dominates"},
                "edits": [{"op": "insert", "parent": node, "node": action("Vectorize the exp pass", 0.5, 1.5)}]
            }))
        }
        "too_hard" => {
            fenced_json(&serde_json::json!({"decision": "delete", "reason": "not worth it"}))
        }
        other => panic!("no answer for a `{other}` call"),
    }
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Answers the pending call, by the answer file itself or through `ksearch answer` (from a
/// file or stdin), in turn. Returns the call answered.
fn answer_pending(rd: &Path, turn: usize) -> ManualCall {
    let call = pending_call(&rd.join("manual"))
        .unwrap()
        .expect("a paused run has a pending call");
    let prompt = std::fs::read_to_string(&call.prompt).unwrap();
    let reply = answer(&call.purpose, &prompt);
    match turn % 3 {
        0 => std::fs::write(&call.answer, &reply).unwrap(),
        1 => {
            let file = rd.with_extension("answer.md");
            std::fs::write(&file, &reply).unwrap();
            let out = ksearch(&["answer", rd.to_str().unwrap(), file.to_str().unwrap()])
                .output()
                .unwrap();
            assert!(out.status.success(), "{}", text(&out));
            assert!(text(&out).contains(&format!("answered model call {}", call.call)));
        }
        _ => {
            use std::io::Write;
            let mut child = ksearch(&["answer", rd.to_str().unwrap(), "-"])
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap();
            child
                .stdin
                .take()
                .unwrap()
                .write_all(reply.as_bytes())
                .unwrap();
            let out = child.wait_with_output().unwrap();
            assert!(out.status.success(), "{}", text(&out));
        }
    }
    assert_eq!(std::fs::read_to_string(&call.answer).unwrap(), reply);
    call
}

/// The pause is the last line on stderr (after the progress lines), said once, naming both files.
fn assert_paused(out: &Output, rd: &Path) {
    let all = text(out);
    assert_eq!(out.status.code(), Some(PAUSED), "{all}");
    let call = pending_call(&rd.join("manual")).unwrap().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let line = stderr.trim().lines().last().unwrap_or_default();
    assert_eq!(
        stderr.matches("paused: ").count(),
        1,
        "one pause line: {stderr}"
    );
    assert!(
        line.starts_with("paused: model call")
            && line.contains(&call.prompt.display().to_string())
            && line.contains(&call.answer.display().to_string()),
        "{line}"
    );
}

#[test]
fn a_manual_run_pauses_for_each_answer_and_ends_like_any_llm_run() {
    let dir = tempfile::tempdir().unwrap();
    let rd = dir.path().join("run");
    let rd_s = rd.to_str().unwrap();
    let mut args = vec![
        "run",
        "cpu/softmax",
        "--model",
        "manual",
        "--iterations",
        "2",
        "--window",
        "2",
        "--run-dir",
        rd_s,
        "--json",
    ];
    args.extend_from_slice(QUICK);
    let out = ksearch(&args).current_dir(dir.path()).output().unwrap();
    assert_paused(&out, &rd);
    // The first call's file holds the whole prompt.
    let first = pending_call(&rd.join("manual")).unwrap().unwrap();
    assert_eq!(
        (first.call, first.role.as_str(), first.purpose.as_str()),
        (1, "reasoning", "world_model")
    );
    let prompt = std::fs::read_to_string(&first.prompt).unwrap();
    for part in [
        "### ksearch system",
        "### ksearch user",
        "Build the initial world model",
        "expected answer: the world model as ONE JSON object",
    ] {
        assert!(prompt.contains(part), "{part}:\n{prompt}");
    }

    let mut answered = Vec::new();
    let mut killed = false;
    let summary = loop {
        assert!(answered.len() < 20, "the run never ended: {answered:?}");
        let call = answer_pending(&rd, answered.len());
        answered.push(call.purpose.clone());
        let resume = ["resume", rd_s, "--json"];
        if call.purpose == "debug" && !killed {
            // Killed while it evaluates the answer: the resume evaluates it again, from the
            // journal, without asking for it a second time.
            killed = true;
            let mut child = ksearch(&resume)
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .spawn()
                .unwrap();
            assert!(
                wait_for_store(&rd, Duration::from_secs(60), |s| s
                    .attempts
                    .iter()
                    .any(|a| a.round == 2)),
                "the debug attempt was never recorded"
            );
            child.kill().unwrap();
            child.wait().unwrap();
            let snap = ksearch_store::RunStore::open(&rd)
                .unwrap()
                .snapshot()
                .unwrap();
            assert!(
                snap.attempts
                    .iter()
                    .any(|a| a.round == 2 && a.evaluation.is_none()),
                "killed during the evaluation"
            );
        }
        let out = ksearch(&resume).output().unwrap();
        if out.status.code() == Some(0) {
            break serde_json::from_slice::<Value>(&out.stdout).unwrap();
        }
        assert_paused(&out, &rd);
    };
    assert!(killed, "the run never reached a debug call: {answered:?}");
    // The budget ends with the debug round: the cycle is closed without a refine call (the
    // next session with rounds asks for it first).
    assert_eq!(
        answered,
        ["world_model", "world_model/repair", "implement", "debug"]
    );
    // Every answer asked for once: four calls, four prompt files.
    let files = std::fs::read_dir(rd.join("manual"))
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .ends_with(".prompt.md")
        })
        .count();
    assert_eq!(files, 4);

    assert_eq!(summary["rounds"], 2, "{summary}");
    assert_eq!(summary["stop_reason"], "iterations", "{summary}");
    let reasoning = &summary["llm"]["reasoning manual"];
    let codegen = &summary["llm"]["codegen manual"];
    assert_eq!(reasoning["tokens_estimated"], true, "{summary}");
    assert_eq!(codegen["tokens_estimated"], true, "{summary}");
    assert!(codegen["input_tokens"].as_u64().unwrap() > 100, "{summary}");
    assert_eq!(summary["cost_usd"], 0.0);
    assert!(summary["best"]["speedup"].as_f64().unwrap() > 0.0);

    // The text summary says the tokens are estimates.
    let tree = ksearch(&["tree", rd_s]).output().unwrap();
    assert!(tree.status.success(), "{}", text(&tree));
    assert!(
        text(&tree).contains("tokens (estimated) in"),
        "{}",
        text(&tree)
    );
    let tree_json: Value =
        serde_json::from_slice(&ksearch(&["tree", rd_s, "--json"]).output().unwrap().stdout)
            .unwrap();
    assert!(
        tree_json["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|n| n["id"] != 0 && n["solution"]["round"] == 2),
        "the debug round's kernel is its node's solution: {tree_json}"
    );

    // Report and export read it like any run.
    let report = dir.path().join("report.html");
    let out = ksearch(&["report", rd_s, "--output", report.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let html = std::fs::read_to_string(&report).unwrap();
    assert!(html.contains("manual") && html.contains("tokens (estimated)"));
    let export = dir.path().join("export");
    let out = ksearch(&["export", rd_s, "--output", export.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    assert!(export.join("provenance.json").exists());

    // A replay needs neither the answer files nor the evaluator: the same tree.
    std::fs::remove_dir_all(rd.join("manual")).unwrap();
    let rd2 = dir.path().join("replay");
    let out = ksearch(&[
        "run",
        "cpu/softmax",
        "--replay",
        rd_s,
        "--run-dir",
        rd2.to_str().unwrap(),
        "--json",
    ])
    .output()
    .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let tree2: Value = serde_json::from_slice(
        &ksearch(&["tree", rd2.to_str().unwrap(), "--json"])
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    assert_eq!(shape(&tree2), shape(&tree_json));
}

#[test]
fn answer_refuses_a_run_with_nothing_pending_and_an_empty_answer() {
    let dir = tempfile::tempdir().unwrap();
    let rd = dir.path().join("run");
    let rd_s = rd.to_str().unwrap();
    let out = ksearch(&["answer", rd_s, "-"]).output().unwrap();
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    let mut args = vec![
        "run",
        "cpu/softmax",
        "--model",
        "manual",
        "--iterations",
        "1",
        "--run-dir",
        rd_s,
    ];
    args.extend_from_slice(QUICK);
    let out = ksearch(&args).output().unwrap();
    assert_paused(&out, &rd);
    let empty = dir.path().join("empty.md");
    std::fs::write(&empty, "  \n").unwrap();
    let out = ksearch(&["answer", rd_s, empty.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(text(&out).contains("the answer is empty"), "{}", text(&out));
    // Resumed without an answer, it pauses again on the same call: no new prompt.
    let out = ksearch(&["resume", rd_s]).output().unwrap();
    assert_paused(&out, &rd);
    assert_eq!(pending_call(&rd.join("manual")).unwrap().unwrap().call, 1);
    // A cost cap cannot limit estimated tokens.
    let out = ksearch(&[
        "run",
        "cpu/softmax",
        "--model",
        "manual",
        "--max-cost",
        "1",
        "--run-dir",
        dir.path().join("capped").to_str().unwrap(),
    ])
    .output()
    .unwrap();
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    assert!(text(&out).contains("cannot limit"), "{}", text(&out));
}

//! The agent's path through a manual run, as a newcomer walks it (issue 47): a measured,
//! passed attempt is seen and exported while the run waits for the next answer, the progress
//! line of a resumed session knows where the run stands, and a run out of rounds asks for
//! nothing more (the refine call it owes comes first in the next session).

use std::path::Path;
use std::process::Output;

use ksearch_llm::pending_call;
use serde_json::Value;

use crate::kernels;
use crate::manual_run::answer;
use crate::support::{QUICK, ksearch};

/// The pause's exit code (`exit_codes::PAUSED`).
const PAUSED: i32 = 4;

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// `cpu/softmax` with a seed that does its work twice: a correct kernel is about twice as fast,
/// which the acceptance gate tells from noise.
fn slow_seed_task(dir: &Path) -> std::path::PathBuf {
    let task = dir.join("softmax");
    std::fs::create_dir_all(&task).unwrap();
    let tasks = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tasks/cpu/softmax");
    for file in ["task.toml", "reference.c"] {
        std::fs::copy(tasks.join(file), task.join(file)).unwrap();
    }
    std::fs::write(task.join("seed.c"), kernels::twice_as_slow()).unwrap();
    task
}

/// Answers the pending call: the world model in the form asked, then correct kernels.
fn answer_pending(rd: &Path) -> String {
    let call = pending_call(&rd.join("manual"))
        .unwrap()
        .expect("a paused run has a pending call");
    let prompt = std::fs::read_to_string(&call.prompt).unwrap();
    let reply = match call.purpose.as_str() {
        // The answer the repair re-ask gets, given at once.
        "world_model" => answer(
            "world_model/repair",
            &format!("{prompt}\ncould not be used"),
        ),
        "implement" | "improve" | "debug" => {
            format!("Every row once.\n\n```c\n{}```\n", kernels::good())
        }
        other => answer(other, &prompt),
    };
    std::fs::write(&call.answer, reply).unwrap();
    call.purpose
}

fn json(args: &[&str]) -> Value {
    let out = ksearch(args).output().unwrap();
    assert!(out.status.success(), "{args:?}: {}", text(&out));
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&out)))
}

#[test]
fn a_passed_attempt_is_seen_and_exported_at_once_and_a_spent_budget_asks_for_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let task = slow_seed_task(dir.path());
    let rd = dir.path().join("run");
    let rd_s = rd.to_str().unwrap();
    let mut args = vec![
        "run",
        task.to_str().unwrap(),
        "--model",
        "manual",
        "--iterations",
        "2",
        "--run-dir",
        rd_s,
    ];
    args.extend_from_slice(QUICK);
    let out = ksearch(&args).output().unwrap();
    assert_eq!(out.status.code(), Some(PAUSED), "{}", text(&out));
    assert_eq!(answer_pending(&rd), "world_model");
    let out = ksearch(&["resume", rd_s]).output().unwrap();
    assert_eq!(out.status.code(), Some(PAUSED), "{}", text(&out));
    assert_eq!(answer_pending(&rd), "implement");

    // The kernel is measured, then the run waits for the improve round's answer.
    let out = ksearch(&["resume", rd_s]).output().unwrap();
    assert_eq!(out.status.code(), Some(PAUSED), "{}", text(&out));
    let call = pending_call(&rd.join("manual")).unwrap().unwrap();
    assert_eq!(call.purpose, "improve");
    // The resumed session's progress names the node worked on and the run's best.
    let stderr = String::from_utf8_lossy(&out.stderr);
    let finished = stderr
        .lines()
        .find(|l| l.starts_with("round 1/2") && l.contains("passed"))
        .unwrap_or_else(|| panic!("no finished round 1: {stderr}"));
    assert!(
        finished.contains(" · node ") && !finished.contains("best -"),
        "{finished}"
    );

    // Meanwhile every view shows the passed attempt as the node's solution so far.
    let tree = json(&["tree", rd_s, "--json"]);
    let best = &tree["summary"]["best"];
    let node = best["node"].as_u64().unwrap();
    assert_ne!(node, 0, "the passed attempt is the best: {tree}");
    assert!(
        best["speedup_vs_seed"].as_f64().unwrap() > 1.3,
        "about twice the slow seed: {best}"
    );
    let shown = tree["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["id"] == node)
        .unwrap();
    assert_eq!(shown["solution"]["round"], 1, "{shown}");
    assert!(
        shown["notes"].to_string().contains("cycle under way"),
        "said to be the best so far: {shown}"
    );
    let listing = ksearch(&["tree", rd_s]).output().unwrap();
    assert!(
        text(&listing).contains("(cycle under way: its best attempt so far)"),
        "{}",
        text(&listing)
    );
    let export = dir.path().join("export");
    let exported = json(&[
        "export",
        rd_s,
        "--output",
        export.to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(exported["provenance"]["kernel"]["node"], node, "{exported}");
    let by_node = dir.path().join("by-node");
    let node_s = node.to_string();
    let out = ksearch(&[
        "export",
        rd_s,
        "--node",
        &node_s,
        "--output",
        by_node.to_str().unwrap(),
    ])
    .output()
    .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        !text(&out).contains("no candidate was measured faster"),
        "{}",
        text(&out)
    );

    // The second round spends the budget: the run ends, asking for no refine.
    answer_pending(&rd);
    let out = ksearch(&["resume", rd_s, "--json"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(
        pending_call(&rd.join("manual")).unwrap().is_none(),
        "nothing waits"
    );
    let summary: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(summary["rounds"], 2, "{summary}");
    assert_eq!(summary["best"]["node"], node, "{summary}");
    let tree = json(&["tree", rd_s, "--json"]);
    let closed = tree["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["id"] == node)
        .unwrap();
    assert!(
        !closed["notes"].to_string().contains("cycle under way"),
        "the cycle's end attached it: {closed}"
    );
    // A resume without more rounds asks for nothing either; one with more rounds asks for the
    // owed refine first.
    let out = ksearch(&["resume", rd_s]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let out = ksearch(&["resume", rd_s, "--iterations", "1"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(PAUSED), "{}", text(&out));
    let call = pending_call(&rd.join("manual")).unwrap().unwrap();
    assert_eq!(call.purpose, "refine");
    let prompt = std::fs::read_to_string(&call.prompt).unwrap();
    assert!(
        prompt.contains(&format!("## Evidence from the cycle on node {node}")),
        "{prompt}"
    );
}

#[test]
fn a_run_with_no_rounds_asks_for_no_world_model() {
    let dir = tempfile::tempdir().unwrap();
    let rd = dir.path().join("run");
    let rd_s = rd.to_str().unwrap();
    let mut args = vec![
        "run",
        "cpu/softmax",
        "--model",
        "manual",
        "--iterations",
        "0",
        "--run-dir",
        rd_s,
        "--no-timing",
        "--json",
    ];
    args.extend_from_slice(QUICK);
    let out = ksearch(&args).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let summary: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        (summary["rounds"].as_u64(), summary["stop_reason"].as_str()),
        (Some(0), Some("iterations")),
        "{summary}"
    );
    assert!(
        pending_call(&rd.join("manual")).unwrap().is_none(),
        "no call was made"
    );
    // The first session with rounds asks for it.
    let out = ksearch(&["resume", rd_s, "--iterations", "1"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(PAUSED), "{}", text(&out));
    assert_eq!(
        pending_call(&rd.join("manual")).unwrap().unwrap().purpose,
        "world_model"
    );
}

use std::time::Duration;

use crate::support::{QUICK, alive, children_of, json, run_ok, shape, spawn, wait_for_store};

fn args<'a>(extra: &[&'a str]) -> Vec<&'a str> {
    let mut v = extra.to_vec();
    v.extend_from_slice(QUICK);
    v
}

#[test]
fn a_full_run_on_a_cpu_task() {
    let dir = tempfile::tempdir().unwrap();
    let run_dir = dir.path().join("run");
    let rd = run_dir.to_str().unwrap();
    let j = json(&args(&[
        "run",
        "cpu/softmax",
        "--model",
        "builtin",
        "--iterations",
        "6",
        "--run-dir",
        rd,
        "--json",
    ]));
    assert_eq!(j["rounds"], 6, "{j}");
    assert_eq!(j["stop_reason"], "iterations");
    assert!(j["nodes"].as_u64().unwrap() >= 5, "{j}");
    let best = &j["best"];
    assert!(best["speedup"].as_f64().unwrap() > 0.0);
    assert!(best["speedup_vs_seed"].as_f64().unwrap() >= 1.0, "{j}");
    assert!(best["latency_ms"]["small"].as_f64().unwrap() > 0.0);
    assert_eq!(j["cost_usd"], 0.0);
    assert!(run_dir.join("run.sqlite").exists() && run_dir.join("artifacts").is_dir());

    let tree = run_ok(&["tree", rd]);
    assert!(tree.contains("★") && tree.contains("seed"), "{tree}");
    let tj = json(&["tree", rd, "--json"]);
    assert_eq!(
        tj["nodes"].as_array().unwrap().len() as u64,
        j["nodes"].as_u64().unwrap()
    );

    // Resume with more rounds: counters continue from where the run stopped.
    let j2 = json(&["resume", rd, "--iterations", "2", "--json"]);
    assert_eq!(j2["rounds"], 8, "{j2}");
}

/// A long run is heard from: its directory at once, then the seed's measurement and every
/// round with its evaluation's phases and workloads, on stderr even with `--json` (stdout
/// keeps the result alone); `--quiet` silences it.
#[test]
fn a_run_says_where_it_is_and_what_it_does_on_stderr() {
    let dir = tempfile::tempdir().unwrap();
    let run_dir = dir.path().join("run");
    let rd = run_dir.to_str().unwrap();
    let run = |extra: &[&str]| {
        let mut a = args(&[
            "run",
            "cpu/softmax",
            "--model",
            "builtin",
            "--iterations",
            "1",
        ]);
        a.extend_from_slice(extra);
        crate::support::ksearch(&a).output().unwrap()
    };
    let out = run(&["--run-dir", rd, "--json"]);
    assert!(out.status.success());
    let stderr = String::from_utf8(out.stderr).unwrap();
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines[0], format!("run directory: {rd}"), "{stderr}");
    assert!(lines[1].starts_with("measuring the seed"), "{stderr}");
    for phase in [
        "  compiling (",
        "  checking workload `small` (",
        "  timing workload `small` (",
        "  checking again after timing workload `small` (",
    ] {
        assert!(
            lines.iter().any(|l| l.starts_with(phase)),
            "{phase}: {stderr}"
        );
    }
    assert!(
        lines.iter().any(|l| l.starts_with("seed passed ")),
        "{stderr}"
    );
    assert!(
        lines.iter().any(|l| l.starts_with("round 1/1 · ")),
        "{stderr}"
    );
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).expect("stdout is the result");
    assert_eq!(j["rounds"], 1);
    // A resume says where the run stands and what this session may spend.
    let out = crate::support::ksearch(&["resume", rd, "--iterations", "1", "--json"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(
        stderr.lines().next(),
        Some(format!("resuming the run in {rd}: 1 of 2 rounds done, 1 to go").as_str()),
        "{stderr}"
    );

    let quiet = dir.path().join("quiet");
    let out = run(&["--run-dir", quiet.to_str().unwrap(), "--quiet"]);
    assert!(out.status.success());
    assert_eq!(String::from_utf8_lossy(&out.stderr), "");
}

#[test]
fn a_time_budget_stops_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let rd = dir.path().join("run");
    let j = json(&args(&[
        "run",
        "cpu/linear_recurrence",
        "--iterations",
        "1000",
        "--time",
        "1s",
        "--run-dir",
        rd.to_str().unwrap(),
        "--json",
    ]));
    assert_eq!(j["stop_reason"], "time", "{j}");
    assert!(j["rounds"].as_u64().unwrap() < 1000);
}

#[test]
fn the_same_seed_gives_the_same_tree_shape() {
    // Correctness-only runs: what the proposer does then depends on nothing but the seed.
    let dir = tempfile::tempdir().unwrap();
    let mut shapes = Vec::new();
    for name in ["a", "b"] {
        let rd = dir.path().join(name);
        let rd = rd.to_str().unwrap();
        run_ok(&args(&[
            "run",
            "cpu/matmul",
            "--iterations",
            "7",
            "--seed",
            "5",
            "--no-timing",
            "--run-dir",
            rd,
            "--quiet",
        ]));
        shapes.push(shape(&json(&["tree", rd, "--json"])));
    }
    assert!(shapes[0].len() >= 5, "{:?}", shapes[0]);
    assert_eq!(shapes[0], shapes[1]);
}

fn snapshot_nodes(dir: &std::path::Path) -> Vec<(u32, Option<String>)> {
    let store = ksearch_store::RunStore::open(dir).unwrap();
    store
        .snapshot()
        .unwrap()
        .nodes
        .iter()
        .map(|n| (n.id, n.solution.as_ref().map(|s| s.source_hash.clone())))
        .collect()
}

#[test]
fn sigkill_during_an_evaluation_then_resume() {
    let dir = tempfile::tempdir().unwrap();
    let rd = dir.path().join("run");
    let mut child = spawn(&args(&[
        "run",
        "cpu/softmax",
        "--iterations",
        "8",
        "--run-dir",
        rd.to_str().unwrap(),
        "--quiet",
    ]));
    // Wait until round 3 or later is being evaluated (recorded, not finished).
    let in_flight = wait_for_store(&rd, Duration::from_secs(60), |s| {
        s.attempts
            .iter()
            .any(|a| a.round >= 3 && a.evaluation.is_none())
    });
    assert!(in_flight, "never saw an evaluation in flight");
    let workers = children_of(child.id());
    assert!(!workers.is_empty(), "a worker runs during an evaluation");
    // SAFETY: killing our own child process.
    unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
    child.wait().unwrap();
    std::thread::sleep(Duration::from_millis(300));
    for w in workers {
        assert!(!alive(w), "worker {w} outlived the killed orchestrator");
    }

    let before_nodes = snapshot_nodes(&rd);
    let before = ksearch_store::RunStore::open(&rd)
        .unwrap()
        .snapshot()
        .unwrap();
    let pending: Vec<u64> = before
        .attempts
        .iter()
        .filter(|a| a.evaluation.is_none())
        .map(|a| a.round)
        .collect();
    assert_eq!(
        pending.len(),
        1,
        "exactly the interrupted attempt is pending"
    );
    let done_before = before
        .attempts
        .iter()
        .filter(|a| a.round > 0 && a.evaluation.is_some())
        .count() as u64;

    let j = json(&["resume", rd.to_str().unwrap(), "--json"]);
    assert_eq!(j["rounds"], 8, "the original budget is honoured: {j}");
    let after = ksearch_store::RunStore::open(&rd)
        .unwrap()
        .snapshot()
        .unwrap();
    // Nothing committed was lost: every node and attached solution is still there.
    let after_nodes = snapshot_nodes(&rd);
    for (id, sol) in &before_nodes {
        let kept = after_nodes.iter().find(|(i, _)| i == id);
        // An open node may since have been solved, split or deleted; a solved one is fixed.
        if let Some(h) = sol {
            assert_eq!(
                kept,
                Some(&(*id, Some(h.clone()))),
                "solution of node {id} changed"
            );
        }
    }
    // The interrupted evaluation ran again under its own round number; rounds are 1..=8.
    let rounds: Vec<u64> = after.attempts.iter().map(|a| a.round).collect();
    assert_eq!(rounds, (0..=8).collect::<Vec<_>>());
    assert!(after.attempts.iter().all(|a| a.evaluation.is_some()));
    let same = after
        .attempts
        .iter()
        .find(|a| a.round == pending[0])
        .unwrap();
    let was = before
        .attempts
        .iter()
        .find(|a| a.round == pending[0])
        .unwrap();
    assert_eq!(
        same.source_hash, was.source_hash,
        "the same candidate was evaluated"
    );
    assert!(done_before < 8);
}

#[test]
fn ctrl_c_stops_cleanly_after_saving() {
    let dir = tempfile::tempdir().unwrap();
    let rd = dir.path().join("run");
    let child = spawn(&args(&[
        "run",
        "cpu/softmax",
        "--iterations",
        "50",
        "--run-dir",
        rd.to_str().unwrap(),
        "--json",
    ]));
    assert!(wait_for_store(&rd, Duration::from_secs(60), |s| s
        .attempts
        .iter()
        .any(|a| a.round >= 2 && a.evaluation.is_none())));
    // SAFETY: signalling our own child process.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let out = child.wait_with_output().unwrap();
    // Saved, but not finished: the exit code says so (128 + SIGINT, as a shell reports it).
    assert_eq!(
        out.status.code(),
        Some(130),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(j["stop_reason"], "interrupted", "{j}");
    let rounds = j["rounds"].as_u64().unwrap();
    assert!(rounds < 50);
    let j2 = json(&[
        "resume",
        rd.to_str().unwrap(),
        "--iterations",
        "1",
        "--json",
    ]);
    assert_eq!(j2["rounds"].as_u64().unwrap(), rounds + 1);
}

//! `ksearch run --replay`: a recorded LLM-driven run, replayed with the model server gone and
//! no evaluation run, reaches the same tree and stops for the same reason, whichever way the
//! recorded run ended: its round budget, nothing left to try, its time limit, the cost cap,
//! Ctrl-C, and a kill followed by resumes. A replay that needs an answer the record lacks
//! stops and says where it diverged.

use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Duration;

use ksearch_core::protocol::Status;
use ksearch_engine::{EngineState, InFlight};
use ksearch_llm::loopback::{RecordedRequest, Reply, ScriptedServer};
use ksearch_llm::{Provider, Usage};
use ksearch_store::{RunStore, Snapshot};
use serde_json::Value;

use crate::kernels;
use crate::support::{QUICK, ksearch, wait_for_store};

const USAGE: Usage = Usage {
    input_tokens: 1000,
    output_tokens: 500,
    cached_input_tokens: 0,
    reasoning_tokens: 0,
    cache_write_tokens: 0,
};

const CONFIG: &str = r#"
[llm]
max_retries = 1
timeout_s = 30

[prices."openai:replay-model"]
input_per_mtok = 1.0
output_per_mtok = 2.0
"#;

/// Correctness only: fast rounds, and what the model is asked depends on nothing measured.
const NO_TIMING: &[&str] = &["--workload", "small", "--no-timing"];

/// What the scripted model answers to code requests.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Code {
    /// A correct kernel for every implement and debug request.
    Good,
    /// No code at all, ever: every cycle ends without an attempt.
    Unusable,
    /// The first action's implementation never returns; debug rounds fix it.
    HangFirst,
}

fn action(title: &str, score: f64) -> Value {
    serde_json::json!({
        "title": title, "description": format!("{title}, nothing else."), "difficulty": 2, "score": score,
        "expected_speedup": 1.2, "rationale": "fewer operations", "rating": 6, "confidence": 0.5,
        "impacts": {"memory_bandwidth": {"rating": 3, "risk": "low", "notes": ""},
                    "register_pressure": {"rating": 2, "risk": "low", "notes": ""},
                    "compute_fit": {"rating": 6, "risk": "medium", "notes": ""}}
    })
}

fn fenced_json(v: &Value) -> String {
    format!(
        "```json\n{}\n```\n",
        serde_json::to_string_pretty(v).unwrap()
    )
}

fn fenced_c(code: &str) -> String {
    format!("Here it is.\n\n```c\n{code}```\n")
}

/// A kernel whose every call spins forever.
fn hanging() -> String {
    kernels::softmax_candidate("volatile int spin = 1; while (spin) {}")
}

fn answer(req: &RecordedRequest, code: Code) -> Reply {
    let messages = req.body["messages"].as_array().cloned().unwrap_or_default();
    let first_user = messages
        .iter()
        .find(|m| m["role"] == "user")
        .and_then(|m| m["content"].as_str())
        .unwrap_or("")
        .to_owned();
    let text = if first_user.contains("Build the initial world model") {
        fenced_json(&serde_json::json!({
            "classification": "row-wise reduction", "canonical_form": "softmax",
            "data_layout": "rows contiguous", "bottlenecks": [
                {"regime": "small", "hypothesis": "overhead"},
                {"regime": "large", "hypothesis": "bandwidth"},
                {"regime": "all", "hypothesis": "exp"}],
            "knobs": ["reciprocal"], "skeleton": "max; exp+sum; scale",
            "kernel_families": ["three-pass"],
            "actions": [action("First action", 0.9), action("Second action", 0.6), action("Third action", 0.3)]
        }))
    } else if first_user.contains("Reflect, then revise the tree") {
        let node: u64 = first_user
            .split("## Evidence from the cycle on node ")
            .nth(1)
            .and_then(|r| r.split_whitespace().next())
            .and_then(|n| n.parse().ok())
            .unwrap();
        fenced_json(&serde_json::json!({
            "reflection": {"code_summary": "scalar", "followed_action": true, "belief_changes": "none", "prediction_gap": "none"},
            "edits": [{"op": "insert", "parent": node, "node": action(&format!("Follow-up of node {node}"), 0.5)}]
        }))
    } else if first_user.contains("Decide what to do with this action") {
        fenced_json(&serde_json::json!({"decision": "delete", "reason": "not worth it"}))
    } else if first_user.contains("has no open action left") {
        fenced_json(&serde_json::json!({"edits": []}))
    } else if first_user.contains("Improve on the best attempt") {
        // The same code again: never an improvement, so cycles close after the window.
        let best = first_user
            .split("## The best attempt of this cycle so far")
            .nth(1)
            .unwrap();
        fenced_c(best.split("```\n").nth(1).unwrap())
    } else if code == Code::Unusable {
        "I would rather not write code today.".to_owned()
    } else if first_user.contains("Fix the failure") {
        fenced_c(&kernels::good())
    } else if first_user.contains("Implement ONLY this action") {
        if code == Code::HangFirst && first_user.contains("**First action**") {
            fenced_c(&hanging())
        } else {
            fenced_c(&kernels::good())
        }
    } else {
        "I do not understand.".to_owned()
    };
    Reply::success(Provider::OpenAiChat, &text, &USAGE)
}

/// A recorded run's directory, with the model server that answers it.
struct Recording {
    dir: tempfile::TempDir,
    server: ScriptedServer,
}

/// A cap that stops a run after a few calls (small answers keep each call's worst case near
/// its real cost).
fn cost_capped() -> String {
    format!("{CONFIG}\n[budget]\nmax_cost_usd = 0.012\n")
        .replace("[llm]\n", "[llm]\nmax_output_tokens = 600\n")
}

impl Recording {
    fn new(code: Code, config: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("ksearch.toml"), config).unwrap();
        let server = ScriptedServer::serve(move |req| answer(req, code));
        Self { dir, server }
    }

    fn rd(&self) -> PathBuf {
        self.dir.path().join("recorded")
    }

    fn base_url(&self) -> String {
        format!("{}/v1", self.server.url())
    }

    /// `ksearch run` of the recorded run with `extra` flags.
    fn run_args(&self, extra: &[&str], eval: &[&str]) -> Vec<String> {
        let mut args: Vec<String> = [
            "run",
            "cpu/softmax",
            "--model",
            "openai:replay-model",
            "--base-url",
            &self.base_url(),
            "--window",
            "2",
            "--run-dir",
            self.rd().to_str().unwrap(),
        ]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
        args.extend(extra.iter().map(|s| (*s).to_owned()));
        args.extend(eval.iter().map(|s| (*s).to_owned()));
        args
    }

    fn ksearch(&self, args: &[String]) -> Output {
        ksearch(&args.iter().map(String::as_str).collect::<Vec<_>>())
            .current_dir(self.dir.path())
            .env("OPENAI_API_KEY", "sk-replay-test")
            .output()
            .unwrap()
    }

    fn ok(&self, args: &[String]) -> Value {
        let out = self.ksearch(args);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "ksearch {args:?}: {stdout}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("{e}: {stdout}"))
    }

    fn resume(&self, extra: &[&str]) -> Value {
        let mut args = vec![
            "resume".to_owned(),
            self.rd().to_str().unwrap().to_owned(),
            "--json".to_owned(),
        ];
        args.extend(extra.iter().map(|s| (*s).to_owned()));
        self.ok(&args)
    }

    /// Replay the recording into a fresh directory, the model server gone; the replay's JSON.
    fn replay(self, expected_reason: &str) -> (tempfile::TempDir, Value) {
        let Recording { dir, server } = self;
        drop(server);
        let recorded = dir.path().join("recorded");
        let replayed = dir.path().join("replayed");
        let out = ksearch(&[
            "run",
            "cpu/softmax",
            "--replay",
            recorded.to_str().unwrap(),
            "--run-dir",
            replayed.to_str().unwrap(),
            "--json",
            "--quiet",
        ])
        .current_dir(dir.path())
        .env_remove("OPENAI_API_KEY")
        .output()
        .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "the replay failed: {stdout}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let j: Value = serde_json::from_str(stdout.trim()).unwrap();
        assert_eq!(j["stop_reason"], expected_reason, "{j}");
        assert_eq!(j["cost_usd"], 0.0, "a replay pays for nothing: {j}");
        assert_same_run(&recorded, &replayed);
        (dir, j)
    }
}

fn read(dir: &Path) -> (EngineState, Snapshot) {
    let store = RunStore::open(dir).unwrap();
    (store.state().unwrap().unwrap(), store.snapshot().unwrap())
}

/// The replay holds what the recording holds: the same tree node for node, the same attempts
/// with the same evaluations, the same cycles, the same model answers in the same order, and
/// the same final state.
fn assert_same_run(recorded: &Path, replayed: &Path) {
    let (sa, a) = read(recorded);
    let (sb, b) = read(replayed);
    assert_eq!(a.nodes, b.nodes, "the same tree");
    assert_eq!(a.attempts, b.attempts, "the same attempts and evaluations");
    assert_eq!(a.cycles, b.cycles, "the same cycles");
    let answers = |s: &Snapshot| -> Vec<(String, String, Value)> {
        s.llm_calls
            .iter()
            .map(|c| (c.key.clone(), c.purpose.clone(), c.response.clone()))
            .collect()
    };
    assert_eq!(answers(&a), answers(&b), "the same model calls, in order");
    assert!(b.llm_calls.iter().all(|c| c.replayed));
    assert_eq!(
        (
            sa.stop_reason,
            sa.next_round,
            sa.next_cycle,
            sa.next_node,
            sa.current_cycle,
            sa.empty_cycles
        ),
        (
            sb.stop_reason,
            sb.next_round,
            sb.next_cycle,
            sb.next_node,
            sb.current_cycle,
            sb.empty_cycles
        )
    );
}

fn stop_reason(rd: &Path) -> String {
    let (state, _) = read(rd);
    serde_json::to_value(state.stop_reason)
        .unwrap()
        .as_str()
        .unwrap()
        .to_owned()
}

#[test]
fn a_run_that_ended_on_its_round_budget_and_was_resumed_replays_to_the_same_tree() {
    let rec = Recording::new(Code::Good, CONFIG);
    // Two rounds: the budget ends the session mid-cycle (a pass, then one improve), which
    // closes the cycle and leaves its refine call to the next session, which makes it first.
    let j = rec.ok(&rec.run_args(&["--iterations", "2", "--json"], NO_TIMING));
    assert_eq!(
        (j["rounds"].as_u64(), j["stop_reason"].as_str()),
        (Some(2), Some("iterations"))
    );
    let (state, snap) = read(&rec.rd());
    assert!(
        snap.cycles[0].ended_round == Some(2)
            && snap.llm_calls.last().unwrap().purpose != "refine"
            && state.refine_owed == Some(snap.cycles[0].id),
        "the budget stop closed the cycle and left the refine owed: {:?} {state:?}",
        snap.cycles[0]
    );
    let j = rec.resume(&["--iterations", "3"]);
    assert_eq!(j["rounds"], 5, "{j}");
    let (_, j2) = rec.replay("iterations");
    assert_eq!(j2["rounds"], 5);
}

#[test]
fn a_run_that_ran_out_of_things_to_try_replays_to_the_same_end() {
    // Every code answer is unusable: each cycle ends without an attempt and its action is
    // deleted, until nothing is left and the model proposes nothing new.
    let rec = Recording::new(Code::Unusable, CONFIG);
    let j = rec.ok(&rec.run_args(&["--iterations", "6", "--json"], NO_TIMING));
    assert_eq!(j["stop_reason"], "exhausted", "{j}");
    assert_eq!(
        (j["rounds"].as_u64(), j["nodes"].as_u64()),
        (Some(0), Some(1)),
        "{j}"
    );
    let calls = rec.server.request_count();
    assert!(calls >= 10, "{calls} calls");
    let (_, j2) = rec.replay("exhausted");
    assert_eq!(
        (j2["rounds"].as_u64(), j2["nodes"].as_u64()),
        (Some(0), Some(1))
    );
}

#[test]
fn a_run_stopped_by_its_time_limit_and_resumed_replays_to_the_same_tree() {
    let rec = Recording::new(Code::Good, CONFIG);
    let j = rec.ok(&rec.run_args(
        &["--iterations", "1000", "--time", "3s", "--json"],
        NO_TIMING,
    ));
    assert_eq!(j["stop_reason"], "time", "{j}");
    let rounds = j["rounds"].as_u64().unwrap();
    let j = rec.resume(&["--iterations", "1"]);
    assert_eq!(j["rounds"].as_u64(), Some(rounds + 1), "{j}");
    rec.replay("iterations");
}

#[test]
fn a_run_stopped_by_its_time_limit_replays_to_a_time_stop() {
    let rec = Recording::new(Code::Good, CONFIG);
    let j = rec.ok(&rec.run_args(
        &["--iterations", "1000", "--time", "2s", "--json"],
        NO_TIMING,
    ));
    assert_eq!(j["stop_reason"], "time", "{j}");
    let (_, j2) = rec.replay("time");
    assert_eq!(j2["rounds"], j["rounds"]);
}

#[test]
fn a_run_stopped_by_the_cost_cap_replays_to_the_cap_and_then_past_it_once_resumed() {
    let rec = Recording::new(Code::Good, &cost_capped());
    let j = rec.ok(&rec.run_args(&["--iterations", "50", "--json"], NO_TIMING));
    assert_eq!(j["stop_reason"], "cost", "{j}");
    let j1 = rec.resume(&["--max-cost", "0.02", "--iterations", "1"]);
    assert!(j1["rounds"].as_u64() > j["rounds"].as_u64(), "{j1}");
    let final_reason = stop_reason(&rec.rd());
    rec.replay(&final_reason);
}

#[test]
fn a_run_stopped_by_the_cost_cap_replays_to_the_same_stop() {
    let rec = Recording::new(Code::Good, &cost_capped());
    let j = rec.ok(&rec.run_args(&["--iterations", "50", "--json"], NO_TIMING));
    assert_eq!(j["stop_reason"], "cost", "{j}");
    let (_, j2) = rec.replay("cost");
    assert_eq!(j2["rounds"], j["rounds"]);
}

#[test]
fn an_interrupted_run_replays_to_the_interrupt_and_past_it_once_resumed() {
    let rec = Recording::new(Code::Good, CONFIG);
    let args = rec.run_args(&["--iterations", "50", "--json"], QUICK);
    let child = ksearch(&args.iter().map(String::as_str).collect::<Vec<_>>())
        .current_dir(rec.dir.path())
        .env("OPENAI_API_KEY", "sk-replay-test")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Ctrl-C while round 2 or later is being evaluated.
    assert!(wait_for_store(&rec.rd(), Duration::from_secs(120), |s| s
        .attempts
        .iter()
        .any(|a| a.round >= 2 && a.evaluation.is_none())));
    // SAFETY: signalling our own child process.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(130),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(stop_reason(&rec.rd()), "interrupted");

    // The interrupted record replays to the same interrupt...
    {
        let replayed = rec.dir.path().join("replayed-interrupt");
        let out = ksearch(&[
            "run",
            "cpu/softmax",
            "--replay",
            rec.rd().to_str().unwrap(),
            "--run-dir",
            replayed.to_str().unwrap(),
            "--json",
        ])
        .env_remove("OPENAI_API_KEY")
        .output()
        .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let j: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(j["stop_reason"], "interrupted", "{j}");
        assert_same_run(&rec.rd(), &replayed);
    }
    // ...and, resumed, past it.
    rec.resume(&["--iterations", "1"]);
    rec.replay("iterations");
}

#[test]
fn a_candidate_that_keeps_killing_the_orchestrator_is_recorded_crashed_and_the_run_replays() {
    let rec = Recording::new(Code::HangFirst, CONFIG);
    let mut args = rec.run_args(&["--iterations", "3", "--quiet"], NO_TIMING);
    args.extend(["--timeout".to_owned(), "300".to_owned()]);
    let in_flight = |lost: u32| {
        let rd = rec.rd();
        move || {
            let deadline = std::time::Instant::now() + Duration::from_secs(120);
            while std::time::Instant::now() < deadline {
                if let Ok(store) = RunStore::open(&rd)
                    && let Ok(Some(state)) = store.state::<EngineState>()
                    && state.evaluating == Some(InFlight { round: 1, lost })
                {
                    return true;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            false
        }
    };
    let kill_when = |args: &[String], lost: u32| {
        let mut child = ksearch(&args.iter().map(String::as_str).collect::<Vec<_>>())
            .current_dir(rec.dir.path())
            .env("OPENAI_API_KEY", "sk-replay-test")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        assert!(
            in_flight(lost)(),
            "round 1 never seen in flight ({lost} lost)"
        );
        // The candidate hangs; the orchestrator dies during its evaluation.
        // SAFETY: killing our own child process.
        unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
        child.wait().unwrap();
    };
    kill_when(&args, 0);

    // A run that did not stop cleanly is not replayed.
    let out = ksearch(&[
        "run",
        "cpu/softmax",
        "--replay",
        rec.rd().to_str().unwrap(),
        "--run-dir",
        rec.dir.path().join("too-early").to_str().unwrap(),
    ])
    .output()
    .unwrap();
    assert_ne!(out.status.code(), Some(0));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("did not stop cleanly"), "{stderr}");

    // The first resume runs the evaluation again (the death may have had another cause)...
    let resume: Vec<String> = ["resume", rec.rd().to_str().unwrap(), "--quiet"]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
    kill_when(&resume, 1);
    // ...the second records it as crashed and goes on to the end of the budget.
    let j = rec.resume(&[]);
    assert_eq!(
        (j["rounds"].as_u64(), j["stop_reason"].as_str()),
        (Some(3), Some("iterations")),
        "{j}"
    );
    let (state, snap) = read(&rec.rd());
    assert_eq!(state.evaluating, None);
    let first = &snap.attempts[1];
    let e = first.evaluation.as_ref().unwrap();
    assert_eq!(e.result.status, Status::Crashed);
    assert!(
        e.result.message.contains("died 2 times"),
        "{}",
        e.result.message
    );
    let lost: Vec<(u64, String)> = snap
        .events
        .iter()
        .filter(|(_, k, _)| k == "evaluation_lost")
        .map(|(_, _, d)| {
            (
                d["times"].as_u64().unwrap(),
                d["outcome"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        lost,
        [
            (1, "evaluated again".to_owned()),
            (2, "recorded as crashed".to_owned())
        ]
    );
    // The run went on: the next round debugged it, and it passed.
    assert_eq!(snap.attempts[2].status(), Some(Status::Passed));
    // A third resume never runs it again.
    let j = rec.resume(&["--iterations", "1"]);
    assert_eq!(j["rounds"], 4, "{j}");
    assert_eq!(
        read(&rec.rd()).1.attempts[1].status(),
        Some(Status::Crashed)
    );

    // And the killed-and-resumed run replays to the same tree, without running anything.
    rec.replay("iterations");
}

#[test]
fn a_replay_that_needs_an_answer_the_record_lacks_stops_and_says_where() {
    let rec = Recording::new(Code::Good, CONFIG);
    rec.ok(&rec.run_args(&["--iterations", "3", "--json"], NO_TIMING));
    let Recording { dir, server } = rec;
    drop(server);
    let recorded = dir.path().join("recorded");
    // Lose the last model answer of the record.
    {
        let conn = rusqlite::Connection::open(recorded.join("run.sqlite")).unwrap();
        conn.execute(
            "DELETE FROM llm_calls WHERE seq = (SELECT MAX(seq) FROM llm_calls)",
            [],
        )
        .unwrap();
    }
    let replayed = dir.path().join("replayed");
    let out = ksearch(&[
        "run",
        "cpu/softmax",
        "--replay",
        recorded.to_str().unwrap(),
        "--run-dir",
        replayed.to_str().unwrap(),
    ])
    .output()
    .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("diverged") && stderr.contains("round") && stderr.contains("session 1"),
        "{stderr}"
    );
}

#[test]
fn a_replay_that_would_go_past_a_recorded_session_end_stops_and_says_where() {
    let rec = Recording::new(Code::Good, CONFIG);
    rec.ok(&rec.run_args(&["--iterations", "2", "--json"], NO_TIMING));
    rec.resume(&["--iterations", "2"]);
    let Recording { dir, server } = rec;
    drop(server);
    let recorded = dir.path().join("recorded");
    // Make the first session's end say it stopped one model call later than it did.
    {
        let conn = rusqlite::Connection::open(recorded.join("run.sqlite")).unwrap();
        let (id, data): (i64, String) = conn
            .query_row(
                "SELECT id, data FROM events WHERE kind = 'session_ended' ORDER BY id LIMIT 1",
                [],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .unwrap();
        let mut end: Value = serde_json::from_str(&data).unwrap();
        end["at"]["next_round"] = Value::from(end["at"]["next_round"].as_u64().unwrap() + 1);
        conn.execute(
            "UPDATE events SET data = ?1 WHERE id = ?2",
            rusqlite::params![end.to_string(), id],
        )
        .unwrap();
    }
    let out = ksearch(&[
        "run",
        "cpu/softmax",
        "--replay",
        recorded.to_str().unwrap(),
        "--run-dir",
        dir.path().join("replayed").to_str().unwrap(),
    ])
    .output()
    .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("diverged") && stderr.contains("session 1"),
        "{stderr}"
    );
}

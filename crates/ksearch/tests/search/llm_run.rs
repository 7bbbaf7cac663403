//! An LLM-driven run end to end: `ksearch run` against a loopback server that speaks the OpenAI
//! chat format and answers with real C kernels, then `--replay` with the server gone.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use ksearch_llm::loopback::{RecordedRequest, Reply, ScriptedServer};
use ksearch_llm::{Provider, Usage};
use serde_json::Value;

use crate::support::{QUICK, ksearch, shape};

use crate::kernels;

const KEY: &str = "sk-e2e-SECRET-4242";

/// Every answer reports this usage; the project's ksearch.toml prices the model.
const USAGE: Usage = Usage {
    input_tokens: 1000,
    output_tokens: 500,
    cached_input_tokens: 200,
    reasoning_tokens: 100,
    cache_write_tokens: 0,
};
/// (800 × 1.0 + 200 × 0.5 + 500 × 2.0) / 1e6 dollars per call.
const COST_PER_CALL: f64 = 0.0019;

const CONFIG: &str = r#"
[llm]
max_retries = 1
timeout_s = 30

[prices."openai:e2e-model"]
input_per_mtok = 1.0
cached_input_per_mtok = 0.5
output_per_mtok = 2.0
"#;

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
        "Here is my analysis.\n\n```json\n{}\n```\n",
        serde_json::to_string_pretty(v).unwrap()
    )
}

fn fenced_c(code: &str) -> String {
    format!("I changed only what the action asks.\n\n```c\n{code}```\n\nThis should be faster.")
}

/// The model: answers each kind of prompt with what a competent (if imperfect) model would.
fn answer(req: &RecordedRequest, world_model_calls: &AtomicUsize) -> Reply {
    let messages = req.body["messages"].as_array().cloned().unwrap_or_default();
    let first_user = messages
        .iter()
        .find(|m| m["role"] == "user")
        .and_then(|m| m["content"].as_str())
        .unwrap_or("")
        .to_owned();
    let last_user = req.last_user_text().unwrap_or_default();
    let text = if first_user.contains("Build the initial world model") {
        let n = world_model_calls.fetch_add(1, Ordering::SeqCst);
        if n == 0 {
            // A model that forgets the format: ksearch must re-ask with the exact problem.
            "I think the main issue is the division in the last pass.".to_owned()
        } else {
            if n == 1 {
                assert!(
                    last_user.contains("could not be used"),
                    "the re-ask states the error: {last_user}"
                );
            }
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
    } else if first_user.contains("Reflect, then revise the tree") {
        let node: u64 = first_user
            .split("## Evidence from the cycle on node ")
            .nth(1)
            .and_then(|r| r.split_whitespace().next())
            .and_then(|n| n.parse().ok())
            .unwrap();
        fenced_json(&serde_json::json!({
            "reflection": {"code_summary": "scalar softmax", "followed_action": true, "belief_changes": "division mattered little", "prediction_gap": "exp dominates"},
            "edits": [{"op": "insert", "parent": node, "node": action(&format!("Vectorize after node {node}"), 0.5, 1.5)}]
        }))
    } else if first_user.contains("Decide what to do with this action") {
        fenced_json(&serde_json::json!({"decision": "delete", "reason": "not worth it"}))
    } else if first_user.contains("Fix the failure") {
        assert!(
            first_user.contains("error"),
            "the debug prompt carries the compiler's message"
        );
        fenced_c(&kernels::good())
    } else if first_user.contains("Improve on the best attempt") {
        // No better idea: the same code again, which must not count as an improvement.
        let best = first_user
            .split("## The best attempt of this cycle so far")
            .nth(1)
            .unwrap();
        let code = best.split("```\n").nth(1).unwrap();
        fenced_c(code)
    } else if first_user.contains("Implement ONLY this action") {
        if first_user.contains("**Fuse exp and sum**") {
            fenced_c(&kernels::broken())
        } else {
            fenced_c(&kernels::good())
        }
    } else {
        "I do not understand.".to_owned()
    };
    Reply::success(Provider::OpenAiChat, &text, &USAGE)
}

/// `ksearch run cpu/softmax --replay RD` into `DIR/replay`: where it went, and its JSON.
fn replay_json(dir: &std::path::Path, rd: &std::path::Path) -> (std::path::PathBuf, Value) {
    let rd2 = dir.join("replay");
    let j = run_json(
        dir,
        &[
            "run",
            "cpu/softmax",
            "--replay",
            rd.to_str().unwrap(),
            "--run-dir",
            rd2.to_str().unwrap(),
            "--json",
        ],
    );
    (rd2, j)
}

fn run_json(dir: &std::path::Path, args: &[&str]) -> Value {
    let out = ksearch(args)
        .current_dir(dir)
        .env("OPENAI_API_KEY", KEY)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "ksearch {args:?}: {stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(stdout.trim()).unwrap()
}

#[test]
fn an_llm_run_grows_the_tree_costs_what_was_used_and_replays_offline() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("ksearch.toml"), CONFIG).unwrap();
    let calls = Arc::new(AtomicUsize::new(0));
    let c = Arc::clone(&calls);
    let server = ScriptedServer::serve(move |req| answer(req, &c));
    let base = format!("{}/v1", server.url());
    let rd = dir.path().join("run");
    let mut args = vec![
        "run",
        "cpu/softmax",
        "--model",
        "openai:e2e-model",
        "--base-url",
        &base,
        "--iterations",
        "8",
        "--window",
        "2",
        "--run-dir",
        rd.to_str().unwrap(),
        "--json",
    ];
    args.extend_from_slice(QUICK);
    let j = run_json(dir.path(), &args);

    // The tree grew and solutions attached.
    assert_eq!(j["rounds"], 8, "{j}");
    let tree = run_json(dir.path(), &["tree", rd.to_str().unwrap(), "--json"]);
    let nodes = tree["nodes"].as_array().unwrap();
    assert!(
        nodes.iter().filter(|n| !n["solution"].is_null()).count() >= 3,
        "root and at least two solved actions: {tree}"
    );
    assert!(
        nodes.iter().any(|n| n["action"]["title"]
            .as_str()
            .unwrap()
            .starts_with("Vectorize after node")),
        "refine inserted its action"
    );
    assert!(
        // A node without notes has no `notes` key at all.
        nodes
            .iter()
            .any(|n| n["notes"].as_array().is_some_and(|notes| notes
                .iter()
                .any(|x| x.as_str().unwrap().starts_with("reflection:")))),
        "the reflection is kept"
    );

    // Every request was a well-formed chat completion with the key in the header.
    let requests = server.requests();
    for r in &requests {
        assert_eq!(
            (r.method.as_str(), r.path.as_str()),
            ("POST", "/v1/chat/completions")
        );
        assert_eq!(
            r.header("authorization"),
            Some(format!("Bearer {KEY}").as_str())
        );
        assert_eq!(r.body["model"], "e2e-model");
        assert_eq!(r.body["messages"][0]["role"], "system");
    }
    // Failures fed back: the compile error of the broken kernel reached a debug prompt.
    assert!(
        requests
            .iter()
            .any(|r| r.last_user_text().unwrap().contains("Fix the failure")
                && r.last_user_text().unwrap().contains("error"))
    );

    // Cost totals are the scripted usage times the price table.
    let n = requests.len() as f64;
    assert!(
        (j["cost_usd"].as_f64().unwrap() - n * COST_PER_CALL).abs() < 1e-9,
        "{} calls, {j}",
        requests.len()
    );
    assert_eq!(j["tokens"].as_u64().unwrap(), requests.len() as u64 * 1500);
    assert_eq!(
        j["llm"]["reasoning openai:e2e-model"]["reasoning_tokens"]
            .as_u64()
            .unwrap()
            % 100,
        0
    );

    // The key is nowhere in what the run wrote.
    for entry in walk(&rd) {
        let bytes = std::fs::read(&entry).unwrap();
        assert!(
            !bytes.windows(KEY.len()).any(|w| w == KEY.as_bytes()),
            "the key leaked into {}",
            entry.display()
        );
    }

    // Replay with the server gone: same tree, no cost.
    drop(server);
    let (rd2, j2) = replay_json(dir.path(), &rd);
    assert_eq!(j2["rounds"], j["rounds"]);
    assert_eq!(j2["cost_usd"], 0.0);
    let tree2 = run_json(dir.path(), &["tree", rd2.to_str().unwrap(), "--json"]);
    assert_eq!(shape(&tree2), shape(&tree));
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

#[test]
fn the_cost_cap_stops_the_run_cleanly_before_it_is_exceeded() {
    let dir = tempfile::tempdir().unwrap();
    // Small answers keep the worst-case estimate per call near the real cost.
    std::fs::write(
        dir.path().join("ksearch.toml"),
        format!("{CONFIG}\n[budget]\nmax_cost_usd = 0.012\n")
            .replace("[llm]\n", "[llm]\nmax_output_tokens = 600\n"),
    )
    .unwrap();
    let calls = Arc::new(AtomicUsize::new(2)); // a well-behaved model from the start
    let c = Arc::clone(&calls);
    let server = ScriptedServer::serve(move |req| answer(req, &c));
    let base = format!("{}/v1", server.url());
    let rd = dir.path().join("run");
    let mut args = vec![
        "run",
        "cpu/softmax",
        "--model",
        "openai:e2e-model",
        "--base-url",
        &base,
        "--iterations",
        "50",
        "--window",
        "2",
        "--run-dir",
        rd.to_str().unwrap(),
        "--json",
    ];
    args.extend_from_slice(QUICK);
    let j = run_json(dir.path(), &args);
    assert_eq!(j["stop_reason"], "cost", "{j}");
    let spent = j["cost_usd"].as_f64().unwrap();
    assert!(spent <= 0.012 && spent > 0.0, "spent {spent}");
    assert!((spent - server.request_count() as f64 * COST_PER_CALL).abs() < 1e-9);
    // Resuming with a higher cap continues the same run.
    let j2 = run_json(
        dir.path(),
        &[
            "resume",
            rd.to_str().unwrap(),
            "--max-cost",
            "0.02",
            "--iterations",
            "1",
            "--json",
        ],
    );
    assert!(
        j2["cost_usd"].as_f64().unwrap() > spent
            && j2["rounds"].as_u64().unwrap() > j["rounds"].as_u64().unwrap(),
        "{j2}"
    );
}

#[test]
fn a_missing_key_names_the_variable_to_set() {
    let dir = tempfile::tempdir().unwrap();
    let out = ksearch(&[
        "run",
        "cpu/softmax",
        "--model",
        "anthropic:claude-sonnet-4-5",
        "--run-dir",
        dir.path().join("r").to_str().unwrap(),
    ])
    .env_remove("ANTHROPIC_API_KEY")
    .current_dir(dir.path())
    .output()
    .unwrap();
    assert_eq!(out.status.code(), Some(3));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("ANTHROPIC_API_KEY"), "{stderr}");
    assert!(
        !dir.path().join("r").exists(),
        "no run is created without a usable model"
    );
}

/// A cost cap with a model that has no price would count its calls as $0 and never stop: the
/// run is refused before it starts, naming the config key that gives the model a price. A
/// price in ksearch.toml (here 0, as for a local model) lets it start.
#[test]
fn a_cost_cap_on_a_model_without_a_price_is_refused_naming_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let run = |rd: &str| {
        let rd = dir.path().join(rd);
        let mut args = vec![
            "run",
            "cpu/softmax",
            "--model",
            "openai:unpriced-model",
            "--base-url",
            "http://127.0.0.1:9/v1",
            "--max-cost",
            "1",
            "--iterations",
            "0",
            "--run-dir",
            rd.to_str().unwrap(),
        ];
        args.extend_from_slice(QUICK);
        ksearch(&args).current_dir(dir.path()).output().unwrap()
    };
    let out = run("r");
    assert_eq!(out.status.code(), Some(3));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("[prices.\"openai:unpriced-model\"]") && stderr.contains("$0"),
        "{stderr}"
    );
    assert!(!dir.path().join("r").exists());

    std::fs::write(
        dir.path().join("ksearch.toml"),
        "[prices.\"openai:unpriced-model\"]\ninput_per_mtok = 0.0\noutput_per_mtok = 0.0\n",
    )
    .unwrap();
    let out = run("r2");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("does not know"), "{stderr}");
}

/// A reasoning effort becomes Anthropic's thinking, within `[providers.anthropic]`'s own output
/// budget; for a model without thinking it is said to do nothing, not silently ignored. And
/// `--base-url` (an OpenAI-compatible server) is not where an Anthropic model's key goes: its
/// base URL comes from `[providers.anthropic]` alone.
#[test]
fn anthropic_gets_its_own_base_url_budget_and_thinking() {
    let dir = tempfile::tempdir().unwrap();
    let anthropic =
        ScriptedServer::serve(|_| Reply::success(Provider::Anthropic, "no idea", &USAGE));
    let compatible = ScriptedServer::serve(|_| Reply::success(Provider::OpenAiChat, "x", &USAGE));
    std::fs::write(
        dir.path().join("ksearch.toml"),
        format!(
            "[llm]\nmax_retries = 0\n\n[providers.anthropic]\nbase_url = \"{}\"\nmax_output_tokens = 6000\n",
            anthropic.url()
        ),
    )
    .unwrap();
    let compatible_url = format!("{}/v1", compatible.url());
    let run = |model: &str, run_dir: &str| {
        let rd = dir.path().join(run_dir);
        let mut args = vec![
            "run",
            "cpu/softmax",
            "--model",
            model,
            "--base-url",
            &compatible_url,
            "--reasoning-effort",
            "high",
            // A round to go: a run with none asks for no world model.
            "--iterations",
            "1",
            "--run-dir",
            rd.to_str().unwrap(),
        ];
        args.extend_from_slice(QUICK);
        let out = ksearch(&args)
            .env("ANTHROPIC_API_KEY", KEY)
            .current_dir(dir.path())
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let stderr = run("anthropic:claude-sonnet-4-5", "r");
    assert!(!stderr.contains("does nothing"), "{stderr}");
    let requests = anthropic.requests();
    assert!(!requests.is_empty(), "{stderr}");
    assert!(
        anthropic.rejections().is_empty(),
        "{:?}",
        anthropic.rejections()
    );
    for req in &requests {
        // The provider's own budget, half of it for thinking.
        assert_eq!(req.body["max_tokens"], 6000, "{}", req.body);
        assert_eq!(
            req.body["thinking"],
            serde_json::json!({"type": "enabled", "budget_tokens": 3000})
        );
    }
    let stderr = run("anthropic:claude-3-5-haiku-latest", "r2");
    assert!(
        stderr.contains("note: the reasoning effort does nothing for anthropic:claude-3-5-haiku-latest: claude-3-5-haiku-latest has no extended thinking"),
        "{stderr}"
    );
    assert_eq!(
        compatible.request_count(),
        0,
        "the Anthropic key went to the --base-url server"
    );
}

/// An answer in the chat format that stopped with `reason`.
fn stopped(text: &str, reason: &str) -> Reply {
    let mut body = ksearch_llm::loopback::openai_chat_body(text, &USAGE);
    body["choices"][0]["finish_reason"] = reason.into();
    Reply::ok(body)
}

/// As Anthropic and Gemini do, refuse a conversation that holds an empty turn.
fn refuses_empty_turns(req: &RecordedRequest) -> Option<Reply> {
    let empty = req.body["messages"]
        .as_array()?
        .iter()
        .any(|m| m["content"].as_str().is_some_and(|c| c.trim().is_empty()));
    empty.then(|| {
        Reply::provider_error(
            Provider::OpenAiChat,
            400,
            "messages: text content blocks must be non-empty",
        )
    })
}

/// A model whose first code answer is empty (every token spent thinking) and whose second is
/// cut off mid-kernel at the output limit, on a server that refuses an empty turn: the run goes
/// on, neither answer becomes a candidate, and both are counted.
#[test]
fn an_empty_answer_and_a_cut_off_one_do_not_end_the_run() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("ksearch.toml"), CONFIG).unwrap();
    let world = Arc::new(AtomicUsize::new(0));
    let code_calls = Arc::new(AtomicUsize::new(0));
    let (w, c) = (Arc::clone(&world), Arc::clone(&code_calls));
    let server = ScriptedServer::serve(move |req| {
        if let Some(refusal) = refuses_empty_turns(req) {
            return refusal;
        }
        let first_user = req.body["messages"][1]["content"].as_str().unwrap_or("");
        if first_user.contains("Implement ONLY this action") {
            match c.fetch_add(1, Ordering::SeqCst) {
                0 => return stopped("", "length"),
                1 => {
                    let good = fenced_c(&kernels::good());
                    return stopped(&good[..good.len() / 2], "length");
                }
                _ => {}
            }
        }
        answer(req, &w)
    });
    let base = format!("{}/v1", server.url());
    let rd = dir.path().join("run");
    let mut args = vec![
        "run",
        "cpu/softmax",
        "--model",
        "openai:e2e-model",
        "--base-url",
        &base,
        "--iterations",
        "2",
        "--run-dir",
        rd.to_str().unwrap(),
        "--json",
    ];
    args.extend_from_slice(QUICK);
    let j = run_json(dir.path(), &args);
    assert_eq!(j["rounds"], 2, "{j}");
    let codegen = &j["llm"]["codegen openai:e2e-model"];
    assert_eq!(codegen["empty_answers"], 1, "{j}");
    assert_eq!(codegen["truncated_answers"], 1, "{j}");
    // Neither unusable answer was sent back; the re-asks said what went wrong.
    let requests = server.requests();
    assert!(requests.iter().all(|r| refuses_empty_turns(r).is_none()));
    let asked_again: Vec<String> = requests
        .iter()
        .filter_map(RecordedRequest::last_user_text)
        .filter(|t| t.contains("Your previous answer was"))
        .collect();
    assert!(
        asked_again.iter().any(|t| t.contains("was empty"))
            && asked_again.iter().any(|t| t.contains("cut off")),
        "{asked_again:?}"
    );
    // The report says so too.
    let html = dir.path().join("report.html");
    let out = ksearch(&["report", rd.to_str().unwrap(), "-o", html.to_str().unwrap()])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(out.status.success());
    let html = std::fs::read_to_string(html).unwrap();
    assert!(
        html.contains("1 empty answer and 1 cut off at the output limit, each asked again"),
        "the report's LLM line"
    );
}

/// A call the provider refuses ends the run with an error, but the calls of that round already
/// paid for are kept: the resume answers the same request from them instead of paying again.
/// (Here the first code answer is unusable, and the provider refuses the re-ask.)
#[test]
fn paid_calls_survive_a_failed_call_and_a_resume_reuses_them() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("ksearch.toml"), CONFIG).unwrap();
    let world = Arc::new(AtomicUsize::new(0));
    let failing = Arc::new(std::sync::atomic::AtomicBool::new(true));
    let (w, f) = (Arc::clone(&world), Arc::clone(&failing));
    let server = ScriptedServer::serve(move |req| {
        let first_user = req.body["messages"][1]["content"].as_str().unwrap_or("");
        if first_user.contains("Implement ONLY this action") {
            if req.body["messages"].as_array().unwrap().len() == 2 {
                return Reply::success(Provider::OpenAiChat, "I would rather not.", &USAGE);
            }
            if f.load(Ordering::SeqCst) {
                return Reply::provider_error(Provider::OpenAiChat, 400, "context length exceeded");
            }
        }
        answer(req, &w)
    });
    let base = format!("{}/v1", server.url());
    let rd = dir.path().join("run");
    let mut args = vec![
        "run",
        "cpu/softmax",
        "--model",
        "openai:e2e-model",
        "--base-url",
        &base,
        "--iterations",
        "1",
        "--run-dir",
        rd.to_str().unwrap(),
    ];
    args.extend_from_slice(QUICK);
    let out = ksearch(&args)
        .current_dir(dir.path())
        .env("OPENAI_API_KEY", KEY)
        .output()
        .unwrap();
    assert!(!out.status.success(), "the refused call ends the run");
    let first_asks = |s: &ScriptedServer| {
        s.requests()
            .iter()
            .filter(|r| {
                r.body["messages"].as_array().unwrap().len() == 2
                    && r.body["messages"][1]["content"]
                        .as_str()
                        .is_some_and(|c| c.contains("Implement ONLY this action"))
            })
            .count()
    };
    assert_eq!(first_asks(&server), 1);

    failing.store(false, Ordering::SeqCst);
    let j = run_json(
        dir.path(),
        &[
            "resume",
            rd.to_str().unwrap(),
            "--base-url",
            &base,
            "--json",
        ],
    );
    assert_eq!(j["rounds"], 1, "{j}");
    assert_eq!(
        first_asks(&server),
        1,
        "the resume paid again for the code answer the failed session had received"
    );
    let codegen = &j["llm"]["codegen openai:e2e-model"];
    assert_eq!(codegen["replayed_calls"], 1, "{j}");

    // The whole record replays, the failed session and the resume, with the server gone.
    drop(server);
    let (_, j2) = replay_json(dir.path(), &rd);
    assert_eq!(j2["rounds"], j["rounds"]);
}

/// Any command as the model: a script reads each prompt on stdin and answers on stdout. The
/// run grows as with a provider, its calls are counted (no tokens, no price), and the journal
/// replays it with the command gone.
#[test]
fn a_command_is_the_model_and_the_run_replays_without_it() {
    let dir = tempfile::tempdir().unwrap();
    let kernel = dir.path().join("kernel.c");
    std::fs::write(&kernel, kernels::good()).unwrap();
    let log = dir.path().join("calls.log");
    let script =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/exec_model/model.sh");
    let model = format!(
        "exec:sh {} {} {}",
        script.display(),
        kernel.display(),
        log.display()
    );
    let rd = dir.path().join("run");
    let mut args = vec![
        "run",
        "cpu/softmax",
        "--model",
        &model,
        "--iterations",
        "3",
        "--run-dir",
        rd.to_str().unwrap(),
        "--json",
    ];
    args.extend_from_slice(QUICK);
    let j = run_json(dir.path(), &args);
    assert_eq!(j["rounds"], 3, "{j}");
    let calls = std::fs::read_to_string(&log).unwrap();
    let n = calls.lines().count() as u64;
    assert!(
        n >= 4,
        "a world model and three code answers at least: {calls}"
    );
    assert!(
        calls.lines().all(|l| l.starts_with("system user")),
        "each call gets the system and the user parts, delimited: {calls}"
    );
    let totals: u64 = j["llm"]
        .as_object()
        .unwrap()
        .values()
        .map(|t| t["calls"].as_u64().unwrap())
        .sum();
    assert_eq!(totals, n, "{j}");
    assert_eq!(j["tokens"], 0);
    assert_eq!(
        j["llm"][format!("codegen {model}")]["unpriced_calls"]
            .as_u64()
            .unwrap(),
        j["llm"][format!("codegen {model}")]["calls"]
            .as_u64()
            .unwrap()
    );

    // The replay answers from the journal: the command is not run again.
    std::fs::remove_file(&log).unwrap();
    let (_, j2) = replay_json(dir.path(), &rd);
    assert_eq!(j2["rounds"], j["rounds"]);
    assert!(!log.exists(), "the replay ran the command");
}

#[test]
fn a_resume_can_change_the_model_and_a_builtin_run_cannot_take_one() {
    let dir = tempfile::tempdir().unwrap();
    let kernel = dir.path().join("kernel.c");
    std::fs::write(&kernel, kernels::good()).unwrap();
    let script =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/exec_model/model.sh");
    let model = |log: &std::path::Path| {
        format!(
            "exec:sh {} {} {}",
            script.display(),
            kernel.display(),
            log.display()
        )
    };
    let (first_log, second_log) = (dir.path().join("first.log"), dir.path().join("second.log"));
    let (first, second) = (model(&first_log), model(&second_log));
    let rd = dir.path().join("run");
    let mut args = vec![
        "run",
        "cpu/softmax",
        "--model",
        &first,
        "--iterations",
        "1",
        "--run-dir",
        rd.to_str().unwrap(),
        "--json",
    ];
    args.extend_from_slice(QUICK);
    let j = run_json(dir.path(), &args);
    assert_eq!(j["rounds"], 1, "{j}");
    let asked_first = std::fs::read_to_string(&first_log).unwrap().lines().count();

    // Another model for the next session: it answers, the first is not asked again, and the
    // run's record says who answered what.
    let out = ksearch(&[
        "resume",
        rd.to_str().unwrap(),
        "--model",
        &second,
        "--iterations",
        "1",
        "--json",
    ])
    .current_dir(dir.path())
    .output()
    .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains(&format!("model {second}")), "{stderr}");
    let j2: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(j2["rounds"], 2, "{j2}");
    assert!(
        std::fs::read_to_string(&second_log)
            .unwrap()
            .lines()
            .count()
            >= 1
    );
    assert_eq!(
        std::fs::read_to_string(&first_log).unwrap().lines().count(),
        asked_first
    );
    assert!(
        j2["llm"][format!("codegen {second}")]["calls"]
            .as_u64()
            .unwrap()
            >= 1,
        "{j2}"
    );
    assert!(
        j2["llm"][format!("codegen {first}")]["calls"]
            .as_u64()
            .unwrap()
            >= 1,
        "{j2}"
    );

    // A model run cannot turn builtin, nor take a model it cannot parse.
    for bad in ["builtin", "nonsense:model"] {
        let out = ksearch(&["resume", rd.to_str().unwrap(), "--model", bad])
            .current_dir(dir.path())
            .output()
            .unwrap();
        assert!(!out.status.success(), "{bad}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains("builtin") || stderr.contains("invalid model"),
            "{bad}: {stderr}"
        );
    }

    // A builtin run cannot take a model: a usage error that says what to do instead.
    let brd = dir.path().join("builtin");
    let mut args = vec![
        "run",
        "cpu/softmax",
        "--iterations",
        "1",
        "--run-dir",
        brd.to_str().unwrap(),
        "--json",
    ];
    args.extend_from_slice(QUICK);
    run_json(dir.path(), &args);
    let out = ksearch(&["resume", brd.to_str().unwrap(), "--model", &second])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("start a new run with --model"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

//! `ksearch mcp` driven by the official SDK's client over the child's stdio: a run started,
//! answered (once with an answer ksearch cannot use), the server killed while the run waits,
//! a new server resuming it to the end, then the tree, a node, the best result and the export.

use std::path::Path;
use std::time::Duration;

use rmcp::ServiceExt;
use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::{RoleClient, RunningService};
use rmcp::transport::{ConfigureCommandExt, TokioChildProcess};
use serde_json::{Value, json};

use crate::manual_run::answer;
use crate::support::{QUICK, wait_for_store};

type Client = RunningService<RoleClient, ()>;

async fn connect(dir: &Path) -> (Client, u32) {
    let command = tokio::process::Command::new(env!("CARGO_BIN_EXE_ksearch")).configure(|c| {
        c.arg("mcp").current_dir(dir);
    });
    let transport = TokioChildProcess::new(command).unwrap();
    let pid = transport.id().expect("the server runs");
    (().serve(transport).await.unwrap(), pid)
}

async fn call(client: &Client, tool: &'static str, args: Value) -> (Value, bool) {
    let result: CallToolResult = client
        .call_tool(
            CallToolRequestParams::new(tool).with_arguments(args.as_object().unwrap().clone()),
        )
        .await
        .unwrap_or_else(|e| panic!("{tool}: {e}"));
    let error = result.is_error == Some(true);
    (result.structured_content.unwrap_or(Value::Null), error)
}

async fn ok(client: &Client, tool: &'static str, args: Value) -> Value {
    let (v, error) = call(client, tool, args).await;
    assert!(!error, "{tool}: {v}");
    v
}

/// Answers the pending prompt of `step` as a model would; returns the next step.
async fn answer_step(client: &Client, rd: &str, step: &Value) -> Value {
    let pending = &step["pending"];
    let reply = answer(
        pending["purpose"].as_str().unwrap(),
        pending["prompt"].as_str().unwrap(),
    );
    ok(
        client,
        "submit_answer",
        json!({ "run_dir": rd, "answer": reply }),
    )
    .await
}

#[tokio::test(flavor = "current_thread")]
async fn an_agent_runs_a_search_over_mcp_and_survives_a_server_kill() {
    let dir = tempfile::tempdir().unwrap();
    let rd = dir.path().join("run");
    let rd = rd.to_str().unwrap();
    let (client, pid) = connect(dir.path()).await;

    let tools: Vec<String> = client
        .list_all_tools()
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.name.to_string())
        .collect();
    for t in [
        "list_tasks",
        "show_contract",
        "start_run",
        "resume_run",
        "pending_prompt",
        "submit_answer",
        "show_tree",
        "show_node",
        "best_result",
        "export_run",
    ] {
        assert!(tools.iter().any(|x| x == t), "{t} missing from {tools:?}");
    }
    let tasks = ok(&client, "list_tasks", json!({})).await;
    assert!(tasks.to_string().contains("cpu/softmax"), "{tasks}");

    let mut extra: Vec<&str> = QUICK.to_vec();
    extra.extend(["--window", "2"]);
    let step = ok(
        &client,
        "start_run",
        json!({ "task": "cpu/softmax", "iterations": 2, "run_dir": rd, "extra_args": extra }),
    )
    .await;
    assert_eq!(step["state"], "paused", "{step}");
    assert_eq!(step["pending"]["purpose"], "world_model", "{step}");
    // The prompt tells the agent to answer with the tool, not with `ksearch answer`.
    let prompt = step["pending"]["prompt"].as_str().unwrap();
    assert!(
        prompt.contains("`submit_answer` tool") && !prompt.contains("ksearch answer"),
        "{prompt}"
    );
    // A run directory that is not there is said to be missing, not to have no tree yet.
    let missing = dir.path().join("no-such-run");
    let (v, error) = call(
        &client,
        "show_tree",
        json!({ "run_dir": missing.to_str().unwrap() }),
    )
    .await;
    assert!(error && v["error"] == "no such run", "{v}");
    assert!(
        step["pending"]["expected"]
            .as_str()
            .unwrap()
            .contains("JSON")
    );

    // An answer ksearch cannot use: the next prompt is the repair, stating the error.
    let step = answer_step(&client, rd, &step).await;
    assert_eq!(step["state"], "paused", "{step}");
    assert_eq!(step["repair"], true, "{step}");
    assert_eq!(step["pending"]["purpose"], "world_model/repair");

    // The server killed while the run waits; a new one picks the run up where it was.
    // SAFETY: a signal to the server this test started.
    unsafe {
        libc::kill(pid as i32, libc::SIGKILL);
    }
    drop(client);
    let (client, pid) = connect(dir.path()).await;
    let pending = ok(&client, "pending_prompt", json!({ "run_dir": rd })).await;
    assert_eq!(
        pending["pending"]["purpose"], "world_model/repair",
        "{pending}"
    );
    let step = ok(&client, "resume_run", json!({ "run_dir": rd })).await;
    assert_eq!(step["pending"]["purpose"], "world_model/repair", "{step}");

    let step = answer_step(&client, rd, &step).await;
    assert_eq!(step["pending"]["purpose"], "implement", "{step}");
    // A kernel that does not compile: measured as such, then the debug prompt.
    let step = answer_step(&client, rd, &step).await;
    assert_eq!(step["evaluated"][0]["status"], "compile_error", "{step}");
    assert_eq!(step["pending"]["purpose"], "debug", "{step}");

    // The server killed while it evaluates the answer: the run it started dies with it (a
    // survivor would hold the run and refuse the next resume), and a new server evaluates the
    // answer again without asking for it.
    let reply = answer("debug", step["pending"]["prompt"].as_str().unwrap());
    let args = json!({ "run_dir": rd, "answer": reply });
    let submit = tokio::spawn(async move {
        let _ = client
            .call_tool(
                CallToolRequestParams::new("submit_answer")
                    .with_arguments(args.as_object().unwrap().clone()),
            )
            .await;
    });
    let store = dir.path().join("run");
    let recorded = tokio::task::spawn_blocking(move || {
        wait_for_store(&store, Duration::from_secs(60), |s| {
            s.attempts
                .iter()
                .any(|a| a.round == 2 && a.evaluation.is_none())
        })
    })
    .await
    .unwrap();
    assert!(recorded, "the debug attempt was never recorded");
    // SAFETY: a signal to the server this test started.
    unsafe {
        libc::kill(pid as i32, libc::SIGKILL);
    }
    let _ = submit.await;
    let (client, _) = connect(dir.path()).await;
    let step = ok(&client, "resume_run", json!({ "run_dir": rd })).await;
    let measured = &step["evaluated"][0];
    assert_eq!(measured["status"], "passed", "{step}");
    assert!(measured["speedup"].as_f64().unwrap() > 0.0, "{step}");
    assert!(
        measured["latency_ms"]["small"].as_f64().unwrap() > 0.0,
        "{step}"
    );
    // The budget is spent: the run ends without asking for the refine.
    assert_eq!(step["state"], "finished", "{step}");
    assert_eq!(step["summary"]["rounds"], 2, "{step}");

    // Nothing waits now.
    let (v, error) = call(
        &client,
        "submit_answer",
        json!({ "run_dir": rd, "answer": "x" }),
    )
    .await;
    assert!(error, "{v}");

    let tree = ok(&client, "show_tree", json!({ "run_dir": rd })).await;
    assert!(
        tree["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|n| n["id"] != 0 && !n["open"].as_bool().unwrap()),
        "{tree}"
    );
    let best = ok(&client, "best_result", json!({ "run_dir": rd })).await;
    assert!(best["speedup"].as_f64().unwrap() > 0.0, "{best}");
    assert!(
        best["seed_latency_ms"]["small"].as_f64().unwrap() > 0.0,
        "{best}"
    );
    let node = ok(
        &client,
        "show_node",
        json!({ "run_dir": rd, "node": "best" }),
    )
    .await;
    assert!(node.is_object(), "{node}");
    let out = dir.path().join("export");
    let export = ok(
        &client,
        "export_run",
        json!({ "run_dir": rd, "output": out.to_str().unwrap() }),
    )
    .await;
    assert!(out.join("provenance.json").exists(), "{export}");
    // More rounds: the refine the budget's end left owed is asked first.
    let step = ok(
        &client,
        "resume_run",
        json!({ "run_dir": rd, "iterations": 1 }),
    )
    .await;
    assert_eq!(step["pending"]["purpose"], "refine", "{step}");
    let step = answer_step(&client, rd, &step).await;
    assert_eq!(step["state"], "paused", "{step}");
    let tree = ok(&client, "show_tree", json!({ "run_dir": rd })).await;
    assert!(
        tree["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|n| n["title"] == "Vectorize the exp pass"),
        "{tree}"
    );
    client.cancel().await.unwrap();
}

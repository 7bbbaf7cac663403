//! The MCP server's runs take `jobs` (and `executor`) too: a builtin run started and resumed
//! over MCP with two evaluations at once.

use std::path::Path;

use rmcp::ServiceExt;
use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::transport::{ConfigureCommandExt, TokioChildProcess};
use serde_json::{Value, json};

use crate::jobs::{finishes, overlapping, snapshot};
use crate::support::QUICK;

async fn step(
    client: &rmcp::service::RunningService<rmcp::service::RoleClient, ()>,
    tool: &'static str,
    args: Value,
) -> Value {
    let result: CallToolResult = client
        .call_tool(
            CallToolRequestParams::new(tool).with_arguments(args.as_object().unwrap().clone()),
        )
        .await
        .unwrap_or_else(|e| panic!("{tool}: {e}"));
    let v = result.structured_content.unwrap_or(Value::Null);
    assert_ne!(result.is_error, Some(true), "{tool}: {v}");
    v
}

#[tokio::test(flavor = "current_thread")]
async fn runs_over_mcp_evaluate_several_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let rd = dir.path().join("run");
    let rd_text = rd.to_str().unwrap();
    let command = tokio::process::Command::new(env!("CARGO_BIN_EXE_ksearch")).configure(|c| {
        c.arg("mcp").current_dir(dir.path());
    });
    let client = ().serve(TokioChildProcess::new(command).unwrap()).await.unwrap();

    let started = step(
        &client,
        "start_run",
        json!({
            "task": "cpu/softmax",
            "iterations": 4,
            "run_dir": rd_text,
            "reasoning_model": "builtin",
            "codegen_model": "builtin",
            "extra_args": QUICK,
            "jobs": 2,
        }),
    )
    .await;
    assert_eq!(started["state"], "finished", "{started}");
    assert_eq!(
        started["evaluated"].as_array().unwrap().len(),
        4,
        "{started}"
    );
    let resumed = step(
        &client,
        "resume_run",
        json!({ "run_dir": rd_text, "iterations": 2, "jobs": 2 }),
    )
    .await;
    assert_eq!(resumed["state"], "finished", "{resumed}");
    assert_eq!(
        resumed["evaluated"].as_array().unwrap().len(),
        2,
        "{resumed}"
    );
    client.cancel().await.unwrap();

    let (finished, ends) = finishes(&snapshot(Path::new(rd_text)));
    assert_eq!(finished.len(), 6, "{finished:?}");
    assert!(overlapping(&finished).is_some(), "{finished:?}");
    let jobs: Vec<Option<u32>> = ends.iter().map(|e| e.jobs).collect();
    assert_eq!(jobs, [Some(2), Some(2)], "both sessions ran two at once");
}

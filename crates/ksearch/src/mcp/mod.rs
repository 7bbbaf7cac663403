//! `ksearch mcp`: ksearch's tools for a coding agent, over MCP on stdio (the official Rust SDK,
//! `rmcp`). The agent is the run's model: runs use `--model manual`, and each tool that moves a
//! run starts `ksearch run` or `ksearch resume` as a child process (its output never mixes with
//! the protocol on stdout; it dies with the server) and reports where the run stopped: paused
//! on the next prompt, or finished, with what was evaluated on the way.

mod views;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::time::{SystemTime, UNIX_EPOCH};

use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{CallToolResult, ContentBlock, Implementation, ServerCapabilities, ServerConfig};
use rmcp::{ErrorData, ServerHandler, ServiceExt, tool, tool_handler, tool_router};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::commands::run::manual_dir;
use crate::exit_codes;

/// What the server tells a client about itself.
const INSTRUCTIONS: &str = include_str!("instructions.md");

/// Most bytes of a child's stderr quoted in a failure.
const STDERR_LIMIT: usize = 2000;

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub(crate) struct TaskArgs {
    /// A built-in task name (e.g. `cpu/softmax`) or a task directory.
    task: String,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub(crate) struct StartArgs {
    /// A built-in task name (e.g. `cpu/softmax`) or a task directory.
    task: String,
    /// Rounds (evaluated candidates) to run; ksearch's default when absent.
    iterations: Option<u64>,
    /// Where the run goes; `ksearch-runs/<task>-<time>` when absent.
    run_dir: Option<String>,
    /// The reasoning role's model: `manual` (you, the default) or a provider's `PROVIDER:MODEL`.
    reasoning_model: Option<String>,
    /// The code role's model: `manual` (you, the default) or a provider's `PROVIDER:MODEL`.
    codegen_model: Option<String>,
    /// More `ksearch run` flags, e.g. `["--workload", "small", "--window", "2"]`.
    #[serde(default)]
    extra_args: Vec<String>,
    #[serde(flatten)]
    scale: Scale,
}

/// How many evaluations at once, and where (`ksearch run --jobs`, `--executor`).
#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
pub(crate) struct Scale {
    /// Evaluations in flight at once (`--jobs`; 1 when absent): each in its own judge, on its
    /// own CPUs or GPU, several cycles going on different actions.
    jobs: Option<u32>,
    /// Where evaluations run: `local` (the default) or `slurm` (each a Slurm job).
    executor: Option<String>,
}

impl Scale {
    /// The flags that say it.
    fn args(&self) -> Vec<String> {
        let mut args = Vec::new();
        if let Some(n) = self.jobs {
            args.extend(["--jobs".into(), n.to_string()]);
        }
        if let Some(e) = &self.executor {
            args.extend(["--executor".into(), e.clone()]);
        }
        args
    }
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub(crate) struct ResumeArgs {
    /// The run directory.
    run_dir: String,
    /// Rounds to add to the run's budget; what is left of it when absent.
    iterations: Option<u64>,
    #[serde(flatten)]
    scale: Scale,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub(crate) struct RunArgs {
    /// The run directory.
    run_dir: String,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub(crate) struct AnswerArgs {
    /// The run directory.
    run_dir: String,
    /// The answer to the pending prompt, exactly as a model would reply.
    answer: String,
    /// How the run goes on after the answer (as `start_run` said; each call says it again).
    #[serde(flatten)]
    scale: Scale,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub(crate) struct NodeArgs {
    /// The run directory.
    run_dir: String,
    /// A node id, `best` or `seed`.
    node: String,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub(crate) struct ExportArgs {
    /// The run directory.
    run_dir: String,
    /// Where to write the export; `RUN_DIR/export` when absent.
    output: Option<String>,
}

/// The server: no state of its own; every run lives in its directory.
#[derive(Debug, Clone)]
pub(crate) struct Server {
    #[expect(
        dead_code,
        reason = "the tool_handler macro routes through Self::tool_router()"
    )]
    tool_router: ToolRouter<Self>,
    exe: PathBuf,
}

fn failure(what: &str, detail: impl Into<String>) -> CallToolResult {
    CallToolResult::structured_error(json!({ "error": what, "detail": detail.into() }))
}

fn stderr_tail(out: &Output) -> String {
    let text = String::from_utf8_lossy(&out.stderr);
    let text = text.trim();
    let mut start = text.len().saturating_sub(STDERR_LIMIT);
    while !text.is_char_boundary(start) {
        start += 1;
    }
    text[start..].to_owned()
}

/// Rounds of `run_dir` already evaluated.
fn evaluated_rounds(run_dir: &Path) -> BTreeSet<u64> {
    views::read(run_dir)
        .map(|(_, _, attempts)| {
            attempts
                .iter()
                .filter(|a| a.evaluation.is_some())
                .map(|a| a.round)
                .collect()
        })
        .unwrap_or_default()
}

#[tool_router]
impl Server {
    fn new() -> anyhow::Result<Self> {
        Ok(Self {
            tool_router: Self::tool_router(),
            exe: std::env::current_exe()?,
        })
    }

    /// `ksearch ARGS` as a child with no stdin; it dies with the server.
    async fn ksearch(&self, args: &[String]) -> Result<Output, ErrorData> {
        let mut command = tokio::process::Command::new(&self.exe);
        command
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        #[cfg(target_os = "linux")]
        // SAFETY: prctl only, between fork and exec.
        unsafe {
            command.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0);
                Ok(())
            });
        }
        command.output().await.map_err(|e| {
            ErrorData::internal_error(
                format!("cannot run `ksearch {}`: {e}", args.join(" ")),
                None,
            )
        })
    }

    /// Runs `args` (a `run` or `resume`) and says where the run stopped.
    async fn step(&self, args: Vec<String>, run_dir: &Path) -> Result<CallToolResult, ErrorData> {
        let before = evaluated_rounds(run_dir);
        let out = self.ksearch(&args).await?;
        let read = views::read(run_dir);
        let evaluated: Vec<Value> = read
            .iter()
            .flat_map(|(_, _, attempts)| attempts)
            .filter(|a| a.round > 0 && a.evaluation.is_some() && !before.contains(&a.round))
            .map(views::attempt)
            .collect();
        match out.status.code() {
            Some(exit_codes::INTERRUPTED) => Ok(CallToolResult::structured(json!({
                "state": "interrupted",
                "run_dir": run_dir,
                "evaluated": evaluated,
                "summary": read.as_ref().map(|(s, _, _)| views::summary(s)),
            }))),
            Some(exit_codes::OK) => Ok(CallToolResult::structured(json!({
                "state": "finished",
                "run_dir": run_dir,
                "evaluated": evaluated,
                "summary": read.as_ref().map(|(s, _, _)| views::summary(s)),
            }))),
            Some(exit_codes::PAUSED) => {
                let call = ksearch_llm::pending_call(&manual_dir(run_dir))
                    .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
                Ok(CallToolResult::structured(json!({
                    "state": "paused",
                    "run_dir": run_dir,
                    "evaluated": evaluated,
                    // A re-ask: the last answer could not be used, and the prompt says why.
                    "repair": call.as_ref().is_some_and(|c| c.purpose.ends_with("/repair")),
                    "pending": call.as_ref().map(views::pending),
                })))
            }
            code => Ok(CallToolResult::structured_error(json!({
                "state": "failed",
                "run_dir": run_dir,
                "exit_code": code,
                "evaluated": evaluated,
                "error": stderr_tail(&out),
            }))),
        }
    }

    /// A child's stdout as JSON, or the failure.
    async fn json_of(&self, args: &[String]) -> Result<CallToolResult, ErrorData> {
        let out = self.ksearch(args).await?;
        if !out.status.success() {
            return Ok(failure(
                &format!("`ksearch {}` failed", args[0]),
                stderr_tail(&out),
            ));
        }
        match serde_json::from_slice::<Value>(&out.stdout) {
            Ok(v @ Value::Object(_)) => Ok(CallToolResult::structured(v)),
            // MCP's structured content is an object.
            Ok(v) => Ok(CallToolResult::structured(json!({ "items": v }))),
            Err(e) => Ok(failure("unreadable output", e.to_string())),
        }
    }

    #[tool(description = "List ksearch's built-in tasks: name, backend, description.")]
    async fn list_tasks(&self) -> Result<CallToolResult, ErrorData> {
        self.json_of(&["tasks".into(), "--json".into()]).await
    }

    #[tool(description = "Show a task's candidate contract: the function a kernel must define.")]
    async fn show_contract(
        &self,
        Parameters(a): Parameters<TaskArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        let out = self.ksearch(&["contract".into(), a.task]).await?;
        if !out.status.success() {
            return Ok(failure("no contract", stderr_tail(&out)));
        }
        Ok(CallToolResult::success(vec![ContentBlock::text(
            String::from_utf8_lossy(&out.stdout).into_owned(),
        )]))
    }

    #[tool(
        description = "Start a run with you as the model (`--model manual`). Returns the first pending prompt, or the failure."
    )]
    async fn start_run(
        &self,
        Parameters(a): Parameters<StartArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        let run_dir = a.run_dir.map_or_else(
            || {
                let secs = SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .map_or(0, |d| d.as_secs());
                PathBuf::from("ksearch-runs").join(format!(
                    "{}-{secs}",
                    a.task.trim_matches('/').replace('/', "-")
                ))
            },
            PathBuf::from,
        );
        let mut args = vec![
            "run".into(),
            a.task,
            "--reasoning-model".into(),
            a.reasoning_model.unwrap_or_else(|| "manual".into()),
            "--codegen-model".into(),
            a.codegen_model.unwrap_or_else(|| "manual".into()),
            "--run-dir".into(),
            run_dir.display().to_string(),
            "--json".into(),
            // Its stderr is quoted as the error when it fails: errors only, no progress.
            "--quiet".into(),
        ];
        if let Some(n) = a.iterations {
            args.extend(["--iterations".into(), n.to_string()]);
        }
        args.extend(a.extra_args);
        args.extend(a.scale.args());
        self.step(args, &run_dir).await
    }

    #[tool(
        description = "Resume a paused, stopped or killed run. Returns the pending prompt, or the finished run's summary."
    )]
    async fn resume_run(
        &self,
        Parameters(a): Parameters<ResumeArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        let mut args = vec![
            "resume".into(),
            a.run_dir.clone(),
            "--json".into(),
            "--quiet".into(),
        ];
        if let Some(n) = a.iterations {
            args.extend(["--iterations".into(), n.to_string()]);
        }
        args.extend(a.scale.args());
        self.step(args, Path::new(&a.run_dir)).await
    }

    #[tool(description = "The prompt a paused run waits for (null when none waits).")]
    async fn pending_prompt(
        &self,
        Parameters(a): Parameters<RunArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        match ksearch_llm::pending_call(&manual_dir(Path::new(&a.run_dir))) {
            Ok(call) => Ok(CallToolResult::structured(json!({
                "run_dir": a.run_dir,
                "pending": call.as_ref().map(views::pending),
            }))),
            Err(e) => Ok(failure("cannot read the run's calls", e.to_string())),
        }
    }

    #[tool(
        description = "Answer the pending prompt; the run goes on: the answer is parsed, any kernel evaluated. Returns what was measured and the next prompt (a repair prompt if the answer could not be used), or the finished run's summary."
    )]
    async fn submit_answer(
        &self,
        Parameters(a): Parameters<AnswerArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        let run_dir = Path::new(&a.run_dir);
        let call = match ksearch_llm::pending_call(&manual_dir(run_dir)) {
            Ok(Some(call)) => call,
            Ok(None) => {
                return Ok(failure(
                    "nothing pending",
                    format!("{} waits for no answer; resume_run goes on", a.run_dir),
                ));
            }
            Err(e) => return Ok(failure("cannot read the run's calls", e.to_string())),
        };
        if a.answer.trim().is_empty() {
            return Ok(failure(
                "empty answer",
                format!("model call {} still waits for one", call.call),
            ));
        }
        if let Err(e) = call.write_answer(&a.answer) {
            return Ok(failure("cannot write the answer", e.to_string()));
        }
        let mut args = vec![
            "resume".into(),
            a.run_dir.clone(),
            "--json".into(),
            "--quiet".into(),
        ];
        args.extend(a.scale.args());
        self.step(args, run_dir).await
    }

    #[tool(
        description = "The run's tree: each node's action, prediction and measured speedup, with the run's numbers."
    )]
    async fn show_tree(
        &self,
        Parameters(a): Parameters<RunArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        match views::read_or_why(Path::new(&a.run_dir), "no tree yet") {
            Ok((s, tree, _)) => Ok(CallToolResult::structured(json!({
                "summary": views::summary(&s),
                "nodes": views::tree(&tree),
            }))),
            Err((what, detail)) => Ok(failure(what, detail)),
        }
    }

    #[tool(
        description = "One node in full: hypothesis, attempts, evaluations and its solution's source."
    )]
    async fn show_node(
        &self,
        Parameters(a): Parameters<NodeArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        self.json_of(&["show".into(), a.run_dir, a.node, "--json".into()])
            .await
    }

    #[tool(
        description = "The run's best result: speedups over the baseline and the seed, latencies."
    )]
    async fn best_result(
        &self,
        Parameters(a): Parameters<RunArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        match views::read_or_why(Path::new(&a.run_dir), "no result yet") {
            Ok((s, _, _)) => Ok(CallToolResult::structured(views::best(&s))),
            Err((what, detail)) => Ok(failure(what, detail)),
        }
    }

    #[tool(description = "Export the run's best kernel (sources and provenance.json).")]
    async fn export_run(
        &self,
        Parameters(a): Parameters<ExportArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        let mut args = vec!["export".into(), a.run_dir, "--json".into()];
        if let Some(o) = a.output {
            args.extend(["--output".into(), o]);
        }
        self.json_of(&args).await
    }
}

#[tool_handler]
impl ServerHandler for Server {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("ksearch", env!("CARGO_PKG_VERSION")))
            .with_instructions(INSTRUCTIONS)
    }
}

/// `ksearch mcp`: serves until the client closes stdin.
pub(crate) fn serve() -> anyhow::Result<i32> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let server = Server::new()?;
        let running = server.serve(rmcp::transport::stdio()).await?;
        running.waiting().await?;
        Ok::<_, anyhow::Error>(())
    })?;
    Ok(exit_codes::OK)
}

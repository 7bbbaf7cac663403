//! The command line, declared with clap.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};
use ksearch_core::protocol::{DEFAULT_BASE_SEED, DEFAULT_SEEDS, TimingPlan};
use ksearch_engine::{MAX_TIMEOUT_S, MAX_TIMING_MS, check_range};

/// A number flag in a range: a usage error (exit code 2) naming the flag and the range
/// otherwise, so that no NaN, infinity or out-of-range value reaches a run's configuration.
fn number_in(text: &str, lo: f64, lo_open: bool, hi: f64, unit: &str) -> Result<f64, String> {
    let value: f64 = text
        .trim()
        .parse()
        .map_err(|_| format!("`{text}` is not a number"))?;
    check_range("", value, lo, lo_open, hi, unit)
        .map(|()| value)
        .map_err(|e| format!("it must be {}", e.allowed))
}

/// `--timeout`: seconds, more than 0, at most a week.
fn timeout_s(text: &str) -> Result<f64, String> {
    number_in(text, 0.0, true, MAX_TIMEOUT_S, "seconds")
}

/// `--warmup-ms`, `--min-time-ms`: milliseconds, 0 to an hour.
fn ms(text: &str) -> Result<f64, String> {
    number_in(text, 0.0, false, MAX_TIMING_MS, "milliseconds")
}

/// `--max-time-ms`: milliseconds, more than 0, at most an hour.
fn positive_ms(text: &str) -> Result<f64, String> {
    number_in(text, 0.0, true, MAX_TIMING_MS, "milliseconds")
}

/// A count or a seed: a whole number, 0 or more.
fn whole(text: &str) -> Result<u64, String> {
    text.trim()
        .parse()
        .map_err(|_| format!("`{text}` is not a whole number of 0 or more"))
}

/// `--min-runs`: a whole number, 0 or more, that fits 32 bits.
fn whole_u32(text: &str) -> Result<u32, String> {
    let n = whole(text)?;
    u32::try_from(n).map_err(|_| format!("{n} is more than {}", u32::MAX))
}

/// `--max-cost`: US dollars, more than 0.
fn usd(text: &str) -> Result<f64, String> {
    number_in(text, 0.0, true, f64::MAX, "US dollars")
}

#[derive(Debug, Parser)]
#[command(
    name = "ksearch",
    version = concat!(env!("CARGO_PKG_VERSION"), " (", env!("KSEARCH_COMMIT"), ")"),
    about = "An evolutionary, LLM-guided optimizer for compute kernels"
)]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub(crate) command: Command,
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// List the built-in tasks.
    Tasks {
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Print the candidate contract of a task: the function a candidate must define.
    Contract {
        /// A built-in task name (e.g. `cpu/softmax`) or a task directory.
        task: String,
    },
    /// Check and time one candidate against a task's reference and baseline.
    Eval(EvalArgs),
    /// Search: grow a tree of optimization hypotheses and keep what measures faster.
    Run(Box<RunArgs>),
    /// Continue a stopped, paused or killed run.
    Resume(ResumeArgs),
    /// Serve ksearch's tools to a coding agent over MCP on stdio; the agent is the runs' model.
    Mcp,
    /// Answer the model call a run paused for (`--model manual`); `ksearch resume` goes on.
    Answer {
        /// The run directory of the paused run.
        run_dir: PathBuf,
        /// The answer's file, or `-` (the default) for stdin.
        #[arg(default_value = "-")]
        file: PathBuf,
    },
    /// Show a run's tree: actions, status, predicted and measured speedups, the best path.
    Tree {
        /// The run directory.
        run_dir: PathBuf,
        /// Print JSON (the run summary and every node).
        #[arg(long)]
        json: bool,
    },
    /// Write a run's report: one self-contained HTML page.
    Report(crate::commands::report::ReportArgs),
    /// Show one node of a run: hypothesis, numbers, notes, attempts, source.
    Show(crate::commands::show::ShowArgs),
    /// Export a run's best kernel as something to drop into a project, with its provenance.
    Export(crate::commands::export::ExportArgs),
    /// The knowledge layer: hardware specs, CUDA→Metal/MLX translations, tactics, and the
    /// rules checked on every candidate.
    Knowledge(crate::commands::knowledge::KnowledgeArgs),
    /// A task's template space, which the builtin proposer searches: check its points.
    Space(crate::commands::space::SpaceArgs),
    /// Write a task directory from a benchmark suite's files (FlashInfer-Bench, KernelBench).
    Import(crate::commands::import::ImportArgs),
    /// Confine a program and run it (started by ksearch's evaluation workers).
    #[command(hide = true)]
    Sandbox {
        /// The sandbox spec, JSON.
        spec: std::ffi::OsString,
    },
    /// Run an evaluation runner (started in a sandbox by a worker).
    #[command(hide = true)]
    Runner {
        /// The backend whose runner ksearch hosts: `c`.
        backend: String,
    },
    /// Run an evaluation worker (started by ksearch itself).
    #[command(hide = true)]
    Worker {
        /// The backend whose worker ksearch hosts: `c`.
        backend: String,
    },
    /// Evaluate one job file and write its outcome (a cluster job of `--executor slurm`).
    #[command(hide = true)]
    EvalJob {
        /// The job file the orchestrator wrote.
        job: PathBuf,
        /// Where the outcome goes.
        result: PathBuf,
    },
}

#[derive(Debug, Args)]
pub(crate) struct EvalArgs {
    /// A built-in task name (e.g. `cpu/softmax`) or a task directory.
    pub(crate) task: String,
    /// The candidate source; the task's seed when omitted.
    pub(crate) candidate: Option<PathBuf>,
    /// Also time this implementation, interleaved with the candidate in the same worker, and
    /// report the candidate's speedup over it (e.g. the task's seed).
    #[arg(long, value_name = "FILE")]
    pub(crate) against: Option<PathBuf>,
    /// Print one JSON object instead of a report.
    #[arg(long)]
    pub(crate) json: bool,
    #[command(flatten)]
    pub(crate) eval: EvalFlags,
}

/// How candidates are checked and timed (shared by `eval`, `run`).
#[derive(Debug, Args)]
pub(crate) struct EvalFlags {
    /// Evaluate only this workload (repeatable).
    #[arg(long = "workload", value_name = "NAME")]
    pub(crate) workloads: Vec<String>,
    /// Number of random input seeds checked per workload (1 to 64).
    #[arg(long, default_value_t = DEFAULT_SEEDS as u32, allow_negative_numbers = true, value_parser = clap::value_parser!(u32).range(1..=ksearch_eval::MAX_SEEDS as i64))]
    pub(crate) seeds: u32,
    /// First input seed; the others follow it.
    #[arg(long, default_value_t = DEFAULT_BASE_SEED, allow_negative_numbers = true, value_parser = whole)]
    pub(crate) input_seed: u64,
    /// Wall-clock limit of one evaluation, in seconds (more than 0, at most 604800: a week)
    /// [default: 300 for `eval` and a run's seed; a run's later rounds get 4 × the seed's
    /// evaluation time, at least 30].
    #[arg(long, allow_negative_numbers = true, value_parser = timeout_s)]
    pub(crate) timeout: Option<f64>,
    /// Check correctness only; do not time.
    #[arg(long)]
    pub(crate) no_timing: bool,
    /// Minimum timed samples per contender and workload.
    #[arg(long, default_value_t = TimingPlan::DEFAULT.min_runs, allow_negative_numbers = true, value_parser = whole_u32)]
    pub(crate) min_runs: u32,
    /// Minimum measured time per contender and workload, in milliseconds (0 to 3600000).
    #[arg(long, default_value_t = TimingPlan::DEFAULT.min_time_ms, allow_negative_numbers = true, value_parser = ms)]
    pub(crate) min_time_ms: f64,
    /// Time budget per workload, in milliseconds (every contender still gets 3 samples; more
    /// than 0, at most 3600000).
    #[arg(long, default_value_t = TimingPlan::DEFAULT.max_time_ms, allow_negative_numbers = true, value_parser = positive_ms)]
    pub(crate) max_time_ms: f64,
    /// Warm-up per contender and workload, in milliseconds (0 to 3600000).
    #[arg(long, default_value_t = TimingPlan::DEFAULT.warmup_ms, allow_negative_numbers = true, value_parser = ms)]
    pub(crate) warmup_ms: f64,
    /// mlx tasks: the GPU target, `metal` or `cuda` (`numpy` and MLX's `cpu` run the test
    /// suite's tasks without a GPU) [default: the GPU MLX finds]; torch tasks: `cuda`, or `cpu`
    /// (PyTorch's CPU build) [default: cuda where PyTorch sees a GPU].
    #[arg(long)]
    pub(crate) target: Option<String>,
    /// mlx and torch tasks: the Python interpreter that has MLX or PyTorch [default: python3].
    #[arg(long)]
    pub(crate) python: Option<String>,
    /// The device whose limits the knowledge rules check (see `ksearch knowledge hardware`)
    /// [default: the local GPU, when one is found].
    #[arg(long)]
    pub(crate) hardware: Option<String>,
}

#[derive(Debug, Args)]
pub(crate) struct RunArgs {
    /// A built-in task name (e.g. `cpu/matmul`) or a task directory.
    pub(crate) task: String,
    #[command(flatten)]
    pub(crate) models: ModelFlags,
    /// Rounds to run: candidates generated and evaluated [default: 30, or `budget.iterations`].
    #[arg(long, allow_negative_numbers = true, value_parser = whole)]
    pub(crate) iterations: Option<u64>,
    /// Stop starting new rounds after this long (e.g. `20m`, `1h30m`).
    #[arg(long, value_parser = humantime::parse_duration)]
    pub(crate) time: Option<std::time::Duration>,
    /// Re-run a recorded run from its journal: model answers and evaluations come from RUN_DIR's
    /// record, without network or hardware. Every recorded session is replayed and stopped
    /// where and why it stopped, to the end of the record: the same tree, the same stop
    /// reason. A replay that needs something the record lacks stops and says where.
    #[arg(long, value_name = "RUN_DIR")]
    pub(crate) replay: Option<PathBuf>,
    /// Where the run is stored; default `ksearch-runs/<task>-<UTC time>`.
    #[arg(long)]
    pub(crate) run_dir: Option<PathBuf>,
    /// Seed of the search's random choices.
    #[arg(long, default_value_t = 0, allow_negative_numbers = true, value_parser = whole)]
    pub(crate) seed: u64,
    /// Stagnation window: a cycle ends after this many attempts without improvement.
    #[arg(long, default_value_t = 5, allow_negative_numbers = true, value_parser = clap::value_parser!(u32).range(1..))]
    pub(crate) window: u32,
    #[command(flatten)]
    pub(crate) output: OutputFlags,
    #[command(flatten)]
    pub(crate) eval: EvalFlags,
    #[command(flatten)]
    pub(crate) scale: ScaleFlags,
}

/// How many evaluations at once, and where (shared by `run` and `resume`; `docs/scale.md`).
#[derive(Debug, Args, Clone)]
pub(crate) struct ScaleFlags {
    /// Evaluations in flight at once, each in its own judge: on this machine each gets its own
    /// CPUs (and, for a GPU task, its own GPU); with `--executor slurm`, jobs queued at once.
    /// The search keeps as many cycles going, on different actions.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=256))]
    pub(crate) jobs: u32,
    /// Where evaluations run: `local` (this machine) or `slurm` (each a Slurm job; see
    /// `[slurm]` in ksearch.toml).
    #[arg(long, default_value = "local", value_parser = ["local", "slurm"])]
    pub(crate) executor: String,
}

/// Which proposer and models (shared by `run` and `resume`).
#[derive(Debug, Args, Default)]
pub(crate) struct ModelFlags {
    /// The proposer for both roles: `builtin` (no LLM; template search over known tactics),
    /// `manual` or `manual:<label>` (you or a coding agent answer each model call from files:
    /// the run pauses with exit code 4; `ksearch answer`, then `ksearch resume`), or a model:
    /// `openai:<model>` (any OpenAI-compatible server), `openai-responses:<model>`,
    /// `gemini:<model>`, `anthropic:<model>`, or `exec:<command>` (any command: the prompt on
    /// its stdin, the answer on its stdout) [default: builtin, or `models.model`].
    #[arg(long)]
    pub(crate) model: Option<String>,
    /// The reasoning model (world model, refine, too-hard), overriding --model.
    #[arg(long)]
    pub(crate) reasoning_model: Option<String>,
    /// The code model (implement, debug, improve), overriding --model.
    #[arg(long)]
    pub(crate) codegen_model: Option<String>,
    /// Base URL of an OpenAI-compatible server (vLLM, Ollama, llama.cpp, LM Studio, OpenRouter),
    /// e.g. `http://localhost:8000/v1` [env: OPENAI_BASE_URL].
    #[arg(long)]
    pub(crate) base_url: Option<String>,
    /// Stop cleanly before a model call could take the run's spend above this many US dollars.
    #[arg(long, value_name = "USD", allow_negative_numbers = true, value_parser = usd)]
    pub(crate) max_cost: Option<f64>,
    /// Reasoning effort for models that take one (`low`, `medium`, `high`).
    #[arg(long)]
    pub(crate) reasoning_effort: Option<String>,
    /// How much of the knowledge layer goes into prompts: `none` (the task alone), `hardware`
    /// (the device's numbers and pitfalls) or `full` (also translations, tactics and rules).
    #[arg(long, default_value = "full", value_parser = ["none", "hardware", "full"])]
    pub(crate) knowledge: String,
}

#[derive(Debug, Args)]
pub(crate) struct ResumeArgs {
    /// The run directory of the run to continue.
    pub(crate) run_dir: PathBuf,
    /// Rounds to run in this session (default: what is left of the run's budget).
    #[arg(long, allow_negative_numbers = true, value_parser = whole)]
    pub(crate) iterations: Option<u64>,
    /// Stop starting new rounds after this long (e.g. `20m`).
    #[arg(long, value_parser = humantime::parse_duration)]
    pub(crate) time: Option<std::time::Duration>,
    /// Raise or set the spending cap for this session, in US dollars.
    #[arg(long, value_name = "USD", allow_negative_numbers = true, value_parser = usd)]
    pub(crate) max_cost: Option<f64>,
    /// Base URL of an OpenAI-compatible server, if it moved since the run started.
    #[arg(long)]
    pub(crate) base_url: Option<String>,
    /// Another model for both roles in this session (a model run only; the tree, the budget and
    /// the paid answers stay); the run keeps its own for later sessions.
    #[arg(long)]
    pub(crate) model: Option<String>,
    /// Another reasoning model in this session, overriding --model.
    #[arg(long)]
    pub(crate) reasoning_model: Option<String>,
    /// Another code model in this session, overriding --model.
    #[arg(long)]
    pub(crate) codegen_model: Option<String>,
    #[command(flatten)]
    pub(crate) output: OutputFlags,
    #[command(flatten)]
    pub(crate) scale: ScaleFlags,
}

#[derive(Debug, Args)]
pub(crate) struct OutputFlags {
    /// Print one JSON object with the run's result at the end (progress still goes to stderr).
    #[arg(long)]
    pub(crate) json: bool,
    /// No progress on stderr (errors still go there).
    #[arg(long, short)]
    pub(crate) quiet: bool,
}

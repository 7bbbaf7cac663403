//! The command line, declared with clap.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(
    name = "ksearch",
    version,
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
    /// Run an evaluation worker (started by ksearch itself).
    #[command(hide = true)]
    Worker {
        /// The backend: `c`.
        backend: String,
    },
}

#[derive(Debug, Args)]
pub(crate) struct EvalArgs {
    /// A built-in task name (e.g. `cpu/softmax`) or a task directory.
    pub(crate) task: String,
    /// The candidate source; the task's seed when omitted.
    pub(crate) candidate: Option<PathBuf>,
    /// Print one JSON object instead of a report.
    #[arg(long)]
    pub(crate) json: bool,
    /// Evaluate only this workload (repeatable).
    #[arg(long = "workload", value_name = "NAME")]
    pub(crate) workloads: Vec<String>,
    /// Number of random input seeds checked per workload.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..))]
    pub(crate) seeds: u32,
    /// First seed; the others follow it.
    #[arg(long, default_value_t = 1)]
    pub(crate) seed: u64,
    /// Wall-clock limit of the whole evaluation, in seconds.
    #[arg(long, default_value_t = 300.0)]
    pub(crate) timeout: f64,
    /// Check correctness only; do not time.
    #[arg(long)]
    pub(crate) no_timing: bool,
    /// Minimum timed samples per contender and workload.
    #[arg(long, default_value_t = 10)]
    pub(crate) min_runs: u32,
    /// Minimum measured time per contender and workload, in milliseconds.
    #[arg(long, default_value_t = 300.0)]
    pub(crate) min_time_ms: f64,
    /// Time budget per workload, in milliseconds (every contender still gets 3 samples).
    #[arg(long, default_value_t = 10_000.0)]
    pub(crate) max_time_ms: f64,
    /// Warm-up per contender and workload, in milliseconds.
    #[arg(long, default_value_t = 50.0)]
    pub(crate) warmup_ms: f64,
}

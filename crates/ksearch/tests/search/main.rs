//! The search engine: full runs through the CLI (budgets, resume after SIGKILL and Ctrl-C,
//! determinism), and engine transitions driven by a scripted proposer.

#[path = "../common/softmax_kernels.rs"]
mod kernels;

mod agent_path;
mod cli_runs;
mod jobs;
mod llama_cpp;
mod llm_run;
mod manual_run;
mod mcp;
mod mcp_jobs;
mod model_bounds;
mod replay;
mod run_dir;
mod scripted;
mod slurm;
mod space_landscape;
mod support;
mod unusable_model;

//! What `ksearch` asks of Slurm's commands and how it reads their answers: the settings jobs are
//! submitted with (`[slurm]` in ksearch.toml), the options the backend runs with on the nodes,
//! running a command with a scrubbed environment, and which queue states are final.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

/// How jobs are submitted: `[slurm]` in ksearch.toml.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SlurmSettings {
    pub partition: Option<String>,
    pub account: Option<String>,
    /// `--time`, in Slurm's words (`30`, `1:00:00`); unset: the evaluation's limit plus 5
    /// minutes.
    pub time_limit: Option<String>,
    /// `--cpus-per-task` (a CPU judge with two CPUs pins itself to one and its runners to
    /// the other).
    pub cpus_per_job: Option<u32>,
    /// `--gres` of a GPU task's jobs; `gpu:1` when unset.
    pub gres: Option<String>,
    /// More `sbatch` options, as given.
    pub extra_args: Vec<String>,
    /// The ksearch binary as the nodes see it; this one's path when unset.
    pub ksearch: Option<PathBuf>,
    /// How often `squeue` is asked.
    pub poll_interval: Duration,
}

/// What the backend is run with on the nodes (the run's `--python`, `--target`,
/// `--hardware`).
#[derive(Debug, Clone, Default)]
pub struct NodeOptions {
    pub python: Option<PathBuf>,
    pub target: Option<String>,
    pub hardware: Option<String>,
}

/// `'text'` for `/bin/sh`.
pub(super) fn quoted(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

pub(super) fn run_tool(program: &str, args: &[String]) -> Result<String, (bool, String)> {
    let out = Command::new(program)
        .args(args)
        .env_clear()
        .envs(crate::env_scrub::scrubbed(std::env::vars_os()))
        .stdin(Stdio::null())
        .output()
        .map_err(|e| (false, format!("cannot run `{program}`: {e}")))?;
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    if out.status.success() {
        Ok(stdout)
    } else {
        Err((
            true,
            format!(
                "`{program} {}` failed ({}): {}",
                args.join(" "),
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            ),
        ))
    }
}

/// The end of a file, for a reason.
pub(super) fn tail(path: &Path) -> String {
    let text = std::fs::read(path).unwrap_or_default();
    let text = String::from_utf8_lossy(&text);
    let text = text.trim();
    let mut start = text.len().saturating_sub(1500);
    while !text.is_char_boundary(start) {
        start += 1;
    }
    text[start..].to_owned()
}

/// Queue states after which a job runs no more.
pub(super) fn ended(state: &str) -> bool {
    matches!(
        state,
        "COMPLETED"
            | "CANCELLED"
            | "FAILED"
            | "TIMEOUT"
            | "PREEMPTED"
            | "NODE_FAIL"
            | "BOOT_FAIL"
            | "DEADLINE"
            | "OUT_OF_MEMORY"
            | "REVOKED"
    )
}

//! `ksearch knowledge …`: the knowledge layer (hardware, translation, tactics, assertions) from
//! the command line. The logic and the texts live in `ksearch_knowledge::cli`, where they are
//! tested; this module parses arguments, prints and picks the exit code.
//!
//! Exit codes: 0 when the command did what was asked (`check`: no violations); 1 when `check`
//! found violations; 3 for usage and input errors (an unreadable file or knowledge directory,
//! an unknown topic, backend, target or device), printed here as `error: …`. A broken built-in
//! knowledge base is an internal error (1, through the caller's error path).

use std::io::Write;
use std::path::PathBuf;

use clap::{Args, Subcommand};
use ksearch_knowledge::Knowledge;
use ksearch_knowledge::cli::{self, CommandOutput};

use crate::exit_codes;

#[derive(Debug, Args)]
pub(crate) struct KnowledgeArgs {
    /// Read the knowledge from this directory (laid out like the repository's `knowledge/`)
    /// instead of the copy built into ksearch.
    #[arg(long, value_name = "DIR", global = true)]
    pub(crate) dir: Option<PathBuf>,
    #[command(subcommand)]
    pub(crate) command: KnowledgeCommand,
}

#[derive(Debug, Subcommand)]
pub(crate) enum KnowledgeCommand {
    /// List the hardware files, translation entries, tactics and assertions.
    List {
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Show one entry: a translation (by id, or a CUDA or Metal name such as `__syncthreads`),
    /// a tactic, an assertion or a device.
    Show {
        topic: String,
        /// Show only the CUDA side and this side of a translation: `metal`, `mlx` or `cuda`
        /// (`cuda` reads the entry from Metal to CUDA).
        #[arg(long, value_name = "BACKEND")]
        to: Option<String>,
    },
    /// List the hardware files and the GPU detected here, or show one device with the source
    /// of every number.
    Hardware {
        /// A hardware id (`m3-max`), alias or name as tools print it ("NVIDIA H200").
        name: Option<String>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Run the assertions on a file. Exit code 0 when clean, 1 when violations are found, 3 for
    /// usage or input errors.
    Check {
        file: PathBuf,
        /// What the file is written in: `c`, `cuda`, `metal` or `mlx`.
        #[arg(long)]
        backend: String,
        /// Where it runs: `cpu`, `cuda` or `metal` (default: the device's, or the backend's
        /// only target; required for `mlx` without `--hardware`).
        #[arg(long)]
        target: Option<String>,
        /// Take limits from this device (id, alias or name); otherwise platform defaults.
        #[arg(long)]
        hardware: Option<String>,
        /// Print one JSON object: file, platform, hardware, clean, violations.
        #[arg(long)]
        json: bool,
    },
}

pub(crate) fn run(args: &KnowledgeArgs) -> anyhow::Result<i32> {
    let knowledge = match &args.dir {
        Some(dir) => Knowledge::load_dir(dir)?,
        None => Knowledge::builtin()
            .map_err(|e| anyhow::anyhow!("the built-in knowledge does not load:\n{e}"))?,
    };
    let ok = |stdout: String| CommandOutput {
        stdout,
        violations: false,
    };
    let result = match &args.command {
        KnowledgeCommand::List { json } => Ok(ok(cli::list(&knowledge, *json))),
        KnowledgeCommand::Show { topic, to } => cli::show(&knowledge, topic, to.as_deref()).map(ok),
        KnowledgeCommand::Hardware { name, json } => {
            // Detection runs only for the list, where it is shown.
            let detected = match name {
                None => ksearch_knowledge::detect_local(&knowledge),
                Some(_) => None,
            };
            cli::hardware(&knowledge, name.as_deref(), *json, detected.as_ref()).map(ok)
        }
        KnowledgeCommand::Check {
            file,
            backend,
            target,
            hardware,
            json,
        } => cli::check_file(
            &knowledge,
            file,
            backend,
            target.as_deref(),
            hardware.as_deref(),
            *json,
        ),
    };
    let out = result?;
    let mut stdout = std::io::stdout().lock();
    stdout.write_all(out.stdout.as_bytes())?;
    stdout.flush()?;
    Ok(if out.violations {
        exit_codes::CHECK_FAILED
    } else {
        exit_codes::OK
    })
}

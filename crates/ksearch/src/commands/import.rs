//! `ksearch import flashinfer-bench DEFINITION.json [--workloads FILE.jsonl]` and `ksearch import
//! kernelbench PROBLEM.py`: a task directory from a benchmark suite's files. The conversions are
//! `ksearch_tasks::import`'s (pure); this module reads the files, runs the KernelBench probe
//! (`python3`, which must have PyTorch), and writes the directory whole or not at all.
//!
//! Exit codes: 0 written; 3 when the input cannot be read or expressed (nothing is written).

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use clap::{Args, Subcommand};
use ksearch_tasks::import::{ImportError, TaskFiles, flashinfer, kernelbench};

use crate::exit_codes;

#[derive(Debug, Args)]
pub(crate) struct ImportArgs {
    #[command(subcommand)]
    pub(crate) suite: Suite,
}

#[derive(Debug, Subcommand)]
pub(crate) enum Suite {
    /// A FlashInfer-Bench Definition (JSON) as a torch task: const and var axes, constraints,
    /// the reference's `run`, workloads from a trace (JSON lines) or generated.
    #[command(name = "flashinfer-bench")]
    FlashinferBench {
        definition: PathBuf,
        /// Workloads or Traces of the definition, one JSON object a line.
        #[arg(long)]
        workloads: Option<PathBuf>,
        /// The task directory to write (it must not exist) [default: the definition's name].
        #[arg(short, long)]
        output: Option<PathBuf>,
    },
    /// A KernelBench problem (`Model`, `get_inputs`, `get_init_inputs`) as a torch task whose
    /// candidates are KernelBench's `ModelNew`; runs the problem on PyTorch's meta device with
    /// `python3` to learn its shapes.
    Kernelbench {
        problem: PathBuf,
        /// The task directory to write (it must not exist) [default: the task's name].
        #[arg(short, long)]
        output: Option<PathBuf>,
        /// The Python interpreter with PyTorch.
        #[arg(long, default_value = ksearch_eval::DEFAULT_PYTHON)]
        python: PathBuf,
    },
}

pub(crate) fn run(args: &ImportArgs) -> anyhow::Result<i32> {
    let converted = match &args.suite {
        Suite::FlashinferBench {
            definition,
            workloads,
            ..
        } => {
            let text = read(definition)?;
            let traces = workloads.as_deref().map(read).transpose()?;
            let wfile = workloads.as_ref().map(|w| w.display().to_string());
            flashinfer::import(
                &text,
                &definition.display().to_string(),
                traces.as_deref().zip(wfile.as_deref()),
            )
        }
        Suite::Kernelbench {
            problem, python, ..
        } => {
            let text = read(problem)?;
            let probe = probe(python, problem)?;
            kernelbench::import(&text, &problem.display().to_string(), &probe)
        }
    };
    let task = match converted {
        Ok(t) => t,
        Err(e) => return refuse(&e),
    };
    let output = match &args.suite {
        Suite::FlashinferBench { output, .. } | Suite::Kernelbench { output, .. } => output.clone(),
    }
    .unwrap_or_else(|| PathBuf::from(&task.name));
    write(&task, &output)?;
    let mut err = std::io::stderr().lock();
    for note in &task.notes {
        writeln!(err, "note: {note}")?;
    }
    writeln!(
        std::io::stdout().lock(),
        "wrote {} ({} workloads; `ksearch eval {} {}/seed.py`)",
        output.display(),
        task.spec.workloads.len(),
        output.display(),
        output.display()
    )?;
    Ok(exit_codes::OK)
}

fn refuse(e: &ImportError) -> anyhow::Result<i32> {
    writeln!(std::io::stderr().lock(), "error: {e}\nnothing was written")?;
    Ok(exit_codes::INPUT)
}

fn read(path: &Path) -> anyhow::Result<String> {
    ksearch_tasks::read_text(path, 16 << 20, "a suite's file").map_err(|e| anyhow::anyhow!("{e}"))
}

/// The probe's JSON for `problem`; its own error (a problem that does not run) is JSON too.
fn probe(python: &Path, problem: &Path) -> anyhow::Result<String> {
    let mut child = Command::new(python)
        .args(["-", &problem.display().to_string()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| {
            anyhow::anyhow!(
                "cannot run {} (KernelBench problems are Python with PyTorch): {e}",
                python.display()
            )
        })?;
    child
        .stdin
        .take()
        .expect("piped")
        .write_all(kernelbench::PROBE.as_bytes())?;
    let out = child.wait_with_output()?;
    let stdout = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).trim().to_owned();
    // The probe reports a problem it cannot run as JSON on stderr (its exit message).
    if !out.status.success() {
        if let Some(line) = stderr.lines().last().filter(|l| l.starts_with('{')) {
            return Ok(line.to_owned());
        }
        anyhow::bail!(
            "running {} with {} failed:\n{}",
            problem.display(),
            python.display(),
            stderr
                .lines()
                .rev()
                .take(12)
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
                .collect::<Vec<_>>()
                .join("\n")
        );
    }
    Ok(stdout.lines().last().unwrap_or("").to_owned())
}

/// Write every file into a fresh directory beside `output`, then rename it into place.
fn write(task: &TaskFiles, output: &Path) -> anyhow::Result<()> {
    if output.exists() {
        anyhow::bail!(
            "{} exists already: name another directory with -o",
            output.display()
        );
    }
    let parent = output
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    fs_err::create_dir_all(parent)?;
    let tmp = tempfile::Builder::new()
        .prefix(".ksearch-import-")
        .tempdir_in(parent)?;
    for (name, text) in &task.files {
        fs_err::write(tmp.path().join(name), text)?;
    }
    let tmp = tmp.keep();
    fs_err::rename(&tmp, output).inspect_err(|_| {
        let _ = fs_err::remove_dir_all(&tmp);
    })?;
    Ok(())
}

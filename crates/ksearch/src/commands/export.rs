//! `ksearch export RUN_DIR [-o DIR]`: the best kernel as files to drop into a project, with its
//! provenance.

use std::io::Write;
use std::path::PathBuf;

use anyhow::Context as _;
use clap::Args;
use serde::Serialize;

use crate::exit_codes;

#[derive(Debug, Args)]
pub(crate) struct ExportArgs {
    /// The run directory.
    pub(crate) run_dir: PathBuf,
    /// The directory to write into (created if needed; files there are replaced)
    /// [default: RUN_DIR/export].
    #[arg(short, long, value_name = "DIR")]
    pub(crate) output: Option<PathBuf>,
    /// Export this node's solution instead of the run's best (a node id, `best` or `seed`).
    #[arg(long, default_value = "best")]
    pub(crate) node: String,
    /// Print one JSON object: the files written and the provenance.
    #[arg(long)]
    pub(crate) json: bool,
    /// Print nothing (errors still go to standard error).
    #[arg(long, short)]
    pub(crate) quiet: bool,
}

#[derive(Serialize)]
struct ExportJson<'a> {
    dir: String,
    files: Vec<String>,
    provenance: &'a ksearch_report::export::Provenance,
}

pub(crate) fn run(args: &ExportArgs) -> anyhow::Result<i32> {
    let data = ksearch_report::load(&args.run_dir)?;
    let id = data.resolve(&args.node)?;
    let toml = ksearch_report::export::find_task_toml(&data.task);
    let export = ksearch_report::export::export_with(&data, id, toml.as_deref())?;
    let dir = match &args.output {
        Some(dir) => dir.clone(),
        None => {
            // Inside the run directory, which may come from someone else: a link planted
            // there would send the files wherever it points.
            let dir = args.run_dir.join("export");
            ksearch_report::output::refuse_link(&dir)?;
            dir
        }
    };
    let written = ksearch_report::export::write(&export, &dir).with_context(|| {
        if args.output.is_some() {
            format!("failed to write the export into {}", dir.display())
        } else {
            format!(
                "failed to write the export into the run directory (give it another place with `-o DIR`): {}",
                dir.display()
            )
        }
    })?;
    let files: Vec<String> = written.iter().map(|p| p.display().to_string()).collect();
    let mut out = std::io::stdout().lock();
    if args.json {
        serde_json::to_writer(
            &mut out,
            &ExportJson {
                dir: dir.display().to_string(),
                files,
                provenance: &export.provenance,
            },
        )?;
        writeln!(out)?;
    } else if !args.quiet {
        let k = &export.provenance.kernel;
        let speed = k.speedup.map_or_else(
            || "not timed".to_owned(),
            |s| format!("{s:.2}× over {}", export.provenance.task.baseline),
        );
        writeln!(
            out,
            "exported node {} ({}, {speed}) to {}:",
            k.node,
            k.title,
            dir.display()
        )?;
        for f in &files {
            writeln!(out, "  {f}")?;
        }
        if k.seed && k.best {
            writeln!(
                out,
                "note: no candidate was measured faster than the seed; this is the seed kernel"
            )?;
        }
    }
    Ok(exit_codes::OK)
}

//! `ksearch report RUN_DIR [-o FILE]`: the run as one self-contained HTML page.

use std::io::Write;
use std::path::PathBuf;

use anyhow::Context as _;
use clap::Args;
use serde::Serialize;

use crate::exit_codes;

#[derive(Debug, Args)]
pub(crate) struct ReportArgs {
    /// The run directory.
    pub(crate) run_dir: PathBuf,
    /// Where to write the page (`-` for standard output) [default: RUN_DIR/report.html].
    #[arg(short, long, value_name = "FILE")]
    pub(crate) output: Option<PathBuf>,
    /// Print one JSON object describing the page written.
    #[arg(long)]
    pub(crate) json: bool,
    /// Print nothing (errors still go to standard error).
    #[arg(long, short)]
    pub(crate) quiet: bool,
}

#[derive(Serialize)]
struct ReportJson<'a> {
    path: &'a str,
    bytes: usize,
    task: &'a str,
    rounds: u64,
    attempts: usize,
    nodes: usize,
    best: &'a ksearch_run::Best,
}

pub(crate) fn run(args: &ReportArgs) -> anyhow::Result<i32> {
    let data = ksearch_report::load(&args.run_dir)?;
    let html = ksearch_report::html::render(&data);
    let to_stdout = args.output.as_deref().is_some_and(|p| p.as_os_str() == "-");
    let mut out = std::io::stdout().lock();
    if to_stdout {
        out.write_all(html.as_bytes())?;
        return Ok(exit_codes::OK);
    }
    let path = match &args.output {
        // The user's choice, written as given (`-o /dev/stdout` included).
        Some(path) => {
            fs_err::write(path, &html)?;
            path.clone()
        }
        None => {
            // Inside the run directory, which may come from someone else: a link planted
            // there would have the page overwrite whatever it points to.
            let path = args.run_dir.join("report.html");
            ksearch_report::output::refuse_link(&path)?;
            ksearch_report::output::write_file(&path, &html).with_context(|| {
                format!(
                    "failed to write the report into the run directory (give it another place with `-o FILE`, or `-o -` for standard output): {}",
                    path.display()
                )
            })?;
            path
        }
    };
    let shown = path.display().to_string();
    if args.json {
        serde_json::to_writer(
            &mut out,
            &ReportJson {
                path: &shown,
                bytes: html.len(),
                task: &data.task.id,
                rounds: data.summary.rounds,
                attempts: data.attempts.len(),
                nodes: data.tree.len(),
                best: &data.summary.best,
            },
        )?;
        writeln!(out)?;
    } else if !args.quiet {
        writeln!(
            out,
            "wrote {shown} ({} KiB): {} · {} rounds · {} nodes; open it in a browser (it loads nothing from the network)",
            html.len().div_ceil(1024),
            data.task.id,
            data.summary.rounds,
            data.tree.len()
        )?;
    }
    Ok(exit_codes::OK)
}

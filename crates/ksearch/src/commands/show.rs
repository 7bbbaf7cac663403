//! `ksearch show RUN_DIR NODE`: one node of a run's tree, its attempts and its source.

use std::io::Write;
use std::path::PathBuf;

use clap::Args;

use crate::commands::report::fail;
use crate::exit_codes;

#[derive(Debug, Args)]
pub(crate) struct ShowArgs {
    /// The run directory.
    pub(crate) run_dir: PathBuf,
    /// A node id (as `ksearch tree` lists them), `best` or `seed`.
    #[arg(default_value = "best")]
    pub(crate) node: String,
    /// Print one JSON object: the node, its status and path, every attempt on it with its full
    /// evaluation, and its solution's source.
    #[arg(long)]
    pub(crate) json: bool,
}

pub(crate) fn run(args: &ShowArgs) -> anyhow::Result<i32> {
    let data = match ksearch_report::load(&args.run_dir) {
        Ok(d) => d,
        Err(e) => return fail(e),
    };
    let id = match data.resolve(&args.node) {
        Ok(id) => id,
        Err(e) => return fail(e),
    };
    let mut out = std::io::stdout().lock();
    if args.json {
        let shown = match ksearch_report::show::json(&data, id) {
            Ok(j) => j,
            Err(e) => return fail(e),
        };
        serde_json::to_writer(&mut out, &shown)?;
        writeln!(out)?;
    } else {
        let text = match ksearch_report::show::render(&data, id) {
            Ok(t) => t,
            Err(e) => return fail(e),
        };
        out.write_all(text.as_bytes())?;
    }
    Ok(exit_codes::OK)
}

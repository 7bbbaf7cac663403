//! `ksearch show RUN_DIR NODE`: one node of a run's tree, its attempts and its source.

use std::io::Write;
use std::path::PathBuf;

use clap::Args;

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
    let data = ksearch_report::load(&args.run_dir)?;
    let id = data.resolve(&args.node)?;
    let mut out = std::io::stdout().lock();
    if args.json {
        let shown = ksearch_report::show::json(&data, id)?;
        serde_json::to_writer(&mut out, &shown)?;
        writeln!(out)?;
    } else {
        let text = ksearch_report::show::render(&data, id)?;
        out.write_all(ksearch_core::printable::printable(&text).as_bytes())?;
    }
    Ok(exit_codes::OK)
}

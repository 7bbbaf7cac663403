//! `ksearch tree RUN_DIR`.

use std::io::Write;
use std::path::Path;

use ksearch_core::tree::Node;
use serde::Serialize;

use crate::exit_codes;
use crate::tree_view::render;

#[derive(Serialize)]
struct TreeJson<'a> {
    summary: &'a ksearch_run::RunSummary,
    nodes: Vec<&'a Node>,
}

pub(crate) fn run(dir: &Path, json: bool) -> anyhow::Result<i32> {
    let (summary, tree, attempts) = ksearch_run::read_summary(dir)?;
    let mut out = std::io::stdout().lock();
    if json {
        serde_json::to_writer(
            &mut out,
            &TreeJson {
                summary: &summary,
                nodes: tree.nodes().collect(),
            },
        )?;
        writeln!(out)?;
    } else {
        write!(
            out,
            "{}",
            ksearch_core::printable::printable(&render(&summary, &tree, &attempts))
        )?;
    }
    Ok(exit_codes::OK)
}

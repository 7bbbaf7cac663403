//! The page around the sections: head, stylesheet, script and the run's data as JSON.

use std::fmt::Write as _;

use serde_json::json;

use super::palette::attempt_status;
use super::text::esc;
use super::{best, calibration, chart, header, tree, workloads};
use crate::data::{RunData, node_status, run_id};

pub(super) const CSP: &str = "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; \
                   img-src data:; base-uri 'none'; form-action 'none'";

/// The page's stylesheet and script, inlined: the page loads nothing.
pub(super) const STYLE: &str = include_str!("report.css");
pub(super) const SCRIPT: &str = include_str!("report.js");

/// The whole report page.
pub fn render(data: &RunData) -> String {
    let mut o = String::with_capacity(64 * 1024);
    let title = format!("ksearch · {} · run {}", data.task.id, run_id(&data.config));
    let _ = write!(
        o,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta http-equiv=\"Content-Security-Policy\" content=\"{CSP}\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <meta name=\"generator\" content=\"ksearch {}\">\n\
         <title>{}</title>\n<style>\n{STYLE}</style>\n</head>\n<body>\n<main>\n",
        env!("CARGO_PKG_VERSION"),
        esc(&title)
    );
    header::section(&mut o, data);
    o.push_str(
        "<nav><a href=\"#progress\">Progress</a><a href=\"#tree-section\">Tree</a>\
         <a href=\"#best\">Best kernel</a><a href=\"#workloads\">Workloads</a>\
         <a href=\"#calibration\">Calibration</a></nav>\n",
    );
    chart::section(&mut o, data);
    tree::section(&mut o, data);
    best::section(&mut o, data);
    workloads::section(&mut o, data);
    calibration::section(&mut o, &data.summary.calibration);
    let _ = write!(
        o,
        "<script type=\"application/json\" id=\"run-data\">{}</script>\n<script>\n{SCRIPT}</script>\n\
         </main>\n</body>\n</html>\n",
        json_blob(data)
    );
    o
}

/// The data the page shows, as JSON, safe inside a `<script>` element.
pub(super) fn json_blob(data: &RunData) -> String {
    let nodes: Vec<serde_json::Value> = data
        .tree
        .nodes()
        .map(|n| {
            let s = n.solution.as_ref();
            json!({
                "id": n.id,
                "parent": n.parent,
                "status": node_status(n),
                "title": n.action.title,
                "rating": n.rating,
                "confidence": n.confidence,
                "difficulty": n.action.difficulty,
                "predicted": n.action.expected_speedup,
                "measured": s.and_then(|s| s.speedup_vs_parent),
                "speedup": s.and_then(|s| s.speedup),
                "round": s.map(|s| s.round),
                "failed_cycles": n.failed_cycles,
            })
        })
        .collect();
    let attempts: Vec<serde_json::Value> = data
        .attempts
        .iter()
        .map(|a| {
            json!({
                "round": a.round,
                "node": a.node,
                "cycle": a.cycle,
                "kind": a.kind.as_str(),
                "status": attempt_status(a),
                "speedup": a.speedup(),
                "improved": a.improved,
                "message": a.evaluation.as_ref().map(|e| e.result.message.as_str()),
            })
        })
        .collect();
    let blob = json!({
        "run_id": run_id(&data.config),
        "summary": data.summary,
        "nodes": nodes,
        "attempts": attempts,
    });
    serde_json::to_string(&blob)
        .unwrap_or_default()
        .replace('<', "\\u003c")
        .replace('>', "\\u003e")
        .replace('&', "\\u0026")
}

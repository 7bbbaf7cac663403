//! The run as one self-contained HTML page (`ksearch report`): rendered here, server-side, as
//! HTML and inline SVG, with a small inline script for selecting tree nodes. It loads nothing:
//! no external script, style, font or image, and a Content-Security-Policy that forbids any.
//!
//! Stable hooks for tests and tools: `header#summary`, `svg#chart circle.attempt` (one per
//! attempt, `data-round`, `data-node`, `data-status`), `svg#chart path#best-line`,
//! `svg#tree g.node` (one per tree node, `data-node`, `data-status`), `#details
//! .node-detail[data-node]`, `#best-source`, `#diff-parent`, `#diff-seed`,
//! `table#workload-table tr.workload`, `table#calibration-table tr.calibration-point`,
//! `svg#calibration-plot circle.calibration-point` and the data as JSON in
//! `script#run-data`.

use std::collections::BTreeSet;
use std::fmt::Write as _;

use ksearch_core::calibration::Calibration;
use ksearch_core::protocol::{Role, Status, WorkloadReport};
use ksearch_core::record::AttemptRecord;
use ksearch_core::stats::TimingStats;
use ksearch_core::tree::{Impact, Node, NodeId, ROOT};
use serde_json::json;

use crate::data::{RunData, node_status, run_id};
use crate::diff::{self, Op};
use crate::format::{duration, ms, x};

/// Escape text for HTML content and attribute values.
pub(crate) fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            c => o.push(c),
        }
    }
    o
}

fn truncate(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        s.to_owned()
    } else {
        let mut t: String = s.chars().take(max.saturating_sub(1)).collect();
        t.push('…');
        t
    }
}

const CSP: &str = "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; \
                   img-src data:; base-uri 'none'; form-action 'none'";

/// Colour of each attempt status (and `pending` for an unfinished evaluation).
const STATUS_COLORS: [(&str, &str); 8] = [
    ("passed", "#2e7d32"),
    ("compile_error", "#8e24aa"),
    ("incorrect", "#d32f2f"),
    ("runtime_error", "#ef6c00"),
    ("timeout", "#6d4c41"),
    ("crashed", "#212121"),
    ("rejected", "#78909c"),
    ("pending", "#bdbdbd"),
];

/// Colour of each node status, with its legend.
const NODE_COLORS: [(&str, &str, &str); 7] = [
    ("seed", "#1565c0", "seed (root)"),
    ("better", "#2e7d32", "closed · better than parent"),
    ("same", "#afb42b", "closed · same as parent"),
    ("worse", "#ef6c00", "closed · worse than parent"),
    ("closed", "#00838f", "closed · not timed against parent"),
    ("failed", "#d32f2f", "open · failed / too hard"),
    ("open", "#eceff1", "open"),
];

const STYLE: &str = r##"
:root { --fg:#1f2328; --muted:#59636e; --line:#d1d9e0; --bg:#fff; --panel:#f6f8fa; --accent:#0969da; }
* { box-sizing: border-box; }
body { margin:0; font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,Helvetica,Arial,sans-serif; color:var(--fg); background:var(--bg); }
main { max-width: 1280px; margin: 0 auto; padding: 16px 24px 48px; }
h1 { font-size: 22px; margin: 0 0 4px; }
h1 .desc { font-size: 14px; font-weight: normal; color: var(--muted); display:block; }
h2 { font-size: 18px; margin: 32px 0 8px; padding-bottom: 4px; border-bottom: 1px solid var(--line); }
h3 { font-size: 16px; margin: 0 0 6px; }
h4 { font-size: 13px; margin: 12px 0 4px; text-transform: uppercase; letter-spacing: .04em; color: var(--muted); }
code, pre, .mono { font-family: ui-monospace,SFMono-Regular,Menlo,Consolas,"Liberation Mono",monospace; font-size: 12.5px; }
nav { position: sticky; top: 0; background: var(--bg); border-bottom: 1px solid var(--line); padding: 6px 0; z-index: 2; }
nav a { margin-right: 14px; color: var(--accent); text-decoration: none; }
#summary { display: grid; grid-template-columns: 1fr auto; gap: 16px; align-items: start; }
.facts { display: grid; grid-template-columns: max-content 1fr; gap: 2px 14px; margin: 8px 0 0; }
.facts dt { color: var(--muted); }
.facts dd { margin: 0; }
.headline { text-align: right; background: var(--panel); border: 1px solid var(--line); border-radius: 8px; padding: 12px 18px; }
.headline .big { font-size: 34px; font-weight: 600; }
.headline .sub { color: var(--muted); }
.legend { display: flex; flex-wrap: wrap; gap: 4px 14px; font-size: 12px; color: var(--muted); margin: 4px 0; }
.legend span::before { content: ""; display: inline-block; width: 10px; height: 10px; border-radius: 50%; margin-right: 5px; vertical-align: -1px; background: var(--c); border: 1px solid #0003; }
svg text { font-family: system-ui,-apple-system,"Segoe UI",Roboto,Helvetica,Arial,sans-serif; }
svg .axis line, svg .axis path { stroke: #8c959f; }
svg .grid line { stroke: #eaeef2; }
svg .tick text { font-size: 11px; fill: var(--muted); }
svg .label { font-size: 12px; fill: var(--muted); }
#chart circle.attempt, svg#calibration-plot circle { stroke: #fff; stroke-width: 1; cursor: pointer; }
#chart circle.attempt.improved { stroke: #000; stroke-width: 1.5; }
#chart .best-line { fill: none; stroke: #0969da; stroke-width: 2; }
#chart .baseline-line { stroke: #8c959f; stroke-dasharray: 4 3; }
.tree-layout { display: grid; grid-template-columns: minmax(0, 1.4fr) minmax(320px, 1fr); gap: 16px; align-items: start; }
.tree-wrap { overflow: auto; border: 1px solid var(--line); border-radius: 8px; max-height: 80vh; }
#tree g.node { cursor: pointer; outline: none; }
#tree g.node circle { stroke: #57606a; stroke-width: 1; }
#tree g.node.best-path circle { stroke: #0969da; stroke-width: 2.5; }
#tree g.node text { font-size: 12.5px; fill: var(--fg); }
#tree g.node text.num { font-size: 12px; fill: var(--muted); font-variant-numeric: tabular-nums; }
#tree g.node:hover rect.hit, #tree g.node:focus rect.hit { fill: #0969da14; }
#tree g.node.selected rect.hit { fill: #0969da26; }
#tree rect.hit { fill: transparent; }
#tree path.edge { fill: none; stroke: #afb8c1; stroke-width: 1.2; }
#tree path.edge.best-path { stroke: #0969da; stroke-width: 2; }
#tree .colhead { font-size: 11px; fill: var(--muted); }
#details { position: sticky; top: 44px; border: 1px solid var(--line); border-radius: 8px; padding: 12px 14px; max-height: calc(100vh - 60px); overflow: auto; background: var(--panel); }
#details .empty { color: var(--muted); }
.badge { display: inline-block; font-size: 11px; font-weight: 600; padding: 1px 7px; border-radius: 10px; color: #fff; background: var(--c); vertical-align: 2px; }
.badge.light { color: var(--fg); border: 1px solid var(--line); }
.prose { white-space: pre-wrap; margin: 4px 0; }
.kv { display: grid; grid-template-columns: max-content 1fr; gap: 1px 12px; margin: 4px 0; }
.kv dt { color: var(--muted); }
.kv dd { margin: 0; }
table { border-collapse: collapse; width: 100%; }
th, td { text-align: left; padding: 3px 8px; border-bottom: 1px solid var(--line); vertical-align: top; }
th { font-weight: 600; color: var(--muted); font-size: 12px; }
td.n, th.n { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
td .spread { color: var(--muted); font-size: 11.5px; }
td.msg { font-size: 12px; word-break: break-word; }
.status { font-weight: 600; color: var(--c); }
details.code { border: 1px solid var(--line); border-radius: 8px; margin: 8px 0; }
details.code > summary { cursor: pointer; padding: 6px 10px; background: var(--panel); border-radius: 8px; }
pre.listing { margin: 0; padding: 8px 0; overflow: auto; max-height: 560px; }
.diff-wrap { overflow: auto; max-height: 560px; }
pre.listing .ln { display: inline-block; width: 4.5em; padding-right: 1em; text-align: right; color: #8c959f; user-select: none; }
table.diff { font-family: ui-monospace,SFMono-Regular,Menlo,Consolas,monospace; font-size: 12.5px; }
table.diff td { border: 0; padding: 0 8px; white-space: pre; }
table.diff td:nth-child(-n+2) { color: #8c959f; text-align: right; user-select: none; width: 3.5em; }
table.diff tr.a td { background: #dafbe1; }
table.diff tr.d td { background: #ffebe9; }
table.diff tr.h td { background: #ddf4ff; color: var(--muted); }
.note { color: var(--muted); font-size: 12.5px; }
.plots { display: grid; grid-template-columns: minmax(0, 1fr) 360px; gap: 16px; align-items: start; }
"##;

const SCRIPT: &str = r##"
(function () {
  "use strict";
  var details = document.getElementById("details");
  var empty = document.getElementById("details-empty");
  function select(id) {
    var panel = details.querySelector('.node-detail[data-node="' + id + '"]');
    if (!panel) { return false; }
    details.querySelectorAll(".node-detail").forEach(function (d) { d.hidden = d !== panel; });
    if (empty) { empty.hidden = true; }
    document.querySelectorAll("#tree g.node").forEach(function (g) {
      var on = g.getAttribute("data-node") === String(id);
      g.classList.toggle("selected", on);
      g.setAttribute("aria-pressed", on ? "true" : "false");
    });
    details.setAttribute("data-selected", String(id));
    details.scrollTop = 0;
    return true;
  }
  document.querySelectorAll("#tree g.node").forEach(function (g) {
    g.addEventListener("click", function () { select(g.getAttribute("data-node")); });
    g.addEventListener("keydown", function (e) {
      if (e.key === "Enter" || e.key === " ") { e.preventDefault(); select(g.getAttribute("data-node")); }
    });
  });
  document.querySelectorAll("#chart circle.attempt, #calibration-plot circle.calibration-point").forEach(function (c) {
    c.addEventListener("click", function () {
      if (select(c.getAttribute("data-node"))) {
        document.getElementById("tree-section").scrollIntoView();
      }
    });
  });
  var m = /^#node-(\d+)$/.exec(window.location.hash);
  if (m) { select(m[1]); }
  window.ksearchSelectNode = select;
})();
"##;

fn status_color(s: &str) -> &'static str {
    STATUS_COLORS
        .iter()
        .find(|(n, _)| *n == s)
        .map_or("#999", |(_, c)| c)
}

fn node_color(s: &str) -> &'static str {
    NODE_COLORS
        .iter()
        .find(|(n, _, _)| *n == s)
        .map_or("#999", |(_, c, _)| c)
}

fn attempt_status(a: &AttemptRecord) -> &'static str {
    a.status().map_or("pending", Status::as_str)
}

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
         <title>{}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n<main>\n",
        env!("CARGO_PKG_VERSION"),
        esc(&title)
    );
    header(&mut o, data);
    o.push_str(
        "<nav><a href=\"#progress\">Progress</a><a href=\"#tree-section\">Tree</a>\
         <a href=\"#best\">Best kernel</a><a href=\"#workloads\">Workloads</a>\
         <a href=\"#calibration\">Calibration</a></nav>\n",
    );
    chart_section(&mut o, data);
    tree_section(&mut o, data);
    best_section(&mut o, data);
    workloads_section(&mut o, data);
    calibration_section(&mut o, &data.summary.calibration);
    let _ = write!(
        o,
        "<script type=\"application/json\" id=\"run-data\">{}</script>\n<script>{SCRIPT}</script>\n\
         </main>\n</body>\n</html>\n",
        json_blob(data)
    );
    o
}

/// The data the page shows, as JSON, safe inside a `<script>` element.
fn json_blob(data: &RunData) -> String {
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

fn header(o: &mut String, data: &RunData) {
    let s = &data.summary;
    let spec = &data.task.spec;
    let _ = write!(
        o,
        "<header id=\"summary\">\n<div>\n<h1>{} <span class=\"desc\">{}</span></h1>\n<dl class=\"facts\">\n",
        esc(&data.task.id),
        esc(&spec.description)
    );
    let mut fact = |k: &str, v: String| {
        let _ = writeln!(o, "<dt>{}</dt><dd>{v}</dd>", esc(k));
    };
    let compiler = data
        .attempt(0)
        .and_then(|a| a.evaluation.as_ref())
        .and_then(|e| e.result.compile.as_ref())
        .map(|c| c.compiler.clone());
    fact(
        "backend / target",
        format!(
            "<code>{}</code>{}{}",
            esc(spec.backend.name()),
            data.config
                .eval
                .target
                .as_ref()
                .map_or_else(String::new, |t| format!(
                    " · target <code>{}</code>",
                    esc(t)
                )),
            compiler.map_or_else(String::new, |c| format!(" · {}", esc(&c)))
        ),
    );
    fact("hardware", esc(&data.config.hardware));
    let models = match &data.config.llm {
        Some(l) => format!(
            "reasoning <code>{}</code> · codegen <code>{}</code>{}",
            esc(&l.reasoning),
            esc(&l.codegen),
            l.base_url
                .as_ref()
                .map_or_else(String::new, |u| format!(" · via <code>{}</code>", esc(u)))
        ),
        None => format!(
            "<code>{}</code> for both roles (reasoning and codegen)",
            esc(&data.config.proposer)
        ),
    };
    fact("models", models);
    let budget = data
        .state
        .round_budget
        .map_or_else(String::new, |b| format!(" of {b}"));
    let stop = s.stop_reason.map_or_else(
        || "running or killed".to_owned(),
        |r| {
            serde_json::to_value(r)
                .ok()
                .and_then(|v| v.as_str().map(str::to_owned))
                .unwrap_or_default()
        },
    );
    fact(
        "rounds",
        format!(
            "{}{budget} · {} nodes · {} cycles · stopped: {}",
            s.rounds,
            s.nodes,
            s.cycles,
            esc(&stop)
        ),
    );
    fact(
        "time",
        format!(
            "{} wall · {} device-seconds spent evaluating{} · {} session(s)",
            duration(s.wall_s),
            duration(s.eval_s),
            if s.eval_s >= 60.0 {
                format!(" ({:.0} s)", s.eval_s)
            } else {
                String::new()
            },
            data.state.sessions
        ),
    );
    let calls: u64 = s.llm.values().map(|t| t.calls).sum();
    let unpriced: u64 = s.llm.values().map(|t| t.unpriced_calls).sum();
    let empty: u64 = s.llm.values().map(|t| t.empty_answers).sum();
    let truncated: u64 = s.llm.values().map(|t| t.truncated_answers).sum();
    // The manual model's tokens are estimates, and say so.
    let estimated = if s.llm.values().any(|t| t.tokens_estimated) {
        " (estimated)"
    } else {
        ""
    };
    fact(
        "LLM",
        format!(
            "{} tokens{estimated} · ${:.4} · {calls} calls{}{}",
            s.tokens,
            // `+ 0.0` turns a -0.0 sum into 0.0.
            s.cost_usd.max(0.0) + 0.0,
            if unpriced > 0 {
                format!(" ({unpriced} without a price)")
            } else {
                String::new()
            },
            ksearch_engine::asked_again(empty, truncated)
        ),
    );
    let best_round = data
        .tree
        .get(s.best.node)
        .and_then(|n| n.solution.as_ref())
        .map_or_else(String::new, |sol| format!(" · round {}", sol.round));
    fact(
        "best kernel",
        format!(
            "node {} · {}{best_round} · baseline: {}",
            s.best.node,
            esc(&s.best.title),
            esc(&data.summary.baseline)
        ),
    );
    let _ = write!(
        o,
        "</dl>\n</div>\n<div class=\"headline\"><div class=\"big\" id=\"best-speedup\">{}</div>\
         <div class=\"sub\">over the baseline ({})</div><div class=\"big\" id=\"best-vs-seed\">{}</div>\
         <div class=\"sub\">over the seed</div></div>\n</header>\n",
        x(s.best.speedup),
        esc(&truncate(&s.baseline, 40)),
        x(s.best.speedup_vs_seed)
    );
}

/// Nice tick values for a log axis between `lo` and `hi`.
fn log_ticks(lo: f64, hi: f64) -> Vec<f64> {
    let mantissas: &[&[f64]] = &[
        &[1.0],
        &[1.0, 2.0, 5.0],
        &[1.0, 1.5, 2.0, 3.0, 5.0, 7.0],
        &[
            1.0, 1.1, 1.2, 1.3, 1.5, 1.7, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 8.0,
        ],
    ];
    let mut best = Vec::new();
    for ms in mantissas {
        let mut ticks = Vec::new();
        let (e0, e1) = (lo.log10().floor() as i32 - 1, hi.log10().ceil() as i32 + 1);
        for e in e0..=e1 {
            for m in *ms {
                let v = m * 10f64.powi(e);
                if v >= lo * 0.999 && v <= hi * 1.001 {
                    ticks.push(v);
                }
            }
        }
        if ticks.len() > 9 {
            break;
        }
        best = ticks;
        if best.len() >= 4 {
            break;
        }
    }
    best
}

fn tick_label(v: f64) -> String {
    if v >= 10.0 || (v - v.round()).abs() < 1e-9 {
        format!("{v:.0}×")
    } else if v >= 1.0 {
        format!(
            "{}×",
            format!("{v:.2}")
                .trim_end_matches('0')
                .trim_end_matches('.')
        )
    } else {
        format!(
            "{}×",
            format!("{v:.3}")
                .trim_end_matches('0')
                .trim_end_matches('.')
        )
    }
}

/// A log-scale mapping of `[lo, hi]` onto `[bottom, top]` pixels.
struct LogScale {
    lo: f64,
    hi: f64,
    a: f64,
    b: f64,
}

impl LogScale {
    fn new(lo: f64, hi: f64, a: f64, b: f64) -> Self {
        let (lo, hi) = if hi / lo < 1.05 {
            (lo / 1.05, hi * 1.05)
        } else {
            (lo, hi)
        };
        Self { lo, hi, a, b }
    }

    fn at(&self, v: f64) -> f64 {
        let t = (v.ln() - self.lo.ln()) / (self.hi.ln() - self.lo.ln());
        self.a + (self.b - self.a) * t
    }
}

fn legend(o: &mut String, items: &[(&str, &str)]) {
    o.push_str("<div class=\"legend\">");
    for (label, color) in items {
        let _ = write!(o, "<span style=\"--c:{color}\">{}</span>", esc(label));
    }
    o.push_str("</div>\n");
}

fn chart_section(o: &mut String, data: &RunData) {
    let (w, h) = (960.0, 340.0);
    let (ml, mr, mt, mb) = (60.0, 20.0, 14.0, 62.0);
    let plot_bottom = h - mb;
    let fail_y = plot_bottom + 22.0;
    let last_round = data
        .attempts
        .iter()
        .map(|a| a.round)
        .max()
        .unwrap_or(0)
        .max(1);
    let xs = |r: u64| ml + (w - ml - mr) * (r as f64) / (last_round as f64);
    let best = data.best_so_far();
    let values: Vec<f64> = data
        .attempts
        .iter()
        .filter_map(AttemptRecord::speedup)
        .chain(best.iter().map(|b| b.1))
        .chain([1.0])
        .filter(|v| v.is_finite() && *v > 0.0)
        .collect();
    let lo = values.iter().copied().fold(f64::INFINITY, f64::min) / 1.08;
    let hi = values.iter().copied().fold(0.0, f64::max) * 1.08;
    let ys = LogScale::new(lo, hi, plot_bottom, mt);

    let _ = write!(
        o,
        "<section id=\"progress\">\n<h2>Speedup over rounds</h2>\n\
         <p class=\"note\">Every attempt, by round, at its speedup over the baseline ({}, log scale); \
         attempts that did not pass sit on the bottom axis. The line is the best accepted solution \
         so far (judged better than its parent). Click a point to see its node.</p>\n",
        esc(&data.summary.baseline)
    );
    let mut items: Vec<(&str, &str)> = STATUS_COLORS.to_vec();
    if !data.attempts.iter().any(|a| a.evaluation.is_none()) {
        items.pop();
    }
    legend(o, &items);
    let _ = writeln!(
        o,
        "<svg id=\"chart\" viewBox=\"0 0 {w} {h}\" width=\"100%\" role=\"img\" \
         aria-label=\"speedup over rounds\" data-attempts=\"{}\">",
        data.attempts.len()
    );
    // Grid and y ticks.
    o.push_str("<g class=\"grid\">");
    let ticks = log_ticks(ys.lo, ys.hi);
    for t in &ticks {
        let y = ys.at(*t);
        let _ = write!(
            o,
            "<line x1=\"{ml}\" x2=\"{}\" y1=\"{y:.1}\" y2=\"{y:.1}\"/>",
            w - mr
        );
    }
    o.push_str("</g>\n<g class=\"axis tick\">");
    for t in &ticks {
        let _ = write!(
            o,
            "<text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
            ml - 6.0,
            ys.at(*t) + 4.0,
            tick_label(*t)
        );
    }
    // X ticks: about ten, on whole rounds.
    let step = ((last_round as f64 / 10.0).ceil() as u64).max(1);
    let mut r = 0;
    while r <= last_round {
        let _ = write!(
            o,
            "<line x1=\"{x:.1}\" x2=\"{x:.1}\" y1=\"{plot_bottom}\" y2=\"{}\"/><text x=\"{x:.1}\" y=\"{}\" text-anchor=\"middle\">{r}</text>",
            plot_bottom + 4.0,
            h - 18.0,
            x = xs(r)
        );
        r += step;
    }
    let _ = writeln!(
        o,
        "<line x1=\"{ml}\" x2=\"{}\" y1=\"{plot_bottom}\" y2=\"{plot_bottom}\"/>\
         <line x1=\"{ml}\" x2=\"{ml}\" y1=\"{mt}\" y2=\"{plot_bottom}\"/>\
         <text class=\"label\" x=\"{}\" y=\"{}\" text-anchor=\"middle\">round</text>\
         <text class=\"label\" x=\"{}\" y=\"{}\" text-anchor=\"end\">failed</text></g>",
        w - mr,
        (ml + w - mr) / 2.0,
        h - 2.0,
        ml - 6.0,
        fail_y + 4.0
    );
    let y1 = ys.at(1.0);
    let _ = writeln!(
        o,
        "<line class=\"baseline-line\" x1=\"{ml}\" x2=\"{}\" y1=\"{y1:.1}\" y2=\"{y1:.1}\"><title>baseline: 1×</title></line>",
        w - mr
    );
    // Best so far, as a step line.
    if let Some(first) = best.first() {
        let mut d = format!("M{:.1},{:.1}", xs(first.0), ys.at(first.1));
        let mut prev = first.1;
        for (round, v) in &best[1..] {
            if (v - prev).abs() > 0.0 {
                let _ = write!(d, " H{:.1} V{:.1}", xs(*round), ys.at(*v));
                prev = *v;
            }
        }
        let _ = write!(d, " H{:.1}", xs(last_round));
        let _ = writeln!(
            o,
            "<path id=\"best-line\" class=\"best-line\" d=\"{d}\"><title>best so far: {}</title></path>",
            x(Some(prev))
        );
    }
    // One point per attempt.
    o.push_str("<g class=\"attempts\">\n");
    let mut fails_at: std::collections::BTreeMap<u64, usize> = Default::default();
    for a in &data.attempts {
        let status = attempt_status(a);
        let (cy, r) = match a.speedup() {
            Some(s) if s.is_finite() && s > 0.0 => (ys.at(s), 5.0),
            _ => {
                let k = fails_at.entry(a.round).or_default();
                *k += 1;
                (fail_y, 4.5)
            }
        };
        let node = data
            .tree
            .get(a.node)
            .map_or_else(|| "removed node".to_owned(), |n| n.action.title.clone());
        let message = a
            .evaluation
            .as_ref()
            .map(|e| truncate(&e.result.message, 200))
            .unwrap_or_default();
        let _ = writeln!(
            o,
            "<circle class=\"attempt status-{status}{}\" data-round=\"{}\" data-node=\"{}\" \
             data-status=\"{status}\" cx=\"{:.1}\" cy=\"{cy:.1}\" r=\"{r}\" fill=\"{}\">\
             <title>round {} · {} · node {} ({}) · {status} · {}{}</title></circle>",
            if a.improved { " improved" } else { "" },
            a.round,
            a.node,
            xs(a.round),
            status_color(status),
            a.round,
            a.kind.as_str(),
            a.node,
            esc(&truncate(&node, 80)),
            x(a.speedup()),
            if message.is_empty() {
                String::new()
            } else {
                format!(" · {}", esc(&message))
            }
        );
    }
    o.push_str("</g>\n</svg>\n</section>\n");
}

/// Nodes in depth-first order (children by id), with their depth.
fn preorder(data: &RunData) -> Vec<(NodeId, usize)> {
    let mut out = Vec::new();
    let mut stack = vec![(ROOT, 0usize)];
    while let Some((id, depth)) = stack.pop() {
        out.push((id, depth));
        let children: Vec<NodeId> = data.tree.children(id).map(|c| c.id).collect();
        for c in children.into_iter().rev() {
            stack.push((c, depth + 1));
        }
    }
    out
}

fn tree_section(o: &mut String, data: &RunData) {
    let rows = preorder(data);
    let best_path: BTreeSet<NodeId> = data.tree.path(data.summary.best.node).into_iter().collect();
    let (row_h, indent, top) = (26.0, 22.0, 30.0);
    let max_depth = rows.iter().map(|r| r.1).max().unwrap_or(0) as f64;
    let label_w = 330.0;
    let col0 = 18.0 + max_depth * indent + label_w;
    let cols = [col0 + 60.0, col0 + 130.0, col0 + 210.0];
    let w = cols[2] + 20.0;
    let h = top + rows.len() as f64 * row_h + 8.0;
    let pos = |i: usize, depth: usize| (18.0 + depth as f64 * indent, top + i as f64 * row_h);
    let index: std::collections::BTreeMap<NodeId, (f64, f64)> = rows
        .iter()
        .enumerate()
        .map(|(i, (id, d))| (*id, pos(i, *d)))
        .collect();

    o.push_str(
        "<section id=\"tree-section\">\n<h2>Decision tree</h2>\n<p class=\"note\">One row per \
         hypothesis. Colour: status; size and shade: rating (0–10); blue ring: the path to the \
         best kernel. Columns: predicted and measured speedup over the parent, and the speedup \
         over the baseline. Click a node for its details.</p>\n",
    );
    let items: Vec<(&str, &str)> = NODE_COLORS.iter().map(|(_, c, l)| (*l, *c)).collect();
    legend(o, &items);
    let _ = write!(
        o,
        "<div class=\"tree-layout\">\n<div class=\"tree-wrap\">\n<svg id=\"tree\" width=\"{w}\" \
         height=\"{h}\" viewBox=\"0 0 {w} {h}\" data-nodes=\"{}\">\n",
        data.tree.len()
    );
    let _ = writeln!(
        o,
        "<g class=\"colhead\"><text x=\"{}\" y=\"16\" text-anchor=\"end\">predicted</text>\
         <text x=\"{}\" y=\"16\" text-anchor=\"end\">measured</text>\
         <text x=\"{}\" y=\"16\" text-anchor=\"end\">vs baseline</text></g>",
        cols[0], cols[1], cols[2]
    );
    // Edges first, under the nodes.
    o.push_str("<g class=\"edges\">");
    for (id, _) in &rows {
        let Some(n) = data.tree.get(*id) else {
            continue;
        };
        let (Some(p), Some(&(cx, cy))) = (n.parent, index.get(id)) else {
            continue;
        };
        let Some(&(px, py)) = index.get(&p) else {
            continue;
        };
        let on_path = best_path.contains(id) && best_path.contains(&p);
        let _ = write!(
            o,
            "<path class=\"edge{}\" data-from=\"{p}\" data-to=\"{id}\" d=\"M{px:.1},{:.1} V{cy:.1} H{:.1}\"/>",
            if on_path { " best-path" } else { "" },
            py + 6.0,
            cx - 6.0
        );
    }
    o.push_str("</g>\n");
    for (id, _) in &rows {
        let Some(n) = data.tree.get(*id) else {
            continue;
        };
        let (cx, cy) = index[id];
        let status = node_status(n);
        let rating = n.rating.clamp(0.0, 10.0);
        let r = 4.0 + rating * 0.5;
        let opacity = if n.id == ROOT {
            1.0
        } else {
            0.35 + 0.065 * rating
        };
        let sol = n.solution.as_ref();
        let star = if n.id == data.summary.best.node {
            " ★"
        } else {
            ""
        };
        let pred = if n.id == ROOT {
            "-".to_owned()
        } else {
            x(Some(n.action.expected_speedup))
        };
        let label = format!("{} {}", n.id, truncate(&n.action.title, 46));
        let _ = writeln!(
            o,
            "<g class=\"node status-{status}{}\" id=\"node-{id}\" data-node=\"{id}\" data-status=\"{status}\" \
             data-rating=\"{rating}\" tabindex=\"0\" role=\"button\" aria-pressed=\"false\">\
             <title>{} · {status} · rating {rating:.1} · confidence {:.2}</title>\
             <rect class=\"hit\" x=\"{:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{row_h}\" rx=\"4\"/>\
             <circle cx=\"{cx:.1}\" cy=\"{cy:.1}\" r=\"{r:.1}\" fill=\"{}\" fill-opacity=\"{opacity:.2}\"/>\
             <text x=\"{:.1}\" y=\"{:.1}\">{}{star}</text>\
             <text class=\"num\" x=\"{}\" y=\"{:.1}\" text-anchor=\"end\">{pred}</text>\
             <text class=\"num\" x=\"{}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>\
             <text class=\"num\" x=\"{}\" y=\"{:.1}\" text-anchor=\"end\">{}</text></g>",
            if best_path.contains(id) {
                " best-path"
            } else {
                ""
            },
            esc(&n.action.title),
            n.confidence,
            cx - 10.0,
            cy - row_h / 2.0,
            w - cx + 6.0,
            node_color(status),
            cx + 14.0,
            cy + 4.5,
            esc(&label),
            cols[0],
            cy + 4.5,
            cols[1],
            cy + 4.5,
            x(sol.and_then(|s| s.speedup_vs_parent)),
            cols[2],
            cy + 4.5,
            x(sol.and_then(|s| s.speedup)),
        );
    }
    o.push_str("</svg>\n</div>\n<aside id=\"details\" aria-live=\"polite\">\n");
    o.push_str(
        "<p id=\"details-empty\" class=\"empty\">Click a node in the tree (or a point in the \
         chart) to see its hypothesis, numbers, notes and attempts.</p>\n",
    );
    for (id, _) in &rows {
        if let Some(n) = data.tree.get(*id) {
            node_detail(o, data, n);
        }
    }
    o.push_str("</aside>\n</div>\n");
    let removed = data.removed_nodes();
    if !removed.is_empty() {
        let list: Vec<String> = removed
            .iter()
            .map(|id| {
                let rounds: Vec<String> =
                    data.attempts_of(*id).map(|a| a.round.to_string()).collect();
                format!("node {id} (rounds {})", rounds.join(", "))
            })
            .collect();
        let _ = writeln!(
            o,
            "<p class=\"note\" id=\"removed-nodes\">Attempts were also made on nodes later removed \
             from the tree (deleted or split after failing): {}.</p>",
            esc(&list.join("; "))
        );
    }
    o.push_str("</section>\n");
}

fn impact_row(o: &mut String, name: &str, i: &Impact) {
    let _ = write!(
        o,
        "<tr><td>{name}</td><td class=\"n\">{:.1}</td><td>{}</td><td>{}</td></tr>",
        i.rating,
        i.risk.as_str(),
        esc(&i.notes)
    );
}

fn node_detail(o: &mut String, data: &RunData, n: &Node) {
    let status = node_status(n);
    let best = if n.id == data.summary.best.node {
        " <span class=\"badge light\">★ best</span>"
    } else {
        ""
    };
    let _ = write!(
        o,
        "<div class=\"node-detail\" id=\"detail-{id}\" data-node=\"{id}\" hidden>\n\
         <h3>{id} · {} <span class=\"badge\" style=\"--c:{}\">{status}</span>{best}</h3>\n",
        esc(&n.action.title),
        if status == "open" {
            "#8c959f"
        } else {
            node_color(status)
        },
        id = n.id,
    );
    if let Some(p) = n.parent.and_then(|p| data.tree.get(p)) {
        let _ = writeln!(
            o,
            "<p class=\"note\">from node {} · {} · depth {}</p>",
            p.id,
            esc(&p.action.title),
            data.tree.depth(n.id)
        );
    }
    let _ = writeln!(
        o,
        "<h4>Hypothesis</h4><p class=\"prose decision\">{}</p>",
        esc(&n.decision)
    );
    if !n.action.description.is_empty() {
        let _ = writeln!(
            o,
            "<p class=\"prose description\">{}</p>",
            esc(&n.action.description)
        );
    }
    if !n.action.rationale.is_empty() {
        let _ = writeln!(
            o,
            "<h4>Rationale</h4><p class=\"prose rationale\">{}</p>",
            esc(&n.action.rationale)
        );
    }
    o.push_str("<h4>Numbers</h4><dl class=\"kv\">");
    let mut kv = |k: &str, v: String| {
        let _ = write!(o, "<dt>{k}</dt><dd>{v}</dd>");
    };
    kv("difficulty", format!("{}/5", n.action.difficulty));
    kv("score", format!("{:.2}", n.action.score));
    kv("rating", format!("{:.1}/10", n.rating));
    kv("confidence", format!("{:.2}", n.confidence));
    if n.parent.is_some() {
        kv("predicted vs parent", x(Some(n.action.expected_speedup)));
    }
    match &n.solution {
        Some(s) => {
            if n.parent.is_some() {
                let interval = s
                    .vs_parent_interval
                    .map(|(lo, hi)| format!(" <span class=\"note\">(95% {lo:.2}×–{hi:.2}×)</span>"))
                    .unwrap_or_default();
                kv(
                    "measured vs parent",
                    format!("{}{interval} · gate: {status}", x(s.speedup_vs_parent)),
                );
            }
            kv("vs baseline", x(s.speedup));
            kv(
                "solution",
                format!(
                    "round {} · <code>{}</code> · <code>{}</code>",
                    s.round,
                    esc(&s.source_file),
                    esc(&s.source_hash[..s.source_hash.len().min(12)])
                ),
            );
            if !s.latency_ms.is_empty() {
                let lat: Vec<String> = s
                    .latency_ms
                    .iter()
                    .map(|(w, v)| format!("{} {} ms", esc(w), ms(*v)))
                    .collect();
                kv("median latency", lat.join(" · "));
            }
        }
        None => kv(
            "solution",
            format!("none yet · {} failed cycle(s)", n.failed_cycles),
        ),
    }
    if data.judged_too_hard(n.id) {
        kv(
            "too hard",
            "judged too hard after a failed cycle; revised".into(),
        );
    }
    o.push_str("</dl>\n");
    if n.id != ROOT {
        o.push_str(
            "<h4>Impacts</h4><table class=\"impacts\"><tr><th>axis</th><th class=\"n\">rating</th>\
             <th>risk</th><th>notes</th></tr>",
        );
        impact_row(o, "memory bandwidth", &n.impacts.memory_bandwidth);
        impact_row(o, "register pressure", &n.impacts.register_pressure);
        impact_row(o, "compute fit", &n.impacts.compute_fit);
        o.push_str("</table>\n");
    }
    if !n.notes.is_empty() {
        o.push_str("<h4>Notes</h4><ul class=\"notes\">");
        for note in &n.notes {
            let _ = write!(o, "<li>{}</li>", esc(note));
        }
        o.push_str("</ul>\n");
    }
    let attempts: Vec<&AttemptRecord> = data.attempts_of(n.id).collect();
    let _ = write!(o, "<h4>Attempts ({})</h4>", attempts.len());
    if !attempts.is_empty() {
        o.push_str(
            "<table class=\"attempts\"><tr><th class=\"n\">round</th><th>kind</th><th>status</th>\
             <th class=\"n\">speedup</th><th>message</th></tr>",
        );
        for a in attempts {
            let status = attempt_status(a);
            let msg = a
                .evaluation
                .as_ref()
                .map_or("evaluation not finished", |e| e.result.message.as_str());
            let note = if a.note.is_empty() {
                String::new()
            } else {
                format!("<div class=\"note\">{}</div>", esc(&truncate(&a.note, 300)))
            };
            let _ = write!(
                o,
                "<tr class=\"attempt-row\" data-round=\"{}\"><td class=\"n\">{}</td><td>{}</td>\
                 <td><span class=\"status\" style=\"--c:{}\">{status}</span>{}</td>\
                 <td class=\"n\">{}</td><td class=\"msg\">{}{note}</td></tr>",
                a.round,
                a.round,
                a.kind.as_str(),
                status_color(status),
                if a.improved { " ↑" } else { "" },
                x(a.speedup()),
                esc(&truncate(msg, 400)),
            );
        }
        o.push_str("</table>\n");
    }
    o.push_str("</div>\n");
}

fn listing(o: &mut String, id: &str, text: &str) {
    let _ = write!(o, "<pre class=\"listing\" id=\"{id}\"><code>");
    for (i, line) in text.lines().enumerate() {
        let _ = writeln!(o, "<span class=\"ln\">{}</span>{}", i + 1, esc(line));
    }
    o.push_str("</code></pre>");
}

fn diff_view(o: &mut String, id: &str, old: &str, new: &str) {
    let lines = diff::diff_lines(old, new);
    let (added, removed) = diff::counts(&lines);
    let hunks = diff::hunks(&lines, 3);
    let _ = write!(
        o,
        "<table class=\"diff\" id=\"{id}\" data-added=\"{added}\" data-removed=\"{removed}\">"
    );
    if hunks.is_empty() {
        o.push_str("<tr><td>(identical)</td></tr>");
    }
    for h in hunks {
        let _ = write!(
            o,
            "<tr class=\"h\"><td></td><td></td><td>@@ -{},{} +{},{} @@</td></tr>",
            h.old_start, h.old_len, h.new_start, h.new_len
        );
        for l in h.lines {
            let (row, mark) = match l.op {
                Op::Same => ("<tr>", ' '),
                Op::Removed => ("<tr class=\"d\">", '-'),
                Op::Added => ("<tr class=\"a\">", '+'),
            };
            let _ = write!(
                o,
                "{row}<td>{}</td><td>{}</td><td>{mark}{}</td></tr>",
                l.old.map_or_else(String::new, |v| v.to_string()),
                l.new.map_or_else(String::new, |v| v.to_string()),
                esc(l.text)
            );
        }
    }
    o.push_str("</table>");
}

fn best_section(o: &mut String, data: &RunData) {
    let best = data
        .tree
        .get(data.summary.best.node)
        .unwrap_or_else(|| data.tree.root());
    let _ = write!(
        o,
        "<section id=\"best\">\n<h2>Best kernel: node {} · {}</h2>\n",
        best.id,
        esc(&best.action.title)
    );
    let Some(sol) = &best.solution else {
        o.push_str("<p class=\"note\">No solution.</p></section>\n");
        return;
    };
    let Some(text) = data.sources.get(&sol.source_hash) else {
        let _ = writeln!(
            o,
            "<p class=\"note\">The source ({}) is missing from the run's artifacts.</p></section>",
            esc(&sol.source_hash)
        );
        return;
    };
    if best.id == ROOT {
        o.push_str("<p class=\"note\">No candidate was measured better than the seed: the best kernel is the seed.</p>\n");
    }
    let _ = write!(
        o,
        "<details class=\"code\" open><summary><code>{}</code> · round {} · {} lines</summary>",
        esc(&sol.source_file),
        sol.round,
        text.lines().count()
    );
    listing(o, "best-source", text);
    o.push_str("</details>\n");
    let parent = best.parent.and_then(|p| data.tree.get(p));
    let seed = data.tree.root();
    let diff_against = |o: &mut String, id: &str, what: String, other: &Node, open: bool| {
        let Some(old) = data.solution_source(other.id) else {
            return;
        };
        let lines = diff::diff_lines(old, text);
        let (a, r) = diff::counts(&lines);
        let _ = write!(
            o,
            "<details class=\"code\"{}><summary>diff against {what} · +{a} −{r} lines</summary>",
            if open { " open" } else { "" }
        );
        o.push_str("<div class=\"diff-wrap\">");
        diff_view(o, id, old, text);
        o.push_str("</div></details>\n");
    };
    if let Some(p) = parent {
        diff_against(
            o,
            "diff-parent",
            format!(
                "its parent, node {} ({})",
                p.id,
                esc(&truncate(&p.action.title, 60))
            ),
            p,
            true,
        );
    }
    if best.id != ROOT && parent.is_some_and(|p| p.id != ROOT) {
        diff_against(o, "diff-seed", "the seed".into(), seed, false);
    }
    o.push_str("</section>\n");
}

fn cell(t: Option<&TimingStats>) -> String {
    t.map_or_else(
        || "<td class=\"n\">-</td>".into(),
        |t| {
            format!(
                "<td class=\"n\">{} <span class=\"spread\">{}–{}</span></td>",
                ms(t.median_ms),
                ms(t.p10_ms),
                ms(t.p90_ms)
            )
        },
    )
}

fn workloads_section(o: &mut String, data: &RunData) {
    let best = data.summary.best.node;
    o.push_str("<section id=\"workloads\">\n<h2>Per workload</h2>\n");
    let Some(a) = data.solution_attempt(best) else {
        o.push_str(
            "<p class=\"note\">The best kernel's evaluation is not recorded.</p></section>\n",
        );
        return;
    };
    let Some(e) = &a.evaluation else {
        o.push_str(
            "<p class=\"note\">The best kernel's evaluation is not recorded.</p></section>\n",
        );
        return;
    };
    let _ = writeln!(
        o,
        "<p class=\"note\">Latency per call in ms: median, then p10–p90, from the evaluation of the \
         best kernel (round {}), which timed it interleaved with its parent and the baseline in \
         the same worker.</p>",
        a.round
    );
    o.push_str(
        "<table id=\"workload-table\"><tr><th>workload</th><th>axes</th><th>status</th>\
         <th class=\"n\">candidate (best)</th><th class=\"n\">parent</th><th class=\"n\">baseline</th>\
         <th class=\"n\">vs baseline</th><th class=\"n\">vs parent</th><th class=\"n\">samples</th></tr>\n",
    );
    let per = |s: &Option<ksearch_core::score::Speedup>, w: &WorkloadReport| {
        s.as_ref()
            .and_then(|s| s.workloads.iter().find(|x| x.workload == w.name))
            .map(|s| s.speedup)
    };
    for w in &e.result.workloads {
        let axes = data
            .task
            .spec
            .workload(&w.name)
            .map(|wl| {
                wl.axes
                    .iter()
                    .map(|(k, v)| format!("{k}={v}"))
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .unwrap_or_default();
        let status = w.status.as_str();
        let _ = writeln!(
            o,
            "<tr class=\"workload\" data-workload=\"{}\"><td>{}</td><td class=\"mono\">{}</td>\
             <td><span class=\"status\" style=\"--c:{}\">{status}</span></td>{}{}{}\
             <td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td></tr>",
            esc(&w.name),
            esc(&w.name),
            esc(&axes),
            status_color(status),
            cell(w.timing(Role::Candidate)),
            cell(w.timing(Role::Parent)),
            cell(w.timing(Role::Baseline)),
            x(per(&e.speedup, w)),
            x(per(&e.speedup_vs_parent, w)),
            w.timing(Role::Candidate).map_or(0, |t| t.runs)
        );
    }
    o.push_str("</table>\n</section>\n");
}

fn calibration_section(o: &mut String, c: &Calibration) {
    o.push_str("<section id=\"calibration\">\n<h2>Calibration: predicted vs measured</h2>\n");
    let f = |v: Option<f64>, d: usize| v.map_or_else(|| "-".into(), |v| format!("{v:.d$}"));
    let _ = writeln!(
        o,
        "<p class=\"note\">Every solved node's predicted speedup over its parent against the one \
         measured by the acceptance gate. Spearman rank correlation: <b id=\"spearman\">{}</b> · \
         bias (geometric mean of measured/predicted; below 1 means optimistic): <b>{}</b> · mean \
         |log error|: <b>{}</b>.</p>",
        f(c.spearman, 2),
        f(c.bias, 2),
        f(c.mean_abs_log_error, 2)
    );
    o.push_str("<div class=\"plots\">\n<div>");
    o.push_str(
        "<table id=\"calibration-table\"><tr><th class=\"n\">node</th><th>action</th>\
         <th class=\"n\">predicted</th><th class=\"n\">measured</th><th class=\"n\">measured / predicted</th></tr>\n",
    );
    for p in &c.points {
        let _ = writeln!(
            o,
            "<tr class=\"calibration-point\" data-node=\"{}\"><td class=\"n\">{}</td><td>{}</td>\
             <td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{:.2}</td></tr>",
            p.node,
            p.node,
            esc(&truncate(&p.title, 70)),
            x(Some(p.predicted)),
            x(Some(p.measured)),
            p.measured / p.predicted
        );
    }
    if c.points.is_empty() {
        o.push_str("<tr><td colspan=\"5\" class=\"note\">No node has been measured yet.</td></tr>");
    }
    o.push_str("</table></div>\n");
    scatter(o, c);
    o.push_str("</div>\n</section>\n");
}

fn scatter(o: &mut String, c: &Calibration) {
    let (w, h, m) = (360.0, 340.0, 44.0);
    let vals: Vec<f64> = c
        .points
        .iter()
        .flat_map(|p| [p.predicted, p.measured])
        .chain([1.0])
        .filter(|v| v.is_finite() && *v > 0.0)
        .collect();
    let lo = vals.iter().copied().fold(f64::INFINITY, f64::min) / 1.15;
    let hi = vals.iter().copied().fold(0.0, f64::max) * 1.15;
    let xs = LogScale::new(lo, hi, m, w - 12.0);
    let ys = LogScale::new(lo, hi, h - m, 12.0);
    let _ = write!(
        o,
        "<svg id=\"calibration-plot\" viewBox=\"0 0 {w} {h}\" width=\"{w}\" role=\"img\" \
         aria-label=\"predicted vs measured speedup\">\n<g class=\"grid\">"
    );
    let ticks = log_ticks(xs.lo, xs.hi);
    for t in &ticks {
        let _ = write!(
            o,
            "<line x1=\"{:.1}\" x2=\"{:.1}\" y1=\"12\" y2=\"{}\"/><line x1=\"{m}\" x2=\"{}\" y1=\"{:.1}\" y2=\"{:.1}\"/>",
            xs.at(*t),
            xs.at(*t),
            h - m,
            w - 12.0,
            ys.at(*t),
            ys.at(*t)
        );
    }
    o.push_str("</g><g class=\"axis tick\">");
    for t in &ticks {
        let _ = write!(
            o,
            "<text x=\"{:.1}\" y=\"{}\" text-anchor=\"middle\">{}</text><text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
            xs.at(*t),
            h - m + 14.0,
            tick_label(*t),
            m - 4.0,
            ys.at(*t) + 4.0,
            tick_label(*t)
        );
    }
    let _ = writeln!(
        o,
        "<line x1=\"{m}\" x2=\"{}\" y1=\"{}\" y2=\"{}\"/><line x1=\"{m}\" x2=\"{m}\" y1=\"12\" y2=\"{}\"/>\
         <text class=\"label\" x=\"{}\" y=\"{}\" text-anchor=\"middle\">predicted</text>\
         <text class=\"label\" transform=\"translate(12 {}) rotate(-90)\" text-anchor=\"middle\">measured</text></g>",
        w - 12.0,
        h - m,
        h - m,
        h - m,
        (m + w) / 2.0,
        h - 8.0,
        (h - m) / 2.0
    );
    let _ = writeln!(
        o,
        "<line class=\"diagonal\" x1=\"{:.1}\" y1=\"{:.1}\" x2=\"{:.1}\" y2=\"{:.1}\" stroke=\"#8c959f\" stroke-dasharray=\"4 3\"><title>measured = predicted</title></line>",
        xs.at(xs.lo),
        ys.at(xs.lo),
        xs.at(xs.hi),
        ys.at(xs.hi)
    );
    for p in &c.points {
        if !(p.predicted > 0.0 && p.measured > 0.0) {
            continue;
        }
        let _ = writeln!(
            o,
            "<circle class=\"calibration-point\" data-node=\"{}\" cx=\"{:.1}\" cy=\"{:.1}\" r=\"5\" fill=\"#0969da\" fill-opacity=\"0.75\">\
             <title>node {} · {} · predicted {} · measured {}</title></circle>",
            p.node,
            xs.at(p.predicted),
            ys.at(p.measured),
            p.node,
            esc(&truncate(&p.title, 60)),
            x(Some(p.predicted)),
            x(Some(p.measured))
        );
    }
    o.push_str("</svg>\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaping_covers_markup_and_quotes() {
        assert_eq!(
            esc("<a href=\"x\">'&'</a>"),
            "&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;"
        );
    }

    #[test]
    fn log_ticks_are_few_and_in_range() {
        for (lo, hi) in [(0.9, 1.3), (0.5, 40.0), (1.0, 2.0), (0.05, 300.0)] {
            let t = log_ticks(lo, hi);
            assert!((2..=9).contains(&t.len()), "{lo}..{hi}: {t:?}");
            assert!(t.iter().all(|v| *v >= lo * 0.999 && *v <= hi * 1.001));
        }
        assert_eq!(tick_label(1.5), "1.5×");
        assert_eq!(tick_label(20.0), "20×");
        assert_eq!(tick_label(0.25), "0.25×");
    }
}

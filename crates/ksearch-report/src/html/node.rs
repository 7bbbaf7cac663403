//! One node's details, shown beside the tree when it is selected.

use std::fmt::Write as _;

use ksearch_core::record::AttemptRecord;
use ksearch_core::tree::{Impact, Node, ROOT};
use ksearch_core::units::time_ms;

use super::palette::{attempt_status, node_color, status_color};
use super::text::{esc, truncate};
use crate::data::{RunData, node_status};
use crate::format::x;

pub(super) fn impact_row(o: &mut String, name: &str, i: &Impact) {
    let _ = write!(
        o,
        "<tr><td>{name}</td><td class=\"n\">{:.1}</td><td>{}</td><td>{}</td></tr>",
        i.rating,
        i.risk.as_str(),
        esc(&i.notes)
    );
}

pub(super) fn node_detail(o: &mut String, data: &RunData, n: &Node) {
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
                    .map(|(w, v)| format!("{} {}", esc(w), time_ms(*v)))
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
            let mut note = if a.note.is_empty() {
                String::new()
            } else {
                format!("<div class=\"note\">{}</div>", esc(&truncate(&a.note, 300)))
            };
            for caveat in a.evaluation.iter().flat_map(|e| &e.caveats) {
                let _ = write!(note, "<div class=\"caveat\">{}</div>", esc(caveat));
            }
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

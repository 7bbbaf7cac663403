//! The per-workload table of the best kernel's evaluation.

use std::fmt::Write as _;

use ksearch_core::protocol::{Role, WorkloadReport};
use ksearch_core::stats::TimingStats;
use ksearch_core::units::TimeUnit;

use super::palette::status_color;
use super::text::esc;
use crate::data::RunData;
use crate::format::x;

pub(super) fn cell(t: Option<&TimingStats>) -> String {
    t.map_or_else(
        || "<td class=\"n\">-</td>".into(),
        |t| {
            // The spread in the median's unit, without repeating it.
            let u = TimeUnit::for_ms(t.median_ms);
            format!(
                "<td class=\"n\">{} <span class=\"spread\">{}–{}</span></td>",
                u.format(t.median_ms),
                u.number(t.p10_ms),
                u.number(t.p90_ms)
            )
        },
    )
}

pub(super) fn section(o: &mut String, data: &RunData) {
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
        "<p class=\"note\">Latency per call: median, then p10–p90 in the median's unit, from the evaluation of the \
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

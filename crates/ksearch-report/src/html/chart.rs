//! The progress chart: every attempt by round at its speedup, and the best so far.

use std::fmt::Write as _;

use ksearch_core::record::AttemptRecord;

use super::palette::{STATUS_COLORS, attempt_status, legend, status_color};
use super::scale::{LogScale, log_ticks, tick_label};
use super::text::{esc, truncate};
use crate::data::RunData;
use crate::format::x;

pub(super) fn section(o: &mut String, data: &RunData) {
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

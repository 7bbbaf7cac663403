//! Calibration: every solved node's predicted speedup against the measured one.

use std::fmt::Write as _;

use ksearch_core::calibration::Calibration;

use super::scale::{LogScale, log_ticks, tick_label};
use super::text::{esc, truncate};
use crate::format::x;

pub(super) fn section(o: &mut String, c: &Calibration) {
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

pub(super) fn scatter(o: &mut String, c: &Calibration) {
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

//! The decision tree: one row per node, laid out as an indented outline with its edges.

use std::collections::BTreeSet;
use std::fmt::Write as _;

use ksearch_core::tree::{NodeId, ROOT};

use super::node::node_detail;
use super::palette::{NODE_COLORS, legend, node_color};
use super::text::{esc, truncate};
use crate::data::{RunData, node_status};
use crate::format::x;

/// Nodes in depth-first order (children by id), with their depth.
pub(super) fn preorder(data: &RunData) -> Vec<(NodeId, usize)> {
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

pub(super) fn section(o: &mut String, data: &RunData) {
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

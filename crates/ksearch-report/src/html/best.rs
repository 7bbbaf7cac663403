//! The best kernel: its source, and its diffs against its parent and the seed.

use std::fmt::Write as _;

use ksearch_core::tree::{Node, ROOT};

use super::diff_view::diff_view;
use super::text::{esc, truncate};
use crate::data::RunData;
use crate::diff;

pub(super) fn listing(o: &mut String, id: &str, text: &str) {
    let _ = write!(o, "<pre class=\"listing\" id=\"{id}\"><code>");
    for (i, line) in text.lines().enumerate() {
        let _ = writeln!(o, "<span class=\"ln\">{}</span>{}", i + 1, esc(line));
    }
    o.push_str("</code></pre>");
}

pub(super) fn section(o: &mut String, data: &RunData) {
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

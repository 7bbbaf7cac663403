//! A diff of two sources as a table of hunks.

use std::fmt::Write as _;

use super::text::esc;
use crate::diff::{self, Op};

pub(super) fn diff_view(o: &mut String, id: &str, old: &str, new: &str) {
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

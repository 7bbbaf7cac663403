//! The colours of statuses and their legends.

use std::fmt::Write as _;

use ksearch_core::protocol::Status;
use ksearch_core::record::AttemptRecord;

use super::text::esc;

/// Colour of each attempt status (and `pending` for an unfinished evaluation).
pub(super) const STATUS_COLORS: [(&str, &str); 8] = [
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
pub(super) const NODE_COLORS: [(&str, &str, &str); 7] = [
    ("seed", "#1565c0", "seed (root)"),
    ("better", "#2e7d32", "closed · better than parent"),
    ("same", "#afb42b", "closed · same as parent"),
    ("worse", "#ef6c00", "closed · worse than parent"),
    ("closed", "#00838f", "closed · not timed against parent"),
    ("failed", "#d32f2f", "open · failed / too hard"),
    ("open", "#eceff1", "open"),
];

pub(super) fn status_color(s: &str) -> &'static str {
    STATUS_COLORS
        .iter()
        .find(|(n, _)| *n == s)
        .map_or("#999", |(_, c)| c)
}

pub(super) fn node_color(s: &str) -> &'static str {
    NODE_COLORS
        .iter()
        .find(|(n, _, _)| *n == s)
        .map_or("#999", |(_, c, _)| c)
}

pub(super) fn attempt_status(a: &AttemptRecord) -> &'static str {
    a.status().map_or("pending", Status::as_str)
}

pub(super) fn legend(o: &mut String, items: &[(&str, &str)]) {
    o.push_str("<div class=\"legend\">");
    for (label, color) in items {
        let _ = write!(o, "<span style=\"--c:{color}\">{}</span>", esc(label));
    }
    o.push_str("</div>\n");
}

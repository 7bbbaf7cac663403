//! The `threadgroup-size` rule: threadgroup (block) sizes as declared or launched, against a
//! limit.

use std::sync::LazyLock;

use ksearch_core::static_check::Violation;
use regex::Regex;

use super::analysis::Analysis;
use super::rules::{limit, violation};
use super::scan::{
    MAX_SCAN, argument, enclosing_paren, split_top_level, tuple_elements, value_start,
};
use crate::assertion::Rule;
use crate::hardware::Hardware;

pub(crate) static MLX_TG: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?-u:\b)threadgroup[ \t\r\n]*=[ \t\r\n]*[^=]").expect("regex"));
static LAUNCH_BOUNDS: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"__launch_bounds__[ \t\r\n]*\(").expect("regex"));
static MAX_TOTAL: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"max_total_threads_per_threadgroup[ \t\r\n]*\(").expect("regex"));
static DIM3: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?-u:\b)dim3[ \t\r\n]+([A-Za-z_][A-Za-z0-9_]*)[ \t\r\n]*(?:=[ \t\r\n]*dim3[ \t\r\n]*)?[({]([^;]*)[)}][ \t\r\n]*;").expect("regex")
});

pub(crate) fn threadgroup_size(
    rule: &Rule,
    a: &Analysis<'_>,
    hardware: Option<&Hardware>,
    out: &mut Vec<Violation>,
) {
    let Some((limit, from)) = limit(rule, hardware) else {
        return;
    };
    // (offset, text as written, thread count)
    let mut found: Vec<(usize, &str, Option<i64>)> = Vec::new();
    let product = |elems: &[String]| -> Option<i64> {
        elems
            .iter()
            .map(|e| a.env.eval(e))
            .try_fold(1i64, |acc, v| acc.checked_mul(v?))
    };
    if let Some(py) = &a.python {
        for m in MLX_TG.find_iter(py) {
            // Keyword arguments only: `tg = (…)` is read when a call passes `threadgroup=tg`.
            if enclosing_paren(py, m.start()).is_none() {
                continue;
            }
            let value = argument(py, value_start(&m));
            let threads = tuple_elements(value, &a.env).and_then(|e| product(&e));
            found.push((m.start(), value, threads));
        }
    }
    let code = &a.kernel;
    for re in [&*LAUNCH_BOUNDS, &*MAX_TOTAL] {
        for m in re.find_iter(code) {
            let value = argument(code, m.end());
            found.push((m.start(), value, a.env.eval(value)));
        }
    }
    // Every `dim3 name(…)` once, not once per launch.
    let mut dims_of: std::collections::HashMap<&str, &str> = std::collections::HashMap::new();
    if code.contains("<<<") {
        for c in DIM3.captures_iter(code) {
            if let (Some(name), Some(dims)) = (c.get(1), c.get(2)) {
                dims_of.entry(name.as_str()).or_insert(dims.as_str());
            }
        }
    }
    for (at, _) in code.match_indices("<<<") {
        // A launch's `<<<…>>>` is short: look no further than `MAX_SCAN`.
        let window = &code.as_bytes()[at..code.len().min(at.saturating_add(MAX_SCAN))];
        let Some(close) = window.windows(3).position(|w| w == b">>>").map(|p| at + p) else {
            continue;
        };
        let args = split_top_level(&code[at + 3..close], b',');
        let Some(block) = args.get(1).map(|s| s.trim()) else {
            continue;
        };
        let dims: Option<Vec<String>> = if let Some(inner) = block
            .strip_prefix("dim3")
            .map(str::trim)
            .and_then(|s| s.strip_prefix('('))
            .and_then(|s| s.strip_suffix(')'))
        {
            Some(
                split_top_level(inner, b',')
                    .iter()
                    .map(|s| s.trim().to_owned())
                    .collect(),
            )
        } else {
            dims_of.get(block).map(|dims| {
                split_top_level(dims, b',')
                    .iter()
                    .map(|s| s.trim().to_owned())
                    .collect()
            })
        };
        let threads = match dims {
            Some(d) => product(&d),
            None => a.env.eval(block),
        };
        found.push((at, block, threads));
    }
    for (at, expr, threads) in found {
        let Some(threads) = threads else { continue };
        if threads > 0 && threads as u64 > limit {
            out.push(violation(
                rule,
                a.line(at),
                &[
                    ("threads", threads.to_string()),
                    ("limit", limit.to_string()),
                    ("limit_from", from.clone()),
                    ("expr", expr.to_owned()),
                ],
            ));
        }
    }
}

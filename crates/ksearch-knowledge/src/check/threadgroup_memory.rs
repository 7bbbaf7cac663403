//! The `threadgroup-memory` rule: the constant-sized threadgroup (shared) arrays of each kernel,
//! summed, against a limit.

use std::ops::Range;

use ksearch_core::static_check::Violation;
use regex::Regex;

use super::analysis::Analysis;
use super::expr::Env;
use super::rules::{limit, violation};
use super::scan::split_top_level;
use super::text::matching;
use crate::assertion::Rule;
use crate::hardware::Hardware;

/// One on-chip array declaration: where, its name, its size.
struct Decl {
    at: usize,
    name: String,
    bytes: u64,
}

/// Words that may precede the type in a declaration and are not part of it.
const DECL_NOISE: &[&str] = &["static", "volatile", "const", "constexpr", "__restrict__"];

fn declarations(a: &Analysis<'_>, range: Range<usize>, re: &Regex) -> Vec<Decl> {
    let code = &a.kernel;
    let b = code.as_bytes();
    let mut out = Vec::new();
    for c in re.captures_iter(&code[range.clone()]) {
        let q = c.get(1).expect("group");
        let at = range.start + q.start();
        let after = range.start + q.end();
        // `extern __shared__ T x[];` is dynamic: its size is set at launch.
        let stmt_start = code[..at].rfind([';', '{', '}']).map_or(0, |p| p + 1);
        if code[stmt_start..at]
            .split_whitespace()
            .any(|w| w == "extern")
        {
            continue;
        }
        // The declaration runs to `;`; an unbalanced `)` (a parameter) or a `{` first means
        // it is not one.
        let Some(end) = declaration_end(b, after, range.end) else {
            continue;
        };
        let mut decl = code[after..end].to_owned();
        // Drop alignment specifiers and attributes.
        for pat in ["__align__", "alignas"] {
            while let Some(p) = decl.find(pat) {
                let open = p + pat.len();
                let open = open + decl[open..].len() - decl[open..].trim_start().len();
                match matching(&decl, open) {
                    Some(close) if decl.as_bytes()[open] == b'(' => {
                        decl.replace_range(p..=close, "");
                    }
                    _ => break,
                }
            }
        }
        let declarators = split_top_level(&decl, b',');
        let Some(first) = declarators.first() else {
            continue;
        };
        let head_end = first.find(['[', '=']).unwrap_or(first.len());
        let head = first[..head_end].trim();
        if head.contains(['*', '&', '(', '<']) {
            continue;
        }
        let words: Vec<&str> = head
            .split_whitespace()
            .filter(|w| !DECL_NOISE.contains(w))
            .collect();
        if words.len() < 2 {
            continue;
        }
        let ty = words[..words.len() - 1].join(" ");
        let Some(elem) = a.env.type_size(&ty, a.dialect) else {
            continue;
        };
        let mut offset_in_decl = 0;
        for (i, d) in declarators.iter().enumerate() {
            let d_trim = d.trim();
            let (name, dims_text) = if i == 0 {
                (words[words.len() - 1].to_owned(), &first[head_end..])
            } else {
                let name_end = d_trim.find(['[', '=']).unwrap_or(d_trim.len());
                let name = d_trim[..name_end].trim();
                if name.contains(['*', '&']) || name.is_empty() {
                    offset_in_decl += d.len() + 1;
                    continue;
                }
                (name.to_owned(), &d_trim[name_end..])
            };
            if let Some(count) = array_count(dims_text, &a.env) {
                out.push(Decl {
                    at: if i == 0 { at } else { after + offset_in_decl },
                    name,
                    bytes: elem.saturating_mul(count),
                });
            }
            offset_in_decl += d.len() + 1;
        }
    }
    out
}

/// The `;` ending a declaration that starts at `start`, if it is one: brackets inside sizes
/// and initialisers are skipped; an unbalanced `)` or a `{` outside brackets ends the search.
fn declaration_end(b: &[u8], start: usize, end: usize) -> Option<usize> {
    let mut depth = 0i32;
    for (i, &c) in b.iter().enumerate().take(end).skip(start) {
        match c {
            b'(' | b'[' => depth += 1,
            b')' | b']' => {
                depth -= 1;
                if depth < 0 {
                    return None;
                }
            }
            b'{' if depth == 0 => return None,
            b';' if depth == 0 => return Some(i),
            _ => {}
        }
    }
    None
}

/// The element count of `[a][b]… (= init)`; 1 for a scalar; `None` when a size is unknown.
fn array_count(dims: &str, env: &Env) -> Option<u64> {
    let mut count: u64 = 1;
    let mut rest = dims.trim_start();
    while rest.starts_with('[') {
        let close = matching(rest, 0)?;
        let v = env.eval(&rest[1..close])?;
        count = count.checked_mul(u64::try_from(v).ok()?)?;
        rest = rest[close + 1..].trim_start();
    }
    (rest.is_empty() || rest.starts_with('=')).then_some(count)
}

pub(crate) fn threadgroup_memory(
    rule: &Rule,
    a: &Analysis<'_>,
    hardware: Option<&Hardware>,
    out: &mut Vec<Violation>,
) {
    let (Some((limit, from)), Some(re)) = (limit(rule, hardware), &rule.compiled.qualifiers) else {
        return;
    };
    let globals: Vec<Decl> = a
        .outside_units()
        .into_iter()
        .flat_map(|r| declarations(a, r, re))
        .collect();
    for unit in &a.units {
        let decls = declarations(a, unit.clone(), re);
        if decls.is_empty() {
            continue;
        }
        let all: Vec<&Decl> = globals.iter().chain(&decls).collect();
        let total: u64 = all.iter().map(|d| d.bytes).sum();
        if total > limit {
            let detail = all
                .iter()
                .map(|d| format!("`{}` {} bytes", d.name, d.bytes))
                .collect::<Vec<_>>()
                .join(", ");
            out.push(violation(
                rule,
                a.line(decls[0].at),
                &[
                    ("bytes", total.to_string()),
                    ("limit", limit.to_string()),
                    ("limit_from", from.clone()),
                    ("detail", detail),
                ],
            ));
        }
    }
}

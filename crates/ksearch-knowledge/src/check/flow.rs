//! Control structure and thread dependence, for the barrier heuristics: which `if`/`for`/
//! `while`/`switch` encloses a position, and whether its condition depends on the thread index
//! (directly, or through variables assigned from it).

use std::collections::{HashMap, HashSet};
use std::ops::Range;
use std::sync::LazyLock;

use regex::Regex;

use super::text::matching;

/// A branch or loop: its condition's text range and its body's range.
#[derive(Debug, Clone)]
pub(crate) struct Control {
    pub(crate) keyword: &'static str,
    /// Where the keyword is.
    pub(crate) at: usize,
    pub(crate) cond: Range<usize>,
    pub(crate) body: Range<usize>,
}

static KEYWORD: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?-u:\b)(if|else|for|while|switch|do)(?-u:\b)").expect("regex"));
static ASSIGN: LazyLock<Regex> = LazyLock::new(|| {
    // A value ends at `;` and never spans a brace (`kb += BK) { … i = lid;` is two statements).
    Regex::new(
        r"([A-Za-z_][A-Za-z0-9_]*)[ \t\r\n]*(?:\[[^\]]*\][ \t\r\n]*)?(?:[-+*/%&|^]|<<|>>)?=([^={}][^;{}]*);",
    )
    .expect("regex")
});

fn skip_ws(b: &[u8], mut i: usize, end: usize) -> usize {
    while i < end && b[i].is_ascii_whitespace() {
        i += 1;
    }
    i
}

/// The end (exclusive) of the statement starting at `start`: a block, a control statement
/// with its body (and `else`), or up to the next `;`.
fn statement_end(code: &str, start: usize, end: usize) -> usize {
    let b = code.as_bytes();
    let s = skip_ws(b, start, end);
    if s >= end {
        return end;
    }
    if b[s] == b'{' {
        return matching(code, s).map_or(end, |c| (c + 1).min(end));
    }
    let word_end = s + b[s..end]
        .iter()
        .take_while(|c| c.is_ascii_alphanumeric() || **c == b'_')
        .count();
    let kw = &code[s..word_end];
    if matches!(kw, "if" | "for" | "while" | "switch" | "else" | "do") {
        let m_end = word_end;
        let after = skip_ws(b, m_end, end);
        match kw {
            "if" | "for" | "while" | "switch" if after < end && b[after] == b'(' => {
                let close = matching(code, after).unwrap_or(end.saturating_sub(1));
                let body_end = statement_end(code, close + 1, end);
                if kw == "if" {
                    let next = skip_ws(b, body_end, end);
                    if code[next..end].starts_with("else")
                        && !code[next + 4..end]
                            .starts_with(|c: char| c.is_ascii_alphanumeric() || c == '_')
                    {
                        return statement_end(code, next + 4, end);
                    }
                }
                return body_end;
            }
            "else" => return statement_end(code, m_end, end),
            "do" => {
                let body_end = statement_end(code, m_end, end);
                return code[body_end..end]
                    .find(';')
                    .map_or(end, |p| body_end + p + 1);
            }
            _ => {}
        }
    }
    // Up to the next `;` outside brackets.
    let mut depth = 0i32;
    for (i, &c) in b.iter().enumerate().take(end).skip(s) {
        match c {
            b'(' | b'[' | b'{' => depth += 1,
            b')' | b']' | b'}' => {
                depth -= 1;
                if depth < 0 {
                    return i;
                }
            }
            b';' if depth == 0 => return i + 1,
            _ => {}
        }
    }
    end
}

/// Every branch and loop in `code[range]`.
pub(crate) fn controls(code: &str, range: Range<usize>) -> Vec<Control> {
    let b = code.as_bytes();
    let mut out: Vec<Control> = Vec::new();
    // Body end of each `if` → its condition, to give `else` the condition it depends on.
    let mut if_conds: HashMap<usize, Range<usize>> = HashMap::new();
    for m in KEYWORD.find_iter(&code[range.clone()]) {
        let at = range.start + m.start();
        let kw_end = range.start + m.end();
        let after = skip_ws(b, kw_end, range.end);
        match m.as_str() {
            kw @ ("if" | "for" | "while" | "switch") => {
                if after >= range.end || b[after] != b'(' {
                    continue;
                }
                let Some(close) = matching(code, after).filter(|c| *c < range.end) else {
                    continue;
                };
                let body_start = skip_ws(b, close + 1, range.end);
                let body_end = statement_end(code, close + 1, range.end);
                if b.get(body_start) == Some(&b';') {
                    // `while (c);`: the tail of a `do … while`, or an empty loop.
                    continue;
                }
                let cond = after + 1..close;
                if kw == "if" {
                    if_conds.insert(body_end, cond.clone());
                }
                let keyword = match kw {
                    "if" => "if",
                    "for" => "for",
                    "while" => "while",
                    _ => "switch",
                };
                out.push(Control {
                    keyword,
                    at,
                    cond,
                    body: body_start..body_end,
                });
            }
            "else" => {
                let mut k = at;
                while k > range.start && b[k - 1].is_ascii_whitespace() {
                    k -= 1;
                }
                let Some(cond) = if_conds.get(&k).cloned() else {
                    continue;
                };
                let body_start = skip_ws(b, kw_end, range.end);
                let body_end = statement_end(code, kw_end, range.end);
                out.push(Control {
                    keyword: "else",
                    at,
                    cond,
                    body: body_start..body_end,
                });
            }
            "do" => {
                let body_start = skip_ws(b, kw_end, range.end);
                let body_end = statement_end(code, kw_end, range.end);
                // The condition is the `while (…)` after the body.
                let w = skip_ws(b, body_end, range.end);
                if !code[w..range.end].starts_with("while") {
                    continue;
                }
                let open = skip_ws(b, w + 5, range.end);
                let Some(close) = matching(code, open).filter(|c| *c < range.end) else {
                    continue;
                };
                out.push(Control {
                    keyword: "do",
                    at,
                    cond: open + 1..close,
                    body: body_start..body_end,
                });
            }
            _ => {}
        }
    }
    out
}

/// Identifiers that differ between threads of one threadgroup in `code[range]`: the given
/// thread variables, kernel parameters bound to them (`uint lid [[thread_index_in_threadgroup]]`),
/// and variables assigned from any of these (to a fixpoint).
pub(crate) fn thread_dependent(
    code: &str,
    range: Range<usize>,
    thread_vars: &[String],
    params: Option<&Regex>,
) -> HashSet<String> {
    let text = &code[range];
    let mut set: HashSet<String> = thread_vars.iter().cloned().collect();
    if let Some(param) = params {
        for c in param.captures_iter(text) {
            set.insert(c[1].to_owned());
        }
    }
    let assigns: Vec<(String, Vec<&str>)> = ASSIGN
        .captures_iter(text)
        .map(|c| {
            let value = c.get(2).map_or("", |m| m.as_str());
            (c[1].to_owned(), identifiers(value))
        })
        .collect();
    loop {
        let before = set.len();
        for (name, used) in &assigns {
            if !set.contains(name) && used.iter().any(|w| set.contains(*w)) {
                set.insert(name.clone());
            }
        }
        if set.len() == before {
            return set;
        }
    }
}

/// The identifiers of `text`, without member names (those after `.`).
fn identifiers(text: &str) -> Vec<&str> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c.is_ascii_alphabetic() || c == b'_' {
            let start = i;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                i += 1;
            }
            if start == 0 || b[start - 1] != b'.' {
                out.push(&text[start..i]);
            }
        } else if c.is_ascii_digit() {
            // A number with its suffix (`1.0f`, `0x1F`) is not an identifier.
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_' || b[i] == b'.') {
                i += 1;
            }
        } else {
            i += 1;
        }
    }
    out
}

/// The first identifier of `text` in `set` (member names after `.` are not identifiers here).
pub(crate) fn mentions(text: &str, set: &HashSet<String>) -> Option<String> {
    identifiers(text)
        .into_iter()
        .find(|w| set.contains(*w))
        .map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controls_nest_and_else_inherits() {
        let code = "void k() { if (a) x; else { b(); } for (i = 0; i < n; i++) { while (c) y; } do { z; } while (d); }";
        let cs = controls(code, 0..code.len());
        let kws: Vec<_> = cs.iter().map(|c| c.keyword).collect();
        assert_eq!(kws, ["if", "else", "for", "while", "do"]);
        assert_eq!(&code[cs[1].cond.clone()], "a");
        assert_eq!(&code[cs[1].body.clone()], "{ b(); }");
        assert_eq!(&code[cs[4].cond.clone()], "d");
        let for_body = &code[cs[2].body.clone()];
        assert_eq!(for_body, "{ while (c) y; }");
    }

    #[test]
    fn taint_flows_through_assignments() {
        let code = "kernel void k(uint lid [[thread_index_in_threadgroup]], uint tg [[threadgroup_position_in_grid]]) { uint row = lid / 32; uint col = tg * 4; float v = x[row]; int k2 = 0; k2 += col; }";
        let vars = vec!["thread_index_in_threadgroup".to_owned()];
        let params = Regex::new(r"([A-Za-z_][A-Za-z0-9_]*)[ \t\r\n]*\[\[[ \t\r\n]*(?:thread_index_in_threadgroup)[ \t\r\n]*\]\]")
            .expect("regex");
        let set = thread_dependent(code, 0..code.len(), &vars, Some(&params));
        assert!(set.contains("lid") && set.contains("row") && set.contains("v"));
        assert!(!set.contains("tg") && !set.contains("col") && !set.contains("k2"));
        assert_eq!(mentions("a.lid + row", &set), Some("row".into()));
    }
}

//! Reading code as text: identifier-bounded tokens, call arguments, tuples, brackets.

use super::expr::Env;
use super::text::matching;

/// A byte of a name: ASCII letters, digits and `_`, and every byte of a non-ASCII character
/// (C++, Metal and CUDA accept UTF-8 names: `σthreadIdx` is not `threadIdx`).
fn is_ident(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b >= 0x80
}

/// Where the value of a keyword argument matched by `name[ \t\r\n]*=[ \t\r\n]*[^=]` starts:
/// at its last character, which may be several bytes long (`threadgroup=τ(…)`).
pub(crate) fn value_start(m: &regex::Match<'_>) -> usize {
    m.start() + m.as_str().char_indices().last().map_or(0, |(p, _)| p)
}

/// Offsets of `token` in `text`, bounded like an identifier where the token's ends are
/// identifier characters; a token ending in `_` matches as a prefix (`__shfl_`).
pub(crate) fn find_token(text: &str, token: &str) -> Vec<usize> {
    let b = text.as_bytes();
    let t = token.as_bytes();
    let (Some(&first), Some(&last)) = (t.first(), t.last()) else {
        return Vec::new();
    };
    let prefix = last == b'_';
    text.match_indices(token)
        .map(|(i, _)| i)
        .filter(|&i| {
            let end = i + t.len();
            let before_ok = i == 0 || !is_ident(first) || !is_ident(b[i - 1]);
            let after_ok = prefix || end >= b.len() || !is_ident(last) || !is_ident(b[end]);
            before_ok && after_ok
        })
        .collect()
}

/// Split at `sep` outside brackets.
pub(crate) fn split_top_level(s: &str, sep: u8) -> Vec<&str> {
    let mut out = Vec::new();
    let mut depth = 0i32;
    let mut start = 0;
    for (i, &c) in s.as_bytes().iter().enumerate() {
        match c {
            b'(' | b'[' | b'{' | b'<' => depth += 1,
            b')' | b']' | b'}' | b'>' => depth -= 1,
            c if c == sep && depth == 0 => {
                out.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&s[start..]);
    out
}

/// The largest char boundary of `s` at or before `i`.
pub(crate) fn floor_char_boundary(s: &str, mut i: usize) -> usize {
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

/// How far the scanners below look for the end of an argument or the bracket around a position.
/// Real arguments and calls are far shorter; without a bound, a candidate of many unclosed
/// brackets (`threadgroup=(` repeated) made every match scan to the end of the file, quadratic
/// in its size (8.8 GB and minutes for 500 KB, in the orchestrator, on every model answer).
pub(crate) const MAX_SCAN: usize = 8 << 10;

/// The argument starting at `start` in a call: up to the next `,` or `)` outside brackets (at
/// most `MAX_SCAN` bytes; a longer one is cut there).
pub(crate) fn argument(code: &str, start: usize) -> &str {
    let b = code.as_bytes();
    let end = floor_char_boundary(code, start.saturating_add(MAX_SCAN).min(b.len()));
    let b = &b[..end];
    let code = &code[..end];
    let mut depth = 0i32;
    for (i, &c) in b.iter().enumerate().skip(start) {
        match c {
            b'(' | b'[' | b'{' => depth += 1,
            b')' | b']' | b'}' if depth == 0 => return code[start..i].trim(),
            b')' | b']' | b'}' => depth -= 1,
            b',' if depth == 0 => return code[start..i].trim(),
            _ => {}
        }
    }
    code[start..].trim()
}

/// The elements of a tuple written `(a, b, c)` or `[a, b]`, following names to their values.
pub(crate) fn tuple_elements(value: &str, env: &Env) -> Option<Vec<String>> {
    let mut v = value.trim().to_owned();
    for _ in 0..4 {
        if v.starts_with(['(', '[']) {
            let close = matching(&v, 0)?;
            if close != v.len() - 1 {
                return None;
            }
            return Some(
                split_top_level(&v[1..close], b',')
                    .into_iter()
                    .map(|e| e.trim().to_owned())
                    .filter(|e| !e.is_empty())
                    .collect(),
            );
        }
        v = env.get(&v)?.trim().trim_end_matches(',').trim().to_owned();
    }
    None
}

/// The `(` that encloses `pos` in the same statement, if any.
pub(crate) fn enclosing_paren(code: &str, pos: usize) -> Option<usize> {
    let b = code.as_bytes();
    let mut depth = 0i32;
    let mut i = pos;
    let stop = pos.saturating_sub(MAX_SCAN);
    while i > stop {
        i -= 1;
        match b[i] {
            b')' | b']' | b'}' => depth += 1,
            b'[' | b'{' => {
                if depth == 0 {
                    return None;
                }
                depth -= 1;
            }
            b'(' => {
                if depth == 0 {
                    return Some(i);
                }
                depth -= 1;
            }
            _ => {}
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_bounded() {
        assert_eq!(find_token("a threadIdx.x b", "threadIdx"), vec![2]);
        assert!(find_token("my_threadIdx", "threadIdx").is_empty());
        assert_eq!(find_token("__shfl_xor_sync(", "__shfl_"), vec![0]);
        assert!(find_token("x__shfl_", "__shfl_").is_empty());
    }

    /// A candidate of unclosed brackets must not make every match scan to the end of the file:
    /// what the scanners look at is bounded, so the checks stay linear in a file's size.
    #[test]
    fn scans_stop_at_their_bound() {
        let unclosed = "threadgroup=τ(".repeat(20_000);
        let arg = argument(&unclosed, 12);
        assert!(arg.len() <= MAX_SCAN, "{} bytes", arg.len());
        assert!(unclosed.starts_with(arg) || unclosed[12..].starts_with(arg));
        assert_eq!(argument("f(a, (b, c), d)", 2), "a");
        assert_eq!(argument("f(a, (b, c), d)", 5), "(b, c)");
        let far = format!("({}x", " ".repeat(MAX_SCAN + 10));
        assert_eq!(enclosing_paren(&far, far.len() - 1), None);
        let near = format!("({}x", " ".repeat(10));
        assert_eq!(enclosing_paren(&near, near.len() - 1), Some(0));
    }
}

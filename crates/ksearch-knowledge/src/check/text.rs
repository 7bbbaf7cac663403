//! Views of a candidate's source that keep every byte offset (and so every line number): the
//! parts a rule must not read are blanked with spaces, newlines kept.

use std::ops::Range;

use super::scan::{MAX_SCAN, floor_char_boundary};
use crate::platform::Target;

/// Byte offset → 1-based line.
#[derive(Debug)]
pub(crate) struct Lines {
    starts: Vec<usize>,
}

impl Lines {
    pub(crate) fn new(text: &str) -> Lines {
        let mut starts = vec![0];
        starts.extend(
            text.bytes()
                .enumerate()
                .filter(|(_, b)| *b == b'\n')
                .map(|(i, _)| i + 1),
        );
        Lines { starts }
    }

    pub(crate) fn line(&self, offset: usize) -> usize {
        match self.starts.binary_search(&offset) {
            Ok(i) => i + 1,
            Err(i) => i,
        }
    }
}

fn blank(out: &mut [u8], range: Range<usize>) {
    for b in &mut out[range] {
        if *b != b'\n' {
            *b = b' ';
        }
    }
}

/// Where the line holding `from` ends: its newline, or the end of the text.
fn line_end(b: &[u8], from: usize) -> usize {
    b[from..]
        .iter()
        .position(|&c| c == b'\n')
        .map_or(b.len(), |p| from + p)
}

fn into_string(bytes: Vec<u8>) -> String {
    // Only whole ASCII-delimited regions were replaced by ASCII spaces, so this stays UTF-8;
    // the lossy conversion is a guard, not a path taken.
    String::from_utf8(bytes).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

/// C, CUDA or Metal code without comments and string/char literals.
pub(crate) fn mask_c(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = b.to_vec();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'/' if b.get(i + 1) == Some(&b'/') => {
                let end = line_end(b, i);
                blank(&mut out, i..end);
                i = end;
            }
            b'/' if b.get(i + 1) == Some(&b'*') => {
                let end = text[i + 2..].find("*/").map_or(b.len(), |p| i + 2 + p + 2);
                blank(&mut out, i..end);
                i = end;
            }
            b'"' => {
                let mut j = i + 1;
                while j < b.len() && b[j] != b'"' && b[j] != b'\n' {
                    j += if b[j] == b'\\' { 2 } else { 1 };
                }
                let end = (j + 1).min(b.len());
                blank(&mut out, i..end);
                i = end;
            }
            b'\'' => {
                // A char literal is short; anything else (a digit separator) is left alone.
                let mut j = i + 1;
                while j < b.len() && j < i + 8 && b[j] != b'\'' && b[j] != b'\n' {
                    j += if b[j] == b'\\' { 2 } else { 1 };
                }
                if j < b.len() && b[j] == b'\'' {
                    blank(&mut out, i..j + 1);
                    i = j + 1;
                } else {
                    i += 1;
                }
            }
            _ => i += 1,
        }
    }
    into_string(out)
}

/// One Python string literal.
#[derive(Debug, Clone)]
pub(crate) struct PyString {
    /// The characters between the quotes.
    pub(crate) content: Range<usize>,
    pub(crate) fstring: bool,
    /// Used as a value (assigned, passed, returned), not a docstring or a bare statement.
    pub(crate) is_value: bool,
}

/// Python code without comments and string literals, and the literals.
#[derive(Debug)]
pub(crate) struct Python {
    pub(crate) code: String,
    pub(crate) strings: Vec<PyString>,
}

/// A byte of a name: ASCII letters, digits and `_`, and every byte of a non-ASCII character
/// (Python names may be any letters: `src_σ` is one name).
fn is_ident_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b >= 0x80
}

pub(crate) fn mask_python(text: &str) -> Python {
    let b = text.as_bytes();
    let mut out = b.to_vec();
    let mut strings = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c == b'#' {
            let end = line_end(b, i);
            blank(&mut out, i..end);
            i = end;
            continue;
        }
        if c != b'"' && c != b'\'' {
            i += 1;
            continue;
        }
        // A prefix of up to two letters (r, b, u, f in any case) not part of a longer name.
        let mut start = i;
        while start > 0
            && i - start < 2
            && matches!(b[start - 1].to_ascii_lowercase(), b'r' | b'b' | b'u' | b'f')
        {
            start -= 1;
        }
        if start > 0 && is_ident_byte(b[start - 1]) {
            start = i;
        }
        let prefix = text[start..i].to_ascii_lowercase();
        let triple = b.get(i + 1) == Some(&c) && b.get(i + 2) == Some(&c);
        let quote_len = if triple { 3 } else { 1 };
        let content_start = i + quote_len;
        let mut j = content_start;
        let content_end;
        loop {
            if j >= b.len() {
                content_end = b.len();
                break;
            }
            if b[j] == b'\\' {
                j += 2;
                continue;
            }
            if !triple && b[j] == b'\n' {
                content_end = j;
                break;
            }
            if b[j] == c && (!triple || (b.get(j + 1) == Some(&c) && b.get(j + 2) == Some(&c))) {
                content_end = j;
                break;
            }
            j += 1;
        }
        let end = if content_end >= b.len() || (!triple && b.get(content_end) == Some(&b'\n')) {
            content_end.min(b.len())
        } else {
            content_end + quote_len
        };
        let is_value = used_as_value(&out, start);
        strings.push(PyString {
            content: content_start.min(content_end)..content_end,
            fstring: prefix.contains('f'),
            is_value,
        });
        blank(&mut out, start..end);
        i = end.max(i + 1);
    }
    Python {
        code: into_string(out),
        strings,
    }
}

/// Whether the literal starting at `start` is an operand (after `=`, `(`, `,`, …) rather than
/// a statement of its own (a docstring). `masked` is the code blanked so far.
fn used_as_value(masked: &[u8], start: usize) -> bool {
    // Looking back no further than `MAX_SCAN` keeps a file of many literals linear.
    let masked = &masked[start.saturating_sub(MAX_SCAN)..start];
    let mut k = masked.len();
    // Same line: anything before it means it is part of an expression.
    while k > 0 && matches!(masked[k - 1], b' ' | b'\t') {
        k -= 1;
    }
    if k > 0 && masked[k - 1] != b'\n' {
        return true;
    }
    // At the start of a line: a continuation of an open expression, or a statement.
    while k > 0 && masked[k - 1].is_ascii_whitespace() {
        k -= 1;
    }
    k > 0
        && matches!(
            masked[k - 1],
            b'(' | b'[' | b'{' | b',' | b'=' | b'+' | b'\\'
        )
}

/// The name a string literal is assigned to (`CUDA_SOURCE = """…`), if it is.
fn assigned_name(text: &str, content_start: usize) -> Option<&str> {
    let from = floor_char_boundary(text, content_start.saturating_sub(MAX_SCAN));
    let line_start = text[from..content_start]
        .rfind('\n')
        .map_or(from, |p| from + p + 1);
    let before = text[line_start..content_start]
        .trim_end_matches(['"', '\''])
        .trim_end_matches(|c: char| "rRbBuUfF".contains(c))
        .trim_end()
        .strip_suffix('=')?
        .trim_end();
    // Python names may hold any letters and digits (`src_σ`): the name starts after the last
    // character that cannot be part of one, wherever that character's bytes end.
    let name_start = before
        .char_indices()
        .rev()
        .find(|(_, c)| !(c.is_alphanumeric() || *c == '_'))
        .map_or(0, |(p, c)| p + c.len_utf8());
    let name = &before[name_start..];
    (!name.is_empty()).then_some(name)
}

/// Whether a source string belongs to another GPU target than `target`: a module that carries
/// kernels for both names them so (`CUDA_SOURCE`, `METAL_SOURCE`), and each is checked only for
/// its own target.
fn for_other_target(text: &str, content_start: usize, target: Target) -> bool {
    let Some(name) = assigned_name(text, content_start) else {
        return false;
    };
    let name = name.to_ascii_lowercase();
    match target {
        Target::Metal => name.contains("cuda"),
        Target::Cuda => name.contains("metal"),
        Target::Cpu => false,
    }
}

/// The kernel sources of an MLX candidate for `target`: the contents of value strings that look
/// like code (they hold a `;`), C comments blanked, f-string braces turned into spaces; strings
/// named for the other GPU target are left out. Returns the view and one unit per string.
pub(crate) fn mlx_kernels(text: &str, py: &Python, target: Target) -> (String, Vec<Range<usize>>) {
    let mut out = vec![b' '; text.len()];
    for (i, b) in text.bytes().enumerate() {
        if b == b'\n' {
            out[i] = b'\n';
        }
    }
    let mut units = Vec::new();
    for s in py.strings.iter().filter(|s| s.is_value) {
        let raw = &text[s.content.clone()];
        if !raw.contains(';') || for_other_target(text, s.content.start, target) {
            continue;
        }
        let content = if s.fstring {
            unbrace_fstring(raw)
        } else {
            raw.to_owned()
        };
        let masked = mask_c(&content);
        out[s.content.clone()].copy_from_slice(masked.as_bytes());
        units.push(s.content.clone());
    }
    (into_string(out), units)
}

/// `{{` → `{ `, `}}` → `} `, `{expr}` → ` expr `: same length, so offsets hold.
fn unbrace_fstring(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = b.to_vec();
    let mut i = 0;
    while i < b.len() {
        match (b[i], b.get(i + 1)) {
            (b'{', Some(b'{')) | (b'}', Some(b'}')) => {
                out[i + 1] = b' ';
                i += 2;
            }
            (b'{', _) => {
                out[i] = b' ';
                let mut depth = 1;
                let mut j = i + 1;
                while j < b.len() {
                    match b[j] {
                        b'{' => depth += 1,
                        b'}' => {
                            depth -= 1;
                            if depth == 0 {
                                out[j] = b' ';
                                break;
                            }
                        }
                        _ => {}
                    }
                    j += 1;
                }
                i = j + 1;
            }
            _ => i += 1,
        }
    }
    into_string(out)
}

/// Index of the bracket closing the one at `open` (`(`, `[` or `{`), within `code`.
pub(crate) fn matching(code: &str, open: usize) -> Option<usize> {
    let b = code.as_bytes();
    let (o, c) = match b.get(open)? {
        b'(' => (b'(', b')'),
        b'[' => (b'[', b']'),
        b'{' => (b'{', b'}'),
        _ => return None,
    };
    let mut depth = 0usize;
    for (i, &x) in b.iter().enumerate().skip(open) {
        if x == o {
            depth += 1;
        } else if x == c {
            depth -= 1;
            if depth == 0 {
                return Some(i);
            }
        }
    }
    None
}

/// The top-level brace blocks of C-like code (functions, structs), looking through
/// `namespace … { }` and `extern "C" { }`. Each range starts at the block's header.
pub(crate) fn c_units(code: &str) -> Vec<Range<usize>> {
    let b = code.as_bytes();
    let mut units = Vec::new();
    let mut boundary = 0;
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b';' => boundary = i + 1,
            // The end of a namespace: its contents were top level.
            b'}' => boundary = i + 1,
            b'{' => {
                // Skip preprocessor lines at the start of the header.
                let mut start = boundary;
                loop {
                    let rest = &code[start..i];
                    let ws = rest.len() - rest.trim_start().len();
                    if rest.trim_start().starts_with('#') {
                        start = rest.find('\n').map_or(i, |p| start + p + 1);
                    } else {
                        start += ws;
                        break;
                    }
                }
                let words: Vec<&str> = code[start..i].split_whitespace().collect();
                let is_scope = words.first() == Some(&"namespace")
                    || (words.first() == Some(&"extern") && words.len() == 1);
                if is_scope {
                    boundary = i + 1;
                } else {
                    let end = matching(code, i).map_or(b.len(), |e| e + 1);
                    units.push(start..end);
                    boundary = end;
                    i = end;
                    continue;
                }
            }
            _ => {}
        }
        i += 1;
    }
    units
}

/// The bodies of a Python function, by indentation; `def_re` matches its `def` line with the
/// indentation as group 1 and ends at the `(`.
pub(crate) fn python_function_bodies(code: &str, def_re: &regex::Regex) -> Vec<Range<usize>> {
    let re = def_re;
    let mut out = Vec::new();
    for cap in re.captures_iter(code) {
        let whole = cap.get(0).expect("match");
        let indent = cap.get(1).map_or(0, |m| m.as_str().len());
        let Some(close) = matching(code, whole.end() - 1) else {
            continue;
        };
        let Some(colon) = code[close..].find(':').map(|p| close + p) else {
            continue;
        };
        let body_start = code[colon..]
            .find('\n')
            .map_or(code.len(), |p| colon + p + 1);
        let mut end = code.len();
        let mut pos = body_start;
        for line in code[body_start..].split_inclusive('\n') {
            let trimmed = line.trim_start_matches([' ', '\t']);
            let is_blank = trimmed.trim().is_empty();
            if !is_blank && line.len() - trimmed.len() <= indent {
                end = pos;
                break;
            }
            pos += line.len();
        }
        // A one-line body (`def run(x): return f(x)`) sits after the colon.
        let inline_start = if code[colon + 1..body_start].trim().is_empty() {
            body_start
        } else {
            colon + 1
        };
        out.push(inline_start..end.max(inline_start));
    }
    out
}

/// `view` with everything outside `ranges` blanked.
pub(crate) fn only(view: &str, ranges: &[Range<usize>]) -> String {
    let mut out: Vec<u8> = view
        .bytes()
        .map(|b| if b == b'\n' { b'\n' } else { b' ' })
        .collect();
    for r in ranges {
        out[r.clone()].copy_from_slice(&view.as_bytes()[r.clone()]);
    }
    into_string(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn c_masking_keeps_offsets() {
        let src = "a // __syncthreads\nb /* x\ny */ \"__shared__\" 'c' 1'000;";
        let m = mask_c(src);
        assert_eq!(m.len(), src.len());
        assert!(!m.contains("__syncthreads") && !m.contains("__shared__") && !m.contains("'c'"));
        assert_eq!(m.lines().count(), src.lines().count());
        assert!(m.contains("1'000"));
    }

    #[test]
    fn sources_named_for_the_other_target_are_left_out() {
        let src = "CUDA_SOURCE = \"\"\"\n int i = threadIdx.x; \"\"\"\nmetal_source = r'uint i = thread_position_in_grid.x;'\nplain = 'x = 1;'\n";
        let py = mask_python(src);
        let (_, metal) = mlx_kernels(src, &py, Target::Metal);
        let (_, cuda) = mlx_kernels(src, &py, Target::Cuda);
        let names = |units: &[Range<usize>]| {
            units
                .iter()
                .map(|r| src[r.clone()].trim().to_owned())
                .collect::<Vec<_>>()
        };
        assert_eq!(
            names(&metal),
            ["uint i = thread_position_in_grid.x;", "x = 1;"]
        );
        assert_eq!(names(&cuda), ["int i = threadIdx.x;", "x = 1;"]);
        assert_eq!(
            assigned_name(src, src.find("\"\"\"").unwrap() + 3),
            Some("CUDA_SOURCE")
        );
    }

    #[test]
    fn python_strings_and_docstrings() {
        let src = "def f():\n    \"\"\"doc ; here\"\"\"\n    s = '''a;\nb'''  # c\n    k(source=f\"x{{1}}{N};\")\n";
        let py = mask_python(src);
        assert_eq!(py.code.len(), src.len());
        assert_eq!(py.strings.len(), 3);
        assert!(!py.strings[0].is_value);
        assert!(py.strings[1].is_value);
        assert!(py.strings[2].is_value && py.strings[2].fstring);
        assert!(!py.code.contains("doc") && !py.code.contains("# c"));
        let (view, units) = mlx_kernels(src, &py, Target::Metal);
        assert_eq!(units.len(), 2);
        assert!(view.contains("x{ 1}  N ;"));
    }

    #[test]
    fn units_and_functions() {
        let code = "#include <x>\nnamespace a {\nkernel void k() { if (x) { y; } }\nstruct S { int v; };\n}\n";
        let units = c_units(code);
        assert_eq!(units.len(), 2);
        assert!(code[units[0].clone()].starts_with("kernel void k()"));
        let py = "import x\ndef run(a,\n        b):\n    y = 1\n\n    return y\nz = 2\n";
        let def = regex::Regex::new(r"(?m)^([ \t]*)def[ \t]+run[ \t]*\(").expect("regex");
        let bodies = python_function_bodies(py, &def);
        assert_eq!(&py[bodies[0].clone()], "    y = 1\n\n    return y\n");
        assert_eq!(Lines::new(py).line(py.find("z = 2").unwrap()), 7);
    }
}

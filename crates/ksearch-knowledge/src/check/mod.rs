//! Running the assertion rules on a candidate's source. Each rule kind is implemented here;
//! rules only choose a kind and give its parameters and messages.
//!
//! Everything is heuristic text analysis (no compiler): comments and strings are masked,
//! constants are resolved where the candidate defines them, and a check that cannot tell
//! (an array size it cannot compute) stays quiet rather than guess.

mod expr;
mod flow;
mod text;

use std::borrow::Cow;
use std::collections::HashSet;
use std::ops::Range;
use std::sync::LazyLock;

use ksearch_core::static_check::Violation;
use regex::Regex;

use crate::assertion::{Rule, RuleKind, Scope, fill};
use crate::hardware::Hardware;
use crate::platform::{Language, Platform, Target};
use expr::{Dialect, Env};
use text::{Lines, matching};

/// Most violations one rule reports; the proposer needs the first few, not a flood.
const MAX_PER_RULE: usize = 5;

pub(crate) fn check<'a>(
    rules: impl Iterator<Item = &'a Rule>,
    source: &str,
    platform: Platform,
    hardware: Option<&Hardware>,
) -> Vec<Violation> {
    let a = Analysis::new(source, platform);
    let mut out = Vec::new();
    for rule in rules {
        let mut found = Vec::new();
        match rule.spec.kind {
            RuleKind::Token => token(rule, &a, &mut found),
            RuleKind::Regex => regex_rule(rule, &a, &mut found),
            RuleKind::ThreadgroupMemory => threadgroup_memory(rule, &a, hardware, &mut found),
            RuleKind::ThreadgroupSize => threadgroup_size(rule, &a, hardware, &mut found),
            RuleKind::BarrierInBranch => barrier_in_branch(rule, &a, &mut found),
            RuleKind::ExitBeforeBarrier => exit_before_barrier(rule, &a, &mut found),
            RuleKind::MlxGrid => mlx_grid(rule, &a, &mut found),
        }
        found.truncate(MAX_PER_RULE);
        out.extend(found);
    }
    out.sort_by_key(|v| v.line.unwrap_or(usize::MAX));
    out
}

/// The candidate, prepared once for all rules.
struct Analysis<'s> {
    src: &'s str,
    dialect: Dialect,
    lines: Lines,
    /// Device code with everything else blanked.
    kernel: String,
    /// One range per kernel (C-like: top-level blocks; MLX: kernel source strings).
    units: Vec<Range<usize>>,
    /// MLX: the Python code outside strings and comments.
    python: Option<String>,
    env: Env,
}

impl<'s> Analysis<'s> {
    fn new(src: &'s str, platform: Platform) -> Analysis<'s> {
        let mut env = Env::default();
        let dialect = match (platform.language, platform.target) {
            (Language::Metal, _) | (Language::Mlx, Target::Metal) => Dialect::Metal,
            (Language::Cuda, _) | (Language::Mlx, _) => Dialect::Cuda,
            (Language::C, _) => Dialect::C,
        };
        let (kernel, units, python) = if platform.language == Language::Mlx {
            let py = text::mask_python(src);
            let (kernel, units) = text::mlx_kernels(src, &py, platform.target);
            env.add_python(&py.code, src);
            (kernel, units, Some(py.code))
        } else {
            let kernel = text::mask_c(src);
            let mut units = text::c_units(&kernel);
            if units.is_empty() {
                units.push(0..kernel.len());
            }
            (kernel, units, None)
        };
        env.add_c(&kernel);
        Analysis {
            src,
            dialect,
            lines: Lines::new(src),
            kernel,
            units,
            python,
            env,
        }
    }

    fn scope_text(&self, rule: &Rule) -> Cow<'_, str> {
        match rule.scope() {
            Scope::Kernel => Cow::Borrowed(&self.kernel),
            Scope::Python => Cow::Borrowed(self.python.as_deref().unwrap_or("")),
            Scope::Function => match (&self.python, &rule.compiled.function_def) {
                (Some(py), Some(def)) => {
                    Cow::Owned(text::only(py, &text::python_function_bodies(py, def)))
                }
                _ => Cow::Borrowed(""),
            },
        }
    }
    fn line(&self, offset: usize) -> usize {
        self.lines.line(offset)
    }

    /// Byte ranges of the device code outside every unit (file-scope declarations).
    fn outside_units(&self) -> Vec<Range<usize>> {
        let mut out = Vec::new();
        let mut pos = 0;
        let mut units = self.units.clone();
        units.sort_by_key(|r| r.start);
        for u in units {
            if u.start > pos {
                out.push(pos..u.start);
            }
            pos = pos.max(u.end);
        }
        if pos < self.kernel.len() {
            out.push(pos..self.kernel.len());
        }
        out
    }
}

fn violation(rule: &Rule, line: usize, values: &[(&str, String)]) -> Violation {
    Violation {
        rule: rule.spec.id.clone(),
        line: Some(line),
        message: fill(&rule.spec.message, values),
    }
}

/// A byte of a name: ASCII letters, digits and `_`, and every byte of a non-ASCII character
/// (C++, Metal and CUDA accept UTF-8 names: `σthreadIdx` is not `threadIdx`).
fn is_ident(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b >= 0x80
}

/// Where the value of a keyword argument matched by `name[ \t\r\n]*=[ \t\r\n]*[^=]` starts:
/// at its last character, which may be several bytes long (`threadgroup=τ(…)`).
fn value_start(m: &regex::Match<'_>) -> usize {
    m.start() + m.as_str().char_indices().last().map_or(0, |(p, _)| p)
}

/// Offsets of `token` in `text`, bounded like an identifier where the token's ends are
/// identifier characters; a token ending in `_` matches as a prefix (`__shfl_`).
fn find_token(text: &str, token: &str) -> Vec<usize> {
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

fn token(rule: &Rule, a: &Analysis<'_>, out: &mut Vec<Violation>) {
    let text = a.scope_text(rule);
    for spec in &rule.spec.tokens {
        let hits = find_token(&text, &spec.token);
        if let Some(&first) = hits.first() {
            out.push(violation(
                rule,
                a.line(first),
                &[
                    ("token", spec.token.clone()),
                    ("hint", spec.hint.clone()),
                    ("translation", spec.translation.clone().unwrap_or_default()),
                ],
            ));
        }
    }
}

fn regex_rule(rule: &Rule, a: &Analysis<'_>, out: &mut Vec<Violation>) {
    let Some(re) = &rule.compiled.pattern else {
        return;
    };
    let text = a.scope_text(rule);
    let mut lines_seen = HashSet::new();
    for m in re.find_iter(&text) {
        let line = a.line(m.start());
        if lines_seen.insert(line) {
            // Report what the candidate wrote, not the masked view.
            let written = a.src.get(m.range()).unwrap_or(m.as_str()).trim();
            out.push(violation(rule, line, &[("match", written.to_owned())]));
        }
    }
}

/// The limit a rule compares against, and where it comes from.
fn limit(rule: &Rule, hardware: Option<&Hardware>) -> Option<(u64, String)> {
    let field = rule.spec.limit.as_deref()?;
    if let Some(hw) = hardware
        && let Some(v) = hw.limit(field)
    {
        return Some((v as u64, format!("{} (`{field}`)", hw.name)));
    }
    rule.spec.fallback_limit.map(|v| {
        (
            v,
            match hardware {
                Some(hw) => format!(
                    "the default for this platform ({} does not publish `{field}`)",
                    hw.name
                ),
                None => "the default for this platform (no hardware given)".to_owned(),
            },
        )
    })
}

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

/// Split at `sep` outside brackets.
fn split_top_level(s: &str, sep: u8) -> Vec<&str> {
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

fn threadgroup_memory(
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

static MLX_TG: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?-u:\b)threadgroup[ \t\r\n]*=[ \t\r\n]*[^=]").expect("regex"));
static LAUNCH_BOUNDS: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"__launch_bounds__[ \t\r\n]*\(").expect("regex"));
static MAX_TOTAL: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"max_total_threads_per_threadgroup[ \t\r\n]*\(").expect("regex"));
static DIM3: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?-u:\b)dim3[ \t\r\n]+([A-Za-z_][A-Za-z0-9_]*)[ \t\r\n]*(?:=[ \t\r\n]*dim3[ \t\r\n]*)?[({]([^;]*)[)}][ \t\r\n]*;").expect("regex")
});

/// The argument starting at `start` in a call: up to the next `,` or `)` outside brackets.
fn argument(code: &str, start: usize) -> &str {
    let b = code.as_bytes();
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
fn tuple_elements(value: &str, env: &Env) -> Option<Vec<String>> {
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

fn threadgroup_size(
    rule: &Rule,
    a: &Analysis<'_>,
    hardware: Option<&Hardware>,
    out: &mut Vec<Violation>,
) {
    let Some((limit, from)) = limit(rule, hardware) else {
        return;
    };
    // (offset, text as written, thread count)
    let mut found: Vec<(usize, String, Option<i64>)> = Vec::new();
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
            found.push((m.start(), value.to_owned(), threads));
        }
    }
    let code = &a.kernel;
    for re in [&*LAUNCH_BOUNDS, &*MAX_TOTAL] {
        for m in re.find_iter(code) {
            let value = argument(code, m.end());
            found.push((m.start(), value.to_owned(), a.env.eval(value)));
        }
    }
    for (at, _) in code.match_indices("<<<") {
        let Some(close) = code[at..].find(">>>").map(|p| at + p) else {
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
            DIM3.captures_iter(code).find(|c| &c[1] == block).map(|c| {
                split_top_level(&c[2], b',')
                    .iter()
                    .map(|s| s.trim().to_owned())
                    .collect()
            })
        };
        let threads = match dims {
            Some(d) => product(&d),
            None => a.env.eval(block),
        };
        found.push((at, block.to_owned(), threads));
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
                    ("expr", expr),
                ],
            ));
        }
    }
}

/// Offsets of calls to any of `names` in `code[range]`.
fn calls(code: &str, range: Range<usize>, names: &[String]) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for name in names {
        for at in find_token(&code[range.clone()], name) {
            let after = &code[range.start + at + name.len()..range.end];
            if after.trim_start().starts_with('(') {
                out.push((range.start + at, name.clone()));
            }
        }
    }
    out.sort();
    out
}

fn barrier_in_branch(rule: &Rule, a: &Analysis<'_>, out: &mut Vec<Violation>) {
    let code = &a.kernel;
    for unit in &a.units {
        let barriers = calls(code, unit.clone(), &rule.spec.barriers);
        if barriers.is_empty() {
            continue;
        }
        let controls = flow::controls(code, unit.clone());
        let tainted = flow::thread_dependent(
            code,
            unit.clone(),
            &rule.spec.thread_vars,
            rule.compiled.thread_params.as_ref(),
        );
        for (at, name) in barriers {
            // The innermost enclosing control whose condition depends on the thread.
            let hit = controls
                .iter()
                .filter(|c| c.body.contains(&at))
                .filter_map(|c| flow::mentions(&code[c.cond.clone()], &tainted).map(|v| (c, v)))
                .min_by_key(|(c, _)| c.body.len());
            if let Some((c, var)) = hit {
                let cond = a.src.get(c.cond.clone()).unwrap_or("").trim();
                out.push(violation(
                    rule,
                    a.line(at),
                    &[
                        ("barrier", name),
                        ("condition", format!("{} ({})", c.keyword, squash(cond))),
                        ("condition_line", a.line(c.at).to_string()),
                        ("var", var),
                    ],
                ));
            }
        }
    }
}

fn exit_before_barrier(rule: &Rule, a: &Analysis<'_>, out: &mut Vec<Violation>) {
    let code = &a.kernel;
    for unit in &a.units {
        let barriers = calls(code, unit.clone(), &rule.spec.barriers);
        let Some((last_barrier, barrier)) = barriers.last().cloned() else {
            continue;
        };
        let controls = flow::controls(code, unit.clone());
        let tainted = flow::thread_dependent(
            code,
            unit.clone(),
            &rule.spec.thread_vars,
            rule.compiled.thread_params.as_ref(),
        );
        for ret in find_token(&code[unit.clone()], "return") {
            let at = unit.start + ret;
            if at > last_barrier {
                continue;
            }
            let hit = controls
                .iter()
                .filter(|c| c.body.contains(&at) && c.keyword != "for" && c.keyword != "while")
                .filter_map(|c| flow::mentions(&code[c.cond.clone()], &tainted).map(|v| (c, v)))
                .min_by_key(|(c, _)| c.body.len());
            if let Some((c, var)) = hit {
                let cond = a.src.get(c.cond.clone()).unwrap_or("").trim();
                let next_barrier = barriers
                    .iter()
                    .find(|(b, _)| *b > at)
                    .map_or(last_barrier, |(b, _)| *b);
                out.push(violation(
                    rule,
                    a.line(at),
                    &[
                        ("barrier", barrier.clone()),
                        ("barrier_line", a.line(next_barrier).to_string()),
                        ("condition", format!("{} ({})", c.keyword, squash(cond))),
                        ("var", var),
                    ],
                ));
            }
        }
    }
}

/// One line, single spaces.
fn squash(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

static GRID_KW: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?-u:\b)grid[ \t\r\n]*=[ \t\r\n]*[^=]").expect("regex"));
static CEIL_FORMS: LazyLock<Vec<Regex>> = LazyLock::new(|| {
    [
        // (n + D - 1) // D, (n + (D - 1)) // D
        r"^\(?\(?(?P<x>.+)\+\(?(?P<d1>[A-Za-z0-9_]+)-1\)?\)//(?P<d>[A-Za-z0-9_]+)\)?$",
        // (n + 255) // 256
        r"^\(?\((?P<x>.+)\+(?P<dm1>\d+)\)//(?P<d>\d+)\)?$",
        // -(-n // D)
        r"^-\(-(?P<x>.+)//(?P<d>[A-Za-z0-9_]+)\)$",
        // math.ceil(n / D), int(math.ceil(n / D))
        r"ceil\((?P<x>.+)/(?P<d>[A-Za-z0-9_]+)\)\)?$",
        // cdiv(n, D)
        r"^(?:[A-Za-z0-9_]+\.)?(?:cdiv|ceil_div|ceildiv|div_up|round_up_div)\((?P<x>.+),(?P<d>[A-Za-z0-9_]+)\)$",
    ]
    .iter()
    .map(|p| Regex::new(p).expect("regex"))
    .collect()
});
static FLOOR_FORM: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^\(?(?P<x>.+)//(?P<d>[A-Za-z0-9_]+)\)?$").expect("regex"));

/// The divisor of a threadgroup-count expression, and whether it rounds up.
fn count_divisor(expr: &str) -> Option<(String, bool)> {
    let s: String = expr.chars().filter(|c| !c.is_whitespace()).collect();
    for re in CEIL_FORMS.iter() {
        if let Some(c) = re.captures(&s) {
            let d = c.name("d")?.as_str().to_owned();
            if let Some(d1) = c.name("d1")
                && d1.as_str() != d
            {
                continue;
            }
            if let Some(dm1) = c.name("dm1") {
                let ok = matches!((dm1.as_str().parse::<i64>(), d.parse::<i64>()), (Ok(a), Ok(b)) if a + 1 == b);
                if !ok {
                    continue;
                }
            }
            return Some((d, true));
        }
    }
    FLOOR_FORM
        .captures(&s)
        .and_then(|c| c.name("d").map(|d| (d.as_str().to_owned(), false)))
}

fn mlx_grid(rule: &Rule, a: &Analysis<'_>, out: &mut Vec<Violation>) {
    let Some(py) = &a.python else { return };
    for m in GRID_KW.find_iter(py) {
        // Only keyword arguments: there must be an open `(` before it in the statement.
        let Some(call_open) = enclosing_paren(py, m.start()) else {
            continue;
        };
        let call_close = matching(py, call_open).unwrap_or(py.len());
        let value_at = value_start(&m);
        let value = argument(py, value_at);
        let written = a.src.get(value_at..value_at + value.len()).unwrap_or(value);
        let Some(elements) = tuple_elements(value, &a.env) else {
            continue;
        };
        let tg: Option<Vec<String>> = MLX_TG
            .find_iter(&py[call_open..call_close])
            .next()
            .and_then(|t| {
                let v = argument(py, call_open + value_start(&t));
                tuple_elements(v, &a.env)
            });
        for (d, element) in elements.iter().enumerate() {
            // Follow a name to its value (a few steps).
            let mut expr = element.clone();
            for _ in 0..3 {
                match a.env.get(expr.trim()) {
                    Some(v) if count_divisor(&expr).is_none() => expr = v.to_owned(),
                    _ => break,
                }
            }
            let Some((divisor, rounds_up)) = count_divisor(&expr) else {
                continue;
            };
            let div_value = a.env.eval(&divisor);
            let tg_dim = tg.as_ref().and_then(|t| t.get(d));
            let matches_tg = match tg_dim {
                Some(t) => {
                    t.trim() == divisor
                        || matches!((a.env.eval(t), div_value), (Some(x), Some(y)) if x == y && x > 1)
                }
                // No threadgroup to compare with: a rounded-up division by a typical
                // threadgroup size is the tell.
                None => rounds_up && div_value.is_some_and(|v| v >= 32),
            };
            if matches_tg {
                out.push(violation(
                    rule,
                    a.line(m.start()),
                    &[
                        ("grid", squash(written)),
                        ("element", squash(element)),
                        ("divisor", divisor.clone()),
                        (
                            "threadgroup",
                            tg.as_ref()
                                .map_or("not given".to_owned(), |t| format!("({})", t.join(", "))),
                        ),
                    ],
                ));
                break;
            }
        }
    }
}

/// The `(` that encloses `pos` in the same statement, if any.
fn enclosing_paren(code: &str, pos: usize) -> Option<usize> {
    let b = code.as_bytes();
    let mut depth = 0i32;
    let mut i = pos;
    while i > 0 {
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

    #[test]
    fn count_divisors() {
        assert_eq!(
            count_divisor("(n + 255) // 256"),
            Some(("256".into(), true))
        );
        assert_eq!(
            count_divisor("(n + TG - 1) // TG"),
            Some(("TG".into(), true))
        );
        assert_eq!(count_divisor("-(-n // 128)"), Some(("128".into(), true)));
        assert_eq!(
            count_divisor("math.ceil(n / 256)"),
            Some(("256".into(), true))
        );
        assert_eq!(count_divisor("cdiv(n, 64)"), Some(("64".into(), true)));
        assert_eq!(count_divisor("n // 4"), Some(("4".into(), false)));
        assert_eq!(
            count_divisor("(n + 254) // 256"),
            Some(("256".into(), false))
        );
        assert_eq!(count_divisor("n * 32"), None);
    }
}

//! Checks made on a candidate's source before anything is compiled. A violation makes the
//! evaluation `rejected`, with a message the proposer can act on.
//!
//! These are the backend-independent basics; the knowledge layer adds data-driven rules.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use crate::task::TaskSpec;

/// Largest candidate source accepted, in bytes.
pub const MAX_SOURCE_BYTES: usize = 512 * 1024;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Violation {
    pub rule: String,
    /// 1-based line, when the rule points at one.
    pub line: Option<usize>,
    pub message: String,
}

/// Every violation in `source`; empty means the candidate may be compiled.
pub fn check_candidate(spec: &TaskSpec, source: &str) -> Vec<Violation> {
    let mut out = Vec::new();
    if source.trim().is_empty() {
        out.push(Violation {
            rule: "empty".into(),
            line: None,
            message: "the candidate is empty".into(),
        });
        return out;
    }
    if source.len() > MAX_SOURCE_BYTES {
        out.push(Violation {
            rule: "size".into(),
            line: None,
            message: format!(
                "the candidate has {} bytes; the limit is {MAX_SOURCE_BYTES}",
                source.len()
            ),
        });
    }
    if source.contains('\0') {
        out.push(Violation {
            rule: "binary".into(),
            line: None,
            message: "the candidate contains NUL bytes".into(),
        });
    }
    spec.backend.backend().check(spec, source, &mut out);
    out
}

/// The `mlx` backend's entry point: a top-level `def run(...)`.
pub(crate) fn check_python_entry(_spec: &TaskSpec, source: &str, out: &mut Vec<Violation>) {
    let defines_run = source
        .lines()
        .any(|l| l.trim_start().starts_with("def run(") && !l.starts_with(char::is_whitespace));
    if !defines_run {
        out.push(Violation {
            rule: "entry-point".into(),
            line: None,
            message: "the candidate must define a top-level `def run(...)`".into(),
        });
    }
}

/// The `torch` backend's entry point: a top-level `def run(...)` or `class ModelNew`.
pub(crate) fn check_torch_entry(_spec: &TaskSpec, source: &str, out: &mut Vec<Violation>) {
    let top = |l: &&str| !l.starts_with(char::is_whitespace);
    let defines = source.lines().filter(top).any(|l| {
        l.starts_with("def run(") || l.starts_with("class ModelNew") || l.starts_with("ModelNew =")
    });
    if !defines {
        out.push(Violation {
            rule: "entry-point".into(),
            line: None,
            message: "the candidate must define a top-level `def run(...)` or `class ModelNew`"
                .into(),
        });
    }
}

/// The `c` backend's checks: reserved names, `main`, token pasting, the entry point.
pub(crate) fn check_c(spec: &TaskSpec, source: &str, out: &mut Vec<Violation>) {
    let tu = Translated::new(source);
    let mut seen = BTreeSet::new();
    let mut flag = |out: &mut Vec<Violation>, rule: &str, line: usize, message: &str| {
        if seen.insert((rule.to_owned(), line)) {
            out.push(Violation {
                rule: rule.into(),
                line: Some(line),
                message: message.into(),
            });
        }
    };
    const RESERVED: &str = "names starting with `ksearch_` are reserved for the evaluation harness";
    let mut defines_entry = false;
    for (i, token) in tu.tokens.iter().enumerate() {
        match token.kind {
            TokenKind::Identifier => {
                if token.text.starts_with("ksearch_") {
                    flag(out, "reserved-name", token.line, RESERVED);
                }
                if token.text == "main" {
                    flag(
                        out,
                        "main",
                        token.line,
                        "define only the kernel function; the harness calls it, there is no `main`",
                    );
                }
                if token.text == spec.name && tu.tokens.get(i + 1).is_some_and(|t| t.text == "(") {
                    defines_entry = true;
                }
            }
            // A literal naming a harness symbol (for `dlsym`, or an `asm` label).
            TokenKind::Literal if token.text.contains("ksearch_") => {
                flag(out, "reserved-name", token.line, RESERVED);
            }
            TokenKind::Punctuator if token.text == "##" || token.text == "%:%:" => flag(
                out,
                "token-pasting",
                token.line,
                "the token-pasting operator `##` is not accepted (it can build reserved names); write the names out",
            ),
            _ => {}
        }
    }
    if !defines_entry {
        out.push(Violation {
            rule: "entry-point".into(),
            line: None,
            message: format!(
                "the candidate must define `{}`",
                crate::contract::c_signature(spec)
            ),
        });
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TokenKind {
    Identifier,
    /// A number (a preprocessing number: `1.5e-3f`, `0x1F`, `1'000`).
    Number,
    /// A string or character literal; `text` is what is between the quotes.
    Literal,
    Punctuator,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Token {
    kind: TokenKind,
    text: String,
    /// 1-based line in the source as written.
    line: usize,
}

/// A C source as the compiler tokenizes it: the translation phases that decide what the
/// tokens are, applied in order, so that nothing written between them can hide a name.
///
/// 1. Trigraphs (`??=` → `#`, `??/` → `\`, …) are replaced; compilers in their default GNU
///    modes ignore them, but a compiler or flag that honours them must not see a different
///    program than this check does.
/// 2. A backslash followed by a newline (also with spaces between them, which GCC accepts) is
///    deleted, splicing two lines into one: `ma\` + newline + `in` is `main`.
/// 3. Comments become one space (so they split tokens rather than join them, and a `//`
///    comment ending in a backslash swallows the next line), and the rest is cut into
///    tokens. Digraphs (`%:` for `#`, `%:%:` for `##`, `<:` `:>` `<%` `%>`) are punctuators.
#[derive(Debug)]
struct Translated {
    tokens: Vec<Token>,
}

fn trigraph(c: u8) -> Option<u8> {
    Some(match c {
        b'=' => b'#',
        b'(' => b'[',
        b'/' => b'\\',
        b')' => b']',
        b'\'' => b'^',
        b'<' => b'{',
        b'!' => b'|',
        b'>' => b'}',
        b'-' => b'~',
        _ => return None,
    })
}

/// An identifier byte: ASCII letters, digits, `_`, and every byte of a non-ASCII character
/// (GCC and Clang accept UTF-8 in identifiers, so `mainé` is one name, not `main`).
fn is_ident_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b >= 0x80
}

/// Punctuators of more than one character, longest first.
const PUNCTUATORS: &[&str] = &[
    "%:%:", "<<=", ">>=", "...", "->", "++", "--", "<<", ">>", "<=", ">=", "==", "!=", "&&", "||",
    "*=", "/=", "%=", "+=", "-=", "&=", "^=", "|=", "##", "<:", ":>", "<%", "%>", "%:",
];

impl Translated {
    fn new(source: &str) -> Translated {
        // Phase 1: trigraphs. Each byte keeps the line it was written on.
        let src = source.as_bytes();
        let mut p1: Vec<(u8, usize)> = Vec::with_capacity(src.len());
        let mut line = 1;
        let mut i = 0;
        while i < src.len() {
            if src[i] == b'?'
                && src.get(i + 1) == Some(&b'?')
                && let Some(c) = src.get(i + 2).copied().and_then(trigraph)
            {
                p1.push((c, line));
                i += 3;
                continue;
            }
            p1.push((src[i], line));
            if src[i] == b'\n' {
                line += 1;
            }
            i += 1;
        }
        // Phase 2: line splicing.
        let mut p2: Vec<(u8, usize)> = Vec::with_capacity(p1.len());
        let mut i = 0;
        while i < p1.len() {
            if p1[i].0 == b'\\' {
                let mut j = i + 1;
                while j < p1.len() && matches!(p1[j].0, b' ' | b'\t' | b'\r' | b'\x0b' | b'\x0c') {
                    j += 1;
                }
                if j < p1.len() && p1[j].0 == b'\n' {
                    i = j + 1;
                    continue;
                }
            }
            p2.push(p1[i]);
            i += 1;
        }
        Translated {
            tokens: tokenize(&p2),
        }
    }
}

/// Phase 3 over spliced bytes: comments dropped (they separate tokens), then tokens.
fn tokenize(s: &[(u8, usize)]) -> Vec<Token> {
    let at = |i: usize| s.get(i).map(|c| c.0);
    let text = |r: std::ops::Range<usize>| -> String {
        String::from_utf8_lossy(&s[r].iter().map(|c| c.0).collect::<Vec<u8>>()).into_owned()
    };
    let mut tokens = Vec::new();
    let mut i = 0;
    while i < s.len() {
        let (c, line) = s[i];
        match c {
            b'/' if at(i + 1) == Some(b'/') => {
                while i < s.len() && s[i].0 != b'\n' {
                    i += 1;
                }
            }
            b'/' if at(i + 1) == Some(b'*') => {
                i += 2;
                while i < s.len() && !(s[i].0 == b'*' && at(i + 1) == Some(b'/')) {
                    i += 1;
                }
                i = (i + 2).min(s.len());
            }
            b'"' | b'\'' => {
                // To the closing quote on the same line; an unterminated literal ends there.
                let mut j = i + 1;
                while j < s.len() && s[j].0 != c && s[j].0 != b'\n' {
                    j += if s[j].0 == b'\\' { 2 } else { 1 };
                }
                let end = j.min(s.len());
                tokens.push(Token {
                    kind: TokenKind::Literal,
                    text: text(i + 1..end),
                    line,
                });
                i = (end + 1).min(s.len());
            }
            c if c.is_ascii_digit()
                || (c == b'.' && at(i + 1).is_some_and(|d| d.is_ascii_digit())) =>
            {
                // A preprocessing number: digits, letters, `.`, `'` between digits (C23), and
                // a sign after an exponent.
                let mut j = i + 1;
                while let Some(d) = at(j) {
                    let sign =
                        matches!(d, b'+' | b'-') && matches!(s[j - 1].0, b'e' | b'E' | b'p' | b'P');
                    let separator =
                        d == b'\'' && at(j + 1).is_some_and(|n| n.is_ascii_alphanumeric());
                    if is_ident_byte(d) || d == b'.' || sign || separator {
                        j += 1;
                    } else {
                        break;
                    }
                }
                tokens.push(Token {
                    kind: TokenKind::Number,
                    text: text(i..j),
                    line,
                });
                i = j;
            }
            c if is_ident_byte(c) => {
                let mut j = i + 1;
                while at(j).is_some_and(is_ident_byte) {
                    j += 1;
                }
                tokens.push(Token {
                    kind: TokenKind::Identifier,
                    text: text(i..j),
                    line,
                });
                i = j;
            }
            c if c.is_ascii_whitespace() => i += 1,
            _ => {
                let rest: Vec<u8> = s[i..(i + 4).min(s.len())].iter().map(|c| c.0).collect();
                let len = PUNCTUATORS
                    .iter()
                    .find(|p| rest.starts_with(p.as_bytes()))
                    .map_or(1, |p| p.len());
                tokens.push(Token {
                    kind: TokenKind::Punctuator,
                    text: text(i..i + len),
                    line,
                });
                i += len;
            }
        }
    }
    tokens
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::task::tests_support::matmul_spec;

    const GOOD: &str = "#include <stdint.h>\nvoid matmul(const float *a, const float *b, float *c, int64_t m, int64_t n, int64_t k) {}\n";

    fn rules(src: &str) -> Vec<String> {
        check_candidate(&matmul_spec(), src)
            .into_iter()
            .map(|v| v.rule)
            .collect()
    }

    #[test]
    fn a_plain_candidate_passes() {
        assert!(rules(GOOD).is_empty());
    }

    #[test]
    fn each_rule_fires() {
        assert_eq!(rules("  \n"), ["empty"]);
        assert_eq!(
            rules(&format!("{GOOD}int main(void) {{ return 0; }}\n")),
            ["main"]
        );
        assert_eq!(
            rules(&format!("{GOOD}static int ksearch_x;\n")),
            ["reserved-name"]
        );
        assert_eq!(rules("void matmulx(void) {}"), ["entry-point"]);
        assert_eq!(
            rules(&format!("{GOOD}{}", " ".repeat(MAX_SOURCE_BYTES))),
            ["size"]
        );
        let v = check_candidate(&matmul_spec(), &format!("{GOOD}int main() {{}}"));
        assert_eq!(v[0].line, Some(3));
    }

    #[test]
    fn line_splicing_cannot_hide_a_name() {
        // Phase 2: a backslash-newline joins two lines into one, inside a name too.
        assert_eq!(
            rules(&format!("{GOOD}int ma\\\nin(void) {{ return 0; }}\n")),
            ["main"]
        );
        assert_eq!(
            rules(&format!("{GOOD}static int ksearch\\\n_x;\n")),
            ["reserved-name"]
        );
        // GCC splices with spaces (and a CR) between the backslash and the newline.
        assert_eq!(
            rules(&format!("{GOOD}int ma\\ \t\r\nin(void);\n")),
            ["main"]
        );
        // Several splices in a row, and one between a name and its `(`.
        assert_eq!(
            rules(&format!("{GOOD}int m\\\na\\\ni\\\nn\\\n(void);\n")),
            ["main"]
        );
        // The entry point itself may be spliced; the candidate then defines it.
        assert!(rules("#include <stdint.h>\nvoid mat\\\nmul(const float *a) {}\n").is_empty());
        // The violation points at the line where the name starts.
        let v = check_candidate(&matmul_spec(), &format!("{GOOD}\nint ma\\\nin(void);\n"));
        assert_eq!(v[0].line, Some(4));
    }

    #[test]
    fn trigraphs_are_read_as_the_characters_they_stand_for() {
        // `??/` is a backslash: followed by a newline it splices, as a compiler honouring
        // trigraphs would read it.
        assert_eq!(rules(&format!("{GOOD}int ma??/\nin(void);\n")), ["main"]);
        // `??=??=` is `##`.
        assert_eq!(
            rules(&format!("{GOOD}#define CAT(a, b) a ??=??= b\n")),
            ["token-pasting"]
        );
        // A lone `??` is not a trigraph.
        assert!(rules(&format!("{GOOD}/* what?? */ int x = 1 ?? 2;\n")).is_empty());
    }

    #[test]
    fn comments_split_tokens_and_never_hide_or_invent_one() {
        // A comment is one space: `main/**/(` is still a call of `main`.
        assert_eq!(rules(&format!("{GOOD}int main/**/(void);\n")), ["main"]);
        assert_eq!(
            rules(&format!("{GOOD}int main /* x */\n(void);\n")),
            ["main"]
        );
        // Names inside comments are not code: no false alarms.
        assert!(
            rules(&format!(
                "{GOOD}// no main() here, nor ksearch_x\n/* main( */\n"
            ))
            .is_empty()
        );
        // A `//` comment ending in a backslash swallows the next line, whatever it holds.
        assert!(rules(&format!("{GOOD}// comment \\\nint main(void);\n")).is_empty());
        // A comment between two halves makes two names, not `main`.
        assert!(rules(&format!("{GOOD}int ma/**/in;\n")).is_empty());
        // `//` inside a string is not a comment: what follows is still code.
        assert_eq!(
            rules(&format!(
                "{GOOD}const char *u = \"http://x\"; int main(void);\n"
            )),
            ["main"]
        );
        // The entry point found through a comment before its `(`.
        assert!(rules("void matmul/* here */(const float *a) {}\n").is_empty());
    }

    #[test]
    fn token_pasting_and_digraphs_are_refused() {
        // `##` can build any name from harmless pieces.
        let v = rules(&format!(
            "{GOOD}#define CAT(a, b) a ## b\nint CAT(ma, in)(void);\n"
        ));
        assert_eq!(v, ["token-pasting"]);
        // The digraph spelling of `##`, and of `#`.
        assert_eq!(
            rules(&format!("{GOOD}%:define CAT(a, b) a %:%: b\n")),
            ["token-pasting"]
        );
        // Other digraphs are ordinary punctuators.
        assert!(rules(&format!("{GOOD}static int t<:4:> = <%1, 2, 3, 4%>;\n")).is_empty());
        // A macro that names `main` is caught at the name.
        assert_eq!(
            rules(&format!("{GOOD}#define ENTRY main\nint ENTRY(void);\n")),
            ["main"]
        );
    }

    #[test]
    fn literals_and_numbers_are_tokens_of_their_own() {
        // In a string a harness symbol is still refused (`dlsym`, `asm` labels) …
        assert_eq!(
            rules(&format!("{GOOD}const char *s = \"ksearch_shim_call\";\n")),
            ["reserved-name"]
        );
        // … but `main` in a string or a character literal is just text.
        assert!(rules(&format!("{GOOD}const char *s = \"main(\"; char c = 'm';\n")).is_empty());
        // Longer names and numbers are other tokens.
        assert!(
            rules(&format!(
                "{GOOD}int mainly(void); int my_ksearch_x; double d = 1e-5main;\n"
            ))
            .is_empty()
        );
        assert!(rules(&format!("{GOOD}int σmain(void); int mainé = 1'000;\n")).is_empty());
        // An unterminated literal or comment ends the text without a panic.
        for tail in ["\"abc", "'", "/* open", "??", "\\", "ma\\"] {
            let _ = rules(&format!("{GOOD}{tail}"));
        }
    }
}

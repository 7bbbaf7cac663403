//! Checks made on a candidate's source before anything is compiled. A violation makes the
//! evaluation `rejected`, with a message the proposer can act on.
//!
//! These are the backend-independent basics; the knowledge layer adds data-driven rules.

use serde::{Deserialize, Serialize};

use crate::task::{BackendKind, TaskSpec};

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
    match spec.backend {
        BackendKind::C => check_c(spec, source, &mut out),
        BackendKind::Mlx => {
            let defines_run = source.lines().any(|l| {
                l.trim_start().starts_with("def run(") && !l.starts_with(char::is_whitespace)
            });
            if !defines_run {
                out.push(Violation {
                    rule: "entry-point".into(),
                    line: None,
                    message: "the candidate must define a top-level `def run(...)`".into(),
                });
            }
        }
    }
    out
}

fn check_c(spec: &TaskSpec, source: &str, out: &mut Vec<Violation>) {
    let mut defines_entry = false;
    for (i, line) in source.lines().enumerate() {
        let code = line.split("//").next().unwrap_or("");
        if code.contains("ksearch_") {
            out.push(Violation {
                rule: "reserved-name".into(),
                line: Some(i + 1),
                message: "names starting with `ksearch_` are reserved for the evaluation harness"
                    .into(),
            });
        }
        if contains_call(code, "main") {
            out.push(Violation {
                rule: "main".into(),
                line: Some(i + 1),
                message:
                    "define only the kernel function; the harness calls it, there is no `main`"
                        .into(),
            });
        }
        if contains_call(code, &spec.name) {
            defines_entry = true;
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

/// Whether `code` has `name` as a whole word followed by `(`.
fn contains_call(code: &str, name: &str) -> bool {
    let bytes = code.as_bytes();
    let mut start = 0;
    while let Some(pos) = code[start..].find(name) {
        let at = start + pos;
        let end = at + name.len();
        let before_ok =
            at == 0 || !(bytes[at - 1].is_ascii_alphanumeric() || bytes[at - 1] == b'_');
        let after = code[end..].trim_start();
        if before_ok && after.starts_with('(') {
            return true;
        }
        start = end;
    }
    false
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
}

//! Rules checked on every candidate before it is compiled (`knowledge/assertions/*.toml`).
//!
//! A rule is data: which platforms it applies to, which kind of check runs (the kinds are
//! implemented in [`crate::check`]), the kind's parameters, and the message the proposer reads.
//! Messages are templates: `{name}` is replaced by what the check found; each kind accepts the
//! placeholders in [`RuleKind::placeholders`], and the loader rejects any other.

use regex::Regex;
use serde::{Deserialize, Serialize};

use crate::platform::Platform;

/// One file: a list of `[[rule]]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RuleFile {
    #[serde(rename = "rule")]
    pub(crate) rules: Vec<RuleSpec>,
}

/// The checks implemented in Rust; rules choose one and give its parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RuleKind {
    /// Any of `tokens` (identifier-bounded; a token ending in `_` matches as a prefix).
    Token,
    /// A regular expression (`pattern`, Rust `regex` syntax).
    Regex,
    /// Constant-sized threadgroup/shared arrays declared in one kernel, summed, against a limit.
    ThreadgroupMemory,
    /// Declared threadgroup/block sizes against a limit.
    ThreadgroupSize,
    /// A barrier inside a branch or loop whose condition depends on the thread index.
    BarrierInBranch,
    /// A `return` under a thread-dependent condition before a barrier of the same kernel.
    ExitBeforeBarrier,
    /// An MLX `grid=` that looks like a threadgroup count.
    MlxGrid,
}

impl RuleKind {
    pub fn name(self) -> &'static str {
        match self {
            RuleKind::Token => "token",
            RuleKind::Regex => "regex",
            RuleKind::ThreadgroupMemory => "threadgroup-memory",
            RuleKind::ThreadgroupSize => "threadgroup-size",
            RuleKind::BarrierInBranch => "barrier-in-branch",
            RuleKind::ExitBeforeBarrier => "exit-before-barrier",
            RuleKind::MlxGrid => "mlx-grid",
        }
    }

    /// The `{placeholders}` a message of this kind may use.
    pub fn placeholders(self) -> &'static [&'static str] {
        match self {
            RuleKind::Token => &["token", "hint", "translation"],
            RuleKind::Regex => &["match"],
            RuleKind::ThreadgroupMemory => &["bytes", "limit", "limit_from", "detail"],
            RuleKind::ThreadgroupSize => &["threads", "limit", "limit_from", "expr"],
            RuleKind::BarrierInBranch => &["barrier", "condition", "condition_line", "var"],
            RuleKind::ExitBeforeBarrier => &["barrier", "barrier_line", "condition", "var"],
            RuleKind::MlxGrid => &["grid", "element", "divisor", "threadgroup"],
        }
    }
}

/// Which text of a candidate a rule reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Scope {
    /// The device code: a CUDA/Metal/C file without comments and string literals; for MLX the
    /// kernel sources held in Python string literals (without their comments).
    Kernel,
    /// MLX only: the Python code outside strings and comments.
    Python,
    /// MLX only: the body of the Python function named by `function`.
    Function,
}

/// A token to look for and what to say about it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TokenSpec {
    pub token: String,
    /// What to write instead.
    pub hint: String,
    /// A translation entry with the details.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub translation: Option<String>,
}

/// A rule as written; which fields are required depends on `kind` (the loader checks).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RuleSpec {
    pub id: String,
    pub kind: RuleKind,
    /// Platforms: `c`, `cuda`, `metal`, `mlx/metal`, `mlx/cuda`.
    pub applies_to: Vec<String>,
    /// One line for prompts: what the rule forbids.
    pub summary: String,
    /// The message of a violation (a template, see the module docs).
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// Default: `kernel`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<Scope>,
    /// `function` scope: the Python function's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub function: Option<String>,
    /// `token`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tokens: Vec<TokenSpec>,
    /// `regex`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pattern: Option<String>,
    /// `threadgroup-memory`: the address-space qualifiers that declare on-chip arrays
    /// (`threadgroup`, `__shared__`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub qualifiers: Vec<String>,
    /// `threadgroup-memory`, `threadgroup-size`: the hardware limit (an `on_chip` field).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<String>,
    /// The limit when no hardware is given or it does not publish the field.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fallback_limit: Option<u64>,
    /// `barrier-in-branch`, `exit-before-barrier`: the barrier functions.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub barriers: Vec<String>,
    /// `barrier-in-branch`, `exit-before-barrier`: identifiers that differ between the threads
    /// of one threadgroup; variables computed from them count too.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub thread_vars: Vec<String>,
}

/// A rule ready to run: its platforms parsed and its regular expressions compiled.
#[derive(Debug, Clone)]
pub struct Rule {
    pub spec: RuleSpec,
    pub platforms: Vec<Platform>,
    pub(crate) compiled: Compiled,
}

/// The regular expressions a rule needs, compiled once at load.
#[derive(Debug, Clone, Default)]
pub(crate) struct Compiled {
    /// `regex`: the rule's pattern.
    pub(crate) pattern: Option<Regex>,
    /// `threadgroup-memory`: any qualifier as a whole word.
    pub(crate) qualifiers: Option<Regex>,
    /// Barrier kinds: a kernel parameter bound to a thread variable (`uint lid [[…]]`).
    pub(crate) thread_params: Option<Regex>,
    /// `function` scope: the function's `def` line.
    pub(crate) function_def: Option<Regex>,
}

impl Compiled {
    /// Compile what `spec` needs; the error is the `pattern`'s.
    pub(crate) fn new(spec: &RuleSpec) -> Result<Compiled, String> {
        let pattern = spec
            .pattern
            .as_deref()
            .map(Regex::new)
            .transpose()
            .map_err(|e| format!("not a valid regex: {e}"))?;
        let words = |list: &[String]| -> Option<String> {
            (!list.is_empty()).then(|| {
                list.iter()
                    .map(|w| regex::escape(w))
                    .collect::<Vec<_>>()
                    .join("|")
            })
        };
        let qualifiers = words(&spec.qualifiers)
            .and_then(|alt| Regex::new(&format!(r"(?:^|[^A-Za-z0-9_])({alt})(?-u:\b)")).ok());
        let thread_params = words(&spec.thread_vars).and_then(|alt| {
            Regex::new(&format!(
                r"([A-Za-z_][A-Za-z0-9_]*)[ \t\r\n]*\[\[[ \t\r\n]*(?:{alt})[ \t\r\n]*\]\]"
            ))
            .ok()
        });
        let function_def = spec.function.as_deref().and_then(|name| {
            Regex::new(&format!(
                r"(?m)^([ \t]*)(?:async[ \t]+)?def[ \t]+{}[ \t]*\(",
                regex::escape(name)
            ))
            .ok()
        });
        Ok(Compiled {
            pattern,
            qualifiers,
            thread_params,
            function_def,
        })
    }
}

impl Rule {
    pub fn id(&self) -> &str {
        &self.spec.id
    }

    pub fn applies_to(&self, platform: Platform) -> bool {
        self.platforms.contains(&platform)
    }

    pub fn scope(&self) -> Scope {
        self.spec.scope.unwrap_or(Scope::Kernel)
    }
}

/// Fill `{name}` placeholders from `values`; unknown names stay as written.
pub(crate) fn fill(template: &str, values: &[(&str, String)]) -> String {
    let mut out = String::with_capacity(template.len() + 64);
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        match after.find('}') {
            Some(close) if is_placeholder(&after[..close]) => {
                let name = &after[..close];
                match values.iter().find(|(k, _)| *k == name) {
                    Some((_, v)) => out.push_str(v),
                    None => {
                        out.push('{');
                        out.push_str(name);
                        out.push('}');
                    }
                }
                rest = &after[close + 1..];
            }
            _ => {
                out.push('{');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

fn is_placeholder(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_lowercase() || b == b'_')
}

/// The placeholders a template uses.
pub(crate) fn placeholders_in(template: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        let after = &rest[open + 1..];
        match after.find('}') {
            Some(close) if is_placeholder(&after[..close]) => {
                out.push(&after[..close]);
                rest = &after[close + 1..];
            }
            _ => rest = after,
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn templates_fill() {
        let s = fill(
            "`{token}` is CUDA; use `{hint}` {nope} {not a name}",
            &[("token", "__syncthreads".into()), ("hint", "x".into())],
        );
        assert_eq!(s, "`__syncthreads` is CUDA; use `x` {nope} {not a name}");
        assert_eq!(placeholders_in("{a} {b_c} {D} {}"), ["a", "b_c"]);
    }
}

//! `ksearch import`: tasks from the benchmark suites kernel engineers use. Pure conversions (no
//! IO): a suite's files in, a task directory's files out, or an error naming the file and the
//! field that ksearch cannot express; the binary reads and writes.

pub mod flashinfer;
mod json;
pub mod kernelbench;

use ksearch_core::task::{TaskSpec, parse_task};
use thiserror::Error;

pub use json::Json;

/// Something in a suite's file that ksearch cannot express, or that is malformed: the file, the
/// field (a dotted path, or a line), and what.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{file}: {field}: {message}")]
pub struct ImportError {
    pub file: String,
    pub field: String,
    pub message: String,
}

impl ImportError {
    pub(crate) fn new(file: &str, field: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            file: file.to_owned(),
            field: field.into(),
            message: message.into(),
        }
    }
}

/// A task directory to write: its name and files (`task.toml` first), and notes for the user
/// (what was chosen where the suite was silent).
#[derive(Debug, Clone, PartialEq)]
pub struct TaskFiles {
    pub name: String,
    pub spec: TaskSpec,
    pub files: Vec<(String, String)>,
    pub notes: Vec<String>,
}

/// `task.toml` for `spec`, with a header saying where it came from, and the task as ksearch
/// reads it back (derived axes filled in): an import never writes a task ksearch would refuse.
pub(crate) fn task_toml(
    spec: &TaskSpec,
    header: &str,
    file: &str,
) -> Result<(String, TaskSpec), ImportError> {
    let body = toml::to_string(spec).map_err(|e| {
        ImportError::new(
            file,
            "(task)",
            format!("the task cannot be written as TOML: {e}"),
        )
    })?;
    let text = format!("{header}\n{body}");
    let parsed = parse_task(&text, "task.toml").map_err(|e| {
        ImportError::new(
            file,
            "(task)",
            format!("the task ksearch would write is not valid: {e}"),
        )
    })?;
    Ok((text, parsed))
}

/// `name` as an identifier: every other character becomes `_`, a leading digit gets a `_`.
pub(crate) fn identifier(name: &str) -> String {
    let mut s: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if s.is_empty() || s.starts_with(|c: char| c.is_ascii_digit()) {
        s.insert(0, '_');
    }
    s
}

//! Where in a TOML text a value lives, so errors can name file, line and column.

use std::fmt;

use serde::de::DeserializeOwned;
use thiserror::Error;
use toml::de::{DeTable, DeValue};

/// One step of a path into a TOML document: `workloads[1].axes.cols`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PathSeg {
    Key(String),
    Index(usize),
}

/// A dotted path into a document, written the way serde_path_to_error writes it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldPath(pub Vec<PathSeg>);

impl FieldPath {
    pub fn root() -> Self {
        Self(Vec::new())
    }

    #[must_use]
    pub fn key(&self, key: &str) -> Self {
        let mut segs = self.0.clone();
        segs.push(PathSeg::Key(key.to_owned()));
        Self(segs)
    }

    #[must_use]
    pub fn index(&self, index: usize) -> Self {
        let mut segs = self.0.clone();
        segs.push(PathSeg::Index(index));
        Self(segs)
    }
}

impl fmt::Display for FieldPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, seg) in self.0.iter().enumerate() {
            match seg {
                PathSeg::Key(k) if i == 0 => write!(f, "{k}")?,
                PathSeg::Key(k) => write!(f, ".{k}")?,
                PathSeg::Index(n) => write!(f, "[{n}]")?,
            }
        }
        Ok(())
    }
}

/// A 1-based line and column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LineCol {
    pub line: usize,
    pub column: usize,
}

impl fmt::Display for LineCol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.line, self.column)
    }
}

/// Line and column of a byte offset.
pub fn line_col(text: &str, offset: usize) -> LineCol {
    let offset = offset.min(text.len());
    let before = &text.as_bytes()[..offset];
    let line = before.iter().filter(|&&b| b == b'\n').count() + 1;
    let line_start = before
        .iter()
        .rposition(|&b| b == b'\n')
        .map_or(0, |p| p + 1);
    let column = String::from_utf8_lossy(&before[line_start..])
        .chars()
        .count()
        + 1;
    LineCol { line, column }
}

/// Where `path` is in `text`: the deepest part of the path that exists, so a missing key points
/// at the table that should hold it. `None` when the text does not parse.
pub fn locate(text: &str, path: &FieldPath) -> Option<LineCol> {
    let doc = DeTable::parse(text).ok()?;
    let mut span = None;
    let mut current = DeValue::Table(doc.into_inner());
    for seg in &path.0 {
        let next = match seg {
            PathSeg::Key(k) => current.get(k.as_str()),
            PathSeg::Index(i) => current.get(*i),
        };
        let Some(next) = next else { break };
        span = Some(next.span());
        current = next.get_ref().clone();
    }
    span.map(|s| line_col(text, s.start))
}

/// A TOML file that could not be read: where, which field, and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{file}{}: {}{message}", fmt_location(.location), fmt_field(.field))]
pub struct FileError {
    pub file: String,
    pub location: Option<LineCol>,
    /// The field at fault, e.g. `workloads[1].axes.cols`; empty for syntax errors.
    pub field: String,
    pub message: String,
}

fn fmt_location(location: &Option<LineCol>) -> String {
    location.map(|l| format!(":{l}")).unwrap_or_default()
}

fn fmt_field(field: &str) -> String {
    if field.is_empty() {
        String::new()
    } else {
        format!("field `{field}`: ")
    }
}

/// [`parse_toml`], then `validate`; a field `validate` refuses is reported at its line.
pub fn parse_checked<T: DeserializeOwned>(
    text: &str,
    file: &str,
    validate: impl FnOnce(&T) -> Result<(), (FieldPath, String)>,
) -> Result<T, FileError> {
    let value: T = parse_toml(text, file)?;
    validate(&value).map_err(|(field, message)| FileError {
        file: file.to_owned(),
        location: locate(text, &field),
        field: field.to_string(),
        message,
    })?;
    Ok(value)
}

/// [`parse_checked`] with a step between parsing and validation that may complete the value
/// (fill in what follows from the rest); its errors are located like the validation's.
pub fn parse_prepared<T: DeserializeOwned>(
    text: &str,
    file: &str,
    prepare: impl FnOnce(&mut T) -> Result<(), (FieldPath, String)>,
    validate: impl FnOnce(&T) -> Result<(), (FieldPath, String)>,
) -> Result<T, FileError> {
    let located = |(field, message): (FieldPath, String)| FileError {
        file: file.to_owned(),
        location: locate(text, &field),
        field: field.to_string(),
        message,
    };
    let mut value: T = parse_toml(text, file)?;
    prepare(&mut value).map_err(located)?;
    validate(&value).map_err(located)?;
    Ok(value)
}

/// Deserialize TOML into `T`; syntax errors, unknown keys (with `deny_unknown_fields`) and wrong
/// types come back with the file, line, column and field. `file` only names the file.
pub fn parse_toml<T: DeserializeOwned>(text: &str, file: &str) -> Result<T, FileError> {
    let de = toml::Deserializer::parse(text).map_err(|e| FileError {
        file: file.to_owned(),
        location: e.span().map(|s| line_col(text, s.start)),
        field: String::new(),
        message: e.message().trim().to_owned(),
    })?;
    serde_path_to_error::deserialize(de).map_err(|e| {
        let field = parse_serde_path(&e.path().to_string());
        let location = e
            .inner()
            .span()
            .map(|s| line_col(text, s.start))
            .or_else(|| locate(text, &field));
        FileError {
            file: file.to_owned(),
            location,
            field: field.to_string(),
            message: e.inner().message().trim().to_owned(),
        }
    })
}

/// Parse a serde path as serde_path_to_error prints it (`a.b[2].c`) back into segments.
pub(crate) fn parse_serde_path(text: &str) -> FieldPath {
    let mut segs = Vec::new();
    for part in text.split('.') {
        let mut rest = part;
        if let Some(open) = rest.find('[') {
            if open > 0 {
                segs.push(PathSeg::Key(rest[..open].to_owned()));
            }
            rest = &rest[open..];
            while let Some(stripped) = rest.strip_prefix('[') {
                let Some(close) = stripped.find(']') else {
                    break;
                };
                if let Ok(n) = stripped[..close].parse() {
                    segs.push(PathSeg::Index(n));
                }
                rest = &stripped[close + 1..];
            }
        } else if !rest.is_empty() && rest != "?" {
            segs.push(PathSeg::Key(rest.to_owned()));
        }
    }
    FieldPath(segs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_col_counts_from_one() {
        let text = "a = 1\nbb = 2\n";
        assert_eq!(line_col(text, 0), LineCol { line: 1, column: 1 });
        assert_eq!(line_col(text, 6), LineCol { line: 2, column: 1 });
        assert_eq!(line_col(text, 11), LineCol { line: 2, column: 6 });
    }

    #[test]
    fn locate_finds_nested_array_of_tables() {
        let text = "name = \"x\"\n[[w]]\nv = 1\n[[w]]\nv = 2\nz = { q = 3 }\n";
        let path = FieldPath::root().key("w").index(1).key("z").key("q");
        assert_eq!(
            locate(text, &path),
            Some(LineCol {
                line: 6,
                column: 11
            })
        );
        // A missing key points at its parent.
        let missing = FieldPath::root().key("w").index(0).key("nope");
        assert_eq!(locate(text, &missing).map(|l| l.line), Some(2));
    }

    #[test]
    fn serde_paths_round_trip() {
        let p = parse_serde_path("workloads[1].axes.cols");
        assert_eq!(p.to_string(), "workloads[1].axes.cols");
        assert_eq!(parse_serde_path("?").0, vec![]);
    }
}

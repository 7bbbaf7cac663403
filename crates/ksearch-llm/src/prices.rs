//! What calls cost: a table of USD per million tokens by model spec.

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;

use serde::{Deserialize, Serialize};
use toml::de::{DeTable, DeValue};

use crate::spec::{ModelSpec, Provider};
use crate::types::Usage;

const BUILTIN: &str = include_str!("../data/prices.toml");
const BUILTIN_FILE: &str = "ksearch-llm/data/prices.toml (built in)";

/// The price of one model, USD per million tokens.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelPrice {
    /// Prompt tokens not read from the cache.
    pub input_per_mtok: f64,
    /// Generated tokens, reasoning included.
    pub output_per_mtok: f64,
    /// Prompt tokens read from the cache; `None`: the input price.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_input_per_mtok: Option<f64>,
    /// Prompt tokens written to the cache (Anthropic: 1.25 times the input price for its
    /// 5-minute cache); `None`: the input price (OpenAI and Gemini charge nothing extra).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_write_per_mtok: Option<f64>,
    /// Where the numbers come from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// When they were read, `YYYY-MM-DD`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub as_of: Option<String>,
}

impl ModelPrice {
    /// The cost of `usage` at this price: `input - cached - written` at the input price,
    /// `cached` at the cached price, `written` (cache writes) at the cache-write price, `output`
    /// (reasoning included) at the output price.
    pub fn cost_usd(&self, usage: &Usage) -> f64 {
        let cached = usage.cached_input_tokens.min(usage.input_tokens);
        let written = usage.cache_write_tokens.min(usage.input_tokens - cached);
        let fresh = usage.input_tokens - cached - written;
        let cached_price = self.cached_input_per_mtok.unwrap_or(self.input_per_mtok);
        let write_price = self.cache_write_per_mtok.unwrap_or(self.input_per_mtok);
        (fresh as f64 * self.input_per_mtok
            + cached as f64 * cached_price
            + written as f64 * write_price
            + usage.output_tokens as f64 * self.output_per_mtok)
            / 1_000_000.0
    }
}

/// A price table file that could not be used: where, which field, and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct PriceError {
    /// The file, as named by the caller.
    pub file: String,
    /// 1-based line and column, when known.
    pub location: Option<(usize, usize)>,
    /// The field at fault (`"openai:gpt-5".input_per_mtok`); empty for syntax errors.
    pub field: String,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for PriceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file)?;
        if let Some((line, column)) = self.location {
            write!(f, ":{line}:{column}")?;
        }
        if !self.field.is_empty() {
            write!(f, ": field `{}`", self.field)?;
        }
        write!(f, ": {}", self.message)
    }
}

/// Prices by model spec (`openai:gpt-5`). Load the built-in table, a file, or both merged.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PriceTable {
    models: BTreeMap<String, ModelPrice>,
}

impl PriceTable {
    /// The table shipped with ksearch (`data/prices.toml`).
    pub fn builtin() -> PriceTable {
        match PriceTable::from_toml(BUILTIN, BUILTIN_FILE) {
            Ok(table) => table,
            // The built-in file is checked by this crate's tests.
            Err(error) => panic!("the built-in price table is invalid: {error}"),
        }
    }

    /// A table from TOML text: one table per model spec, e.g.
    ///
    /// ```toml
    /// ["openai:gpt-5"]
    /// input_per_mtok = 1.25
    /// cached_input_per_mtok = 0.125
    /// output_per_mtok = 10.0
    /// source = "developers.openai.com/api/docs/pricing"
    /// as_of = "2026-11-30"
    /// ```
    ///
    /// Unknown keys, non-numeric or negative prices, and table names that are not model specs
    /// are errors naming `file`, the line and the field.
    pub fn from_toml(text: &str, file: &str) -> Result<PriceTable, PriceError> {
        let error = |location, field: String, message: String| PriceError {
            file: file.to_string(),
            location,
            field,
            message,
        };
        let deserializer = toml::Deserializer::parse(text).map_err(|e| {
            error(
                e.span().map(|s| line_col(text, s.start)),
                String::new(),
                e.message().trim().to_string(),
            )
        })?;
        let models: BTreeMap<String, ModelPrice> = serde_path_to_error::deserialize(deserializer)
            .map_err(|e| {
            let segments = path_segments(e.path());
            let location = e
                .inner()
                .span()
                .map(|s| line_col(text, s.start))
                .or_else(|| locate(text, &segments));
            error(
                location,
                display_path(&segments),
                e.inner().message().trim().to_string(),
            )
        })?;
        for (key, price) in &models {
            let at = |field: &str| locate(text, &[key.clone(), field.to_string()]);
            if let Err(e) = key.parse::<ModelSpec>() {
                return Err(error(
                    locate(text, std::slice::from_ref(key)),
                    display_path(std::slice::from_ref(key)),
                    format!("the table name must be a model spec: {e}"),
                ));
            }
            let prices = [
                ("input_per_mtok", Some(price.input_per_mtok)),
                ("output_per_mtok", Some(price.output_per_mtok)),
                ("cached_input_per_mtok", price.cached_input_per_mtok),
                ("cache_write_per_mtok", price.cache_write_per_mtok),
            ];
            for (field, value) in prices {
                if let Some(value) = value
                    && !(value.is_finite() && value >= 0.0)
                {
                    return Err(error(
                        at(field),
                        display_path(&[key.clone(), field.to_string()]),
                        format!("a price must be a finite number >= 0, not {value}"),
                    ));
                }
            }
        }
        Ok(PriceTable { models })
    }

    /// A table from a file (see [`PriceTable::from_toml`]).
    pub fn load(path: &Path) -> Result<PriceTable, PriceError> {
        let file = path.display().to_string();
        // std's, not fs-err's: the error names the file already.
        let text = std::fs::read_to_string(path).map_err(|e| PriceError {
            file: file.clone(),
            location: None,
            field: String::new(),
            message: format!("cannot read: {e}"),
        })?;
        PriceTable::from_toml(&text, &file)
    }

    /// This table with every entry of `overrides` added, replacing entries of the same model.
    #[must_use]
    pub fn merged(&self, overrides: &PriceTable) -> PriceTable {
        let mut models = self.models.clone();
        models.extend(overrides.models.iter().map(|(k, v)| (k.clone(), v.clone())));
        PriceTable { models }
    }

    /// Adds or replaces one model's price.
    pub fn insert(&mut self, spec: &ModelSpec, price: ModelPrice) {
        self.models.insert(spec.to_string(), price);
    }

    /// The price of `spec`: its own entry, else (for `openai-responses:`) the `openai:` entry of
    /// the same model, else the same lookups with a trailing snapshot date removed
    /// (`-20250929`, `-2025-04-14`).
    pub fn get(&self, spec: &ModelSpec) -> Option<&ModelPrice> {
        let mut models = vec![spec.model.as_str()];
        if let Some(alias) = strip_date_suffix(&spec.model) {
            models.push(alias);
        }
        let mut providers = vec![spec.provider];
        if spec.provider == Provider::OpenAiResponses {
            providers.push(Provider::OpenAiChat);
        }
        models.iter().find_map(|model| {
            providers.iter().find_map(|provider| {
                self.models
                    .get(&ModelSpec::new(*provider, *model).to_string())
            })
        })
    }

    /// What `usage` cost on `spec`, in USD; `None` when the table has no price for it.
    pub fn cost_usd(&self, spec: &ModelSpec, usage: &Usage) -> Option<f64> {
        self.get(spec).map(|price| price.cost_usd(usage))
    }

    /// Every entry, by model spec text.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &ModelPrice)> {
        self.models.iter().map(|(k, v)| (k.as_str(), v))
    }

    /// Number of models priced.
    pub fn len(&self) -> usize {
        self.models.len()
    }

    /// Whether no model is priced.
    pub fn is_empty(&self) -> bool {
        self.models.is_empty()
    }
}

/// `claude-sonnet-4-5-20250929` → `claude-sonnet-4-5`; `gpt-4.1-2025-04-14` → `gpt-4.1`.
fn strip_date_suffix(model: &str) -> Option<&str> {
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if let Some((head, tail)) = model.rsplit_once('-')
        && tail.len() == 8
        && digits(tail)
    {
        return Some(head);
    }
    let mut parts = model.rsplitn(4, '-');
    let (day, month, year, head) = (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
    (year.len() == 4
        && month.len() == 2
        && day.len() == 2
        && digits(year)
        && digits(month)
        && digits(day))
    .then_some(head)
}

/// serde_path_to_error's path as table key and field names (a model id may hold dots, so the
/// printed path cannot be split on them).
fn path_segments(path: &serde_path_to_error::Path) -> Vec<String> {
    path.iter()
        .filter_map(|segment| match segment {
            serde_path_to_error::Segment::Map { key } => Some(key.clone()),
            serde_path_to_error::Segment::Seq { index } => Some(index.to_string()),
            serde_path_to_error::Segment::Enum { variant } => Some(variant.clone()),
            serde_path_to_error::Segment::Unknown => None,
        })
        .collect()
}

fn display_path(segments: &[String]) -> String {
    match segments {
        [] => String::new(),
        [key] => format!("\"{key}\""),
        [key, rest @ ..] => format!("\"{key}\".{}", rest.join(".")),
    }
}

/// 1-based line and column of a byte offset.
fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let offset = offset.min(text.len());
    let before = &text[..text.floor_char_boundary(offset)];
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, column)
}

/// Where the deepest existing part of `segments` is in `text`.
fn locate(text: &str, segments: &[String]) -> Option<(usize, usize)> {
    let doc = DeTable::parse(text).ok()?;
    let mut span = None;
    let mut current = DeValue::Table(doc.into_inner());
    for segment in segments {
        let Some(next) = current.get(segment.as_str()) else {
            break;
        };
        span = Some(next.span());
        current = next.get_ref().clone();
    }
    span.map(|s| line_col(text, s.start))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn date_suffixes() {
        assert_eq!(
            strip_date_suffix("claude-sonnet-4-5-20250929"),
            Some("claude-sonnet-4-5")
        );
        assert_eq!(strip_date_suffix("gpt-4.1-2025-04-14"), Some("gpt-4.1"));
        assert_eq!(strip_date_suffix("gpt-5"), None);
        assert_eq!(strip_date_suffix("gemini-2.5-pro"), None);
        assert_eq!(strip_date_suffix("o4-mini"), None);
    }

    #[test]
    fn builtin_parses_and_every_entry_is_dated() {
        let table = PriceTable::builtin();
        assert!(table.len() >= 12);
        for (key, price) in table.iter() {
            assert!(price.source.is_some(), "{key} has no source");
            assert!(price.as_of.is_some(), "{key} has no date");
            assert!(price.output_per_mtok >= price.input_per_mtok, "{key}");
        }
        for provider in ["openai:", "gemini:", "anthropic:"] {
            assert!(
                table
                    .iter()
                    .filter(|(k, _)| k.starts_with(provider))
                    .count()
                    >= 4
            );
        }
    }
}

//! Which provider and model: `openai:gpt-5`, `gemini:gemini-2.5-pro`, ...

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::error::LlmError;

/// A wire format, with the provider that defines it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Provider {
    /// OpenAI Chat Completions (`POST {base}/chat/completions`); also every OpenAI-compatible
    /// server (vLLM, Ollama, llama.cpp, LM Studio, OpenRouter, ...).
    OpenAiChat,
    /// OpenAI Responses (`POST {base}/responses`).
    OpenAiResponses,
    /// Google Gemini API, native `generateContent`.
    Gemini,
    /// Anthropic Messages API.
    Anthropic,
    /// Any command: the prompt on its stdin, the answer on its stdout (`exec:'llm -m gpt-4o'`).
    /// The "model" is the command line, run by `sh -c`.
    Exec,
    /// A person or a coding agent answering prompt files in the run directory (`manual`, or
    /// `manual:LABEL` to name who answers). See `manual`.
    Manual,
}

impl Provider {
    /// Every provider reached over HTTP, in the order the spec prefixes are listed in messages
    /// ([`Provider::Exec`] comes after them).
    pub const ALL: [Provider; 4] = [
        Provider::OpenAiChat,
        Provider::OpenAiResponses,
        Provider::Gemini,
        Provider::Anthropic,
    ];

    /// The prefix of a model spec, without the colon: `openai`, `openai-responses`, `gemini`,
    /// `anthropic`. Also how the provider is displayed.
    pub fn prefix(self) -> &'static str {
        match self {
            Provider::OpenAiChat => "openai",
            Provider::OpenAiResponses => "openai-responses",
            Provider::Gemini => "gemini",
            Provider::Anthropic => "anthropic",
            Provider::Exec => "exec",
            Provider::Manual => "manual",
        }
    }

    /// The environment variable the key is read from when `ClientSettings::api_key` is `None`
    /// (none for a command, which finds its own).
    pub fn key_variable(self) -> &'static str {
        match self {
            Provider::OpenAiChat | Provider::OpenAiResponses => "OPENAI_API_KEY",
            Provider::Gemini => "GEMINI_API_KEY",
            Provider::Anthropic => "ANTHROPIC_API_KEY",
            Provider::Exec | Provider::Manual => "",
        }
    }

    /// The variable that overrides the default base URL, where the provider has one
    /// (`OPENAI_BASE_URL` for both OpenAI wire formats).
    pub fn base_url_variable(self) -> Option<&'static str> {
        match self {
            Provider::OpenAiChat | Provider::OpenAiResponses => Some("OPENAI_BASE_URL"),
            Provider::Gemini | Provider::Anthropic | Provider::Exec | Provider::Manual => None,
        }
    }

    /// The official endpoint, used when neither the client settings nor the environment names one
    /// (empty for a command).
    pub fn default_base_url(self) -> &'static str {
        match self {
            Provider::OpenAiChat | Provider::OpenAiResponses => "https://api.openai.com/v1",
            Provider::Gemini => "https://generativelanguage.googleapis.com",
            Provider::Anthropic => "https://api.anthropic.com",
            Provider::Exec | Provider::Manual => "",
        }
    }

    /// A human name for messages: "OpenAI Chat Completions", "Gemini", ...
    pub fn display_name(self) -> &'static str {
        match self {
            Provider::OpenAiChat => "OpenAI Chat Completions",
            Provider::OpenAiResponses => "OpenAI Responses",
            Provider::Gemini => "Gemini",
            Provider::Anthropic => "Anthropic",
            Provider::Exec => "a command",
            Provider::Manual => "manual answers",
        }
    }

    fn from_prefix(prefix: &str) -> Option<Provider> {
        Provider::ALL
            .into_iter()
            .chain([Provider::Exec, Provider::Manual])
            .find(|p| p.prefix().eq_ignore_ascii_case(prefix))
    }
}

impl fmt::Display for Provider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.prefix())
    }
}

/// A provider and a model id, written `PROVIDER:MODEL` (`openai:gpt-5`,
/// `openai-responses:o3`, `gemini:gemini-2.5-pro`, `anthropic:claude-sonnet-4-5`).
///
/// The model id is everything after the first colon, so Ollama-style ids with a colon work:
/// `openai:qwen2.5-coder:32b`. Serialised as that same string.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ModelSpec {
    /// The wire format.
    pub provider: Provider,
    /// The model id as the provider knows it.
    pub model: String,
}

impl ModelSpec {
    /// A spec from its parts.
    pub fn new(provider: Provider, model: impl Into<String>) -> ModelSpec {
        ModelSpec {
            provider,
            model: model.into(),
        }
    }
}

fn expected_prefixes() -> String {
    Provider::ALL
        .iter()
        .chain(&[Provider::Exec, Provider::Manual])
        .map(|p| format!("`{}:`", p.prefix()))
        .collect::<Vec<_>>()
        .join(", ")
}

impl FromStr for ModelSpec {
    type Err = LlmError;

    fn from_str(text: &str) -> Result<ModelSpec, LlmError> {
        let text = text.trim();
        let invalid = |detail: String| LlmError::InvalidSpec {
            spec: text.to_string(),
            detail,
        };
        // `manual` alone: answers come from files, and no one is named.
        if text.eq_ignore_ascii_case(Provider::Manual.prefix()) {
            return Ok(ModelSpec::new(Provider::Manual, ""));
        }
        let Some((prefix, model)) = text.split_once(':') else {
            return Err(invalid(format!(
                "expected PROVIDER:MODEL with PROVIDER one of {} (e.g. `openai:gpt-5`)",
                expected_prefixes()
            )));
        };
        let Some(provider) = Provider::from_prefix(prefix.trim()) else {
            return Err(invalid(format!(
                "unknown provider `{}`; expected one of {}",
                prefix.trim(),
                expected_prefixes()
            )));
        };
        let model = model.trim();
        if model.is_empty() {
            return Err(invalid(format!(
                "the model id after `{}:` is empty",
                provider.prefix()
            )));
        }
        // A command line has spaces; a model id has none.
        if provider == Provider::Exec {
            if model.chars().any(char::is_control) {
                return Err(invalid(
                    "the command contains control characters (a newline, say)".to_string(),
                ));
            }
        } else if model.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(invalid(
                "the model id contains whitespace or control characters".to_string(),
            ));
        }
        Ok(ModelSpec::new(provider, model))
    }
}

impl fmt::Display for ModelSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.model.is_empty() {
            // Only `manual` has no model id.
            return f.write_str(self.provider.prefix());
        }
        write!(f, "{}:{}", self.provider.prefix(), self.model)
    }
}

impl Serialize for ModelSpec {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for ModelSpec {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<ModelSpec, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn colon_in_model_id_is_kept() {
        let spec: ModelSpec = "openai:qwen2.5-coder:32b".parse().unwrap();
        assert_eq!(spec.provider, Provider::OpenAiChat);
        assert_eq!(spec.model, "qwen2.5-coder:32b");
        assert_eq!(spec.to_string(), "openai:qwen2.5-coder:32b");
    }

    #[test]
    fn prefix_is_case_insensitive_and_display_normalises() {
        let spec: ModelSpec = " Gemini:gemini-2.5-pro ".parse().unwrap();
        assert_eq!(spec.to_string(), "gemini:gemini-2.5-pro");
    }

    #[test]
    fn a_command_is_a_model() {
        let spec: ModelSpec = "exec:llm -m gpt-4o --no-stream".parse().unwrap();
        assert_eq!(spec.provider, Provider::Exec);
        assert_eq!(spec.model, "llm -m gpt-4o --no-stream");
        assert_eq!(spec.to_string(), "exec:llm -m gpt-4o --no-stream");
        assert!("exec:".parse::<ModelSpec>().is_err());
        assert!("exec:a\nb".parse::<ModelSpec>().is_err());
        assert!("openai:gpt 5".parse::<ModelSpec>().is_err());
        let e = "nope:x".parse::<ModelSpec>().unwrap_err().to_string();
        assert!(e.contains("`exec:`"), "{e}");
    }

    #[test]
    fn manual_takes_an_optional_label() {
        let spec: ModelSpec = "manual".parse().unwrap();
        assert_eq!(spec, ModelSpec::new(Provider::Manual, ""));
        assert_eq!(spec.to_string(), "manual");
        let spec: ModelSpec = "manual:claude-code".parse().unwrap();
        assert_eq!(spec.provider, Provider::Manual);
        assert_eq!(spec.to_string(), "manual:claude-code");
        assert!("manual:two words".parse::<ModelSpec>().is_err());
        let back: ModelSpec = serde_json::from_str("\"manual\"").unwrap();
        assert_eq!(back.provider, Provider::Manual);
    }

    #[test]
    fn serde_as_string() {
        let spec: ModelSpec = "anthropic:claude-haiku-4-5".parse().unwrap();
        let json = serde_json::to_string(&spec).unwrap();
        assert_eq!(json, "\"anthropic:claude-haiku-4-5\"");
        let back: ModelSpec = serde_json::from_str(&json).unwrap();
        assert_eq!(back, spec);
        assert!(serde_json::from_str::<ModelSpec>("\"nope:x\"").is_err());
    }
}

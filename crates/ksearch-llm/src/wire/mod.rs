//! The four wire formats: the request body each provider expects and how its answer is read.

pub(crate) mod anthropic;
pub(crate) mod gemini;
pub(crate) mod openai_chat;
pub(crate) mod openai_responses;

use serde::de::DeserializeOwned;

use crate::http::truncate;
use crate::types::{Message, MessageRole, Usage};

/// What a provider's success body says, before the client adds the attempt count.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Parsed {
    pub(crate) text: String,
    pub(crate) usage: Usage,
    pub(crate) model: Option<String>,
    pub(crate) finish_reason: Option<String>,
}

/// Parses `body` as `T`, or says where and why it does not fit (with the start of the body).
pub(crate) fn parse_body<T: DeserializeOwned>(body: &str) -> Result<T, String> {
    let mut deserializer = serde_json::Deserializer::from_str(body);
    serde_path_to_error::deserialize(&mut deserializer).map_err(|error| {
        let snippet = truncate(body.trim(), 200);
        let inner = error.inner();
        if inner.is_syntax() || inner.is_eof() {
            format!("the body is not JSON ({inner}); it starts `{snippet}`")
        } else {
            let path = error.path().to_string();
            format!("unexpected shape at `{path}`: {inner}; the body starts `{snippet}`")
        }
    })
}

/// Every system message's text, in order, joined by a blank line; `None` when there is none.
pub(crate) fn joined_system(messages: &[Message]) -> Option<String> {
    let parts: Vec<&str> = messages
        .iter()
        .filter(|m| m.role == MessageRole::System)
        .map(|m| m.content.as_str())
        .collect();
    (!parts.is_empty()).then(|| parts.join("\n\n"))
}

/// The messages that are not system messages.
pub(crate) fn conversation(messages: &[Message]) -> impl Iterator<Item = &Message> {
    messages.iter().filter(|m| m.role != MessageRole::System)
}

/// A temperature as JSON, written as the shortest decimal of the `f32` (0.2, not
/// 0.20000000298023224).
pub(crate) fn temperature_json(t: f32) -> serde_json::Value {
    t.to_string()
        .parse::<f64>()
        .ok()
        .and_then(serde_json::Number::from_f64)
        .map_or(serde_json::Value::Null, serde_json::Value::Number)
}

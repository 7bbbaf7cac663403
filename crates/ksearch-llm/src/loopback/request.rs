//! What the server records of a request.

use serde_json::Value;

/// One request as the server received it.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordedRequest {
    /// `POST`, ...
    pub method: String,
    /// Path and query, e.g. `/v1/messages`.
    pub path: String,
    /// Headers in arrival order, names lowercased.
    pub headers: Vec<(String, String)>,
    /// The body as JSON; `Null` when empty, a JSON string when it is not JSON.
    pub body: Value,
}

impl RecordedRequest {
    /// The value of header `name` (any case), the first when repeated.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The text of the last user message, whatever the wire format (Chat `messages`, Responses
    /// `input`, Gemini `contents`, Anthropic `messages`): what an end-to-end test answers to.
    pub fn last_user_text(&self) -> Option<String> {
        let text_of = |content: &Value| -> Option<String> {
            match content {
                Value::String(s) => Some(s.clone()),
                Value::Array(parts) => Some(
                    parts
                        .iter()
                        .filter_map(|p| p.get("text").and_then(Value::as_str))
                        .collect(),
                ),
                _ => None,
            }
        };
        if let Some(contents) = self.body.get("contents").and_then(Value::as_array) {
            return contents
                .iter()
                .rev()
                .find(|c| c.get("role").and_then(Value::as_str) == Some("user"))
                .and_then(|c| c.get("parts"))
                .and_then(text_of);
        }
        let items = match self.body.get("input") {
            Some(Value::String(s)) => return Some(s.clone()),
            Some(Value::Array(items)) => items,
            _ => self.body.get("messages").and_then(Value::as_array)?,
        };
        items
            .iter()
            .rev()
            .find(|m| m.get("role").and_then(Value::as_str) == Some("user"))
            .and_then(|m| m.get("content"))
            .and_then(text_of)
    }
}

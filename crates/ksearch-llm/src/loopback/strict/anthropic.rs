//! Anthropic Messages, as Anthropic refuses them.

use serde_json::Value;

use super::{Checked, Rejection, object};
use crate::loopback::RecordedRequest;
use crate::spec::Provider;

const ANTHROPIC_FIELDS: &[&str] = &[
    "container",
    "context_management",
    "max_tokens",
    "mcp_servers",
    "messages",
    "metadata",
    "model",
    "service_tier",
    "stop_sequences",
    "stream",
    "system",
    "temperature",
    "thinking",
    "tool_choice",
    "tools",
    "top_k",
    "top_p",
];

fn anthropic_error(status: u16, message: String) -> Rejection {
    Rejection {
        provider: Provider::Anthropic,
        status,
        message,
        param: None,
        code: None,
    }
}

/// Claude models with extended thinking: 3.7 Sonnet and every model from Claude 4 on.
fn anthropic_thinks(model: &str) -> bool {
    let m = model.to_ascii_lowercase();
    let before_3_7 = m.starts_with("claude-2") || m.starts_with("claude-3-");
    !before_3_7 || m.starts_with("claude-3-7")
}

/// The texts of a content value (a string, or the `text` of text blocks).
fn texts(content: &Value) -> Vec<&str> {
    match content {
        Value::String(s) => vec![s.as_str()],
        Value::Array(blocks) => blocks
            .iter()
            .filter(|b| b.get("type").and_then(Value::as_str) == Some("text"))
            .map(|b| b.get("text").and_then(Value::as_str).unwrap_or(""))
            .collect(),
        _ => Vec::new(),
    }
}

pub(super) fn check(request: &RecordedRequest) -> Checked {
    let err = |message: String| Err(anthropic_error(400, message));
    if request.header("x-api-key").is_none_or(str::is_empty) {
        return Err(anthropic_error(401, "x-api-key header is required".into()));
    }
    if request.header("anthropic-version").is_none() {
        return err("anthropic-version: header is required".into());
    }
    let Some(body) = object(request) else {
        return err("There was an issue with your request body: it is not a JSON object".into());
    };
    if let Some(unknown) = body
        .keys()
        .find(|k| !ANTHROPIC_FIELDS.contains(&k.as_str()))
    {
        return err(format!("{unknown}: Extra inputs are not permitted"));
    }
    for field in ["model", "max_tokens", "messages"] {
        if !body.contains_key(field) {
            return err(format!("{field}: Field required"));
        }
    }
    let model = body["model"].as_str().unwrap_or("");
    let Some(max_tokens) = body["max_tokens"].as_u64().filter(|n| *n >= 1) else {
        return err("max_tokens: Input should be greater than or equal to 1".into());
    };
    let Some(messages) = body["messages"].as_array().filter(|m| !m.is_empty()) else {
        return err("messages: at least one message is required".into());
    };
    for (i, m) in messages.iter().enumerate() {
        let role = m.get("role").and_then(Value::as_str).unwrap_or("");
        if !["user", "assistant"].contains(&role) {
            return err(format!(
                "messages.{i}.role: Input should be 'user' or 'assistant'"
            ));
        }
        let content = m.get("content").unwrap_or(&Value::Null);
        let last_assistant = role == "assistant" && i + 1 == messages.len();
        let parts = texts(content);
        let empty = parts.iter().any(|t| t.is_empty()) || (parts.is_empty() && !content.is_array());
        // Only a final assistant turn may be empty (a prefill).
        if empty && !(last_assistant && content.as_str() == Some("")) {
            return err(format!(
                "messages.{i}: text content blocks must be non-empty"
            ));
        }
        if last_assistant
            && parts
                .last()
                .is_some_and(|t| t.ends_with(char::is_whitespace))
        {
            return err("final assistant content cannot end with trailing whitespace".into());
        }
    }
    if let Some(system) = body.get("system")
        && texts(system).iter().any(|t| t.is_empty())
    {
        return err("system: text content blocks must be non-empty".into());
    }
    let temperature = body.get("temperature").and_then(Value::as_f64);
    if temperature.is_some_and(|t| !(0.0..=1.0).contains(&t)) {
        return err("temperature: Input should be less than or equal to 1".into());
    }
    let Some(thinking) = body.get("thinking") else {
        return Ok(());
    };
    match thinking.get("type").and_then(Value::as_str) {
        Some("disabled") => Ok(()),
        Some("enabled") => {
            if !anthropic_thinks(model) {
                return err(format!(
                    "'{model}' does not support thinking: remove `thinking` from the request"
                ));
            }
            let budget = thinking.get("budget_tokens").and_then(Value::as_u64);
            let Some(budget) = budget.filter(|b| *b >= 1024) else {
                return err(
                    "thinking.enabled.budget_tokens: Input should be greater than or equal to 1024"
                        .into(),
                );
            };
            if max_tokens <= budget {
                return err("`max_tokens` must be greater than `thinking.budget_tokens`".into());
            }
            if temperature.is_some_and(|t| (t - 1.0).abs() > 1e-9) {
                return err("`temperature` may only be set to 1 when thinking is enabled".into());
            }
            if body.contains_key("top_k") {
                return err("`top_k` is not supported when thinking is enabled".into());
            }
            Ok(())
        }
        _ => err(
            "thinking: Input tag does not match any of the expected tags: 'enabled', 'disabled'"
                .into(),
        ),
    }
}

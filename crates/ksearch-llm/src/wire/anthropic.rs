//! Anthropic Messages (`POST {base}/v1/messages`, `anthropic-version: 2023-06-01`).
//!
//! Request: `{model, max_tokens (required; 8192 when the request sets none), system?, messages:
//! [{role: user|assistant, content}], temperature?}`. Answer: the `text` blocks of `content`
//! (thinking blocks are skipped); `stop_reason`. Usage: Anthropic's `input_tokens` counts only
//! the tokens after the last cache breakpoint, so input = `input_tokens +
//! cache_creation_input_tokens + cache_read_input_tokens`, cached = `cache_read_input_tokens`.
//! Cache writes are billed at the plain input price here (Anthropic charges 1.25× for 5-minute
//! writes; ksearch sets no cache breakpoints, so it sees none). Thinking tokens are inside
//! `output_tokens` and not reported apart: reasoning = 0.

use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::{Parsed, conversation, joined_system, parse_body, temperature_json};
use crate::types::{CompletionRequest, MessageRole, Usage};

pub(crate) const PATH: &str = "/v1/messages";
pub(crate) const VERSION: &str = "2023-06-01";
pub(crate) const DEFAULT_MAX_TOKENS: u32 = 8192;

pub(crate) fn request_body(model: &str, request: &CompletionRequest) -> Value {
    let messages: Vec<Value> = conversation(&request.messages)
        .map(|m| {
            let role = match m.role {
                MessageRole::Assistant => "assistant",
                MessageRole::User | MessageRole::System => "user",
            };
            json!({"role": role, "content": m.content})
        })
        .collect();
    let mut body = Map::new();
    body.insert("model".into(), json!(model));
    body.insert(
        "max_tokens".into(),
        json!(request.max_output_tokens.unwrap_or(DEFAULT_MAX_TOKENS)),
    );
    if let Some(system) = joined_system(&request.messages) {
        body.insert("system".into(), json!(system));
    }
    body.insert("messages".into(), Value::Array(messages));
    if let Some(t) = request.temperature {
        body.insert("temperature".into(), temperature_json(t));
    }
    Value::Object(body)
}

#[derive(Deserialize)]
struct Response {
    model: Option<String>,
    content: Vec<Block>,
    stop_reason: Option<String>,
    usage: Option<WireUsage>,
}

#[derive(Deserialize)]
struct Block {
    #[serde(rename = "type")]
    kind: String,
    text: Option<String>,
}

#[derive(Deserialize)]
struct WireUsage {
    input_tokens: Option<u64>,
    output_tokens: Option<u64>,
    cache_creation_input_tokens: Option<u64>,
    cache_read_input_tokens: Option<u64>,
}

pub(crate) fn parse(body: &str) -> Result<Parsed, String> {
    let response: Response = parse_body(body)?;
    let text = response
        .content
        .into_iter()
        .filter(|b| b.kind == "text")
        .filter_map(|b| b.text)
        .collect();
    let usage = response.usage.map_or_else(Usage::default, |u| {
        let read = u.cache_read_input_tokens.unwrap_or(0);
        Usage {
            input_tokens: u
                .input_tokens
                .unwrap_or(0)
                .saturating_add(u.cache_creation_input_tokens.unwrap_or(0))
                .saturating_add(read),
            output_tokens: u.output_tokens.unwrap_or(0),
            cached_input_tokens: read,
            reasoning_tokens: 0,
        }
    });
    Ok(Parsed {
        text,
        usage,
        model: response.model,
        finish_reason: response.stop_reason,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cache_tokens_are_input_and_thinking_is_skipped() {
        let parsed = parse(
            r#"{"id":"msg_1","type":"message","role":"assistant","model":"claude-x",
                "content":[{"type":"thinking","thinking":"hmm","signature":"s"},{"type":"text","text":"one "},{"type":"text","text":"two"}],
                "stop_reason":"end_turn","usage":{"input_tokens":10,"cache_creation_input_tokens":5,"cache_read_input_tokens":100,"output_tokens":7}}"#,
        )
        .unwrap();
        assert_eq!(parsed.text, "one two");
        assert_eq!(parsed.usage.input_tokens, 115);
        assert_eq!(parsed.usage.cached_input_tokens, 100);
        assert_eq!(parsed.usage.output_tokens, 7);
        assert_eq!(parsed.finish_reason.as_deref(), Some("end_turn"));
    }

    #[test]
    fn max_tokens_defaults() {
        let body = request_body(
            "m",
            &CompletionRequest::new(vec![crate::types::Message::user("x")]),
        );
        assert_eq!(body["max_tokens"], 8192);
        assert!(body.get("system").is_none());
    }
}

//! Anthropic Messages (`POST {base}/v1/messages`, `anthropic-version: 2023-06-01`).
//!
//! Request: `{model, max_tokens (required; 8192 when the request sets none), system?, messages:
//! [{role: user|assistant, content}], temperature?, thinking?}`. A reasoning effort becomes
//! extended thinking, `thinking: {type: "enabled", budget_tokens}`, on the models that have it
//! (Claude 3.7 Sonnet and every model from Claude 4 on): the budget is the effort's
//! ([`thinking_budget`]) but at most half of `max_tokens`, and at least Anthropic's minimum of
//! 1024, else no thinking; with thinking on, a temperature other than 1 is left out (Anthropic
//! refuses it). Answer: the `text` blocks of `content`
//! (thinking blocks are skipped); `stop_reason`. Usage: Anthropic's `input_tokens` counts only
//! the tokens after the last cache breakpoint, so input = `input_tokens +
//! cache_creation_input_tokens + cache_read_input_tokens`, cached = `cache_read_input_tokens`,
//! cache writes = `cache_creation_input_tokens` (billed at the cache-write price, 1.25× input
//! for Anthropic's 5-minute cache). Thinking tokens are inside `output_tokens` and billed as
//! output; Anthropic reports no count of them apart, so reasoning = 0.

use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::{Parsed, conversation, joined_system, parse_body, temperature_json};
use crate::types::{CompletionRequest, MessageRole, Usage};

pub(crate) const PATH: &str = "/v1/messages";
pub(crate) const VERSION: &str = "2023-06-01";
pub(crate) const DEFAULT_MAX_TOKENS: u32 = 8192;

/// Anthropic's smallest thinking budget.
pub(crate) const MIN_THINKING: u32 = 1024;

/// Claude models with extended thinking: 3.7 Sonnet and every model from Claude 4 on.
pub(crate) fn takes_thinking(model: &str) -> bool {
    let m = model.to_ascii_lowercase();
    let before_3_7 = m.starts_with("claude-2") || m.starts_with("claude-3-");
    !before_3_7 || m.starts_with("claude-3-7")
}

/// The thinking budget for `effort` with `max_tokens` in all: `minimal` 1024, `low` 2048,
/// `medium` 8192, `high` 16384, `xhigh` 32768 tokens, at most half of `max_tokens` so the answer
/// keeps the other half; `None` for `none`, an unknown effort, a model without thinking, or a
/// budget that would fall under 1024.
pub(crate) fn thinking_budget(model: &str, effort: Option<&str>, max_tokens: u32) -> Option<u32> {
    let wanted = match effort?.trim().to_ascii_lowercase().as_str() {
        "minimal" => 1024,
        "low" => 2048,
        "medium" => 8192,
        "high" => 16_384,
        "xhigh" => 32_768,
        _ => return None,
    };
    let budget = u32::min(wanted, max_tokens / 2);
    (takes_thinking(model) && budget >= MIN_THINKING).then_some(budget)
}

pub(crate) fn request_body(
    model: &str,
    request: &CompletionRequest,
    reasoning_effort: Option<&str>,
) -> Value {
    let messages: Vec<Value> = conversation(&request.messages)
        .map(|m| {
            let role = match m.role {
                MessageRole::Assistant => "assistant",
                MessageRole::User | MessageRole::System => "user",
            };
            json!({"role": role, "content": m.content})
        })
        .collect();
    let max_tokens = request.max_output_tokens.unwrap_or(DEFAULT_MAX_TOKENS);
    let thinking = thinking_budget(model, reasoning_effort, max_tokens);
    let mut body = Map::new();
    body.insert("model".into(), json!(model));
    body.insert("max_tokens".into(), json!(max_tokens));
    if let Some(system) = joined_system(&request.messages) {
        body.insert("system".into(), json!(system));
    }
    body.insert("messages".into(), Value::Array(messages));
    let temperature = request
        .temperature
        .filter(|t| thinking.is_none() || (*t - 1.0).abs() < f32::EPSILON);
    if let Some(t) = temperature {
        body.insert("temperature".into(), temperature_json(t));
    }
    if let Some(budget) = thinking {
        body.insert(
            "thinking".into(),
            json!({"type": "enabled", "budget_tokens": budget}),
        );
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
            cache_write_tokens: u.cache_creation_input_tokens.unwrap_or(0),
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
        assert_eq!(parsed.usage.cache_write_tokens, 5);
        assert_eq!(parsed.usage.output_tokens, 7);
        assert_eq!(parsed.finish_reason.as_deref(), Some("end_turn"));
    }

    #[test]
    fn max_tokens_defaults() {
        let body = request_body(
            "m",
            &CompletionRequest::new(vec![crate::types::Message::user("x")]),
            None,
        );
        assert_eq!(body["max_tokens"], 8192);
        assert!(body.get("system").is_none());
        assert!(body.get("thinking").is_none());
    }

    #[test]
    fn an_effort_is_a_thinking_budget_under_half_the_output() {
        let claude = "claude-sonnet-4-5";
        assert_eq!(thinking_budget(claude, Some("high"), 64_000), Some(16_384));
        assert_eq!(thinking_budget(claude, Some("high"), 8192), Some(4096));
        assert_eq!(thinking_budget(claude, Some("low"), 16_000), Some(2048));
        assert_eq!(thinking_budget(claude, Some("minimal"), 2048), Some(1024));
        // Under Anthropic's minimum once halved, `none`, unknown: no thinking.
        assert_eq!(thinking_budget(claude, Some("high"), 2000), None);
        assert_eq!(thinking_budget(claude, Some("none"), 64_000), None);
        assert_eq!(thinking_budget(claude, Some("max"), 64_000), None);
        assert_eq!(thinking_budget(claude, None, 64_000), None);
        // Models without extended thinking.
        assert_eq!(
            thinking_budget("claude-3-5-haiku-latest", Some("high"), 64_000),
            None
        );
        assert_eq!(
            thinking_budget("claude-3-7-sonnet-latest", Some("high"), 64_000),
            Some(16_384)
        );
        let mut r = CompletionRequest::new(vec![crate::types::Message::user("x")]);
        r.temperature = Some(0.2);
        r.max_output_tokens = Some(8192);
        let body = request_body(claude, &r, Some("high"));
        assert_eq!(
            body["thinking"],
            json!({"type": "enabled", "budget_tokens": 4096})
        );
        assert!(
            body.get("temperature").is_none(),
            "thinking takes no temperature but 1"
        );
        let body = request_body("claude-3-5-haiku-latest", &r, Some("high"));
        assert!(body.get("thinking").is_none());
        assert_eq!(body["temperature"], 0.2);
    }
}

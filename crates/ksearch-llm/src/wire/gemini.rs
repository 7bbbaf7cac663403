//! Gemini `generateContent` (`POST {base}/v1beta/models/{model}:generateContent`).
//!
//! Request: `{systemInstruction?: {parts: [{text}]}, contents: [{role: user|model, parts:
//! [{text}]}], generationConfig?: {maxOutputTokens?, temperature?, thinkingConfig?}}`. A
//! reasoning effort becomes `thinkingConfig` ([`thinking_config`]): a `thinkingBudget` for
//! Gemini 2.5, a `thinkingLevel` for Gemini 3; other models have no thinking and get none. The key travels in the
//! `x-goog-api-key` header, never in the URL. Answer: the text parts of `candidates[0]` that
//! are not thought summaries (`thought: true`); `usageMetadata.{promptTokenCount,
//! candidatesTokenCount, cachedContentTokenCount, thoughtsTokenCount}`. `promptTokenCount`
//! includes the cached tokens; `candidatesTokenCount` does NOT include `thoughtsTokenCount`,
//! which is billed as output, so output = candidates + thoughts.

use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::{Parsed, conversation, joined_system, parse_body, temperature_json};
use crate::types::{CompletionRequest, MessageRole, Usage};

/// The path for `model` (a leading `models/` is accepted; anything outside the unreserved URL
/// characters is percent-encoded, so a model id cannot change the path).
pub(crate) fn path(model: &str) -> String {
    let model = model.strip_prefix("models/").unwrap_or(model);
    let mut encoded = String::with_capacity(model.len());
    for byte in model.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~') {
            encoded.push(char::from(byte));
        } else {
            encoded.push_str(&format!("%{byte:02X}"));
        }
    }
    format!("/v1beta/models/{encoded}:generateContent")
}

/// Gemini 2.5's thinking budgets: the range a model takes, and whether 0 (off) is allowed.
fn budget_range(model: &str) -> Option<(u32, u32, bool)> {
    let m = model.to_ascii_lowercase();
    let m = m.strip_prefix("models/").unwrap_or(&m);
    if m.starts_with("gemini-2.5-pro") {
        Some((128, 32_768, false))
    } else if m.starts_with("gemini-2.5-flash-lite") {
        Some((512, 24_576, true))
    } else if m.starts_with("gemini-2.5-flash") {
        Some((1, 24_576, true))
    } else {
        None
    }
}

/// `thinkingConfig` for `effort`, or `None` where the model takes none:
///
/// - Gemini 2.5: `thinkingBudget` of `minimal` 512, `low` 2048, `medium` 8192, `high` 24576,
///   `xhigh` 32768 tokens, at most half of `maxOutputTokens` (Gemini counts thoughts in it),
///   within the model's range (2.5 Pro 128 to 32768, Flash up to 24576, Flash-Lite 512 to
///   24576); `none` is 0 where thinking can be turned off (not 2.5 Pro).
/// - Gemini 3: `thinkingLevel`; Pro takes `low` and `high` (minimal and low are low, the rest
///   high), the others `minimal`, `low`, `medium`, `high` (`none` is minimal, xhigh high).
pub(crate) fn thinking_config(
    model: &str,
    effort: Option<&str>,
    max_output_tokens: Option<u32>,
) -> Option<Value> {
    let effort = effort?.trim().to_ascii_lowercase();
    let m = model.to_ascii_lowercase();
    let m = m.strip_prefix("models/").unwrap_or(&m);
    if m.starts_with("gemini-3") {
        let level = if m.contains("pro") {
            match effort.as_str() {
                "minimal" | "low" => "low",
                "medium" | "high" | "xhigh" => "high",
                _ => return None,
            }
        } else {
            match effort.as_str() {
                "none" | "minimal" => "minimal",
                "low" => "low",
                "medium" => "medium",
                "high" | "xhigh" => "high",
                _ => return None,
            }
        };
        return Some(json!({"thinkingLevel": level}));
    }
    let (low, high, off) = budget_range(m)?;
    let wanted: u32 = match effort.as_str() {
        "none" if off => return Some(json!({"thinkingBudget": 0})),
        "minimal" => 512,
        "low" => 2048,
        "medium" => 8192,
        "high" => 24_576,
        "xhigh" => 32_768,
        _ => return None,
    };
    let cap = max_output_tokens.map_or(high, |max| max / 2);
    Some(json!({"thinkingBudget": wanted.min(cap).clamp(low, high)}))
}

pub(crate) fn request_body(
    model: &str,
    request: &CompletionRequest,
    reasoning_effort: Option<&str>,
) -> Value {
    let contents: Vec<Value> = conversation(&request.messages)
        .map(|m| {
            let role = match m.role {
                MessageRole::Assistant => "model",
                MessageRole::User | MessageRole::System => "user",
            };
            json!({"role": role, "parts": [{"text": m.content}]})
        })
        .collect();
    let mut body = Map::new();
    if let Some(system) = joined_system(&request.messages) {
        body.insert(
            "systemInstruction".into(),
            json!({"parts": [{"text": system}]}),
        );
    }
    body.insert("contents".into(), Value::Array(contents));
    let mut generation = Map::new();
    if let Some(max) = request.max_output_tokens {
        generation.insert("maxOutputTokens".into(), json!(max));
    }
    if let Some(t) = request.temperature {
        generation.insert("temperature".into(), temperature_json(t));
    }
    if let Some(thinking) = thinking_config(model, reasoning_effort, request.max_output_tokens) {
        generation.insert("thinkingConfig".into(), thinking);
    }
    if !generation.is_empty() {
        body.insert("generationConfig".into(), Value::Object(generation));
    }
    Value::Object(body)
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Response {
    candidates: Option<Vec<Candidate>>,
    usage_metadata: Option<UsageMetadata>,
    model_version: Option<String>,
    prompt_feedback: Option<PromptFeedback>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Candidate {
    content: Option<Content>,
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct Content {
    parts: Option<Vec<Part>>,
}

#[derive(Deserialize)]
struct Part {
    text: Option<String>,
    thought: Option<bool>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct PromptFeedback {
    block_reason: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct UsageMetadata {
    prompt_token_count: Option<u64>,
    candidates_token_count: Option<u64>,
    cached_content_token_count: Option<u64>,
    thoughts_token_count: Option<u64>,
}

pub(crate) fn parse(body: &str) -> Result<Parsed, String> {
    let response: Response = parse_body(body)?;
    let usage = response.usage_metadata.map_or_else(Usage::default, |u| {
        let thoughts = u.thoughts_token_count.unwrap_or(0);
        Usage {
            input_tokens: u.prompt_token_count.unwrap_or(0),
            output_tokens: u
                .candidates_token_count
                .unwrap_or(0)
                .saturating_add(thoughts),
            cached_input_tokens: u.cached_content_token_count.unwrap_or(0),
            reasoning_tokens: thoughts,
            // Gemini bills a cache's storage by the hour, not its writes per call.
            cache_write_tokens: 0,
        }
    });
    let candidate = response.candidates.and_then(|c| c.into_iter().next());
    let Some(candidate) = candidate else {
        // A blocked prompt has no candidates, only the reason.
        return match response.prompt_feedback.and_then(|f| f.block_reason) {
            Some(reason) => Ok(Parsed {
                text: String::new(),
                usage,
                model: response.model_version,
                finish_reason: Some(format!("prompt_blocked:{reason}")),
            }),
            None => Err("no `candidates` and no `promptFeedback.blockReason`".to_string()),
        };
    };
    let text = candidate
        .content
        .and_then(|c| c.parts)
        .unwrap_or_default()
        .into_iter()
        .filter(|p| p.thought != Some(true))
        .filter_map(|p| p.text)
        .collect();
    Ok(Parsed {
        text,
        usage,
        model: response.model_version,
        finish_reason: candidate.finish_reason,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_encodes_and_strips_models_prefix() {
        assert_eq!(
            path("gemini-2.5-pro"),
            "/v1beta/models/gemini-2.5-pro:generateContent"
        );
        assert_eq!(
            path("models/gemini-2.5-pro"),
            "/v1beta/models/gemini-2.5-pro:generateContent"
        );
        assert_eq!(
            path("../x?key=1"),
            "/v1beta/models/..%2Fx%3Fkey%3D1:generateContent"
        );
    }

    #[test]
    fn thoughts_are_output_and_thought_parts_are_skipped() {
        let parsed = parse(
            r#"{"candidates":[{"content":{"role":"model","parts":[{"text":"plan","thought":true},{"text":"answer"}]},"finishReason":"STOP"}],
               "usageMetadata":{"promptTokenCount":100,"candidatesTokenCount":20,"thoughtsTokenCount":30,"cachedContentTokenCount":40,"totalTokenCount":150},
               "modelVersion":"gemini-2.5-pro"}"#,
        )
        .unwrap();
        assert_eq!(parsed.text, "answer");
        assert_eq!(parsed.usage.output_tokens, 50);
        assert_eq!(parsed.usage.reasoning_tokens, 30);
        assert_eq!(parsed.usage.input_tokens, 100);
        assert_eq!(parsed.usage.cached_input_tokens, 40);
        assert_eq!(parsed.finish_reason.as_deref(), Some("STOP"));
    }

    #[test]
    fn an_effort_is_a_budget_on_2_5_and_a_level_on_3() {
        let cfg =
            |model: &str, effort: &str, max: Option<u32>| thinking_config(model, Some(effort), max);
        assert_eq!(
            cfg("gemini-2.5-flash", "high", None),
            Some(json!({"thinkingBudget": 24_576}))
        );
        assert_eq!(
            cfg("gemini-2.5-flash", "high", Some(8000)),
            Some(json!({"thinkingBudget": 4000}))
        );
        assert_eq!(
            cfg("gemini-2.5-flash", "none", None),
            Some(json!({"thinkingBudget": 0}))
        );
        assert_eq!(cfg("gemini-2.5-pro", "none", None), None);
        assert_eq!(
            cfg("gemini-2.5-pro", "xhigh", None),
            Some(json!({"thinkingBudget": 32_768}))
        );
        assert_eq!(
            cfg("gemini-2.5-pro", "low", Some(100)),
            Some(json!({"thinkingBudget": 128}))
        );
        assert_eq!(
            cfg("gemini-2.5-flash-lite", "minimal", Some(600)),
            Some(json!({"thinkingBudget": 512}))
        );
        assert_eq!(
            cfg("gemini-3-pro-preview", "medium", None),
            Some(json!({"thinkingLevel": "high"}))
        );
        assert_eq!(
            cfg("gemini-3-flash", "medium", None),
            Some(json!({"thinkingLevel": "medium"}))
        );
        assert_eq!(cfg("gemini-2.0-flash", "high", None), None);
        assert_eq!(thinking_config("gemini-2.5-flash", None, None), None);
        let r = CompletionRequest::new(vec![crate::types::Message::user("x")]);
        let body = request_body("gemini-2.0-flash", &r, Some("high"));
        assert!(body.get("generationConfig").is_none());
    }

    #[test]
    fn blocked_prompt_and_missing_candidates() {
        let parsed = parse(
            r#"{"promptFeedback":{"blockReason":"SAFETY"},"usageMetadata":{"promptTokenCount":9}}"#,
        )
        .unwrap();
        assert_eq!(parsed.text, "");
        assert_eq!(
            parsed.finish_reason.as_deref(),
            Some("prompt_blocked:SAFETY")
        );
        assert!(parse(r#"{"usageMetadata":{}}"#).is_err());
    }
}

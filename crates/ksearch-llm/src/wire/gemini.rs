//! Gemini `generateContent` (`POST {base}/v1beta/models/{model}:generateContent`).
//!
//! Request: `{systemInstruction?: {parts: [{text}]}, contents: [{role: user|model, parts:
//! [{text}]}], generationConfig?: {maxOutputTokens?, temperature?}}`. The key travels in the
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

pub(crate) fn request_body(request: &CompletionRequest) -> Value {
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

//! The providers' bodies as the real APIs send them: canonical answers and error bodies.

use serde_json::{Value, json};

use crate::spec::Provider;
use crate::types::Usage;

/// The model name the canonical bodies report.
pub const LOOPBACK_MODEL: &str = "loopback-model";

/// The canonical success body of `provider` for `text` and `usage`.
pub fn success_body(provider: Provider, text: &str, usage: &Usage) -> Value {
    match provider {
        Provider::OpenAiChat => openai_chat_body(text, usage),
        Provider::OpenAiResponses => responses_body(text, usage),
        Provider::Gemini => gemini_body(text, usage),
        Provider::Anthropic => anthropic_body(text, usage),
        // A command answers with plain text, not over HTTP.
        Provider::Exec | Provider::Manual => Value::String(text.to_string()),
    }
}

/// `{cached_tokens, cache_write_tokens (when any), EXTRA: 0}`: OpenAI reports no cache writes,
/// servers that put other providers behind its format do.
fn prompt_details(usage: &Usage, extra: &str) -> Value {
    let mut details = serde_json::Map::new();
    details.insert("cached_tokens".into(), json!(usage.cached_input_tokens));
    if usage.cache_write_tokens > 0 {
        details.insert("cache_write_tokens".into(), json!(usage.cache_write_tokens));
    }
    if !extra.is_empty() {
        details.insert(extra.into(), json!(0));
    }
    Value::Object(details)
}

/// A Chat Completions answer (`chat.completion`), every usage detail filled in.
pub fn openai_chat_body(text: &str, usage: &Usage) -> Value {
    json!({
        "id": "chatcmpl-loopback",
        "object": "chat.completion",
        "created": 1_764_460_800,
        "model": LOOPBACK_MODEL,
        "choices": [{
            "index": 0,
            "message": {"role": "assistant", "content": text, "refusal": null, "annotations": []},
            "logprobs": null,
            "finish_reason": "stop"
        }],
        "usage": {
            "prompt_tokens": usage.input_tokens,
            "completion_tokens": usage.output_tokens,
            "total_tokens": usage.total_tokens(),
            "prompt_tokens_details": prompt_details(usage, "audio_tokens"),
            "completion_tokens_details": {
                "reasoning_tokens": usage.reasoning_tokens,
                "audio_tokens": 0,
                "accepted_prediction_tokens": 0,
                "rejected_prediction_tokens": 0
            }
        },
        "service_tier": "default",
        "system_fingerprint": null
    })
}

/// A Responses answer (`response`, status `completed`): a reasoning item when reasoning tokens
/// were spent, then the message item with one `output_text` part.
pub fn responses_body(text: &str, usage: &Usage) -> Value {
    let mut output = Vec::new();
    if usage.reasoning_tokens > 0 {
        output.push(json!({"id": "rs_loopback", "type": "reasoning", "summary": []}));
    }
    output.push(json!({
        "id": "msg_loopback",
        "type": "message",
        "status": "completed",
        "role": "assistant",
        "content": [{"type": "output_text", "text": text, "annotations": [], "logprobs": []}]
    }));
    json!({
        "id": "resp_loopback",
        "object": "response",
        "created_at": 1_764_460_800,
        "status": "completed",
        "error": null,
        "incomplete_details": null,
        "instructions": null,
        "model": LOOPBACK_MODEL,
        "output": output,
        "parallel_tool_calls": true,
        "store": false,
        "usage": {
            "input_tokens": usage.input_tokens,
            "input_tokens_details": prompt_details(usage, ""),
            "output_tokens": usage.output_tokens,
            "output_tokens_details": {"reasoning_tokens": usage.reasoning_tokens},
            "total_tokens": usage.total_tokens()
        }
    })
}

/// A Gemini `GenerateContentResponse`. `usage.output_tokens` includes the thoughts, so
/// `candidatesTokenCount` is `output - reasoning`; zero counts are omitted, as Gemini does.
pub fn gemini_body(text: &str, usage: &Usage) -> Value {
    let mut metadata = serde_json::Map::new();
    metadata.insert("promptTokenCount".into(), json!(usage.input_tokens));
    metadata.insert(
        "candidatesTokenCount".into(),
        json!(usage.output_tokens.saturating_sub(usage.reasoning_tokens)),
    );
    metadata.insert("totalTokenCount".into(), json!(usage.total_tokens()));
    if usage.cached_input_tokens > 0 {
        metadata.insert(
            "cachedContentTokenCount".into(),
            json!(usage.cached_input_tokens),
        );
    }
    if usage.reasoning_tokens > 0 {
        metadata.insert("thoughtsTokenCount".into(), json!(usage.reasoning_tokens));
    }
    metadata.insert(
        "promptTokensDetails".into(),
        json!([{"modality": "TEXT", "tokenCount": usage.input_tokens}]),
    );
    json!({
        "candidates": [{
            "content": {"parts": [{"text": text}], "role": "model"},
            "finishReason": "STOP",
            "index": 0
        }],
        "usageMetadata": metadata,
        "modelVersion": LOOPBACK_MODEL,
        "responseId": "loopback"
    })
}

/// An Anthropic `message`. Anthropic's `input_tokens` excludes cache reads and writes, so it is
/// `input - cached - written`, with `cache_read_input_tokens` = cached and
/// `cache_creation_input_tokens` = written. Anthropic reports no reasoning count:
/// `usage.reasoning_tokens` is not represented.
pub fn anthropic_body(text: &str, usage: &Usage) -> Value {
    json!({
        "id": "msg_loopback",
        "type": "message",
        "role": "assistant",
        "model": LOOPBACK_MODEL,
        "content": [{"type": "text", "text": text}],
        "stop_reason": "end_turn",
        "stop_sequence": null,
        "usage": {
            "input_tokens": usage
                .input_tokens
                .saturating_sub(usage.cached_input_tokens)
                .saturating_sub(usage.cache_write_tokens),
            "cache_creation_input_tokens": usage.cache_write_tokens,
            "cache_read_input_tokens": usage.cached_input_tokens,
            "output_tokens": usage.output_tokens,
            "service_tier": "standard"
        }
    })
}

/// `provider`'s error body for `status` and `message` (OpenAI `{error: {message, type, code}}`,
/// Anthropic `{type: "error", error: {type, message}}`, Gemini `{error: {code, message,
/// status}}`).
pub fn error_body(provider: Provider, status: u16, message: &str) -> Value {
    match provider {
        Provider::OpenAiChat | Provider::OpenAiResponses => {
            let (kind, code) = match status {
                401 => ("invalid_request_error", json!("invalid_api_key")),
                404 => ("invalid_request_error", json!("model_not_found")),
                429 => ("requests", json!("rate_limit_exceeded")),
                500..=599 => ("server_error", Value::Null),
                _ => ("invalid_request_error", Value::Null),
            };
            json!({"error": {"message": message, "type": kind, "param": null, "code": code}})
        }
        Provider::Anthropic => {
            let kind = match status {
                401 => "authentication_error",
                403 => "permission_error",
                404 => "not_found_error",
                413 => "request_too_large",
                429 => "rate_limit_error",
                529 => "overloaded_error",
                500..=599 => "api_error",
                _ => "invalid_request_error",
            };
            json!({"type": "error", "error": {"type": kind, "message": message}, "request_id": "req_loopback"})
        }
        Provider::Gemini => {
            let grpc = match status {
                400 => "INVALID_ARGUMENT",
                401 => "UNAUTHENTICATED",
                403 => "PERMISSION_DENIED",
                404 => "NOT_FOUND",
                429 => "RESOURCE_EXHAUSTED",
                503 => "UNAVAILABLE",
                504 => "DEADLINE_EXCEEDED",
                _ => "INTERNAL",
            };
            json!({"error": {"code": status, "message": message, "status": grpc}})
        }
        Provider::Exec | Provider::Manual => json!({"error": message}),
    }
}

//! What each provider refuses, as its API reference and its real error replies say: one strict
//! schema per wire format, applied by the loopback servers before the script answers.
//!
//! Written from the providers' references and the 400s they are known to send, apart from the
//! client's own rules (a schema that reused the client's model tables could not catch them being
//! wrong). Each check answers the first fault it finds with the status and error body the
//! provider sends:
//!
//! | wire format | refused |
//! | ----------- | ------- |
//! | Chat Completions | unknown top-level fields; no `model`, no or empty `messages`, a bad role, a user message without content; `temperature` outside 0..=2; a token budget below 1; for OpenAI's reasoning models (o-series, gpt-5 but not gpt-5-chat) `max_tokens` and a `temperature` other than 1; for its chat models (gpt-4o, gpt-4.1, gpt-5-chat, ...) `reasoning_effort`; an effort none of them takes |
//! | Responses | the same, with `max_output_tokens` at least 16 and `reasoning.effort` |
//! | Anthropic Messages | no `x-api-key` (401) or `anthropic-version`; unknown fields; no `model`, `max_tokens` or `messages`; a role other than user and assistant; empty text (a message, a block or the system prompt); a final assistant turn ending in whitespace; `temperature` above 1; `thinking` with a budget under 1024 or not under `max_tokens`, with a `temperature` other than 1, or for a model without extended thinking (Claude 3 but 3.7) |
//! | Gemini `generateContent` | no `x-goog-api-key` (403); unknown fields (top level, `generationConfig`, `thinkingConfig`); no `contents`, a bad role, no parts, an empty text part; `temperature` outside 0..=2; `thinkingConfig` for a model without thinking, a budget outside the model's range (2.5 Pro cannot turn thinking off), `thinkingLevel` on 2.5 or with a budget, a level the model does not take |
//!
//! A server built with [`ScriptedServer::start`](super::ScriptedServer::start) or
//! [`ScriptedServer::serve`](super::ScriptedServer::serve) applies them; the `_lenient`
//! constructors do not (for tests of what a client does with any answer).

mod anthropic;
mod gemini;
mod openai;

use serde_json::{Map, Value, json};

use super::{RecordedRequest, Reply};
use crate::spec::Provider;

/// A request the provider would refuse, and how it says so.
#[derive(Debug, Clone, PartialEq)]
pub struct Rejection {
    /// Whose rules refused it.
    pub provider: Provider,
    /// 400, or 401/403 for a missing key.
    pub status: u16,
    /// The provider's message.
    pub message: String,
    /// OpenAI's `param` (the field at fault).
    pub param: Option<String>,
    /// OpenAI's `code` (`unsupported_value`, ...).
    pub code: Option<&'static str>,
}

impl Rejection {
    /// The reply the provider sends: its status and error body.
    pub fn reply(&self) -> Reply {
        let body = match self.provider {
            Provider::OpenAiChat | Provider::OpenAiResponses => json!({"error": {
                "message": self.message,
                "type": "invalid_request_error",
                "param": self.param,
                "code": self.code,
            }}),
            Provider::Anthropic => json!({
                "type": "error",
                "error": {
                    "type": if self.status == 401 { "authentication_error" } else { "invalid_request_error" },
                    "message": self.message,
                },
                "request_id": "req_loopback_strict",
            }),
            Provider::Gemini | Provider::Exec | Provider::Manual => json!({"error": {
                "code": self.status,
                "message": self.message,
                "status": if self.status == 403 { "PERMISSION_DENIED" } else { "INVALID_ARGUMENT" },
            }}),
        };
        Reply::json(self.status, body)
    }
}

/// The wire format a request path belongs to (`None`: not a model call, not checked).
pub fn provider_of(path: &str) -> Option<Provider> {
    let path = path.split('?').next().unwrap_or(path);
    if path.ends_with("/chat/completions") {
        Some(Provider::OpenAiChat)
    } else if path.ends_with("/responses") {
        Some(Provider::OpenAiResponses)
    } else if path.ends_with(":generateContent") {
        Some(Provider::Gemini)
    } else if path.ends_with("/v1/messages") {
        Some(Provider::Anthropic)
    } else {
        None
    }
}

/// What the provider the path names would answer instead of a completion; `None` when it would
/// accept the request.
pub fn check(request: &RecordedRequest) -> Option<Rejection> {
    let provider = provider_of(&request.path)?;
    let result = match provider {
        Provider::OpenAiChat => openai::chat(request),
        Provider::OpenAiResponses => openai::responses(request),
        Provider::Anthropic => anthropic::check(request),
        Provider::Gemini => gemini::check(request),
        Provider::Exec | Provider::Manual => Ok(()),
    };
    result.err()
}

pub(super) type Checked = Result<(), Rejection>;

pub(super) fn object(request: &RecordedRequest) -> Option<&Map<String, Value>> {
    request.body.as_object()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(path: &str, headers: &[(&str, &str)], body: Value) -> RecordedRequest {
        RecordedRequest {
            method: "POST".into(),
            path: path.into(),
            headers: headers
                .iter()
                .map(|(n, v)| ((*n).to_string(), (*v).to_string()))
                .collect(),
            body,
        }
    }

    fn chat(body: Value) -> Option<Rejection> {
        check(&request("/v1/chat/completions", &[], body))
    }

    #[test]
    fn chat_refuses_what_openai_refuses() {
        let ok = json!({"model": "gpt-5-mini", "messages": [{"role": "user", "content": "x"}],
                        "max_completion_tokens": 100, "reasoning_effort": "high"});
        assert_eq!(chat(ok.clone()), None);
        let mut t = ok.clone();
        t["temperature"] = json!(0.2);
        let r = chat(t).unwrap();
        assert_eq!(r.code, Some("unsupported_value"));
        assert!(r.message.contains("Only the default (1)"), "{}", r.message);
        let mut m = ok.clone();
        m["max_tokens"] = json!(100);
        assert_eq!(chat(m).unwrap().param.as_deref(), Some("max_tokens"));
        let mut e = ok.clone();
        e["model"] = json!("gpt-4.1");
        assert_eq!(chat(e).unwrap().code, Some("unsupported_parameter"));
        let mut u = ok.clone();
        u["temprature"] = json!(1);
        assert!(chat(u).unwrap().message.contains("temprature"));
        // Another server's model: what was configured passes.
        let local = json!({"model": "qwen2.5-coder:32b", "messages": [{"role": "user", "content": "x"}],
                           "max_tokens": 100, "temperature": 0.2, "reasoning_effort": "high"});
        assert_eq!(chat(local), None);
        assert!(chat(json!({"model": "m", "messages": []})).is_some());
        assert!(
            chat(json!({"model": "m", "messages": [{"role": "bot", "content": "x"}]})).is_some()
        );
    }

    #[test]
    fn anthropic_refuses_empty_text_and_bad_thinking() {
        let headers = [("x-api-key", "k"), ("anthropic-version", "2023-06-01")];
        let check_body = |body: Value| check(&request("/v1/messages", &headers, body));
        let ok = json!({"model": "claude-sonnet-4-5", "max_tokens": 4096,
                        "messages": [{"role": "user", "content": "x"}],
                        "thinking": {"type": "enabled", "budget_tokens": 2048}});
        assert_eq!(check_body(ok.clone()), None);
        let mut empty = ok.clone();
        empty["messages"] = json!([{"role": "user", "content": "x"}, {"role": "assistant", "content": ""}, {"role": "user", "content": "y"}]);
        assert!(check_body(empty).unwrap().message.contains("non-empty"));
        let mut hot = ok.clone();
        hot["temperature"] = json!(0.2);
        assert!(check_body(hot).unwrap().message.contains("temperature"));
        let mut big = ok.clone();
        big["thinking"]["budget_tokens"] = json!(4096);
        assert!(check_body(big).unwrap().message.contains("max_tokens"));
        let mut old = ok.clone();
        old["model"] = json!("claude-3-5-haiku-latest");
        assert!(check_body(old).is_some());
        let no_key = check(&request("/v1/messages", &[], ok)).unwrap();
        assert_eq!(no_key.status, 401);
    }

    #[test]
    fn gemini_refuses_empty_parts_and_thinking_out_of_range() {
        let headers = [("x-goog-api-key", "k")];
        let at = |model: &str, body: Value| {
            check(&request(
                &format!("/v1beta/models/{model}:generateContent"),
                &headers,
                body,
            ))
        };
        let body = |thinking: Value| {
            json!({"contents": [{"role": "user", "parts": [{"text": "x"}]}],
                   "generationConfig": {"maxOutputTokens": 4096, "thinkingConfig": thinking}})
        };
        assert_eq!(
            at("gemini-2.5-flash", body(json!({"thinkingBudget": 0}))),
            None
        );
        assert!(at("gemini-2.5-pro", body(json!({"thinkingBudget": 0}))).is_some());
        assert!(at("gemini-2.5-pro", body(json!({"thinkingBudget": 64}))).is_some());
        assert!(at("gemini-2.0-flash", body(json!({"thinkingBudget": 1024}))).is_some());
        assert!(
            at(
                "gemini-3-pro-preview",
                body(json!({"thinkingLevel": "medium"}))
            )
            .is_some()
        );
        assert_eq!(
            at(
                "gemini-3-pro-preview",
                body(json!({"thinkingLevel": "high"}))
            ),
            None
        );
        let empty = json!({"contents": [{"role": "model", "parts": [{"text": ""}]}]});
        let r = at("gemini-2.5-flash", empty).unwrap();
        assert!(r.message.contains("empty text"), "{}", r.message);
        let unknown = json!({"contents": [{"parts": [{"text": "x"}]}], "model": "m"});
        assert!(
            at("gemini-2.5-flash", unknown)
                .unwrap()
                .message
                .contains("Unknown name")
        );
    }
}

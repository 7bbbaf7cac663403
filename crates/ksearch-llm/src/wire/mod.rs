//! The four wire formats: the request body each provider expects and how its answer is read.

pub(crate) mod anthropic;
pub(crate) mod gemini;
pub(crate) mod openai_chat;
pub(crate) mod openai_responses;

use serde::de::DeserializeOwned;

use crate::http::truncate;
use crate::types::{CompletionRequest, Message, MessageRole, Usage};

/// The HTTP wire formats: every provider but a command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Wire {
    OpenAiChat,
    OpenAiResponses,
    Gemini,
    Anthropic,
}

impl Wire {
    pub(crate) fn of(provider: crate::spec::Provider) -> Option<Wire> {
        use crate::spec::Provider;
        match provider {
            Provider::OpenAiChat => Some(Wire::OpenAiChat),
            Provider::OpenAiResponses => Some(Wire::OpenAiResponses),
            Provider::Gemini => Some(Wire::Gemini),
            Provider::Anthropic => Some(Wire::Anthropic),
            Provider::Exec | Provider::Manual => None,
        }
    }
}

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

/// Who answers an OpenAI-format request: OpenAI itself (`api.openai.com`), whose models differ
/// in what they accept, or a server that speaks the format (vLLM, Ollama, llama.cpp, LM Studio,
/// OpenRouter), which gets what the user configured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Dialect {
    OpenAi,
    Compatible,
}

/// The parameters an OpenAI-format request carries besides the conversation.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Sampling<'a> {
    /// Where the output budget goes: `max_completion_tokens` (OpenAI; its reasoning models
    /// refuse `max_tokens`) or `max_tokens` (what Ollama, llama.cpp and LM Studio read; vLLM
    /// reads both).
    pub(crate) max_tokens_field: &'static str,
    pub(crate) temperature: Option<f32>,
    pub(crate) reasoning_effort: Option<&'a str>,
}

impl Dialect {
    /// What to send `model` for `request`: OpenAI's reasoning models (o-series, gpt-5) take a
    /// reasoning effort and refuse a temperature other than 1 and `max_tokens`; its chat models
    /// (gpt-4.1, gpt-4o) refuse a reasoning effort. Those rules follow the model's name on any
    /// server (a proxy or Azure in front of OpenAI's models refuses the same); another model on
    /// a compatible server gets what was configured, its budget as `max_tokens`.
    pub(crate) fn sampling<'a>(
        self,
        model: &str,
        request: &CompletionRequest,
        reasoning_effort: Option<&'a str>,
    ) -> Sampling<'a> {
        let reasoning = is_openai_reasoning_model(model);
        let chat = is_openai_chat_model(model);
        let max_tokens_field = match self {
            Dialect::OpenAi => "max_completion_tokens",
            Dialect::Compatible if reasoning => "max_completion_tokens",
            Dialect::Compatible => "max_tokens",
        };
        if self == Dialect::Compatible && !reasoning && !chat {
            return Sampling {
                max_tokens_field,
                temperature: request.temperature,
                reasoning_effort,
            };
        }
        Sampling {
            max_tokens_field,
            temperature: request
                .temperature
                .filter(|t| !reasoning || (*t - 1.0).abs() < f32::EPSILON),
            reasoning_effort: reasoning_effort.filter(|_| reasoning),
        }
    }
}

/// OpenAI's reasoning models by name: `o1`, `o3`, `o4-mini`, ... and `gpt-5`, `gpt-5-mini`,
/// ... (not `gpt-5-chat-latest`, a chat model).
pub(crate) fn is_openai_reasoning_model(model: &str) -> bool {
    let m = model.to_ascii_lowercase();
    let o_series = ["o1", "o3", "o4"]
        .iter()
        .any(|p| m == *p || m.starts_with(&format!("{p}-")));
    o_series || (m.starts_with("gpt-5") && !m.contains("-chat"))
}

/// OpenAI's chat models by name (`gpt-4o`, `gpt-4.1`, `gpt-3.5-turbo`, `chatgpt-4o-latest`,
/// `gpt-5-chat-latest`): no reasoning effort.
pub(crate) fn is_openai_chat_model(model: &str) -> bool {
    let m = model.to_ascii_lowercase();
    ["gpt-4", "gpt-3.5", "chatgpt-"]
        .iter()
        .any(|p| m.starts_with(p))
        || (m.starts_with("gpt-5") && m.contains("-chat"))
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::Message;

    fn request(temperature: Option<f32>) -> CompletionRequest {
        CompletionRequest {
            messages: vec![Message::user("x")],
            max_output_tokens: Some(100),
            temperature,
        }
    }

    #[test]
    fn openai_models_get_what_each_accepts_and_other_servers_what_was_configured() {
        let r = request(Some(0.2));
        // A reasoning model: the effort, no temperature but 1, `max_completion_tokens`.
        for model in ["gpt-5", "gpt-5-mini", "o3", "o4-mini", "o1"] {
            let s = Dialect::OpenAi.sampling(model, &r, Some("high"));
            assert_eq!(s.reasoning_effort, Some("high"), "{model}");
            assert_eq!(s.temperature, None, "{model}");
            assert_eq!(s.max_tokens_field, "max_completion_tokens");
            let one = Dialect::OpenAi.sampling(model, &request(Some(1.0)), None);
            assert_eq!(one.temperature, Some(1.0), "{model}");
        }
        // A chat model: its temperature, no effort (gpt-4.1 and gpt-4o answer 400 to one).
        for model in [
            "gpt-4.1",
            "gpt-4o",
            "gpt-4.1-mini",
            "gpt-5-chat-latest",
            "o1x",
        ] {
            let s = Dialect::OpenAi.sampling(model, &r, Some("high"));
            assert_eq!(s.reasoning_effort, None, "{model}");
            assert_eq!(s.temperature, Some(0.2), "{model}");
        }
        // OpenAI's models keep OpenAI's rules behind any server (a proxy, Azure).
        let s = Dialect::Compatible.sampling("gpt-5-mini", &r, Some("high"));
        assert_eq!((s.temperature, s.reasoning_effort), (None, Some("high")));
        assert_eq!(s.max_tokens_field, "max_completion_tokens");
        let s = Dialect::Compatible.sampling("gpt-4o", &r, Some("high"));
        assert_eq!((s.temperature, s.reasoning_effort), (Some(0.2), None));
        assert_eq!(s.max_tokens_field, "max_tokens");
        // Another server: what was configured, and the budget where Ollama and llama.cpp read it.
        let s = Dialect::Compatible.sampling("qwen2.5-coder:32b", &r, Some("high"));
        assert_eq!(
            s,
            Sampling {
                max_tokens_field: "max_tokens",
                temperature: Some(0.2),
                reasoning_effort: Some("high"),
            }
        );
    }
}

//! OpenAI Chat Completions, and every server that speaks it.
//!
//! Request: `{model, messages: [{role, content}], max_completion_tokens? (OpenAI) or
//! max_tokens? (other servers), temperature?, reasoning_effort?}` (see [`Dialect`]). Answer: `choices[0].message.content`, `choices[0].finish_reason`,
//! `usage.{prompt_tokens, completion_tokens, prompt_tokens_details.cached_tokens,
//! completion_tokens_details.reasoning_tokens}` (reasoning tokens are part of
//! `completion_tokens`). Local servers may omit `id`, `usage` or its details: all optional.

use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::{Dialect, Parsed, parse_body, temperature_json};
use crate::types::{CompletionRequest, MessageRole, Usage};

pub(crate) const PATH: &str = "/chat/completions";

pub(crate) fn request_body(
    model: &str,
    request: &CompletionRequest,
    reasoning_effort: Option<&str>,
    dialect: Dialect,
) -> Value {
    let sampling = dialect.sampling(model, request, reasoning_effort);
    let messages: Vec<Value> = request
        .messages
        .iter()
        .map(|m| {
            let role = match m.role {
                MessageRole::System => "system",
                MessageRole::User => "user",
                MessageRole::Assistant => "assistant",
            };
            json!({"role": role, "content": m.content})
        })
        .collect();
    let mut body = Map::new();
    body.insert("model".into(), json!(model));
    body.insert("messages".into(), Value::Array(messages));
    if let Some(max) = request.max_output_tokens {
        body.insert(sampling.max_tokens_field.into(), json!(max));
    }
    if let Some(t) = sampling.temperature {
        body.insert("temperature".into(), temperature_json(t));
    }
    if let Some(effort) = sampling.reasoning_effort {
        body.insert("reasoning_effort".into(), json!(effort));
    }
    Value::Object(body)
}

#[derive(Deserialize)]
struct Response {
    model: Option<String>,
    choices: Vec<Choice>,
    usage: Option<WireUsage>,
}

#[derive(Deserialize)]
struct Choice {
    message: Option<ChoiceMessage>,
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct ChoiceMessage {
    content: Option<Content>,
    refusal: Option<String>,
}

/// A string, or (some compatible servers) an array of `{type: "text", text}` parts.
#[derive(Deserialize)]
#[serde(untagged)]
enum Content {
    Text(String),
    Parts(Vec<Part>),
}

#[derive(Deserialize)]
struct Part {
    text: Option<String>,
}

#[derive(Deserialize)]
struct WireUsage {
    prompt_tokens: Option<u64>,
    completion_tokens: Option<u64>,
    prompt_tokens_details: Option<PromptDetails>,
    completion_tokens_details: Option<CompletionDetails>,
}

#[derive(Deserialize)]
struct PromptDetails {
    cached_tokens: Option<u64>,
    /// Not sent by OpenAI (which charges nothing for writes); sent by some servers that put
    /// other providers behind the format.
    cache_write_tokens: Option<u64>,
}

#[derive(Deserialize)]
struct CompletionDetails {
    reasoning_tokens: Option<u64>,
}

pub(crate) fn parse(body: &str) -> Result<Parsed, String> {
    let response: Response = parse_body(body)?;
    let Some(choice) = response.choices.into_iter().next() else {
        return Err("`choices` is empty".to_string());
    };
    let mut finish_reason = choice.finish_reason;
    let text = match choice.message {
        Some(ChoiceMessage {
            content: Some(Content::Text(text)),
            ..
        }) => text,
        Some(ChoiceMessage {
            content: Some(Content::Parts(parts)),
            ..
        }) => parts.into_iter().filter_map(|p| p.text).collect(),
        Some(ChoiceMessage {
            content: None,
            refusal: Some(refusal),
        }) => {
            finish_reason = Some("refusal".to_string());
            refusal
        }
        // No content: e.g. every token went to reasoning (`finish_reason: "length"`).
        Some(ChoiceMessage { content: None, .. }) => String::new(),
        None => return Err("`choices[0].message` is missing".to_string()),
    };
    let usage = response.usage.map_or_else(Usage::default, |u| Usage {
        input_tokens: u.prompt_tokens.unwrap_or(0),
        output_tokens: u.completion_tokens.unwrap_or(0),
        cached_input_tokens: u
            .prompt_tokens_details
            .as_ref()
            .and_then(|d| d.cached_tokens)
            .unwrap_or(0),
        reasoning_tokens: u
            .completion_tokens_details
            .and_then(|d| d.reasoning_tokens)
            .unwrap_or(0),
        cache_write_tokens: u
            .prompt_tokens_details
            .and_then(|d| d.cache_write_tokens)
            .unwrap_or(0),
    });
    Ok(Parsed {
        text,
        usage,
        model: response.model,
        finish_reason,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn minimal_local_server_answer() {
        let parsed =
            parse(r#"{"choices":[{"message":{"role":"assistant","content":"hi"}}]}"#).unwrap();
        assert_eq!(parsed.text, "hi");
        assert_eq!(parsed.usage, Usage::default());
        assert_eq!(parsed.model, None);
        assert_eq!(parsed.finish_reason, None);
    }

    #[test]
    fn content_parts_and_null_details() {
        let parsed = parse(
            r#"{"model":"m","choices":[{"message":{"content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]},"finish_reason":"stop"}],
               "usage":{"prompt_tokens":7,"completion_tokens":3,"prompt_tokens_details":null,"completion_tokens_details":{"reasoning_tokens":null}}}"#,
        )
        .unwrap();
        assert_eq!(parsed.text, "ab");
        assert_eq!(parsed.usage.input_tokens, 7);
        assert_eq!(parsed.usage.reasoning_tokens, 0);
    }

    #[test]
    fn refusal_and_empty_content() {
        let parsed = parse(
            r#"{"choices":[{"message":{"content":null,"refusal":"no"},"finish_reason":"stop"}]}"#,
        )
        .unwrap();
        assert_eq!(parsed.text, "no");
        assert_eq!(parsed.finish_reason.as_deref(), Some("refusal"));
        let parsed =
            parse(r#"{"choices":[{"message":{"content":null},"finish_reason":"length"}]}"#)
                .unwrap();
        assert_eq!(parsed.text, "");
        assert_eq!(parsed.finish_reason.as_deref(), Some("length"));
    }

    #[test]
    fn shape_errors_name_the_path() {
        let err = parse(r#"{"choices":[{"message":{"content":42}}]}"#).unwrap_err();
        assert!(err.contains("choices[0].message.content"), "{err}");
        let err = parse(r#"{"choices":[]}"#).unwrap_err();
        assert!(err.contains("empty"), "{err}");
        let err = parse(r#"{"object":"chat.completion"}"#).unwrap_err();
        assert!(err.contains("choices"), "{err}");
        let err = parse("{not json").unwrap_err();
        assert!(err.contains("not JSON"), "{err}");
    }
}

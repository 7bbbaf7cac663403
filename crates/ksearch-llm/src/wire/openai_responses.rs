//! OpenAI Responses.
//!
//! Request: `{model, instructions?, input: [{type: "message", role, content}],
//! max_output_tokens?, temperature?, reasoning?: {effort}, store: false}` (system messages go to
//! `instructions`; nothing is stored server-side since every call carries its whole context).
//! Answer: the `output_text` parts of the `output` items of type `message` (reasoning items are
//! skipped); `usage.{input_tokens, output_tokens, input_tokens_details.cached_tokens,
//! output_tokens_details.reasoning_tokens}` (reasoning tokens are part of `output_tokens`).
//! `finish_reason` is `incomplete_details.reason` when the status is `incomplete` (e.g.
//! `max_output_tokens`), else the status (`completed`).

use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::{Dialect, Parsed, conversation, joined_system, parse_body, temperature_json};
use crate::types::{CompletionRequest, MessageRole, Usage};

pub(crate) const PATH: &str = "/responses";

pub(crate) fn request_body(
    model: &str,
    request: &CompletionRequest,
    reasoning_effort: Option<&str>,
    dialect: Dialect,
) -> Value {
    // The Responses API names its output budget `max_output_tokens` everywhere.
    let sampling = dialect.sampling(model, request, reasoning_effort);
    let input: Vec<Value> = conversation(&request.messages)
        .map(|m| {
            let role = match m.role {
                MessageRole::Assistant => "assistant",
                MessageRole::User | MessageRole::System => "user",
            };
            json!({"type": "message", "role": role, "content": m.content})
        })
        .collect();
    let mut body = Map::new();
    body.insert("model".into(), json!(model));
    if let Some(system) = joined_system(&request.messages) {
        body.insert("instructions".into(), json!(system));
    }
    body.insert("input".into(), Value::Array(input));
    if let Some(max) = request.max_output_tokens {
        body.insert("max_output_tokens".into(), json!(max));
    }
    if let Some(t) = sampling.temperature {
        body.insert("temperature".into(), temperature_json(t));
    }
    if let Some(effort) = sampling.reasoning_effort {
        body.insert("reasoning".into(), json!({"effort": effort}));
    }
    body.insert("store".into(), json!(false));
    Value::Object(body)
}

#[derive(Deserialize)]
struct Response {
    model: Option<String>,
    status: Option<String>,
    output: Vec<OutputItem>,
    usage: Option<WireUsage>,
    incomplete_details: Option<IncompleteDetails>,
    error: Option<ResponseError>,
}

#[derive(Deserialize)]
struct OutputItem {
    #[serde(rename = "type")]
    kind: String,
    content: Option<Vec<ContentPart>>,
}

#[derive(Deserialize)]
struct ContentPart {
    #[serde(rename = "type")]
    kind: String,
    text: Option<String>,
    refusal: Option<String>,
}

#[derive(Deserialize)]
struct IncompleteDetails {
    reason: Option<String>,
}

#[derive(Deserialize)]
struct ResponseError {
    message: Option<String>,
    code: Option<String>,
}

#[derive(Deserialize)]
struct WireUsage {
    input_tokens: Option<u64>,
    output_tokens: Option<u64>,
    input_tokens_details: Option<InputDetails>,
    output_tokens_details: Option<OutputDetails>,
}

#[derive(Deserialize)]
struct InputDetails {
    cached_tokens: Option<u64>,
    cache_write_tokens: Option<u64>,
}

#[derive(Deserialize)]
struct OutputDetails {
    reasoning_tokens: Option<u64>,
}

pub(crate) fn parse(body: &str) -> Result<Parsed, String> {
    let response: Response = parse_body(body)?;
    if response.status.as_deref() == Some("failed") {
        let error = response.error.as_ref();
        return Err(format!(
            "the response has status `failed`: {} ({})",
            error
                .and_then(|e| e.message.as_deref())
                .unwrap_or("no message"),
            error.and_then(|e| e.code.as_deref()).unwrap_or("no code")
        ));
    }
    let mut text = String::new();
    let mut refusal = None;
    for item in response.output.iter().filter(|i| i.kind == "message") {
        for part in item.content.iter().flatten() {
            match part.kind.as_str() {
                "output_text" => text.push_str(part.text.as_deref().unwrap_or("")),
                "refusal" => refusal = part.refusal.clone(),
                _ => {}
            }
        }
    }
    let mut finish_reason = match response.status.as_deref() {
        Some("incomplete") => response
            .incomplete_details
            .and_then(|d| d.reason)
            .or(Some("incomplete".to_string())),
        other => other.map(str::to_string),
    };
    if text.is_empty()
        && let Some(refusal) = refusal
    {
        text = refusal;
        finish_reason = Some("refusal".to_string());
    }
    let usage = response.usage.map_or_else(Usage::default, |u| Usage {
        input_tokens: u.input_tokens.unwrap_or(0),
        output_tokens: u.output_tokens.unwrap_or(0),
        cached_input_tokens: u
            .input_tokens_details
            .as_ref()
            .and_then(|d| d.cached_tokens)
            .unwrap_or(0),
        reasoning_tokens: u
            .output_tokens_details
            .and_then(|d| d.reasoning_tokens)
            .unwrap_or(0),
        cache_write_tokens: u
            .input_tokens_details
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
    fn text_only_from_message_items() {
        let parsed = parse(
            r#"{"status":"completed","output":[
                {"type":"reasoning","summary":[{"type":"summary_text","text":"thinking"}],"content":[{"type":"reasoning_text","text":"hidden"}]},
                {"type":"message","role":"assistant","content":[{"type":"output_text","text":"a","annotations":[]},{"type":"output_text","text":"b"}]}]}"#,
        )
        .unwrap();
        assert_eq!(parsed.text, "ab");
        assert_eq!(parsed.finish_reason.as_deref(), Some("completed"));
    }

    #[test]
    fn incomplete_and_failed() {
        let parsed = parse(
            r#"{"status":"incomplete","incomplete_details":{"reason":"max_output_tokens"},"output":[{"type":"reasoning","summary":[]}],
               "usage":{"input_tokens":5,"output_tokens":64,"output_tokens_details":{"reasoning_tokens":64}}}"#,
        )
        .unwrap();
        assert_eq!(parsed.text, "");
        assert_eq!(parsed.finish_reason.as_deref(), Some("max_output_tokens"));
        assert_eq!(parsed.usage.reasoning_tokens, 64);
        let err = parse(
            r#"{"status":"failed","error":{"code":"server_error","message":"boom"},"output":[]}"#,
        )
        .unwrap_err();
        assert!(err.contains("boom"), "{err}");
    }
}

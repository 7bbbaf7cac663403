//! Chat Completions and Responses, as OpenAI refuses them.

use serde_json::{Map, Value};

use super::{Checked, Rejection, object};
use crate::loopback::RecordedRequest;
use crate::spec::Provider;

fn openai(message: String, param: Option<&str>, code: Option<&'static str>) -> Rejection {
    Rejection {
        provider: Provider::OpenAiChat,
        status: 400,
        message,
        param: param.map(str::to_string),
        code,
    }
}

/// OpenAI's reasoning models by their published names: o1, o3, o4-mini, ... and gpt-5, gpt-5.1,
/// gpt-5-mini, ... (gpt-5-chat-latest is a chat model).
fn openai_reasoning(model: &str) -> bool {
    let m = model.to_ascii_lowercase();
    let o = ["o1", "o3", "o4"]
        .iter()
        .any(|p| m == *p || m.starts_with(&format!("{p}-")));
    o || (m.starts_with("gpt-5") && !m.starts_with("gpt-5-chat") && !m.contains("-chat-"))
}

/// OpenAI's chat models, which refuse a reasoning effort.
fn openai_chat_model(model: &str) -> bool {
    let m = model.to_ascii_lowercase();
    ["gpt-4", "gpt-3.5", "chatgpt-", "gpt-5-chat"]
        .iter()
        .any(|p| m.starts_with(p))
        || (m.starts_with("gpt-5") && m.contains("-chat-"))
}

const CHAT_FIELDS: &[&str] = &[
    "audio",
    "frequency_penalty",
    "function_call",
    "functions",
    "logit_bias",
    "logprobs",
    "max_completion_tokens",
    "max_tokens",
    "messages",
    "metadata",
    "modalities",
    "model",
    "n",
    "parallel_tool_calls",
    "prediction",
    "presence_penalty",
    "prompt_cache_key",
    "reasoning_effort",
    "response_format",
    "safety_identifier",
    "seed",
    "service_tier",
    "stop",
    "store",
    "stream",
    "stream_options",
    "temperature",
    "tool_choice",
    "tools",
    "top_logprobs",
    "top_p",
    "user",
    "verbosity",
    "web_search_options",
];

const EFFORTS: &[&str] = &["none", "minimal", "low", "medium", "high", "xhigh"];

fn openai_common(body: &Map<String, Value>, model: &str, budget_fields: &[&str]) -> Checked {
    if let Some(t) = body.get("temperature") {
        let Some(t) = t.as_f64() else {
            return Err(openai(
                format!("Invalid type for 'temperature': expected a decimal, but got {t} instead."),
                Some("temperature"),
                Some("invalid_type"),
            ));
        };
        if !(0.0..=2.0).contains(&t) {
            return Err(openai(
                format!(
                    "Invalid 'temperature': decimal above maximum value. Expected a value <= 2, but got {t} instead."
                ),
                Some("temperature"),
                Some("decimal_above_max_value"),
            ));
        }
        if openai_reasoning(model) && (t - 1.0).abs() > 1e-9 {
            return Err(openai(
                format!(
                    "Unsupported value: 'temperature' does not support {t} with this model. Only the default (1) value is supported."
                ),
                Some("temperature"),
                Some("unsupported_value"),
            ));
        }
    }
    for field in budget_fields {
        if let Some(v) = body.get(*field) {
            let min = if *field == "max_output_tokens" { 16 } else { 1 };
            match v.as_u64() {
                Some(n) if n >= min => {}
                _ => {
                    return Err(openai(
                        format!(
                            "Invalid '{field}': integer below minimum value. Expected a value >= {min}, but got {v} instead."
                        ),
                        Some(field),
                        Some("integer_below_min_value"),
                    ));
                }
            }
        }
    }
    Ok(())
}

fn effort_checked(effort: &Value, model: &str, param: &str) -> Checked {
    if openai_chat_model(model) {
        return Err(openai(
            format!("Unsupported parameter: '{param}' is not supported with this model."),
            Some(param),
            Some("unsupported_parameter"),
        ));
    }
    match effort.as_str() {
        Some(e) if EFFORTS.contains(&e) => Ok(()),
        _ => Err(openai(
            format!(
                "Invalid value: {effort}. Supported values are: 'minimal', 'low', 'medium', and 'high'."
            ),
            Some(param),
            Some("invalid_value"),
        )),
    }
}

pub(super) fn chat(request: &RecordedRequest) -> Checked {
    let Some(body) = object(request) else {
        return Err(openai(
            "We could not parse the JSON body of your request.".into(),
            None,
            None,
        ));
    };
    if let Some(unknown) = body.keys().find(|k| !CHAT_FIELDS.contains(&k.as_str())) {
        return Err(openai(
            format!("Unrecognized request argument supplied: {unknown}"),
            None,
            None,
        ));
    }
    let Some(model) = body
        .get("model")
        .and_then(Value::as_str)
        .filter(|m| !m.is_empty())
    else {
        return Err(openai(
            "you must provide a model parameter".into(),
            None,
            None,
        ));
    };
    let Some(messages) = body.get("messages").and_then(Value::as_array) else {
        return Err(openai(
            "Missing required parameter: 'messages'.".into(),
            Some("messages"),
            Some("missing_required_parameter"),
        ));
    };
    if messages.is_empty() {
        return Err(openai(
            "Invalid 'messages': empty array. Expected an array with minimum length 1, but got an empty array instead.".into(),
            Some("messages"),
            Some("empty_array"),
        ));
    }
    for (i, m) in messages.iter().enumerate() {
        let role = m.get("role").and_then(Value::as_str).unwrap_or("");
        if ![
            "system",
            "developer",
            "user",
            "assistant",
            "tool",
            "function",
        ]
        .contains(&role)
        {
            return Err(openai(
                format!(
                    "Invalid value: '{role}'. Supported values are: 'system', 'assistant', 'user', 'function', 'tool', and 'developer'."
                ),
                Some(&format!("messages[{i}].role")),
                Some("invalid_value"),
            ));
        }
        let content = m.get("content").unwrap_or(&Value::Null);
        if role != "assistant" && !(content.is_string() || content.is_array()) {
            return Err(openai(
                format!("Missing required parameter: 'messages[{i}].content'."),
                Some(&format!("messages[{i}].content")),
                Some("missing_required_parameter"),
            ));
        }
    }
    if openai_reasoning(model) && body.contains_key("max_tokens") {
        return Err(openai(
            "Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead.".into(),
            Some("max_tokens"),
            Some("unsupported_parameter"),
        ));
    }
    openai_common(body, model, &["max_tokens", "max_completion_tokens"])?;
    if let Some(effort) = body.get("reasoning_effort") {
        effort_checked(effort, model, "reasoning_effort")?;
    }
    Ok(())
}

const RESPONSES_FIELDS: &[&str] = &[
    "background",
    "conversation",
    "include",
    "input",
    "instructions",
    "max_output_tokens",
    "max_tool_calls",
    "metadata",
    "model",
    "parallel_tool_calls",
    "previous_response_id",
    "prompt",
    "prompt_cache_key",
    "reasoning",
    "safety_identifier",
    "service_tier",
    "store",
    "stream",
    "stream_options",
    "temperature",
    "text",
    "tool_choice",
    "tools",
    "top_logprobs",
    "top_p",
    "truncation",
    "user",
];

pub(super) fn responses(request: &RecordedRequest) -> Checked {
    let responses = |mut r: Rejection| {
        r.provider = Provider::OpenAiResponses;
        r
    };
    let Some(body) = object(request) else {
        return Err(responses(openai(
            "We could not parse the JSON body of your request.".into(),
            None,
            None,
        )));
    };
    if let Some(unknown) = body
        .keys()
        .find(|k| !RESPONSES_FIELDS.contains(&k.as_str()))
    {
        return Err(responses(openai(
            format!("Unknown parameter: '{unknown}'."),
            Some(unknown),
            Some("unknown_parameter"),
        )));
    }
    let Some(model) = body
        .get("model")
        .and_then(Value::as_str)
        .filter(|m| !m.is_empty())
    else {
        return Err(responses(openai(
            "Missing required parameter: 'model'.".into(),
            Some("model"),
            Some("missing_required_parameter"),
        )));
    };
    match body.get("input") {
        Some(Value::String(_)) | None => {}
        Some(Value::Array(items)) => {
            for (i, item) in items.iter().enumerate() {
                let role = item.get("role").and_then(Value::as_str).unwrap_or("");
                if !["user", "assistant", "system", "developer"].contains(&role) {
                    return Err(responses(openai(
                        format!(
                            "Invalid value: '{role}'. Supported values are: 'assistant', 'system', 'developer', and 'user'."
                        ),
                        Some(&format!("input[{i}].role")),
                        Some("invalid_value"),
                    )));
                }
                let content = item.get("content").unwrap_or(&Value::Null);
                if !(content.is_string() || content.is_array()) {
                    return Err(responses(openai(
                        format!("Missing required parameter: 'input[{i}].content'."),
                        Some(&format!("input[{i}].content")),
                        Some("missing_required_parameter"),
                    )));
                }
            }
        }
        Some(other) => {
            return Err(responses(openai(
                format!(
                    "Invalid type for 'input': expected one of a string or array of input items, but got {other} instead."
                ),
                Some("input"),
                Some("invalid_type"),
            )));
        }
    }
    openai_common(body, model, &["max_output_tokens"]).map_err(responses)?;
    if let Some(reasoning) = body.get("reasoning") {
        if let Some(unknown) = reasoning.as_object().and_then(|r| {
            r.keys()
                .find(|k| !["effort", "summary", "generate_summary"].contains(&k.as_str()))
        }) {
            return Err(responses(openai(
                format!("Unknown parameter: 'reasoning.{unknown}'."),
                Some(&format!("reasoning.{unknown}")),
                Some("unknown_parameter"),
            )));
        }
        if let Some(effort) = reasoning.get("effort") {
            effort_checked(effort, model, "reasoning.effort").map_err(responses)?;
        }
    }
    Ok(())
}

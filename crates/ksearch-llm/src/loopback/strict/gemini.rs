//! Gemini `generateContent`, as Google refuses it.

use serde_json::Value;

use super::{Checked, Rejection, object};
use crate::loopback::RecordedRequest;
use crate::spec::Provider;

fn gemini_error(status: u16, message: String) -> Rejection {
    Rejection {
        provider: Provider::Gemini,
        status,
        message,
        param: None,
        code: None,
    }
}

const GEMINI_FIELDS: &[&str] = &[
    "cachedContent",
    "contents",
    "generationConfig",
    "safetySettings",
    "systemInstruction",
    "toolConfig",
    "tools",
];

const GENERATION_FIELDS: &[&str] = &[
    "candidateCount",
    "enableEnhancedCivicAnswers",
    "frequencyPenalty",
    "imageConfig",
    "logprobs",
    "maxOutputTokens",
    "mediaResolution",
    "presencePenalty",
    "responseJsonSchema",
    "responseLogprobs",
    "responseMimeType",
    "responseModalities",
    "responseSchema",
    "seed",
    "speechConfig",
    "stopSequences",
    "temperature",
    "thinkingConfig",
    "topK",
    "topP",
];

/// The model id in a `generateContent` path.
fn gemini_model(path: &str) -> String {
    path.rsplit('/')
        .next()
        .and_then(|last| last.split(':').next())
        .unwrap_or("")
        .to_ascii_lowercase()
}

/// What a Gemini model takes in `thinkingConfig`: the budget range (with -1, dynamic, always
/// allowed), whether 0 (off) is allowed, and the levels (Gemini 3).
struct GeminiThinking {
    budget: Option<(i64, i64)>,
    off: bool,
    levels: &'static [&'static str],
}

fn gemini_thinking(model: &str) -> Option<GeminiThinking> {
    if model.starts_with("gemini-2.5-pro") {
        Some(GeminiThinking {
            budget: Some((128, 32_768)),
            off: false,
            levels: &[],
        })
    } else if model.starts_with("gemini-2.5-flash-lite") {
        Some(GeminiThinking {
            budget: Some((512, 24_576)),
            off: true,
            levels: &[],
        })
    } else if model.starts_with("gemini-2.5-flash") {
        Some(GeminiThinking {
            budget: Some((1, 24_576)),
            off: true,
            levels: &[],
        })
    } else if model.starts_with("gemini-3") && model.contains("pro") {
        Some(GeminiThinking {
            budget: Some((128, 32_768)),
            off: false,
            levels: &["low", "high"],
        })
    } else if model.starts_with("gemini-3") {
        Some(GeminiThinking {
            budget: Some((1, 24_576)),
            off: true,
            levels: &["minimal", "low", "medium", "high"],
        })
    } else {
        None
    }
}

pub(super) fn check(request: &RecordedRequest) -> Checked {
    let err = |message: String| Err(gemini_error(400, message));
    if request.header("x-goog-api-key").is_none_or(str::is_empty) {
        return Err(gemini_error(403, "Method doesn't allow unregistered callers (callers without established identity). Please use API Key or other form of API consumer identity to call this API.".into()));
    }
    let Some(body) = object(request) else {
        return err("Invalid JSON payload received. Expected an object.".into());
    };
    if let Some(unknown) = body.keys().find(|k| !GEMINI_FIELDS.contains(&k.as_str())) {
        return err(format!(
            "Invalid JSON payload received. Unknown name \"{unknown}\": Cannot find field."
        ));
    }
    let Some(contents) = body
        .get("contents")
        .and_then(Value::as_array)
        .filter(|c| !c.is_empty())
    else {
        return err("* GenerateContentRequest.contents: contents is not specified\n".into());
    };
    let empty_text = "Unable to submit request because it has an empty text parameter. Add a value to the parameter and try again.";
    for (i, content) in contents.iter().enumerate() {
        let role = content
            .get("role")
            .and_then(Value::as_str)
            .unwrap_or("user");
        if !["user", "model"].contains(&role) {
            return err("Please use a valid role: user, model.".into());
        }
        let Some(parts) = content
            .get("parts")
            .and_then(Value::as_array)
            .filter(|p| !p.is_empty())
        else {
            return err(format!(
                "* GenerateContentRequest.contents[{i}].parts: contents.parts must not be empty.\n"
            ));
        };
        if parts.iter().any(|p| {
            p.get("text")
                .is_some_and(|t| t.as_str().is_none_or(str::is_empty))
        }) {
            return err(empty_text.into());
        }
    }
    if let Some(system) = body.get("systemInstruction") {
        let parts = system.get("parts").and_then(Value::as_array);
        if parts.is_none_or(|p| {
            p.iter().any(|p| {
                p.get("text")
                    .and_then(Value::as_str)
                    .is_none_or(str::is_empty)
            })
        }) {
            return err(empty_text.into());
        }
    }
    let Some(generation) = body.get("generationConfig") else {
        return Ok(());
    };
    let Some(generation) = generation.as_object() else {
        return err("Invalid value at 'generation_config': expected an object".into());
    };
    if let Some(unknown) = generation
        .keys()
        .find(|k| !GENERATION_FIELDS.contains(&k.as_str()))
    {
        return err(format!(
            "Invalid JSON payload received. Unknown name \"{unknown}\" at 'generation_config': Cannot find field."
        ));
    }
    if let Some(t) = generation.get("temperature")
        && t.as_f64().is_none_or(|t| !(0.0..=2.0).contains(&t))
    {
        return err(format!(
            "* GenerateContentRequest.generation_config.temperature: temperature must be in the range [0.0, 2.0], got {t}\n"
        ));
    }
    if let Some(max) = generation.get("maxOutputTokens")
        && max.as_u64().is_none_or(|n| n < 1)
    {
        return err(format!(
            "* GenerateContentRequest.generation_config.max_output_tokens: max_output_tokens must be positive, got {max}\n"
        ));
    }
    let Some(thinking) = generation.get("thinkingConfig") else {
        return Ok(());
    };
    let model = gemini_model(&request.path);
    let Some(takes) = gemini_thinking(&model) else {
        return err(format!("Thinking is not supported for models/{model}."));
    };
    let Some(thinking) = thinking.as_object() else {
        return err(
            "Invalid value at 'generation_config.thinking_config': expected an object".into(),
        );
    };
    if let Some(unknown) = thinking
        .keys()
        .find(|k| !["includeThoughts", "thinkingBudget", "thinkingLevel"].contains(&k.as_str()))
    {
        return err(format!(
            "Invalid JSON payload received. Unknown name \"{unknown}\" at 'generation_config.thinking_config': Cannot find field."
        ));
    }
    let budget = thinking.get("thinkingBudget");
    let level = thinking.get("thinkingLevel");
    if budget.is_some() && level.is_some() {
        return err("You can only set one of thinking budget and thinking level.".into());
    }
    if let Some(level) = level {
        let level = level.as_str().unwrap_or("").to_ascii_lowercase();
        if takes.levels.is_empty() {
            return err(format!(
                "Thinking level is not supported for models/{model}."
            ));
        }
        if !takes.levels.contains(&level.as_str()) {
            return err(format!(
                "Thinking level {level} is not supported for models/{model}; it takes {}.",
                takes.levels.join(", ")
            ));
        }
    }
    if let Some(budget) = budget {
        let Some(n) = budget.as_i64() else {
            return err(format!(
                "Invalid value at 'generation_config.thinking_config.thinking_budget' ({budget})"
            ));
        };
        if n == 0 && !takes.off {
            return err("Budget 0 is invalid. This model only works in thinking mode.".into());
        }
        if let Some((lo, hi)) = takes.budget
            && n != -1
            && n != 0
            && !(lo..=hi).contains(&n)
        {
            return err(format!(
                "The thinking budget {n} is invalid. Please choose a value between {lo} and {hi}."
            ));
        }
    }
    Ok(())
}

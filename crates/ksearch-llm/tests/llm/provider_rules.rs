//! Per-provider rules: the loopback's strict schemas refuse what the providers refuse, a
//! provider's own output budget, and the reasoning effort as Anthropic's thinking and Gemini's
//! `thinkingConfig`, every request checked by the strict schemas.

use ksearch_llm::loopback::{Reply, ScriptedServer};
use ksearch_llm::{
    CompletionRequest, LlmError, Message, ModelSpec, Provider, Usage, client_with_env,
    reasoning_effort_note,
};
use serde_json::{Value, json};

use crate::support::{make_client, request, test_settings};

#[test]
fn the_loopback_refuses_by_default_what_the_provider_refuses() {
    // Anthropic takes temperatures up to 1; Gemini no empty text part.
    for provider in [Provider::Anthropic, Provider::Gemini] {
        let mut bad = request();
        match provider {
            Provider::Anthropic => {
                bad.temperature = Some(1.5);
            }
            _ => bad.messages[2] = Message::assistant(""),
        }
        let ok = || Reply::success(provider, "ok", &Usage::default());
        let server = ScriptedServer::start(vec![ok()]);
        let mut settings = test_settings(provider, &server);
        settings.reasoning_effort = None;
        let error = make_client(provider, settings)
            .complete(&bad)
            .expect_err("refused");
        let LlmError::Api {
            status, message, ..
        } = &error
        else {
            panic!("{provider}: {error:?}");
        };
        assert_eq!(*status, 400, "{provider}");
        assert!(
            message.contains("temperature") || message.contains("empty text"),
            "{provider}: {message}"
        );
        assert_eq!(server.request_count(), 1, "a 400 is not retried");
        assert_eq!(server.rejections().len(), 1);
        assert_eq!(server.remaining(), 1, "the script was not used");
        // The lenient server answers anything.
        let lenient = ScriptedServer::start_lenient(vec![ok()]);
        let mut settings = test_settings(provider, &lenient);
        settings.reasoning_effort = None;
        let answer = make_client(provider, settings)
            .complete(&bad)
            .expect("lenient");
        assert_eq!(answer.text, "ok");
    }
}

/// The output budget each provider's request carries.
fn budget(provider: Provider, body: &Value) -> &Value {
    match provider {
        Provider::OpenAiChat => &body["max_completion_tokens"],
        Provider::OpenAiResponses => &body["max_output_tokens"],
        Provider::Gemini => &body["generationConfig"]["maxOutputTokens"],
        Provider::Anthropic => &body["max_tokens"],
        Provider::Exec | Provider::Manual => unreachable!("not an HTTP provider"),
    }
}

#[test]
fn a_provider_s_own_max_output_tokens_replaces_the_request_s() {
    for provider in Provider::ALL {
        let server = ScriptedServer::start(vec![
            Reply::success(provider, "ok", &Usage::default()),
            Reply::success(provider, "ok", &Usage::default()),
        ]);
        let mut own = test_settings(provider, &server);
        own.max_output_tokens = Some(3000);
        make_client(provider, own).complete(&request()).expect("ok");
        make_client(provider, test_settings(provider, &server))
            .complete(&request())
            .expect("ok");
        let requests = server.requests();
        assert_eq!(budget(provider, &requests[0].body), 3000, "{provider}");
        assert_eq!(budget(provider, &requests[1].body), 4096, "{provider}");
    }
}

/// The body `model` gets for `effort` with `max_output_tokens`, from a strict server that
/// accepted it.
fn sent(spec: &str, effort: &str, max_output_tokens: u32) -> Value {
    let spec: ModelSpec = spec.parse().expect("spec");
    let server =
        ScriptedServer::start(vec![Reply::success(spec.provider, "ok", &Usage::default())]);
    let mut settings = test_settings(spec.provider, &server);
    settings.reasoning_effort = Some(effort.to_string());
    let llm = client_with_env(&spec, settings, |_| None).expect("client");
    let mut r = CompletionRequest::new(vec![Message::system("s"), Message::user("u")]);
    r.max_output_tokens = Some(max_output_tokens);
    r.temperature = Some(0.2);
    let result = llm.complete(&r);
    assert!(
        server.rejections().is_empty(),
        "{spec} {effort}: {:?}",
        server.rejections()
    );
    result.unwrap_or_else(|e| panic!("{spec} {effort}: {e}"));
    server.requests()[0].body.clone()
}

#[test]
fn an_effort_is_anthropic_s_thinking_where_a_model_has_it() {
    for (effort, budget) in [
        ("minimal", 1024),
        ("low", 2048),
        ("medium", 8192),
        ("high", 16_384),
    ] {
        let body = sent("anthropic:claude-sonnet-4-5", effort, 64_000);
        assert_eq!(
            body["thinking"],
            json!({"type": "enabled", "budget_tokens": budget})
        );
        assert!(body.get("temperature").is_none(), "{body}");
    }
    // Half the output at most.
    let body = sent("anthropic:claude-opus-4-1", "high", 8192);
    assert_eq!(body["thinking"]["budget_tokens"], 4096);
    // No room, or no extended thinking: no thinking, and the temperature as asked.
    for (spec, max) in [
        ("anthropic:claude-sonnet-4-5", 1500),
        ("anthropic:claude-3-5-haiku-latest", 64_000),
    ] {
        let body = sent(spec, "high", max);
        assert!(body.get("thinking").is_none(), "{spec}: {body}");
        assert_eq!(body["temperature"], 0.2);
    }
}

#[test]
fn an_effort_is_gemini_s_thinking_config_where_a_model_has_it() {
    let cases = [
        ("gemini-2.5-pro", "minimal", json!({"thinkingBudget": 512})),
        ("gemini-2.5-pro", "high", json!({"thinkingBudget": 16_000})),
        ("gemini-2.5-flash", "none", json!({"thinkingBudget": 0})),
        (
            "gemini-2.5-flash",
            "medium",
            json!({"thinkingBudget": 8192}),
        ),
        (
            "gemini-2.5-flash-lite",
            "low",
            json!({"thinkingBudget": 2048}),
        ),
        (
            "gemini-3-pro-preview",
            "low",
            json!({"thinkingLevel": "low"}),
        ),
        (
            "gemini-3-pro-preview",
            "medium",
            json!({"thinkingLevel": "high"}),
        ),
        (
            "gemini-3-flash-preview",
            "medium",
            json!({"thinkingLevel": "medium"}),
        ),
    ];
    for (model, effort, expected) in cases {
        let body = sent(&format!("gemini:{model}"), effort, 32_000);
        assert_eq!(
            body["generationConfig"]["thinkingConfig"], expected,
            "{model} {effort}"
        );
    }
    // No thinking on 2.0, none that turns 2.5 Pro's off.
    for (model, effort) in [("gemini-2.0-flash", "high"), ("gemini-2.5-pro", "none")] {
        let body = sent(&format!("gemini:{model}"), effort, 32_000);
        assert!(
            body["generationConfig"].get("thinkingConfig").is_none(),
            "{model} {effort}: {body}"
        );
    }
}

#[test]
fn where_an_effort_does_nothing_it_is_said_once_with_why() {
    let note = |spec: &str, effort: &str, max: u32| {
        reasoning_effort_note(&spec.parse().expect("spec"), effort, Some(max))
    };
    for (spec, effort, max) in [
        ("anthropic:claude-sonnet-4-5", "high", 16_000),
        ("gemini:gemini-2.5-flash", "none", 16_000),
        ("gemini:gemini-3-pro-preview", "high", 16_000),
        ("openai:gpt-5", "high", 16_000),
        ("openai:qwen2.5-coder:32b", "high", 16_000),
        ("openai-responses:o3", "low", 16_000),
    ] {
        assert_eq!(note(spec, effort, max), None, "{spec} {effort}");
    }
    for (spec, effort, max, why) in [
        (
            "anthropic:claude-3-5-haiku-latest",
            "high",
            16_000,
            "no extended thinking",
        ),
        ("anthropic:claude-sonnet-4-5", "high", 1500, "no room"),
        (
            "anthropic:claude-sonnet-4-5",
            "max",
            16_000,
            "not an effort",
        ),
        (
            "gemini:gemini-2.0-flash",
            "high",
            16_000,
            "no thinkingConfig",
        ),
        (
            "gemini:gemini-2.5-pro",
            "none",
            16_000,
            "cannot turn thinking off",
        ),
        ("openai:gpt-4o", "high", 16_000, "chat models"),
        ("exec:cat", "high", 16_000, "a command"),
    ] {
        let text = note(spec, effort, max).unwrap_or_else(|| panic!("{spec}: no note"));
        assert!(text.contains(why), "{spec}: {text}");
        assert!(text.contains("does nothing for"), "{text}");
    }
}

//! Shared helpers: configs pointing at a loopback server, the conversation every wire test
//! sends, and what each provider must receive.

use std::time::Duration;

use ksearch_llm::loopback::{RecordedRequest, ScriptedServer};
use ksearch_llm::{
    ClientSettings, CompletionRequest, LlmClient, Message, ModelSpec, Provider, Secret, Usage,
    client_with_env,
};
use serde_json::{Value, json};

pub(crate) const KEY: &str = "test-key-0123";
pub(crate) const SYSTEM: &str = "You optimise C kernels.";
pub(crate) const FIRST: &str = "Here is the kernel.";
pub(crate) const EARLIER: &str = "Understood.";
pub(crate) const USER: &str = "Unroll the inner loop by 4.";

/// A model id per provider.
pub(crate) fn spec(provider: Provider) -> ModelSpec {
    let model = match provider {
        Provider::OpenAiChat => "gpt-5-mini",
        Provider::OpenAiResponses => "o4-mini",
        Provider::Gemini => "gemini-2.5-flash",
        Provider::Anthropic => "claude-haiku-4-5",
        Provider::Exec | Provider::Manual => "cat",
    };
    ModelSpec::new(provider, model)
}

/// The base URL of `server` for `provider` (OpenAI's includes the version).
pub(crate) fn base_url(provider: Provider, server: &ScriptedServer) -> String {
    match provider {
        Provider::OpenAiChat | Provider::OpenAiResponses => format!("{}/v1", server.url()),
        Provider::Gemini | Provider::Anthropic => server.url(),
        Provider::Exec | Provider::Manual => unreachable!("a command is not reached over HTTP"),
    }
}

/// Where `provider`'s request must arrive.
pub(crate) fn expected_path(provider: Provider) -> String {
    match provider {
        Provider::OpenAiChat => "/v1/chat/completions".to_string(),
        Provider::OpenAiResponses => "/v1/responses".to_string(),
        Provider::Gemini => format!("/v1beta/models/{}:generateContent", spec(provider).model),
        Provider::Anthropic => "/v1/messages".to_string(),
        Provider::Exec | Provider::Manual => unreachable!("a command is not reached over HTTP"),
    }
}

/// Fast settings for tests: 1 s timeout, short backoff.
pub(crate) fn test_settings(provider: Provider, server: &ScriptedServer) -> ClientSettings {
    ClientSettings {
        base_url: Some(base_url(provider, server)),
        api_key: Some(Secret::new(KEY)),
        timeout: Duration::from_secs(1),
        max_retries: 2,
        backoff_initial: Duration::from_millis(10),
        backoff_max: Duration::from_millis(50),
        reasoning_effort: Some("high".to_string()),
        max_output_tokens: None,
        allow_plain_http: false,
        extra_headers: vec![("x-ksearch-test".to_string(), "yes".to_string())],
        secrets: Vec::new(),
    }
}

/// A client with no environment at all (nothing leaks in from the machine running the tests).
pub(crate) fn make_client(provider: Provider, settings: ClientSettings) -> Box<dyn LlmClient> {
    client_with_env(&spec(provider), settings, |_| None).expect("client builds")
}

/// The conversation every wire test sends: system, user, assistant, user.
pub(crate) fn request() -> CompletionRequest {
    CompletionRequest {
        messages: vec![
            Message::system(SYSTEM),
            Message::user(FIRST),
            Message::assistant(EARLIER),
            Message::user(USER),
        ],
        max_output_tokens: Some(4096),
        temperature: Some(0.2),
    }
}

/// Usage with every field non-zero.
pub(crate) fn usage() -> Usage {
    Usage {
        input_tokens: 1200,
        output_tokens: 340,
        cached_input_tokens: 1000,
        reasoning_tokens: 120,
        cache_write_tokens: 0,
    }
}

/// Checks method, path, auth and body shape of a request made from [`request`] with
/// [`test_settings`].
pub(crate) fn assert_request_shape(provider: Provider, req: &RecordedRequest) {
    let model = spec(provider).model;
    assert_eq!(req.method, "POST");
    assert_eq!(req.path, expected_path(provider));
    assert!(
        !req.path.contains("key="),
        "no key in the URL: {}",
        req.path
    );
    assert_eq!(req.header("content-type"), Some("application/json"));
    assert_eq!(req.header("x-ksearch-test"), Some("yes"));
    let body = &req.body;
    match provider {
        Provider::OpenAiChat => {
            assert_eq!(
                req.header("authorization"),
                Some(format!("Bearer {KEY}").as_str())
            );
            assert_eq!(body["model"], model);
            assert_eq!(
                body["messages"],
                json!([
                    {"role": "system", "content": SYSTEM},
                    {"role": "user", "content": FIRST},
                    {"role": "assistant", "content": EARLIER},
                    {"role": "user", "content": USER},
                ])
            );
            // gpt-5-mini is one of OpenAI's reasoning models, on any server: the effort, the
            // budget as `max_completion_tokens`, and no temperature but 1 (0.2 was asked).
            assert_eq!(body["max_completion_tokens"], 4096);
            assert!(body.get("temperature").is_none(), "{body}");
            assert_eq!(body["reasoning_effort"], "high");
            assert!(body.get("max_tokens").is_none());
        }
        Provider::OpenAiResponses => {
            assert_eq!(
                req.header("authorization"),
                Some(format!("Bearer {KEY}").as_str())
            );
            assert_eq!(body["model"], model);
            assert_eq!(body["instructions"], SYSTEM);
            assert_eq!(
                body["input"],
                json!([
                    {"type": "message", "role": "user", "content": FIRST},
                    {"type": "message", "role": "assistant", "content": EARLIER},
                    {"type": "message", "role": "user", "content": USER},
                ])
            );
            assert_eq!(body["max_output_tokens"], 4096);
            // o4-mini reasons: no temperature but 1.
            assert!(body.get("temperature").is_none(), "{body}");
            assert_eq!(body["reasoning"], json!({"effort": "high"}));
            assert_eq!(body["store"], false);
            assert!(body.get("messages").is_none());
        }
        Provider::Gemini => {
            assert_eq!(req.header("x-goog-api-key"), Some(KEY));
            assert_eq!(req.header("authorization"), None);
            assert!(body.get("model").is_none(), "the model is in the path");
            assert_eq!(
                body["systemInstruction"],
                json!({"parts": [{"text": SYSTEM}]})
            );
            assert_eq!(
                body["contents"],
                json!([
                    {"role": "user", "parts": [{"text": FIRST}]},
                    {"role": "model", "parts": [{"text": EARLIER}]},
                    {"role": "user", "parts": [{"text": USER}]},
                ])
            );
            assert_eq!(
                body["generationConfig"],
                json!({"maxOutputTokens": 4096, "temperature": 0.2,
                       // The effort as Gemini 2.5's thinking budget, half the output at most.
                       "thinkingConfig": {"thinkingBudget": 2048}})
            );
        }
        Provider::Anthropic => {
            assert_eq!(req.header("x-api-key"), Some(KEY));
            assert_eq!(req.header("anthropic-version"), Some("2023-06-01"));
            assert_eq!(req.header("authorization"), None);
            assert_eq!(body["model"], model);
            assert_eq!(body["system"], SYSTEM);
            assert_eq!(
                body["messages"],
                json!([
                    {"role": "user", "content": FIRST},
                    {"role": "assistant", "content": EARLIER},
                    {"role": "user", "content": USER},
                ])
            );
            assert_eq!(body["max_tokens"], 4096);
            // The effort as extended thinking, half the output at most; thinking takes no
            // temperature but 1, so 0.2 is left out.
            assert_eq!(
                body["thinking"],
                json!({"type": "enabled", "budget_tokens": 2048})
            );
            assert!(body.get("temperature").is_none(), "{body}");
        }
        Provider::Exec | Provider::Manual => unreachable!("a command is not reached over HTTP"),
    }
}

/// The finish reason each canonical body reports.
pub(crate) fn canonical_finish(provider: Provider) -> &'static str {
    match provider {
        Provider::OpenAiChat => "stop",
        Provider::OpenAiResponses => "completed",
        Provider::Gemini => "STOP",
        Provider::Anthropic => "end_turn",
        Provider::Exec | Provider::Manual => unreachable!("a command reports no finish reason"),
    }
}

/// Sets `body[path...] = value`.
pub(crate) fn set(body: &mut Value, path: &[&str], value: Value) {
    let mut at = body;
    for key in path {
        at = &mut at[*key];
    }
    *at = value;
}

//! Timeouts, connection failures, redirects, keys and base URLs.

use std::net::TcpListener;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use ksearch_llm::loopback::{Reply, ScriptedServer};
use ksearch_llm::{
    ANSWER_OVER_CAP, ClientSettings, CompletionRequest, Failure, LlmError, MAX_ANSWER_BYTES,
    Message, ModelSpec, Provider, Usage, client_with_env,
};

use crate::support::{make_client, request, spec, test_settings};

#[test]
fn hang_with_no_retry_left_is_a_timeout_error() {
    let provider = Provider::OpenAiChat;
    let server = ScriptedServer::start(vec![Reply::hang(Duration::from_secs(10))]);
    let settings = ClientSettings {
        max_retries: 0,
        ..test_settings(provider, &server)
    };
    let llm = make_client(provider, settings);
    let started = Instant::now();
    let error = llm.complete(&request()).expect_err("timeout");
    let took = started.elapsed();
    assert!(
        took >= Duration::from_millis(950) && took < Duration::from_secs(3),
        "{took:?}"
    );
    assert!(error.is_timeout(), "{error:?}");
    let message = error.to_string();
    assert!(message.contains("after 1 attempt;"), "{message}");
    assert!(message.contains("timeout"), "{message}");
}

#[test]
fn connection_refused_is_retried_then_reported() {
    // A port nobody listens on.
    let port = TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("port")
        .port();
    let settings = ClientSettings {
        base_url: Some(format!("http://127.0.0.1:{port}")),
        max_retries: 1,
        ..ClientSettings {
            api_key: Some("k".into()),
            timeout: Duration::from_secs(1),
            backoff_initial: Duration::from_millis(5),
            backoff_max: Duration::from_millis(5),
            ..ClientSettings::default()
        }
    };
    let llm = make_client(Provider::Anthropic, settings);
    let error = llm.complete(&request()).expect_err("refused");
    match &error {
        LlmError::RetriesExhausted {
            attempts: 2,
            last: Failure::Connection { .. },
            ..
        } => {}
        other => panic!("unexpected {other:?}"),
    }
    assert!(error.to_string().contains("connection failed"), "{error}");
}

#[test]
fn dropped_connection_is_retried() {
    let provider = Provider::Gemini;
    let server = ScriptedServer::start(vec![
        Reply::Close,
        Reply::success(provider, "ok", &Usage::default()),
    ]);
    let llm = make_client(provider, test_settings(provider, &server));
    let answer = llm.complete(&request()).expect("answer");
    assert_eq!(answer.http_attempts, 2);
}

/// `when` as an IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`).
fn http_date(when: SystemTime) -> String {
    httpdate::fmt_http_date(when)
}

#[test]
fn retry_after_as_http_date_is_honoured() {
    assert_eq!(
        http_date(UNIX_EPOCH + Duration::from_secs(784_111_777)),
        "Sun, 06 Nov 1994 08:49:37 GMT"
    );
    let provider = Provider::Anthropic;
    // A date 3 s ahead (2 to 3 s once cut to whole seconds): the retry waits for it, which the
    // test's backoff (50 ms at most) would not.
    let server = ScriptedServer::start(vec![
        Reply::provider_error(provider, 529, "Overloaded").with_header(
            "retry-after",
            &http_date(SystemTime::now() + Duration::from_secs(3)),
        ),
        Reply::success(provider, "ok", &Usage::default()),
    ]);
    let llm = make_client(provider, test_settings(provider, &server));
    let started = Instant::now();
    let answer = llm.complete(&request()).expect("answer");
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_millis(1900),
        "waited only {waited:?}"
    );
    assert!(waited < Duration::from_secs(5), "waited {waited:?}");
    assert_eq!(answer.http_attempts, 2);
    // A date in the past: retry at once (the backoff still applies).
    let server = ScriptedServer::start(vec![
        Reply::provider_error(provider, 529, "Overloaded")
            .with_header("retry-after", "Thu, 01 Jan 2015 00:00:00 GMT"),
        Reply::success(provider, "ok", &Usage::default()),
    ]);
    let llm = make_client(provider, test_settings(provider, &server));
    let started = Instant::now();
    let answer = llm.complete(&request()).expect("answer");
    assert!(started.elapsed() < Duration::from_secs(1));
    assert_eq!(answer.http_attempts, 2);
}

#[test]
fn redirects_are_not_followed() {
    let provider = Provider::Anthropic;
    let server = ScriptedServer::start(vec![
        Reply::raw(307, "").with_header("location", "http://127.0.0.1:9/elsewhere"),
        Reply::success(provider, "must not be reached", &Usage::default()),
    ]);
    let llm = make_client(provider, test_settings(provider, &server));
    let error = llm.complete(&request()).expect_err("redirect");
    assert_eq!(server.request_count(), 1);
    assert_eq!(error.status(), Some(307));
    assert!(error.to_string().contains("not followed"), "{error}");
}

#[test]
fn html_error_page_is_quoted() {
    let provider = Provider::OpenAiChat;
    let server = ScriptedServer::start(vec![Reply::raw(
        400,
        "<html><body>400 Bad Request</body></html>",
    )]);
    let llm = make_client(provider, test_settings(provider, &server));
    let error = llm.complete(&request()).expect_err("400");
    assert_eq!(server.request_count(), 1);
    assert!(
        error.to_string().contains("400 Bad Request</body>"),
        "{error}"
    );
}

#[test]
fn gemini_bad_key_400_hints_at_the_variable() {
    let provider = Provider::Gemini;
    let server = ScriptedServer::start(vec![Reply::provider_error(
        provider,
        400,
        "API key not valid. Please pass a valid API key.",
    )]);
    let llm = make_client(provider, test_settings(provider, &server));
    let error = llm.complete(&request()).expect_err("400");
    assert_eq!(server.request_count(), 1);
    assert!(error.to_string().contains("GEMINI_API_KEY"), "{error}");
}

/// `x-should-retry` decides, as in the providers' SDKs: `false` on a 500 stops at once, `true`
/// on a 400 retries.
#[test]
fn x_should_retry_overrides_the_status() {
    let provider = Provider::Anthropic;
    let server = ScriptedServer::start(vec![
        Reply::provider_error(provider, 500, "do not bother")
            .with_header("x-should-retry", "false"),
        Reply::success(provider, "unreached", &Usage::default()),
    ]);
    let llm = make_client(provider, test_settings(provider, &server));
    llm.complete(&request()).expect_err("not retried");
    assert_eq!(server.request_count(), 1);

    let server = ScriptedServer::start(vec![
        Reply::provider_error(provider, 400, "try again").with_header("x-should-retry", "true"),
        Reply::success(provider, "ok", &Usage::default()),
    ]);
    let llm = make_client(provider, test_settings(provider, &server));
    assert_eq!(llm.complete(&request()).expect("retried").text, "ok");
    assert_eq!(server.request_count(), 2);
}

/// OpenAI's 429 for an account without credit is not retried: waiting does not help.
#[test]
fn a_429_for_no_quota_is_not_retried() {
    let provider = Provider::OpenAiChat;
    let mut body = ksearch_llm::loopback::error_body(
        provider,
        429,
        "You exceeded your current quota, please check your plan and billing details.",
    );
    body["error"]["code"] = "insufficient_quota".into();
    body["error"]["type"] = "insufficient_quota".into();
    let server = ScriptedServer::start(vec![Reply::json(429, body)]);
    let llm = make_client(provider, test_settings(provider, &server));
    let error = llm.complete(&request()).expect_err("429").to_string();
    assert_eq!(server.request_count(), 1);
    assert!(error.contains("no quota or credit left"), "{error}");
}

/// Ollama's answer to a reasoning effort for a model that does not think, and vLLM's to an
/// effort it does not list: the error says which parameter and how to leave it out.
#[test]
fn a_refused_parameter_is_named_with_how_to_leave_it_out() {
    let provider = Provider::OpenAiChat;
    for message in [
        "\"qwen2.5-coder:32b\" does not support thinking (reasoning_effort)",
        "1 validation error: reasoning_effort: Input should be 'low', 'medium' or 'high'",
    ] {
        let server = ScriptedServer::start(vec![Reply::provider_error(provider, 400, message)]);
        let llm = make_client(provider, test_settings(provider, &server));
        let error = llm.complete(&request()).expect_err("400").to_string();
        assert_eq!(server.request_count(), 1, "not retried");
        assert!(error.contains(message), "{error}");
        assert!(
            error.contains("leave `reasoning_effort` unset for it"),
            "{error}"
        );
    }
}

#[test]
fn local_openai_compatible_server_needs_no_key() {
    for provider in [Provider::OpenAiChat, Provider::OpenAiResponses] {
        let server =
            ScriptedServer::start(vec![Reply::success(provider, "local", &Usage::default())]);
        let settings = ClientSettings {
            api_key: None,
            ..test_settings(provider, &server)
        };
        let llm = client_with_env(&spec(provider), settings, |_| None).expect("no key needed");
        let answer = llm.complete(&request()).expect("answer");
        assert_eq!(answer.text, "local");
        assert_eq!(server.requests()[0].header("authorization"), None);
    }
}

#[test]
fn a_local_server_answer_without_usage_or_ids() {
    // What llama.cpp / Ollama-style servers may send: no id, no usage, no finish reason.
    let server = ScriptedServer::start(vec![Reply::ok(serde_json::json!({
        "choices": [{"message": {"role": "assistant", "content": "hi"}}]
    }))]);
    let llm = make_client(
        Provider::OpenAiChat,
        test_settings(Provider::OpenAiChat, &server),
    );
    let answer = llm.complete(&request()).expect("answer");
    assert_eq!(answer.text, "hi");
    assert_eq!(answer.usage, Usage::default());
    assert_eq!(
        answer.model, "gpt-5-mini",
        "the requested model when the reply names none"
    );
    assert_eq!(answer.finish_reason, None);
}

#[test]
fn openai_base_url_and_key_come_from_the_environment() {
    let provider = Provider::OpenAiChat;
    let server = ScriptedServer::start(vec![Reply::success(provider, "env", &Usage::default())]);
    let base = format!("{}/v1", server.url());
    let settings = ClientSettings {
        timeout: Duration::from_secs(2),
        ..ClientSettings::default()
    };
    let llm = client_with_env(&spec(provider), settings, |name| match name {
        "OPENAI_BASE_URL" => Some(format!("{base}/")),
        // As read from a file: a trailing newline.
        "OPENAI_API_KEY" => Some("env-key\n".to_string()),
        _ => None,
    })
    .expect("client");
    let answer = llm
        .complete(&CompletionRequest::new(vec![Message::user("x")]))
        .expect("answer");
    assert_eq!(answer.text, "env");
    let req = &server.requests()[0];
    assert_eq!(req.path, "/v1/chat/completions");
    assert_eq!(req.header("authorization"), Some("Bearer env-key"));
    // No limits in the request: the provider's defaults apply.
    assert!(req.body.get("max_completion_tokens").is_none());
    assert!(req.body.get("max_tokens").is_none());
    assert!(req.body.get("temperature").is_none());
    assert!(req.body.get("reasoning_effort").is_none());
}

#[test]
fn anthropic_max_tokens_defaults_to_8192() {
    let provider = Provider::Anthropic;
    let server = ScriptedServer::start(vec![Reply::success(provider, "x", &Usage::default())]);
    let llm = make_client(provider, test_settings(provider, &server));
    llm.complete(&CompletionRequest::new(vec![Message::user("x")]))
        .expect("answer");
    let body = &server.requests()[0].body;
    assert_eq!(body["max_tokens"], 8192);
    assert!(body.get("system").is_none());
}

#[test]
fn bad_base_urls_are_settings_errors() {
    for base in [
        "not a url",
        "ftp://example.com",
        "https://user:pw@example.com",
    ] {
        let settings = ClientSettings {
            base_url: Some(base.to_string()),
            api_key: Some("k".into()),
            ..ClientSettings::default()
        };
        let spec: ModelSpec = "anthropic:claude-haiku-4-5".parse().expect("spec");
        let error = client_with_env(&spec, settings, |_| None).expect_err(base);
        assert!(matches!(error, LlmError::Settings { .. }), "{error:?}");
    }
}

/// What a provider sends is bounded before it reaches the run's record: an answer over
/// MAX_ANSWER_BYTES is cut to an excerpt and counts as cut off (asked again, never sent back);
/// a body too large to hold any answer ksearch takes is not read past its bound. A 100 MB
/// answer had gone whole into run.sqlite.
#[test]
fn an_answer_over_the_cap_is_cut_and_a_body_over_its_bound_is_not_read() {
    let long = "y".repeat(MAX_ANSWER_BYTES + 1);
    for provider in Provider::ALL {
        let server = ScriptedServer::start(vec![
            Reply::success(provider, &long, &Usage::default()),
            Reply::success(provider, &long[..MAX_ANSWER_BYTES], &Usage::default()),
            Reply::raw(200, "x".repeat(4 * MAX_ANSWER_BYTES + 1)),
        ]);
        let settings = ClientSettings {
            timeout: Duration::from_secs(20),
            max_retries: 0,
            ..test_settings(provider, &server)
        };
        let llm = make_client(provider, settings);
        let answer = llm.complete(&request()).expect("over the cap");
        assert_eq!(
            answer.finish_reason.as_deref(),
            Some(ANSWER_OVER_CAP),
            "{provider}"
        );
        assert!(answer.is_truncated(), "{provider}");
        assert!(
            answer.text.len() < 8192,
            "{provider}: {}",
            answer.text.len()
        );
        let answer = llm.complete(&request()).expect("at the cap");
        assert_eq!(answer.text.len(), MAX_ANSWER_BYTES, "{provider}");
        assert!(!answer.is_truncated(), "{provider}");
        let error = llm.complete(&request()).expect_err("body over its bound");
        assert!(
            matches!(error, LlmError::Malformed { .. }) && error.to_string().contains("16 MiB"),
            "{provider}: {error}"
        );
    }
}

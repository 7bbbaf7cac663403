//! The same scenarios for each of the four wire formats.

use std::time::{Duration, Instant};

use ksearch_llm::loopback::{self, LOOPBACK_MODEL, Reply, ScriptedServer};
use ksearch_llm::{ClientSettings, Failure, LlmError, Provider, Usage};
use serde_json::json;

use crate::support::{
    assert_request_shape, canonical_finish, make_client, request, set, test_settings, usage,
};

/// A normal answer: the request has the provider's shape; text, model, finish reason and every
/// usage field come back.
fn normal_answer_with_usage(provider: Provider) {
    let mut body = loopback::success_body(provider, "The answer.", &usage());
    let mut expected = usage();
    match provider {
        // Anthropic splits input into uncached, cache writes and cache reads, and reports no
        // reasoning count; a thinking block must not reach the text.
        Provider::Anthropic => {
            set(&mut body, &["usage", "input_tokens"], json!(150));
            set(
                &mut body,
                &["usage", "cache_creation_input_tokens"],
                json!(50),
            );
            set(
                &mut body,
                &["content"],
                json!([
                    {"type": "thinking", "thinking": "let me see", "signature": "sig"},
                    {"type": "text", "text": "The answer."}
                ]),
            );
            expected.reasoning_tokens = 0;
            // The 50 written to the cache are counted apart (they have their own price).
            expected.cache_write_tokens = 50;
        }
        // A thought summary part must not reach the text.
        Provider::Gemini => set(
            &mut body,
            &["candidates"],
            json!([{
                "content": {"role": "model", "parts": [
                    {"text": "Thinking about loops", "thought": true},
                    {"text": "The answer."}
                ]},
                "finishReason": "STOP", "index": 0
            }]),
        ),
        Provider::OpenAiChat | Provider::OpenAiResponses => {}
        Provider::Exec | Provider::Manual => unreachable!("a command is not reached over HTTP"),
    }
    let server = ScriptedServer::start(vec![Reply::ok(body)]);
    let llm = make_client(provider, test_settings(provider, &server));
    let answer = llm.complete(&request()).expect("answer");

    assert_eq!(answer.text, "The answer.");
    assert_eq!(answer.usage, expected);
    assert_eq!(answer.model, LOOPBACK_MODEL);
    assert_eq!(
        answer.finish_reason.as_deref(),
        Some(canonical_finish(provider))
    );
    assert_eq!(answer.http_attempts, 1);
    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    assert_request_shape(provider, &requests[0]);
}

/// A 200 whose body is not JSON, then one of the wrong shape: both `Malformed`, neither retried.
fn malformed_json(provider: Provider) {
    let server = ScriptedServer::start(vec![
        Reply::raw(200, r#"{"id": "x", "choices": [{"message": "#),
        Reply::ok(json!({"object": "list", "data": []})),
    ]);
    let llm = make_client(provider, test_settings(provider, &server));

    let error = llm.complete(&request()).expect_err("not JSON");
    assert!(
        matches!(error, LlmError::Malformed { provider: p, .. } if p == provider),
        "{error:?}"
    );
    let message = error.to_string();
    assert!(message.contains("malformed"), "{message}");
    assert!(message.contains("not JSON"), "{message}");
    assert!(message.contains(provider.prefix()), "{message}");
    assert_eq!(
        server.request_count(),
        1,
        "a malformed answer is not retried"
    );

    let error = llm.complete(&request()).expect_err("wrong shape");
    assert!(matches!(error, LlmError::Malformed { .. }), "{error:?}");
    assert!(
        error.to_string().contains("unexpected shape")
            || error.to_string().contains("no `candidates`"),
        "{error}"
    );
    assert_eq!(server.request_count(), 2);
}

/// Prose around a fenced block comes back byte for byte.
fn prose_around_fenced_code(provider: Provider) {
    let text = "Here is the unrolled kernel:\n\n```c\nvoid scale(float *x, int n) {\n    for (int i = 0; i < n; i += 4) {\n        x[i] *= 2.0f; x[i + 1] *= 2.0f;\n    }\n}\n```\n\nIt assumes `n % 4 == 0` — \"quotes\", tabs\tand unicode ✓ survive.\n";
    let server = ScriptedServer::start(vec![Reply::success(provider, text, &Usage::default())]);
    let llm = make_client(provider, test_settings(provider, &server));
    let answer = llm.complete(&request()).expect("answer");
    assert_eq!(answer.text, text);
}

/// 429 asking for a second, then success: one retry, after at least about a second. The delay
/// is where each provider puts it: a `Retry-After` header, or for Gemini, which sends none, a
/// `google.rpc.RetryInfo` entry in the error body.
fn rate_limited_then_success(provider: Provider) {
    let limited = match provider {
        Provider::Gemini => {
            let mut body = ksearch_llm::loopback::error_body(
                provider,
                429,
                "Resource has been exhausted (e.g. check quota).",
            );
            body["error"]["details"] = serde_json::json!([
                {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "1s"}
            ]);
            Reply::json(429, body)
        }
        _ => Reply::provider_error(provider, 429, "Rate limit reached")
            .with_header("Retry-After", "1"),
    };
    let server = ScriptedServer::start(vec![limited, Reply::success(provider, "ok", &usage())]);
    let llm = make_client(provider, test_settings(provider, &server));
    let started = Instant::now();
    let answer = llm.complete(&request()).expect("answer after the retry");
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_millis(950),
        "waited only {waited:?}"
    );
    assert!(waited < Duration::from_secs(5), "waited {waited:?}");
    assert_eq!(answer.text, "ok");
    assert_eq!(answer.http_attempts, 2);
    assert_eq!(server.request_count(), 2);
}

/// 500, then success.
fn server_error_then_success(provider: Provider) {
    let server = ScriptedServer::start(vec![
        Reply::provider_error(provider, 500, "internal error"),
        Reply::success(provider, "ok", &usage()),
    ]);
    let llm = make_client(provider, test_settings(provider, &server));
    let answer = llm.complete(&request()).expect("answer after the retry");
    assert_eq!(answer.text, "ok");
    assert_eq!(answer.http_attempts, 2);
    assert_eq!(server.request_count(), 2);
    // Both attempts sent the same request.
    let requests = server.requests();
    assert_eq!(requests[0].body, requests[1].body);
}

/// The first attempt hangs past the 1 s timeout; the retry succeeds.
fn hang_past_timeout_then_success(provider: Provider) {
    let server = ScriptedServer::start(vec![
        Reply::hang(Duration::from_secs(10)),
        Reply::success(provider, "ok", &usage()),
    ]);
    let settings = ClientSettings {
        max_retries: 1,
        ..test_settings(provider, &server)
    };
    let llm = make_client(provider, settings);
    let started = Instant::now();
    let answer = llm.complete(&request()).expect("answer after the timeout");
    let took = started.elapsed();
    assert!(took >= Duration::from_millis(950), "took only {took:?}");
    assert!(took < Duration::from_secs(4), "took {took:?}");
    assert_eq!(answer.http_attempts, 2);
    assert_eq!(server.request_count(), 2);
}

/// 401: one request, no retry, the provider's message and the variable to check.
fn unauthorized_is_not_retried(provider: Provider) {
    let server = ScriptedServer::start(vec![
        Reply::provider_error(provider, 401, "Incorrect API key provided"),
        Reply::success(provider, "must not be reached", &usage()),
    ]);
    let llm = make_client(provider, test_settings(provider, &server));
    let error = llm.complete(&request()).expect_err("401");
    assert_eq!(server.request_count(), 1, "401 is not retried");
    assert_eq!(error.status(), Some(401));
    assert_eq!(error.attempts(), Some(1));
    let message = error.to_string();
    assert!(message.contains("HTTP 401"), "{message}");
    assert!(message.contains("Incorrect API key provided"), "{message}");
    assert!(message.contains(provider.key_variable()), "{message}");
}

/// A model spec that does not exist: 404, not retried, the model named.
fn not_found_names_the_model(provider: Provider) {
    let server = ScriptedServer::start(vec![Reply::provider_error(
        provider,
        404,
        "The model does not exist",
    )]);
    let llm = make_client(provider, test_settings(provider, &server));
    let error = llm.complete(&request()).expect_err("404");
    assert_eq!(server.request_count(), 1);
    let message = error.to_string();
    assert!(message.contains("The model does not exist"), "{message}");
    assert!(
        message.contains(&crate::support::spec(provider).model),
        "{message}"
    );
}

/// Every attempt fails with 503: the error says how many attempts and the last status.
fn retries_exhausted(provider: Provider) {
    let server = ScriptedServer::start(vec![
        Reply::provider_error(provider, 503, "overloaded"),
        Reply::provider_error(provider, 502, "bad gateway"),
        Reply::provider_error(provider, 503, "still overloaded"),
    ]);
    let llm = make_client(provider, test_settings(provider, &server));
    let error = llm.complete(&request()).expect_err("exhausted");
    assert_eq!(server.request_count(), 3);
    match &error {
        LlmError::RetriesExhausted {
            attempts: 3,
            last:
                Failure::Status {
                    status: 503,
                    message,
                },
            ..
        } => assert_eq!(message, "still overloaded"),
        other => panic!("unexpected {other:?}"),
    }
    let message = error.to_string();
    assert!(message.contains("3 attempts"), "{message}");
    assert!(message.contains("HTTP 503"), "{message}");
}

/// End to end: the server answers from the prompt.
fn answers_from_the_prompt(provider: Provider) {
    let server = ScriptedServer::serve(move |req| {
        let prompt = req.last_user_text().unwrap_or_default();
        Reply::success(provider, &format!("echo: {prompt}"), &Usage::default())
    });
    let llm = make_client(provider, test_settings(provider, &server));
    for _ in 0..2 {
        let answer = llm.complete(&request()).expect("answer");
        assert_eq!(answer.text, format!("echo: {}", crate::support::USER));
    }
}

macro_rules! wire_suite {
    ($name:ident, $provider:expr) => {
        mod $name {
            use super::*;

            #[test]
            fn normal_answer_with_usage() {
                super::normal_answer_with_usage($provider);
            }

            #[test]
            fn malformed_json() {
                super::malformed_json($provider);
            }

            #[test]
            fn prose_around_fenced_code() {
                super::prose_around_fenced_code($provider);
            }

            #[test]
            fn rate_limited_then_success() {
                super::rate_limited_then_success($provider);
            }

            #[test]
            fn server_error_then_success() {
                super::server_error_then_success($provider);
            }

            #[test]
            fn hang_past_timeout_then_success() {
                super::hang_past_timeout_then_success($provider);
            }

            #[test]
            fn unauthorized_is_not_retried() {
                super::unauthorized_is_not_retried($provider);
            }

            #[test]
            fn not_found_names_the_model() {
                super::not_found_names_the_model($provider);
            }

            #[test]
            fn retries_exhausted() {
                super::retries_exhausted($provider);
            }

            #[test]
            fn answers_from_the_prompt() {
                super::answers_from_the_prompt($provider);
            }
        }
    };
}

wire_suite!(openai_chat, Provider::OpenAiChat);
wire_suite!(openai_responses, Provider::OpenAiResponses);
wire_suite!(gemini, Provider::Gemini);
wire_suite!(anthropic, Provider::Anthropic);

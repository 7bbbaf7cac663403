//! Answers as the providers really send them (files under `tests/fixtures/`), each driven
//! through its client: what comes back is recognised as empty, cut off, refused or blocked (the
//! engine re-asks and counts those), retried, or a clear error.

use std::time::{Duration, Instant};

use ksearch_llm::loopback::{Reply, ScriptedServer};
use ksearch_llm::{Completion, LlmError, Provider, Usage};
use serde_json::Value;

use crate::support::{make_client, request, test_settings};

/// The fixture `name` (without `.json`) as JSON.
fn fixture(name: &str) -> Value {
    let path = format!("{}/tests/fixtures/{name}.json", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// `provider`'s client's answer to a server that sends `replies`; the server checks the
/// request against the provider's schema.
fn answer(provider: Provider, replies: Vec<Reply>) -> (Result<Completion, LlmError>, usize) {
    let server = ScriptedServer::start(replies);
    let llm = make_client(provider, test_settings(provider, &server));
    let result = llm.complete(&request());
    assert!(server.rejections().is_empty(), "{:?}", server.rejections());
    (result, server.request_count())
}

fn one(provider: Provider, name: &str) -> Completion {
    let (result, requests) = answer(provider, vec![Reply::ok(fixture(name))]);
    assert_eq!(requests, 1, "{name}: a 200 is never retried");
    result.unwrap_or_else(|e| panic!("{name}: {e}"))
}

#[test]
fn empty_text_is_empty_and_not_cut_off() {
    let c = one(Provider::OpenAiChat, "openai_chat_empty");
    assert!(c.is_empty() && !c.is_truncated());
    assert_eq!(c.usage.input_tokens, 812);
    // Anthropic's empty end_turn, after writing 1200 tokens to its cache: counted apart.
    let c = one(Provider::Anthropic, "anthropic_empty_end_turn");
    assert!(c.is_empty() && !c.is_truncated());
    assert_eq!(c.finish_reason.as_deref(), Some("end_turn"));
    assert_eq!(
        c.usage,
        Usage {
            input_tokens: 1237,
            output_tokens: 3,
            cache_write_tokens: 1200,
            ..Usage::default()
        }
    );
}

#[test]
fn thinking_only_is_empty_and_cut_off_and_its_reasoning_counted() {
    let c = one(Provider::OpenAiChat, "openai_chat_thinking_only");
    assert!(c.is_empty() && c.is_truncated());
    assert_eq!(
        (c.usage.output_tokens, c.usage.reasoning_tokens),
        (4096, 4096)
    );
    assert_eq!(c.usage.cached_input_tokens, 1024);
    let c = one(Provider::Anthropic, "anthropic_thinking_only");
    assert!(
        c.is_empty() && c.is_truncated(),
        "the thinking block is not text"
    );
    assert_eq!(c.usage.output_tokens, 4096);
    let c = one(Provider::Gemini, "gemini_thinking_only");
    assert!(c.is_empty() && c.is_truncated());
    assert_eq!(
        (c.usage.output_tokens, c.usage.reasoning_tokens),
        (2047, 2047)
    );
}

#[test]
fn truncated_code_and_json_are_cut_off_whatever_they_look_like() {
    let c = one(Provider::OpenAiChat, "openai_chat_truncated_code");
    assert!(!c.is_empty() && c.is_truncated());
    assert!(c.text.contains("```c"), "{}", c.text);
    let c = one(Provider::OpenAiResponses, "responses_truncated_json");
    assert!(!c.is_empty() && c.is_truncated());
    assert_eq!(c.finish_reason.as_deref(), Some("max_output_tokens"));
    assert_eq!(c.usage.reasoning_tokens, 1984);
    let c = one(Provider::Gemini, "gemini_truncated_json");
    assert!(c.is_truncated());
    assert!(c.text.starts_with("```json"), "{}", c.text);
    assert_eq!(
        (c.usage.output_tokens, c.usage.cached_input_tokens),
        (550, 1024)
    );
}

#[test]
fn refusals_and_safety_blocks_say_so() {
    // OpenAI's refusal field: its words are the text, the reason says `refusal`.
    let c = one(Provider::OpenAiChat, "openai_chat_refusal");
    assert_eq!(c.finish_reason.as_deref(), Some("refusal"));
    assert!(c.text.contains("can't help"), "{}", c.text);
    assert!(!c.is_truncated());
    // Anthropic's refusal stop reason, with no text.
    let c = one(Provider::Anthropic, "anthropic_refusal");
    assert!(c.is_empty());
    assert_eq!(c.finish_reason.as_deref(), Some("refusal"));
    // Gemini's safety block: a candidate with no content.
    let c = one(Provider::Gemini, "gemini_safety_block");
    assert!(c.is_empty() && !c.is_truncated());
    assert_eq!(c.finish_reason.as_deref(), Some("SAFETY"));
    assert_eq!(c.usage.input_tokens, 744);
}

#[test]
fn anthropic_overloaded_is_retried() {
    let ok = Reply::success(Provider::Anthropic, "ok", &Usage::default());
    let (result, requests) = answer(
        Provider::Anthropic,
        vec![Reply::json(529, fixture("anthropic_529_overloaded")), ok],
    );
    let c = result.expect("answered after the retry");
    assert_eq!((c.text.as_str(), c.http_attempts, requests), ("ok", 2, 2));
}

#[test]
fn gemini_429_waits_the_delay_its_body_gives() {
    let ok = Reply::success(Provider::Gemini, "ok", &Usage::default());
    let started = Instant::now();
    let (result, requests) = answer(
        Provider::Gemini,
        vec![Reply::json(429, fixture("gemini_429_retry_delay")), ok],
    );
    let waited = started.elapsed();
    assert_eq!(result.expect("answered after the wait").http_attempts, 2);
    assert_eq!(requests, 2);
    // RetryInfo says 1.2 s; the test's own backoff is 50 ms at most.
    assert!(
        waited >= Duration::from_millis(1150),
        "waited only {waited:?}"
    );
    assert!(waited < Duration::from_secs(5), "waited {waited:?}");
}

#[test]
fn openai_out_of_quota_is_a_clear_error_at_once() {
    let (result, requests) = answer(
        Provider::OpenAiChat,
        vec![Reply::json(429, fixture("openai_429_insufficient_quota"))],
    );
    assert_eq!(requests, 1, "waiting does not bring credit back");
    let error = result.expect_err("no quota");
    let text = error.to_string();
    assert!(text.contains("exceeded your current quota"), "{text}");
    assert!(text.contains("no quota or credit"), "{text}");
}

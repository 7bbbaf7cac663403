//! One POST with retries: timeouts, backoff with full jitter, `Retry-After`, error messages.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::io::Read;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use reqwest::blocking::Client;
use reqwest::header::HeaderMap;

use crate::error::{Failure, LlmError};
use crate::secret::{Scrubber, Secret};
use crate::spec::Provider;

/// The longest sleep a server's `Retry-After` can impose before the next attempt; a longer
/// value is cut to this.
pub const RETRY_AFTER_CEILING: Duration = Duration::from_secs(120);

/// Longest text taken from a reply into an error message.
const MESSAGE_LIMIT: usize = 1000;

/// The most of a reply's body read, in bytes: four times the longest answer taken
/// ([`MAX_ANSWER_BYTES`](crate::MAX_ANSWER_BYTES)), room for JSON escapes and what a reply
/// carries besides the answer. A 2xx reply over it is [`LlmError::Malformed`]: a body that was
/// not read whole cannot be parsed, and one this size holds no answer ksearch would take.
pub(crate) const MAX_BODY_BYTES: usize = 4 * crate::types::MAX_ANSWER_BYTES;

/// The retry policy.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RetryPolicy {
    pub(crate) timeout: Duration,
    pub(crate) max_retries: u32,
    pub(crate) backoff_initial: Duration,
    pub(crate) backoff_max: Duration,
}

/// A 2xx reply.
#[derive(Debug)]
pub(crate) struct Success {
    pub(crate) body: String,
    pub(crate) attempts: u32,
}

/// Everything needed to POST to one endpoint.
#[derive(Debug)]
pub(crate) struct Transport {
    pub(crate) provider: Provider,
    pub(crate) model: String,
    pub(crate) http: Client,
    pub(crate) url: String,
    /// Auth and extra headers, values marked sensitive.
    pub(crate) headers: HeaderMap,
    /// The key, when one is sent.
    pub(crate) secret: Option<Secret>,
    /// Scrubs the key and the settings' other secrets from texts that reach errors.
    pub(crate) scrubber: Scrubber,
    pub(crate) policy: RetryPolicy,
}

impl Transport {
    /// POSTs `body` as JSON until a 2xx reply, a non-retryable status, or the retries run out.
    pub(crate) fn post_json(&self, body: &serde_json::Value) -> Result<Success, LlmError> {
        let mut attempt: u32 = 0;
        loop {
            attempt += 1;
            let (failure, retry_after) = match self.attempt(body, attempt)? {
                Ok(success) => return Ok(success),
                Err(retryable) => retryable,
            };
            if attempt > self.policy.max_retries {
                return Err(LlmError::RetriesExhausted {
                    provider: self.provider,
                    attempts: attempt,
                    last: failure,
                });
            }
            let rate_limited = matches!(failure, Failure::Status { status: 429, .. });
            std::thread::sleep(retry_delay(
                &self.policy,
                attempt - 1,
                retry_after,
                rate_limited,
            ));
        }
    }

    /// One request. Outer error: give up now. Inner error: a retryable failure, with the
    /// server's requested delay if it gave one.
    #[allow(clippy::type_complexity)]
    fn attempt(
        &self,
        body: &serde_json::Value,
        attempt: u32,
    ) -> Result<Result<Success, (Failure, Option<Duration>)>, LlmError> {
        let sent = self
            .http
            .post(&self.url)
            .headers(self.headers.clone())
            .json(body)
            .send();
        let response = match sent {
            Ok(response) => response,
            Err(error) => return self.transport_failure(&error).map(|f| Err((f, None))),
        };
        let status = response.status().as_u16();
        let retry_after = parse_retry_after(response.headers(), SystemTime::now());
        // OpenAI and Anthropic say per reply whether a retry can help; their SDKs obey it.
        let should_retry = response
            .headers()
            .get("x-should-retry")
            .and_then(|v| v.to_str().ok())
            .map(|v| v.trim().eq_ignore_ascii_case("true"));
        let location = response
            .headers()
            .get(reqwest::header::LOCATION)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        // At most MAX_BODY_BYTES and one more byte, to tell a body of exactly the limit from a
        // longer one: a server (or anything on the way) can send any amount.
        let mut body = Vec::new();
        if let Err(error) = response
            .take(MAX_BODY_BYTES as u64 + 1)
            .read_to_end(&mut body)
        {
            return self.read_failure(&error).map(|f| Err((f, retry_after)));
        }
        let over_limit = body.len() > MAX_BODY_BYTES;
        body.truncate(MAX_BODY_BYTES);
        // Lossy, as reqwest's `text()` decodes.
        let text = String::from_utf8_lossy(&body).into_owned();
        drop(body);
        if (200..300).contains(&status) {
            if over_limit {
                return Err(LlmError::Malformed {
                    provider: self.provider,
                    detail: format!(
                        "the reply's body is over {} MiB, more than any answer ksearch takes: not read",
                        MAX_BODY_BYTES >> 20
                    ),
                });
            }
            return Ok(Ok(Success {
                body: text,
                attempts: attempt,
            }));
        }
        let mut message = self.scrubber.scrub(&error_message(&text));
        if let Some(location) = location.filter(|_| (300..400).contains(&status)) {
            message = format!(
                "{message}; redirect to {} not followed (keys are not sent to other URLs)",
                self.scrubber.scrub(&location)
            );
        }
        // OpenAI's 429 for an account without credit: waiting does not help.
        let out_of_quota = status == 429 && text.contains("insufficient_quota");
        if should_retry.unwrap_or(is_retryable(status) && !out_of_quota) {
            let retry_after = retry_after.or_else(|| body_retry_delay(&text));
            return Ok(Err((Failure::Status { status, message }, retry_after)));
        }
        Err(LlmError::Api {
            provider: self.provider,
            status,
            hint: self.hint(status, &message),
            message,
            attempts: attempt,
        })
    }

    /// A body that could not be read: reqwest's error inside the IO error when it is one.
    fn read_failure(&self, error: &std::io::Error) -> Result<Failure, LlmError> {
        if let Some(inner) = error
            .get_ref()
            .and_then(|e| e.downcast_ref::<reqwest::Error>())
        {
            return self.transport_failure(inner);
        }
        if error.kind() == std::io::ErrorKind::TimedOut {
            return Ok(Failure::Timeout {
                after: self.policy.timeout,
            });
        }
        Ok(Failure::Connection {
            detail: self.scrubber.scrub(&error.to_string()),
        })
    }

    fn transport_failure(&self, error: &reqwest::Error) -> Result<Failure, LlmError> {
        let detail = self.scrubber.scrub(&error_chain(error));
        if error.is_builder() {
            return Err(LlmError::Settings {
                provider: self.provider,
                detail,
            });
        }
        if error.is_timeout() {
            return Ok(Failure::Timeout {
                after: self.policy.timeout,
            });
        }
        Ok(Failure::Connection { detail })
    }

    fn hint(&self, status: u16, message: &str) -> Option<String> {
        // Gemini answers a bad key with 400 INVALID_ARGUMENT "API key not valid".
        let mentions_key =
            message.to_ascii_lowercase().contains("api key") || message.contains("API_KEY_INVALID");
        match status {
            401 | 403 => Some(format!(
                "check the API key: {} or ClientSettings::api_key",
                self.provider.key_variable()
            )),
            404 => Some(format!(
                "check the model id `{}` and the base URL {}",
                self.model,
                self.url
                    .rsplit_once('/')
                    .map_or(self.url.as_str(), |(base, _)| base)
            )),
            _ if mentions_key => Some(format!(
                "check the API key: {} or ClientSettings::api_key",
                self.provider.key_variable()
            )),
            400 | 422 => rejected_parameter(message),
            429 => Some(
                "the account has no quota or credit left for this API: waiting does not help"
                    .into(),
            ),
            _ => None,
        }
    }
}

/// What to do when a server refuses a parameter it does not take (Ollama refuses
/// `reasoning_effort` for a model that does not think; vLLM takes only low, medium and high).
fn rejected_parameter(message: &str) -> Option<String> {
    let m = message.to_ascii_lowercase();
    if m.contains("reasoning_effort") || m.contains("reasoning.effort") {
        Some("this model or server does not take the reasoning effort sent: leave `reasoning_effort` unset for it (ksearch: no --reasoning-effort, no `reasoning_effort` in ksearch.toml's [llm] or [providers.*]), or use a value it lists".into())
    } else if m.contains("max_tokens")
        || m.contains("max_completion_tokens")
        || m.contains("max_output_tokens")
    {
        Some("the output budget is more than this model allows: lower `max_output_tokens` (ksearch.toml's [llm])".into())
    } else {
        None
    }
}

/// Statuses worth another attempt: request timeout, conflict (a lock held elsewhere, as OpenAI's
/// SDK retries it), too early, rate limits, server errors (Anthropic's 529 "overloaded"
/// included). A reply's `x-should-retry` header overrides this either way.
pub(crate) fn is_retryable(status: u16) -> bool {
    matches!(status, 408 | 409 | 425 | 429 | 500..=599)
}

/// The sleep before retry number `retry` (0 for the first retry): uniform in
/// `[0, min(backoff_max, backoff_initial · 2^retry)]`, raised to the server's `Retry-After`
/// (itself capped at [`RETRY_AFTER_CEILING`]). A rate limit the server gave no delay for waits
/// at least `RATE_LIMIT_FACTOR` times that bound (capped at `backoff_max`): with the defaults
/// 4, 8, 16 and 32 s, a minute in all, the window of a per-minute quota.
pub(crate) fn retry_delay(
    policy: &RetryPolicy,
    retry: u32,
    retry_after: Option<Duration>,
    rate_limited: bool,
) -> Duration {
    let factor = 2u32.saturating_pow(retry.min(31));
    let bound = policy
        .backoff_initial
        .saturating_mul(factor)
        .min(policy.backoff_max);
    let jittered = bound.mul_f64(random_unit());
    match retry_after {
        Some(requested) => requested.min(RETRY_AFTER_CEILING).max(jittered),
        None if rate_limited => {
            let floor = policy
                .backoff_initial
                .saturating_mul(factor.saturating_mul(RATE_LIMIT_FACTOR))
                .min(policy.backoff_max);
            jittered.max(floor)
        }
        None => jittered,
    }
}

/// See [`retry_delay`].
const RATE_LIMIT_FACTOR: u32 = 4;

/// The delay a 429 body asks for: Gemini's `error.details[]` entry of type
/// `google.rpc.RetryInfo`, whose `retryDelay` is a duration like `"37s"` or `"1.5s"` (Gemini sends
/// no `Retry-After` header).
pub(crate) fn body_retry_delay(body: &str) -> Option<Duration> {
    let value: serde_json::Value = serde_json::from_str(body).ok()?;
    let value = match value {
        serde_json::Value::Array(mut items) if !items.is_empty() => items.swap_remove(0),
        other => other,
    };
    value["error"]["details"]
        .as_array()?
        .iter()
        .filter(|d| {
            d["@type"]
                .as_str()
                .is_some_and(|t| t.ends_with("google.rpc.RetryInfo"))
        })
        .find_map(|d| d["retryDelay"].as_str())
        .and_then(|d| d.trim().strip_suffix('s'))
        .and_then(|n| n.parse::<f64>().ok())
        .filter(|n| n.is_finite() && *n >= 0.0)
        .map(|n| Duration::from_secs_f64(n.min(1e9)))
}

/// A number in `[0, 1)`, different on every call (std only: `RandomState` is randomly keyed).
fn random_unit() -> f64 {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut hasher = RandomState::new().build_hasher();
    hasher.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
    if let Ok(now) = SystemTime::now().duration_since(UNIX_EPOCH) {
        hasher.write_u128(now.as_nanos());
    }
    (hasher.finish() >> 11) as f64 / (1u64 << 53) as f64
}

/// `retry-after-ms` (OpenAI), else `Retry-After` in seconds or as an HTTP date.
pub(crate) fn parse_retry_after(headers: &HeaderMap, now: SystemTime) -> Option<Duration> {
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
    };
    // Bounded like `Retry-After` below: any server or proxy can send a number too large for a
    // `Duration` (from_secs_f64 panics on one); retry_delay cuts it to RETRY_AFTER_CEILING.
    if let Some(ms) = header("retry-after-ms").and_then(|v| v.parse::<f64>().ok())
        && ms.is_finite()
        && ms >= 0.0
    {
        return Some(Duration::from_secs_f64((ms / 1000.0).min(1e9)));
    }
    let value = header("retry-after")?;
    if let Ok(seconds) = value.parse::<f64>() {
        return (seconds.is_finite() && seconds >= 0.0)
            .then(|| Duration::from_secs_f64(seconds.min(1e9)));
    }
    let when = parse_http_date(value)?;
    Some(when.duration_since(now).unwrap_or(Duration::ZERO))
}

/// An HTTP date: the IMF-fixdate RFC 9110 requires senders to use (`Sun, 06 Nov 1994 08:49:37
/// GMT`), or one of the two obsolete forms it requires recipients to accept.
pub(crate) fn parse_http_date(text: &str) -> Option<SystemTime> {
    httpdate::parse_http_date(text.trim()).ok()
}

/// The provider's message from an error body: `error.message` (OpenAI, Anthropic, Gemini),
/// `error` as a string (Ollama and others), a top-level `message` or `detail`; else the start
/// of the body.
pub(crate) fn error_message(body: &str) -> String {
    let from_json = serde_json::from_str::<serde_json::Value>(body)
        .ok()
        .and_then(|value| {
            // Gemini has been seen answering with a one-element array.
            let value = match value {
                serde_json::Value::Array(mut items) if !items.is_empty() => items.swap_remove(0),
                other => other,
            };
            let error = value.get("error");
            error
                .and_then(|e| e.get("message"))
                .and_then(|m| m.as_str())
                .or_else(|| error.and_then(|e| e.as_str()))
                .or_else(|| value.get("message").and_then(|m| m.as_str()))
                .or_else(|| value.get("detail").and_then(|m| m.as_str()))
                .map(str::to_string)
        });
    let message = match from_json {
        Some(message) => message,
        None if body.trim().is_empty() => "(empty body)".to_string(),
        None => body.trim().to_string(),
    };
    truncate(&message, MESSAGE_LIMIT)
}

/// At most `limit` bytes of `text`, cut at a character boundary, with an ellipsis when cut.
pub(crate) fn truncate(text: &str, limit: usize) -> String {
    if text.len() <= limit {
        return text.to_string();
    }
    let mut end = limit;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

/// An error and its sources, `: `-joined (reqwest's own message is only the outermost).
fn error_chain(error: &reqwest::Error) -> String {
    let mut text = error.to_string();
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::header::HeaderValue;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert(*name, HeaderValue::from_str(value).unwrap());
        }
        map
    }

    #[test]
    fn retry_after_seconds_ms_and_date() {
        let now = UNIX_EPOCH + Duration::from_secs(784_111_770);
        assert_eq!(
            parse_retry_after(&headers(&[("retry-after", "3")]), now),
            Some(Duration::from_secs(3))
        );
        assert_eq!(
            parse_retry_after(
                &headers(&[("retry-after-ms", "250"), ("retry-after", "9")]),
                now
            ),
            Some(Duration::from_millis(250))
        );
        // 784111777 = Sun, 06 Nov 1994 08:49:37 GMT (RFC 9110's example).
        assert_eq!(
            parse_retry_after(
                &headers(&[("retry-after", "Sun, 06 Nov 1994 08:49:37 GMT")]),
                now
            ),
            Some(Duration::from_secs(7))
        );
        // A date in the past means now.
        assert_eq!(
            parse_retry_after(
                &headers(&[("retry-after", "Sun, 06 Nov 1994 08:49:37 GMT")]),
                now + Duration::from_secs(100)
            ),
            Some(Duration::ZERO)
        );
        assert_eq!(
            parse_retry_after(&headers(&[("retry-after", "soon")]), now),
            None
        );
        assert_eq!(parse_retry_after(&headers(&[]), now), None);
        assert_eq!(
            parse_retry_after(&headers(&[("retry-after", "-1")]), now),
            None
        );
    }

    /// A delay no `Duration` holds, or no delay at all, from any server or proxy: no panic.
    #[test]
    fn retry_after_ms_out_of_range_is_bounded_or_ignored() {
        let now = UNIX_EPOCH + Duration::from_secs(784_111_770);
        for huge in ["1e300", "1.7976931348623157e308", "18446744073709551615000"] {
            let d = parse_retry_after(&headers(&[("retry-after-ms", huge)]), now).unwrap();
            assert_eq!(d, Duration::from_secs(1_000_000_000), "{huge}");
        }
        for bad in ["NaN", "nan", "inf", "-inf", "-5", "-1e300"] {
            assert_eq!(
                parse_retry_after(
                    &headers(&[("retry-after-ms", bad), ("retry-after", "3")]),
                    now
                ),
                Some(Duration::from_secs(3)),
                "{bad}"
            );
        }
    }

    #[test]
    fn http_dates() {
        let t = parse_http_date("Thu, 01 Jan 1970 00:00:00 GMT").unwrap();
        assert_eq!(t, UNIX_EPOCH);
        let t = parse_http_date("Tue, 29 Feb 2000 12:00:00 GMT").unwrap();
        assert_eq!(t.duration_since(UNIX_EPOCH).unwrap().as_secs(), 951_825_600);
        assert!(parse_http_date("Sat, 29 Feb 2000 12:00:00 PST").is_none());
        assert!(parse_http_date("Sat, 32 Feb 2000 12:00:00 GMT").is_none());
        // RFC 850's form, which recipients must accept too.
        assert_eq!(
            parse_http_date("Sunday, 06-Nov-94 08:49:37 GMT"),
            parse_http_date("Sun, 06 Nov 1994 08:49:37 GMT")
        );
    }

    #[test]
    fn backoff_is_bounded_and_honours_retry_after() {
        let policy = RetryPolicy {
            timeout: Duration::from_secs(1),
            max_retries: 10,
            backoff_initial: Duration::from_millis(100),
            backoff_max: Duration::from_millis(1000),
        };
        for retry in 0..40 {
            let bound = Duration::from_millis(100)
                .saturating_mul(2u32.saturating_pow(retry.min(31)))
                .min(Duration::from_millis(1000));
            for _ in 0..20 {
                assert!(retry_delay(&policy, retry, None, false) <= bound);
            }
        }
        let d = retry_delay(&policy, 0, Some(Duration::from_secs(5)), true);
        assert_eq!(d, Duration::from_secs(5));
        let d = retry_delay(&policy, 0, Some(Duration::from_secs(100_000)), false);
        assert_eq!(d, RETRY_AFTER_CEILING);
        // Full jitter: not always the bound.
        let draws: Vec<Duration> = (0..50)
            .map(|_| retry_delay(&policy, 3, None, false))
            .collect();
        assert!(draws.iter().any(|d| *d != draws[0]));
    }

    #[test]
    fn a_rate_limit_without_a_stated_delay_waits_out_a_quota_minute() {
        let policy = RetryPolicy {
            timeout: Duration::from_secs(600),
            max_retries: 4,
            backoff_initial: Duration::from_secs(1),
            backoff_max: Duration::from_secs(60),
        };
        let total: Duration = (0..4).map(|r| retry_delay(&policy, r, None, true)).sum();
        assert!(total >= Duration::from_secs(60), "{total:?}");
        // Other failures keep the short backoff: at most 1 + 2 + 4 + 8 s.
        let total: Duration = (0..4).map(|r| retry_delay(&policy, r, None, false)).sum();
        assert!(total <= Duration::from_secs(15), "{total:?}");
    }

    #[test]
    fn gemini_s_retry_delay_is_read_from_the_body() {
        let body = r#"{"error": {"code": 429, "message": "Resource has been exhausted (e.g. check quota).",
            "status": "RESOURCE_EXHAUSTED", "details": [
              {"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": []},
              {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "37s"}]}}"#;
        assert_eq!(body_retry_delay(body), Some(Duration::from_secs(37)));
        let wrapped = format!("[{}]", body.replace("37s", "1.5s"));
        assert_eq!(
            body_retry_delay(&wrapped),
            Some(Duration::from_millis(1500))
        );
        assert_eq!(body_retry_delay(r#"{"error": {"message": "x"}}"#), None);
        assert_eq!(body_retry_delay("not json"), None);
    }

    #[test]
    fn retryable_statuses() {
        for s in [408, 409, 429, 500, 502, 503, 504, 529] {
            assert!(is_retryable(s), "{s}");
        }
        for s in [400, 401, 403, 404, 422] {
            assert!(!is_retryable(s), "{s}");
        }
    }

    #[test]
    fn error_messages() {
        assert_eq!(
            error_message(
                r#"{"error":{"message":"Incorrect API key","type":"invalid_request_error"}}"#
            ),
            "Incorrect API key"
        );
        assert_eq!(
            error_message(
                r#"{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}"#
            ),
            "invalid x-api-key"
        );
        assert_eq!(
            error_message(
                r#"[{"error":{"code":400,"message":"API key not valid","status":"INVALID_ARGUMENT"}}]"#
            ),
            "API key not valid"
        );
        assert_eq!(
            error_message(r#"{"error":"model 'x' not found"}"#),
            "model 'x' not found"
        );
        assert_eq!(
            error_message("<html>Bad Gateway</html>"),
            "<html>Bad Gateway</html>"
        );
        assert_eq!(error_message("  "), "(empty body)");
        assert_eq!(
            error_message(&"x".repeat(5000)).len(),
            MESSAGE_LIMIT + '…'.len_utf8()
        );
    }
}

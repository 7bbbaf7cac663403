//! The client: one [`LlmClient`] implementation, dispatching on the wire format.

use std::fmt;
use std::net::IpAddr;
use std::sync::Once;
use std::time::Duration;

use reqwest::Url;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};

use crate::error::LlmError;
use crate::http::{RetryPolicy, Transport};
use crate::manual::CallAbout;
use crate::secret::{Scrubber, Secret};
use crate::settings::ClientSettings;
use crate::spec::{ModelSpec, Provider};
use crate::types::{Completion, CompletionRequest};
use crate::wire::{self, Parsed, Wire};

/// A model behind some provider: send a conversation, get one completion.
pub trait LlmClient: Send + fmt::Debug {
    /// Which provider and model this client calls.
    fn spec(&self) -> &ModelSpec;

    /// One completion, with retries as configured.
    fn complete(&self, request: &CompletionRequest) -> Result<Completion, LlmError>;

    /// [`LlmClient::complete`], told what the call is for. Only a client that shows the call to
    /// someone (the manual model) uses it.
    fn complete_about(
        &self,
        request: &CompletionRequest,
        _about: &CallAbout<'_>,
    ) -> Result<Completion, LlmError> {
        self.complete(request)
    }
}

/// A client for `spec`, reading the key (and `OPENAI_BASE_URL`) from the environment where the
/// settings leave them unset.
pub fn client(spec: &ModelSpec, settings: ClientSettings) -> Result<Box<dyn LlmClient>, LlmError> {
    client_with_env(spec, settings, |name| std::env::var(name).ok())
}

/// [`client`] with the environment given as a function (for tests and embedders that keep keys
/// elsewhere).
pub fn client_with_env(
    spec: &ModelSpec,
    settings: ClientSettings,
    env: impl Fn(&str) -> Option<String>,
) -> Result<Box<dyn LlmClient>, LlmError> {
    if spec.provider == Provider::Manual {
        return Err(LlmError::Settings {
            provider: spec.provider,
            detail: "the manual model answers through files in a run directory: build it with ManualClient::new".into(),
        });
    }
    let Some(format) = Wire::of(spec.provider) else {
        // A command: no URL, no key, no HTTP. It inherits the environment, secrets and all:
        // whatever it writes is scrubbed of them.
        return Ok(Box::new(crate::exec::ExecClient {
            spec: spec.clone(),
            scrubber: Scrubber::new(settings.api_key.iter().chain(&settings.secrets)),
            policy: RetryPolicy {
                timeout: settings.timeout,
                max_retries: settings.max_retries,
                backoff_initial: settings.backoff_initial,
                backoff_max: settings.backoff_max,
            },
        }));
    };
    install_crypto_provider();
    let ClientSettings {
        base_url,
        api_key,
        timeout,
        max_retries,
        backoff_initial,
        backoff_max,
        reasoning_effort,
        max_output_tokens,
        allow_plain_http,
        extra_headers,
        secrets,
    } = settings;
    let provider = spec.provider;
    let settings_error = |detail: String| LlmError::Settings { provider, detail };

    let base = base_url
        .or_else(|| {
            provider
                .base_url_variable()
                .and_then(&env)
                .filter(|v| !v.trim().is_empty())
        })
        .unwrap_or_else(|| provider.default_base_url().to_string());
    let base = base.trim().trim_end_matches('/').to_string();
    let parsed_base = Url::parse(&base)
        .map_err(|e| settings_error(format!("base URL `{base}` does not parse: {e}")))?;
    if !matches!(parsed_base.scheme(), "http" | "https") {
        return Err(settings_error(format!(
            "base URL `{base}` must start with http:// or https://"
        )));
    }
    if !parsed_base.username().is_empty() || parsed_base.password().is_some() {
        return Err(settings_error(
            "the base URL must not carry credentials; use the key variable".to_string(),
        ));
    }

    let key = api_key
        .or_else(|| env(provider.key_variable()).map(Secret::new))
        .filter(|k| !k.is_empty());
    let scrubber = Scrubber::new(key.iter().chain(&secrets));
    let loopback = parsed_base.host_str().is_some_and(|host| {
        host.eq_ignore_ascii_case("localhost")
            || host
                .trim_matches(|c| c == '[' || c == ']')
                .parse::<IpAddr>()
                .is_ok_and(|ip| ip.is_loopback())
    });
    if key.is_some() && parsed_base.scheme() == "http" && !loopback && !allow_plain_http {
        return Err(settings_error(format!(
            "the base URL `{base}` is plain http to another machine, where anyone on the way could read the API key: use https, or allow_plain_http to send it anyway"
        )));
    }
    let official_openai = parsed_base.host_str() == Some("api.openai.com");
    let keyless_ok =
        matches!(provider, Provider::OpenAiChat | Provider::OpenAiResponses) && !official_openai;
    if key.is_none() && !keyless_ok {
        return Err(LlmError::MissingKey {
            provider,
            variable: provider.key_variable(),
        });
    }

    let path = match format {
        Wire::OpenAiChat => wire::openai_chat::PATH.to_string(),
        Wire::OpenAiResponses => wire::openai_responses::PATH.to_string(),
        Wire::Gemini => wire::gemini::path(&spec.model),
        Wire::Anthropic => wire::anthropic::PATH.to_string(),
    };
    let url = format!("{base}{path}");

    let mut headers = HeaderMap::new();
    let sensitive = |value: &str| -> Result<HeaderValue, LlmError> {
        let mut value = HeaderValue::from_str(value).map_err(|_| LlmError::Settings {
            provider,
            detail: "the API key (or an extra header value) holds characters not allowed in an HTTP header".to_string(),
        })?;
        value.set_sensitive(true);
        Ok(value)
    };
    if let Some(key) = &key {
        match format {
            Wire::OpenAiChat | Wire::OpenAiResponses => {
                headers.insert(
                    reqwest::header::AUTHORIZATION,
                    sensitive(&format!("Bearer {}", key.expose().trim()))?,
                );
            }
            Wire::Gemini => {
                headers.insert("x-goog-api-key", sensitive(key.expose().trim())?);
            }
            Wire::Anthropic => {
                headers.insert("x-api-key", sensitive(key.expose().trim())?);
            }
        }
    }
    if provider == Provider::Anthropic {
        headers.insert(
            "anthropic-version",
            HeaderValue::from_static(wire::anthropic::VERSION),
        );
    }
    for (name, value) in &extra_headers {
        let name = HeaderName::from_bytes(name.trim().as_bytes())
            .map_err(|_| settings_error(format!("`{name}` is not a valid header name")))?;
        headers.insert(name, sensitive(value.trim())?);
    }

    let mut builder = reqwest::blocking::Client::builder()
        .timeout(timeout)
        .connect_timeout(timeout.min(Duration::from_secs(30)))
        // A redirect could carry the key header to another host: never follow one.
        .redirect(reqwest::redirect::Policy::none())
        .user_agent(concat!("ksearch-llm/", env!("CARGO_PKG_VERSION")));
    if loopback {
        // A local server is never reached through a proxy.
        builder = builder.no_proxy();
    }
    let http = builder.build().map_err(|e| {
        settings_error(scrubber.scrub(&format!("cannot build the HTTP client: {e}")))
    })?;

    Ok(Box::new(HttpClient {
        spec: spec.clone(),
        format,
        reasoning_effort,
        max_output_tokens,
        dialect: if official_openai {
            wire::Dialect::OpenAi
        } else {
            wire::Dialect::Compatible
        },
        transport: Transport {
            provider,
            model: spec.model.clone(),
            http,
            url,
            headers,
            secret: key,
            scrubber,
            policy: RetryPolicy {
                timeout,
                max_retries,
                backoff_initial,
                backoff_max,
            },
        },
    }))
}

/// Why a reasoning effort does nothing for `spec`, when it does nothing (`None`: it is sent, as
/// `reasoning_effort`, `reasoning.effort`, Anthropic's thinking budget or Gemini's
/// `thinkingConfig`). `max_output_tokens` is the calls' output budget (Anthropic's thinking
/// takes at most half of it).
pub fn reasoning_effort_note(
    spec: &ModelSpec,
    effort: &str,
    max_output_tokens: Option<u32>,
) -> Option<String> {
    let model = spec.model.as_str();
    let why = match spec.provider {
        Provider::OpenAiChat | Provider::OpenAiResponses => wire::is_openai_chat_model(model)
            .then(|| format!("{model} is one of OpenAI's chat models, which take no reasoning effort (it is not sent)")),
        Provider::Anthropic => {
            let max = max_output_tokens.unwrap_or(wire::anthropic::DEFAULT_MAX_TOKENS);
            if wire::anthropic::thinking_budget(model, Some(effort), max).is_some() {
                None
            } else if !wire::anthropic::takes_thinking(model) {
                Some(format!("{model} has no extended thinking (Claude 3.7 Sonnet and Claude 4 on have it)"))
            } else if max / 2 < wire::anthropic::MIN_THINKING {
                Some(format!("the output budget of {max} tokens leaves no room for Anthropic's smallest thinking budget ({} tokens, at most half the output)", wire::anthropic::MIN_THINKING))
            } else {
                Some(format!("`{effort}` is not an effort ksearch maps to a thinking budget (minimal, low, medium, high, xhigh)"))
            }
        }
        Provider::Gemini => wire::gemini::thinking_config(model, Some(effort), max_output_tokens)
            .is_none()
            .then(|| format!("{model} takes no thinkingConfig for `{effort}` (Gemini 2.5 takes a thinking budget, Gemini 3 a thinking level; 2.5 Pro cannot turn thinking off)")),
        Provider::Exec | Provider::Manual => {
            Some("a command or a person gets only the conversation".to_string())
        }
    }?;
    Some(format!(
        "the reasoning effort does nothing for {spec}: {why}"
    ))
}

/// Installs rustls's ring provider as the process default, once (reqwest is built without one).
/// "Already installed" (by us or by anyone else) is fine.
fn install_crypto_provider() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

/// The one implementation: an HTTP transport and a wire format.
struct HttpClient {
    spec: ModelSpec,
    format: Wire,
    reasoning_effort: Option<String>,
    /// Replaces every request's output budget (`[providers.X] max_output_tokens`).
    max_output_tokens: Option<u32>,
    dialect: wire::Dialect,
    transport: Transport,
}

impl fmt::Debug for HttpClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HttpClient")
            .field("spec", &self.spec.to_string())
            .field("url", &self.transport.url)
            .field("key", &self.transport.secret.as_ref().map(|_| "[redacted]"))
            .field("reasoning_effort", &self.reasoning_effort)
            .field("max_output_tokens", &self.max_output_tokens)
            .field("timeout", &self.transport.policy.timeout)
            .field("max_retries", &self.transport.policy.max_retries)
            .finish_non_exhaustive()
    }
}

impl LlmClient for HttpClient {
    fn spec(&self) -> &ModelSpec {
        &self.spec
    }

    fn complete(&self, request: &CompletionRequest) -> Result<Completion, LlmError> {
        let budgeted;
        let request = match self.max_output_tokens {
            Some(max) => {
                budgeted = CompletionRequest {
                    max_output_tokens: Some(max),
                    ..request.clone()
                };
                &budgeted
            }
            None => request,
        };
        let model = self.spec.model.as_str();
        let effort = self.reasoning_effort.as_deref();
        let body = match self.format {
            Wire::OpenAiChat => {
                wire::openai_chat::request_body(model, request, effort, self.dialect)
            }
            Wire::OpenAiResponses => {
                wire::openai_responses::request_body(model, request, effort, self.dialect)
            }
            Wire::Gemini => wire::gemini::request_body(model, request, effort),
            Wire::Anthropic => wire::anthropic::request_body(model, request, effort),
        };
        let success = self.transport.post_json(&body)?;
        let parsed = match self.format {
            Wire::OpenAiChat => wire::openai_chat::parse(&success.body),
            Wire::OpenAiResponses => wire::openai_responses::parse(&success.body),
            Wire::Gemini => wire::gemini::parse(&success.body),
            Wire::Anthropic => wire::anthropic::parse(&success.body),
        };
        let Parsed {
            text,
            usage,
            model: answered_by,
            finish_reason,
        } = parsed.map_err(|detail| LlmError::Malformed {
            provider: self.spec.provider,
            detail: self.transport.scrubber.scrub(&detail),
        })?;
        // Scrubbed, as errors are: what a provider writes goes into the run's record and back
        // into prompts.
        let scrub = |text: String| self.transport.scrubber.scrub(&text);
        Ok(Completion {
            text: scrub(text),
            usage,
            model: answered_by
                .filter(|m| !m.is_empty())
                .map_or_else(|| self.spec.model.clone(), scrub),
            finish_reason: finish_reason.map(scrub),
            http_attempts: success.attempts,
        }
        .capped())
    }
}

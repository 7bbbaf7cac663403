//! How a client talks to its provider.

use std::fmt;
use std::time::Duration;

use crate::secret::Secret;

/// Connection settings for one client. `ClientSettings::default()` is right for the official
/// endpoints with the key in the environment.
#[derive(Clone)]
pub struct ClientSettings {
    /// Base URL of the API. `None`: `OPENAI_BASE_URL` for the OpenAI wire formats when set,
    /// else the provider's official endpoint (`https://api.openai.com/v1`,
    /// `https://generativelanguage.googleapis.com`, `https://api.anthropic.com`). For OpenAI
    /// the base includes the version (`http://localhost:8000/v1`); for Gemini and Anthropic it
    /// does not.
    pub base_url: Option<String>,
    /// The key. `None`: read the provider's variable (`OPENAI_API_KEY`, `GEMINI_API_KEY`,
    /// `ANTHROPIC_API_KEY`). An OpenAI-compatible base URL other than api.openai.com may go
    /// without a key: then no `Authorization` header is sent.
    pub api_key: Option<Secret>,
    /// Limit for one HTTP request, from connecting to the last byte of the body.
    pub timeout: Duration,
    /// Retries after the first attempt (so at most `max_retries + 1` requests per completion).
    pub max_retries: u32,
    /// Upper bound of the first retry's sleep (full jitter: the sleep is uniform below the bound).
    pub backoff_initial: Duration,
    /// The bound doubles per retry up to this.
    pub backoff_max: Duration,
    /// Reasoning effort (`none`, `minimal`, `low`, `medium`, `high`, `xhigh`). Sent as
    /// `reasoning: {effort}` on `openai-responses` and as `reasoning_effort` on `openai` (to
    /// OpenAI's reasoning models only, as given to another server's models); as a thinking
    /// budget to Anthropic and as `thinkingConfig` to Gemini, on the models that have them
    /// ([`reasoning_effort_note`](crate::reasoning_effort_note) says where it does nothing).
    pub reasoning_effort: Option<String>,
    /// Output budget for every call of this client, replacing the request's (a provider's own
    /// `max_output_tokens`). `None`: the request's.
    pub max_output_tokens: Option<u32>,
    /// Send the key over plain `http://` to a host other than this machine. Off by default:
    /// anyone on the path could read it; a server on `localhost` or a loopback address needs no
    /// opt-in.
    pub allow_plain_http: bool,
    /// More headers for every request (e.g. OpenRouter's `HTTP-Referer`). Values are never
    /// printed by `Debug`.
    pub extra_headers: Vec<(String, String)>,
    /// Other secrets to scrub, with the key, from every text a provider or a command writes
    /// that this client passes on (errors, answers): ksearch gives the values of its
    /// environment's variables named like secrets, which a command inherits, and the keys in
    /// ksearch.toml.
    pub secrets: Vec<Secret>,
}

impl Default for ClientSettings {
    fn default() -> ClientSettings {
        ClientSettings {
            base_url: None,
            api_key: None,
            timeout: Duration::from_secs(600),
            max_retries: 4,
            backoff_initial: Duration::from_secs(1),
            backoff_max: Duration::from_secs(60),
            reasoning_effort: None,
            max_output_tokens: None,
            allow_plain_http: false,
            extra_headers: Vec::new(),
            secrets: Vec::new(),
        }
    }
}

impl fmt::Debug for ClientSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let header_names: Vec<&str> = self
            .extra_headers
            .iter()
            .map(|(name, _)| name.as_str())
            .collect();
        f.debug_struct("ClientSettings")
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key)
            .field("timeout", &self.timeout)
            .field("max_retries", &self.max_retries)
            .field("backoff_initial", &self.backoff_initial)
            .field("backoff_max", &self.backoff_max)
            .field("reasoning_effort", &self.reasoning_effort)
            .field("max_output_tokens", &self.max_output_tokens)
            .field("allow_plain_http", &self.allow_plain_http)
            .field("extra_headers (values redacted)", &header_names)
            .field("secrets", &self.secrets)
            .finish()
    }
}

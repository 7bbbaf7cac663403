//! The LLM providers of ksearch: one blocking client per wire format behind [`LlmClient`].
//!
//! | spec prefix          | wire format                          | key variable        |
//! | -------------------- | ------------------------------------ | ------------------- |
//! | `openai:`            | Chat Completions (`/chat/completions`), any OpenAI-compatible server | `OPENAI_API_KEY` |
//! | `openai-responses:`  | Responses (`/responses`)             | `OPENAI_API_KEY`    |
//! | `gemini:`            | Gemini `generateContent`             | `GEMINI_API_KEY`    |
//! | `anthropic:`         | Anthropic Messages (`/v1/messages`)  | `ANTHROPIC_API_KEY` |
//! | `exec:`              | any command: prompt on stdin, answer on stdout (see `exec`) | none (the command's own) |
//! | `manual`             | prompt and answer as files in the run directory (see [`ManualClient`]) | none |
//!
//! ```no_run
//! use ksearch_llm::{ClientSettings, CompletionRequest, Message, ModelSpec, client};
//! let spec: ModelSpec = "anthropic:claude-sonnet-4-5".parse()?;
//! let llm = client(&spec, ClientSettings::default())?;
//! let answer = llm.complete(&CompletionRequest::new(vec![
//!     Message::system("You write C kernels."),
//!     Message::user("Unroll this loop: ..."),
//! ]))?;
//! println!("{} ({} tokens out)", answer.text, answer.usage.output_tokens);
//! # Ok::<(), ksearch_llm::LlmError>(())
//! ```
//!
//! # Usage, in one convention for every provider
//!
//! [`Usage::input_tokens`] counts every prompt token, cached ones included;
//! [`Usage::cached_input_tokens`] is the part of it read from the provider's prompt cache,
//! [`Usage::cache_write_tokens`] the part written to it.
//! [`Usage::output_tokens`] counts every generated token, reasoning included;
//! [`Usage::reasoning_tokens`] is the part of it spent on hidden reasoning.
//!
//! | field      | `openai`                                       | `openai-responses`                         | `gemini`                                       | `anthropic`                                   |
//! | ---------- | ---------------------------------------------- | ------------------------------------------ | ---------------------------------------------- | --------------------------------------------- |
//! | input      | `prompt_tokens`                                | `input_tokens`                             | `promptTokenCount` (includes cached content)   | `input_tokens + cache_creation_input_tokens + cache_read_input_tokens` |
//! | cached     | `prompt_tokens_details.cached_tokens`          | `input_tokens_details.cached_tokens`       | `cachedContentTokenCount`                      | `cache_read_input_tokens`                     |
//! | output     | `completion_tokens` (includes reasoning)       | `output_tokens` (includes reasoning)       | `candidatesTokenCount + thoughtsTokenCount`    | `output_tokens` (includes thinking)           |
//! | reasoning  | `completion_tokens_details.reasoning_tokens`   | `output_tokens_details.reasoning_tokens`   | `thoughtsTokenCount`                           | not reported apart (inside output): 0         |
//! | cache writes | `prompt_tokens_details.cache_write_tokens` (some servers; OpenAI sends none) | `input_tokens_details.cache_write_tokens` (likewise) | none (Gemini bills cache storage, not writes) | `cache_creation_input_tokens`                |
//!
//! Missing fields count as 0 (OpenAI-compatible local servers often omit the details or the
//! whole `usage`). [`PriceTable::cost_usd`] bills `input - cached - writes` at the input price,
//! `cached` at the cached-input price, cache writes at the cache-write price (the input price
//! when the table gives none) and `output` (reasoning included) at the output price.
//!
//! # Reliability
//!
//! Each HTTP attempt has `ClientSettings::timeout`. Attempts that fail with 408, 429, any 5xx
//! (Anthropic's 529 included), a connection error or a timeout are retried up to
//! `ClientSettings::max_retries` times, after a sleep drawn uniformly from
//! `[0, min(backoff_max, backoff_initial · 2^retry)]` (full jitter); when the reply carries
//! `Retry-After` (seconds or an HTTP date) or `retry-after-ms`, the sleep is at least that long,
//! and never more than [`RETRY_AFTER_CEILING`]. Other statuses (400, 401, 403, 404, ...) fail at
//! once with the provider's own message. A 2xx reply whose body is not the expected JSON is
//! [`LlmError::Malformed`] and is not retried: the call was answered (and billed), and a shape
//! the client does not understand would come back the same.
//!
//! # Secrets
//!
//! Keys live in [`Secret`], whose `Debug` and `Display` print `[redacted]`; it is never
//! serialised. Keys travel only in headers marked sensitive (never in URLs), and any text taken
//! from a provider's reply or a command's output (an error, an answer) is scrubbed of the key
//! and of [`ClientSettings::secrets`]: in any case, and without a `sk-`-style prefix.
//!
//! # Bounds
//!
//! An answer longer than [`MAX_ANSWER_BYTES`] is cut to an excerpt and marked
//! [`ANSWER_OVER_CAP`] (it counts as cut off); a reply's body is read up to four times that,
//! and a command's output stops being read at that size or at the call's timeout.

mod client;
mod error;
mod exec;
mod http;
#[cfg(feature = "test-support")]
pub mod loopback;
mod manual;
mod prices;
mod secret;
mod settings;
mod spec;
mod types;
mod wire;

pub use client::{LlmClient, client, client_with_env, reasoning_effort_note};
pub use error::{Failure, LlmError};
pub use exec::{RETRY_EXIT_CODE, prompt_text};
pub use http::RETRY_AFTER_CEILING;
pub use manual::{CallAbout, ManualCall, ManualClient, pending_call};
pub use prices::{ModelPrice, PriceError, PriceTable};
pub use secret::Secret;
pub use settings::ClientSettings;
pub use spec::{ModelSpec, Provider};
pub use types::{
    ANSWER_OVER_CAP, Completion, CompletionRequest, MAX_ANSWER_BYTES, Message, MessageRole, Usage,
};

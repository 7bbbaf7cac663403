//! Requests, answers and token usage, the same for every provider.

use std::iter::Sum;
use std::ops::{Add, AddAssign};

use serde::{Deserialize, Serialize};

/// Who speaks a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MessageRole {
    /// Instructions. Providers with a separate system field (Responses `instructions`, Gemini
    /// `systemInstruction`, Anthropic `system`) get every system message there, in order,
    /// joined by a blank line; Chat Completions keeps them in place.
    System,
    /// The user.
    User,
    /// The model (an earlier answer, for multi-turn prompts).
    Assistant,
}

/// One message of a conversation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Message {
    /// Who speaks.
    pub role: MessageRole,
    /// Plain text.
    pub content: String,
}

impl Message {
    /// A system message.
    pub fn system(content: impl Into<String>) -> Message {
        Message {
            role: MessageRole::System,
            content: content.into(),
        }
    }

    /// A user message.
    pub fn user(content: impl Into<String>) -> Message {
        Message {
            role: MessageRole::User,
            content: content.into(),
        }
    }

    /// An assistant message.
    pub fn assistant(content: impl Into<String>) -> Message {
        Message {
            role: MessageRole::Assistant,
            content: content.into(),
        }
    }
}

/// One completion to ask for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CompletionRequest {
    /// The conversation, oldest first.
    pub messages: Vec<Message>,
    /// Upper bound on generated tokens (reasoning included where the provider counts it so).
    /// `None`: the provider's default, except Anthropic, which requires one: 8192.
    pub max_output_tokens: Option<u32>,
    /// Sampling temperature; `None` leaves the provider's default. (OpenAI reasoning models
    /// reject any value other than 1.)
    pub temperature: Option<f32>,
}

impl CompletionRequest {
    /// A request with the providers' default limits.
    pub fn new(messages: Vec<Message>) -> CompletionRequest {
        CompletionRequest {
            messages,
            max_output_tokens: None,
            temperature: None,
        }
    }
}

/// Tokens one or more calls used, in one convention for every provider (see the crate docs):
/// `cached_input_tokens` and `cache_write_tokens` are parts of `input_tokens`, `reasoning_tokens`
/// part of `output_tokens`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(default)]
pub struct Usage {
    /// Every prompt token, cached ones included.
    pub input_tokens: u64,
    /// Generated tokens, reasoning included.
    pub output_tokens: u64,
    /// Prompt tokens read from the provider's cache (a part of `input_tokens`).
    pub cached_input_tokens: u64,
    /// Generated tokens spent on hidden reasoning (a part of `output_tokens`).
    pub reasoning_tokens: u64,
    /// Prompt tokens written to the provider's cache (a part of `input_tokens`, apart from
    /// `cached_input_tokens`): Anthropic's `cache_creation_input_tokens`, the
    /// `cache_write_tokens` some OpenAI-format servers report. Billed at the cache-write price.
    pub cache_write_tokens: u64,
}

impl Usage {
    /// Input plus output.
    pub fn total_tokens(&self) -> u64 {
        self.input_tokens.saturating_add(self.output_tokens)
    }
}

impl Add for Usage {
    type Output = Usage;

    fn add(self, other: Usage) -> Usage {
        Usage {
            input_tokens: self.input_tokens.saturating_add(other.input_tokens),
            output_tokens: self.output_tokens.saturating_add(other.output_tokens),
            cached_input_tokens: self
                .cached_input_tokens
                .saturating_add(other.cached_input_tokens),
            reasoning_tokens: self.reasoning_tokens.saturating_add(other.reasoning_tokens),
            cache_write_tokens: self
                .cache_write_tokens
                .saturating_add(other.cache_write_tokens),
        }
    }
}

impl AddAssign for Usage {
    fn add_assign(&mut self, other: Usage) {
        *self = *self + other;
    }
}

impl Sum for Usage {
    fn sum<I: Iterator<Item = Usage>>(iter: I) -> Usage {
        iter.fold(Usage::default(), Add::add)
    }
}

/// One answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Completion {
    /// The answer's text, verbatim (code fences and prose included: extracting code is the
    /// caller's job).
    pub text: String,
    /// Tokens this call used.
    pub usage: Usage,
    /// The model that answered, as the provider names it (the requested id when the reply does
    /// not say).
    pub model: String,
    /// Why generation stopped, in the provider's own words (`stop`, `length`, `end_turn`,
    /// `max_tokens`, `STOP`, `MAX_TOKENS`, ...), when it says.
    pub finish_reason: Option<String>,
    /// HTTP requests made for this answer (1 when no retry was needed).
    pub http_attempts: u32,
}

/// The longest answer taken from a provider or a command, in bytes (4 MiB): 16384 output
/// tokens make about 64 KB, and the largest output budgets a few hundred KB. Nothing longer
/// reaches the run's record (an `exec:yes` model had written gigabytes into memory, a
/// provider's 100 MB answer into run.sqlite).
pub const MAX_ANSWER_BYTES: usize = 4 << 20;

/// The finish reason of an answer longer than [`MAX_ANSWER_BYTES`], ksearch's own word: it
/// counts as cut off ([`Completion::is_truncated`]), so it is asked again, never sent back.
pub const ANSWER_OVER_CAP: &str = "answer_over_cap";

/// What an answer over [`MAX_ANSWER_BYTES`] keeps of its text, in bytes: none of it can be
/// used, and the run's record need not hold megabytes of it.
const OVER_CAP_EXCERPT: usize = 4096;

/// The longest model name or finish reason taken from a reply, in bytes.
const MAX_LABEL_BYTES: usize = 256;

/// The providers' words for "generation stopped at the output limit": Chat Completions
/// `length`, Anthropic `max_tokens`, Gemini `MAX_TOKENS`, Responses `max_output_tokens`; and
/// ksearch's own [`ANSWER_OVER_CAP`].
const CUT_OFF: &[&str] = &[
    "length",
    "max_tokens",
    "MAX_TOKENS",
    "max_output_tokens",
    ANSWER_OVER_CAP,
];

impl Completion {
    /// No text at all: every output token went to hidden reasoning, a safety block, an empty
    /// turn, a refusal without words. Such an answer is never sent back as a turn (Anthropic
    /// and Gemini refuse an empty text part).
    pub fn is_empty(&self) -> bool {
        self.text.trim().is_empty()
    }

    /// Generation stopped at the output limit: the text is cut off, whatever it looks like.
    pub fn is_truncated(&self) -> bool {
        self.finish_reason
            .as_deref()
            .is_some_and(|r| CUT_OFF.contains(&r))
    }

    /// `self` bounded for the record: an answer over [`MAX_ANSWER_BYTES`] (or already marked
    /// as over it) is cut to an excerpt and marked [`ANSWER_OVER_CAP`]; the model name and
    /// finish reason a reply gave are cut to 256 bytes.
    pub(crate) fn capped(mut self) -> Completion {
        if self.text.len() > MAX_ANSWER_BYTES
            || self.finish_reason.as_deref() == Some(ANSWER_OVER_CAP)
        {
            self.text = crate::http::truncate(&self.text, OVER_CAP_EXCERPT);
            self.finish_reason = Some(ANSWER_OVER_CAP.to_string());
        }
        if self.model.len() > MAX_LABEL_BYTES {
            self.model = crate::http::truncate(&self.model, MAX_LABEL_BYTES);
        }
        if let Some(reason) = self
            .finish_reason
            .as_mut()
            .filter(|r| r.len() > MAX_LABEL_BYTES)
        {
            *reason = crate::http::truncate(reason, MAX_LABEL_BYTES);
        }
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usage_adds_and_sums() {
        let a = Usage {
            input_tokens: 10,
            output_tokens: 5,
            cached_input_tokens: 2,
            reasoning_tokens: 1,
            cache_write_tokens: 3,
        };
        let mut b = a + a;
        assert_eq!(b.input_tokens, 20);
        b += a;
        assert_eq!(b.reasoning_tokens, 3);
        assert_eq!(b.cache_write_tokens, 9);
        let s: Usage = [a, a, a].into_iter().sum();
        assert_eq!(s, b);
        assert_eq!(s.total_tokens(), 45);
    }

    #[test]
    fn empty_and_cut_off_answers_are_recognised_in_every_provider_s_words() {
        let answer = |text: &str, reason: Option<&str>| Completion {
            text: text.into(),
            usage: Usage::default(),
            model: "m".into(),
            finish_reason: reason.map(Into::into),
            http_attempts: 1,
        };
        assert!(answer(" \n\t", Some("stop")).is_empty());
        assert!(!answer("x", None).is_empty());
        for reason in [
            "length",
            "max_tokens",
            "MAX_TOKENS",
            "max_output_tokens",
            ANSWER_OVER_CAP,
        ] {
            assert!(answer("```c\nint", Some(reason)).is_truncated(), "{reason}");
        }
        for reason in [
            None,
            Some("stop"),
            Some("end_turn"),
            Some("STOP"),
            Some("refusal"),
        ] {
            assert!(!answer("x", reason).is_truncated(), "{reason:?}");
        }
    }

    #[test]
    fn an_answer_over_the_cap_is_cut_to_an_excerpt_and_counts_as_cut_off() {
        let answer = |text: String| Completion {
            text,
            usage: Usage::default(),
            model: "m".repeat(10_000),
            finish_reason: Some("stop".into()),
            http_attempts: 1,
        };
        let at_cap = answer("é".repeat(MAX_ANSWER_BYTES / 2)).capped();
        assert_eq!(at_cap.text.len(), MAX_ANSWER_BYTES);
        assert!(!at_cap.is_truncated());
        assert!(at_cap.model.len() <= MAX_LABEL_BYTES + '…'.len_utf8());
        let over = answer("é".repeat(MAX_ANSWER_BYTES / 2 + 1)).capped();
        assert!(over.text.len() <= OVER_CAP_EXCERPT + '…'.len_utf8());
        assert!(over.text.starts_with("éé"));
        assert_eq!(over.finish_reason.as_deref(), Some(ANSWER_OVER_CAP));
        assert!(over.is_truncated() && !over.is_empty());
    }

    #[test]
    fn usage_deserialises_with_missing_fields() {
        let u: Usage = serde_json::from_str(r#"{"input_tokens": 3}"#).unwrap();
        assert_eq!(u.input_tokens, 3);
        assert_eq!(u.output_tokens, 0);
    }
}

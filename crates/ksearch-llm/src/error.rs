//! What can go wrong. No variant ever holds a key: texts taken from replies are scrubbed first.

use std::fmt;
use std::time::Duration;

use crate::spec::Provider;

/// Why one HTTP attempt failed in a way worth retrying.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    /// The server answered with a retryable status (408, 429, 5xx).
    Status {
        /// The HTTP status.
        status: u16,
        /// The provider's message (`error.message`), or the start of the body.
        message: String,
    },
    /// No complete answer within the per-request timeout.
    Timeout {
        /// The timeout in force.
        after: Duration,
    },
    /// The connection could not be made or broke.
    Connection {
        /// What the HTTP library said.
        detail: String,
    },
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Failure::Status { status, message } => write!(f, "HTTP {status}: {message}"),
            Failure::Timeout { after } => {
                write!(
                    f,
                    "no answer within the {:.1} s timeout",
                    after.as_secs_f64()
                )
            }
            Failure::Connection { detail } => write!(f, "connection failed: {detail}"),
        }
    }
}

/// An error of this crate.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LlmError {
    /// A model spec that does not parse.
    #[error("invalid model spec `{spec}`: {detail}")]
    InvalidSpec {
        /// The text given.
        spec: String,
        /// What is wrong with it.
        detail: String,
    },
    /// No key in the client settings nor in the environment.
    #[error(
        "no API key for {provider}: set the {variable} environment variable (or pass a key in the client config)"
    )]
    MissingKey {
        /// The provider.
        provider: Provider,
        /// The variable to set.
        variable: &'static str,
    },
    /// Settings the client cannot use (a base URL that does not parse, a bad header).
    #[error("invalid {provider} client config: {detail}")]
    Settings {
        /// The provider.
        provider: Provider,
        /// What is wrong.
        detail: String,
    },
    /// The provider refused the request with a status not worth retrying (400, 401, 403, 404,
    /// ...). `hint` says what to check (the key variable, for 401 and 403).
    #[error("{provider} returned HTTP {status}: {message}{}", hint.as_deref().map(|h| format!(" ({h})")).unwrap_or_default())]
    Api {
        /// The provider.
        provider: Provider,
        /// The HTTP status.
        status: u16,
        /// The provider's `error.message`, or the start of the body.
        message: String,
        /// What to check, when there is an obvious suspect.
        hint: Option<String>,
        /// Requests made, this one included.
        attempts: u32,
    },
    /// Every attempt failed with a retryable failure.
    #[error("{provider} failed after {attempts} attempt{}; last: {last}", if *attempts == 1 { "" } else { "s" })]
    RetriesExhausted {
        /// The provider.
        provider: Provider,
        /// Requests made.
        attempts: u32,
        /// The last failure.
        last: Failure,
    },
    /// The model command (`exec:`) could not run, or failed.
    #[error("the model command `{command}` failed: {detail}")]
    Command {
        /// The command line.
        command: String,
        /// What happened: its exit status and the end of its stderr.
        detail: String,
    },
    /// A manual model call waits for its answer (`manual`): the run pauses until the answer
    /// file is written.
    #[error(
        "model call {call} waits for an answer: the prompt is {}, the answer goes in {}",
        prompt.display(),
        answer.display()
    )]
    Pending {
        /// The call's number in the run (1, 2, ...).
        call: u64,
        /// The file holding the whole prompt.
        prompt: std::path::PathBuf,
        /// The file the answer goes in.
        answer: std::path::PathBuf,
    },
    /// A successful status whose body is not the expected JSON.
    #[error("malformed {provider} reply: {detail}")]
    Malformed {
        /// The provider.
        provider: Provider,
        /// What was expected and what came (the start of the body at most).
        detail: String,
    },
}

impl LlmError {
    /// Whether the last failure was a timeout.
    pub fn is_timeout(&self) -> bool {
        matches!(
            self,
            LlmError::RetriesExhausted {
                last: Failure::Timeout { .. },
                ..
            }
        )
    }

    /// The HTTP status of the last reply, when the error came from one.
    pub fn status(&self) -> Option<u16> {
        match self {
            LlmError::Api { status, .. }
            | LlmError::RetriesExhausted {
                last: Failure::Status { status, .. },
                ..
            } => Some(*status),
            _ => None,
        }
    }

    /// HTTP requests made before the error, where any were.
    pub fn attempts(&self) -> Option<u32> {
        match self {
            LlmError::Api { attempts, .. } | LlmError::RetriesExhausted { attempts, .. } => {
                Some(*attempts)
            }
            _ => None,
        }
    }
}

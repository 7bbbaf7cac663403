//! Errors the command line finds itself, before any library is asked: each says what was wrong
//! with what the user typed and gets the usage exit code.

/// Bad command-line usage (exit code 2), beyond what clap checks.
#[derive(Debug)]
pub(crate) struct UsageError(pub(crate) String);

impl std::fmt::Display for UsageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UsageError {}

/// `Err(UsageError(…))` as an `anyhow::Result`.
pub(crate) fn usage<T>(message: impl Into<String>) -> anyhow::Result<T> {
    Err(UsageError(message.into()).into())
}

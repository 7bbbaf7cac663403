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

/// Something the user gave that does not fit (exit code 3), found by the command line itself:
/// a run with no call waiting for the answer given, an empty answer.
#[derive(Debug)]
pub(crate) struct InputError(pub(crate) String);

impl std::fmt::Display for InputError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for InputError {}

/// `Err(UsageError(…))` as an `anyhow::Result`.
pub(crate) fn usage<T>(message: impl Into<String>) -> anyhow::Result<T> {
    Err(UsageError(message.into()).into())
}

/// The proposer a `--model`, `--reasoning-model` or `--codegen-model` names: `builtin`, or a
/// model spec. Anything else is a usage error that lists what the flag takes and suggests the
/// closest (`--model manul`: did you mean `manual`?).
pub(crate) fn check_model_flag(flag: &str, value: &str) -> anyhow::Result<()> {
    if value == "builtin" {
        return Ok(());
    }
    let Err(e) = value.parse::<ksearch_llm::ModelSpec>() else {
        return Ok(());
    };
    let providers = [
        "openai",
        "openai-responses",
        "gemini",
        "anthropic",
        "exec",
        "manual",
    ];
    let suggestion = match value.split_once(':') {
        Some((prefix, rest)) => ksearch_core::suggest::closest(prefix.trim(), providers)
            .filter(|p| *p != prefix.trim())
            .map(|p| format!("{p}:{rest}")),
        None => ksearch_core::suggest::closest(value, ["builtin", "manual"]).map(str::to_owned),
    };
    let suggestion = suggestion.map_or_else(String::new, |s| format!("did you mean `{s}`? "));
    // What is wrong beyond the form, which is listed below anyway (an empty model id).
    let reason = match &e {
        ksearch_llm::LlmError::InvalidSpec { detail, .. }
            if !detail.starts_with("expected PROVIDER")
                && !detail.starts_with("unknown provider") =>
        {
            format!(" ({detail})")
        }
        _ => String::new(),
    };
    usage(format!(
        "{flag} `{value}` is not a proposer ksearch knows{reason}; {suggestion}{flag} takes `builtin` (no model: a search over known tactics), `manual` or `manual:LABEL` (you or a coding agent answer each model call: docs/agent.md), or PROVIDER:MODEL with PROVIDER one of `openai`, `openai-responses`, `gemini`, `anthropic` or `exec` (e.g. `openai:gpt-5`, `exec:./my-model.sh`)"
    ))
}

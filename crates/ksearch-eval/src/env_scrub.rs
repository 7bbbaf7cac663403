//! The environment a worker sees: the orchestrator's, minus anything that looks like a secret.

use std::ffi::{OsStr, OsString};

/// Parts of a variable name that mark it as a secret (compared upper-case).
const SECRET_MARKERS: &[&str] = &["KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL"];

/// Whether a variable must not reach a worker.
pub fn is_secret_name(name: &OsStr) -> bool {
    let upper = name.to_string_lossy().to_uppercase();
    SECRET_MARKERS.iter().any(|m| upper.contains(m))
}

/// The user's settings among `KSEARCH_*` that every worker must see: it applies them itself,
/// and to the sandboxes it starts.
const SETTINGS: &[&str] = &[crate::sandbox::NO_NAMESPACES_VAR];

/// The variables of `vars` that may reach a worker. Variables ksearch itself sets for the
/// worker (`KSEARCH_*`) are dropped too, so a stale value cannot leak through; only the
/// settings named in `SETTINGS` pass.
pub(crate) fn scrubbed<I>(vars: I) -> Vec<(OsString, OsString)>
where
    I: IntoIterator<Item = (OsString, OsString)>,
{
    vars.into_iter()
        .filter(|(k, _)| {
            !is_secret_name(k)
                && (!k.to_string_lossy().starts_with("KSEARCH_") || SETTINGS.iter().any(|s| k == s))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_dropped_and_the_rest_kept() {
        let vars = [
            ("OPENAI_API_KEY", "sk-1"),
            ("GITHUB_TOKEN", "t"),
            ("aws_secret_access_key", "s"),
            ("DB_PASSWORD", "p"),
            ("KSEARCH_PROTOCOL_FDS", "9,9"),
            ("KSEARCH_SANDBOX_EXE", "/tmp/forged"),
            ("PATH", "/usr/bin"),
            ("KSEARCH_SANDBOX_NO_NAMESPACES", "1"),
            ("CUDA_VISIBLE_DEVICES", "0"),
        ]
        .map(|(k, v)| (OsString::from(k), OsString::from(v)));
        let kept: Vec<String> = scrubbed(vars)
            .into_iter()
            .map(|(k, _)| k.into_string().unwrap())
            .collect();
        // The user's sandbox setting reaches every judge (the Python harness's runners ignored
        // it); ksearch's own variables do not.
        assert_eq!(
            kept,
            [
                "PATH",
                "KSEARCH_SANDBOX_NO_NAMESPACES",
                "CUDA_VISIBLE_DEVICES"
            ]
        );
    }
}

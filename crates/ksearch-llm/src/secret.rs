//! A string that must never be printed: API keys.

use std::fmt;

/// A secret string (an API key). `Debug` and `Display` print `[redacted]`; it implements neither
/// `Serialize` nor `Deserialize`, so it cannot reach a run record by accident. The value is read
/// only through [`Secret::expose`].
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Wraps a secret value.
    pub fn new(value: impl Into<String>) -> Secret {
        Secret(value.into())
    }

    /// The secret value, for the one place that must send it.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// Whether the value is empty (an empty key counts as no key).
    pub fn is_empty(&self) -> bool {
        self.0.trim().is_empty()
    }
}

impl From<String> for Secret {
    fn from(value: String) -> Secret {
        Secret(value)
    }
}

impl From<&str> for Secret {
    fn from(value: &str) -> Secret {
        Secret(value.to_string())
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[redacted]")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[redacted]")
    }
}

/// Replaces every occurrence of `secret` in `text` with `[redacted]` (a provider or proxy may
/// echo the key back in an error message).
pub(crate) fn scrub(text: &str, secret: Option<&Secret>) -> String {
    match secret {
        Some(secret) if secret.expose().len() >= 4 => text.replace(secret.expose(), "[redacted]"),
        _ => text.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn never_printed() {
        let secret = Secret::new("sk-abc-123");
        assert_eq!(format!("{secret}"), "[redacted]");
        assert_eq!(format!("{secret:?}"), "[redacted]");
        assert_eq!(format!("{:?}", Some(secret.clone())), "Some([redacted])");
        assert_eq!(secret.expose(), "sk-abc-123");
    }

    #[test]
    fn scrub_replaces_every_occurrence() {
        let secret = Secret::new("sk-abc-123");
        assert_eq!(
            scrub("bad key sk-abc-123 (sk-abc-123)", Some(&secret)),
            "bad key [redacted] ([redacted])"
        );
        assert_eq!(scrub("nothing", None), "nothing");
    }
}

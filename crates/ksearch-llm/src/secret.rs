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

/// What replaces a secret in a text.
const PLACEHOLDER: &str = "[redacted]";

/// The shortest value scrubbed: keys are long and random, while a short value of a variable
/// named like a secret (`HAS_KEY=true`, `KEYTIMEOUT=1`) would scrub ordinary words out of
/// every answer.
const MIN_SECRET_LEN: usize = 8;

/// The longest prefix segment a key may carry before its random part (`sk-`, `sk-ant-`,
/// `api03-`, `ghp_`): a provider or a command may echo the key without it.
const MAX_PREFIX_SEGMENT: usize = 5;

/// Scrubs secrets out of texts a provider or a command wrote (error messages, stderr, answers):
/// every occurrence of each secret, in any ASCII case (a server may echo a key lower-cased), and
/// of the secret without its `sk-`-style prefix segments, becomes `[redacted]`.
#[derive(Clone, Default)]
pub(crate) struct Scrubber {
    /// ASCII-lower-cased, longest first (so a key goes whole before its suffixes).
    needles: Vec<String>,
}

impl Scrubber {
    /// A scrubber for `secrets` (values shorter than 8 bytes are left alone).
    pub(crate) fn new<'a>(secrets: impl IntoIterator<Item = &'a Secret>) -> Scrubber {
        let mut needles = Vec::new();
        for secret in secrets {
            let mut value = secret.expose().trim();
            while value.len() >= MIN_SECRET_LEN {
                needles.push(value.to_ascii_lowercase());
                // The value without its first segment, while that segment looks like a prefix.
                match value.split_once(['-', '_']) {
                    Some((head, rest))
                        if (1..=MAX_PREFIX_SEGMENT).contains(&head.len())
                            && head.bytes().all(|b| b.is_ascii_alphanumeric()) =>
                    {
                        value = rest;
                    }
                    _ => break,
                }
            }
        }
        needles.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
        needles.dedup();
        Scrubber { needles }
    }

    /// `text` with every secret replaced by `[redacted]`.
    pub(crate) fn scrub(&self, text: &str) -> String {
        let mut text = text.to_string();
        for needle in &self.needles {
            // ASCII lower-casing keeps every byte where it was, so a match in the lowered copy
            // is at the same place, on character boundaries, in the text.
            let lowered = text.to_ascii_lowercase();
            if !lowered.contains(needle.as_str()) {
                continue;
            }
            let mut out = String::with_capacity(text.len());
            let mut from = 0;
            for (at, _) in lowered.match_indices(needle.as_str()) {
                out.push_str(&text[from..at]);
                out.push_str(PLACEHOLDER);
                from = at + needle.len();
            }
            out.push_str(&text[from..]);
            text = out;
        }
        text
    }
}

impl fmt::Debug for Scrubber {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Scrubber({} secrets, redacted)", self.needles.len())
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
        let scrubber = Scrubber::new([&secret]);
        assert_eq!(
            scrubber.scrub("bad key sk-abc-123 (sk-abc-123)"),
            "bad key [redacted] ([redacted])"
        );
        assert_eq!(Scrubber::default().scrub("nothing"), "nothing");
        assert!(!format!("{scrubber:?}").contains("abc"));
    }

    /// A server or a command may echo a key lower-cased, upper-cased, or without its `sk-`.
    #[test]
    fn scrub_ignores_case_and_the_key_s_prefix() {
        let key = Secret::new("sk-ant-api03-REDTEAM-Secret-42");
        let other = Secret::new("ghp_0123456789abcdef");
        let scrubber = Scrubber::new([&key, &other]);
        let text = "a SK-ANT-API03-REDTEAM-SECRET-42 b sk-ant-api03-redteam-secret-42 \
                    c ant-api03-REDTEAM-Secret-42 d api03-redteam-secret-42 e REDTEAM-Secret-42 \
                    f 0123456789ABCDEF g Bearer sk-ant-api03-REDTEAM-Secret-42";
        let scrubbed = scrubber.scrub(text);
        assert!(
            !scrubbed.to_ascii_lowercase().contains("redteam"),
            "{scrubbed}"
        );
        assert!(!scrubbed.contains("0123456789"), "{scrubbed}");
        assert_eq!(scrubbed.matches("[redacted]").count(), 7, "{scrubbed}");
        // Non-ASCII text around a secret stays as it was.
        assert_eq!(scrubber.scrub("é ghp_0123456789ABCDEF ü"), "é [redacted] ü");
    }

    /// A short value of a variable named like a secret is not a key: scrubbing it would take
    /// ordinary words out of every answer.
    #[test]
    fn short_values_are_left_alone() {
        let scrubber = Scrubber::new([&Secret::new("true"), &Secret::new("sk-1234")]);
        assert_eq!(scrubber.scrub("true sk-1234"), "true sk-1234");
    }
}

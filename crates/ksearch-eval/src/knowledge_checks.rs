//! The knowledge layer's rules, checked on every candidate before it reaches a worker.

use std::sync::OnceLock;

use ksearch_core::static_check::Violation;
use ksearch_knowledge::{Hardware, Knowledge, Language, Platform, Target};

use crate::error::EvalError;

/// The built-in knowledge, loaded once. Its own tests guarantee it loads.
pub fn knowledge() -> &'static Knowledge {
    static K: OnceLock<Knowledge> = OnceLock::new();
    K.get_or_init(|| {
        Knowledge::builtin()
            .unwrap_or_else(|e| panic!("the built-in knowledge base is broken: {e}"))
    })
}

/// The device whose limits the rules use: the one named, else the local GPU detection finds.
pub(crate) fn hardware(explicit: Option<&str>) -> Result<Option<Hardware>, EvalError> {
    knowledge()
        .select_hardware(explicit)
        .map(Option::<&Hardware>::cloned)
        .map_err(|e| EvalError::Options(e.to_string()))
}

/// Violations of the rules for `language` on `target` (none where the knowledge base has no
/// such platform).
pub fn check(
    source: &str,
    language: Language,
    target: Target,
    hardware: Option<&Hardware>,
) -> Vec<Violation> {
    match Platform::new(language, target) {
        Ok(platform) => knowledge().check(source, platform, hardware),
        Err(_) => Vec::new(),
    }
}

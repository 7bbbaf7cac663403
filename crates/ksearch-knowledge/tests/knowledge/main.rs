//! The knowledge layer's tests: the data, the checks, the rendering, detection and the CLI
//! functions. One test binary, a module per concern.

mod checks;
mod cli;
mod detect;
mod load;
mod render;
mod unicode;

use std::path::PathBuf;

use ksearch_knowledge::Knowledge;

/// The embedded knowledge; every test starts from it.
pub(crate) fn knowledge() -> Knowledge {
    match Knowledge::builtin() {
        Ok(k) => k,
        Err(e) => panic!("the built-in knowledge does not load:\n{e}"),
    }
}

pub(crate) fn fixture_path(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

pub(crate) fn fixture(name: &str) -> String {
    std::fs::read_to_string(fixture_path(name)).expect("fixture exists")
}

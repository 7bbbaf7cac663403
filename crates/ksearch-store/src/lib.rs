//! The run store: everything a run knows, in `RUN_DIR/run.sqlite`, with candidate sources in
//! `RUN_DIR/artifacts/` by content hash. One writer (the engine's thread); every step is one
//! transaction, committed before the next step starts, so a run killed at any moment resumes
//! from its last committed step. The writer holds `RUN_DIR/writer.lock` (an OS file lock) for
//! its whole life; readers take no lock and open the store read-only (they write nothing, so
//! they work on a read-only or archived run). Artifacts are checked against their hash on every
//! read, and no record holding NaN or an infinity is ever written.

mod artifacts;
mod error;
mod finite;
mod run_store;
mod schema;

pub use artifacts::{MAX_ARTIFACT_BYTES, content_hash};
pub use error::StoreError;
pub use finite::non_finite_path;
pub use run_store::{ARTIFACTS_DIR, DB_FILE, LOCK_FILE, RunStore, Snapshot, Tx};
pub use schema::SCHEMA_VERSION;

use std::path::PathBuf;

use thiserror::Error;

#[derive(Debug, Error)]
pub enum StoreError {
    #[error("{} already holds a run; resume it with `ksearch resume {}` or choose another --run-dir", dir.display(), dir.display())]
    Exists { dir: PathBuf },
    #[error("{} holds no run (no run.sqlite)", dir.display())]
    Missing { dir: PathBuf },
    #[error("{} is in use by another ksearch{}: one run or resume at a time writes a run directory (`ksearch tree`, `report`, `show` and `export` can read it meanwhile)", dir.display(), holder.map_or_else(String::new, |p| format!(" (process {p})")))]
    Busy { dir: PathBuf, holder: Option<u32> },
    #[error("{} was written by a newer ksearch (store schema {found}; this ksearch reads up to {supported})", path.display())]
    TooNew {
        path: PathBuf,
        found: u32,
        supported: u32,
    },
    /// A file or directory of the run that could not be read or written; the error names it.
    #[error(transparent)]
    Io(#[from] std::io::Error),
    #[error("database error in {}: {source}", path.display())]
    Sqlite {
        path: PathBuf,
        #[source]
        source: rusqlite::Error,
    },
    #[error("corrupt record in {}: {what}{}: {source}", path.display(), if at.is_empty() || at == "." { String::new() } else { format!(", field `{at}`") })]
    Corrupt {
        path: PathBuf,
        what: String,
        /// Where in the record (e.g. `eval.timing.min_time_ms`); empty when unknown.
        at: String,
        #[source]
        source: serde_json::Error,
    },
    /// A record that holds NaN or an infinity: JSON cannot hold it, and writing it as `null`
    /// would make the run unreadable. Always a bug in the code that built the record.
    #[error("refusing to write {what} to {}: it holds a non-finite number at `{at}` (a bug: no NaN or infinity may reach the run store)", path.display())]
    NonFinite {
        path: PathBuf,
        what: String,
        at: String,
    },
    #[error("artifact {hash} is missing from {}", dir.display())]
    MissingArtifact { hash: String, dir: PathBuf },
    /// An artifact that is not what ksearch writes (a link, a device, a named pipe, a file
    /// larger than any artifact), refused without being read; or one too large to store.
    #[error("artifact {} {what}; refusing to use it", path.display())]
    BadArtifact { path: PathBuf, what: String },
    #[error("artifact {} was modified after it was stored: its content hashes to {actual}, expected {expected}; refusing to use it", path.display())]
    TamperedArtifact {
        path: PathBuf,
        expected: String,
        actual: String,
    },
}

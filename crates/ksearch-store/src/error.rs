use std::path::PathBuf;

use thiserror::Error;

#[derive(Debug, Error)]
pub enum StoreError {
    #[error("{} already holds a run; resume it with `ksearch resume {}` or choose another --run-dir", dir.display(), dir.display())]
    Exists { dir: PathBuf },
    #[error("{} holds no run (no run.sqlite)", dir.display())]
    Missing { dir: PathBuf },
    #[error("{} was written by a newer ksearch (store schema {found}; this ksearch reads up to {supported})", path.display())]
    TooNew {
        path: PathBuf,
        found: u32,
        supported: u32,
    },
    #[error("failed to {action} {}", path.display())]
    Io {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("database error in {}: {source}", path.display())]
    Sqlite {
        path: PathBuf,
        #[source]
        source: rusqlite::Error,
    },
    #[error("corrupt record in {}: {what}: {source}", path.display())]
    Corrupt {
        path: PathBuf,
        what: String,
        #[source]
        source: serde_json::Error,
    },
    #[error("artifact {hash} is missing from {}", dir.display())]
    MissingArtifact { hash: String, dir: PathBuf },
}

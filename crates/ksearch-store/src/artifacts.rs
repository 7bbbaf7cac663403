//! Candidate sources by content hash: `artifacts/<sha256>` holds the text; the file name a
//! source had is stored beside its hash in the records that use it.

use std::path::Path;

use sha2::{Digest, Sha256};

use crate::StoreError;

/// Hex SHA-256 of a source text.
pub fn content_hash(text: &str) -> String {
    let digest = Sha256::digest(text.as_bytes());
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// Write `text` under its hash, atomically (temp file + rename) so a kill never leaves a torn
/// artifact behind. Existing artifacts are left alone: same hash, same content.
pub(crate) fn put(dir: &Path, text: &str) -> Result<String, StoreError> {
    let hash = content_hash(text);
    let path = dir.join(&hash);
    if path.exists() {
        return Ok(hash);
    }
    let tmp = dir.join(format!(".{hash}.{}.tmp", std::process::id()));
    std::fs::write(&tmp, text).map_err(|source| StoreError::Io {
        action: "write",
        path: tmp.clone(),
        source,
    })?;
    std::fs::rename(&tmp, &path).map_err(|source| StoreError::Io {
        action: "rename into place",
        path: path.clone(),
        source,
    })?;
    Ok(hash)
}

pub(crate) fn get(dir: &Path, hash: &str) -> Result<String, StoreError> {
    let valid = hash.len() == 64 && hash.bytes().all(|b| b.is_ascii_hexdigit());
    if !valid {
        return Err(StoreError::MissingArtifact {
            hash: hash.to_owned(),
            dir: dir.to_owned(),
        });
    }
    match std::fs::read_to_string(dir.join(hash)) {
        Ok(text) => Ok(text),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(StoreError::MissingArtifact {
            hash: hash.to_owned(),
            dir: dir.to_owned(),
        }),
        Err(source) => Err(StoreError::Io {
            action: "read",
            path: dir.join(hash),
            source,
        }),
    }
}

//! Candidate sources by content hash: `artifacts/<sha256>` holds the text; the file name a
//! source had is stored beside its hash in the records that use it. Every read checks the
//! content against its name, so an artifact changed after it was written is refused, never
//! used.

use std::path::Path;

use sha2::{Digest, Sha256};

use crate::StoreError;

/// Hex SHA-256 of a source text.
pub fn content_hash(text: &str) -> String {
    bytes_hash(text.as_bytes())
}

fn bytes_hash(bytes: &[u8]) -> String {
    let digest = Sha256::digest(bytes);
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// Write `text` under its hash, atomically (temp file + rename) so a kill never leaves a torn
/// artifact behind. An existing artifact is kept when it holds the same content; one whose
/// content no longer matches its name is refused.
pub(crate) fn put(dir: &Path, text: &str) -> Result<String, StoreError> {
    let hash = content_hash(text);
    let path = dir.join(&hash);
    if path.exists() {
        get(dir, &hash)?;
        return Ok(hash);
    }
    let tmp = dir.join(format!(".{hash}.{}.tmp", std::process::id()));
    fs_err::write(&tmp, text)?;
    fs_err::rename(&tmp, &path)?;
    Ok(hash)
}

/// The text stored under `hash`, verified against it.
pub(crate) fn get(dir: &Path, hash: &str) -> Result<String, StoreError> {
    let valid = hash.len() == 64 && hash.bytes().all(|b| b.is_ascii_hexdigit());
    if !valid {
        return Err(StoreError::MissingArtifact {
            hash: hash.to_owned(),
            dir: dir.to_owned(),
        });
    }
    let path = dir.join(hash);
    let bytes = match fs_err::read(&path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(StoreError::MissingArtifact {
                hash: hash.to_owned(),
                dir: dir.to_owned(),
            });
        }
        Err(e) => return Err(e.into()),
    };
    let actual = bytes_hash(&bytes);
    if !actual.eq_ignore_ascii_case(hash) {
        return Err(StoreError::TamperedArtifact {
            path,
            expected: hash.to_ascii_lowercase(),
            actual,
        });
    }
    // Text whose hash matches was written by `put`, from a `&str`: always UTF-8.
    String::from_utf8(bytes).map_err(|e| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("{}: {e}", path.display()),
        )
        .into()
    })
}

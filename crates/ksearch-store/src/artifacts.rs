//! Candidate sources by content hash: `artifacts/<sha256>` holds the text; the file name a
//! source had is stored beside its hash in the records that use it. Every read checks the
//! content against its name, so an artifact changed after it was written is refused, never
//! used.
//!
//! A run directory may come from someone else, so an artifact is read only when it is a
//! regular file no larger than ksearch writes one (a link to `/dev/zero` or a named pipe is
//! refused, not read forever), and written only through a file this process created.

use std::io::{Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use ksearch_core::file_kind::file_kind;
use sha2::{Digest, Sha256};

use crate::StoreError;

/// The largest artifact ksearch writes, and so the largest it reads: a candidate source (the
/// static check's limit, which the proposers keep to; a task's seed is read with it too).
pub const MAX_ARTIFACT_BYTES: usize = ksearch_core::static_check::MAX_SOURCE_BYTES;

/// Hex SHA-256 of a source text.
pub fn content_hash(text: &str) -> String {
    bytes_hash(text.as_bytes())
}

fn bytes_hash(bytes: &[u8]) -> String {
    let digest = Sha256::digest(bytes);
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

fn bad(path: &Path, what: String) -> StoreError {
    StoreError::BadArtifact {
        path: path.to_owned(),
        what,
    }
}

/// Write `text` under its hash, atomically (temp file + rename) so a kill never leaves a torn
/// artifact behind. An existing artifact is kept when it holds the same content; one whose
/// content no longer matches its name is refused. Larger than [`MAX_ARTIFACT_BYTES`] is
/// refused: nothing could read it back.
pub(crate) fn put(dir: &Path, text: &str) -> Result<String, StoreError> {
    let hash = content_hash(text);
    let path = dir.join(&hash);
    if text.len() > MAX_ARTIFACT_BYTES {
        return Err(bad(
            &path,
            format!(
                "would have {} bytes, more than the limit of {MAX_ARTIFACT_BYTES} bytes for an artifact",
                text.len()
            ),
        ));
    }
    // Not `exists()`, which follows a link: a planted one is refused by `get`, not replaced.
    if fs_err::symlink_metadata(&path).is_ok() {
        get(dir, &hash)?;
        return Ok(hash);
    }
    // The name is predictable: whatever is there (a link planted to a file of the user's, a
    // leftover of a killed process with this pid) is removed, never written through, and the
    // file is created anew (O_EXCL fails on a link rather than following it).
    let tmp = dir.join(format!(".{hash}.{}.tmp", std::process::id()));
    match fs_err::remove_file(&tmp) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e.into()),
        _ => {}
    }
    use fs_err::os::unix::fs::OpenOptionsExt as _;
    let mut file = fs_err::OpenOptions::new()
        .write(true)
        .create_new(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&tmp)?;
    file.write_all(text.as_bytes())?;
    drop(file);
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
    let bytes = read_bounded(&path).map_err(|e| match e {
        StoreError::Io(e) if e.kind() == std::io::ErrorKind::NotFound => {
            StoreError::MissingArtifact {
                hash: hash.to_owned(),
                dir: dir.to_owned(),
            }
        }
        e => e,
    })?;
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

/// The bytes of the regular file at `path`, at most [`MAX_ARTIFACT_BYTES`] of them: a link, a
/// device, a named pipe or a larger file is refused without being read.
fn read_bounded(path: &Path) -> Result<Vec<u8>, StoreError> {
    // Looked at before it is opened, so a device is not even opened; then checked again on the
    // open descriptor (O_NOFOLLOW, and O_NONBLOCK so a pipe swapped in meanwhile does not
    // wait for a writer), so what is checked is what is read.
    let meta = fs_err::symlink_metadata(path)?;
    if !meta.is_file() {
        return Err(bad(
            path,
            format!("is {}, not a regular file", file_kind(meta.file_type())),
        ));
    }
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path);
    let file = match file {
        Ok(f) => f,
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
            return Err(bad(path, "is a symbolic link, not a regular file".into()));
        }
        Err(e) => {
            let text = format!("failed to open {}: {e}", path.display());
            return Err(std::io::Error::new(e.kind(), text).into());
        }
    };
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(bad(
            path,
            format!("is {}, not a regular file", file_kind(meta.file_type())),
        ));
    }
    let too_large = |size: u64| {
        bad(
            path,
            format!(
                "has {size} bytes, more than the largest artifact ksearch writes ({MAX_ARTIFACT_BYTES} bytes)"
            ),
        )
    };
    if meta.len() > MAX_ARTIFACT_BYTES as u64 {
        return Err(too_large(meta.len()));
    }
    // The file may grow while it is read: never more than one byte past the limit.
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.take(MAX_ARTIFACT_BYTES as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| {
            std::io::Error::new(e.kind(), format!("failed to read {}: {e}", path.display()))
        })?;
    if bytes.len() > MAX_ARTIFACT_BYTES {
        return Err(too_large(bytes.len() as u64));
    }
    Ok(bytes)
}

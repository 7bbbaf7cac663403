//! Reading files a user names (task files, the sources they name, candidates, configuration):
//! with a size bound, and only when they are regular files, so a `task.toml` linked to
//! `/dev/zero` or a named pipe is refused by name rather than read forever, and a huge file is
//! refused from its size without being read.

use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use ksearch_core::file_kind::file_kind;
use thiserror::Error;

/// Largest `task.toml` (or other TOML file a user names) read: 1 MiB.
pub const MAX_TOML_BYTES: u64 = 1 << 20;

/// Largest source file read: a candidate, or a reference, seed or baseline a task names. The
/// static check refuses larger candidates with the same limit.
pub const MAX_SOURCE_BYTES: u64 = ksearch_core::static_check::MAX_SOURCE_BYTES as u64;

#[derive(Debug, Error)]
pub enum ReadError {
    #[error("{} is not a regular file (it is {kind}); give a file", path.display())]
    NotAFile { path: PathBuf, kind: &'static str },
    #[error(
        "{} has {size} bytes, more than the limit of {limit} bytes ({}) for {what}",
        path.display(),
        human(*limit)
    )]
    TooLarge {
        path: PathBuf,
        /// What is known of its size: at least this many bytes.
        size: u64,
        limit: u64,
        what: &'static str,
    },
    #[error("failed to read {}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

fn human(bytes: u64) -> String {
    match bytes {
        b if b >= 1 << 20 && b % (1 << 20) == 0 => format!("{} MiB", b >> 20),
        b if b >= 1 << 10 && b % (1 << 10) == 0 => format!("{} KiB", b >> 10),
        b => format!("{b} bytes"),
    }
}

/// The text of the regular file at `path` (symbolic links followed), refused without being read
/// when it is not a regular file or has more than `limit` bytes. `what` names the file's role in
/// the error ("a task file", "a candidate").
pub fn read_text(path: &Path, limit: u64, what: &'static str) -> Result<String, ReadError> {
    let io = |source| ReadError::Io {
        path: path.to_owned(),
        source,
    };
    // Opened without blocking (a named pipe would otherwise wait for a writer), then checked on
    // the open descriptor, so what is checked is what is read. std's, not fs-err's: every error
    // here is a `ReadError::Io`, which names the path already.
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .map_err(io)?;
    let meta = file.metadata().map_err(io)?;
    if !meta.is_file() {
        return Err(ReadError::NotAFile {
            path: path.to_owned(),
            kind: file_kind(meta.file_type()),
        });
    }
    let too_large = |size| ReadError::TooLarge {
        path: path.to_owned(),
        size,
        limit,
        what,
    };
    if meta.len() > limit {
        return Err(too_large(meta.len()));
    }
    // The file may grow while it is read: never more than one byte past the limit.
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.take(limit + 1).read_to_end(&mut bytes).map_err(io)?;
    if bytes.len() as u64 > limit {
        return Err(too_large(bytes.len() as u64));
    }
    String::from_utf8(bytes).map_err(|e| {
        io(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("not UTF-8 text: {e}"),
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_small_file_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("a.c");
        fs_err::write(&p, "int x;").unwrap();
        assert_eq!(read_text(&p, 6, "a candidate").unwrap(), "int x;");
    }

    #[test]
    fn a_file_over_the_limit_is_refused_with_its_name_and_the_limit() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("big.c");
        fs_err::write(&p, vec![b'x'; 2049]).unwrap();
        let e = read_text(&p, 2048, "a candidate").unwrap_err();
        assert!(matches!(e, ReadError::TooLarge { size: 2049, .. }), "{e}");
        let text = e.to_string();
        assert!(text.contains("big.c"), "{text}");
        assert!(
            text.contains("2048 bytes (2 KiB) for a candidate"),
            "{text}"
        );
    }

    #[test]
    fn a_sparse_huge_file_is_refused_without_reading_it() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("huge.c");
        let f = fs_err::File::create(&p).unwrap();
        f.set_len(64 << 30).unwrap(); // 64 GiB, no blocks
        let started = std::time::Instant::now();
        let e = read_text(&p, MAX_SOURCE_BYTES, "a candidate").unwrap_err();
        assert!(started.elapsed() < std::time::Duration::from_secs(1));
        assert!(
            matches!(e, ReadError::TooLarge { size, .. } if size == 64 << 30),
            "{e}"
        );
    }

    #[test]
    fn devices_pipes_and_directories_are_refused_by_name() {
        let dir = tempfile::tempdir().unwrap();
        // /dev/zero through a symbolic link named like a task file.
        let link = dir.path().join("task.toml");
        std::os::unix::fs::symlink("/dev/zero", &link).unwrap();
        let e = read_text(&link, MAX_TOML_BYTES, "a task file").unwrap_err();
        assert!(
            matches!(
                e,
                ReadError::NotAFile {
                    kind: "a character device",
                    ..
                }
            ),
            "{e}"
        );
        assert!(e.to_string().contains("task.toml"), "{e}");
        // A named pipe with no writer: refused at once, not waited on.
        let fifo = dir.path().join("pipe.c");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let e = read_text(&fifo, MAX_SOURCE_BYTES, "a candidate").unwrap_err();
        assert!(
            matches!(
                e,
                ReadError::NotAFile {
                    kind: "a named pipe",
                    ..
                }
            ),
            "{e}"
        );
        let e = read_text(dir.path(), MAX_SOURCE_BYTES, "a candidate").unwrap_err();
        assert!(
            matches!(
                e,
                ReadError::NotAFile {
                    kind: "a directory",
                    ..
                }
            ),
            "{e}"
        );
    }

    #[test]
    fn binary_files_are_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("b.c");
        fs_err::write(&p, [0xff, 0xfe, 0x00]).unwrap();
        let e = read_text(&p, 10, "a candidate").unwrap_err();
        assert!(matches!(e, ReadError::Io { .. }), "{e}");
    }
}

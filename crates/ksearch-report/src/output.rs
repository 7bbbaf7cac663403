//! Writing what a report or an export produces. A run directory may have been prepared by
//! someone else, and its default outputs (`RUN_DIR/report.html`, `RUN_DIR/export/`) lie inside
//! it: a link planted there must not send ksearch's writes to a file of the user's.

use std::io::Write as _;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::Path;

use crate::data::ReportError;

/// Refuse `path` when it is a symbolic link (for an output inside the run directory, which
/// the user did not choose); nothing there, or anything else, is fine.
pub fn refuse_link(path: &Path) -> Result<(), ReportError> {
    match fs_err::symlink_metadata(path) {
        Ok(m) if m.file_type().is_symlink() => Err(ReportError::Unsafe {
            path: path.to_owned(),
            what: "is a symbolic link (the run directory may come from someone else): remove it, or write elsewhere with -o".into(),
        }),
        _ => Ok(()),
    }
}

/// Write `text` to `path` through a new temporary file beside it, renamed over it: a link at
/// `path` is replaced rather than written through, and no one reads half a file.
pub fn write_file(path: &Path, text: &str) -> Result<(), ReportError> {
    let name = path.file_name().ok_or_else(|| ReportError::Unsafe {
        path: path.to_owned(),
        what: "names no file".into(),
    })?;
    let mut tmp_name = std::ffi::OsString::from(".");
    tmp_name.push(name);
    tmp_name.push(format!(".{}.tmp", std::process::id()));
    let tmp = path.with_file_name(tmp_name);
    // Whatever has the temporary name (a leftover, a planted link) is removed, not followed;
    // O_EXCL then creates the file anew and fails on a link rather than following it. Where it
    // cannot be removed (a read-only directory), the creation fails and says why.
    let _ = fs_err::remove_file(&tmp);
    let file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&tmp)
        .map_err(|e| {
            std::io::Error::new(e.kind(), format!("failed to create {}: {e}", tmp.display()))
        })?;
    let mut file = fs_err::File::from_parts(file, &tmp);
    let written = file.write_all(text.as_bytes());
    drop(file);
    if let Err(e) = written.and_then(|()| fs_err::rename(&tmp, path)) {
        let _ = fs_err::remove_file(&tmp);
        return Err(e.into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_link_at_the_target_is_replaced_not_written_through() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("precious");
        fs_err::write(&victim, "keep me").unwrap();
        let target = dir.path().join("report.html");
        std::os::unix::fs::symlink(&victim, &target).unwrap();
        let tmp = dir
            .path()
            .join(format!(".report.html.{}.tmp", std::process::id()));
        std::os::unix::fs::symlink(&victim, &tmp).unwrap();

        assert!(matches!(
            refuse_link(&target),
            Err(ReportError::Unsafe { .. })
        ));
        write_file(&target, "<html>").unwrap();
        assert_eq!(fs_err::read_to_string(&victim).unwrap(), "keep me");
        assert!(!fs_err::symlink_metadata(&target).unwrap().is_symlink());
        assert_eq!(fs_err::read_to_string(&target).unwrap(), "<html>");
        assert!(!tmp.exists() && fs_err::symlink_metadata(&tmp).is_err());
        refuse_link(&target).unwrap();
        refuse_link(&dir.path().join("absent")).unwrap();
    }

    #[test]
    fn a_temporary_name_that_cannot_be_removed_leaves_the_error_to_the_write() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("report.html");
        // What cannot be removed as a file, by anyone: a directory with something in it.
        let tmp = dir
            .path()
            .join(format!(".report.html.{}.tmp", std::process::id()));
        fs_err::create_dir_all(tmp.join("x")).unwrap();
        let e = write_file(&target, "<html>").unwrap_err().to_string();
        assert!(e.starts_with("failed to create"), "{e}");
        assert!(!target.exists());
    }
}

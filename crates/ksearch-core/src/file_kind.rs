//! What a path that is not a regular file is, in words, for an error that refuses it.

/// `t` in words: "a directory", "a symbolic link", "a named pipe", ….
pub fn file_kind(t: std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if t.is_symlink() {
        "a symbolic link"
    } else if t.is_dir() {
        "a directory"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_fifo() {
        "a named pipe"
    } else if t.is_socket() {
        "a socket"
    } else {
        "not a regular file"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_are_named() {
        let kind =
            |p: &std::path::Path| file_kind(std::fs::symlink_metadata(p).unwrap().file_type());
        let link = std::env::temp_dir().join(format!("ksearch-file-kind-{}", std::process::id()));
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink("/", &link).unwrap();
        let named = kind(&link);
        std::fs::remove_file(&link).unwrap();
        assert_eq!(named, "a symbolic link");
        assert_eq!(kind(std::path::Path::new("/")), "a directory");
        assert_eq!(
            kind(std::path::Path::new("/dev/null")),
            "a character device"
        );
    }
}

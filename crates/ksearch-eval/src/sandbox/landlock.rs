//! Landlock: the file-system fence of a sandbox that has no mount namespace (an unprivileged
//! user where user namespaces are refused, a chroot, a container without them). The program may
//! read and execute only beneath the paths a private root would have shown it (the system's
//! directories, its devices, what the spec exposes, its own `/proc` entry) and write only beneath
//! its writable paths and its own directory. Needs Linux 5.13; where the kernel has no Landlock,
//! the sandbox says so.

use std::ffi::CString;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

// Access rights (linux/landlock.h). ABI 1: bits 0-12; ABI 2 adds REFER; ABI 3 adds TRUNCATE.
const EXECUTE: u64 = 1 << 0;
const WRITE_FILE: u64 = 1 << 1;
const READ_FILE: u64 = 1 << 2;
const READ_DIR: u64 = 1 << 3;
const REMOVE_DIR: u64 = 1 << 4;
const REMOVE_FILE: u64 = 1 << 5;
const MAKE_CHAR: u64 = 1 << 6;
const MAKE_DIR: u64 = 1 << 7;
const MAKE_REG: u64 = 1 << 8;
const MAKE_SOCK: u64 = 1 << 9;
const MAKE_FIFO: u64 = 1 << 10;
const MAKE_BLOCK: u64 = 1 << 11;
const MAKE_SYM: u64 = 1 << 12;
const REFER: u64 = 1 << 13;
const TRUNCATE: u64 = 1 << 14;

/// Rights that apply to a file (a rule on a file may hold only these).
const FILE_RIGHTS: u64 = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE;
const READ: u64 = EXECUTE | READ_FILE | READ_DIR;
const WRITE: u64 = WRITE_FILE
    | REMOVE_DIR
    | REMOVE_FILE
    | MAKE_CHAR
    | MAKE_DIR
    | MAKE_REG
    | MAKE_SOCK
    | MAKE_FIFO
    | MAKE_BLOCK
    | MAKE_SYM
    | TRUNCATE;

const CREATE_RULESET_VERSION: u32 = 1;
const RULE_PATH_BENEATH: libc::c_int = 1;

#[repr(C)]
struct RulesetAttr {
    handled_access_fs: u64,
}

#[repr(C, packed)]
struct PathBeneathAttr {
    allowed_access: u64,
    parent_fd: i32,
}

/// One path the program may use: read (and execute), or also write.
#[derive(Debug, Clone)]
pub(crate) struct Grant {
    pub(crate) path: PathBuf,
    pub(crate) write: bool,
}

/// The kernel's Landlock ABI version; an error where it has none.
fn abi() -> io::Result<i64> {
    // SAFETY: the version query takes no attribute.
    let v = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<RulesetAttr>(),
            0usize,
            CREATE_RULESET_VERSION,
        )
    };
    if v < 1 {
        return Err(io::Error::last_os_error());
    }
    Ok(v)
}

/// Restrict the calling process (and what it execs) to `grants`. Needs `PR_SET_NO_NEW_PRIVS`.
pub(crate) fn restrict(grants: &[Grant]) -> io::Result<()> {
    let abi = abi()?;
    let mut handled = READ | (WRITE & !TRUNCATE);
    if abi >= 2 {
        handled |= REFER;
    }
    if abi >= 3 {
        handled |= TRUNCATE;
    }
    let attr = RulesetAttr {
        handled_access_fs: handled,
    };
    // SAFETY: a valid attribute of the size given.
    let ruleset = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            &raw const attr,
            std::mem::size_of::<RulesetAttr>(),
            0u32,
        )
    };
    if ruleset < 0 {
        return Err(io::Error::last_os_error());
    }
    let ruleset = ruleset as libc::c_int;
    let result = (|| {
        for g in grants {
            add(ruleset, g, handled)?;
        }
        // SAFETY: plain calls on our own descriptor.
        unsafe {
            if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0
                || libc::syscall(libc::SYS_landlock_restrict_self, ruleset, 0u32) != 0
            {
                return Err(io::Error::last_os_error());
            }
        }
        Ok(())
    })();
    // SAFETY: closing our own descriptor.
    unsafe { libc::close(ruleset) };
    result
}

fn add(ruleset: libc::c_int, g: &Grant, handled: u64) -> io::Result<()> {
    let Ok(path) = CString::new(g.path.as_os_str().as_bytes()) else {
        return Ok(());
    };
    // SAFETY: a NUL-terminated path; O_PATH opens without reading.
    let fd = unsafe { libc::open(path.as_ptr(), libc::O_PATH | libc::O_CLOEXEC) };
    if fd < 0 {
        // A path that does not exist here grants nothing.
        return Ok(());
    }
    let mut allowed = if g.write { READ | WRITE } else { READ } & handled;
    if !Path::new(&g.path).is_dir() {
        allowed &= FILE_RIGHTS;
    }
    let rule = PathBeneathAttr {
        allowed_access: allowed,
        parent_fd: fd,
    };
    // SAFETY: a valid rule for the duration of the call; `fd` is ours.
    let r = unsafe {
        let r = libc::syscall(
            libc::SYS_landlock_add_rule,
            ruleset,
            RULE_PATH_BENEATH,
            &raw const rule,
            0u32,
        );
        libc::close(fd);
        r
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// In a child process (Landlock cannot be undone): the fence allows reads beneath one
    /// directory and writes beneath another, and refuses both elsewhere.
    #[test]
    fn reads_and_writes_only_where_granted() {
        if abi().is_err() {
            #[allow(clippy::print_stderr)]
            {
                eprintln!("this kernel has no Landlock: nothing to test");
            }
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let readable = dir.path().join("r");
        let writable = dir.path().join("w");
        let hidden = dir.path().join("h");
        for d in [&readable, &writable, &hidden] {
            std::fs::create_dir(d).unwrap();
            std::fs::write(d.join("f"), "x").unwrap();
        }
        // SAFETY: the child only makes system calls and exits.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            let grants = [
                Grant {
                    path: readable.clone(),
                    write: false,
                },
                Grant {
                    path: writable.clone(),
                    write: true,
                },
            ];
            let ok = restrict(&grants).is_ok()
                && std::fs::read(readable.join("f")).is_ok()
                && std::fs::write(readable.join("g"), "y").is_err()
                && std::fs::write(writable.join("g"), "y").is_ok()
                && std::fs::read(hidden.join("f")).is_err()
                && std::fs::write(hidden.join("g"), "y").is_err();
            // SAFETY: leaving the child.
            unsafe { libc::_exit(i32::from(!ok)) };
        }
        let mut status = 0;
        // SAFETY: waiting for our child.
        unsafe { libc::waitpid(pid, &raw mut status, 0) };
        assert!(
            libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
            "the fence did not hold ({status})"
        );
        assert!(!hidden.join("g").exists());
    }
}

//! `ksearch eval` run by an ordinary user, where the kernel lets one create user namespaces:
//! the full sandbox (every ksearch process clears its dumpable flag, which once made the
//! runner's `/proc` files root's, so the launcher could not write its uid map).

use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::Value;

use super::{QUICK, kernels};

/// Not root, and no user of this machine.
const USER: u32 = 4242;

/// Whether `USER` may create a user namespace here (asked in a child that becomes it).
fn user_namespaces_for_ordinary_users() -> bool {
    // SAFETY: the child only makes system calls and exits.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        // SAFETY: credential calls and unshare in the child.
        let ok = unsafe {
            libc::setgroups(0, std::ptr::null()) == 0
                && libc::setresgid(USER, USER, USER) == 0
                && libc::setresuid(USER, USER, USER) == 0
                && libc::unshare(libc::CLONE_NEWUSER) == 0
        };
        // SAFETY: leaving the child.
        unsafe { libc::_exit(i32::from(!ok)) };
    }
    let mut status = 0;
    // SAFETY: waiting for our own child.
    unsafe { libc::waitpid(pid, &raw mut status, 0) };
    libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0
}

/// Whether anyone may execute `file` where it is (every directory above it searchable).
fn reachable_by_anyone(file: &Path) -> bool {
    let mode = |p: &Path| std::fs::metadata(p).map_or(0, |m| m.permissions().mode());
    mode(file) & 0o005 == 0o005 && file.ancestors().skip(1).all(|d| mode(d) & 0o001 != 0)
}

#[test]
fn an_ordinary_user_gets_the_full_sandbox() {
    #[allow(clippy::print_stderr)]
    let skip = |why: &str| eprintln!("skipped: {why}");
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        skip("becoming an ordinary user takes root");
        return;
    }
    if !user_namespaces_for_ordinary_users() {
        skip(
            "this kernel refuses user namespaces to ordinary users (the fallback is fallback.rs's)",
        );
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut exe = PathBuf::from(env!("CARGO_BIN_EXE_ksearch"));
    if !reachable_by_anyone(&exe) {
        let copy = dir.path().join("ksearch");
        std::fs::copy(&exe, &copy).unwrap();
        exe = copy;
    }
    let candidate = dir.path().join("good.c");
    std::fs::write(&candidate, kernels::good()).unwrap();
    std::fs::set_permissions(&candidate, std::fs::Permissions::from_mode(0o644)).unwrap();
    let home = dir.path().join("home");
    std::fs::create_dir(&home).unwrap();
    std::os::unix::fs::chown(&home, Some(USER), Some(USER)).unwrap();
    let out = Command::new(exe)
        .args(["eval", "cpu/softmax", candidate.to_str().unwrap(), "--json"])
        .args(QUICK)
        .env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("HOME", &home)
        .current_dir(&home)
        .uid(USER)
        .gid(USER)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let j: Value = serde_json::from_str(stdout.trim()).unwrap_or_else(|e| {
        panic!(
            "stdout is one JSON object ({e}): {stdout:?} {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    assert_eq!(j["status"], "passed", "{j}");
    let sandbox = &j["sandbox"];
    for layer in [
        "user_namespace",
        "pid_namespace",
        "network_namespace",
        "private_root",
        "seccomp",
    ] {
        assert_eq!(sandbox[layer], true, "{layer}: {sandbox}");
    }
    assert_eq!(
        sandbox["uid"], USER,
        "the runner is the user outside: {sandbox}"
    );
}

//! The sandbox of a machine without namespaces (`no_namespaces`, what an unprivileged user gets
//! where user namespaces are refused, in a chroot say): a runner may not signal other processes,
//! read files outside what it was shown, or write outside its own directory.

use std::os::unix::fs::PermissionsExt;
use std::process::{Command, Stdio};

use serde_json::json;

#[test]
fn without_namespaces_a_runner_reaches_no_other_process_and_no_other_file() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    let outside = dir.path().join("outside");
    let secrets = dir.path().join("secrets");
    for d in [&root, &outside, &secrets] {
        std::fs::create_dir(d).unwrap();
        std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o777)).unwrap();
    }
    std::fs::write(secrets.join("key"), "sk-fallback-secret\n").unwrap();
    std::fs::set_permissions(secrets.join("key"), std::fs::Permissions::from_mode(0o644)).unwrap();
    let mut victim = Command::new("sleep").arg("30").spawn().unwrap();
    // Shell builtins only: a runner may not start processes.
    let script = format!(
        "kill -9 {victim} 2>/dev/null && echo KILLED; \
         echo x 2>/dev/null > {out}/escaped && echo WROTE; \
         read line 2>/dev/null < {key} && echo \"READ $line\"; \
         echo mine > $TMPDIR/own && read back < $TMPDIR/own && echo \"OWN $back\"; \
         kill -0 $$ && echo SELF",
        victim = victim.id(),
        out = outside.display(),
        key = secrets.join("key").display(),
    );
    let spec = json!({
        "program": "/bin/sh",
        "args": ["-c", script],
        "env": [["PATH", "/usr/bin:/bin"], ["TMPDIR", "/tmp"]],
        "cwd": root,
        "root_dir": root,
        "tmp_bytes": 1 << 20,
        "limits": {"memory_bytes": 1u64 << 30, "cpu_seconds": 10, "file_bytes": 1 << 20,
                   "processes": 1 << 16, "open_files": 256},
        "report_fd": 2,
        "no_namespaces": true,
    });
    let out = Command::new(env!("CARGO_BIN_EXE_ksearch"))
        .args(["sandbox", &spec.to_string()])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let report = String::from_utf8_lossy(&out.stderr);
    let alive = victim.try_wait().unwrap().is_none();
    let _ = victim.kill();
    let _ = victim.wait();
    assert!(report.contains("\"ready\""), "{report}");
    assert!(report.contains("\"pid_namespace\":false"), "{report}");
    assert!(report.contains("Landlock instead"), "{report}");
    assert!(
        alive,
        "the sandboxed program killed another process: {stdout}"
    );
    assert!(!stdout.contains("KILLED"), "{stdout}");
    assert!(
        !stdout.contains("WROTE") && !outside.join("escaped").exists(),
        "{stdout}"
    );
    assert!(!stdout.contains("sk-fallback-secret"), "{stdout}");
    // What it may do still works: its own directory, signals to itself.
    assert!(stdout.contains("OWN mine"), "{stdout}\n{report}");
    assert!(stdout.contains("SELF"), "{stdout}\n{report}");
}

/// The working directory a runner is handed is not opened to it (the Python harness hands its
/// runners `/tmp`, where any program of the user may keep a secret): it works in a fresh
/// directory of its own, its `TMPDIR`, removed when it ends.
#[test]
fn without_namespaces_a_runner_works_in_a_fresh_directory_of_its_own() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    let handed = dir.path().join("tmp");
    for d in [&root, &handed] {
        std::fs::create_dir(d).unwrap();
        std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o777)).unwrap();
    }
    // Another program's secret, of the same user, only it may read.
    let secret = handed.join("secret");
    std::fs::write(&secret, "sk-in-tmp\n").unwrap();
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600)).unwrap();
    let script = format!(
        "echo \"CWD $PWD\"; \
         read line 2>/dev/null < {secret} && echo \"READ $line\"; \
         read line 2>/dev/null < secret && echo \"READ HERE $line\"; \
         [ \"$PWD\" = \"$TMPDIR\" ] && echo OWN-IS-TMPDIR; \
         echo mine > mine && read back < mine && echo \"OWN $back\"",
        secret = secret.display(),
    );
    let spec = json!({
        "program": "/bin/sh",
        "args": ["-c", script],
        "env": [["PATH", "/usr/bin:/bin"], ["TMPDIR", "/tmp"]],
        "cwd": handed,
        "root_dir": root,
        "tmp_bytes": 1 << 20,
        "limits": {"memory_bytes": 1u64 << 30, "cpu_seconds": 10, "file_bytes": 1 << 20,
                   "processes": 1 << 16, "open_files": 256},
        "report_fd": 2,
        "no_namespaces": true,
    });
    let out = Command::new(env!("CARGO_BIN_EXE_ksearch"))
        .args(["sandbox", &spec.to_string()])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let report = String::from_utf8_lossy(&out.stderr);
    assert!(report.contains("Landlock instead"), "{report}");
    assert!(!stdout.contains("sk-in-tmp"), "{stdout}");
    let cwd = stdout
        .lines()
        .find_map(|l| l.strip_prefix("CWD "))
        .unwrap_or_else(|| panic!("{stdout}\n{report}"));
    assert!(
        cwd.starts_with(root.to_str().unwrap()) && cwd != root.to_str().unwrap(),
        "a fresh directory beneath the root directory, not {cwd}"
    );
    assert!(stdout.contains("OWN-IS-TMPDIR"), "{stdout}");
    assert!(stdout.contains("OWN mine"), "{stdout}\n{report}");
    assert_eq!(
        std::fs::read_dir(&root).unwrap().count(),
        0,
        "its directory outlived it"
    );
}

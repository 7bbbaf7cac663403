//! The run directory as a user meets it: one writer at a time, viewers beside it, artifacts
//! verified on every read, a round budget that survives a kill, and bad numbers refused
//! before they are stored (and named when a stored run holds them).

use std::path::Path;
use std::time::{Duration, Instant};

use ksearch_engine::{EngineState, InFlight};
use ksearch_store::RunStore;

use crate::support::{QUICK, json, ksearch, run_ok, spawn, wait_for_store};

fn args<'a>(extra: &[&'a str]) -> Vec<&'a str> {
    let mut v = extra.to_vec();
    v.extend_from_slice(QUICK);
    v
}

fn state(dir: &Path) -> Option<EngineState> {
    RunStore::open(dir).ok()?.state().ok()?
}

/// Wait until the stored engine state satisfies `cond`.
fn wait_for_state(dir: &Path, cond: impl Fn(&EngineState) -> bool) -> bool {
    let deadline = Instant::now() + Duration::from_secs(120);
    while Instant::now() < deadline {
        if state(dir).is_some_and(|s| cond(&s)) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    false
}

fn kill(child: &mut std::process::Child) {
    // SAFETY: killing our own child process.
    unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
    child.wait().unwrap();
}

#[test]
fn a_second_writer_is_refused_at_once_while_viewers_work_and_a_killed_writer_frees_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let rd = dir.path().join("run");
    let rds = rd.to_str().unwrap();
    let mut child = spawn(&args(&[
        "run",
        "cpu/softmax",
        "--iterations",
        "200",
        "--run-dir",
        rds,
        "--quiet",
    ]));
    // Once the seed is measured and a round is under way:
    assert!(wait_for_store(&rd, Duration::from_secs(120), |s| s
        .attempts
        .iter()
        .any(|a| a.round >= 1)));

    for second in [
        vec!["resume", rds, "--iterations", "1"],
        vec!["run", "cpu/softmax", "--run-dir", rds, "--iterations", "1"],
    ] {
        let started = Instant::now();
        let out = ksearch(&second).output().unwrap();
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "a second writer exits at once"
        );
        assert_eq!(out.status.code(), Some(3), "{second:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains("in use by another ksearch")
                && stderr.contains(&format!("process {}", child.id())),
            "{second:?}: {stderr}"
        );
    }

    // Viewers need no lock.
    let tree = json(&["tree", rds, "--json"]);
    assert!(!tree["nodes"].as_array().unwrap().is_empty());
    let page = dir.path().join("report.html");
    run_ok(&["report", rds, "-o", page.to_str().unwrap(), "--quiet"]);
    assert!(page.exists());
    run_ok(&["show", rds, "seed"]);
    run_ok(&[
        "export",
        rds,
        "-o",
        dir.path().join("export").to_str().unwrap(),
        "--quiet",
    ]);
    assert!(
        child.try_wait().unwrap().is_none(),
        "the run is still going"
    );

    // A writer that dies (SIGKILL: no cleanup at all) leaves the run free to resume.
    kill(&mut child);
    let j = json(&["resume", rds, "--iterations", "1", "--json", "--quiet"]);
    assert_eq!(j["stop_reason"], "iterations", "{j}");
}

#[test]
fn a_tampered_artifact_is_refused_by_every_reader_and_by_resume_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let rd = dir.path().join("run");
    let rds = rd.to_str().unwrap();
    run_ok(&[
        "run",
        "cpu/softmax",
        "--iterations",
        "3",
        "--no-timing",
        "--workload",
        "small",
        "--run-dir",
        rds,
        "--quiet",
    ]);
    let snap = RunStore::open(&rd).unwrap().snapshot().unwrap();
    // Rewrite every solution's source: what `export` ships and what the engine builds on.
    let mut hashes: Vec<String> = snap
        .nodes
        .iter()
        .filter_map(|n| n.solution.as_ref().map(|s| s.source_hash.clone()))
        .collect();
    hashes.sort();
    hashes.dedup();
    for h in &hashes {
        let path = rd.join("artifacts").join(h);
        let mut text = std::fs::read_to_string(&path).unwrap();
        text.push_str("\n/* backdoor */\n");
        std::fs::write(&path, text).unwrap();
    }
    let named = |stderr: &str| {
        hashes.iter().any(|h| {
            let path = rd.join("artifacts").join(h);
            stderr.contains(&path.display().to_string())
                && stderr.contains(&format!("expected {h}"))
        }) && stderr.contains("modified after it was stored")
    };
    let out_dir = dir.path().join("out");
    let html = dir.path().join("r.html");
    for cmd in [
        vec!["tree", rds],
        vec!["tree", rds, "--json"],
        vec!["report", rds, "-o", html.to_str().unwrap()],
        vec!["show", rds, "best"],
        vec!["show", rds, "seed", "--json"],
        vec!["export", rds, "-o", out_dir.to_str().unwrap()],
        vec!["resume", rds, "--iterations", "2"],
    ] {
        let out = ksearch(&cmd).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(3), "{cmd:?}: {stderr}");
        assert!(
            named(&stderr),
            "{cmd:?} names the file and its hashes: {stderr}"
        );
    }
    assert!(!out_dir.exists(), "nothing was exported");
    assert!(!html.exists(), "no report was written");
    let after = RunStore::open(&rd).unwrap().snapshot().unwrap();
    assert_eq!(
        after.attempts.len(),
        snap.attempts.len(),
        "the resume did nothing"
    );
}

#[test]
fn the_round_budget_survives_a_kill_while_the_seed_is_measured() {
    let dir = tempfile::tempdir().unwrap();
    let rd = dir.path().join("run");
    // Slow timing, so the seed's measurement lasts long enough to be killed in.
    let mut child = spawn(&[
        "run",
        "cpu/softmax",
        "--iterations",
        "2",
        "--workload",
        "small",
        "--min-runs",
        "5",
        "--min-time-ms",
        "600",
        "--warmup-ms",
        "5",
        "--max-time-ms",
        "2000",
        "--run-dir",
        rd.to_str().unwrap(),
        "--quiet",
    ]);
    assert!(
        wait_for_state(&rd, |s| s.evaluating
            == Some(InFlight { round: 0, lost: 0 })),
        "the seed was never seen in flight"
    );
    kill(&mut child);
    let s = state(&rd).unwrap();
    assert!(!s.initialized);
    assert_eq!(s.round_budget, Some(2), "the budget was recorded first");

    let j = json(&["resume", rd.to_str().unwrap(), "--json", "--quiet"]);
    assert_eq!(
        (j["rounds"].as_u64(), j["stop_reason"].as_str()),
        (Some(2), Some("iterations")),
        "resume honours the original budget: {j}"
    );
}

/// Every timing flag refuses NaN, infinities, negative and out-of-range values with a usage
/// error that names the flag and the range, in `run` and `eval`.
#[test]
fn bad_timing_flags_are_usage_errors_naming_the_flag_and_the_range() {
    let dir = tempfile::tempdir().unwrap();
    let rd = dir.path().join("run");
    let cases: &[(&str, &[&str], &str)] = &[
        ("--timeout", &["nan", "inf", "-1", "0", "1e20"], "604800"),
        ("--min-time-ms", &["NaN", "-inf", "-0.5", "1e12"], "3600000"),
        (
            "--max-time-ms",
            &["nan", "infinity", "0", "-3", "4e6"],
            "3600000",
        ),
        ("--warmup-ms", &["nan", "inf", "-1", "1e300"], "3600000"),
    ];
    for (flag, values, range) in cases {
        for value in *values {
            let arg = format!("{flag}={value}");
            for cmd in [
                vec![
                    "run",
                    "cpu/softmax",
                    "--run-dir",
                    rd.to_str().unwrap(),
                    &arg,
                ],
                vec!["eval", "cpu/softmax", &arg],
            ] {
                let out = ksearch(&cmd).output().unwrap();
                let stderr = String::from_utf8_lossy(&out.stderr);
                assert_eq!(out.status.code(), Some(2), "{cmd:?}: {stderr}");
                assert!(
                    stderr.contains(flag) && stderr.contains(range),
                    "{cmd:?}: {stderr}"
                );
                assert!(!stderr.contains("panicked"), "{stderr}");
            }
        }
    }
    assert!(!rd.exists(), "no run was started");
    for cmd in [
        vec!["resume", rd.to_str().unwrap(), "--max-cost=nan"],
        vec!["resume", rd.to_str().unwrap(), "--max-cost=-1"],
        vec![
            "run",
            "cpu/softmax",
            "--model",
            "openai:m",
            "--max-cost=inf",
        ],
    ] {
        let out = ksearch(&cmd).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{cmd:?}: {stderr}");
        assert!(stderr.contains("--max-cost"), "{stderr}");
    }
    // The largest allowed timeout is fine (and does not overflow a Duration).
    let out = ksearch(&[
        "eval",
        "cpu/softmax",
        "--timeout",
        "604800",
        "--no-timing",
        "--workload",
        "small",
    ])
    .output()
    .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A stored configuration holding what older versions could store (a timeout too large for a
/// `Duration`, a NaN written as `null`) is an error naming the field, never a panic.
#[test]
fn a_stored_config_with_bad_numbers_is_an_error_naming_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let rd = dir.path().join("run");
    let rds = rd.to_str().unwrap();
    run_ok(&[
        "run",
        "cpu/softmax",
        "--iterations",
        "1",
        "--no-timing",
        "--workload",
        "small",
        "--run-dir",
        rds,
        "--quiet",
    ]);
    let original: serde_json::Value = RunStore::open(&rd)
        .unwrap()
        .meta("config")
        .unwrap()
        .unwrap();
    type Edit = fn(&mut serde_json::Value);
    let edits: &[(&str, Edit, &str)] = &[
        (
            "a timeout of 1e20 s",
            |c| c["eval"]["timeout_s"] = 1e20.into(),
            "`eval.timeout_s` is 100000000000000000000",
        ),
        (
            "a negative warm-up",
            |c| {
                c["eval"]["timing"] = serde_json::json!({"warmup_ms": -1.0, "min_runs": 5,
                    "min_time_ms": 20.0, "max_time_ms": 500.0, "target_sample_ms": 1.0, "rotate_bytes": 0});
            },
            "`eval.timing.warmup_ms` is -1",
        ),
        (
            "a NaN stored as null",
            |c| {
                c["eval"]["timing"] = serde_json::json!({"warmup_ms": 5.0, "min_runs": 5,
                    "min_time_ms": null, "max_time_ms": 500.0, "target_sample_ms": 1.0, "rotate_bytes": 0});
            },
            "field `eval.timing.min_time_ms`",
        ),
    ];
    for (what, edit, expected) in edits {
        let mut config = original.clone();
        edit(&mut config);
        let mut store = RunStore::open_writer(&rd).unwrap();
        store
            .transaction(|tx| tx.set_meta("config", &config))
            .unwrap();
        drop(store);
        for cmd in [
            vec!["resume", rds, "--iterations", "1"],
            vec!["tree", rds],
            vec!["show", rds, "best"],
        ] {
            let out = ksearch(&cmd).output().unwrap();
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(3), "{what}, {cmd:?}: {stderr}");
            assert!(stderr.contains(expected), "{what}, {cmd:?}: {stderr}");
            assert!(!stderr.contains("panicked"), "{stderr}");
        }
    }
}

#[test]
fn ctrl_c_during_the_seed_is_no_death_of_the_orchestrator() {
    let dir = tempfile::tempdir().unwrap();
    let rd = dir.path().join("run");
    let child = spawn(&[
        "run",
        "cpu/softmax",
        "--iterations",
        "2",
        "--workload",
        "small",
        "--min-runs",
        "5",
        "--min-time-ms",
        "600",
        "--warmup-ms",
        "5",
        "--max-time-ms",
        "2000",
        "--run-dir",
        rd.to_str().unwrap(),
        "--quiet",
    ]);
    assert!(wait_for_state(&rd, |s| s.evaluating
        == Some(InFlight { round: 0, lost: 0 })));
    // SAFETY: signalling our own child process.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("interrupted before the run was initialised"),
        "{stderr}"
    );
    assert_eq!(out.status.code(), Some(130), "{stderr}");
    let s = state(&rd).unwrap();
    assert_eq!(
        s.evaluating, None,
        "an abandoned evaluation is not a lost one"
    );
    assert_eq!(s.round_budget, Some(2));
}

/// A copy of `from` (a run directory) at `to`, every file and directory read-only.
fn read_only_copy(from: &Path, to: &Path) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            read_only_copy(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
            std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o444)).unwrap();
        }
    }
    std::fs::set_permissions(to, std::fs::Permissions::from_mode(0o555)).unwrap();
}

/// `ksearch ARGS` as a user who cannot write the copy (root ignores permissions: the child
/// drops to nobody).
fn as_reader(args: &[&str]) -> std::process::Output {
    use std::os::unix::process::CommandExt;
    let mut cmd = ksearch(args);
    // SAFETY: setgid/setuid only, between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            if libc::geteuid() == 0 && (libc::setgid(65534) != 0 || libc::setuid(65534) != 0) {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    cmd.output().unwrap()
}

/// The viewers open a run read-only: they work on a copy nobody may write (an archived run),
/// and write nothing there.
#[test]
fn viewers_work_on_a_read_only_run() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let rd = dir.path().join("run");
    run_ok(&args(&[
        "run",
        "cpu/softmax",
        "--iterations",
        "1",
        "--run-dir",
        rd.to_str().unwrap(),
        "--quiet",
    ]));
    let ro = dir.path().join("archived");
    read_only_copy(&rd, &ro);
    let out = dir.path().join("out");
    std::fs::create_dir(&out).unwrap();
    std::fs::set_permissions(&out, std::fs::Permissions::from_mode(0o777)).unwrap();
    let ros = ro.to_str().unwrap();
    let report = out.join("report.html");
    let exported = out.join("export");
    for args in [
        vec!["tree", ros],
        vec!["tree", ros, "--json"],
        vec!["show", ros, "best"],
        vec!["report", ros, "-o", report.to_str().unwrap()],
        vec!["export", ros, "-o", exported.to_str().unwrap()],
    ] {
        let o = as_reader(&args);
        assert!(
            o.status.success(),
            "ksearch {args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
    assert!(report.is_file() && exported.join("provenance.json").is_file());
    let mut left: Vec<_> = std::fs::read_dir(&ro)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    left.sort();
    assert_eq!(
        left,
        ["artifacts", "run.sqlite", "writer.lock"],
        "nothing written"
    );
    // A directory the user may not read is said to be so, not to hold no run.
    std::fs::set_permissions(&ro, std::fs::Permissions::from_mode(0o000)).unwrap();
    let o = as_reader(&["tree", ros]);
    std::fs::set_permissions(&ro, std::fs::Permissions::from_mode(0o755)).unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(3), "{stderr}");
    assert!(stderr.contains("Permission denied"), "{stderr}");
    assert!(!stderr.contains("holds no run"), "{stderr}");
}

/// A reader that stops reading (`ksearch report -o - | head -1`) is no error.
#[test]
fn output_cut_short_by_its_reader_is_not_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let rd = dir.path().join("run");
    run_ok(&args(&[
        "run",
        "cpu/softmax",
        "--iterations",
        "1",
        "--run-dir",
        rd.to_str().unwrap(),
        "--quiet",
    ]));
    for args in [
        vec!["report", rd.to_str().unwrap(), "-o", "-"],
        vec!["tree", rd.to_str().unwrap(), "--json"],
    ] {
        let mut child = ksearch(&args)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdout = child.stdout.take().unwrap();
        let mut first = [0u8; 1];
        std::io::Read::read_exact(&mut stdout, &mut first).unwrap();
        drop(stdout);
        let out = child.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "ksearch {args:?}: {:?} {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(String::from_utf8_lossy(&out.stderr), "");
    }
}

/// A run written by a newer ksearch (a newer run format) is refused by every reader and by
/// resume, saying so, before its records are read as this version's.
#[test]
fn a_newer_run_format_is_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let rd = dir.path().join("run");
    let rds = rd.to_str().unwrap();
    run_ok(&args(&[
        "run",
        "cpu/softmax",
        "--iterations",
        "1",
        "--no-timing",
        "--run-dir",
        rds,
        "--quiet",
    ]));
    let mut store = RunStore::open_writer(&rd).unwrap();
    let mut config: serde_json::Value = store.meta("config").unwrap().unwrap();
    config["format"] = (ksearch_engine::RUN_FORMAT + 1).into();
    config["a_field_of_the_future"] = true.into();
    store
        .transaction(|tx| tx.set_meta("config", &config))
        .unwrap();
    drop(store);
    for cmd in [
        vec!["tree", rds],
        vec!["report", rds, "-o", "-"],
        vec!["resume", rds, "--iterations", "1"],
    ] {
        let out = ksearch(&cmd).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(3), "{cmd:?}: {stderr}");
        assert!(
            stderr.contains(&format!(
                "was written by a newer ksearch (run format {}; this ksearch reads up to {})",
                ksearch_engine::RUN_FORMAT + 1,
                ksearch_engine::RUN_FORMAT
            )),
            "{cmd:?}: {stderr}"
        );
    }
}

/// A finished one-round builtin run in `rd`.
fn small_run(rd: &Path) {
    run_ok(&[
        "run",
        "cpu/softmax",
        "--iterations",
        "1",
        "--no-timing",
        "--workload",
        "small",
        "--run-dir",
        rd.to_str().unwrap(),
        "--quiet",
    ]);
}

/// `ksearch args`' status and standard error, failing the test when it runs past `limit` (a
/// loop or a hang, which the fixes below prevent). Standard output is not kept.
fn within(args: &[&str], limit: Duration) -> (Option<i32>, String) {
    use std::io::Read as _;
    let mut child = ksearch(args)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + limit;
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            kill(&mut child);
            panic!("ksearch {args:?} ran past {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    (child.wait().unwrap().code(), stderr)
}

fn copy_dir(from: &Path, to: &Path) {
    let ok = std::process::Command::new("cp")
        .args(["-a", from.to_str().unwrap(), to.to_str().unwrap()])
        .status()
        .unwrap()
        .success();
    assert!(ok, "cp -a {from:?} {to:?}");
}

fn sql(rd: &Path, statement: &str) {
    let conn = rusqlite::Connection::open(rd.join("run.sqlite")).unwrap();
    conn.execute_batch(statement).unwrap();
}

/// A stored task is held to the rules of task.toml when a run is opened: a task name edited to
/// a path never becomes the export's file names (it wrote `pwned.h` outside the export
/// directory), and no viewer or resume takes the run.
#[test]
fn a_stored_task_breaking_the_task_rules_is_refused_naming_the_field() {
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().join("a/b/c/run");
    small_run(&base);
    let abs = tmp.path().join("abs_probe/pwned");
    for (i, name) in ["../../../escape_probe/pwned", abs.to_str().unwrap(), "int"]
        .iter()
        .enumerate()
    {
        let rd = tmp.path().join(format!("a/b/c/run{i}"));
        copy_dir(&base, &rd);
        sql(
            &rd,
            &format!(
                "UPDATE meta SET value = json_set(value, '$.spec.name', '{name}') WHERE key = 'task'"
            ),
        );
        let rds = rd.to_str().unwrap();
        let out = rd.join("x/out");
        for cmd in [
            vec!["export", rds],
            vec!["export", rds, "-o", out.to_str().unwrap()],
            vec!["tree", rds],
            vec!["show", rds, "best"],
            vec!["report", rds, "-o", "-"],
            vec!["resume", rds, "--iterations", "1"],
        ] {
            let (code, stderr) = within(&cmd, Duration::from_secs(120));
            assert_eq!(code, Some(3), "{name}: {cmd:?}: {stderr}");
            assert!(
                stderr.contains("corrupt record in")
                    && stderr.contains("meta `task`, field `spec.name`"),
                "{name}: {cmd:?}: {stderr}"
            );
        }
        assert!(!rd.join("export").exists() && !out.exists());
    }
    for escaped in [
        "a/escape_probe",
        "a/b/escape_probe",
        "escape_probe",
        "abs_probe",
    ] {
        assert!(!tmp.path().join(escaped).exists(), "{escaped} was written");
    }
}

/// A tree without its root, or whose parents loop, is refused by every viewer and by resume
/// naming what is wrong: it panicked them all, made resume spin and `show` run out of memory.
#[test]
fn a_stored_tree_that_does_not_hang_from_its_root_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().join("run");
    small_run(&base);
    let edits = [
        (
            "DELETE FROM nodes WHERE id = 0",
            "nodes: the tree has no root (node 0)",
        ),
        (
            "UPDATE nodes SET data = json_set(data, '$.parent', 2) WHERE id = 1;
             UPDATE nodes SET data = json_set(data, '$.parent', 1) WHERE id = 2",
            "parents never reach the root: they form a cycle",
        ),
        (
            "UPDATE nodes SET data = json_set(data, '$.parent', 99) WHERE id = 2",
            "nodes: node 2's parent, node 99, does not exist",
        ),
    ];
    for (i, (edit, expected)) in edits.iter().enumerate() {
        let rd = tmp.path().join(format!("run{i}"));
        copy_dir(&base, &rd);
        sql(&rd, edit);
        let rds = rd.to_str().unwrap();
        let out = tmp.path().join(format!("out{i}"));
        for cmd in [
            vec!["tree", rds],
            vec!["tree", rds, "--json"],
            vec!["show", rds, "best"],
            vec!["report", rds, "-o", "-"],
            vec!["export", rds, "-o", out.to_str().unwrap()],
            vec!["resume", rds, "--iterations", "1"],
        ] {
            let (code, stderr) = within(&cmd, Duration::from_secs(120));
            assert_eq!(code, Some(3), "{edit}: {cmd:?}: {stderr}");
            assert!(
                stderr.contains("corrupt record in") && stderr.contains(expected),
                "{edit}: {cmd:?}: {stderr}"
            );
            assert!(!stderr.contains("panicked"), "{stderr}");
        }
    }
}

/// An artifact replaced by a link to /dev/zero, or by a named pipe, is refused at once, naming
/// it: `tree` read /dev/zero without end, and waited forever on the pipe.
#[test]
fn an_artifact_that_is_no_regular_file_is_refused_at_once() {
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().join("run");
    small_run(&base);
    let seed = RunStore::open(&base).unwrap().snapshot().unwrap().attempts[0]
        .source_hash
        .clone();
    for (i, what) in ["is a symbolic link", "is a named pipe"].iter().enumerate() {
        let rd = tmp.path().join(format!("run{i}"));
        copy_dir(&base, &rd);
        let artifact = rd.join("artifacts").join(&seed);
        std::fs::remove_file(&artifact).unwrap();
        if i == 0 {
            std::os::unix::fs::symlink("/dev/zero", &artifact).unwrap();
        } else {
            let c = std::ffi::CString::new(artifact.to_str().unwrap()).unwrap();
            // SAFETY: a valid NUL-terminated path.
            assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        }
        let rds = rd.to_str().unwrap();
        for cmd in [vec!["tree", rds], vec!["show", rds, "seed"]] {
            let (code, stderr) = within(&cmd, Duration::from_secs(60));
            assert_eq!(code, Some(3), "{cmd:?}: {stderr}");
            assert!(
                stderr.contains(&artifact.display().to_string()) && stderr.contains(what),
                "{cmd:?}: {stderr}"
            );
        }
    }
}

/// A writer lock planted as a link to a file of the user's is refused, never truncated and
/// written with the writer's pid.
#[test]
fn a_planted_writer_lock_is_not_written_through() {
    let tmp = tempfile::tempdir().unwrap();
    let rd = tmp.path().join("run");
    small_run(&rd);
    let victim = tmp.path().join("precious");
    std::fs::write(&victim, "keep me").unwrap();
    std::fs::remove_file(rd.join("writer.lock")).unwrap();
    std::os::unix::fs::symlink(&victim, rd.join("writer.lock")).unwrap();
    let rds = rd.to_str().unwrap();
    for cmd in [
        vec!["resume", rds, "--iterations", "1"],
        vec!["run", "cpu/softmax", "--run-dir", rds, "--iterations", "1"],
    ] {
        let (code, stderr) = within(&cmd, Duration::from_secs(60));
        assert_eq!(code, Some(3), "{cmd:?}: {stderr}");
        assert!(
            stderr.contains("writer.lock is a symbolic link"),
            "{cmd:?}: {stderr}"
        );
    }
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep me");
}

/// A run killed as it started leaves a store that recorded nothing (not even its task):
/// `resume` says to start it again, and `run` into the directory does (it refused, saying to
/// resume it).
#[test]
fn a_run_killed_before_it_recorded_anything_is_started_afresh() {
    let tmp = tempfile::tempdir().unwrap();
    let rd = tmp.path().join("run");
    let rds = rd.to_str().unwrap();
    // What the kill leaves: the store created, its first transaction never committed.
    drop(RunStore::create(&rd).unwrap());
    let (code, stderr) = within(&["resume", rds], Duration::from_secs(60));
    assert_eq!(code, Some(3), "{stderr}");
    assert!(
        stderr.contains("no task recorded") && stderr.contains("`ksearch run` into it"),
        "{stderr}"
    );
    small_run(&rd);
    let tree = json(&["tree", rds, "--json"]);
    assert!(!tree["nodes"].as_array().unwrap().is_empty(), "{tree}");
    // A run that did record something is still refused.
    let (code, stderr) = within(
        &["run", "cpu/softmax", "--run-dir", rds, "--iterations", "1"],
        Duration::from_secs(60),
    );
    assert_eq!(code, Some(3), "{stderr}");
    assert!(stderr.contains("already holds a run"), "{stderr}");
}

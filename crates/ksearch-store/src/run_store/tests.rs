use super::*;
use ksearch_core::record::{AttemptKind, CycleOutcome};
use ksearch_core::tree::{Gate, Solution, Tree};

fn seed_solution() -> Solution {
    Solution {
        round: 0,
        source_hash: "x".into(),
        source_file: "seed.c".into(),
        speedup: Some(1.0),
        speedup_vs_parent: None,
        vs_parent_interval: None,
        gate: Gate::Unmeasured,
        latency_ms: [("small".to_owned(), 0.25)].into(),
        baseline_ms: [("small".to_owned(), 0.5)].into(),
    }
}

fn attempt(round: u64) -> AttemptRecord {
    AttemptRecord {
        round,
        node: 0,
        cycle: 1,
        kind: AttemptKind::Implement,
        source_hash: "h".into(),
        source_file: "c.c".into(),
        note: "n".into(),
        evaluation: None,
        improved: false,
        payload: serde_json::Value::Null,
    }
}

#[test]
fn records_round_trip_through_the_store() {
    let dir = tempfile::tempdir().unwrap();
    let tree = Tree::new(vec!["root note".into()], seed_solution());
    let cycle = CycleRecord {
        id: 1,
        node: 0,
        started_round: 1,
        ended_round: Some(2),
        outcome: Some(CycleOutcome::Passed),
        best_round: Some(1),
        stagnation: 0,
        attempts: 2,
    };
    {
        let mut s = RunStore::create(dir.path()).unwrap();
        assert_eq!(s.schema_version().unwrap(), SCHEMA_VERSION);
        s.transaction(|tx| {
            tx.set_meta("task", &"cpu/softmax")?;
            tx.put_node(tree.root())?;
            tx.put_cycle(&cycle)?;
            tx.put_attempt(&attempt(1))?;
            tx.add_event(1, "edit", &serde_json::json!({"ops": 1}))?;
            tx.set_state(&42u32)
        })
        .unwrap();
    }
    let s = RunStore::open(dir.path()).unwrap();
    let snap = s.snapshot().unwrap();
    assert_eq!(snap.nodes, vec![tree.root().clone()]);
    assert_eq!(snap.cycles, vec![cycle]);
    assert_eq!(snap.attempts, vec![attempt(1)]);
    assert_eq!(snap.events[0].1, "edit");
    assert_eq!(
        s.meta::<String>("task").unwrap().as_deref(),
        Some("cpu/softmax")
    );
    assert_eq!(s.state::<u32>().unwrap(), Some(42));
}

#[test]
fn a_failed_transaction_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = RunStore::create(dir.path()).unwrap();
    let r: Result<(), _> = s.transaction(|tx| {
        tx.put_attempt(&attempt(1))?;
        Err(StoreError::MissingArtifact {
            hash: "boom".into(),
            dir: dir.path().to_owned(),
        })
    });
    assert!(r.is_err());
    assert!(s.snapshot().unwrap().attempts.is_empty());
}

#[test]
fn create_refuses_an_existing_run_and_open_a_missing_one() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = RunStore::create(dir.path()).unwrap();
    s.transaction(|tx| tx.set_meta("task", &"cpu/softmax"))
        .unwrap();
    drop(s);
    let e = RunStore::create(dir.path()).unwrap_err();
    assert!(e.to_string().contains("already holds a run"), "{e}");
    let empty = tempfile::tempdir().unwrap();
    assert!(matches!(
        RunStore::open(empty.path()),
        Err(StoreError::Missing { .. })
    ));
}

/// A run killed as it started leaves a store with nothing in it; `run` into its directory
/// starts afresh (`resume` has nothing to go on), while anything recorded, or a file that is
/// not a store, is still refused.
#[test]
fn create_starts_afresh_over_a_store_that_recorded_nothing() {
    let dir = tempfile::tempdir().unwrap();
    drop(RunStore::create(dir.path()).unwrap());
    let mut s = RunStore::create(dir.path()).unwrap();
    s.transaction(|tx| tx.set_meta("task", &"cpu/softmax"))
        .unwrap();
    drop(s);
    assert!(matches!(
        RunStore::create(dir.path()),
        Err(StoreError::Exists { .. })
    ));

    // A kill between creating the file and creating its tables.
    let empty_file = tempfile::tempdir().unwrap();
    fs_err::write(empty_file.path().join(DB_FILE), "").unwrap();
    assert!(RunStore::create(empty_file.path()).is_ok());

    let not_a_store = tempfile::tempdir().unwrap();
    fs_err::write(not_a_store.path().join(DB_FILE), "my notes").unwrap();
    assert!(matches!(
        RunStore::create(not_a_store.path()),
        Err(StoreError::Exists { .. })
    ));
    assert_eq!(
        fs_err::read_to_string(not_a_store.path().join(DB_FILE)).unwrap(),
        "my notes"
    );
}

#[test]
fn a_planted_writer_lock_is_refused_not_written_through() {
    let victim_dir = tempfile::tempdir().unwrap();
    let victim = victim_dir.path().join("precious");
    fs_err::write(&victim, "keep me").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut s = RunStore::create(dir.path()).unwrap();
    s.transaction(|tx| tx.set_meta("task", &"cpu/softmax"))
        .unwrap();
    drop(s);
    fs_err::remove_file(dir.path().join(LOCK_FILE)).unwrap();
    std::os::unix::fs::symlink(&victim, dir.path().join(LOCK_FILE)).unwrap();
    for e in [
        RunStore::create(dir.path()).unwrap_err(),
        RunStore::open_writer(dir.path()).unwrap_err(),
    ] {
        let msg = e.to_string();
        assert!(
            msg.contains(LOCK_FILE) && msg.contains("symbolic link"),
            "{msg}"
        );
    }
    assert_eq!(fs_err::read_to_string(&victim).unwrap(), "keep me");

    // A named pipe is refused at once rather than waited on.
    let fifo_dir = tempfile::tempdir().unwrap();
    let fifo = fifo_dir.path().join(LOCK_FILE);
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let e = RunStore::create(fifo_dir.path()).unwrap_err();
    assert!(e.to_string().contains("not a regular file"), "{e}");
}

#[test]
fn an_artifact_that_is_no_regular_file_or_too_large_is_refused_unread() {
    let dir = tempfile::tempdir().unwrap();
    let s = RunStore::create(dir.path()).unwrap();
    let arts = dir.path().join(ARTIFACTS_DIR);
    let hash = |n: u8| format!("{n:064x}");
    std::os::unix::fs::symlink("/dev/zero", arts.join(hash(1))).unwrap();
    let c = std::ffi::CString::new(arts.join(hash(2)).to_str().unwrap()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let big = fs_err::File::create(arts.join(hash(3))).unwrap();
    big.set_len(64 << 30).unwrap(); // 64 GiB, no blocks
    fs_err::create_dir(arts.join(hash(4))).unwrap();
    let started = std::time::Instant::now();
    for (n, what) in [
        (1, "is a symbolic link"),
        (2, "is a named pipe"),
        (
            3,
            "has 68719476736 bytes, more than the largest artifact ksearch writes",
        ),
        (4, "is a directory"),
    ] {
        let e = s.read_artifact(&hash(n), "k.c").unwrap_err();
        assert!(
            matches!(&e, StoreError::BadArtifact { path, .. } if path == &arts.join(hash(n))),
            "{e}"
        );
        assert!(e.to_string().contains(what), "{e}");
    }
    assert!(started.elapsed() < std::time::Duration::from_secs(5));

    // Nothing larger is written either: it could not be read back.
    let huge = Source {
        file: "k.c".into(),
        text: "x".repeat(crate::MAX_ARTIFACT_BYTES + 1),
    };
    assert!(matches!(
        s.put_artifact(&huge),
        Err(StoreError::BadArtifact { .. })
    ));
    let largest = Source {
        file: "k.c".into(),
        text: "x".repeat(crate::MAX_ARTIFACT_BYTES),
    };
    let h = s.put_artifact(&largest).unwrap();
    assert_eq!(s.read_artifact(&h, "k.c").unwrap(), largest);
}

#[test]
fn a_link_planted_at_an_artifact_s_temporary_name_is_not_written_through() {
    let victim_dir = tempfile::tempdir().unwrap();
    let victim = victim_dir.path().join("precious");
    fs_err::write(&victim, "keep me").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let s = RunStore::create(dir.path()).unwrap();
    let text = "int planted;";
    let h = crate::content_hash(text);
    let tmp = dir
        .path()
        .join(ARTIFACTS_DIR)
        .join(format!(".{h}.{}.tmp", std::process::id()));
    std::os::unix::fs::symlink(&victim, &tmp).unwrap();
    let src = Source {
        file: "k.c".into(),
        text: text.into(),
    };
    assert_eq!(s.put_artifact(&src).unwrap(), h);
    assert_eq!(fs_err::read_to_string(&victim).unwrap(), "keep me");
    assert_eq!(s.read_artifact(&h, "k.c").unwrap(), src);
    // And a link planted at the artifact's own name is refused, not papered over.
    let other = "int other;";
    let oh = crate::content_hash(other);
    std::os::unix::fs::symlink(&victim, dir.path().join(ARTIFACTS_DIR).join(&oh)).unwrap();
    let e = s
        .put_artifact(&Source {
            file: "k.c".into(),
            text: other.into(),
        })
        .unwrap_err();
    assert!(e.to_string().contains("symbolic link"), "{e}");
    assert_eq!(fs_err::read_to_string(&victim).unwrap(), "keep me");
}

#[test]
fn an_older_store_is_migrated_and_keeps_its_data() {
    let dir = tempfile::tempdir().unwrap();
    {
        // Build a version-1 store by hand, as the first release wrote it.
        fs_err::create_dir_all(dir.path().join(ARTIFACTS_DIR)).unwrap();
        let conn = Connection::open(dir.path().join(DB_FILE)).unwrap();
        conn.execute_batch(MIGRATIONS[0]).unwrap();
        conn.pragma_update(None, "user_version", 1).unwrap();
        conn.execute("INSERT INTO state (id, data) VALUES (1, '7')", [])
            .unwrap();
    }
    // A reader reads it as it is, and changes nothing.
    let reader = RunStore::open(dir.path()).unwrap();
    assert_eq!(reader.schema_version().unwrap(), 1);
    assert_eq!(reader.state::<u32>().unwrap(), Some(7));
    assert!(reader.snapshot().unwrap().llm_calls.is_empty());
    drop(reader);
    // The writer (a resume) migrates it.
    let mut s = RunStore::open_writer(dir.path()).unwrap();
    assert_eq!(s.schema_version().unwrap(), SCHEMA_VERSION);
    assert_eq!(s.state::<u32>().unwrap(), Some(7));
    let call = LlmCallRecord {
        key: "k".into(),
        role: ksearch_core::record::ModelRole::Codegen,
        model: "openai:m".into(),
        purpose: "implement".into(),
        round: 3,
        request: serde_json::json!({"messages": []}),
        response: serde_json::json!({"text": "x"}),
        usage: Default::default(),
        cost_usd: Some(0.01),
        replayed: false,
        seconds: 1.0,
        unfinished_round: false,
    };
    s.transaction(|tx| tx.add_llm_call(&call)).unwrap();
    assert_eq!(s.snapshot().unwrap().llm_calls, vec![call]);
}

#[test]
fn a_newer_schema_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    {
        let s = RunStore::create(dir.path()).unwrap();
        s.conn
            .pragma_update(None, "user_version", SCHEMA_VERSION + 1)
            .unwrap();
    }
    let e = RunStore::open(dir.path()).unwrap_err();
    assert!(
        matches!(e, StoreError::TooNew { found, .. } if found == SCHEMA_VERSION + 1),
        "{e}"
    );
}

#[test]
fn artifacts_are_content_addressed() {
    let dir = tempfile::tempdir().unwrap();
    let s = RunStore::create(dir.path()).unwrap();
    let src = Source {
        file: "k.c".into(),
        text: "int x;".into(),
    };
    let h = s.put_artifact(&src).unwrap();
    assert_eq!(h, crate::content_hash("int x;"));
    assert_eq!(s.put_artifact(&src).unwrap(), h);
    assert_eq!(s.read_artifact(&h, "k.c").unwrap(), src);
    assert!(matches!(
        s.read_artifact(&"0".repeat(64), "k.c"),
        Err(StoreError::MissingArtifact { .. })
    ));
    assert!(s.read_artifact("../../etc/passwd", "x").is_err());
}

#[test]
fn one_writer_at_a_time_and_readers_never_wait() {
    let dir = tempfile::tempdir().unwrap();
    let writer = RunStore::create(dir.path()).unwrap();
    assert!(writer.is_writer());
    let held = fs_err::read_to_string(dir.path().join(LOCK_FILE)).unwrap();
    assert_eq!(held, std::process::id().to_string());

    // A second writer is refused at once, told who holds the run.
    let e = RunStore::open_writer(dir.path()).unwrap_err();
    assert!(
        matches!(e, StoreError::Busy { holder: Some(p), .. } if p == std::process::id()),
        "{e}"
    );
    assert!(e.to_string().contains("in use by another ksearch"), "{e}");
    // Even one trying to create it again: busy first, not "exists".
    assert!(matches!(
        RunStore::create(dir.path()),
        Err(StoreError::Busy { .. })
    ));
    // A reader opens it meanwhile and sees what the writer committed.
    let mut writer = writer;
    writer
        .transaction(|tx| tx.set_meta("task", &"cpu/softmax"))
        .unwrap();
    let reader = RunStore::open(dir.path()).unwrap();
    assert!(!reader.is_writer());
    assert_eq!(
        reader.meta::<String>("task").unwrap().as_deref(),
        Some("cpu/softmax")
    );
    // The lock goes with the writer.
    drop(writer);
    let again = RunStore::open_writer(dir.path()).unwrap();
    assert!(again.is_writer());
}

#[test]
fn a_reader_of_a_run_at_rest_leaves_no_log_files_behind() {
    let dir = tempfile::tempdir().unwrap();
    let mut writer = RunStore::create(dir.path()).unwrap();
    writer
        .transaction(|tx| tx.set_meta("task", &"cpu/softmax"))
        .unwrap();
    let logs = || {
        ["run.sqlite-wal", "run.sqlite-shm"]
            .into_iter()
            .filter(|f| dir.path().join(f).exists())
            .collect::<Vec<_>>()
    };
    // While the writer holds the run, a reader reads it through the writer's log.
    let reader = RunStore::open(dir.path()).unwrap();
    assert_eq!(
        reader.meta::<String>("task").unwrap().as_deref(),
        Some("cpu/softmax")
    );
    drop(reader);
    drop(writer);
    assert!(
        logs().is_empty(),
        "the writer removes its log: {:?}",
        logs()
    );
    // At rest, a reader reads the database file alone and writes nothing beside it.
    let reader = RunStore::open(dir.path()).unwrap();
    assert_eq!(
        reader.meta::<String>("task").unwrap().as_deref(),
        Some("cpu/softmax")
    );
    assert!(logs().is_empty(), "{:?}", logs());
    // ...and does not keep a writer from starting.
    let again = RunStore::open_writer(dir.path()).unwrap();
    assert!(again.is_writer());
    drop(reader);
}

#[test]
fn a_tampered_artifact_is_refused_and_named() {
    let dir = tempfile::tempdir().unwrap();
    let s = RunStore::create(dir.path()).unwrap();
    let src = Source {
        file: "k.c".into(),
        text: "int x;".into(),
    };
    let h = s.put_artifact(&src).unwrap();
    let path = dir.path().join(ARTIFACTS_DIR).join(&h);
    fs_err::write(&path, "int x; /* backdoor */").unwrap();
    let e = s.read_artifact(&h, "k.c").unwrap_err();
    match &e {
        StoreError::TamperedArtifact {
            path: p,
            expected,
            actual,
        } => {
            assert_eq!(p, &path);
            assert_eq!(expected, &h);
            assert_eq!(actual, &crate::content_hash("int x; /* backdoor */"));
        }
        other => panic!("{other}"),
    }
    let msg = e.to_string();
    assert!(
        msg.contains(&path.display().to_string()) && msg.contains(&h),
        "{msg}"
    );
    // Storing the same source again does not paper over it either.
    assert!(matches!(
        s.put_artifact(&src),
        Err(StoreError::TamperedArtifact { .. })
    ));
}

#[test]
fn a_record_holding_nan_or_infinity_is_refused_and_nothing_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = RunStore::create(dir.path()).unwrap();
    let mut bad = attempt(1);
    bad.payload = serde_json::json!({"ok": 1.0});
    let mut sol = seed_solution();
    sol.speedup = Some(f64::INFINITY);
    let tree = Tree::new(Vec::new(), sol);
    let e = s
        .transaction(|tx| {
            tx.put_attempt(&bad)?;
            tx.put_node(tree.root())
        })
        .unwrap_err();
    assert!(
        matches!(&e, StoreError::NonFinite { what, at, .. } if what == "node 0" && at == "solution.speedup"),
        "{e}"
    );
    assert!(e.to_string().contains("a bug"), "{e}");
    let snap = s.snapshot().unwrap();
    assert!(snap.attempts.is_empty() && snap.nodes.is_empty());
    // State, events and meta go through the same check.
    #[derive(serde::Serialize)]
    struct State {
        wall_s: f64,
    }
    assert!(matches!(
        s.transaction(|tx| tx.set_state(&State { wall_s: f64::NAN })),
        Err(StoreError::NonFinite { .. })
    ));
    assert!(matches!(
        s.transaction(|tx| tx.add_event(
            1,
            "x",
            &State {
                wall_s: f64::NEG_INFINITY
            }
        )),
        Err(StoreError::NonFinite { .. })
    ));
    assert!(matches!(
        s.transaction(|tx| tx.set_meta("config", &State { wall_s: f64::NAN })),
        Err(StoreError::NonFinite { .. })
    ));
    assert_eq!(s.state::<serde_json::Value>().unwrap(), None);
}

#[test]
fn a_corrupt_record_names_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = RunStore::create(dir.path()).unwrap();
    s.transaction(|tx| tx.set_meta("config", &serde_json::json!({"eval": {"timeout_s": null}})))
        .unwrap();
    #[derive(Debug, serde::Deserialize)]
    #[allow(dead_code)]
    struct Eval {
        timeout_s: f64,
    }
    #[derive(Debug, serde::Deserialize)]
    #[allow(dead_code)]
    struct Config {
        eval: Eval,
    }
    let e = s.meta::<Config>("config").unwrap_err();
    assert!(
        matches!(&e, StoreError::Corrupt { at, .. } if at == "eval.timeout_s"),
        "{e}"
    );
    assert!(e.to_string().contains("field `eval.timeout_s`"), "{e}");
}

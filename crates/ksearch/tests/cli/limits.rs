//! Bounds on what a user hands in: files are read only when regular and not too large, and
//! flags that size allocations are checked before anything is allocated.

use std::time::{Duration, Instant};

use super::{ksearch, run};

#[test]
fn a_device_named_as_the_candidate_is_refused_by_name() {
    let started = Instant::now();
    let (code, _, stderr) = run(&mut ksearch(&["eval", "cpu/softmax", "/dev/zero"]));
    assert_eq!(code, 3, "{stderr}");
    assert!(
        stderr.contains("/dev/zero is not a regular file (it is a character device)"),
        "{stderr}"
    );
    assert!(started.elapsed() < Duration::from_secs(10));
}

#[test]
fn a_task_file_linked_to_dev_zero_is_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let toml = dir.path().join("task.toml");
    std::os::unix::fs::symlink("/dev/zero", &toml).unwrap();
    for task in [dir.path(), toml.as_path()] {
        let (code, _, stderr) = run(&mut ksearch(&["eval", task.to_str().unwrap()]));
        assert_eq!(code, 3, "{stderr}");
        assert!(
            stderr.contains("task.toml is not a regular file"),
            "{stderr}"
        );
    }
}

#[test]
fn a_huge_candidate_is_refused_from_its_size_without_being_read() {
    let dir = tempfile::tempdir().unwrap();
    let big = dir.path().join("huge.c");
    // 16 GiB, sparse: reading it whole would take minutes and all memory.
    std::fs::File::create(&big)
        .unwrap()
        .set_len(16 << 30)
        .unwrap();
    let started = Instant::now();
    for args in [
        vec!["eval", "cpu/softmax", big.to_str().unwrap()],
        vec!["eval", "cpu/softmax", "--against", big.to_str().unwrap()],
        vec![
            "knowledge",
            "check",
            big.to_str().unwrap(),
            "--backend",
            "c",
        ],
    ] {
        let (code, _, stderr) = run(&mut ksearch(&args));
        assert_eq!(code, 3, "{args:?}: {stderr}");
        assert!(stderr.contains("huge.c has 17179869184 bytes"), "{stderr}");
        assert!(
            stderr.contains("the limit of 524288 bytes (512 KiB)"),
            "{stderr}"
        );
    }
    assert!(started.elapsed() < Duration::from_secs(20));
}

#[test]
fn a_huge_task_file_is_refused_with_the_limit() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::File::create(dir.path().join("task.toml"))
        .unwrap()
        .set_len(8 << 30)
        .unwrap();
    let (code, _, stderr) = run(&mut ksearch(&["eval", dir.path().to_str().unwrap()]));
    assert_eq!(code, 3, "{stderr}");
    assert!(
        stderr.contains("task.toml has 8589934592 bytes, more than the limit of 1048576 bytes (1 MiB) for a task file"),
        "{stderr}"
    );
}

#[test]
fn a_configuration_file_linked_to_a_device_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink("/dev/zero", dir.path().join("ksearch.toml")).unwrap();
    let (code, _, stderr) =
        run(ksearch(&["run", "cpu/softmax", "--iterations", "1"]).current_dir(dir.path()));
    assert_eq!(code, 3, "{stderr}");
    assert!(
        stderr.contains("ksearch.toml is not a regular file"),
        "{stderr}"
    );
    assert!(!dir.path().join("ksearch-runs").exists());
}

#[test]
fn seed_counts_are_bounded_before_anything_is_allocated() {
    for seeds in ["4294967295", "65", "0"] {
        let started = Instant::now();
        let (code, _, stderr) = run(&mut ksearch(&[
            "eval",
            "cpu/softmax",
            "--seeds",
            seeds,
            "--no-timing",
        ]));
        assert_eq!(code, 2, "--seeds {seeds}: {stderr}");
        assert!(stderr.contains("--seeds"), "{stderr}");
        assert!(stderr.contains("1..=64"), "{stderr}");
        assert!(started.elapsed() < Duration::from_secs(5));
    }
    let (code, stdout, stderr) = run(&mut ksearch(&[
        "eval",
        "cpu/softmax",
        "--seeds",
        "64",
        "--no-timing",
        "--workload",
        "small",
        "--json",
    ]));
    assert_eq!(code, 0, "{stderr}");
    let j: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(j["status"], "passed", "{j}");
    assert!(
        j["workloads"][0]["seeds_checked"].as_u64().unwrap() >= 64,
        "{j}"
    );
}

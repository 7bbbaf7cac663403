//! Helpers shared by the report tests.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

use ksearch_core::task::BackendKind;

pub(crate) fn ksearch(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ksearch"))
        .args(args)
        .output()
        .expect("ksearch runs")
}

pub(crate) fn run_ok(args: &[&str]) -> String {
    let out = ksearch(args);
    assert!(
        out.status.success(),
        "ksearch {args:?} failed ({}): {}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("UTF-8 output")
}

pub(crate) fn json(args: &[&str]) -> serde_json::Value {
    let out = run_ok(args);
    serde_json::from_str(out.trim()).unwrap_or_else(|e| panic!("not JSON ({e}): {out}"))
}

pub(crate) fn s(p: &Path) -> &str {
    p.to_str().expect("a UTF-8 path")
}

/// A real search on a CPU task with the builtin proposer, made once per test binary: 6 rounds
/// of `cpu/softmax` on its small workload with short timing.
pub(crate) fn real_run() -> &'static Path {
    static RUN: OnceLock<PathBuf> = OnceLock::new();
    RUN.get_or_init(|| {
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("report-real-run");
        let _ = std::fs::remove_dir_all(&dir);
        run_ok(&[
            "run",
            "cpu/softmax",
            "--model",
            "builtin",
            "--iterations",
            "6",
            "--workload",
            "small",
            "--min-runs",
            "5",
            "--min-time-ms",
            "20",
            "--warmup-ms",
            "5",
            "--max-time-ms",
            "500",
            "--run-dir",
            s(&dir),
            "--quiet",
        ]);
        dir
    })
}

/// The hand-built sample run written to a fresh run directory.
pub(crate) fn sample_run(backend: BackendKind) -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().expect("a temp dir");
    let dir = tmp.path().join("run");
    ksearch_report::sample::write_run(&ksearch_report::sample::run_data(backend), &dir)
        .expect("the sample run is written");
    (tmp, dir)
}

/// What the run's store holds: (attempts, nodes).
pub(crate) fn counts(dir: &Path) -> (usize, usize) {
    let snap = ksearch_store::RunStore::open(dir)
        .expect("the run opens")
        .snapshot()
        .expect("the run reads");
    (snap.attempts.len(), snap.nodes.len())
}

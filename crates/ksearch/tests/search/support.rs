//! Helpers shared by the search tests.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use ksearch_store::RunStore;

pub(crate) const QUICK: &[&str] = &[
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
];

pub(crate) fn ksearch(args: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_ksearch"));
    c.args(args);
    c
}

pub(crate) fn run_ok(args: &[&str]) -> String {
    let out = ksearch(args).output().expect("ksearch runs");
    assert!(
        out.status.success(),
        "ksearch {args:?} failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

pub(crate) fn json(args: &[&str]) -> serde_json::Value {
    let out = run_ok(args);
    serde_json::from_str(out.trim()).unwrap_or_else(|e| panic!("not JSON ({e}): {out}"))
}

pub(crate) fn spawn(args: &[&str]) -> Child {
    ksearch(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("ksearch starts")
}

/// Wait until `cond` holds for the run's store, polling.
pub(crate) fn wait_for_store(
    dir: &Path,
    timeout: Duration,
    cond: impl Fn(&ksearch_store::Snapshot) -> bool,
) -> bool {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if let Ok(store) = RunStore::open(dir)
            && let Ok(snap) = store.snapshot()
            && cond(&snap)
        {
            return true;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    false
}

/// Direct children of a process.
pub(crate) fn children_of(pid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(p) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{p}/stat")) else {
            continue;
        };
        let ppid = stat
            .rsplit_once(") ")
            .and_then(|(_, rest)| rest.split_whitespace().nth(1))
            .and_then(|s| s.parse::<u32>().ok());
        if ppid == Some(pid) {
            out.push(p);
        }
    }
    out
}

pub(crate) fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => false,
        Ok(stat) => !matches!(
            stat.rsplit_once(") ").and_then(|(_, r)| r.chars().next()),
            Some('Z' | 'X')
        ),
    }
}

/// `(id, parent, title, closed)` of every node, for comparing tree shapes.
pub(crate) fn shape(tree_json: &serde_json::Value) -> Vec<(u64, Option<u64>, String, bool)> {
    tree_json["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| {
            (
                n["id"].as_u64().unwrap(),
                n["parent"].as_u64(),
                n["action"]["title"].as_str().unwrap().to_owned(),
                !n["solution"].is_null(),
            )
        })
        .collect()
}

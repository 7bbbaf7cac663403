//! A task's own worker (`[worker]` in task.toml): started as the built-in workers are, its
//! results believed only when they answer the request, its hang a timeout; a worker program
//! that cannot be found is an error at its field. The worker of these tests is
//! `tests/fixtures/external_worker/worker.py` (Python's standard library alone).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::{QUICK, ksearch, run};

/// The fixture task in a fresh directory, its worker started as `command` (a TOML array).
fn task_with_worker(dir: &Path, command: &str) -> PathBuf {
    let from = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/external_worker");
    let task = dir.join("scale");
    std::fs::create_dir_all(&task).unwrap();
    for f in ["reference.py", "seed.py", "worker.py"] {
        std::fs::copy(from.join(f), task.join(f)).unwrap();
    }
    let toml = std::fs::read_to_string(from.join("task.toml")).unwrap();
    let default = "command = [\"python3\", \"worker.py\"]";
    assert!(toml.contains(default));
    std::fs::write(
        task.join("task.toml"),
        toml.replace(default, &format!("command = {command}")),
    )
    .unwrap();
    task
}

fn eval(task: &Path, candidate: Option<&Path>, extra: &[&str]) -> (i32, Value, String) {
    let task = task.display().to_string();
    let cand = candidate.map(|c| c.display().to_string());
    let mut args = vec!["eval", task.as_str()];
    args.extend(cand.as_deref());
    args.push("--json");
    args.extend_from_slice(QUICK);
    args.extend_from_slice(extra);
    let (code, stdout, stderr) = run(&mut ksearch(&args));
    let json = serde_json::from_str(stdout.trim()).unwrap_or(Value::Null);
    (code, json, stderr)
}

fn mode(m: &str) -> String {
    format!("[\"python3\", \"worker.py\", \"{m}\"]")
}

#[test]
#[cfg_attr(not(has_python3), ignore = "needs python3")]
fn a_tasks_own_worker_checks_and_times_candidates_in_the_task_directory() {
    let dir = tempfile::tempdir().unwrap();
    let task = task_with_worker(dir.path(), &mode("honest"));
    let (code, json, stderr) = eval(&task, None, &[]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(json["status"], "passed", "{json}");
    let canonical = task.canonicalize().unwrap().display().to_string();
    // Its working directory and KSEARCH_TASK_DIR are the task directory.
    assert_eq!(
        json["message"],
        format!(
            "passed by the task's own worker in {canonical} ({canonical}) (the task's own worker: its checks and timing are its own)"
        )
    );
    let speedup = json["speedup"].as_f64().unwrap();
    assert!(speedup.is_finite() && speedup > 0.0, "{json}");
    assert_eq!(json["workloads"][0]["name"], "small");

    let wrong = dir.path().join("wrong.py");
    std::fs::write(
        &wrong,
        "def run(x, *, n):\n    return [3.0 * v for v in x]\n",
    )
    .unwrap();
    let (code, json, stderr) = eval(&task, Some(&wrong), &[]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(json["status"], "incorrect", "{json}");
    assert!(
        json["message"].as_str().unwrap().contains("expected"),
        "{json}"
    );
}

#[test]
#[cfg_attr(not(has_python3), ignore = "needs python3")]
fn results_of_a_tasks_own_worker_that_do_not_answer_the_request_are_refused() {
    for (m, why) in [
        ("zero-time", "is not a positive finite number"),
        ("renamed", "were asked for"),
        ("garbage", "not a protocol message"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let task = task_with_worker(dir.path(), &mode(m));
        let (code, json, stderr) = eval(&task, None, &[]);
        assert_eq!(code, 0, "{m}: {stderr}");
        assert_eq!(json["status"], "rejected", "{m}: {json}");
        assert!(
            json["message"].as_str().unwrap().contains(why),
            "{m}: {json}"
        );
        assert_eq!(json["speedup"], Value::Null, "{m}: {json}");
    }
}

#[test]
#[cfg_attr(not(has_python3), ignore = "needs python3")]
fn a_tasks_own_worker_that_hangs_is_killed_at_the_limit() {
    let dir = tempfile::tempdir().unwrap();
    let task = task_with_worker(dir.path(), &mode("hang"));
    let started = Instant::now();
    let (code, json, stderr) = eval(&task, None, &["--timeout", "3"]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(json["status"], "timeout", "{json}");
    let message = json["message"].as_str().unwrap();
    assert!(
        message.contains("within its limit of 3.0 s during the check phase on workload `small`"),
        "{json}"
    );
    assert!(started.elapsed() < Duration::from_secs(60));
}

#[test]
fn a_worker_program_that_cannot_be_started_is_an_error_at_its_field() {
    let dir = tempfile::tempdir().unwrap();
    let line_of = |task: &Path| {
        let toml = std::fs::read_to_string(task.join("task.toml")).unwrap();
        toml.lines()
            .position(|l| l.starts_with("command ="))
            .unwrap()
            + 1
    };
    for (command, why) in [
        (
            "[\"./missing.sh\"]",
            "`./missing.sh` is not an executable file in the task directory",
        ),
        // worker.py is there but not executable.
        (
            "[\"./worker.py\"]",
            "(make it executable, or name its interpreter first: [\"python3\", \"worker.py\"])",
        ),
        (
            "[\"ksearch-no-such-worker\"]",
            "`ksearch-no-such-worker` is not found on PATH",
        ),
        (
            "[\"../worker.py\"]",
            "must be a path inside the task directory",
        ),
        ("[]", "give the worker's program"),
    ] {
        let task = task_with_worker(dir.path(), command);
        let (code, _, stderr) = run(&mut ksearch(&["eval", task.to_str().unwrap()]));
        assert_eq!(code, 3, "{command}: {stderr}");
        let field = if command == "[]" {
            "field `worker.command`"
        } else {
            "field `worker.command[0]`"
        };
        assert!(
            stderr.contains(&format!("task.toml:{}:", line_of(&task))) && stderr.contains(field),
            "{command}: {stderr}"
        );
        assert!(stderr.contains(why), "{command}: {stderr}");
    }
}

//! `--executor slurm` against a real Slurm cluster (`.ci/slurm-one-node` starts one on this
//! machine; CI does): a builtin search whose evaluations are Slurm jobs, two at once, and one
//! whose jobs are cancelled mid-evaluation: a job cancelled once runs again and its candidate
//! is kept, one cancelled twice is recorded as lost with the reason, and the run completes with
//! every other candidate kept.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use ksearch_core::protocol::Status;

use crate::jobs::{finishes, overlapping, snapshot};
use crate::support::QUICK;

/// `ksearch ARGS` in `dir`, whose ksearch.toml asks the queue often.
fn ksearch_in(dir: &Path, args: &[&str]) -> Command {
    std::fs::write(dir.join("ksearch.toml"), "[slurm]\npoll_s = 0.2\n").unwrap();
    let mut c = Command::new(env!("CARGO_BIN_EXE_ksearch"));
    c.args(args).current_dir(dir);
    c
}

/// The cluster answers (a clear failure when it does not: the tests cannot run without it).
fn cluster_up() {
    let out = Command::new("sinfo").args(["-h", "-o", "%T"]).output();
    let state = out
        .as_ref()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_default();
    assert!(
        out.is_ok_and(|o| o.status.success()) && !state.is_empty() && !state.starts_with("down"),
        "no Slurm cluster answers (sinfo: `{state}`): start one with .ci/slurm-one-node"
    );
}

/// `(job id, name, state)` of every job in the queue.
fn queue() -> Vec<(String, String, String)> {
    let out = Command::new("squeue")
        .args(["-h", "-o", "%i|%j|%T"])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let mut p = l.trim().splitn(3, '|');
            Some((p.next()?.into(), p.next()?.into(), p.next()?.into()))
        })
        .collect()
}

fn args<'a>(rd: &'a str, iterations: &'a str, timing: &[&'a str]) -> Vec<&'a str> {
    let mut v = vec![
        "run",
        "cpu/softmax",
        "--model",
        "builtin",
        "--iterations",
        iterations,
        "--executor",
        "slurm",
        "--jobs",
        "2",
        "--run-dir",
        rd,
        "--json",
    ];
    v.extend_from_slice(timing);
    v
}

#[test]
#[cfg_attr(
    not(has_slurm),
    ignore = "needs Slurm (sbatch, squeue, scancel); .ci/slurm-one-node starts a one-node cluster"
)]
fn a_search_runs_its_evaluations_as_slurm_jobs_two_at_once() {
    cluster_up();
    let dir = tempfile::tempdir().unwrap();
    let rd = dir.path().join(format!("slurm-two-{}", std::process::id()));
    let out = ksearch_in(dir.path(), &args(rd.to_str().unwrap(), "4", QUICK))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(j["rounds"], 4, "{j}");
    let snap = snapshot(&rd);
    assert!(snap.attempts.iter().all(|a| {
        a.evaluation
            .as_ref()
            .is_some_and(|e| e.result.status == Status::Passed)
    }));
    let (finished, ends) = finishes(&snap);
    assert_eq!(finished.len(), 4, "{finished:?}");
    assert!(
        finished.iter().all(|f| f.place.starts_with("slurm job ")),
        "{finished:?}"
    );
    assert!(
        overlapping(&finished).is_some(),
        "two jobs ran at once: {finished:?}"
    );
    assert_eq!(ends[0].jobs, Some(2));
    // The jobs' files are in the run directory, which the node sees; the run store has its one
    // writer, the orchestrator.
    assert!(rd.join("slurm").join("r1.result.json").is_file());
}

#[test]
#[cfg_attr(
    not(has_slurm),
    ignore = "needs Slurm (sbatch, squeue, scancel); .ci/slurm-one-node starts a one-node cluster"
)]
fn a_cancelled_job_runs_again_and_one_cancelled_twice_is_recorded_as_lost() {
    cluster_up();
    let dir = tempfile::tempdir().unwrap();
    let tag = format!("slurm-cancel-{}", std::process::id());
    let rd = dir.path().join(&tag);
    // Evaluations that last long enough to be cancelled mid-way: the judge stops timing once
    // the ratios are known, but not before `--min-runs` rounds (about a second and a half here).
    let slow = [
        "--workload",
        "small",
        "--min-runs",
        "300",
        "--min-time-ms",
        "1500",
        "--warmup-ms",
        "5",
        "--max-time-ms",
        "3000",
    ];
    let child = ksearch_in(dir.path(), &args(rd.to_str().unwrap(), "4", &slow))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Cancel the first round's job once it runs, then its second run; cancel the second
    // round's job once.
    let prefix = format!("ksearch-{tag}-r");
    let mut cancelled: Vec<(String, String)> = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(180);
    while cancelled.len() < 3 && Instant::now() < deadline {
        for (id, name, state) in queue() {
            let Some(round) = name.strip_prefix(&prefix) else {
                continue;
            };
            let times = cancelled.iter().filter(|(_, r)| r == round).count();
            let wanted = match round {
                "1" => times < 2,
                "2" => times < 1,
                _ => false,
            };
            if state == "RUNNING" && wanted && !cancelled.iter().any(|(i, _)| *i == id) {
                // Mid-evaluation: the job's judge is compiling or timing.
                std::thread::sleep(Duration::from_millis(500));
                let ok = Command::new("scancel").arg(&id).status().unwrap();
                assert!(ok.success());
                cancelled.push((id, round.to_owned()));
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let out = child.wait_with_output().unwrap();
    assert_eq!(cancelled.len(), 3, "cancelled {cancelled:?}");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(j["rounds"], 4, "{j}");
    let snap = snapshot(&rd);
    let (finished, _) = finishes(&snap);
    for a in snap.attempts.iter() {
        let e = a.evaluation.as_ref().expect("every attempt is evaluated");
        let f = finished.iter().find(|f| f.round == a.round);
        match a.round {
            1 => {
                assert_eq!(e.result.status, Status::Crashed);
                let m = &e.result.message;
                assert!(m.starts_with("lost:") && m.contains("CANCELLED"), "{m}");
                assert_eq!(f.unwrap().retried.len(), 2, "{f:?}");
            }
            2 => {
                assert_eq!(e.result.status, Status::Passed, "{}", e.result.message);
                let f = f.unwrap();
                assert_eq!(f.retried.len(), 1, "{f:?}");
                assert!(f.retried[0].contains("CANCELLED"), "{f:?}");
            }
            _ => assert_eq!(e.result.status, Status::Passed, "{}", e.result.message),
        }
    }
}

#[test]
#[cfg_attr(
    not(has_slurm),
    ignore = "needs Slurm (sbatch, squeue, scancel); .ci/slurm-one-node starts a one-node cluster"
)]
fn ctrl_c_cancels_the_runs_jobs() {
    cluster_up();
    let dir = tempfile::tempdir().unwrap();
    let tag = format!("slurm-interrupt-{}", std::process::id());
    let rd = dir.path().join(&tag);
    let slow = [
        "--workload",
        "small",
        "--min-time-ms",
        "3000",
        "--max-time-ms",
        "6000",
    ];
    let child = ksearch_in(dir.path(), &args(rd.to_str().unwrap(), "6", &slow))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let prefix = format!("ksearch-{tag}-r");
    let ours = || -> Vec<(String, String, String)> {
        queue()
            .into_iter()
            .filter(|(_, name, _)| name.starts_with(&prefix))
            .collect()
    };
    // Two rounds' jobs running (the seed's is round 0).
    let deadline = Instant::now() + Duration::from_secs(120);
    while ours()
        .iter()
        .filter(|(_, n, s)| s == "RUNNING" && !n.ends_with("-r0"))
        .count()
        < 2
        && Instant::now() < deadline
    {
        std::thread::sleep(Duration::from_millis(100));
    }
    let running = ours();
    assert_eq!(running.len(), 2, "{running:?}");
    // SAFETY: signalling our own child process.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(130),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(j["stop_reason"], "interrupted", "{j}");
    // Cancelled: they leave the queue (after Slurm's own clean-up), cancelled, not completed.
    let deadline = Instant::now() + Duration::from_secs(60);
    while !ours().is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(200));
    }
    let left = ours();
    assert!(
        left.is_empty(),
        "the run's jobs outlived its Ctrl-C: {left:?}"
    );
    for (id, _, _) in running {
        let out = Command::new("scontrol")
            .args(["show", "job", "-o", &id])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains("JobState=CANCELLED"), "job {id}: {text}");
    }
}

//! `--jobs N`: several evaluations in flight at once on this machine, each in a slot of its own
//! (its judge, its CPUs). Two really run at once; the order they finished in is recorded and a
//! replay follows it to the same tree; a worker killed or a candidate that hangs costs that
//! candidate alone while the other slot goes on; a kill with two in flight loses neither.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use ksearch_core::protocol::{Status, TimingPlan};
use ksearch_core::record::AttemptKind;
use ksearch_core::task::Source;
use ksearch_core::tree::{Action, NewNode};
use ksearch_core::tree_edit::EditScript;
use ksearch_engine::events::{RunEvent, decode};
use ksearch_engine::{
    Budget, Candidate, CycleEvidence, Engine, EngineState, EvalSettings, GenerateRequest, Parts,
    ProposeContext, ProposeError, Proposer, RUN_FORMAT, RunConfig, SessionEnd, Silent, TooHard,
    WorldModel,
};
use ksearch_eval::executor::{EvaluatorFactory, LocalPool, local_slots};
use ksearch_eval::{CBackend, LocalEvaluator};
use ksearch_store::{RunStore, Snapshot};

use crate::kernels;
use crate::support::{QUICK, alive, children_of, json, shape, spawn, wait_for_store};

/// One recorded `evaluation_finished` event.
#[derive(Debug, Clone)]
pub(crate) struct Finish {
    pub(crate) round: u64,
    pub(crate) slot: u32,
    pub(crate) place: String,
    pub(crate) started: f64,
    pub(crate) finished: f64,
    pub(crate) retried: Vec<String>,
}

pub(crate) fn snapshot(dir: &Path) -> Snapshot {
    RunStore::open(dir).unwrap().snapshot().unwrap()
}

/// The run's `evaluation_finished` events, in order, and its `session_ended` ones.
pub(crate) fn finishes(snap: &Snapshot) -> (Vec<Finish>, Vec<SessionEnd>) {
    let mut finished = Vec::new();
    let mut ends = Vec::new();
    for (_, e) in decode(&snap.events).unwrap() {
        match e {
            RunEvent::EvaluationFinished {
                round,
                slot,
                place,
                started_unix,
                finished_unix,
                retried,
            } => finished.push(Finish {
                round,
                slot,
                place,
                started: started_unix,
                finished: finished_unix,
                retried,
            }),
            RunEvent::SessionEnded(end) => ends.push(end),
            _ => {}
        }
    }
    (finished, ends)
}

/// Two evaluations of different slots that were in flight at the same time, if any.
pub(crate) fn overlapping(f: &[Finish]) -> Option<(u64, u64)> {
    f.iter().enumerate().find_map(|(i, a)| {
        f[i + 1..]
            .iter()
            .find(|b| a.slot != b.slot && a.started < b.finished && b.started < a.finished)
            .map(|b| (a.round, b.round))
    })
}

fn with_quick<'a>(extra: &[&'a str]) -> Vec<&'a str> {
    let mut v = extra.to_vec();
    v.extend_from_slice(QUICK);
    v
}

#[test]
fn two_jobs_evaluate_at_once_and_a_replay_follows_their_order_to_the_same_tree() {
    let dir = tempfile::tempdir().unwrap();
    let rd = dir.path().join("run");
    let rd = rd.to_str().unwrap();
    let j = json(&with_quick(&[
        "run",
        "cpu/softmax",
        "--model",
        "builtin",
        "--iterations",
        "6",
        "--jobs",
        "2",
        "--run-dir",
        rd,
        "--json",
    ]));
    assert_eq!(
        (j["rounds"].as_u64(), j["stop_reason"].as_str()),
        (Some(6), Some("iterations")),
        "{j}"
    );
    let snap = snapshot(Path::new(rd));
    assert!(
        snap.attempts.iter().all(|a| a.evaluation.is_some()),
        "every attempt is evaluated"
    );
    let (finished, ends) = finishes(&snap);
    let mut rounds: Vec<u64> = finished.iter().map(|f| f.round).collect();
    rounds.sort_unstable();
    assert_eq!(rounds, (1..=6).collect::<Vec<_>>(), "{finished:?}");
    let slots: std::collections::BTreeSet<u32> = finished.iter().map(|f| f.slot).collect();
    assert_eq!(
        slots,
        [0, 1].into(),
        "both slots ran evaluations: {finished:?}"
    );
    assert!(
        finished.iter().all(|f| f.place.starts_with("cpu ")),
        "each slot on a CPU of its own: {finished:?}"
    );
    assert!(
        overlapping(&finished).is_some(),
        "two evaluations were in flight at once: {finished:?}"
    );
    assert_eq!(ends.len(), 1);
    assert_eq!(ends[0].jobs, Some(2));

    // The replay finishes the recorded evaluations in the recorded order: the same tree, the
    // same stop.
    let replayed = dir.path().join("replayed");
    let r = json(&[
        "run",
        "cpu/softmax",
        "--replay",
        rd,
        "--run-dir",
        replayed.to_str().unwrap(),
        "--json",
        "--quiet",
    ]);
    assert_eq!(r["rounds"], j["rounds"]);
    assert_eq!(r["stop_reason"], j["stop_reason"]);
    let tree = |d: &str| json(&["tree", d, "--json"]);
    let (a, b) = (tree(rd), tree(replayed.to_str().unwrap()));
    assert_eq!(shape(&a), shape(&b));
    let solved = |t: &serde_json::Value| -> Vec<Option<u64>> {
        t["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n["solution"]["round"].as_u64())
            .collect()
    };
    assert_eq!(
        solved(&a),
        solved(&b),
        "the same attempts solved the same nodes"
    );
    let (again, _) = finishes(&snapshot(&replayed));
    let order = |f: &[Finish]| f.iter().map(|f| (f.round, f.slot)).collect::<Vec<_>>();
    assert_eq!(order(&again), order(&finished));
}

/// The judges among the orchestrator's children.
fn judges(orchestrator: u32) -> Vec<u32> {
    children_of(orchestrator)
        .into_iter()
        .filter(|p| {
            std::fs::read(format!("/proc/{p}/cmdline"))
                .is_ok_and(|c| String::from_utf8_lossy(&c).contains("worker"))
        })
        .collect()
}

/// Correctness and a long timing: an evaluation lasts seconds, long enough to be caught.
const SLOW: &[&str] = &[
    "--workload",
    "small",
    "--min-runs",
    "5",
    "--min-time-ms",
    "1500",
    "--warmup-ms",
    "5",
    "--max-time-ms",
    "3000",
];

fn slow_run<'a>(rd: &'a str, iterations: &'a str) -> Vec<&'a str> {
    let mut v = vec![
        "run",
        "cpu/softmax",
        "--model",
        "builtin",
        "--iterations",
        iterations,
        "--jobs",
        "2",
        "--run-dir",
        rd,
    ];
    v.extend_from_slice(SLOW);
    v
}

/// Two rounds' evaluations in flight (recorded, not finished), the seed done.
fn two_in_flight(s: &Snapshot) -> bool {
    s.attempts
        .iter()
        .filter(|a| a.round > 0 && a.evaluation.is_none())
        .count()
        == 2
}

#[test]
fn a_killed_worker_costs_one_candidate() {
    let dir = tempfile::tempdir().unwrap();
    let rd = dir.path().join("run");
    let mut args = slow_run(rd.to_str().unwrap(), "4");
    args.push("--json");
    let child = spawn(&args);
    assert!(
        wait_for_store(&rd, Duration::from_secs(120), two_in_flight),
        "never saw two evaluations in flight"
    );
    // Each slot's judge starts once its evaluation is handed over.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let mut judges = judges(child.id());
    while judges.len() < 2 && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
        judges = self::judges(child.id());
    }
    assert_eq!(judges.len(), 2, "a judge per slot: {judges:?}");
    // SAFETY: killing a process of our own child's.
    unsafe { libc::kill(judges[0] as i32, libc::SIGKILL) };
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(j["rounds"], 4, "{j}");
    let snap = snapshot(&rd);
    let crashed: Vec<_> = snap
        .attempts
        .iter()
        .filter(|a| a.evaluation.as_ref().unwrap().result.status == Status::Crashed)
        .collect();
    assert_eq!(crashed.len(), 1, "one candidate lost with its judge");
    let message = &crashed[0].evaluation.as_ref().unwrap().result.message;
    assert!(message.contains("SIGKILL"), "{message}");
    for a in snap.attempts.iter().filter(|a| a.round != crashed[0].round) {
        assert_eq!(
            a.evaluation.as_ref().unwrap().result.status,
            Status::Passed,
            "round {}",
            a.round
        );
    }
}

#[test]
fn a_kill_with_two_evaluations_in_flight_loses_neither() {
    let dir = tempfile::tempdir().unwrap();
    let rd = dir.path().join("run");
    let mut child = spawn(&slow_run(rd.to_str().unwrap(), "4"));
    assert!(
        wait_for_store(&rd, Duration::from_secs(120), two_in_flight),
        "never saw two evaluations in flight"
    );
    // An attempt is recorded, then marked in flight in the next commit: kill once both marks
    // are on disk (a kill between the two leaves an attempt a resume runs, unmarked).
    let marked = |rd: &std::path::Path| {
        RunStore::open(rd)
            .ok()
            .and_then(|s| s.state::<EngineState>().ok().flatten())
            .is_some_and(|st: EngineState| {
                st.evaluating.iter().count() + st.evaluating_also.len() == 2
            })
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while !marked(&rd) && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    let workers = children_of(child.id());
    // SAFETY: killing our own child process.
    unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
    child.wait().unwrap();
    std::thread::sleep(Duration::from_millis(300));
    for w in workers {
        assert!(!alive(w), "worker {w} outlived the killed orchestrator");
    }
    let store = RunStore::open(&rd).unwrap();
    let state: EngineState = store.state().unwrap().unwrap();
    let mut in_flight: Vec<u64> = state
        .evaluating
        .iter()
        .chain(&state.evaluating_also)
        .map(|f| f.round)
        .collect();
    in_flight.sort_unstable();
    let mut pending: Vec<u64> = store
        .snapshot()
        .unwrap()
        .attempts
        .iter()
        .filter(|a| a.evaluation.is_none())
        .map(|a| a.round)
        .collect();
    pending.sort_unstable();
    assert_eq!(in_flight, pending, "both are recorded as in flight");
    drop(store);

    // Resumed one at a time: the open cycles still go on (through one slot), both lost
    // evaluations run again, and the round budget holds.
    let j = json(&["resume", rd.to_str().unwrap(), "--json", "--quiet"]);
    assert_eq!(j["rounds"], 4, "{j}");
    let snap = snapshot(&rd);
    let unevaluated: Vec<(u64, u64)> = snap
        .attempts
        .iter()
        .filter(|a| a.evaluation.is_none())
        .map(|a| (a.round, a.cycle))
        .collect();
    assert!(
        unevaluated.is_empty(),
        "rounds (and cycles) never evaluated: {unevaluated:?}, lost at the kill: {in_flight:?}; {j}"
    );
    let lost: Vec<u64> = decode(&snap.events)
        .unwrap()
        .into_iter()
        .filter_map(|(_, e)| match e {
            RunEvent::EvaluationLost {
                round, times: 1, ..
            } => Some(round),
            _ => None,
        })
        .collect();
    let mut lost = lost;
    lost.sort_unstable();
    assert_eq!(lost, pending, "each lost evaluation is counted once");
    for r in &pending {
        let a = snap.attempts.iter().find(|a| a.round == *r).unwrap();
        assert_eq!(a.evaluation.as_ref().unwrap().result.status, Status::Passed);
    }
    let rounds: Vec<u64> = snap.attempts.iter().map(|a| a.round).collect();
    assert_eq!(rounds, (0..=4).collect::<Vec<_>>());
}

/// Implements its first action with a kernel that never returns, every other with a correct
/// one.
struct OneHangs;

fn action(title: &str, score: f64) -> NewNode {
    NewNode {
        decision: title.into(),
        action: Action {
            title: title.into(),
            description: String::new(),
            difficulty: 2,
            score,
            expected_speedup: 1.5,
            rationale: String::new(),
        },
        rating: 5.0,
        confidence: 0.5,
        impacts: Default::default(),
        payload: serde_json::Value::Null,
    }
}

impl Proposer for OneHangs {
    fn name(&self) -> String {
        "one-hangs".into()
    }
    fn init_world_model(&mut self, _: &ProposeContext<'_>) -> Result<WorldModel, ProposeError> {
        Ok(WorldModel {
            notes: Vec::new(),
            actions: vec![action("hangs", 0.9), action("works", 0.5)],
        })
    }
    fn propose_actions(&mut self, _: &ProposeContext<'_>) -> Result<EditScript, ProposeError> {
        Ok(EditScript::default())
    }
    fn generate(
        &mut self,
        _: &ProposeContext<'_>,
        req: &GenerateRequest<'_>,
    ) -> Result<Option<Candidate>, ProposeError> {
        if req.kind != AttemptKind::Implement {
            return Ok(None);
        }
        let text = if req.node == 1 {
            kernels::softmax_candidate("volatile int spin = 1; while (spin) {}")
        } else {
            kernels::good()
        };
        Ok(Some(Candidate {
            source: Source {
                file: "k.c".into(),
                text,
            },
            note: String::new(),
            payload: serde_json::Value::Null,
        }))
    }
    fn refine(
        &mut self,
        _: &ProposeContext<'_>,
        _: &CycleEvidence<'_>,
    ) -> Result<EditScript, ProposeError> {
        Ok(EditScript::default())
    }
    fn too_hard(
        &mut self,
        _: &ProposeContext<'_>,
        _: &CycleEvidence<'_>,
    ) -> Result<TooHard, ProposeError> {
        Ok(TooHard::Delete)
    }
}

#[test]
fn a_candidate_that_hangs_costs_itself_while_the_other_slot_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let factory: EvaluatorFactory = Arc::new(|_| {
        Ok(LocalEvaluator::new(Box::new(CBackend {
            ksearch_exe: env!("CARGO_BIN_EXE_ksearch").into(),
        })))
    });
    let mut pool = LocalPool::start(local_slots(2, false), &factory).unwrap();
    let mut observer = Silent;
    let config = RunConfig {
        format: RUN_FORMAT,
        ksearch_version: "test".into(),
        proposer: "one-hangs".into(),
        llm: None,
        seed: 0,
        window: 1,
        max_cycle_attempts: 3,
        eval: EvalSettings {
            workloads: vec!["small".into()],
            timing: Some(TimingPlan {
                warmup_ms: 2.0,
                min_runs: 5,
                min_time_ms: 20.0,
                max_time_ms: 500.0,
                target_sample_ms: 0.5,
                rotate_bytes: 4 << 20,
            }),
            timeout_s: 8.0,
            timeout_given: true,
            ..EvalSettings::default()
        },
        created_unix: 0,
        machine: "test".into(),
        host_cpu: None,
    };
    let parts = Parts {
        proposer: Box::new(OneHangs),
        evaluator: &mut pool,
        observer: &mut observer,
        stop: Arc::new(AtomicBool::new(false)),
    };
    let budget = Budget {
        rounds: Some(3),
        until: None,
    };
    let task = ksearch_tasks::load_builtin("cpu/softmax").unwrap();
    let mut engine = Engine::create(&dir.path().join("run"), task, config, budget, parts).unwrap();
    let summary = engine.run().unwrap();
    assert_eq!(summary.rounds, 3);
    let snap = snapshot(&dir.path().join("run"));
    let status = |round: u64| {
        snap.attempts
            .iter()
            .find(|a| a.round == round)
            .and_then(|a| a.evaluation.as_ref())
            .map(|e| e.result.status)
    };
    // Round 1 hangs until its limit; round 2 (the other action) and round 3 (the action the
    // engine added after it passed) ran in the other slot meanwhile.
    assert_eq!(status(1), Some(Status::Timeout));
    assert_eq!(status(2), Some(Status::Passed));
    assert_eq!(status(3), Some(Status::Passed));
    let (finished, _) = finishes(&snap);
    let order: Vec<u64> = finished.iter().map(|f| f.round).collect();
    assert_eq!(order, [2, 3, 1], "{finished:?}");
    let hung = &finished[2];
    for f in &finished[..2] {
        assert_ne!(f.slot, hung.slot);
        assert!(
            f.finished < hung.finished && f.started > hung.started,
            "{finished:?}"
        );
    }
}

//! Engine transitions, driven by a proposer that follows a script, on real C kernels.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use ksearch_core::protocol::{Status, TimingPlan};
use ksearch_core::record::{AttemptKind, CycleOutcome};
use ksearch_core::task::{Source, Task};
use ksearch_core::tree::{Action, NewNode, ROOT};
use ksearch_core::tree_edit::{EditError, EditOp, EditScript};
use ksearch_engine::{
    Budget, Candidate, CycleEvidence, Engine, EvalSettings, GenerateRequest, Parts, ProposeContext,
    ProposeError, Proposer, RUN_FORMAT, RunConfig, Silent, TooHard, WorldModel,
};
use ksearch_eval::{CBackend, LocalEvaluator};

use crate::kernels;

fn action(title: &str) -> NewNode {
    NewNode {
        decision: title.into(),
        action: Action {
            title: title.into(),
            description: String::new(),
            difficulty: 2,
            score: 0.5,
            expected_speedup: 1.5,
            rationale: String::new(),
        },
        rating: 5.0,
        confidence: 0.5,
        impacts: Default::default(),
        payload: serde_json::Value::Null,
    }
}

type RefineFn = Box<dyn FnMut(&CycleEvidence<'_>) -> EditScript>;

/// Follows a script; records what it was asked.
struct Scripted {
    implement: String,
    debug: Option<String>,
    improve: Option<String>,
    refine: RefineFn,
    too_hard: TooHard,
    revise: Option<EditScript>,
    log: Rc<RefCell<Vec<String>>>,
}

impl Scripted {
    fn new(implement: String, log: Rc<RefCell<Vec<String>>>) -> Self {
        Self {
            implement,
            debug: None,
            improve: None,
            refine: Box::new(|_| EditScript::default()),
            too_hard: TooHard::Delete,
            revise: None,
            log,
        }
    }
}

fn source(text: &str) -> Candidate {
    Candidate {
        source: Source {
            file: "k.c".into(),
            text: text.into(),
        },
        note: String::new(),
        payload: serde_json::Value::Null,
    }
}

impl Proposer for Scripted {
    fn name(&self) -> String {
        "scripted".into()
    }
    fn init_world_model(&mut self, _: &ProposeContext<'_>) -> Result<WorldModel, ProposeError> {
        Ok(WorldModel {
            notes: vec!["scripted".into()],
            actions: vec![action("a0")],
        })
    }
    fn propose_actions(&mut self, _: &ProposeContext<'_>) -> Result<EditScript, ProposeError> {
        self.log.borrow_mut().push("propose_actions".into());
        Ok(EditScript::default())
    }
    fn generate(
        &mut self,
        _: &ProposeContext<'_>,
        req: &GenerateRequest<'_>,
    ) -> Result<Option<Candidate>, ProposeError> {
        self.log
            .borrow_mut()
            .push(format!("{:?} n{}", req.kind, req.node));
        Ok(match req.kind {
            AttemptKind::Implement => Some(source(&self.implement)),
            AttemptKind::Debug => self.debug.as_deref().map(source),
            AttemptKind::Improve => self.improve.as_deref().map(source),
            AttemptKind::Seed => None,
        })
    }
    fn refine(
        &mut self,
        _: &ProposeContext<'_>,
        e: &CycleEvidence<'_>,
    ) -> Result<EditScript, ProposeError> {
        self.log.borrow_mut().push(format!("refine n{}", e.node));
        Ok((self.refine)(e))
    }
    fn too_hard(
        &mut self,
        _: &ProposeContext<'_>,
        e: &CycleEvidence<'_>,
    ) -> Result<TooHard, ProposeError> {
        self.log.borrow_mut().push(format!("too_hard n{}", e.node));
        Ok(self.too_hard.clone())
    }
    fn revise_edit(
        &mut self,
        _: &ProposeContext<'_>,
        _: &EditScript,
        error: &EditError,
    ) -> Result<Option<EditScript>, ProposeError> {
        self.log.borrow_mut().push(format!("revise: {error}"));
        Ok(self.revise.take())
    }
}

fn config(window: u32) -> RunConfig {
    RunConfig {
        format: RUN_FORMAT,
        ksearch_version: "test".into(),
        proposer: "scripted".into(),
        llm: None,
        seed: 0,
        window,
        max_cycle_attempts: 10,
        eval: EvalSettings {
            workloads: vec!["small".into()],
            timing: Some(TimingPlan {
                warmup_ms: 2.0,
                min_runs: 8,
                min_time_ms: 20.0,
                max_time_ms: 1000.0,
                target_sample_ms: 0.5,
                rotate_bytes: 4 << 20,
            }),
            ..EvalSettings::default()
        },
        created_unix: 0,
        machine: "test".into(),
        host_cpu: None,
    }
}

fn task() -> Task {
    ksearch_tasks::load_builtin("cpu/softmax").unwrap()
}

/// Run a scripted search for `rounds` rounds; return the engine's final tree, run dir and log.
fn run(
    proposer: Scripted,
    window: u32,
    rounds: u64,
) -> (tempfile::TempDir, ksearch_engine::RunSummary) {
    let dir = tempfile::tempdir().unwrap();
    let mut evaluator = LocalEvaluator::new(Box::new(CBackend {
        ksearch_exe: env!("CARGO_BIN_EXE_ksearch").into(),
    }));
    let mut observer = Silent;
    let parts = Parts {
        proposer: Box::new(proposer),
        evaluator: &mut evaluator,
        observer: &mut observer,
        stop: Arc::new(AtomicBool::new(false)),
    };
    let budget = Budget {
        rounds: Some(rounds),
        until: None,
    };
    let mut engine = Engine::create(
        &dir.path().join("run"),
        task(),
        config(window),
        budget,
        parts,
    )
    .unwrap();
    let summary = engine.run().unwrap();
    (dir, summary)
}

fn snapshot(dir: &tempfile::TempDir) -> ksearch_store::Snapshot {
    ksearch_store::RunStore::open(&dir.path().join("run"))
        .unwrap()
        .snapshot()
        .unwrap()
}

#[test]
fn a_cycle_ends_after_the_stagnation_window_and_the_solved_node_gets_a_continuation() {
    let log = Rc::new(RefCell::new(Vec::new()));
    let mut p = Scripted::new(kernels::good(), log.clone());
    // Improvements that never beat the incumbent: twice the work.
    p.improve = Some(kernels::twice_as_slow());
    let (dir, _) = run(p, 2, 3);
    let snap = snapshot(&dir);
    let cycle = &snap.cycles[0];
    assert_eq!(
        (cycle.attempts, cycle.stagnation, cycle.outcome),
        (3, 2, Some(CycleOutcome::Passed)),
        "{cycle:?}"
    );
    assert_eq!(cycle.best_round, Some(1));
    let kinds: Vec<AttemptKind> = snap.attempts.iter().skip(1).map(|a| a.kind).collect();
    assert_eq!(
        kinds,
        [
            AttemptKind::Implement,
            AttemptKind::Improve,
            AttemptKind::Improve
        ]
    );
    assert!(
        snap.attempts.iter().skip(2).all(|a| !a.improved),
        "a 2× slower variant never counts as an improvement"
    );
    let node = snap.nodes.iter().find(|n| n.id == 1).unwrap();
    assert!(node.solution.is_some(), "the pass is attached");
    // refine proposed nothing, so the engine inserted the fallback continuation.
    let child = snap
        .nodes
        .iter()
        .find(|n| n.parent == Some(1))
        .expect("a continuation child");
    assert!(
        child.action.title.starts_with("Tune the parameters of: a0") && child.action.difficulty < 5
    );
    assert!(
        snap.events
            .iter()
            .any(|(_, kind, _)| kind == "fallback_child")
    );
    assert_eq!(
        log.borrow()
            .iter()
            .filter(|l| l.starts_with("refine"))
            .count(),
        1
    );
}

/// Without `--timeout`, a round's limit follows the seed's measured evaluation time (with a
/// floor), not the 300 s of an evaluation nothing is known about: a hang costs seconds, and the
/// result says which limit applied.
#[test]
fn a_hang_is_stopped_at_a_limit_derived_from_the_seed() {
    let log = Rc::new(RefCell::new(Vec::new()));
    let hang = kernels::softmax_candidate("for (volatile int spin = 1; spin;) {}");
    let p = Scripted::new(hang, log);
    let (dir, _) = run(p, 2, 1);
    let snap = snapshot(&dir);
    let seed = snap.attempts[0].evaluation.as_ref().unwrap();
    let hung = snap.attempts[1].evaluation.as_ref().unwrap();
    assert_eq!(
        hung.result.status,
        Status::Timeout,
        "{}",
        hung.result.message
    );
    let limit = ksearch_engine::round_timeout_s(seed.wall_s);
    assert!(limit < 300.0, "{limit}");
    // Stopped by the round's limit, or first by the judge's limit on one call (100 times the
    // reference's time on the workload, at least 10 s), which the message names.
    assert!(
        hung.result
            .message
            .contains(&format!("within its limit of {limit:.1} s"))
            && hung.result.message.contains("× the seed's evaluation")
            || hung.result.message.contains(
                "call(s) within 10.0 s (10.0 s a call, derived from the reference's time)"
            ),
        "{}",
        hung.result.message
    );
    assert!(hung.wall_s < limit + 20.0, "{} s", hung.wall_s);
}

#[test]
fn nothing_passing_goes_to_too_hard_and_delete_removes_the_node() {
    let log = Rc::new(RefCell::new(Vec::new()));
    let mut p = Scripted::new(kernels::broken(), log.clone());
    p.debug = Some(kernels::broken());
    let (dir, summary) = run(p, 2, 2);
    let snap = snapshot(&dir);
    assert_eq!(snap.cycles[0].outcome, Some(CycleOutcome::Failed));
    let kinds: Vec<AttemptKind> = snap.attempts.iter().skip(1).map(|a| a.kind).collect();
    assert_eq!(
        kinds,
        [AttemptKind::Implement, AttemptKind::Debug],
        "debug rounds while nothing has passed"
    );
    assert!(
        snap.attempts
            .iter()
            .skip(1)
            .all(|a| a.status() == Some(ksearch_core::protocol::Status::CompileError))
    );
    assert!(snap.nodes.iter().all(|n| n.id != 1), "node 1 was deleted");
    assert!(log.borrow().contains(&"too_hard n1".to_owned()));
    assert_eq!(summary.best.node, ROOT);
}

#[test]
fn too_hard_can_split_or_downgrade() {
    let log = Rc::new(RefCell::new(Vec::new()));
    let mut p = Scripted::new(kernels::broken(), log.clone());
    p.too_hard = TooHard::Split(vec![action("smaller 1"), action("smaller 2")]);
    let (dir, _) = run(p, 1, 1);
    let snap = snapshot(&dir);
    let titles: Vec<&str> = snap
        .nodes
        .iter()
        .filter(|n| n.parent == Some(ROOT))
        .map(|n| n.action.title.as_str())
        .collect();
    assert_eq!(titles, ["smaller 1", "smaller 2"]);

    let mut p = Scripted::new(kernels::broken(), log);
    p.too_hard = TooHard::Downgrade(ksearch_core::tree_edit::NodeUpdate {
        score: Some(0.1),
        ..Default::default()
    });
    let (dir, _) = run(p, 1, 1);
    let n = snapshot(&dir)
        .nodes
        .into_iter()
        .find(|n| n.id == 1)
        .unwrap();
    assert_eq!((n.action.score, n.failed_cycles), (0.1, 1));
}

#[test]
fn a_rejected_edit_goes_back_to_the_proposer_with_the_error() {
    let log = Rc::new(RefCell::new(Vec::new()));
    let mut p = Scripted::new(kernels::good(), log.clone());
    p.refine = Box::new(|e| EditScript {
        ops: (0..4)
            .map(|i| EditOp::Insert {
                parent: e.node,
                node: action(&format!("too many {i}")),
            })
            .collect(),
    });
    p.revise = Some(EditScript {
        ops: vec![EditOp::Insert {
            parent: 1,
            node: action("just one"),
        }],
    });
    // Two rounds: the first cycle ends (and is refined) within the budget; a budget's end
    // would leave its refine to the next session.
    let (dir, _) = run(p, 1, 2);
    let snap = snapshot(&dir);
    assert!(
        log.borrow()
            .iter()
            .any(|l| l.contains("at most 3 new nodes")),
        "{:?}",
        log.borrow()
    );
    let children: Vec<&str> = snap
        .nodes
        .iter()
        .filter(|n| n.parent == Some(1))
        .map(|n| n.action.title.as_str())
        .collect();
    assert_eq!(children, ["just one"]);
    let kinds: Vec<&str> = snap
        .events
        .iter()
        .map(|(_, k, _)| k.as_str())
        .filter(|k| k.starts_with("edit"))
        .collect();
    assert_eq!(kinds, ["edit_rejected", "edit"]);
}

/// Passes every evaluation through `rewrite`, with how many it has seen (1 for the seed's).
struct Rewriting {
    inner: LocalEvaluator,
    calls: usize,
    rewrite: fn(usize, &mut ksearch_core::record::Evaluation),
}

impl Rewriting {
    fn new(rewrite: fn(usize, &mut ksearch_core::record::Evaluation)) -> Self {
        Self {
            inner: c_evaluator(),
            calls: 0,
            rewrite,
        }
    }
}

impl ksearch_eval::Evaluator for Rewriting {
    fn evaluate(
        &mut self,
        task: &Task,
        candidate: &Source,
        contenders: ksearch_eval::Contenders<'_>,
        options: &ksearch_eval::EvalOptions,
    ) -> Result<ksearch_core::record::Evaluation, ksearch_eval::EvalError> {
        let mut e = self.inner.evaluate(task, candidate, contenders, options)?;
        self.calls += 1;
        (self.rewrite)(self.calls, &mut e);
        Ok(e)
    }
}

/// From the second evaluation on, what a forged or broken result would report: an infinite
/// speedup, then a time of zero.
fn forged(calls: usize, e: &mut ksearch_core::record::Evaluation) {
    match calls {
        1 => {}
        2 => e.speedup.as_mut().unwrap().geomean = f64::INFINITY,
        _ => {
            let t = &mut e.result.workloads[0].timings[0].stats;
            t.samples_ms[0] = 0.0;
        }
    }
}

#[test]
fn an_evaluation_with_a_non_finite_or_impossible_number_is_rejected_and_never_stored() {
    let dir = tempfile::tempdir().unwrap();
    let rd = dir.path().join("run");
    let mut evaluator = Rewriting::new(forged);
    let summary = run_good_kernels_with(&mut evaluator, &rd, 2).unwrap();
    assert_eq!(summary.rounds, 2);

    // The run reads back whole: nothing was written as `null`.
    let snap = ksearch_store::RunStore::open(&rd)
        .unwrap()
        .snapshot()
        .unwrap();
    let rejected: Vec<(Option<ksearch_core::protocol::Status>, String)> = snap
        .attempts
        .iter()
        .skip(1)
        .map(|a| {
            (
                a.status(),
                a.evaluation.as_ref().unwrap().result.message.clone(),
            )
        })
        .collect();
    assert_eq!(rejected.len(), 2);
    use ksearch_core::protocol::Status::Rejected;
    assert_eq!(rejected[0].0, Some(Rejected));
    assert!(
        rejected[0].1.contains("not finite") && rejected[0].1.contains("speedup.geomean"),
        "{}",
        rejected[0].1
    );
    assert_eq!(rejected[1].0, Some(Rejected));
    assert!(rejected[1].1.contains("not positive"), "{}", rejected[1].1);
    assert!(snap.attempts.iter().skip(1).all(|a| a.speedup().is_none()));
    assert_eq!(
        snap.events
            .iter()
            .filter(|(_, k, _)| k == "evaluation_not_admitted")
            .count(),
        2
    );
    // Nothing it reported became progress.
    assert_eq!(summary.best.node, ROOT);
    let (s, _, _) = ksearch_engine::read_summary(&rd).unwrap();
    assert_eq!(s.best.node, ROOT);
}

/// Measures the seed, then fails as a judge does that a candidate broke (a malformed message to
/// it, the machine's memory held): every later evaluation is a worker error.
struct BrokenJudge {
    inner: LocalEvaluator,
    calls: usize,
}

impl ksearch_eval::Evaluator for BrokenJudge {
    fn evaluate(
        &mut self,
        task: &Task,
        candidate: &Source,
        contenders: ksearch_eval::Contenders<'_>,
        options: &ksearch_eval::EvalOptions,
    ) -> Result<ksearch_core::record::Evaluation, ksearch_eval::EvalError> {
        self.calls += 1;
        if self.calls == 1 {
            return self.inner.evaluate(task, candidate, contenders, options);
        }
        Err(ksearch_eval::EvalError::Worker {
            message: format!("the harness failed: RecursionError (call {})", self.calls),
        })
    }
}

fn run_with_broken_judge(rounds: u64) -> (tempfile::TempDir, Result<(), String>) {
    let dir = tempfile::tempdir().unwrap();
    let mut evaluator = BrokenJudge {
        inner: c_evaluator(),
        calls: 0,
    };
    let outcome = run_good_kernels_with(&mut evaluator, &dir.path().join("run"), rounds)
        .map(|_| ())
        .map_err(|e| e.to_string());
    (dir, outcome)
}

fn c_evaluator() -> LocalEvaluator {
    LocalEvaluator::new(Box::new(CBackend {
        ksearch_exe: env!("CARGO_BIN_EXE_ksearch").into(),
    }))
}

/// A scripted search in `run_dir` whose every candidate (and debug attempt) is the good kernel,
/// evaluated by `evaluator`, for `rounds` rounds.
fn run_good_kernels_with(
    evaluator: &mut dyn ksearch_eval::Evaluator,
    run_dir: &std::path::Path,
    rounds: u64,
) -> Result<ksearch_engine::RunSummary, ksearch_engine::EngineError> {
    let mut p = Scripted::new(kernels::good(), Rc::new(RefCell::new(Vec::new())));
    p.debug = Some(kernels::good());
    let mut observer = Silent;
    let parts = Parts {
        proposer: Box::new(p),
        evaluator,
        observer: &mut observer,
        stop: Arc::new(AtomicBool::new(false)),
    };
    let budget = Budget {
        rounds: Some(rounds),
        until: None,
    };
    Engine::create(run_dir, task(), config(5), budget, parts)?.run()
}

/// A candidate that breaks the judge fails its own round, and the search goes on (it used to
/// stop the run, and every resume evaluated the same candidate and stopped again); a judge that
/// fails round after round is broken, and the run stops saying so.
#[test]
fn a_round_whose_judge_fails_is_that_candidates_failure_until_the_judge_is_plainly_broken() {
    let (dir, outcome) = run_with_broken_judge(2);
    assert_eq!(outcome, Ok(()));
    let snap = snapshot(&dir);
    let later: Vec<_> = snap.attempts.iter().filter(|a| a.round > 0).collect();
    assert_eq!(later.len(), 2);
    for a in later {
        assert_eq!(
            a.status(),
            Some(ksearch_core::protocol::Status::RuntimeError)
        );
        let m = &a.evaluation.as_ref().unwrap().result.message;
        assert!(m.contains("RecursionError"), "{m}");
    }

    let (dir, outcome) = run_with_broken_judge(5);
    let err = outcome.expect_err("three judge failures in a row stop the run");
    assert!(err.contains("RecursionError (call 4)"), "{err}");
    assert_eq!(
        snapshot(&dir)
            .attempts
            .iter()
            .filter(|a| a.round > 0 && a.evaluation.is_some())
            .count(),
        2
    );
}

/// Every evaluation after the seed's as though the compiler (on a GPU: the device) had changed,
/// as in a run resumed on another machine.
fn on_another_toolchain(calls: usize, e: &mut ksearch_core::record::Evaluation) {
    if calls > 1
        && let Some(c) = e.result.compile.as_mut()
    {
        c.compiler = "another compiler on another GPU".into();
    }
}

/// Rounds measured with another toolchain than the seed's carry a caveat naming both; the
/// seed's does not.
#[test]
fn rounds_measured_with_another_toolchain_than_the_seed_say_so() {
    let dir = tempfile::tempdir().unwrap();
    let rd = dir.path().join("run");
    let mut evaluator = Rewriting::new(on_another_toolchain);
    run_good_kernels_with(&mut evaluator, &rd, 2).unwrap();
    let snap = ksearch_store::RunStore::open(&rd)
        .unwrap()
        .snapshot()
        .unwrap();
    let caveats = |a: &ksearch_core::record::AttemptRecord| -> Vec<String> {
        let e = a.evaluation.as_ref().unwrap();
        e.caveats
            .iter()
            .filter(|c| c.starts_with("other toolchain"))
            .cloned()
            .collect()
    };
    let seed_compiler = snap.attempts[0]
        .evaluation
        .as_ref()
        .unwrap()
        .result
        .compile
        .as_ref()
        .unwrap()
        .compiler
        .clone();
    assert!(caveats(&snap.attempts[0]).is_empty());
    assert_eq!(snap.attempts.len(), 3);
    for a in &snap.attempts[1..] {
        let said = caveats(a);
        assert_eq!(said.len(), 1, "round {}: {said:?}", a.round);
        assert!(
            said[0].contains("measured with `another compiler on another GPU`")
                && said[0].contains(&format!("seed was measured with `{seed_compiler}`")),
            "{}",
            said[0]
        );
    }
}

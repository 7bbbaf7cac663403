//! The builtin proposer on the `mlx/attention` space, with an evaluator that times each point by
//! a landscape instead of a GPU: how deep the search gets in the 60 rounds the space's target
//! allows. No kernel runs; the numbers are the landscape's, never a measurement.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use ksearch_core::protocol::{
    CapturedOutput, ContenderTiming, EvaluateResult, Phases, Role, Status, TimingPlan,
    WorkloadReport,
};
use ksearch_core::record::Evaluation;
use ksearch_core::score::speedup_over;
use ksearch_core::stats::TimingStats;
use ksearch_core::task::{Source, Task};
use ksearch_engine::builtin::{BuiltinProposer, machine};
use ksearch_engine::{Budget, Engine, EvalSettings, Parts, RUN_FORMAT, RunConfig, Silent};
use ksearch_eval::{Contenders, EvalError, EvalOptions, Evaluator};

type Point = BTreeMap<String, i64>;

/// Times a point as the product of its knobs' hints over the seed point's (every tactic gains
/// what the space says it will), SDPA at a fixed time; samples jittered by a fixed sequence so
/// that paired ratios have intervals.
struct Landscape {
    /// Knob -> value -> hint (1 where the space gives none).
    hints: BTreeMap<String, BTreeMap<i64, f64>>,
    seed: Point,
    calls: u64,
}

impl Landscape {
    fn new(task: &Task) -> Self {
        let space = &task.space.as_ref().unwrap().spec;
        let hints = space
            .knobs
            .iter()
            .map(|k| {
                let values = k.values.iter().map(|v| (v.value, v.hint)).collect();
                (k.name.clone(), values)
            })
            .collect();
        let seed = space
            .knobs
            .iter()
            .map(|k| (k.name.clone(), k.seed))
            .collect();
        Self {
            hints,
            seed,
            calls: 0,
        }
    }

    /// The point a rendered module names in its first line (`... space: k=v k=v.`); the seed's
    /// for the task's own seed.
    fn point(&self, source: &Source) -> Point {
        let first = source.text.lines().next().unwrap_or("");
        let mut point = self.seed.clone();
        if let Some((_, knobs)) = first.split_once("template space: ") {
            for kv in knobs.trim_end_matches('.').split_whitespace() {
                let (k, v) = kv.split_once('=').unwrap();
                point.insert(k.into(), v.parse().unwrap());
            }
        }
        point
    }

    /// Milliseconds of `point` at n4096: the seed's 310 ms (as measured on an H200) over the
    /// product of the hints of its values over the seed's values.
    fn ms(&self, point: &Point) -> f64 {
        let gain: f64 = point
            .iter()
            .map(|(k, v)| self.hints[k][v] / self.hints[k][&self.seed[k]])
            .product();
        310.0 / gain
    }

    fn timing(&mut self, role: Role, ms: f64) -> ContenderTiming {
        let samples = (0..6)
            .map(|i| {
                self.calls += 1;
                ms * (1.0 + 0.004 * (((self.calls * 7 + i) % 5) as f64 - 2.0))
            })
            .collect();
        ContenderTiming {
            role,
            label: format!("{role}"),
            stats: TimingStats::from_samples(samples, 1),
        }
    }
}

impl Evaluator for Landscape {
    fn evaluate(
        &mut self,
        _task: &Task,
        candidate: &Source,
        contenders: Contenders<'_>,
        _options: &EvalOptions,
    ) -> Result<Evaluation, EvalError> {
        let mut workloads = Vec::new();
        for (name, factor) in [("n4096", 1.0), ("n4096_causal", 0.55)] {
            let mut timings = vec![
                self.timing(Role::Candidate, factor * self.ms(&self.point(candidate))),
                self.timing(Role::Baseline, factor * 0.47),
            ];
            if let Some(p) = contenders.parent {
                let t = self.timing(Role::Parent, factor * self.ms(&self.point(p)));
                timings.push(t);
            }
            if let Some(i) = contenders.incumbent {
                let t = self.timing(Role::Incumbent, factor * self.ms(&self.point(i)));
                timings.push(t);
            }
            workloads.push(WorkloadReport {
                name: name.into(),
                status: Status::Passed,
                message: None,
                errors: None,
                timings,
            });
        }
        let result = EvaluateResult {
            id: 1,
            status: Status::Passed,
            message: "timed by the landscape".into(),
            compile: None,
            workloads,
            phases: Phases::default(),
            output: CapturedOutput::default(),
            sandbox: None,
            described: Vec::new(),
        };
        Ok(Evaluation {
            speedup: speedup_over(&result, Role::Baseline),
            speedup_vs_parent: speedup_over(&result, Role::Parent),
            baseline: "mx.fast.scaled_dot_product_attention".into(),
            result,
            wall_s: 1.0,
            load: None,
            caveats: Vec::new(),
        })
    }
}

/// Where every tactic gains what the space's hints say, 60 rounds from the naive seed reach the
/// landscape's optimum, or come within the smallest hint of it: the warpgroup kernel, swizzled,
/// its softmax overlapped, with every large tactic stacked. (What the tactics gain on a GPU is
/// for the GPU to say; this is the search's part: that it goes deep enough, not wide, and tries
/// the sizes a step moved.)
#[test]
fn sixty_rounds_reach_the_deepest_attention_point_when_every_tactic_gains_its_hint() {
    let task = ksearch_tasks::load_builtin("mlx/attention").unwrap();
    let hw = ksearch_eval::knowledge().hardware("h200").unwrap().clone();
    let proposer = BuiltinProposer::for_task(&task, machine::generic(), Some(&hw)).unwrap();
    let mut landscape = Landscape::new(&task);
    let dir = tempfile::tempdir().unwrap();
    let config = RunConfig {
        format: RUN_FORMAT,
        ksearch_version: "test".into(),
        proposer: "builtin".into(),
        llm: None,
        seed: 0,
        window: 5,
        max_cycle_attempts: 15,
        eval: EvalSettings {
            workloads: vec!["n4096".into(), "n4096_causal".into()],
            timing: Some(TimingPlan {
                warmup_ms: 20.0,
                min_runs: 5,
                min_time_ms: 50.0,
                max_time_ms: 3000.0,
                target_sample_ms: 10.0,
                rotate_bytes: 4 << 20,
            }),
            hardware: Some("h200".into()),
            ..EvalSettings::default()
        },
        created_unix: 0,
        machine: "landscape".into(),
        host_cpu: None,
    };
    let mut observer = Silent;
    let parts = Parts {
        proposer: Box::new(proposer),
        evaluator: &mut landscape,
        observer: &mut observer,
        stop: Arc::new(AtomicBool::new(false)),
    };
    let budget = Budget {
        rounds: Some(60),
        until: None,
    };
    let mut engine =
        Engine::create(&dir.path().join("run"), task.clone(), config, budget, parts).unwrap();
    let summary = engine.run().unwrap();
    assert_eq!(summary.rounds, 60);
    let tree = engine.tree();
    let best = tree.best();
    let source = best.solution.as_ref().unwrap();
    let text = std::fs::read_to_string(dir.path().join("run/artifacts").join(&source.source_hash))
        .unwrap_or_default();
    let point = Landscape::new(&task).point(&Source {
        file: "best.py".into(),
        text,
    });
    let path: Vec<String> = tree
        .path(best.id)
        .iter()
        .map(|id| tree.get(*id).unwrap().action.title.clone())
        .collect();
    // A switch whose repair moved a size tries that size's neighbours in its improve rounds:
    // the step to warpgroup products, which moved 2 warps to 4, tries 8 (the note says what
    // changed from the cycle's best, where the improve round starts).
    let snap = ksearch_store::RunStore::open(&dir.path().join("run"))
        .unwrap()
        .snapshot()
        .unwrap();
    let wgmma_nodes: Vec<ksearch_core::tree::NodeId> = snap
        .attempts
        .iter()
        .filter(|a| a.note.starts_with("implement: `wgmma`") && a.note.contains("with 4 warps"))
        .map(|a| a.node)
        .collect();
    assert!(
        snap.attempts.iter().any(|a| wgmma_nodes.contains(&a.node)
            && a.note.starts_with("improve: `warps` 4 warps → 8 warps")),
        "{wgmma_nodes:?}"
    );
    // An improve round's note names the change from where it starts, the cycle's best: never a
    // knob set to the value it had (the notes once read "`rows` 16 rows a warp → 16 rows a warp"
    // for a neighbour of 32 rows, taken from the parent's point).
    for a in snap
        .attempts
        .iter()
        .filter(|a| a.note.starts_with("improve: `"))
    {
        let change = a.note.split('\n').next().unwrap();
        let (from, to) = change
            .split_once("` ")
            .and_then(|(_, rest)| rest.split_once(" → "))
            .unwrap_or_else(|| panic!("{change}"));
        let to = to.split(", with").next().unwrap();
        assert_ne!(from, to, "{change}");
    }
    // The optimum by the hints: every switch on, 4 warps and 64-key tiles (their best hints),
    // 16 rows a warp (the warpgroup products' constraint); a point the space allows.
    let optimum: Point = [
        ("mma", 1),
        ("wgmma", 1),
        ("swizzle", 1),
        ("pipeline", 1),
        ("cp_async", 1),
        ("ldmatrix", 1),
        ("vload", 1),
        ("exp2", 1),
        ("skip", 1),
        ("rows", 16),
        ("warps", 4),
        ("block_n", 64),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect();
    let space = ksearch_engine::builtin::space::FileSpace::new(
        &task.spec,
        task.space.as_ref().unwrap(),
        Some(&hw),
    )
    .unwrap();
    space.check_point(&optimum).unwrap();
    let landscape = Landscape::new(&task);
    for (k, v) in [("mma", 1), ("wgmma", 1), ("swizzle", 1), ("pipeline", 1)] {
        assert_eq!(
            point.get(k),
            Some(&v),
            "{k} in {point:?}\n{}",
            path.join("\n")
        );
    }
    let off = landscape.ms(&point) / landscape.ms(&optimum);
    assert!(
        off <= 1.051,
        "{off:.3}x the optimum's time: {point:?}\n{}",
        path.join("\n")
    );
}

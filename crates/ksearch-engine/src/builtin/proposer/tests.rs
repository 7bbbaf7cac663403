//! The builtin proposer never hands the engine a source the run has already measured.

use ksearch_core::protocol::{EvaluateResult, Phases, Status};
use ksearch_core::record::{AttemptKind, AttemptRecord, Evaluation};
use ksearch_core::task::{Source, Task};
use ksearch_core::tree::{Gate, NodeId, ROOT, Solution, Tree};
use ksearch_core::tree_edit::insert_initial;

use super::BuiltinProposer;
use crate::builtin::machine;
use crate::proposer::{GenerateRequest, ProposeContext, Proposer};

fn softmax() -> Task {
    let spec = ksearch_core::parse_task(
        include_str!("../../../../../tasks/cpu/softmax/task.toml"),
        "task.toml",
    )
    .expect("the softmax task parses");
    let source = |file: &str| Source {
        file: file.into(),
        text: String::new(),
    };
    Task {
        id: "cpu/softmax".into(),
        spec,
        reference: source("reference.c"),
        seed: source("seed.c"),
        baseline: None,
        comparisons: Vec::new(),
        space: None,
        worker: None,
    }
}

fn measured(round: u64, node: NodeId, source_hash: String) -> AttemptRecord {
    AttemptRecord {
        round,
        node,
        cycle: round,
        kind: if round == 0 {
            AttemptKind::Seed
        } else {
            AttemptKind::Implement
        },
        source_hash,
        source_file: "softmax.c".into(),
        note: String::new(),
        evaluation: Some(Evaluation {
            result: EvaluateResult {
                id: round,
                status: Status::Incorrect,
                message: String::new(),
                compile: None,
                workloads: Vec::new(),
                phases: Phases::default(),
                output: Default::default(),
                sandbox: None,
                described: Vec::new(),
            },
            speedup: None,
            speedup_vs_parent: None,
            baseline: "reference".into(),
            wall_s: 1.0,
            load: None,
            caveats: Vec::new(),
        }),
        improved: false,
        payload: serde_json::Value::Null,
    }
}

#[test]
fn a_source_already_measured_in_the_run_is_not_proposed_again() {
    let task = softmax();
    let mut p = BuiltinProposer::for_task(&task, machine::generic(), None).unwrap();
    let seed_text = p.family.render(&p.family.seed()).unwrap();
    let seed_hash = ksearch_store::content_hash(&seed_text);
    let mut tree = Tree::new(
        Vec::new(),
        Solution {
            round: 0,
            source_hash: seed_hash.clone(),
            source_file: "seed.c".into(),
            speedup: Some(1.0),
            speedup_vs_parent: None,
            vs_parent_interval: None,
            gate: Gate::Unmeasured,
            latency_ms: Default::default(),
            baseline_ms: Default::default(),
        },
    );
    let mut attempts = vec![measured(0, ROOT, seed_hash)];
    let model = p
        .init_world_model(&ProposeContext {
            task: &task,
            tree: &tree,
            attempts: &attempts,
            round: 1,
            seed: 0,
            best_code: None,
        })
        .unwrap();
    let ids = insert_initial(&mut tree, model.actions, 0).unwrap();
    let parent = Source {
        file: "seed.c".into(),
        text: seed_text,
    };
    let mut implement = |tree: &Tree, attempts: &[AttemptRecord], node| {
        p.generate(
            &ProposeContext {
                task: &task,
                tree,
                attempts,
                round: attempts.len() as u64,
                seed: 0,
                best_code: None,
            },
            &GenerateRequest {
                node,
                kind: AttemptKind::Implement,
                parent_source: &parent,
                previous: None,
                best: None,
                cycle_attempts: &[],
            },
        )
        .unwrap()
        .map(|c| ksearch_store::content_hash(&c.source.text))
    };
    let first = implement(&tree, &attempts, ids[0]).expect("the action is implemented");
    // Once that source is measured, implementing the action again (a new cycle on the same
    // node) proposes something else or nothing, never the same code.
    attempts.push(measured(1, ids[0], first.clone()));
    let again = implement(&tree, &attempts, ids[0]);
    assert_ne!(again.as_deref(), Some(first.as_str()));
}

/// A task with a template space, from the texts of its files (`templates`: name and text).
fn task_with_space(
    id: &str,
    task_toml: &str,
    space_toml: &str,
    templates: &[(&str, &str)],
) -> Task {
    let spec = ksearch_core::parse_task(task_toml, "task.toml").expect("the task parses");
    let source = |file: &str, text: &str| Source {
        file: file.into(),
        text: text.into(),
    };
    Task {
        id: id.into(),
        spec,
        reference: source("reference.py", ""),
        seed: source("seed.py", ""),
        baseline: None,
        comparisons: Vec::new(),
        space: Some(ksearch_core::space::TaskSpace {
            file: "space/space.toml".into(),
            spec: ksearch_core::space::parse_space(space_toml, "space.toml")
                .expect("the space parses"),
            templates: templates.iter().map(|(f, t)| source(f, t)).collect(),
        }),
        worker: None,
    }
}

/// An MLX task of this repository with its template space (module, CUDA and Metal templates, and
/// the other templates its space includes).
macro_rules! mlx_task_with_space {
    ($name:literal $(, $include:literal)*) => {
        task_with_space(
            concat!("mlx/", $name),
            include_str!(concat!("../../../../../tasks/mlx/", $name, "/task.toml")),
            include_str!(concat!(
                "../../../../../tasks/mlx/",
                $name,
                "/space/space.toml"
            )),
            &[
                (
                    "module.py.j2",
                    include_str!(concat!(
                        "../../../../../tasks/mlx/",
                        $name,
                        "/space/module.py.j2"
                    )),
                ),
                (
                    "cuda.cu.j2",
                    include_str!(concat!(
                        "../../../../../tasks/mlx/",
                        $name,
                        "/space/cuda.cu.j2"
                    )),
                ),
                (
                    "metal.metal.j2",
                    include_str!(concat!(
                        "../../../../../tasks/mlx/",
                        $name,
                        "/space/metal.metal.j2"
                    )),
                ),
                $((
                    $include,
                    include_str!(concat!("../../../../../tasks/mlx/", $name, "/space/", $include)),
                ),)*
            ],
        )
    };
}

/// torch/gemm_bf16 with its Triton GEMM space, as the task directory holds them.
fn gemm_bf16() -> Task {
    task_with_space(
        "torch/gemm_bf16",
        include_str!("../../../../../tasks/torch/gemm_bf16/task.toml"),
        include_str!("../../../../../tasks/torch/gemm/space/space.toml"),
        &[(
            "kernel.py.j2",
            include_str!("../../../../../tasks/torch/gemm/space/kernel.py.j2"),
        )],
    )
}

#[test]
fn a_change_that_breaks_a_constraint_alone_comes_with_the_smallest_repair() {
    use crate::builtin::families::point_of;
    let task = gemm_bf16();
    let hw = ksearch_eval::knowledge().hardware("h200").unwrap().clone();
    let p = BuiltinProposer::for_task(&task, machine::generic(), Some(&hw)).unwrap();
    let from = point_of(&[
        ("block_m", 128),
        ("block_n", 128),
        ("block_k", 32),
        ("warps", 4),
        ("stages", 5),
        ("group_m", 1),
        ("tma", 0),
        ("persistent", 0),
    ]);
    let steps = p.steps(&task, &from, &Default::default(), &Default::default(), 0);
    // A 128x256 tile breaks "over 128x128 needs 8 warps" with 4: it is proposed with 8 warps
    // (one value away), not left out and not with a smaller tile of the other side.
    let wider = steps.iter().find(|s| s.knob == "block_n").unwrap();
    assert_eq!(wider.value, 256);
    assert_eq!(wider.point.get("warps"), Some(&8));
    assert_eq!(wider.point.get("block_m"), Some(&128));
    let node = p.new_node(&from, wider, &Default::default());
    assert_eq!(
        node.action.title,
        "output tile width: 256 columns, with 8 warps"
    );
    // From there, 64 per step breaks the shared-memory limit at 5 stages: 4 stages come with
    // it (cheaper by the cost model than a smaller tile, equally near).
    let deeper = p
        .repaired(
            &task,
            {
                let mut q = wider.point.clone();
                q.insert("block_k".into(), 64);
                q
            },
            "block_k",
        )
        .unwrap();
    assert_eq!(deeper.get("stages"), Some(&4));
    assert_eq!(deeper.get("block_n"), Some(&256));
    // A valid change is left as it is.
    assert_eq!(p.repaired(&task, from.clone(), "warps"), Some(from.clone()));
    // Where no single other knob repairs a change, two may: a 256x256 tile with 128 per step
    // breaks the accumulator's limit and the shared memory's, and only a smaller tile of both
    // sides (or one side, and fewer stages) meets them.
    let mut broken = from.clone();
    broken.insert("block_m".into(), 256);
    broken.insert("block_n".into(), 256);
    broken.insert("block_k".into(), 128);
    let two = p.repaired(&task, broken.clone(), "block_k").unwrap();
    let changed: Vec<_> = broken
        .iter()
        .filter(|(k, v)| two.get(*k) != Some(*v))
        .map(|(k, _)| k.as_str())
        .collect();
    assert_eq!(changed.len(), 2, "{two:?}");
    assert!(!changed.contains(&"block_k"), "{two:?}");
    // One that needs three is not proposed: the persistent kernel also needs TMA loads.
    let mut hopeless = broken;
    hopeless.insert("persistent".into(), 1);
    assert_eq!(p.repaired(&task, hopeless, "block_k"), None);
}

/// mlx/attention with its template space.
fn attention() -> Task {
    mlx_task_with_space!("attention", "cuda_wgmma.cu.j2", "cuda_pipelined.cu.j2")
}

#[test]
fn warpgroup_products_are_proposed_with_the_two_knobs_they_need() {
    use crate::builtin::families::point_of;
    let task = attention();
    let hw = ksearch_eval::knowledge().hardware("h200").unwrap().clone();
    let p = BuiltinProposer::for_task(&task, machine::generic(), Some(&hw)).unwrap();
    // The best point of an earlier search: tensor cores with two row tiles a warp, 2 warps,
    // stored before the space gained `pipeline` and `swizzle` (which take their seed values).
    let from = point_of(&[
        ("mma", 1),
        ("warps", 2),
        ("block_n", 32),
        ("exp2", 0),
        ("skip", 1),
        ("cp_async", 1),
        ("vload", 0),
        ("ldmatrix", 1),
        ("rows", 32),
        ("wgmma", 0),
    ]);
    let steps = p.steps(&task, &from, &Default::default(), &Default::default(), 0);
    let step = steps.iter().find(|s| s.knob == "wgmma").unwrap();
    assert_eq!(step.value, 1);
    assert_eq!(step.point.get("rows"), Some(&16));
    assert_eq!(step.point.get("warps"), Some(&4));
    assert_eq!(
        p.new_node(&from, step, &Default::default()).action.title,
        "warpgroup products: warpgroup products (wgmma), with 16 rows a warp, with 4 warps"
    );
    // The step lands on the swizzled layout, the seed's value of `swizzle`, which the point
    // stored before the knob existed takes.
    assert_eq!(step.point.get("swizzle"), Some(&1));
    // From there, the overlapped softmax (which needs wgmma, and nothing else) is one knob away
    // and comes first; the unswizzled layout is one knob away too, predicted slower.
    let next = p.steps(
        &task,
        &step.point,
        &Default::default(),
        &Default::default(),
        0,
    );
    for (knob, value) in [("pipeline", 1), ("swizzle", 0)] {
        let s = next.iter().find(|s| s.knob == knob).unwrap();
        assert_eq!(s.value, value);
        let changed: Vec<&String> = s
            .point
            .iter()
            .filter(|(k, v)| step.point.get(*k) != Some(*v))
            .map(|(k, _)| k)
            .collect();
        assert_eq!(changed, [knob], "{next:?}");
    }
    assert_eq!(next[0].knob, "pipeline", "{next:?}");
    let unswizzled = next.iter().find(|s| s.knob == "swizzle").unwrap();
    assert!(unswizzled.predicted < 1.0, "{unswizzled:?}");
}

/// mlx/selective_scan with its template space, which predicts from its values' hints alone.
fn selective_scan() -> Task {
    mlx_task_with_space!("selective_scan")
}

#[test]
fn a_space_s_hints_rank_its_first_steps() {
    let task = selective_scan();
    let hw = ksearch_eval::knowledge().hardware("h200").unwrap().clone();
    let p = BuiltinProposer::for_task(&task, machine::generic(), Some(&hw)).unwrap();
    let from = p.family.seed();
    let steps = p.steps(&task, &from, &Default::default(), &Default::default(), 0);
    let predicted: Vec<(&str, i64, f64)> = steps
        .iter()
        .map(|s| (s.knob.as_str(), s.value, s.predicted))
        .collect();
    // The hints are speedups over the seed's values: 64 chunks (7×) first; then 16 steps
    // loaded at once (3×), which needs 4 threads a channel to fit its registers and comes with
    // them (2× more); 4 threads a channel alone (2×), prefetching (1.2×), exp2 (1.05×); block
    // sizes, which declare no hint, last.
    let close = |i: usize, x: f64| (predicted[i].2 - x).abs() < 1e-9;
    assert_eq!(
        (predicted[0].0, predicted[0].1),
        ("chunks", 64),
        "{predicted:?}"
    );
    assert!(close(0, 7.0), "{predicted:?}");
    assert_eq!(
        (predicted[1].0, predicted[1].1),
        ("tile", 16),
        "{predicted:?}"
    );
    assert_eq!(steps[1].point.get("tpc"), Some(&4));
    assert!(close(1, 6.0), "{predicted:?}");
    assert_eq!(
        (predicted[2].0, predicted[2].1),
        ("tpc", 4),
        "{predicted:?}"
    );
    assert!(close(2, 2.0), "{predicted:?}");
    assert_eq!(predicted[3].0, "prefetch", "{predicted:?}");
    assert!(close(3, 1.2), "{predicted:?}");
    assert_eq!(predicted.last().unwrap().0, "block", "{predicted:?}");
    assert!(close(predicted.len() - 1, 1.0), "{predicted:?}");
}

#[test]
fn a_tactic_that_gained_more_than_predicted_is_not_expected_to_gain_when_undone() {
    use super::{Correction, effect_log};

    let task = selective_scan();
    let hw = ksearch_eval::knowledge().hardware("h200").unwrap().clone();
    let p = BuiltinProposer::for_task(&task, machine::generic(), Some(&hw)).unwrap();
    // Prefetching (hint 1.2×) measured 4× over its parent: it is 3.33× as strong as modelled.
    let learned = effect_log(1.2, 4.0);
    assert!((learned - (4.0f64 / 1.2).ln()).abs() < 1e-12);
    let corr = [(
        "prefetch".to_owned(),
        Correction {
            factor: learned.exp(),
            n: 1,
            ..Correction::default()
        },
    )]
    .into();
    let step_of = |from: &super::Point| {
        p.steps(&task, from, &Default::default(), &corr, 0)
            .into_iter()
            .find(|s| s.knob == "prefetch")
            .expect("a prefetch step")
    };
    // Taken from the seed, the step is predicted at 1.2 × 3.33 = 4×.
    let on = step_of(&p.family.seed());
    assert!((on.model_speedup - 1.2).abs() < 1e-9);
    assert!((on.predicted - 4.0).abs() < 1e-9, "{}", on.predicted);
    // Undone, from the point that has it, the model's loss (1/1.2) is 3.33× deeper: 0.25×,
    // not the 2.78× gain that multiplying every prediction by the factor made of it.
    let undo = step_of(&on.point);
    assert!((undo.model_speedup - 1.0 / 1.2).abs() < 1e-9);
    assert!((undo.predicted - 0.25).abs() < 1e-9, "{}", undo.predicted);
    // A predicted loss measured as a smaller one is a weaker effect, whichever way it is read.
    assert!(effect_log(0.5, 0.8) < 0.0);
    assert!(effect_log(2.0, 1.25) < 0.0);
    assert!(effect_log(0.5, 0.25) > 0.0);
}

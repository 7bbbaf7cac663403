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
        include_str!("../../../../tasks/cpu/softmax/task.toml"),
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

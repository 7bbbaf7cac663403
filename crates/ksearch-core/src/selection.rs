//! Which open action to work on next.
//!
//! K-Search ranks executable actions by score alone. ksearch uses all it knows about an action,
//! multiplying:
//!
//! ```text
//! value = score                                   the proposer's estimate of the action's worth
//!       × (0.5 + 0.5 × confidence)                an unsure estimate counts for less
//!       × (1.15 − 0.15 × difficulty)              1.0 at difficulty 1 … 0.4 at difficulty 5
//!       × sqrt(parent speedup / best speedup)     build on good code (1 when unmeasured)
//!       × (1 + 0.05 × min(depth − 1, 4))          mild preference for refining a line further
//!       × 0.5 ^ failed cycles                     each cycle that passed nothing halves it
//! ```
//!
//! Only executable actions are candidates (open, with the root or a closed node as parent), and
//! of those only the ones fewer than [`MAX_FAILED_CYCLES`] cycles have failed on. Ties go to
//! the lower node id, so the choice is deterministic.

use crate::tree::{Node, NodeId, Tree};

/// The value of working on `node` now (see the module docs). 0 for nodes that are not
/// executable.
pub fn priority(tree: &Tree, node: &Node) -> f64 {
    if !tree.is_executable(node.id) {
        return 0.0;
    }
    let a = &node.action;
    let confidence = 0.5 + 0.5 * node.confidence.clamp(0.0, 1.0);
    let difficulty = 1.15 - 0.15 * f64::from(a.difficulty.clamp(1, 5));
    let parent_quality = parent_quality(tree, node);
    let depth = tree.depth(node.id).saturating_sub(1).min(4) as f64;
    let failures = 0.5f64.powi(node.failed_cycles.min(30) as i32);
    a.score.clamp(0.0, 1.0)
        * confidence
        * difficulty
        * parent_quality.sqrt()
        * (1.0 + 0.05 * depth)
        * failures
}

/// The parent's speedup over the baseline relative to the best node's, in (0, 1].
fn parent_quality(tree: &Tree, node: &Node) -> f64 {
    let speedup = |n: &Node| n.solution.as_ref().and_then(|s| s.speedup);
    let parent = node.parent.and_then(|p| tree.get(p)).and_then(speedup);
    match (parent, speedup(tree.best())) {
        (Some(p), Some(b)) if p > 0.0 && b > 0.0 => (p / b).clamp(1e-3, 1.0),
        _ => 1.0,
    }
}

/// Executable nodes, best first, with their values.
pub fn ranked(tree: &Tree) -> Vec<(NodeId, f64)> {
    let mut v: Vec<(NodeId, f64)> = tree
        .executable()
        .map(|n| (n.id, priority(tree, n)))
        .collect();
    v.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    v
}

/// Cycles that pass nothing before a node is no longer selected.
pub const MAX_FAILED_CYCLES: u32 = 3;

/// The next node to work on: the best ranked executable one that has not failed
/// [`MAX_FAILED_CYCLES`] cycles. The engine's choice.
pub fn select(tree: &Tree) -> Option<NodeId> {
    ranked(tree)
        .into_iter()
        .find(|(id, _)| {
            tree.get(*id)
                .is_some_and(|n| n.failed_cycles < MAX_FAILED_CYCLES)
        })
        .map(|(id, _)| id)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tree::{Action, Gate, Impacts, NewNode, ROOT, Solution};
    use crate::tree_edit::{EditOp, EditScript, apply};

    fn sol(speedup: f64) -> Solution {
        Solution {
            round: 1,
            source_hash: "h".into(),
            source_file: "x.c".into(),
            speedup: Some(speedup),
            speedup_vs_parent: None,
            vs_parent_interval: None,
            gate: Gate::Better,
            latency_ms: Default::default(),
            baseline_ms: Default::default(),
        }
    }

    fn node(title: &str, difficulty: u8, score: f64, confidence: f64) -> NewNode {
        NewNode {
            decision: title.into(),
            action: Action {
                title: title.into(),
                description: String::new(),
                difficulty,
                score,
                expected_speedup: 1.2,
                rationale: String::new(),
            },
            rating: 5.0,
            confidence,
            impacts: Impacts::default(),
            payload: serde_json::Value::Null,
        }
    }

    fn tree_with(nodes: &[(NodeId, NewNode)]) -> Tree {
        let mut t = Tree::new(vec![], sol(1.0));
        for chunk in nodes.chunks(3) {
            let ops = chunk
                .iter()
                .map(|(p, n)| EditOp::Insert {
                    parent: *p,
                    node: n.clone(),
                })
                .collect();
            apply(&mut t, &EditScript { ops }, 1).unwrap();
        }
        t
    }

    #[test]
    fn higher_score_wins_other_things_equal() {
        let t = tree_with(&[
            (ROOT, node("low", 2, 0.3, 0.5)),
            (ROOT, node("high", 2, 0.8, 0.5)),
        ]);
        assert_eq!(select(&t), Some(2));
    }

    #[test]
    fn confidence_and_difficulty_weigh_in() {
        // Same score: the confident, easy action beats the unsure, hard one.
        let t = tree_with(&[
            (ROOT, node("unsure hard", 4, 0.6, 0.1)),
            (ROOT, node("sure easy", 1, 0.6, 0.9)),
        ]);
        assert_eq!(select(&t), Some(2));
        // A much higher score still beats a small confidence advantage.
        let t = tree_with(&[
            (ROOT, node("great but unsure", 2, 0.9, 0.3)),
            (ROOT, node("meh but sure", 2, 0.4, 0.9)),
        ]);
        assert_eq!(select(&t), Some(1));
    }

    #[test]
    fn ties_go_to_the_lower_id_and_only_executable_nodes_count() {
        let mut t = tree_with(&[
            (ROOT, node("a", 2, 0.5, 0.5)),
            (ROOT, node("b", 2, 0.5, 0.5)),
        ]);
        assert_eq!(select(&t), Some(1));
        // A child of an open node is not executable, however good.
        apply(
            &mut t,
            &EditScript {
                ops: vec![EditOp::Insert {
                    parent: 1,
                    node: node("under open", 1, 1.0, 1.0),
                }],
            },
            2,
        )
        .unwrap();
        assert_eq!(
            ranked(&t).iter().map(|r| r.0).collect::<Vec<_>>(),
            vec![1, 2]
        );
    }

    #[test]
    fn children_of_a_weak_parent_lose_to_children_of_the_best() {
        let mut t = tree_with(&[
            (ROOT, node("weak", 2, 0.5, 0.5)),
            (ROOT, node("strong", 2, 0.5, 0.5)),
        ]);
        t.attach(1, sol(1.1), 2);
        t.attach(2, sol(4.0), 3);
        apply(
            &mut t,
            &EditScript {
                ops: vec![
                    EditOp::Insert {
                        parent: 1,
                        node: node("after weak", 2, 0.7, 0.5),
                    },
                    EditOp::Insert {
                        parent: 2,
                        node: node("after strong", 2, 0.6, 0.5),
                    },
                ],
            },
            4,
        )
        .unwrap();
        assert_eq!(select(&t), Some(4), "{:?}", ranked(&t));
    }

    #[test]
    fn failed_cycles_halve_the_value() {
        let mut t = tree_with(&[
            (ROOT, node("failed once", 2, 0.8, 0.5)),
            (ROOT, node("fresh", 2, 0.5, 0.5)),
        ]);
        let before = priority(&t, t.get(1).unwrap());
        t.record_failed_cycle(1, 2);
        assert!((priority(&t, t.get(1).unwrap()) - before / 2.0).abs() < 1e-12);
        assert_eq!(select(&t), Some(2));
    }

    #[test]
    fn a_node_that_failed_too_often_is_not_selected_however_it_ranks() {
        let mut t = tree_with(&[(ROOT, node("only", 2, 0.9, 0.9))]);
        for round in 0..MAX_FAILED_CYCLES - 1 {
            t.record_failed_cycle(1, u64::from(round));
            assert_eq!(select(&t), Some(1));
        }
        t.record_failed_cycle(1, 9);
        assert_eq!(ranked(&t).len(), 1, "still executable and ranked");
        assert_eq!(select(&t), None, "but no longer selected");
    }
}

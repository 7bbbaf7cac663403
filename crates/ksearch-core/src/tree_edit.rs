//! Edit operations on the tree, validated as a whole script: either every op applies or none
//! does, and a rejection says which op broke which rule in words a proposer can act on.

use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::tree::{Action, Impacts, NewNode, NodeId, ROOT, Tree};

/// Most nodes one edit script may create.
pub const MAX_NEW_NODES: usize = 3;

/// Changes to an existing node; absent fields stay as they are.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeUpdate {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub difficulty: Option<u8>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub score: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected_speedup: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rationale: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rating: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confidence: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub impacts: Option<Impacts>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

impl NodeUpdate {
    fn touches_action(&self) -> bool {
        self.title.is_some()
            || self.description.is_some()
            || self.difficulty.is_some()
            || self.score.is_some()
            || self.expected_speedup.is_some()
            || self.rationale.is_some()
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum EditOp {
    /// Revise an existing node's estimates or action.
    Update { node: NodeId, changes: NodeUpdate },
    /// Add an action under `parent`.
    Insert { parent: NodeId, node: NewNode },
    /// Replace an open leaf by 2–3 smaller steps under the same parent.
    Split { node: NodeId, into: Vec<NewNode> },
    /// Remove an open leaf.
    Delete { node: NodeId },
}

impl EditOp {
    fn name(&self) -> &'static str {
        match self {
            EditOp::Update { .. } => "update",
            EditOp::Insert { .. } => "insert",
            EditOp::Split { .. } => "split",
            EditOp::Delete { .. } => "delete",
        }
    }

    fn new_nodes(&self) -> usize {
        match self {
            EditOp::Insert { .. } => 1,
            EditOp::Split { into, .. } => into.len(),
            EditOp::Update { .. } | EditOp::Delete { .. } => 0,
        }
    }
}

/// A proposer's revision of the tree.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct EditScript {
    pub ops: Vec<EditOp>,
}

#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{}{message}", match index { Some(i) => format!("edit op {i} ({op}): "), None => String::new() })]
pub struct EditError {
    /// Index of the offending op; `None` for a rule about the whole script.
    pub index: Option<usize>,
    pub op: String,
    pub message: String,
}

/// Check the numbers of an action and its estimates against their ranges.
pub fn check_numbers(action: &Action, rating: f64, confidence: f64) -> Result<(), String> {
    if action.title.trim().is_empty() {
        return Err("the action needs a title".into());
    }
    if !(1..=5).contains(&action.difficulty) {
        return Err(format!("difficulty must be 1–5, got {}", action.difficulty));
    }
    check_range("score", action.score, 0.0, 1.0)?;
    check_range("rating", rating, 0.0, 10.0)?;
    check_range("confidence", confidence, 0.0, 1.0)?;
    if !(action.expected_speedup.is_finite() && action.expected_speedup > 0.0) {
        return Err(format!(
            "expected_speedup must be a positive number, got {}",
            action.expected_speedup
        ));
    }
    Ok(())
}

fn check_range(name: &str, v: f64, lo: f64, hi: f64) -> Result<(), String> {
    if v.is_finite() && (lo..=hi).contains(&v) {
        Ok(())
    } else {
        Err(format!("{name} must be within {lo}–{hi}, got {v}"))
    }
}

fn check_impacts(impacts: &Impacts) -> Result<(), String> {
    for (axis, i) in [
        ("memory_bandwidth", &impacts.memory_bandwidth),
        ("register_pressure", &impacts.register_pressure),
        ("compute_fit", &impacts.compute_fit),
    ] {
        check_range(&format!("impacts.{axis}.rating"), i.rating, 0.0, 10.0)?;
    }
    Ok(())
}

fn check_new(n: &NewNode) -> Result<(), String> {
    check_numbers(&n.action, n.rating, n.confidence)?;
    check_impacts(&n.impacts)
}

/// Validate `script` against `tree` and apply it, all or nothing. Returns the new nodes' ids.
pub fn apply(tree: &mut Tree, script: &EditScript, round: u64) -> Result<Vec<NodeId>, EditError> {
    let total: usize = script.ops.iter().map(EditOp::new_nodes).sum();
    if total > MAX_NEW_NODES {
        return Err(EditError {
            index: None,
            op: String::new(),
            message: format!(
                "the script creates {total} nodes; at most {MAX_NEW_NODES} new nodes are allowed per edit"
            ),
        });
    }
    let mut work = tree.clone();
    let mut created = Vec::new();
    for (i, op) in script.ops.iter().enumerate() {
        let err = |message: String| EditError {
            index: Some(i),
            op: op.name().to_owned(),
            message,
        };
        match op {
            EditOp::Update { node, changes } => {
                let n = existing(&work, *node).map_err(err)?;
                if *node == ROOT {
                    return Err(err("the root is immutable".into()));
                }
                if !n.is_open() && changes.touches_action() {
                    return Err(err(format!(
                        "node {node} has an attached solution, so its action is fixed; update only rating, confidence, impacts or note, or insert a child"
                    )));
                }
                let mut updated = n.clone();
                let a = &mut updated.action;
                if let Some(v) = &changes.title {
                    a.title.clone_from(v);
                }
                if let Some(v) = &changes.description {
                    a.description.clone_from(v);
                }
                if let Some(v) = changes.difficulty {
                    a.difficulty = v;
                }
                if let Some(v) = changes.score {
                    a.score = v;
                }
                if let Some(v) = changes.expected_speedup {
                    a.expected_speedup = v;
                }
                if let Some(v) = &changes.rationale {
                    a.rationale.clone_from(v);
                }
                if let Some(v) = changes.rating {
                    updated.rating = v;
                }
                if let Some(v) = changes.confidence {
                    updated.confidence = v;
                }
                if let Some(v) = &changes.impacts {
                    updated.impacts = v.clone();
                }
                if let Some(v) = &changes.note {
                    updated.notes.push(v.clone());
                }
                check_numbers(&updated.action, updated.rating, updated.confidence).map_err(err)?;
                check_impacts(&updated.impacts).map_err(err)?;
                updated.updated_round = round;
                *work.get_mut(*node).expect("exists") = updated;
            }
            EditOp::Insert { parent, node } => {
                existing(&work, *parent).map_err(err)?;
                check_new(node).map_err(err)?;
                created.push(work.insert(*parent, node.clone(), round));
            }
            EditOp::Split { node, into } => {
                let parent = open_leaf(&work, *node).map_err(err)?;
                if !(2..=MAX_NEW_NODES).contains(&into.len()) {
                    return Err(err(format!(
                        "a split gives 2–{MAX_NEW_NODES} smaller steps, got {}",
                        into.len()
                    )));
                }
                for n in into {
                    check_new(n).map_err(err)?;
                }
                work.remove(*node);
                for n in into {
                    created.push(work.insert(parent, n.clone(), round));
                }
            }
            EditOp::Delete { node } => {
                open_leaf(&work, *node).map_err(err)?;
                work.remove(*node);
            }
        }
    }
    *tree = work;
    Ok(created)
}

fn existing(tree: &Tree, id: NodeId) -> Result<&crate::tree::Node, String> {
    tree.get(id).ok_or_else(|| format!("there is no node {id}"))
}

/// Check that `id` is an open leaf other than the root; returns its parent.
fn open_leaf(tree: &Tree, id: NodeId) -> Result<NodeId, String> {
    let n = existing(tree, id)?;
    if id == ROOT {
        return Err("the root is immutable".into());
    }
    if !n.is_open() {
        return Err(format!(
            "node {id} has an attached solution; only open nodes can be removed or split"
        ));
    }
    if tree.children(id).next().is_some() {
        return Err(format!(
            "node {id} has children; only leaves can be removed or split"
        ));
    }
    Ok(n.parent.expect("non-root nodes have a parent"))
}

/// Insert the initial world model's actions under the root. Not an edit: the count limit does
/// not apply, but every node's numbers are checked, all or nothing.
pub fn insert_initial(
    tree: &mut Tree,
    nodes: Vec<NewNode>,
    round: u64,
) -> Result<Vec<NodeId>, EditError> {
    for (i, n) in nodes.iter().enumerate() {
        check_new(n).map_err(|message| EditError {
            index: Some(i),
            op: "insert".into(),
            message,
        })?;
    }
    Ok(nodes
        .into_iter()
        .map(|n| tree.insert(ROOT, n, round))
        .collect())
}

/// The child inserted when a solved node is left without an open child of difficulty < 5.
pub fn fallback_child(tree: &Tree, solved: NodeId) -> NewNode {
    let title = tree
        .get(solved)
        .map_or_else(String::new, |n| n.action.title.clone());
    NewNode {
        decision: format!("keep refining `{title}`"),
        action: Action {
            title: format!("Tune the parameters of: {title}"),
            description: "Adjust the sizes and factors the previous change introduced (tile sizes, unroll and vector widths) to this machine.".into(),
            difficulty: 2,
            score: 0.3,
            expected_speedup: 1.05,
            rationale: "Inserted by the engine: every solved node keeps at least one open continuation.".into(),
        },
        rating: 3.0,
        confidence: 0.3,
        impacts: Impacts::default(),
        payload: serde_json::Value::Null,
    }
}

/// Whether `solved` has an open child with difficulty below 5.
pub fn has_continuation(tree: &Tree, solved: NodeId) -> bool {
    tree.children(solved)
        .any(|c| c.is_open() && c.action.difficulty < 5)
}

/// After a pass: make sure the solved node can be continued, inserting the fallback child when
/// the proposer left it none. Returns the fallback's id if one was inserted.
pub fn ensure_continuation(tree: &mut Tree, solved: NodeId, round: u64) -> Option<NodeId> {
    if has_continuation(tree, solved) {
        return None;
    }
    let child = fallback_child(tree, solved);
    Some(tree.insert(solved, child, round))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tree::{Gate, Solution};

    fn solution() -> Solution {
        Solution {
            round: 0,
            source_hash: "h".into(),
            source_file: "seed.c".into(),
            speedup: Some(1.0),
            speedup_vs_parent: None,
            vs_parent_interval: None,
            gate: Gate::Unmeasured,
            latency_ms: Default::default(),
            baseline_ms: Default::default(),
        }
    }

    pub(crate) fn new_node(title: &str, difficulty: u8, score: f64) -> NewNode {
        NewNode {
            decision: title.into(),
            action: Action {
                title: title.into(),
                description: String::new(),
                difficulty,
                score,
                expected_speedup: 1.5,
                rationale: String::new(),
            },
            rating: 5.0,
            confidence: 0.5,
            impacts: Impacts::default(),
            payload: serde_json::Value::Null,
        }
    }

    fn insert(parent: NodeId, title: &str) -> EditOp {
        EditOp::Insert {
            parent,
            node: new_node(title, 2, 0.5),
        }
    }

    /// root(0, closed) → a(1, closed) → c(3, open); root → b(2, open)
    fn tree() -> Tree {
        let mut t = Tree::new(vec![], solution());
        apply(
            &mut t,
            &EditScript {
                ops: vec![insert(ROOT, "a"), insert(ROOT, "b")],
            },
            1,
        )
        .unwrap();
        t.attach(1, solution(), 1);
        apply(
            &mut t,
            &EditScript {
                ops: vec![insert(1, "c")],
            },
            2,
        )
        .unwrap();
        t
    }

    fn rejected(t: &mut Tree, ops: Vec<EditOp>) -> EditError {
        let before = t.clone();
        let e = apply(t, &EditScript { ops }, 9).expect_err("must be rejected");
        assert_eq!(*t, before, "a rejected script changes nothing");
        e
    }

    #[test]
    fn valid_ops_apply() {
        let mut t = tree();
        assert!(t.is_executable(2) && t.is_executable(3));
        let ids = apply(
            &mut t,
            &EditScript {
                ops: vec![
                    EditOp::Update {
                        node: 2,
                        changes: NodeUpdate {
                            score: Some(0.9),
                            note: Some("promising".into()),
                            ..Default::default()
                        },
                    },
                    EditOp::Split {
                        node: 3,
                        into: vec![new_node("c1", 1, 0.4), new_node("c2", 2, 0.4)],
                    },
                    EditOp::Delete { node: 2 },
                ],
            },
            5,
        )
        .unwrap();
        assert_eq!(ids, vec![4, 5]);
        assert!(t.get(3).is_none() && t.get(2).is_none());
        assert_eq!(t.get(4).unwrap().parent, Some(1));
    }

    #[test]
    fn more_than_three_new_nodes_is_rejected() {
        let mut t = tree();
        let e = rejected(
            &mut t,
            vec![
                insert(1, "x"),
                insert(1, "y"),
                EditOp::Split {
                    node: 2,
                    into: vec![new_node("p", 1, 0.1), new_node("q", 1, 0.1)],
                },
            ],
        );
        assert!(e.message.contains("at most 3 new nodes"), "{e}");
        assert_eq!(e.index, None);
    }

    #[test]
    fn the_root_is_immutable() {
        let mut t = tree();
        let e = rejected(
            &mut t,
            vec![EditOp::Update {
                node: ROOT,
                changes: NodeUpdate {
                    rating: Some(1.0),
                    ..Default::default()
                },
            }],
        );
        assert_eq!(e.to_string(), "edit op 0 (update): the root is immutable");
        let e = rejected(&mut t, vec![EditOp::Delete { node: ROOT }]);
        assert!(e.message.contains("root is immutable"), "{e}");
    }

    #[test]
    fn attached_solutions_fix_the_action() {
        let mut t = tree();
        let e = rejected(
            &mut t,
            vec![
                insert(2, "ok"),
                EditOp::Update {
                    node: 1,
                    changes: NodeUpdate {
                        title: Some("new".into()),
                        ..Default::default()
                    },
                },
            ],
        );
        assert_eq!(e.index, Some(1));
        assert!(e.message.contains("attached solution"), "{e}");
        // Estimates of a closed node may still be revised.
        apply(
            &mut t,
            &EditScript {
                ops: vec![EditOp::Update {
                    node: 1,
                    changes: NodeUpdate {
                        confidence: Some(0.9),
                        ..Default::default()
                    },
                }],
            },
            3,
        )
        .unwrap();
    }

    #[test]
    fn only_open_leaves_can_be_deleted_or_split() {
        let mut t = tree();
        let e = rejected(&mut t, vec![EditOp::Delete { node: 1 }]);
        assert!(e.message.contains("attached solution"), "{e}");
        apply(
            &mut t,
            &EditScript {
                ops: vec![insert(2, "under b")],
            },
            3,
        )
        .unwrap();
        let e = rejected(&mut t, vec![EditOp::Delete { node: 2 }]);
        assert!(e.message.contains("has children"), "{e}");
        let e = rejected(
            &mut t,
            vec![EditOp::Split {
                node: 3,
                into: vec![new_node("only one", 1, 0.1)],
            }],
        );
        assert!(e.message.contains("2–3 smaller steps"), "{e}");
        let e = rejected(&mut t, vec![EditOp::Delete { node: 77 }]);
        assert!(e.message.contains("no node 77"), "{e}");
    }

    #[test]
    fn numbers_out_of_range_are_rejected() {
        let mut t = tree();
        for (node, message) in [
            (new_node("d", 6, 0.5), "difficulty must be 1–5"),
            (new_node("s", 2, 1.5), "score must be within"),
            (
                NewNode {
                    confidence: -0.1,
                    ..new_node("c", 2, 0.5)
                },
                "confidence",
            ),
            (
                NewNode {
                    rating: 11.0,
                    ..new_node("r", 2, 0.5)
                },
                "rating",
            ),
            (new_node("", 2, 0.5), "needs a title"),
        ] {
            let e = rejected(&mut t, vec![EditOp::Insert { parent: 1, node }]);
            assert!(e.message.contains(message), "{e}");
        }
        let mut bad = new_node("e", 2, 0.5);
        bad.action.expected_speedup = f64::NAN;
        assert!(
            rejected(
                &mut t,
                vec![EditOp::Insert {
                    parent: 1,
                    node: bad
                }]
            )
            .message
            .contains("expected_speedup")
        );
    }

    #[test]
    fn a_solved_node_without_continuation_gets_the_fallback() {
        let mut t = tree();
        // Node 1 has open child 3 (difficulty 2): nothing to add.
        assert_eq!(ensure_continuation(&mut t, 1, 4), None);
        apply(
            &mut t,
            &EditScript {
                ops: vec![
                    EditOp::Delete { node: 3 },
                    EditOp::Insert {
                        parent: 1,
                        node: new_node("too hard", 5, 0.9),
                    },
                ],
            },
            4,
        )
        .unwrap();
        let id = ensure_continuation(&mut t, 1, 4).expect("fallback inserted");
        let n = t.get(id).unwrap();
        assert_eq!(n.parent, Some(1));
        assert!(n.action.difficulty < 5 && n.action.title.starts_with("Tune the parameters of: a"));
        assert_eq!(ensure_continuation(&mut t, 1, 4), None, "once is enough");
    }

    #[test]
    fn scripts_round_trip_as_json() {
        let s = EditScript {
            ops: vec![
                insert(1, "x"),
                EditOp::Delete { node: 3 },
                EditOp::Update {
                    node: 2,
                    changes: NodeUpdate {
                        score: Some(0.2),
                        ..Default::default()
                    },
                },
            ],
        };
        let j = serde_json::to_string(&s).unwrap();
        assert!(j.contains("\"op\":\"insert\""), "{j}");
        assert_eq!(serde_json::from_str::<EditScript>(&j).unwrap(), s);
    }
}

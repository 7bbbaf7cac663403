//! The hypothesis tree (K-Search's world model): nodes are optimization actions; a node with an
//! attached solution is closed. Pure data and rules, no IO.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

pub type NodeId = u32;

/// The root's id. The root holds the task's seed kernel as its solution.
pub const ROOT: NodeId = 0;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Risk {
    #[default]
    Low,
    Medium,
    High,
}

impl Risk {
    pub const ALL: [Risk; 3] = [Risk::Low, Risk::Medium, Risk::High];

    /// The name as it is serialized.
    pub fn as_str(self) -> &'static str {
        match self {
            Risk::Low => "low",
            Risk::Medium => "medium",
            Risk::High => "high",
        }
    }
}

/// The expected effect of an action on one axis of performance.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct Impact {
    /// 0–10: how much the action is expected to help on this axis.
    pub rating: f64,
    pub risk: Risk,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub notes: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct Impacts {
    pub memory_bandwidth: Impact,
    pub register_pressure: Impact,
    /// Fit to the compute units and the hardware (vector width, FMA units, tensor cores, …).
    pub compute_fit: Impact,
}

/// What to try: one change.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Action {
    pub title: String,
    pub description: String,
    /// 1 (trivial) – 5 (very hard).
    pub difficulty: u8,
    /// 0–1: the proposer's estimate of the action's value.
    pub score: f64,
    /// Predicted speedup over the parent's solution.
    pub expected_speedup: f64,
    pub rationale: String,
}

/// How a solved node fares against its parent under the acceptance gate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Gate {
    /// Faster than the parent beyond the measured noise.
    Better,
    /// Not distinguishable from the parent.
    Same,
    /// Slower than the parent beyond the measured noise.
    Worse,
    /// No paired measurement (timing was off, or the node is the root).
    Unmeasured,
}

/// The best passing attempt of a node's cycle, attached when the cycle ends.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Solution {
    /// The attempt (round) that produced it.
    pub round: u64,
    /// Content hash of the source in the run's artifacts.
    pub source_hash: String,
    pub source_file: String,
    /// Over the task's baseline (geometric mean over workloads).
    pub speedup: Option<f64>,
    /// Over the parent's solution, measured paired in the same worker.
    pub speedup_vs_parent: Option<f64>,
    /// 95% bootstrap interval of `speedup_vs_parent`.
    pub vs_parent_interval: Option<(f64, f64)>,
    pub gate: Gate,
    /// Median latency per workload, in ms.
    pub latency_ms: BTreeMap<String, f64>,
}

/// One hypothesis in the tree.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Node {
    pub id: NodeId,
    pub parent: Option<NodeId>,
    /// The decision this node stands for, in the parent's terms ("tile the k loop").
    pub decision: String,
    pub action: Action,
    /// 0–10 overall rating.
    pub rating: f64,
    /// 0–1: how sure the proposer is of its estimates.
    pub confidence: f64,
    pub impacts: Impacts,
    pub solution: Option<Solution>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// Cycles on this node that ended with nothing passing.
    #[serde(default)]
    pub failed_cycles: u32,
    pub updated_round: u64,
    /// Proposer-private data (e.g. the builtin proposer's template configuration).
    #[serde(default, skip_serializing_if = "serde_json::Value::is_null")]
    pub payload: serde_json::Value,
}

impl Node {
    pub fn is_open(&self) -> bool {
        self.solution.is_none()
    }
}

/// A node as a proposer describes it, before the tree gives it an id.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NewNode {
    pub decision: String,
    pub action: Action,
    pub rating: f64,
    pub confidence: f64,
    #[serde(default)]
    pub impacts: Impacts,
    #[serde(default, skip_serializing_if = "serde_json::Value::is_null")]
    pub payload: serde_json::Value,
}

/// The tree: every node by id. Node ids are never reused.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Tree {
    nodes: BTreeMap<NodeId, Node>,
    next_id: NodeId,
}

impl Tree {
    /// A tree holding only the root, whose solution is the task's seed kernel.
    pub fn new(root_notes: Vec<String>, seed: Solution) -> Self {
        let root = Node {
            id: ROOT,
            parent: None,
            decision: "the task's seed kernel".into(),
            action: Action {
                title: "seed".into(),
                description: "The naive starting kernel of the task.".into(),
                difficulty: 1,
                score: 0.0,
                expected_speedup: 1.0,
                rationale: String::new(),
            },
            rating: 0.0,
            confidence: 1.0,
            impacts: Impacts::default(),
            solution: Some(seed),
            notes: root_notes,
            failed_cycles: 0,
            updated_round: 0,
            payload: serde_json::Value::Null,
        };
        Self {
            nodes: BTreeMap::from([(ROOT, root)]),
            next_id: ROOT + 1,
        }
    }

    /// Rebuild from stored nodes (ids as stored; the next id follows the largest ever used).
    pub fn from_nodes(nodes: Vec<Node>, next_id: NodeId) -> Self {
        let nodes: BTreeMap<NodeId, Node> = nodes.into_iter().map(|n| (n.id, n)).collect();
        let next_id = next_id.max(nodes.keys().next_back().map_or(0, |k| k + 1));
        Self { nodes, next_id }
    }

    pub fn next_id(&self) -> NodeId {
        self.next_id
    }

    pub fn get(&self, id: NodeId) -> Option<&Node> {
        self.nodes.get(&id)
    }

    pub(crate) fn get_mut(&mut self, id: NodeId) -> Option<&mut Node> {
        self.nodes.get_mut(&id)
    }

    pub fn root(&self) -> &Node {
        &self.nodes[&ROOT]
    }

    pub fn nodes(&self) -> impl Iterator<Item = &Node> {
        self.nodes.values()
    }

    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    pub fn children(&self, id: NodeId) -> impl Iterator<Item = &Node> {
        self.nodes.values().filter(move |n| n.parent == Some(id))
    }

    /// Whether the nodes form one tree under the root: the root is there without a parent,
    /// every other node's parent exists, and following parents from any node reaches the root.
    /// A stored run is checked with this when it is read back (a run directory may have been
    /// edited); what is wrong, naming the node, when it is not. An empty tree (a run whose
    /// seed is not measured yet) is well formed.
    pub fn check(&self) -> Result<(), String> {
        if self.nodes.is_empty() {
            return Ok(());
        }
        match self.nodes.get(&ROOT) {
            None => return Err(format!("the tree has no root (node {ROOT})")),
            Some(root) => {
                if let Some(p) = root.parent {
                    return Err(format!("the root (node {ROOT}) has a parent, node {p}"));
                }
            }
        }
        // Nodes known to reach the root; each walk stops at one, so all of it is linear.
        let mut reaches_root = std::collections::BTreeSet::from([ROOT]);
        for n in self.nodes.values() {
            let mut walked = Vec::new();
            let mut cur = n;
            while !reaches_root.contains(&cur.id) {
                let Some(p) = cur.parent else {
                    return Err(format!("node {} has no parent", cur.id));
                };
                let Some(parent) = self.nodes.get(&p) else {
                    return Err(format!(
                        "node {}'s parent, node {p}, does not exist",
                        cur.id
                    ));
                };
                walked.push(cur.id);
                if walked.len() > self.nodes.len() {
                    return Err(format!(
                        "node {}'s parents never reach the root: they form a cycle",
                        n.id
                    ));
                }
                cur = parent;
            }
            reaches_root.extend(walked);
        }
        Ok(())
    }

    /// How many parents up the root is. Bounded by the node count, so a tree that [`check`]
    /// would refuse never makes it loop.
    ///
    /// [`check`]: Tree::check
    pub fn depth(&self, id: NodeId) -> usize {
        self.path(id).len() - 1
    }

    /// Ids from the root down to `id` (at most one per node, however the parents are linked).
    pub fn path(&self, id: NodeId) -> Vec<NodeId> {
        let mut path = vec![id];
        let mut cur = self.get(id).and_then(|n| n.parent);
        while let Some(p) = cur {
            if path.len() > self.nodes.len() {
                break;
            }
            path.push(p);
            cur = self.get(p).and_then(|n| n.parent);
        }
        path.reverse();
        path
    }

    /// Open, and its parent is closed (the root is always closed): it can be implemented now,
    /// from the parent's code.
    pub fn is_executable(&self, id: NodeId) -> bool {
        let Some(n) = self.get(id) else { return false };
        n.is_open()
            && n.parent
                .and_then(|p| self.get(p))
                .is_some_and(|p| !p.is_open())
    }

    pub fn executable(&self) -> impl Iterator<Item = &Node> {
        self.nodes.values().filter(|n| self.is_executable(n.id))
    }

    /// The closed node with the highest speedup over the baseline (the root when none is
    /// measured better). Only nodes whose solution passed the acceptance gate against their
    /// parent, or the root, qualify: a node measured no better than its parent is not "best".
    pub fn best(&self) -> &Node {
        let score = |n: &Node| n.solution.as_ref().and_then(|s| s.speedup).unwrap_or(0.0);
        self.nodes
            .values()
            .filter(|n| {
                n.id == ROOT
                    || n.solution
                        .as_ref()
                        .is_some_and(|s| matches!(s.gate, Gate::Better | Gate::Unmeasured))
            })
            .fold(
                self.root(),
                |best, n| if score(n) > score(best) { n } else { best },
            )
    }

    /// Insert a new node under `parent`; the caller has validated it.
    pub(crate) fn insert(&mut self, parent: NodeId, new: NewNode, round: u64) -> NodeId {
        let id = self.next_id;
        self.next_id += 1;
        self.nodes.insert(
            id,
            Node {
                id,
                parent: Some(parent),
                decision: new.decision,
                action: new.action,
                rating: new.rating,
                confidence: new.confidence,
                impacts: new.impacts,
                solution: None,
                notes: Vec::new(),
                failed_cycles: 0,
                updated_round: round,
                payload: new.payload,
            },
        );
        id
    }

    pub(crate) fn remove(&mut self, id: NodeId) {
        self.nodes.remove(&id);
    }

    /// Attach a solution to an open node (closing it).
    pub fn attach(&mut self, id: NodeId, solution: Solution, round: u64) {
        if let Some(n) = self.nodes.get_mut(&id) {
            debug_assert!(n.solution.is_none(), "attached solutions are immutable");
            n.solution = Some(solution);
            n.updated_round = round;
        }
    }

    /// Record a cycle on `id` that ended with nothing passing.
    pub fn record_failed_cycle(&mut self, id: NodeId, round: u64) {
        if let Some(n) = self.nodes.get_mut(&id) {
            n.failed_cycles += 1;
            n.updated_round = round;
        }
    }

    /// Add a note to a node (engine observations: gate outcomes, failures).
    pub fn note(&mut self, id: NodeId, note: String, round: u64) {
        if let Some(n) = self.nodes.get_mut(&id) {
            n.notes.push(note);
            n.updated_round = round;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn risk_names_are_the_serialized_ones() {
        let names: Vec<&str> = Risk::ALL.iter().map(|r| r.as_str()).collect();
        assert_eq!(names, ["low", "medium", "high"]);
        for r in Risk::ALL {
            assert_eq!(
                serde_json::to_string(&r).unwrap(),
                format!("\"{}\"", r.as_str())
            );
        }
    }

    fn node(id: NodeId, parent: Option<NodeId>) -> Node {
        let seed = Solution {
            round: 0,
            source_hash: String::new(),
            source_file: "seed.c".into(),
            speedup: None,
            speedup_vs_parent: None,
            vs_parent_interval: None,
            gate: Gate::Unmeasured,
            latency_ms: BTreeMap::new(),
        };
        let mut n = Tree::new(Vec::new(), seed).root().clone();
        n.id = id;
        n.parent = parent;
        n
    }

    #[test]
    fn a_stored_tree_must_hang_from_its_root() {
        let tree = |nodes: &[(NodeId, Option<NodeId>)]| {
            Tree::from_nodes(nodes.iter().map(|&(i, p)| node(i, p)).collect(), 0)
        };
        let good = tree(&[(0, None), (1, Some(0)), (2, Some(1)), (3, Some(0))]);
        assert_eq!(good.check(), Ok(()));
        assert_eq!(good.path(2), [0, 1, 2]);
        assert_eq!(good.depth(2), 2);
        assert_eq!(tree(&[]).check(), Ok(()));
        for (nodes, wrong) in [
            (&[(1, Some(0))][..], "the tree has no root (node 0)"),
            (
                &[(0, Some(1)), (1, Some(0))],
                "the root (node 0) has a parent, node 1",
            ),
            (&[(0, None), (1, None)], "node 1 has no parent"),
            (
                &[(0, None), (1, Some(7))],
                "node 1's parent, node 7, does not exist",
            ),
            (
                &[(0, None), (1, Some(2)), (2, Some(1))],
                "node 1's parents never reach the root: they form a cycle",
            ),
            (
                &[(0, None), (1, Some(1))],
                "node 1's parents never reach the root: they form a cycle",
            ),
        ] {
            assert_eq!(tree(nodes).check(), Err(wrong.to_owned()), "{nodes:?}");
        }
    }

    #[test]
    fn depth_and_path_end_on_a_cycle_of_parents() {
        let t = Tree::from_nodes(vec![node(0, None), node(1, Some(2)), node(2, Some(1))], 0);
        assert!(t.path(1).len() <= t.len() + 1);
        assert!(t.depth(1) <= t.len());
    }
}

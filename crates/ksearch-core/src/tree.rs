//! The hypothesis tree (K-Search's world model): nodes are optimization actions; a node with an
//! attached solution is closed. Pure data and rules, no IO.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::score::geomean;
use crate::stats::quantile;

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
    /// The baseline's median latency per workload in the same evaluation, in ms (absent in
    /// runs stored before it was kept).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub baseline_ms: BTreeMap<String, f64>,
}

/// Baseline times a workload needs before its median stands for the baseline's typical time.
const TYPICAL_MIN: usize = 3;

/// The speedup a solution is ranked by: the lower of its own (over the baseline timed beside
/// it) and the geometric mean over its workloads of the baseline's `typical` time over its own.
/// A node is not crowned because the baseline happened to run slow in its evaluation (an H200
/// attention search once ranked first a node whose SDPA took 0.384 ms where 24 of the run's 27
/// evaluations measured 0.261–0.295 ms). The rule only ever lowers a rank: a node measured while
/// the whole machine ran slow is ranked by the typical time, which understates it.
pub fn ranking_speedup(s: &Solution, typical: &BTreeMap<String, f64>) -> Option<f64> {
    let own = s.speedup?;
    let ratios: Option<Vec<f64>> = s
        .latency_ms
        .iter()
        .map(|(w, ms)| {
            let base = typical.get(w)?;
            (*ms > 0.0 && *base > 0.0).then(|| base / ms)
        })
        .collect();
    match ratios {
        Some(r) if !r.is_empty() => Some(own.min(geomean(&r))),
        _ => Some(own),
    }
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
    /// measured better), ranked by [`Tree::rank`]. Only nodes whose solution passed the
    /// acceptance gate against their parent, or the root, qualify: a node measured no better
    /// than its parent is not "best".
    pub fn best(&self) -> &Node {
        let typical = self.typical_baseline_ms();
        self.nodes
            .values()
            .filter(|n| {
                n.id == ROOT
                    || n.solution
                        .as_ref()
                        .is_some_and(|s| matches!(s.gate, Gate::Better | Gate::Unmeasured))
            })
            .fold(self.root(), |best, n| {
                if self.rank_with(n.id, &typical) > self.rank_with(best.id, &typical) {
                    n
                } else {
                    best
                }
            })
    }

    /// The speedup over the baseline a node is ranked by: its [`ranking_speedup`], raised to
    /// at least its parent's rank times the low end of its paired interval against that parent
    /// where the gate found it better. Two evaluations' speedups over the baseline are two
    /// timings of the baseline, apart in time (on a loaded machine a child timed 1.7× faster
    /// than its parent beside it read 2.3× over a reference its parent read 2.8× over); the
    /// ratio timed side by side is the one measurement that compares the two, so a node the gate
    /// found better never ranks below its parent. A key to order nodes by, not a measurement:
    /// the speedups shown stay each node's own. 0 for a node without a speedup.
    pub fn rank(&self, id: NodeId) -> f64 {
        self.rank_with(id, &self.typical_baseline_ms())
    }

    fn rank_with(&self, id: NodeId, typical: &BTreeMap<String, f64>) -> f64 {
        let path = self.path(id);
        let mut rank = 0.0_f64;
        for n in path.iter().filter_map(|i| self.get(*i)) {
            let Some(s) = n.solution.as_ref() else {
                rank = 0.0;
                continue;
            };
            let own = ranking_speedup(s, typical).unwrap_or(0.0);
            let chained = match (s.gate, s.vs_parent_interval) {
                (Gate::Better, Some((lo, _))) if lo.is_finite() && lo > 1.0 => rank * lo,
                _ => 0.0,
            };
            rank = own.max(chained);
        }
        rank
    }

    /// A node's speedup over the seed: the product of the paired ratios against each parent
    /// timed beside it, from the root down, where every step has one; otherwise the ratio of
    /// its speedup over the baseline to the seed's (runs stored before the paired ratio was
    /// kept). `None` where neither is known, or for a ratio that is no finite number.
    pub fn vs_seed(&self, id: NodeId) -> Option<f64> {
        let path = self.path(id);
        let chained: Option<f64> = path
            .iter()
            .skip(1)
            .map(|i| self.get(*i)?.solution.as_ref()?.speedup_vs_parent)
            .product();
        let speedup = |i: NodeId| self.get(i)?.solution.as_ref()?.speedup;
        let ratio = if path.first() == Some(&ROOT) {
            chained.or_else(|| Some(speedup(id)? / speedup(ROOT)?))
        } else {
            None
        };
        ratio.filter(|r| r.is_finite() && *r > 0.0)
    }

    /// The baseline's typical time per workload: the median of its times beside every solution
    /// in the tree (the seed's and each solved node's), for workloads with at least
    /// `TYPICAL_MIN` of them.
    pub fn typical_baseline_ms(&self) -> BTreeMap<String, f64> {
        let mut times: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
        for s in self.nodes.values().filter_map(|n| n.solution.as_ref()) {
            for (w, ms) in &s.baseline_ms {
                times.entry(w).or_default().push(*ms);
            }
        }
        times
            .into_iter()
            .filter(|(_, v)| v.len() >= TYPICAL_MIN)
            .map(|(w, mut v)| {
                v.sort_by(f64::total_cmp);
                (w.to_string(), quantile(&v, 0.5))
            })
            .collect()
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
            baseline_ms: Default::default(),
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
    fn the_best_is_not_crowned_by_a_slow_baseline() {
        // Four evaluations of an H200 attention search (ms at n4096 and n4096 causal; the
        // baseline, SDPA, timed beside each). Node 1's SDPA ran slow on the causal workload
        // (0.384 ms where the others took 0.27): its own speedup, 0.504, is the highest.
        let solved = |id, gate, lat: [f64; 2], base: [f64; 2], keep_baseline: bool| {
            let mut n = node(id, Some(0));
            let names = ["n4096", "n4096_causal"];
            let speedup = ((base[0] / lat[0]) * (base[1] / lat[1])).sqrt();
            n.solution = Some(Solution {
                speedup: Some(speedup),
                gate,
                latency_ms: names.map(String::from).into_iter().zip(lat).collect(),
                baseline_ms: if keep_baseline {
                    names.map(String::from).into_iter().zip(base).collect()
                } else {
                    BTreeMap::new()
                },
                ..n.solution.clone().unwrap()
            });
            n
        };
        let tree = |keep: bool| {
            Tree::from_nodes(
                vec![
                    node(0, None),
                    solved(1, Gate::Better, [1.134, 0.613], [0.460, 0.384], keep),
                    solved(2, Gate::Better, [1.094, 0.561], [0.501, 0.267], keep),
                    solved(3, Gate::Better, [1.138, 0.591], [0.474, 0.268], keep),
                    solved(4, Gate::Worse, [1.134, 0.598], [0.491, 0.270], keep),
                ],
                5,
            )
        };
        let t = tree(true);
        let typical = t.typical_baseline_ms();
        assert!((typical["n4096"] - 0.4825).abs() < 1e-12);
        assert!((typical["n4096_causal"] - 0.269).abs() < 1e-12);
        assert_eq!(t.best().id, 2);
        let rank =
            |id| ranking_speedup(t.get(id).unwrap().solution.as_ref().unwrap(), &typical).unwrap();
        // Node 1 at the typical baseline: 0.432, below its own 0.504.
        assert!((rank(1) - 0.432).abs() < 1e-3, "{}", rank(1));
        // Node 2's own baseline ran a little slow on n4096 (0.501): the typical one ranks it.
        assert!((rank(2) - 0.460).abs() < 1e-3, "{}", rank(2));
        // Node 3's own speedup (0.435) is below the typical one's (0.439): its own counts.
        let own3 = t
            .get(3)
            .unwrap()
            .solution
            .as_ref()
            .unwrap()
            .speedup
            .unwrap();
        assert_eq!(rank(3), own3);
        // Runs stored without the baseline's times rank by each node's own speedup.
        let old = tree(false);
        assert!(old.typical_baseline_ms().is_empty());
        assert_eq!(old.best().id, 1);
        // Fewer than three evaluations of a workload's baseline do not make a typical time.
        let two = Tree::from_nodes(
            vec![
                node(0, None),
                solved(1, Gate::Better, [1.134, 0.613], [0.460, 0.384], true),
                solved(2, Gate::Better, [1.094, 0.561], [0.501, 0.267], true),
            ],
            3,
        );
        assert!(two.typical_baseline_ms().is_empty());
        assert_eq!(two.best().id, 1);
    }

    #[test]
    fn a_node_the_gate_found_better_than_its_parent_never_ranks_below_it() {
        // Seen on a loaded 2-core machine (cpu/softmax, a seed doing its work twice): the
        // child timed 1.68x its parent beside it, but the reference ran slower in the seed's
        // evaluation, so the seed read 2.76x over it and the child 2.31x.
        let solution = |speedup, gate, vs_parent: Option<(f64, (f64, f64))>| Solution {
            speedup: Some(speedup),
            gate,
            speedup_vs_parent: vs_parent.map(|v| v.0),
            vs_parent_interval: vs_parent.map(|v| v.1),
            ..node(0, None).solution.unwrap()
        };
        let with = |id, parent, s| Node {
            solution: Some(s),
            ..node(id, parent)
        };
        let tree = Tree::from_nodes(
            vec![
                with(0, None, solution(2.76, Gate::Unmeasured, None)),
                with(
                    1,
                    Some(0),
                    solution(2.31, Gate::Better, Some((1.68, (1.14, 3.25)))),
                ),
                // Better than node 1 beside it: ranks above node 1's chained rank.
                with(
                    2,
                    Some(1),
                    solution(2.0, Gate::Better, Some((1.1, (1.05, 1.2)))),
                ),
                // The same as its parent: its own speedup over the baseline alone.
                with(
                    3,
                    Some(0),
                    solution(2.9, Gate::Same, Some((1.02, (0.97, 1.08)))),
                ),
            ],
            4,
        );
        assert!(
            (tree.rank(1) - 2.76 * 1.14).abs() < 1e-9,
            "{}",
            tree.rank(1)
        );
        assert!((tree.rank(2) - 2.76 * 1.14 * 1.05).abs() < 1e-9);
        assert_eq!(tree.rank(3), 2.9);
        assert_eq!(tree.best().id, 2);
        assert!((tree.vs_seed(1).unwrap() - 1.68).abs() < 1e-12);
        assert!((tree.vs_seed(2).unwrap() - 1.68 * 1.1).abs() < 1e-12);
        assert_eq!(tree.vs_seed(0), Some(1.0));
        // A step with no paired ratio (a run stored before it was kept): the speedups' ratio.
        let mut old = tree.clone();
        old.nodes
            .get_mut(&1)
            .unwrap()
            .solution
            .as_mut()
            .unwrap()
            .speedup_vs_parent = None;
        assert!((old.vs_seed(2).unwrap() - 2.0 / 2.76).abs() < 1e-12);
    }

    #[test]
    fn depth_and_path_end_on_a_cycle_of_parents() {
        let t = Tree::from_nodes(vec![node(0, None), node(1, Some(2)), node(2, Some(1))], 0);
        assert!(t.path(1).len() <= t.len() + 1);
        assert!(t.depth(1) <= t.len());
    }
}

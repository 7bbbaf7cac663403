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

/// How a solved node compares with its parent under the acceptance gate.
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

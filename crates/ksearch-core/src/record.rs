//! What a run records: evaluations, attempts and cycles. Shared by the engine, the run store and
//! the reports; serialised as JSON in the store, so every change here is a format change.

use serde::{Deserialize, Serialize};

use crate::gate::PairedRatio;
use crate::protocol::{EvaluateResult, Role, Status};
use crate::score::Speedup;
use crate::tree::{Gate, NodeId, Solution};

/// An evaluation as the orchestrator saw it: the worker's result and the speedups derived.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Evaluation {
    pub result: EvaluateResult,
    /// Over the task's baseline (its reference when it names none).
    pub speedup: Option<Speedup>,
    pub speedup_vs_parent: Option<Speedup>,
    pub baseline: String,
    /// Wall time of the whole evaluation, seen from the orchestrator.
    pub wall_s: f64,
    /// The machine's load when it ended, where the platform says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load: Option<crate::caveats::HostLoad>,
    /// What makes its numbers less trustworthy than they look, in words
    /// ([`crate::caveats`]): a noisy spread, a busy machine, a weak baseline.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub caveats: Vec<String>,
}

impl Evaluation {
    /// What speedups are quoted against, with what the baseline said it ran where it described
    /// itself: `OpenBLAS cblas_sgemm (1 thread) [OpenBLAS 0.3.21 … Haswell; core Haswell]`.
    pub fn baseline_label(&self) -> String {
        baseline_label(&self.baseline, self.result.description_of(Role::Baseline))
    }
}

/// A baseline's name with its description, when it has one (see [`Evaluation::baseline_label`]).
pub fn baseline_label(name: &str, description: Option<&str>) -> String {
    match description {
        Some(d) => format!("{name} [{d}]"),
        None => name.to_owned(),
    }
}

/// Why an attempt was made.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AttemptKind {
    /// The seed kernel, measured once when the run starts (round 0).
    Seed,
    /// First attempt of a cycle: implement the node's action.
    Implement,
    /// Fix the previous attempt (nothing has passed yet in this cycle).
    Debug,
    /// Improve on the cycle's best (something has passed).
    Improve,
}

impl AttemptKind {
    pub const ALL: [AttemptKind; 4] = [
        AttemptKind::Seed,
        AttemptKind::Implement,
        AttemptKind::Debug,
        AttemptKind::Improve,
    ];

    /// The name as it is serialized.
    pub fn as_str(self) -> &'static str {
        match self {
            AttemptKind::Seed => "seed",
            AttemptKind::Implement => "implement",
            AttemptKind::Debug => "debug",
            AttemptKind::Improve => "improve",
        }
    }
}

/// One candidate generated and evaluated: a round.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AttemptRecord {
    pub round: u64,
    pub node: NodeId,
    pub cycle: u64,
    pub kind: AttemptKind,
    pub source_hash: String,
    pub source_file: String,
    /// What the proposer said it changed.
    pub note: String,
    /// `None` while the evaluation has not finished: such an attempt runs again on resume.
    pub evaluation: Option<Evaluation>,
    /// Whether it became the cycle's best: the cycle's first pass, or a pass timed paired
    /// against the previous best and better beyond noise.
    #[serde(default)]
    pub improved: bool,
    /// Proposer-private data about the candidate (e.g. the builtin proposer's configuration).
    #[serde(default, skip_serializing_if = "serde_json::Value::is_null")]
    pub payload: serde_json::Value,
}

impl AttemptRecord {
    pub fn status(&self) -> Option<Status> {
        self.evaluation.as_ref().map(|e| e.result.status)
    }

    pub fn speedup(&self) -> Option<f64> {
        self.evaluation
            .as_ref()?
            .speedup
            .as_ref()
            .map(|s| s.geomean)
    }
}

impl Solution {
    /// The solution `attempt` (evaluated as `eval`) makes of its node, judged against the
    /// parent by `vs_parent` ([`crate::gate::vs_parent`]).
    pub fn of(attempt: &AttemptRecord, eval: &Evaluation, vs_parent: Option<PairedRatio>) -> Self {
        Solution {
            round: attempt.round,
            source_hash: attempt.source_hash.clone(),
            source_file: attempt.source_file.clone(),
            speedup: eval.speedup.as_ref().map(|s| s.geomean),
            speedup_vs_parent: vs_parent.map(|c| c.ratio),
            vs_parent_interval: vs_parent.map(|c| c.interval),
            gate: vs_parent.map_or(Gate::Unmeasured, |c| c.verdict),
            latency_ms: eval.result.medians(Role::Candidate),
            baseline_ms: eval.result.medians(Role::Baseline),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CycleOutcome {
    /// Something passed; the best attempt was attached to the node.
    Passed,
    /// Nothing passed; the node went to too-hard handling.
    Failed,
}

/// Work on one node: attempts until the stagnation window closes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CycleRecord {
    pub id: u64,
    pub node: NodeId,
    pub started_round: u64,
    pub ended_round: Option<u64>,
    pub outcome: Option<CycleOutcome>,
    /// Round of the best passing attempt so far.
    pub best_round: Option<u64>,
    /// Attempts since the last improvement.
    pub stagnation: u32,
    pub attempts: u32,
}

/// Which of the two model roles made a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ModelRole {
    /// World model, refine, too-hard.
    Reasoning,
    /// Implement, debug, improve.
    Codegen,
}

/// Tokens of one call, as the provider reported them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenUsage {
    pub input: u64,
    pub output: u64,
    /// Part of `input` served from the provider's prompt cache.
    pub cached_input: u64,
    /// Part of `output` spent on hidden reasoning.
    pub reasoning: u64,
}

/// One model call in the run's journal: what was asked and what came back. Keyed by a hash of
/// the request, so a resumed or replayed run can answer the same request without paying again.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LlmCallRecord {
    /// Hex SHA-256 of the request (model and messages).
    pub key: String,
    pub role: ModelRole,
    /// e.g. `openai:gpt-5`.
    pub model: String,
    /// e.g. `world_model`, `implement`, `refine`, `repair`.
    pub purpose: String,
    /// The round the engine was at.
    pub round: u64,
    pub request: serde_json::Value,
    pub response: serde_json::Value,
    pub usage: TokenUsage,
    /// `None` when the model has no price in the table.
    pub cost_usd: Option<f64>,
    /// Answered from the journal rather than the network (free).
    pub replayed: bool,
    pub seconds: f64,
    /// A call of a round that never finished: its session ended on an error before the round
    /// was committed. Kept for what it cost and so that a resume reuses the answer instead of
    /// paying again; a replay, which goes on from the last commit as the resume did, skips it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub unfinished_round: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attempt_kind_names_are_the_serialized_ones() {
        let names: Vec<&str> = AttemptKind::ALL.iter().map(|k| k.as_str()).collect();
        assert_eq!(names, ["seed", "implement", "debug", "improve"]);
        for k in AttemptKind::ALL {
            assert_eq!(
                serde_json::to_string(&k).unwrap(),
                format!("\"{}\"", k.as_str())
            );
        }
    }
}

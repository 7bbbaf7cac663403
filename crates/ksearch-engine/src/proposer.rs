//! The port the engine asks for ideas and code. The builtin proposer (template search) and the
//! LLM proposer implement it; the engine never parses model text or renders templates itself.

use ksearch_core::gate::PairedRatio;
use ksearch_core::record::{AttemptKind, AttemptRecord, CycleRecord, Evaluation, LlmCallRecord};
use ksearch_core::task::{Source, Task};
use ksearch_core::tree::{NewNode, NodeId, Tree};
use ksearch_core::tree_edit::{EditError, EditScript, NodeUpdate};
use thiserror::Error;

#[derive(Debug, Error)]
pub enum ProposeError {
    /// The proposer has nothing for this task at all.
    #[error("the {proposer} proposer cannot work on task `{task}`: {reason}")]
    Unsupported {
        proposer: String,
        task: String,
        reason: String,
    },
    #[error("the {proposer} proposer failed: {message}")]
    Failed { proposer: String, message: String },
    /// The model gave nothing usable to `questions` questions in a row, each asked `asks` times
    /// (empty, cut off, or not in the asked format): the run stops rather than cycle on.
    #[error(
        "the model {model} gave no usable answer to {questions} questions in a row (each asked {asks} times); the last fault: {last}"
    )]
    Unusable {
        model: String,
        questions: u32,
        asks: u32,
        last: String,
    },
    /// A manual model's call waits for its answer: the run pauses, saved, until it is written.
    #[error(
        "paused: model call {call} waits for an answer: the prompt is {}, the answer goes in {}",
        prompt.display(),
        answer.display()
    )]
    Pending {
        call: u64,
        prompt: std::path::PathBuf,
        answer: std::path::PathBuf,
    },
    /// The next model call could take the run above `--max-cost`.
    #[error(
        "the next model call (up to ${next_usd:.4}) would take the run's spend of ${spent_usd:.4} above the cap of ${cap_usd:.2}"
    )]
    Budget {
        spent_usd: f64,
        next_usd: f64,
        cap_usd: f64,
    },
}

/// What every call sees: the task, the tree, and every attempt so far.
#[derive(Debug, Clone, Copy)]
pub struct ProposeContext<'a> {
    pub task: &'a Task,
    pub tree: &'a Tree,
    pub attempts: &'a [AttemptRecord],
    /// The round the next attempt will have.
    pub round: u64,
    /// The run's seed, for any randomness (same seed, same choices).
    pub seed: u64,
    /// Source of the tree's best node, when the call needs it (proposing new actions).
    pub best_code: Option<&'a str>,
}

impl ProposeContext<'_> {
    /// The attempt that produced a node's solution.
    pub fn solution_attempt(&self, node: NodeId) -> Option<&AttemptRecord> {
        let round = self.tree.get(node)?.solution.as_ref()?.round;
        self.attempts.iter().find(|a| a.round == round)
    }
}

/// The initial world model: notes on the task and the first open actions under the root.
#[derive(Debug, Clone, Default)]
pub struct WorldModel {
    pub notes: Vec<String>,
    pub actions: Vec<NewNode>,
}

/// A source with its evaluation, as fed back to the proposer.
#[derive(Debug, Clone, Copy)]
pub struct Evaluated<'a> {
    pub source: &'a Source,
    pub attempt: &'a AttemptRecord,
    pub evaluation: &'a Evaluation,
}

/// Ask for one candidate.
#[derive(Debug, Clone, Copy)]
pub struct GenerateRequest<'a> {
    pub node: NodeId,
    /// `Implement`: the node's action from the parent's code; `Debug`: fix `previous`;
    /// `Improve`: beat `best`.
    pub kind: AttemptKind,
    /// The parent's solution: the code the action starts from.
    pub parent_source: &'a Source,
    /// The latest attempt of this cycle.
    pub previous: Option<Evaluated<'a>>,
    /// The best passing attempt of this cycle.
    pub best: Option<Evaluated<'a>>,
    /// Every attempt of this cycle so far, oldest first.
    pub cycle_attempts: &'a [&'a AttemptRecord],
}

/// A generated candidate.
#[derive(Debug, Clone)]
pub struct Candidate {
    pub source: Source,
    /// What was changed, in a sentence.
    pub note: String,
    /// Proposer-private data kept with the attempt.
    pub payload: serde_json::Value,
}

/// What a finished cycle showed.
#[derive(Debug, Clone, Copy)]
pub struct CycleEvidence<'a> {
    pub node: NodeId,
    pub cycle: &'a CycleRecord,
    pub attempts: &'a [&'a AttemptRecord],
    /// The attempt attached to the node, if any passed.
    pub best: Option<&'a AttemptRecord>,
    /// The best attempt against the parent, under the acceptance gate.
    pub vs_parent: Option<PairedRatio>,
    /// Source of the best attempt.
    pub solution_code: Option<&'a str>,
}

impl TooHard {
    /// Keep the node with its score and confidence halved, and a note saying why.
    pub fn halved(node: &ksearch_core::tree::Node, note: &str) -> TooHard {
        TooHard::Downgrade(NodeUpdate {
            score: Some((node.action.score * 0.5).max(0.01)),
            confidence: Some((node.confidence * 0.5).max(0.05)),
            note: Some(note.to_owned()),
            ..NodeUpdate::default()
        })
    }
}

/// What to do with a node on which nothing passed.
#[derive(Debug, Clone)]
#[allow(clippy::large_enum_variant)] // one per failed cycle: size does not matter
pub enum TooHard {
    /// Keep it, with revised (lower) estimates.
    Downgrade(NodeUpdate),
    /// Replace it by 2–3 smaller steps.
    Split(Vec<NewNode>),
    Delete,
}

pub trait Proposer {
    /// A short name for logs and the run record, e.g. `builtin`.
    fn name(&self) -> String;

    fn init_world_model(&mut self, ctx: &ProposeContext<'_>) -> Result<WorldModel, ProposeError>;

    /// New actions when nothing is left to execute; an empty script ends the search.
    fn propose_actions(&mut self, ctx: &ProposeContext<'_>) -> Result<EditScript, ProposeError>;

    /// One candidate for `req`, or `None` when there is nothing (more) worth trying.
    fn generate(
        &mut self,
        ctx: &ProposeContext<'_>,
        req: &GenerateRequest<'_>,
    ) -> Result<Option<Candidate>, ProposeError>;

    /// Revise the tree after a cycle that passed.
    fn refine(
        &mut self,
        ctx: &ProposeContext<'_>,
        evidence: &CycleEvidence<'_>,
    ) -> Result<EditScript, ProposeError>;

    /// Decide about a node whose cycle passed nothing.
    fn too_hard(
        &mut self,
        ctx: &ProposeContext<'_>,
        evidence: &CycleEvidence<'_>,
    ) -> Result<TooHard, ProposeError>;

    /// Calls made since last asked (the LLM journal), for the engine to store.
    fn take_records(&mut self) -> Vec<LlmCallRecord> {
        Vec::new()
    }

    /// Calls stored by earlier sessions (or the run being replayed).
    fn restore_records(&mut self, _records: &[LlmCallRecord]) {}

    /// An edit script was rejected; offer a corrected one, or `None` to give up on it.
    fn revise_edit(
        &mut self,
        _ctx: &ProposeContext<'_>,
        _script: &EditScript,
        _error: &EditError,
    ) -> Result<Option<EditScript>, ProposeError> {
        Ok(None)
    }
}

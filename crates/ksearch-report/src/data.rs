//! A run read back from its directory: everything the renderings need, loaded once.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use ksearch_core::record::{AttemptRecord, CycleRecord, LlmCallRecord};
use ksearch_core::task::Task;
use ksearch_core::tree::{Gate, Node, NodeId, ROOT, Tree};
use ksearch_run::events::RunEvent;
use ksearch_run::{EngineState, RunConfig, RunError, RunSummary};
use ksearch_store::StoreError;
use thiserror::Error;

#[derive(Debug, Error)]
pub enum ReportError {
    #[error(transparent)]
    Run(#[from] RunError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("the run has no node {node} (nodes: {known})")]
    NoSuchNode { node: NodeId, known: String },
    #[error("`{name}` is not a node: give a node id, `best` or `seed`")]
    BadNode { name: String },
    #[error("node {node} is open: it has no solution yet")]
    OpenNode { node: NodeId },
    #[error("the source of round {round} ({hash}) is missing from the run's artifacts")]
    MissingSource { round: u64, hash: String },
    /// An output path that is not safe to write (a link planted in a run directory).
    #[error("{} {what}; refusing to write there", path.display())]
    Unsafe { path: PathBuf, what: String },
    /// A file an export would write outside its directory, or beside its own layout (a task
    /// name from an edited run).
    #[error(
        "export file `{path}` is not a file of the export's layout (a name, or a name in the package's directory); refusing to write it"
    )]
    OutsideExport { path: String },
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

impl ReportError {
    /// Whether the error is about what the user gave (a directory that holds no run or an
    /// incomplete one, a node that does not exist or has no solution), rather than a failure
    /// of ksearch itself.
    pub fn is_input(&self) -> bool {
        match self {
            ReportError::Run(_)
            | ReportError::Store(_)
            | ReportError::NoSuchNode { .. }
            | ReportError::BadNode { .. }
            | ReportError::OpenNode { .. }
            | ReportError::MissingSource { .. }
            | ReportError::Unsafe { .. }
            | ReportError::OutsideExport { .. } => true,
            ReportError::Io(_) => false,
        }
    }
}

/// Everything recorded about a run, as read back.
#[derive(Debug, Clone)]
pub struct RunData {
    pub dir: PathBuf,
    pub task: Task,
    pub config: RunConfig,
    pub state: EngineState,
    pub summary: RunSummary,
    pub tree: Tree,
    /// Every attempt in round order, the seed (round 0) first.
    pub attempts: Vec<AttemptRecord>,
    pub cycles: Vec<CycleRecord>,
    /// Every event with the round it was recorded in, in the order written.
    pub events: Vec<(u64, RunEvent)>,
    pub llm_calls: Vec<LlmCallRecord>,
    /// Candidate sources by content hash (every attempt's whose artifact is present).
    pub sources: BTreeMap<String, String>,
}

/// Read a run directory (`run.sqlite` and `artifacts/`).
pub fn load(dir: &Path) -> Result<RunData, ReportError> {
    // Every artifact is read and verified against its hash here: a tampered one is refused
    // (naming it); a missing one only matters to the view that needs it, which says so.
    let r = ksearch_run::read_run(dir)?;
    Ok(RunData {
        dir: dir.to_owned(),
        task: r.run.task,
        config: r.run.config,
        state: r.state,
        summary: r.summary,
        tree: r.tree,
        attempts: r.attempts,
        cycles: r.cycles,
        events: r.events,
        llm_calls: r.llm_calls,
        sources: r.sources,
    })
}

impl RunData {
    /// A node named on the command line: its id, `best` (the run's best) or `seed` / `root`.
    pub fn resolve(&self, name: &str) -> Result<NodeId, ReportError> {
        let id = match name.trim() {
            "best" => self.summary.best.node,
            "seed" | "root" => ROOT,
            other => other.parse().map_err(|_| ReportError::BadNode {
                name: other.to_owned(),
            })?,
        };
        self.node(id).map(|n| n.id)
    }

    pub fn node(&self, id: NodeId) -> Result<&Node, ReportError> {
        self.tree.get(id).ok_or_else(|| ReportError::NoSuchNode {
            node: id,
            known: describe_ids(self.tree.nodes().map(|n| n.id)),
        })
    }

    pub fn attempts_of(&self, id: NodeId) -> impl Iterator<Item = &AttemptRecord> {
        self.attempts.iter().filter(move |a| a.node == id)
    }

    pub fn attempt(&self, round: u64) -> Option<&AttemptRecord> {
        self.attempts.iter().find(|a| a.round == round)
    }

    /// The attempt whose code is a node's solution.
    pub fn solution_attempt(&self, id: NodeId) -> Option<&AttemptRecord> {
        let round = self.tree.get(id)?.solution.as_ref()?.round;
        self.attempt(round)
    }

    /// The source of a node's solution.
    pub fn solution_source(&self, id: NodeId) -> Option<&str> {
        let hash = &self.tree.get(id)?.solution.as_ref()?.source_hash;
        self.sources.get(hash).map(String::as_str)
    }

    /// Ids of nodes that attempts were made on but that are no longer in the tree (removed or
    /// split after a cycle failed).
    pub fn removed_nodes(&self) -> Vec<NodeId> {
        let mut ids: Vec<NodeId> = self
            .attempts
            .iter()
            .map(|a| a.node)
            .filter(|id| self.tree.get(*id).is_none())
            .collect();
        ids.dedup();
        ids.sort_unstable();
        ids.dedup();
        ids
    }

    /// Whether the proposer judged the node too hard after a failed cycle (and kept it,
    /// downgraded).
    pub fn judged_too_hard(&self, id: NodeId) -> bool {
        self.events
            .iter()
            .any(|(_, e)| matches!(e, RunEvent::TooHard { node, .. } if *node == id))
    }

    /// The best node's speedup over the baseline at each round: what a reader would have
    /// seen as the run's best after that round (only solutions judged better than their
    /// parent count, as in [`Tree::best`]).
    pub fn best_so_far(&self) -> Vec<(u64, f64)> {
        let mut solved: Vec<(u64, f64)> = self
            .tree
            .nodes()
            .filter(|n| {
                n.id == ROOT
                    || n.solution
                        .as_ref()
                        .is_some_and(|s| matches!(s.gate, Gate::Better | Gate::Unmeasured))
            })
            .filter_map(|n| {
                let s = n.solution.as_ref()?;
                Some((s.round, s.speedup?))
            })
            .collect();
        solved.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.total_cmp(&b.1)));
        let last = self.attempts.iter().map(|a| a.round).max().unwrap_or(0);
        let mut out = Vec::new();
        let mut best: Option<f64> = None;
        let mut it = solved.into_iter().peekable();
        for round in 0..=last {
            while let Some(&(r, s)) = it.peek() {
                if r > round {
                    break;
                }
                best = Some(best.map_or(s, |b: f64| b.max(s)));
                it.next();
            }
            if let Some(b) = best {
                out.push((round, b));
            }
        }
        out
    }
}

/// How a node stands, as one word: `seed`, `better`, `same`, `worse` (closed, judged against
/// its parent by the acceptance gate), `closed` (no paired measurement), `failed` (open, with
/// cycles that passed nothing) or `open`.
pub fn node_status(n: &Node) -> &'static str {
    match &n.solution {
        Some(_) if n.id == ROOT => "seed",
        Some(s) => match s.gate {
            Gate::Better => "better",
            Gate::Same => "same",
            Gate::Worse => "worse",
            Gate::Unmeasured => "closed",
        },
        None if n.failed_cycles > 0 => "failed",
        None => "open",
    }
}

/// A short stable id of a run: the first 16 hex digits of the SHA-256 of its configuration
/// (as stored, JSON) followed by its creation time.
pub fn run_id(config: &RunConfig) -> String {
    let json = serde_json::to_string(config).unwrap_or_default();
    let hash = ksearch_store::content_hash(&format!("{json}\n{}", config.created_unix));
    hash[..16].to_owned()
}

pub(crate) fn describe_ids(ids: impl Iterator<Item = NodeId>) -> String {
    let ids: Vec<String> = ids.map(|i| i.to_string()).collect();
    if ids.len() > 12 {
        format!(
            "{}, …, {}",
            ids[..6].join(", "),
            ids[ids.len() - 3..].join(", ")
        )
    } else {
        ids.join(", ")
    }
}

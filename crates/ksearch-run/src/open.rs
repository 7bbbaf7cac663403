//! Opening a stored run and reading it back: the one way in for everything that reads a run
//! (`tree`, `show`, `report`, `export`, a resume, a replay).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use ksearch_core::record::{AttemptRecord, CycleRecord, LlmCallRecord};
use ksearch_core::static_check::MAX_SOURCE_BYTES;
use ksearch_core::task::Task;
use ksearch_core::tree::Tree;
use ksearch_store::{DB_FILE, RunStore, StoreError};

use crate::events::RunEvent;
use crate::{ConfigError, EngineState, RunConfig, RunSummary, summarize};

/// The store's meta key of the task a run was made for.
pub const META_TASK: &str = "task";
/// The store's meta key of the run's configuration ([`RunConfig`]).
pub const META_CONFIG: &str = "config";

/// A stored run that cannot be read back as a run.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("the run in {} is incomplete: {what}", dir.display())]
    Incomplete { dir: PathBuf, what: String },
    #[error("the run in {} has an invalid stored configuration: {source}", dir.display())]
    Config {
        dir: PathBuf,
        #[source]
        source: ConfigError,
    },
    /// A record that reads, but breaks the rules ksearch wrote it by: a run directory may have
    /// been edited, or prepared by someone else.
    #[error("corrupt record in {}: {what}", path.display())]
    Corrupt { path: PathBuf, what: String },
    #[error("{} was written by a newer ksearch (run format {found}; this ksearch reads up to {supported})", dir.display())]
    NewerFormat {
        dir: PathBuf,
        found: u32,
        supported: u32,
    },
}

/// A run read back from its directory.
#[derive(Debug)]
pub struct StoredRun {
    pub store: RunStore,
    pub task: Task,
    pub config: RunConfig,
}

/// Open a run directory to read it (no lock: works while a run is going).
pub fn open_run(dir: &Path) -> Result<StoredRun, RunError> {
    stored_run(dir, RunStore::open(dir)?)
}

/// Open a run directory to continue it, holding its writer lock: fails at once when another
/// process is running or resuming it.
pub fn open_run_writer(dir: &Path) -> Result<StoredRun, RunError> {
    stored_run(dir, RunStore::open_writer(dir)?)
}

fn stored_run(dir: &Path, store: RunStore) -> Result<StoredRun, RunError> {
    let incomplete = |what: &str| RunError::Incomplete {
        dir: dir.to_owned(),
        what: what.to_owned(),
    };
    let task = store
        .meta::<Task>(META_TASK)?
        .ok_or_else(|| incomplete(NO_TASK))?;
    check_task(&task).map_err(|what| RunError::Corrupt {
        path: dir.join(DB_FILE),
        what: format!("meta `{META_TASK}`, {what}"),
    })?;
    // The format first, before the rest of the configuration is read as this version's.
    let format = store
        .meta::<serde_json::Value>(META_CONFIG)?
        .and_then(|c| c.get("format").and_then(serde_json::Value::as_u64));
    if let Some(found) = format.filter(|&f| f > u64::from(crate::RUN_FORMAT)) {
        return Err(RunError::NewerFormat {
            dir: dir.to_owned(),
            found: u32::try_from(found).unwrap_or(u32::MAX),
            supported: crate::RUN_FORMAT,
        });
    }
    let config = store
        .meta::<RunConfig>(META_CONFIG)?
        .ok_or_else(|| incomplete("no configuration recorded"))?;
    config.validate().map_err(|source| RunError::Config {
        dir: dir.to_owned(),
        source,
    })?;
    Ok(StoredRun {
        store,
        task,
        config,
    })
}

/// What a run killed as it started lacks; `ksearch run` into its directory starts it afresh.
const NO_TASK: &str =
    "no task recorded (it was stopped as it started; `ksearch run` into it starts it afresh)";

/// A stored task, held to the rules of the `task.toml` it was loaded from: its names become
/// file names and code in an export, and its sizes what the evaluator allocates.
fn check_task(task: &Task) -> Result<(), String> {
    ksearch_core::task::validate_spec(&task.spec).map_err(|(field, message)| {
        let field = field.to_string();
        let sep = if field.is_empty() { "" } else { "." };
        format!("field `spec{sep}{field}`: {message}")
    })?;
    let sources = [("reference", &task.reference), ("seed", &task.seed)]
        .into_iter()
        .chain(task.baseline.iter().map(|b| ("baseline.source", &b.source)))
        .chain(
            task.comparisons
                .iter()
                .map(|c| ("comparisons.source", &c.source)),
        )
        .chain(
            task.space
                .iter()
                .flat_map(|s| s.templates.iter().map(|t| ("space.templates", t))),
        );
    for (field, source) in sources {
        if source.text.len() > MAX_SOURCE_BYTES {
            return Err(format!(
                "field `{field}`: `{}` has {} bytes, more than the limit of {MAX_SOURCE_BYTES} for a source file",
                source.file,
                source.text.len()
            ));
        }
    }
    Ok(())
}

/// A stored tree, checked to hang from its root (see [`Tree::check`]): an edited run.sqlite
/// whose parents loop or miss would otherwise make viewers and resume loop, panic or drop
/// nodes unseen.
pub fn check_tree(dir: &Path, tree: &Tree) -> Result<(), RunError> {
    tree.check().map_err(|what| RunError::Corrupt {
        path: dir.join(DB_FILE),
        what: format!("nodes: {what}"),
    })
}

/// Everything a finished or running run has recorded, read back without an engine.
#[derive(Debug)]
pub struct RunRecords {
    pub run: StoredRun,
    pub state: EngineState,
    pub tree: Tree,
    pub summary: RunSummary,
    /// Every attempt in round order, the seed (round 0) first.
    pub attempts: Vec<AttemptRecord>,
    pub cycles: Vec<CycleRecord>,
    /// Every event with the round it was recorded in, in the order written.
    pub events: Vec<(u64, RunEvent)>,
    pub llm_calls: Vec<LlmCallRecord>,
    /// Candidate sources by content hash: every attempt's and solution's whose artifact is
    /// present, each verified against its hash.
    pub sources: BTreeMap<String, String>,
}

/// Read a finished or running run whole, for display. Every artifact the run refers to is
/// read and checked against its hash: a tampered one is an error naming it; a missing one is
/// left out of `sources`.
pub fn read_run(dir: &Path) -> Result<RunRecords, RunError> {
    let run = open_run(dir)?;
    let snap = run.store.snapshot()?;
    let state: EngineState = run.store.state()?.ok_or_else(|| RunError::Incomplete {
        dir: dir.to_owned(),
        what: "no engine state".into(),
    })?;
    if snap.nodes.is_empty() {
        return Err(RunError::Incomplete {
            dir: dir.to_owned(),
            what: "the seed has not been measured yet".into(),
        });
    }
    let tree = Tree::from_nodes(snap.nodes, state.next_node);
    check_tree(dir, &tree)?;
    // A cycle under way shows its best attempt so far on its node.
    let tree = crate::with_open_cycles(&tree, &snap.attempts, &snap.cycles, run.config.seed);
    let mut sources = BTreeMap::new();
    let hashes = snap
        .attempts
        .iter()
        .map(|a| (&a.source_hash, &a.source_file))
        .chain(
            tree.nodes()
                .filter_map(|n| n.solution.as_ref())
                .map(|s| (&s.source_hash, &s.source_file)),
        );
    for (hash, file) in hashes {
        if sources.contains_key(hash) {
            continue;
        }
        match run.store.read_artifact(hash, file) {
            Ok(src) => {
                sources.insert(hash.clone(), src.text);
            }
            Err(StoreError::MissingArtifact { .. }) => {}
            Err(e) => return Err(e.into()),
        }
    }
    let summary = summarize(
        dir,
        &run.task,
        &run.config,
        &state,
        &tree,
        &snap.attempts,
        &snap.cycles,
        &snap.llm_calls,
    );
    Ok(RunRecords {
        run,
        state,
        tree,
        summary,
        attempts: snap.attempts,
        cycles: snap.cycles,
        events: crate::events::decode(&snap.events).map_err(|what| RunError::Incomplete {
            dir: dir.to_owned(),
            what,
        })?,
        llm_calls: snap.llm_calls,
        sources,
    })
}

/// A run's summary, tree and attempts, for display.
pub fn read_summary(dir: &Path) -> Result<(RunSummary, Tree, Vec<AttemptRecord>), RunError> {
    let r = read_run(dir)?;
    Ok((r.summary, r.tree, r.attempts))
}

#[cfg(test)]
mod tests {
    use ksearch_core::task::Source;

    use super::*;

    const TASK: &str = r#"
format = 1
name = "softmax"
description = "row softmax"
class = "reduction"
backend = "c"
axes = ["rows", "cols"]
inputs = [{ name = "x", shape = ["rows", "cols"], dtype = "f32" }]
outputs = [{ name = "y", shape = ["rows", "cols"], dtype = "f32" }]
workloads = [
    { name = "small", axes = { rows = 4, cols = 8 } },
    { name = "big", axes = { rows = 64, cols = 1024 } },
]
reference = { file = "reference.c" }
seed = { file = "seed.c" }
"#;

    fn task() -> Task {
        let source = |file: &str| Source {
            file: file.into(),
            text: "void softmax(void) {}".into(),
        };
        Task {
            id: "t".into(),
            spec: ksearch_core::parse_task(TASK, "task.toml").unwrap(),
            reference: source("reference.c"),
            seed: source("seed.c"),
            baseline: None,
            comparisons: Vec::new(),
            space: None,
            worker: None,
        }
    }

    #[test]
    fn a_stored_task_is_held_to_the_rules_of_task_toml() {
        assert_eq!(check_task(&task()), Ok(()));
        type Edit = fn(&mut Task);
        let edits: &[(Edit, &str)] = &[
            (
                |t| t.spec.name = "../../../escape_probe/pwned".into(),
                "field `spec.name`: task name `../../../escape_probe/pwned` must be an identifier",
            ),
            (
                |t| t.spec.inputs[0].name = "x */ int evil; /*".into(),
                "field `spec.inputs[0].name`",
            ),
            (
                |t| {
                    t.spec.workloads[1].axes.insert("rows".into(), 1 << 40);
                },
                "field `spec.workloads[1].axes`: tensor `x` would have",
            ),
            (
                |t| t.seed.text = "x".repeat(MAX_SOURCE_BYTES + 1),
                "field `seed`: `seed.c` has 524289 bytes",
            ),
        ];
        for (edit, expected) in edits {
            let mut t = task();
            edit(&mut t);
            let e = check_task(&t).unwrap_err();
            assert!(e.starts_with(expected), "{e}");
        }
    }
}

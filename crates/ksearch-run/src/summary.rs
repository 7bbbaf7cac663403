//! A run in numbers: what `ksearch run --json` prints and `ksearch tree` shows.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use ksearch_core::calibration::{Calibration, calibration};
use ksearch_core::record::{AttemptKind, AttemptRecord, CycleRecord, LlmCallRecord};
use ksearch_core::task::Task;
use ksearch_core::tree::{Node, NodeId, Tree};
use serde::{Deserialize, Serialize};

use crate::run_config::{EngineState, LeftOut, RunConfig, StopReason};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Best {
    pub node: NodeId,
    pub title: String,
    /// Over the task's baseline.
    pub speedup: Option<f64>,
    /// Over the seed kernel: ratio of the two speedups over the baseline, each measured paired
    /// with the baseline.
    pub speedup_vs_seed: Option<f64>,
    pub latency_ms: BTreeMap<String, f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunSummary {
    pub run_dir: PathBuf,
    pub task: String,
    pub proposer: String,
    /// What speedups are quoted against: the baseline's name, with what it said it ran when
    /// it describes itself (see `baseline_description`).
    pub baseline: String,
    /// What the baseline said it ran when the seed was measured (an OpenBLAS baseline: its
    /// build and the kernels it picked for this CPU), where it describes itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline_description: Option<String>,
    /// The task names no production baseline: speedups "over the baseline" are over its
    /// reference, written to be obviously correct rather than fast.
    #[serde(default)]
    pub baseline_is_reference: bool,
    /// The task does name a production baseline, but the run left it out: the machine lacked
    /// what it needs (so `baseline_is_reference`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline_left_out: Option<LeftOut>,
    /// Rounds done: candidates generated and evaluated (the seed is round 0 and not counted).
    pub rounds: u64,
    pub nodes: usize,
    pub cycles: usize,
    pub best: Best,
    pub seed_latency_ms: BTreeMap<String, f64>,
    pub stop_reason: Option<StopReason>,
    /// Why, in words, where the reason alone does not say (an unusable model's last fault).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_detail: Option<String>,
    pub wall_s: f64,
    /// Time inside evaluations (compiling, checking and timing candidates).
    pub eval_s: f64,
    /// Everything else: proposing, the store, the engine itself.
    pub orchestrator_s: f64,
    pub orchestrator_fraction: f64,
    pub calibration: Calibration,
    /// LLM spend in US dollars, all sessions; zero for the builtin proposer. Calls answered
    /// from the journal cost nothing.
    pub cost_usd: f64,
    /// Input plus output tokens of every model call.
    pub tokens: u64,
    /// Spend and tokens per role and model, e.g. `reasoning openai:gpt-5`.
    pub llm: BTreeMap<String, LlmTotals>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LlmTotals {
    pub calls: u64,
    pub input_tokens: u64,
    pub cached_input_tokens: u64,
    pub output_tokens: u64,
    pub reasoning_tokens: u64,
    pub cost_usd: f64,
    /// Calls with no price in the table (their cost is not in `cost_usd`).
    pub unpriced_calls: u64,
    pub replayed_calls: u64,
    /// Answers with no text, and answers cut off at the output limit: both asked again.
    #[serde(default)]
    pub empty_answers: u64,
    #[serde(default)]
    pub truncated_answers: u64,
    /// The tokens are estimates (four characters a token), not a provider's count: the
    /// manual model's.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub tokens_estimated: bool,
}

/// `; 2 empty answers and 1 cut off, each asked again` (nothing when both are zero): what the
/// summary and the report add after a count of calls.
pub fn asked_again(empty: u64, truncated: u64) -> String {
    let plural = |n: u64| if n == 1 { "" } else { "s" };
    match (empty, truncated) {
        (0, 0) => String::new(),
        (e, 0) => format!("; {e} empty answer{}, asked again", plural(e)),
        (0, t) => format!(
            "; {t} answer{} cut off at the output limit, asked again",
            plural(t)
        ),
        (e, t) => format!(
            "; {e} empty answer{} and {t} cut off at the output limit, each asked again",
            plural(e)
        ),
    }
}

/// Why speedups are over the reference: the task names no production baseline, or the run left
/// it out for what the machine lacked.
pub fn no_baseline_words(left_out: Option<&LeftOut>) -> String {
    match left_out {
        Some(l) => format!(
            "the task's production baseline, `{}`, needs {}, which the machine that started the run lacked",
            l.name, l.needs
        ),
        None => "the task has no production baseline".into(),
    }
}

/// What a solved node kept where that is not its action as written: a later attempt of its
/// cycle (improving on it, or fixing it) became its solution, so its kernel is that attempt's.
/// The attempt's round and its note, on one line.
pub fn kept_note(node: &Node, attempts: &[AttemptRecord]) -> Option<(u64, String)> {
    let s = node.solution.as_ref()?;
    let a = attempts
        .iter()
        .find(|a| a.round == s.round && a.node == node.id)?;
    if matches!(a.kind, AttemptKind::Seed | AttemptKind::Implement) {
        return None;
    }
    // One line: a model's note may hold several.
    Some((
        a.round,
        a.note.split_whitespace().collect::<Vec<_>>().join(" "),
    ))
}

/// A node's kernel in words: its action's title, and where a later attempt's kernel became its
/// solution, what that attempt changed (an exported or best kernel is that attempt's).
pub fn solution_title(node: &Node, attempts: &[AttemptRecord]) -> String {
    match kept_note(node, attempts) {
        Some((round, note)) => format!("{} (kept round {round}: {note})", node.action.title),
        None => node.action.title.clone(),
    }
}

#[allow(clippy::too_many_arguments)] // the parts of a stored run, read separately
pub fn summarize(
    dir: &Path,
    task: &Task,
    config: &RunConfig,
    state: &EngineState,
    tree: &Tree,
    attempts: &[AttemptRecord],
    cycles: &[CycleRecord],
    llm_calls: &[LlmCallRecord],
) -> RunSummary {
    let mut llm: BTreeMap<String, LlmTotals> = BTreeMap::new();
    for c in llm_calls {
        let role = match c.role {
            ksearch_core::record::ModelRole::Reasoning => "reasoning",
            ksearch_core::record::ModelRole::Codegen => "codegen",
        };
        let t = llm.entry(format!("{role} {}", c.model)).or_default();
        t.calls += 1;
        t.input_tokens += c.usage.input;
        t.cached_input_tokens += c.usage.cached_input;
        t.output_tokens += c.usage.output;
        t.reasoning_tokens += c.usage.reasoning;
        t.cost_usd += c.cost_usd.unwrap_or(0.0);
        t.unpriced_calls += u64::from(c.cost_usd.is_none());
        t.replayed_calls += u64::from(c.replayed);
        t.tokens_estimated |= c
            .model
            .parse::<ksearch_llm::ModelSpec>()
            .is_ok_and(|m| m.provider == ksearch_llm::Provider::Manual);
        if let Ok(answer) = serde_json::from_value::<ksearch_llm::Completion>(c.response.clone()) {
            t.empty_answers += u64::from(answer.is_empty());
            t.truncated_answers += u64::from(!answer.is_empty() && answer.is_truncated());
        }
    }
    let best = tree.best();
    let root = tree.root();
    let speedup = |n: &ksearch_core::tree::Node| n.solution.as_ref().and_then(|s| s.speedup);
    let best_speedup = speedup(best);
    let orchestrator_s = (state.wall_s - state.eval_s).max(0.0);
    let baseline_description = attempts
        .iter()
        .find(|a| a.round == 0)
        .and_then(|a| a.evaluation.as_ref())
        .and_then(|e| {
            e.result
                .description_of(ksearch_core::protocol::Role::Baseline)
        })
        .map(str::to_owned);
    RunSummary {
        run_dir: dir.to_owned(),
        task: task.id.clone(),
        proposer: config.proposer.clone(),
        baseline: ksearch_core::record::baseline_label(
            &task.baseline_name(),
            baseline_description.as_deref(),
        ),
        baseline_description,
        baseline_is_reference: task.baseline.is_none(),
        baseline_left_out: config.eval.baseline_left_out.clone(),
        rounds: attempts
            .iter()
            .filter(|a| a.round > 0 && a.evaluation.is_some())
            .count() as u64,
        nodes: tree.len(),
        cycles: cycles.len(),
        best: Best {
            node: best.id,
            title: solution_title(best, attempts),
            speedup: best_speedup,
            speedup_vs_seed: tree.vs_seed(best.id),
            latency_ms: best
                .solution
                .as_ref()
                .map(|s| s.latency_ms.clone())
                .unwrap_or_default(),
        },
        seed_latency_ms: root
            .solution
            .as_ref()
            .map(|s| s.latency_ms.clone())
            .unwrap_or_default(),
        stop_reason: state.stop_reason,
        stop_detail: state.stop_detail.clone(),
        wall_s: state.wall_s,
        eval_s: state.eval_s,
        orchestrator_s,
        orchestrator_fraction: if state.wall_s > 0.0 {
            orchestrator_s / state.wall_s
        } else {
            0.0
        },
        calibration: calibration(tree),
        cost_usd: llm.values().map(|t| t.cost_usd).sum(),
        tokens: llm.values().map(|t| t.input_tokens + t.output_tokens).sum(),
        llm,
    }
}

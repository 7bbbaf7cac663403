//! Prompt templates (minijinja, strict undefined) and the views they are rendered from. Numbers
//! are formatted here, once, so prompts are deterministic and a journal key is stable.

use std::collections::BTreeMap;

use ksearch_core::gate::PairedRatio;
use ksearch_core::protocol::{Role, Status, trim_log};
use ksearch_core::record::{AttemptRecord, Evaluation};
use ksearch_core::task::Task;
use ksearch_core::tree::{Gate, Node, NodeId, ROOT, Tree};
use ksearch_core::units::time_ms;
use minijinja::value::Serde;
use minijinja::{Environment, UndefinedBehavior, Value};
use serde::Serialize;

/// Every template, by name.
const TEMPLATES: &[(&str, &str)] = &[
    ("system.j2", include_str!("prompts/system.j2")),
    ("task.j2", include_str!("prompts/task.j2")),
    ("world_model.j2", include_str!("prompts/world_model.j2")),
    ("implement.j2", include_str!("prompts/implement.j2")),
    ("feedback.j2", include_str!("prompts/feedback.j2")),
    ("debug.j2", include_str!("prompts/debug.j2")),
    ("improve.j2", include_str!("prompts/improve.j2")),
    ("refine.j2", include_str!("prompts/refine.j2")),
    ("propose.j2", include_str!("prompts/propose.j2")),
    ("too_hard.j2", include_str!("prompts/too_hard.j2")),
    ("repair.j2", include_str!("prompts/repair.j2")),
    ("unusable.j2", include_str!("prompts/unusable.j2")),
    ("node_schema.j2", include_str!("prompts/node_schema.j2")),
];

#[derive(Debug)]
pub struct Prompts {
    env: Environment<'static>,
}

impl Default for Prompts {
    fn default() -> Self {
        Self::new()
    }
}

impl Prompts {
    pub fn new() -> Self {
        let mut env = Environment::new();
        env.set_undefined_behavior(UndefinedBehavior::Strict);
        for (name, text) in TEMPLATES {
            env.add_template(name, text)
                .expect("built-in templates parse");
        }
        Self { env }
    }

    /// Render template `name` with `ctx`. A failure is a bug in ksearch (a view lacks a field).
    pub fn render(&self, name: &str, ctx: &impl Serialize) -> Result<String, String> {
        let t = self
            .env
            .get_template(name)
            .map_err(|e| format!("template {name}: {e}"))?;
        t.render(Value::from(Serde(ctx)))
            .map_err(|e| format!("rendering {name}: {e:#}"))
    }
}

/// Three significant digits, for speedups and ratios.
pub(crate) fn num(v: f64) -> String {
    if !v.is_finite() {
        return v.to_string();
    }
    let mag = if v == 0.0 {
        0
    } else {
        v.abs().log10().floor() as i32
    };
    let decimals = (2 - mag).clamp(0, 6) as usize;
    format!("{v:.decimals$}")
}

#[derive(Debug, Serialize)]
pub(crate) struct TensorView {
    name: String,
    dtype: String,
    shape: Vec<String>,
}

#[derive(Debug, Serialize)]
pub(crate) struct WorkloadView {
    name: String,
    axes: BTreeMap<String, i64>,
}

#[derive(Debug, Serialize)]
pub(crate) struct TaskView {
    id: String,
    name: String,
    description: String,
    class: String,
    backend: String,
    backend_description: String,
    axes: Vec<String>,
    inputs: Vec<TensorView>,
    outputs: Vec<TensorView>,
    workloads: Vec<WorkloadView>,
    baseline: String,
    /// How close each output dtype must come to the reference, in words.
    tolerance: Vec<String>,
    contract: String,
    reference_code: String,
    seed_code: String,
}

impl TaskView {
    pub(crate) fn new(task: &Task, contract: &str) -> Self {
        let tensors = |ts: &[ksearch_core::task::TensorSpec]| {
            ts.iter()
                .map(|t| TensorView {
                    name: t.name.clone(),
                    dtype: t.dtype.to_string(),
                    shape: t.shape.clone(),
                })
                .collect()
        };
        let s = &task.spec;
        Self {
            id: task.id.clone(),
            name: s.name.clone(),
            description: s.description.clone(),
            class: s.class.name().into(),
            backend: s.backend.to_string(),
            backend_description: s.backend.backend().description().into(),
            axes: s.axes.clone(),
            inputs: tensors(&s.inputs),
            outputs: tensors(&s.outputs),
            workloads: s
                .workloads
                .iter()
                .map(|w| WorkloadView {
                    name: w.name.clone(),
                    axes: w.axes.clone(),
                })
                .collect(),
            baseline: task.baseline_name(),
            tolerance: tolerance_lines(s),
            contract: contract.trim_end().to_owned(),
            reference_code: task.reference.text.trim_end().to_owned(),
            seed_code: task.seed.text.trim_end().to_owned(),
        }
    }
}

/// The accepted error of each output dtype, as the checks apply it.
fn tolerance_lines(spec: &ksearch_core::task::TaskSpec) -> Vec<String> {
    let mut dtypes: Vec<_> = spec.outputs.iter().map(|t| t.dtype).collect();
    dtypes.sort();
    dtypes.dedup();
    dtypes
        .into_iter()
        .map(|d| {
            let t = spec.tolerance_for(d);
            format!(
                "{d}: every element within {:e} + {:e}·|reference|, and ‖output − reference‖₂ ≤ {:e}·‖reference‖₂",
                t.atol, t.rtol, t.norm_rtol
            )
        })
        .collect()
}

#[derive(Debug, Serialize)]
pub(crate) struct NodeView {
    id: NodeId,
    title: String,
    description: String,
    difficulty: u8,
    score: String,
    confidence: String,
    expected_speedup: String,
    rationale: String,
    failed_cycles: u32,
    has_children: bool,
}

impl NodeView {
    pub(crate) fn new(tree: &Tree, n: &Node) -> Self {
        Self {
            id: n.id,
            title: n.action.title.clone(),
            description: n.action.description.clone(),
            difficulty: n.action.difficulty,
            score: num(n.action.score),
            confidence: num(n.confidence),
            expected_speedup: num(n.action.expected_speedup),
            rationale: n.action.rationale.clone(),
            failed_cycles: n.failed_cycles,
            has_children: tree.children(n.id).next().is_some(),
        }
    }
}

#[derive(Debug, Serialize)]
pub(crate) struct ParentView {
    id: NodeId,
    title: String,
    code: String,
    speedup: Option<String>,
    is_root: bool,
}

impl ParentView {
    pub(crate) fn new(parent: &Node, code: &str) -> Self {
        Self {
            id: parent.id,
            title: parent.action.title.clone(),
            code: code.trim_end().to_owned(),
            speedup: parent.solution.as_ref().and_then(|s| s.speedup).map(num),
            is_root: parent.id == ROOT,
        }
    }
}

#[derive(Debug, Serialize)]
pub(crate) struct WorkloadFeedback {
    name: String,
    status: String,
    max_abs_err: String,
    max_rel_err: String,
    candidate: String,
    parent: String,
    baseline: String,
    /// The cycle's best attempt, timed in the same rounds (improve rounds).
    best: Option<String>,
}

/// An evaluated attempt, as fed back to the model.
#[derive(Debug, Serialize)]
pub(crate) struct AttemptView {
    round: u64,
    kind: String,
    status: String,
    message: String,
    compile_log: Option<String>,
    output: Option<String>,
    workloads: Vec<WorkloadFeedback>,
    speedup: Option<String>,
    speedup_vs_parent: Option<String>,
    /// Whether the cycle's best attempt was timed with it (a `best` column).
    timed_with_best: bool,
    /// The acceptance gate's verdict against the cycle's best attempt, in a sentence.
    vs_best: Option<String>,
    code: String,
    note: String,
}

impl AttemptView {
    /// `vs_best`: the attempt against the cycle's best attempt timed with it, when it was.
    pub(crate) fn new(
        a: &AttemptRecord,
        e: &Evaluation,
        code: &str,
        vs_best: Option<PairedRatio>,
    ) -> Self {
        let r = &e.result;
        let opt = |v: Option<f64>, f: fn(f64) -> String| v.map_or_else(|| "-".to_owned(), f);
        let sci = |v: f64| format!("{v:.2e}");
        let workloads = r
            .workloads
            .iter()
            .map(|w| WorkloadFeedback {
                name: w.name.clone(),
                status: w.status.to_string(),
                max_abs_err: opt(w.errors.map(|x| x.max_abs_err), sci),
                max_rel_err: opt(w.errors.map(|x| x.max_rel_err), sci),
                candidate: opt(w.timing(Role::Candidate).map(|t| t.median_ms), time_ms),
                parent: opt(w.timing(Role::Parent).map(|t| t.median_ms), time_ms),
                baseline: opt(w.timing(Role::Baseline).map(|t| t.median_ms), time_ms),
                best: w.timing(Role::Incumbent).map(|t| time_ms(t.median_ms)),
            })
            .collect::<Vec<_>>();
        let timed_with_best = workloads.iter().any(|w| w.best.is_some());
        let compile_log = r
            .compile
            .as_ref()
            .map(|c| trim_log(&c.log, 40, 4000))
            .filter(|l| !l.trim().is_empty() && r.status == Status::CompileError);
        let printed = format!("{}{}", r.output.head, r.output.tail);
        Self {
            round: a.round,
            kind: format!("{:?}", a.kind).to_lowercase(),
            status: r.status.to_string(),
            message: r.message.clone(),
            compile_log,
            output: (!printed.trim().is_empty()).then(|| trim_log(&printed, 20, 2000)),
            workloads,
            speedup: e.speedup.as_ref().map(|s| num(s.geomean)),
            speedup_vs_parent: e.speedup_vs_parent.as_ref().map(|s| num(s.geomean)),
            timed_with_best,
            vs_best: vs_best.map(|c| {
                format!(
                    "{}× (95% interval {}–{}): {}",
                    num(c.ratio),
                    num(c.interval.0),
                    num(c.interval.1),
                    match c.verdict {
                        Gate::Better => "faster beyond noise, so it is now the best attempt",
                        Gate::Same => "not distinguishable from it, so it does not count",
                        Gate::Worse => "slower, so it does not count",
                        Gate::Unmeasured => "not measured",
                    }
                )
            }),
            code: code.trim_end().to_owned(),
            note: a.note.clone(),
        }
    }
}

#[derive(Debug, Serialize)]
pub(crate) struct PathNodeView {
    id: NodeId,
    title: String,
    speedup: Option<String>,
    measured: Option<String>,
    predicted: String,
    gate: String,
}

#[derive(Debug, Serialize)]
pub(crate) struct FrontierView {
    id: NodeId,
    parent: NodeId,
    title: String,
    difficulty: u8,
    score: String,
    expected_speedup: String,
    confidence: String,
}

fn gate_word(g: Gate) -> &'static str {
    match g {
        Gate::Better => "better than the parent",
        Gate::Same => "not distinguishable from the parent",
        Gate::Worse => "worse than the parent",
        Gate::Unmeasured => "not measured against the parent",
    }
}

pub(crate) fn path_view(tree: &Tree, node: NodeId) -> Vec<PathNodeView> {
    tree.path(node)
        .into_iter()
        .filter_map(|id| tree.get(id))
        .map(|n| {
            let s = n.solution.as_ref();
            PathNodeView {
                id: n.id,
                title: n.action.title.clone(),
                speedup: s.and_then(|s| s.speedup).map(num),
                measured: s.and_then(|s| s.speedup_vs_parent).map(num),
                predicted: num(n.action.expected_speedup),
                gate: s.map_or("open", |s| gate_word(s.gate)).to_owned(),
            }
        })
        .collect()
}

pub(crate) fn frontier_view(tree: &Tree) -> Vec<FrontierView> {
    tree.executable()
        .map(|n| FrontierView {
            id: n.id,
            parent: n.parent.unwrap_or(ROOT),
            title: n.action.title.clone(),
            difficulty: n.action.difficulty,
            score: num(n.action.score),
            expected_speedup: num(n.action.expected_speedup),
            confidence: num(n.confidence),
        })
        .collect()
}

#[derive(Debug, Serialize)]
pub(crate) struct EvidenceAttempt {
    round: u64,
    kind: String,
    status: String,
    speedup: Option<String>,
    note: String,
    message: String,
}

pub(crate) fn evidence_attempts(attempts: &[&AttemptRecord]) -> Vec<EvidenceAttempt> {
    attempts
        .iter()
        .map(|a| EvidenceAttempt {
            round: a.round,
            kind: format!("{:?}", a.kind).to_lowercase(),
            status: a
                .status()
                .map_or_else(|| "not evaluated".to_owned(), |s| s.to_string()),
            speedup: a.speedup().map(num),
            note: a.note.clone(),
            message: a
                .evaluation
                .as_ref()
                .map(|e| e.result.message.clone())
                .unwrap_or_default(),
        })
        .collect()
}

pub(crate) fn gate_text(g: Gate) -> String {
    gate_word(g).to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_have_three_significant_digits() {
        assert_eq!(num(1.23456), "1.23");
        assert_eq!(num(12.3456), "12.3");
        assert_eq!(num(123.456), "123");
        assert_eq!(num(0.0123456), "0.0123");
        assert_eq!(num(0.0), "0.00");
    }

    #[test]
    fn every_template_parses() {
        let p = Prompts::new();
        for (name, _) in TEMPLATES {
            assert!(p.env.get_template(name).is_ok(), "{name}");
        }
    }

    #[test]
    fn strict_undefined_fails_loudly() {
        let p = Prompts::new();
        let e = p
            .render("repair.j2", &serde_json::json!({ "error": "x" }))
            .unwrap_err();
        assert!(e.contains("expected") || e.contains("undefined"), "{e}");
    }
}

//! The task format (`task.toml`, format 1): what a kernel computes, on which shapes, how it is
//! checked, and where its reference, seed and baseline sources are.
//!
//! Parsing is pure: the caller hands in the text and a name for error messages. Resolving the
//! source files a task names is the task loader's job (`ksearch-tasks`).

use std::collections::{BTreeMap, BTreeSet};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::axis_expr::AxisExpr;
pub use crate::backend::BackendKind;
use crate::dtype::Dtype;
pub use crate::external_worker::{ExternalWorker, WorkerRef};
use crate::implementation::validate_implementation;
pub use crate::implementation::{Baseline, BaselineRef, InstallHint};
use crate::location::FieldPath;

/// The task format this build reads and writes.
pub const TASK_FORMAT: u32 = 1;

/// A hint about the kind of computation, used to pick tactics and knowledge.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum KernelClass {
    Elementwise,
    Reduction,
    Normalization,
    Scan,
    Matmul,
    Attention,
    Convolution,
    Other,
}

impl KernelClass {
    pub fn name(self) -> &'static str {
        match self {
            KernelClass::Elementwise => "elementwise",
            KernelClass::Reduction => "reduction",
            KernelClass::Normalization => "normalization",
            KernelClass::Scan => "scan",
            KernelClass::Matmul => "matmul",
            KernelClass::Attention => "attention",
            KernelClass::Convolution => "convolution",
            KernelClass::Other => "other",
        }
    }
}

/// How the evaluator fills an input with random values. Inputs are never left as zeros.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Init {
    /// Uniform in `[low, high)`.
    Uniform([f64; 2]),
    /// Normal with `[mean, std]`.
    Normal([f64; 2]),
    /// Uniform integers in `[low, high]`.
    Randint([i64; 2]),
}

impl Init {
    pub fn default_for(dtype: Dtype) -> Init {
        match dtype {
            Dtype::Bool => Init::Randint([0, 1]),
            d if d.is_float() => Init::Uniform([-1.0, 1.0]),
            _ => Init::Randint([-100, 100]),
        }
    }
}

/// One input or output tensor.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TensorSpec {
    pub name: String,
    /// Axis names, outermost first; the tensor is dense and row-major.
    pub shape: Vec<String>,
    pub dtype: Dtype,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub init: Option<Init>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

impl TensorSpec {
    /// Number of elements for concrete axis values.
    pub fn numel(&self, axes: &BTreeMap<String, i64>) -> usize {
        self.shape
            .iter()
            .map(|a| usize::try_from(axes.get(a).copied().unwrap_or(0)).unwrap_or(0))
            .product()
    }

    pub fn init(&self) -> Init {
        self.init.unwrap_or_else(|| Init::default_for(self.dtype))
    }
}

/// Concrete axis values the kernel is checked and timed on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Workload {
    pub name: String,
    pub axes: BTreeMap<String, i64>,
}

/// Accepted error of a candidate's output against the reference, for one dtype.
///
/// An element passes when `|out - ref| <= atol + rtol * |ref|`; the whole output must also have
/// `||out - ref||₂ <= norm_rtol * ||ref||₂`, which an all-zero output fails whenever the
/// reference is not zero.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Tolerance {
    pub atol: f64,
    pub rtol: f64,
    pub norm_rtol: f64,
}

impl Tolerance {
    pub fn default_for(dtype: Dtype) -> Tolerance {
        let (atol, rtol, norm_rtol) = match dtype {
            Dtype::F16 => (1e-3, 1e-2, 5e-3),
            Dtype::Bf16 => (1e-2, 2e-2, 1e-2),
            Dtype::F32 => (1e-5, 1e-4, 1e-5),
            Dtype::F64 => (1e-10, 1e-8, 1e-10),
            // One step of the mantissa: 2^-3 and 2^-2 relative.
            Dtype::F8e4m3 => (1e-1, 1.25e-1, 6e-2),
            Dtype::F8e5m2 => (2e-1, 2.5e-1, 1.2e-1),
            Dtype::I32 | Dtype::I64 | Dtype::I8 | Dtype::I16 | Dtype::Bool => (0.0, 0.0, 0.0),
        };
        Tolerance {
            atol,
            rtol,
            norm_rtol,
        }
    }
}

/// A source file named by the task, relative to the task directory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SourceRef {
    pub file: String,
}

/// `task.toml` as written.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TaskSpec {
    pub format: u32,
    pub name: String,
    pub description: String,
    pub class: KernelClass,
    pub backend: BackendKind,
    /// Axis names in the order they are passed to the kernel.
    pub axes: Vec<String>,
    /// Axes whose value follows from the others (`nout = "n - taps + 1"`): a workload may leave
    /// them out (they are computed) or state them (they must agree).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub derived: BTreeMap<String, String>,
    pub inputs: Vec<TensorSpec>,
    pub outputs: Vec<TensorSpec>,
    pub workloads: Vec<Workload>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tolerance: BTreeMap<Dtype, Tolerance>,
    pub reference: SourceRef,
    pub seed: SourceRef,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline: Option<BaselineRef>,
    /// More implementations timed alongside every candidate and reported, without changing
    /// what the speedup is quoted against (e.g. a weak community baseline beside a strong one).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub comparisons: Vec<BaselineRef>,
    /// A template space the builtin proposer can search (see `docs/spaces.md`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub space: Option<SourceRef>,
    /// Where an imported task came from (`ksearch import`), so that an export can go back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origin: Option<Origin>,
    /// How a c task's sources are built beyond the contract: C++, extra flags and libraries.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub build: Option<crate::build::BuildSpec>,
    /// A worker of the task's own, started instead of the backend's (`external_worker`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worker: Option<WorkerRef>,
}

/// The benchmark suite an imported task came from, and its name there.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Origin {
    pub suite: Suite,
    /// The definition's or problem's name in the suite.
    pub name: String,
    /// The file beside `task.toml` holding the suite's own description of the task (a
    /// FlashInfer-Bench definition, a KernelBench problem).
    pub file: String,
}

/// A benchmark suite `ksearch import` reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Suite {
    FlashinferBench,
    Kernelbench,
}

impl TaskSpec {
    /// The tolerance for a dtype: the task's own, else the default.
    pub fn tolerance_for(&self, dtype: Dtype) -> Tolerance {
        self.tolerance
            .get(&dtype)
            .copied()
            .unwrap_or_else(|| Tolerance::default_for(dtype))
    }

    pub fn workload(&self, name: &str) -> Option<&Workload> {
        self.workloads.iter().find(|w| w.name == name)
    }

    /// Bytes of all inputs and outputs of one call on a workload.
    pub fn bytes_per_call(&self, workload: &Workload) -> usize {
        self.inputs
            .iter()
            .chain(&self.outputs)
            .map(|t| t.numel(&workload.axes) * t.dtype.size_bytes())
            .sum()
    }
}

/// A task file that could not be read: where, which field, and what is wrong.
pub type TaskError = crate::location::FileError;

/// Largest tensor a task may declare, in elements; guards the evaluator's memory.
pub const MAX_TENSOR_ELEMENTS: u128 = 1 << 31;

/// Parse and validate `task.toml`. `file` only names the file in errors.
pub fn parse_task(text: &str, file: &str) -> Result<TaskSpec, TaskError> {
    crate::location::parse_prepared(text, file, fill_derived, validate)
}

/// The rules [`parse_task`] applies, for a spec that did not come from a file: a stored run's
/// task is checked with them when the run is opened, since a run directory may come from
/// someone else and its names end up in paths and generated code. The field at fault and what
/// is wrong.
pub fn validate_spec(spec: &TaskSpec) -> Result<(), (FieldPath, String)> {
    validate(spec)
}

/// Give every workload its derived axes, and check the ones it states.
fn fill_derived(spec: &mut TaskSpec) -> Result<(), (FieldPath, String)> {
    let root = FieldPath::root();
    let mut exprs = Vec::new();
    for (axis, text) in &spec.derived {
        let path = root.key("derived").key(axis);
        if !spec.axes.contains(axis) {
            return Err((
                path,
                format!(
                    "`{axis}` is not a declared axis (axes: {})",
                    spec.axes.join(", ")
                ),
            ));
        }
        let expr = AxisExpr::parse(text).map_err(|e| (path.clone(), e))?;
        if let Some(bad) = expr
            .axes()
            .into_iter()
            .find(|a| !spec.axes.iter().any(|x| x == a) || spec.derived.contains_key(*a))
        {
            let why = if spec.derived.contains_key(bad) {
                "is derived itself; derive from declared axes only"
            } else {
                "is not a declared axis"
            };
            return Err((path, format!("`{bad}` {why}")));
        }
        exprs.push((axis.clone(), expr));
    }
    for (i, w) in spec.workloads.iter_mut().enumerate() {
        let path = root.key("workloads").index(i).key("axes");
        for (axis, expr) in &exprs {
            let value = expr.eval(&w.axes).map_err(|e| {
                (
                    path.clone(),
                    format!("derived axis `{axis}` = {}: {e}", spec.derived[axis]),
                )
            })?;
            match w.axes.get(axis) {
                Some(&v) if v != value => {
                    return Err((
                        path.key(axis),
                        format!(
                            "is {v}, but `{axis}` = {} makes it {value}",
                            spec.derived[axis]
                        ),
                    ));
                }
                Some(_) => {}
                None => {
                    w.axes.insert(axis.clone(), value);
                }
            }
        }
    }
    Ok(())
}

pub(crate) fn is_identifier(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Words a C compiler or the generated shim would trip over as names.
const RESERVED_NAMES: &[&str] = &[
    "auto", "break", "case", "char", "const", "continue", "default", "do", "double", "else",
    "enum", "extern", "float", "for", "goto", "if", "inline", "int", "long", "register",
    "restrict", "return", "short", "signed", "sizeof", "static", "struct", "switch", "typedef",
    "union", "unsigned", "void", "volatile", "while", "main", "int32_t", "int64_t",
];

fn check_name(path: &FieldPath, name: &str, what: &str) -> Result<(), (FieldPath, String)> {
    if !is_identifier(name) {
        return Err((
            path.clone(),
            format!("{what} `{name}` must be an identifier (letters, digits, `_`)"),
        ));
    }
    if RESERVED_NAMES.contains(&name) || name.starts_with("ksearch_") {
        return Err((path.clone(), format!("{what} `{name}` is a reserved name")));
    }
    Ok(())
}

fn validate(spec: &TaskSpec) -> Result<(), (FieldPath, String)> {
    let root = FieldPath::root();
    if spec.format != TASK_FORMAT {
        return Err((
            root.key("format"),
            format!(
                "task format {} is not supported; this ksearch reads format {TASK_FORMAT}",
                spec.format
            ),
        ));
    }
    check_name(&root.key("name"), &spec.name, "task name")?;
    if spec.axes.is_empty() {
        return Err((root.key("axes"), "declare at least one axis".into()));
    }
    let mut names = BTreeSet::new();
    for (i, axis) in spec.axes.iter().enumerate() {
        check_name(&root.key("axes").index(i), axis, "axis")?;
        if !names.insert(axis.as_str()) {
            return Err((
                root.key("axes").index(i),
                format!("axis `{axis}` is declared twice"),
            ));
        }
    }
    for (list, tensors) in [("inputs", &spec.inputs), ("outputs", &spec.outputs)] {
        if tensors.is_empty() {
            return Err((
                root.key(list),
                format!("declare at least one entry in `{list}`"),
            ));
        }
        for (i, t) in tensors.iter().enumerate() {
            let path = root.key(list).index(i);
            check_name(&path.key("name"), &t.name, "tensor")?;
            if !names.insert(t.name.as_str()) {
                return Err((
                    path.key("name"),
                    format!("name `{}` is already used by an axis or tensor", t.name),
                ));
            }
            for (j, dim) in t.shape.iter().enumerate() {
                if !spec.axes.contains(dim) {
                    return Err((
                        path.key("shape").index(j),
                        format!(
                            "`{dim}` is not a declared axis (axes: {})",
                            spec.axes.join(", ")
                        ),
                    ));
                }
            }
            if !spec.backend.backend().supports_dtype(t.dtype) {
                return Err((
                    path.key("dtype"),
                    format!(
                        "the `{}` backend does not support dtype {}",
                        spec.backend, t.dtype
                    ),
                ));
            }
            if list == "outputs" && t.init.is_some() {
                return Err((
                    path.key("init"),
                    "outputs are written by the kernel and take no `init`".into(),
                ));
            }
            if let Some(init) = t.init {
                validate_init(init, t.dtype).map_err(|m| (path.key("init"), m))?;
            }
        }
    }
    if spec.workloads.len() < 2 {
        return Err((
            root.key("workloads"),
            format!(
                "declare at least two workloads (found {})",
                spec.workloads.len()
            ),
        ));
    }
    let mut workload_names = BTreeSet::new();
    for (i, w) in spec.workloads.iter().enumerate() {
        let path = root.key("workloads").index(i);
        if w.name.is_empty() || w.name.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err((
                path.key("name"),
                "a workload name must be non-empty, without spaces".into(),
            ));
        }
        if !workload_names.insert(w.name.as_str()) {
            return Err((
                path.key("name"),
                format!("workload `{}` is declared twice", w.name),
            ));
        }
        for axis in &spec.axes {
            match w.axes.get(axis) {
                None => {
                    return Err((path.key("axes"), format!("axis `{axis}` has no value")));
                }
                // Axes that size a tensor must be positive; the others are parameters (a
                // causal flag, say) and may be zero.
                Some(&v) if v < 0 || (v == 0 && sizes_a_tensor(spec, axis)) => {
                    return Err((
                        path.key("axes").key(axis),
                        if v < 0 {
                            format!("must be a positive integer, got {v}")
                        } else {
                            format!("must be a positive integer (it sizes a tensor), got {v}")
                        },
                    ));
                }
                Some(_) => {}
            }
        }
        if let Some(extra) = w.axes.keys().find(|k| !spec.axes.contains(k)) {
            return Err((
                path.key("axes").key(extra),
                format!(
                    "`{extra}` is not a declared axis (axes: {})",
                    spec.axes.join(", ")
                ),
            ));
        }
        for t in spec.inputs.iter().chain(&spec.outputs) {
            let numel: u128 = t.shape.iter().map(|a| w.axes[a] as u128).product();
            if numel > MAX_TENSOR_ELEMENTS {
                return Err((
                    path.key("axes"),
                    format!(
                        "tensor `{}` would have {numel} elements (limit {MAX_TENSOR_ELEMENTS})",
                        t.name
                    ),
                ));
            }
        }
    }
    for (dtype, tol) in &spec.tolerance {
        let path = root.key("tolerance").key(dtype.name());
        for (field, v) in [
            ("atol", tol.atol),
            ("rtol", tol.rtol),
            ("norm_rtol", tol.norm_rtol),
        ] {
            if !v.is_finite() || v < 0.0 {
                return Err((
                    path.key(field),
                    format!("must be a finite number >= 0, got {v}"),
                ));
            }
        }
    }
    for (field, file) in [
        ("reference", &spec.reference.file),
        ("seed", &spec.seed.file),
    ] {
        check_relative_file(&root.key(field).key("file"), file)?;
    }
    if let Some(space) = &spec.space {
        check_relative_file(&root.key("space").key("file"), &space.file)?;
    }
    if let Some(origin) = &spec.origin {
        check_relative_file(&root.key("origin").key("file"), &origin.file)?;
    }
    let needs = spec.backend.backend().dependency();
    if let Some(b) = &spec.baseline {
        validate_implementation(&root.key("baseline"), b, "baseline", needs)?;
    }
    for (i, c) in spec.comparisons.iter().enumerate() {
        validate_implementation(&root.key("comparisons").index(i), c, "comparison", needs)?;
    }
    if let Some(w) = &spec.worker {
        crate::external_worker::validate(&root.key("worker"), w)?;
    }
    crate::build::validate(spec, &root)
}

fn sizes_a_tensor(spec: &TaskSpec, axis: &str) -> bool {
    spec.inputs
        .iter()
        .chain(&spec.outputs)
        .any(|t| t.shape.iter().any(|a| a == axis))
}

fn validate_init(init: Init, dtype: Dtype) -> Result<(), String> {
    match init {
        Init::Uniform([lo, hi]) if dtype.is_float() => {
            // low == high is a constant (a scalar such as `eps`).
            if !(lo.is_finite() && hi.is_finite() && lo <= hi) {
                return Err(format!(
                    "uniform range [{lo}, {hi}] must be finite with low <= high"
                ));
            }
        }
        Init::Normal([_, std]) if dtype.is_float() => {
            if !(std.is_finite() && std > 0.0) {
                return Err(format!("normal std must be finite and > 0, got {std}"));
            }
        }
        Init::Randint([lo, hi]) if !dtype.is_float() => {
            if lo > hi {
                return Err(format!("randint range [{lo}, {hi}] must have low <= high"));
            }
            let (min, max) = match dtype {
                Dtype::Bool => (0, 1),
                Dtype::I8 => (i8::MIN.into(), i8::MAX.into()),
                Dtype::I16 => (i16::MIN.into(), i16::MAX.into()),
                Dtype::I32 => (i32::MIN.into(), i32::MAX.into()),
                _ => (i64::MIN, i64::MAX),
            };
            if lo < min || hi > max {
                return Err(format!(
                    "randint range [{lo}, {hi}] does not fit dtype {dtype} ([{min}, {max}])"
                ));
            }
        }
        _ => return Err(format!("this init does not fit dtype {dtype}")),
    }
    Ok(())
}

pub(crate) fn check_relative_file(path: &FieldPath, file: &str) -> Result<(), (FieldPath, String)> {
    let bad = file.is_empty()
        || file.starts_with('/')
        || file.split(['/', '\\']).any(|part| part == "..");
    if bad {
        return Err((
            path.clone(),
            format!("`{file}` must be a path inside the task directory"),
        ));
    }
    Ok(())
}

/// A source file with its text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Source {
    /// File name shown in compiler messages, e.g. `seed.c`.
    pub file: String,
    pub text: String,
}

/// A task with every file it names loaded: what the engine and workers use.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Task {
    /// How the user named it: a built-in name such as `cpu/softmax`, or a path.
    pub id: String,
    pub spec: TaskSpec,
    pub reference: Source,
    pub seed: Source,
    pub baseline: Option<Baseline>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub comparisons: Vec<Baseline>,
    /// The task's template space, with its templates, when it ships one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub space: Option<crate::space::TaskSpace>,
    /// The task's own worker (`[worker]`), its program found.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worker: Option<ExternalWorker>,
}

impl Task {
    /// The name speedups are quoted against: the production baseline, else the reference.
    pub fn baseline_name(&self) -> String {
        match &self.baseline {
            Some(b) => b.name.clone(),
            None => format!("reference ({})", self.reference.file),
        }
    }
}

#[cfg(test)]
mod tests;

#[doc(hidden)]
pub mod tests_support;

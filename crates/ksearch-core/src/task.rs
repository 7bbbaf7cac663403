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
mod tests {
    use super::*;

    const GOOD: &str = r#"
format = 1
name = "softmax"
description = "row softmax"
class = "reduction"
backend = "c"
axes = ["rows", "cols"]

[[inputs]]
name = "x"
shape = ["rows", "cols"]
dtype = "f32"
init = { uniform = [-10, 10] }

[[outputs]]
name = "y"
shape = ["rows", "cols"]
dtype = "f32"

[[workloads]]
name = "small"
axes = { rows = 4, cols = 8 }

[[workloads]]
name = "big"
axes = { rows = 64, cols = 1024 }

[tolerance.f32]
atol = 1e-6
rtol = 1e-5
norm_rtol = 1e-6

[reference]
file = "reference.c"

[seed]
file = "seed.c"
"#;

    fn err(text: &str) -> TaskError {
        parse_task(text, "t/task.toml").expect_err("task should be rejected")
    }

    #[test]
    fn parses_a_good_task_and_round_trips() {
        let spec = parse_task(GOOD, "t/task.toml").unwrap();
        assert_eq!(spec.name, "softmax");
        assert_eq!(spec.workloads[1].axes["cols"], 1024);
        assert_eq!(spec.tolerance_for(Dtype::F32).atol, 1e-6);
        assert_eq!(
            spec.tolerance_for(Dtype::F64),
            Tolerance::default_for(Dtype::F64)
        );
        assert_eq!(spec.inputs[0].init(), Init::Uniform([-10.0, 10.0]));
        let written = toml::to_string(&spec).unwrap();
        assert_eq!(parse_task(&written, "round-trip").unwrap(), spec);
        assert_eq!(spec.bytes_per_call(&spec.workloads[0]), 4 * 8 * 4 * 2);
    }

    const CONV: &str = r#"
format = 1
name = "conv1d"
description = "valid 1-d convolution"
class = "convolution"
backend = "c"
axes = ["n", "taps", "nout"]
derived = { nout = "n - taps + 1" }

[[inputs]]
name = "x"
shape = ["n"]
dtype = "f32"

[[inputs]]
name = "w"
shape = ["taps"]
dtype = "f32"

[[outputs]]
name = "y"
shape = ["nout"]
dtype = "f32"

[[workloads]]
name = "small"
axes = { n = 100, taps = 7 }

[[workloads]]
name = "big"
axes = { n = 4096, taps = 31, nout = 4066 }

[reference]
file = "reference.c"

[seed]
file = "seed.c"
"#;

    #[test]
    fn derived_axes_are_computed_checked_and_round_trip() {
        let spec = parse_task(CONV, "t/task.toml").unwrap();
        assert_eq!(spec.workloads[0].axes["nout"], 94, "computed");
        assert_eq!(spec.workloads[1].axes["nout"], 4066, "stated and right");
        let written = toml::to_string(&spec).unwrap();
        assert_eq!(parse_task(&written, "round-trip").unwrap(), spec);

        // The slip that made a reference read past its input: a stated value that disagrees.
        let text = CONV.replace("nout = 4066", "nout = 4067");
        let e = err(&text);
        assert_eq!(e.field, "workloads[1].axes.nout");
        assert_eq!(
            e.message,
            "is 4067, but `nout` = n - taps + 1 makes it 4066"
        );
        let line = text.lines().position(|l| l.contains("4067")).unwrap() + 1;
        assert_eq!(e.location.unwrap().line, line);

        // A derived size that is not positive is refused like a stated one.
        let e = err(&CONV.replace("n = 100, taps = 7", "n = 5, taps = 7"));
        assert_eq!(e.field, "workloads[0].axes.nout");
        assert!(e.message.contains("must be a positive integer"), "{e}");
    }

    #[test]
    fn bad_derived_axes_name_the_field() {
        let with = |d: &str| err(&CONV.replace(r#"nout = "n - taps + 1""#, d));
        let e = with(r#"nout = "n - tap + 1""#);
        assert_eq!(e.field, "derived.nout");
        assert_eq!(e.message, "`tap` is not a declared axis");
        assert_eq!(e.location.unwrap().line, 8);
        let e = with(r#"m = "n + 1""#);
        assert_eq!(e.field, "derived.m");
        assert!(e.message.starts_with("`m` is not a declared axis"), "{e}");
        let e = with(r#"nout = "n - (taps""#);
        assert_eq!(e.message, "the `(` at character 5 is not closed");
        let e = with(r#"nout = "n - taps + 1", taps = "nout + 1""#);
        assert_eq!(e.field, "derived.nout");
        assert_eq!(
            e.message,
            "`taps` is derived itself; derive from declared axes only"
        );
        let e = with(r#"nout = "n / (taps - 7)""#);
        assert_eq!(e.field, "workloads[0].axes");
        assert_eq!(
            e.message,
            "derived axis `nout` = n / (taps - 7): division by zero"
        );
    }

    #[test]
    fn unknown_key_names_file_line_and_field() {
        let text = GOOD.replace("name = \"big\"", "name = \"big\"\nrepeat = 3");
        let e = err(&text);
        assert_eq!(e.field, "workloads[1].repeat");
        assert!(e.message.contains("unknown field `repeat`"), "{e}");
        let line = text.lines().position(|l| l.starts_with("repeat")).unwrap() + 1;
        assert_eq!(e.location.unwrap().line, line);
        assert!(
            e.to_string().starts_with(&format!("t/task.toml:{line}:")),
            "{e}"
        );
    }

    #[test]
    fn syntax_error_has_a_location() {
        let e = err("format = 1\nname = = 2\n");
        assert_eq!(e.location.unwrap().line, 2);
        assert!(e.field.is_empty());
    }

    #[test]
    fn wrong_type_names_the_field() {
        let e = err(&GOOD.replace("rows = 64", "rows = \"many\""));
        assert_eq!(e.field, "workloads[1].axes.rows");
        assert!(e.message.contains("invalid type"), "{e}");
    }

    #[test]
    fn semantic_errors_point_at_the_field() {
        let cases: &[(&str, &str, &str, &str)] = &[
            ("format = 1", "format = 7", "format", "not supported"),
            (
                "rows = 64,",
                "rows = -4,",
                "workloads[1].axes.rows",
                "positive",
            ),
            (
                "axes = { rows = 4, cols = 8 }",
                "axes = { rows = 4 }",
                "workloads[0].axes",
                "`cols` has no value",
            ),
            (
                "shape = [\"rows\", \"cols\"]\ndtype = \"f32\"\ninit",
                "shape = [\"rows\", \"k\"]\ndtype = \"f32\"\ninit",
                "inputs[0].shape[1]",
                "not a declared axis",
            ),
            (
                "name = \"softmax\"",
                "name = \"soft max\"",
                "name",
                "identifier",
            ),
            (
                "dtype = \"f32\"\ninit",
                "dtype = \"f16\"\ninit",
                "inputs[0].dtype",
                "does not support",
            ),
            (
                "init = { uniform = [-10, 10] }",
                "init = { uniform = [10, -10] }",
                "inputs[0].init",
                "low <= high",
            ),
            (
                "file = \"seed.c\"",
                "file = \"../seed.c\"",
                "seed.file",
                "inside the task directory",
            ),
            ("atol = 1e-6", "atol = -1.0", "tolerance.f32.atol", ">= 0"),
            (
                "name = \"big\"",
                "name = \"small\"",
                "workloads[1].name",
                "declared twice",
            ),
        ];
        for (from, to, field, message) in cases {
            assert!(GOOD.contains(from), "fixture lacks {from}");
            let e = err(&GOOD.replacen(from, to, 1));
            assert_eq!(e.field, *field, "{e}");
            assert!(e.message.contains(message), "{e}");
            assert!(e.location.is_some(), "no location for {e}");
        }
    }

    const BASELINE: &str = r#"
[baseline]
name = "OpenBLAS"
file = "baseline.c"
libs = ["openblas"]

[baseline.install.openblas]
name = "OpenBLAS"
debian = "libopenblas-dev"
"#;

    #[test]
    fn a_baseline_names_how_to_install_its_libraries() {
        let text = format!("{GOOD}{BASELINE}");
        let spec = parse_task(&text, "t/task.toml").unwrap();
        let b = spec.baseline.as_ref().unwrap();
        assert_eq!(
            b.install["openblas"],
            InstallHint {
                name: "OpenBLAS".into(),
                debian: Some("libopenblas-dev".into()),
                pip: None,
            }
        );
        let written = toml::to_string(&spec).unwrap();
        assert_eq!(parse_task(&written, "round-trip").unwrap(), spec);
        // The hint is optional, and so is its package.
        let bare = text.replace("debian = \"libopenblas-dev\"\n", "");
        let spec = parse_task(&bare, "t/task.toml").unwrap();
        assert_eq!(spec.baseline.unwrap().install["openblas"].debian, None);
        let none = text.replace("[baseline.install.openblas]\nname = \"OpenBLAS\"\n", "");
        let none = none.replace("debian = \"libopenblas-dev\"\n", "");
        assert!(
            parse_task(&none, "t/task.toml")
                .unwrap()
                .baseline
                .unwrap()
                .install
                .is_empty()
        );
    }

    #[test]
    fn install_hints_are_checked_at_their_field() {
        let text = format!("{GOOD}{BASELINE}");
        let cases: &[(&str, &str, &str, &str)] = &[
            (
                "debian = \"libopenblas-dev\"",
                "apt = \"libopenblas-dev\"",
                "baseline.install.openblas.apt",
                "unknown field `apt`",
            ),
            (
                "[baseline.install.openblas]",
                "[baseline.install.blas]",
                "baseline.install.blas",
                "not one of this baseline's `libs` (openblas)",
            ),
            (
                "debian = \"libopenblas-dev\"",
                "debian = \"libopenblas-dev; rm -rf ~\"",
                "baseline.install.openblas.debian",
                "not a Debian package name",
            ),
            (
                "[baseline.install.openblas]\nname = \"OpenBLAS\"",
                "[baseline.install.openblas]\nname = \" \"",
                "baseline.install.openblas.name",
                "the name users know it by",
            ),
        ];
        for (from, to, field, message) in cases {
            assert!(text.contains(from), "fixture lacks {from}");
            let e = err(&text.replacen(from, to, 1));
            assert_eq!(e.field, *field, "{e}");
            assert!(e.message.contains(message), "{e}");
            let line = e.location.expect("a location").line;
            assert!(line > GOOD.lines().count(), "{e}");
            assert!(e.to_string().starts_with("t/task.toml:"), "{e}");
        }
        // Comparisons are held to the same rules.
        let comparison = BASELINE
            .replace("[baseline]", "[[comparisons]]")
            .replace("[baseline.install.openblas]", "[comparisons.install.blis]");
        let e = err(&format!("{GOOD}{comparison}"));
        assert_eq!(e.field, "comparisons[0].install.blis");
        assert!(e.message.contains("comparison's `libs`"), "{e}");
    }

    #[test]
    fn one_workload_is_not_enough() {
        let text = GOOD.replace(
            "[[workloads]]\nname = \"big\"\naxes = { rows = 64, cols = 1024 }\n",
            "",
        );
        let e = err(&text);
        assert_eq!(e.field, "workloads");
        assert!(e.message.contains("at least two"), "{e}");
    }
}

/// Small specs for tests in this crate and downstream ones.
#[doc(hidden)]
pub mod tests_support {
    use super::*;

    pub fn matmul_spec() -> TaskSpec {
        let tensor = |name: &str, shape: [&str; 2]| TensorSpec {
            name: name.into(),
            shape: shape.iter().map(|s| (*s).to_owned()).collect(),
            dtype: Dtype::F32,
            init: None,
            description: None,
        };
        let workload = |name: &str, m: i64, n: i64, k: i64| Workload {
            name: name.into(),
            axes: [("m", m), ("n", n), ("k", k)]
                .iter()
                .map(|(a, v)| ((*a).to_owned(), *v))
                .collect(),
        };
        TaskSpec {
            format: TASK_FORMAT,
            name: "matmul".into(),
            description: "C = A B".into(),
            class: KernelClass::Matmul,
            backend: BackendKind::C,
            axes: vec!["m".into(), "n".into(), "k".into()],
            derived: BTreeMap::new(),
            inputs: vec![tensor("a", ["m", "k"]), tensor("b", ["k", "n"])],
            outputs: vec![tensor("c", ["m", "n"])],
            workloads: vec![workload("small", 8, 8, 8), workload("square", 64, 64, 64)],
            tolerance: BTreeMap::new(),
            reference: SourceRef {
                file: "reference.c".into(),
            },
            seed: SourceRef {
                file: "seed.c".into(),
            },
            baseline: None,
            comparisons: Vec::new(),
            space: None,
            origin: None,
            build: None,
            worker: None,
        }
    }
}

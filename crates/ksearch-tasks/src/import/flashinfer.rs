//! A FlashInfer-Bench Definition (and optionally its workloads, JSON lines of Workloads or
//! Traces) as a `torch` task: const axes become derived constants, `AXIS == expression`
//! constraints derived axes, `AXIS == T[-1]` constraints offsets inputs; the definition's
//! `reference` is the task's reference and its naive seed; FlashInfer-Bench's dtypes map to
//! ksearch's (bf16 and fp8 included). `export` writes a Solution back.

use std::collections::{BTreeMap, BTreeSet};

use ksearch_core::axis_expr::AxisExpr;
use ksearch_core::dtype::Dtype;
use ksearch_core::task::{
    BackendKind, BaselineRef, Init, KernelClass, Origin, SourceRef, Suite, TASK_FORMAT, TaskSpec,
    TensorSpec, Tolerance, Workload,
};

use super::{ImportError, Json, TaskFiles, identifier, task_toml};

/// At most this many workloads are kept from a trace (spread over their sizes): each one is
/// checked and timed in every evaluation.
pub const MAX_WORKLOADS: usize = 6;
/// The values every free `var` axis takes when no workloads are given.
const GENERATED: [(&str, i64); 2] = [("small", 32), ("large", 1024)];

/// The FlashInfer-Bench dtype names and ksearch's.
fn dtype(name: &str) -> Option<Dtype> {
    Some(match name {
        "float32" => Dtype::F32,
        "float16" => Dtype::F16,
        "bfloat16" => Dtype::Bf16,
        "float8_e4m3fn" => Dtype::F8e4m3,
        "float8_e5m2" => Dtype::F8e5m2,
        "int64" => Dtype::I64,
        "int32" => Dtype::I32,
        "int16" => Dtype::I16,
        "int8" => Dtype::I8,
        "bool" => Dtype::Bool,
        _ => return None,
    })
}

fn class_of(op_type: &str) -> KernelClass {
    let t = op_type.to_ascii_lowercase();
    if t.contains("gemm") || t.contains("matmul") || t.contains("linear") {
        KernelClass::Matmul
    } else if t.contains("gqa") || t.contains("mla") || t.contains("attention") || t.contains("dsa")
    {
        KernelClass::Attention
    } else if t.contains("norm") {
        KernelClass::Normalization
    } else if t.contains("rope") || t.contains("silu") || t.contains("act") {
        KernelClass::Elementwise
    } else {
        KernelClass::Other
    }
}

struct Tensor {
    name: String,
    shape: Vec<String>,
    dtype: Dtype,
}

/// How `make_inputs` makes one input (see fib_make_inputs.py).
#[derive(Debug, Clone, PartialEq)]
enum Kind {
    Random,
    Const(f64),
    Offsets { total: String },
    Indices { bound: String },
    PageLen { bound: String },
    Lengths { of: String },
}

fn tensors(def: &Json, key: &str, file: &str, axes: &[String]) -> Result<Vec<Tensor>, ImportError> {
    let members = def
        .get(key)
        .and_then(Json::members)
        .ok_or_else(|| ImportError::new(file, key, "must be an object of tensors"))?;
    let mut out = Vec::new();
    for (name, t) in members {
        let at = format!("{key}.{name}");
        let shape = match t.get("shape") {
            None => return Err(ImportError::new(file, format!("{at}.shape"), "is missing")),
            // A scalar (null) and a 0-d tensor ([]) are both 0-d tensors here.
            Some(Json::Null) => Vec::new(),
            Some(Json::Array(dims)) => dims
                .iter()
                .enumerate()
                .map(|(i, d)| match d.as_str() {
                    Some(a) if axes.iter().any(|x| x == a) => Ok(a.to_owned()),
                    Some(a) => Err(ImportError::new(
                        file,
                        format!("{at}.shape[{i}]"),
                        format!("`{a}` is not one of the definition's axes"),
                    )),
                    None => Err(ImportError::new(
                        file,
                        format!("{at}.shape[{i}]"),
                        format!("is {}, not an axis name", d.kind()),
                    )),
                })
                .collect::<Result<_, _>>()?,
            Some(other) => {
                return Err(ImportError::new(
                    file,
                    format!("{at}.shape"),
                    format!("is {}, not a list of axis names or null", other.kind()),
                ));
            }
        };
        let dname = t
            .get("dtype")
            .and_then(Json::as_str)
            .ok_or_else(|| ImportError::new(file, format!("{at}.dtype"), "is missing"))?;
        let dtype = dtype(dname).ok_or_else(|| {
            ImportError::new(file, format!("{at}.dtype"), format!("`{dname}` has no ksearch dtype (ksearch has float32, float16, bfloat16, float8_e4m3fn, float8_e5m2, int64, int32, int16, int8, bool)"))
        })?;
        if identifier(name) != *name {
            return Err(ImportError::new(
                file,
                at,
                "the name is not a Python identifier",
            ));
        }
        out.push(Tensor {
            name: name.clone(),
            shape,
            dtype,
        });
    }
    if out.is_empty() {
        return Err(ImportError::new(file, key, "declares no tensor"));
    }
    Ok(out)
}

/// A constraint's two sides, when it is an equation.
fn sides(c: &str) -> Option<(&str, &str)> {
    let (l, r) = c.split_once("==").or_else(|| {
        let (l, r) = c.split_once('=')?;
        (!l.ends_with(['<', '>', '!']) && !r.starts_with('=')).then_some((l, r))
    })?;
    Some((l.trim(), r.trim()))
}

/// `T[-1]` or `T[-1].item()` (or `int(...)` around it): the tensor's name.
fn last_element(s: &str) -> Option<&str> {
    let s = s
        .strip_prefix("int(")
        .and_then(|s| s.strip_suffix(')'))
        .unwrap_or(s)
        .trim();
    let s = s.strip_suffix(".item()").unwrap_or(s).trim();
    let name = s.strip_suffix("[-1]")?.trim();
    (identifier(name) == name).then_some(name)
}

/// `expr` with const axes replaced by their values and `//` by `/` (ksearch's `/` floors).
fn substitute(expr: &str, consts: &BTreeMap<String, i64>) -> String {
    let expr = expr.replace("//", "/");
    let mut out = String::new();
    let mut word = String::new();
    let flush = |word: &mut String, out: &mut String| {
        if let Some(v) = consts.get(word.as_str()) {
            out.push_str(&format!("({v})"));
        } else {
            out.push_str(word);
        }
        word.clear();
    };
    for c in expr.chars() {
        if c.is_ascii_alphanumeric() || c == '_' {
            word.push(c);
        } else {
            flush(&mut word, &mut out);
            out.push(c);
        }
    }
    flush(&mut word, &mut out);
    out
}

/// The parts of a definition that become a task.
struct Parsed {
    name: String,
    description: String,
    op_type: String,
    axes: Vec<String>,
    vars: Vec<String>,
    derived: BTreeMap<String, String>,
    offsets: BTreeMap<String, String>,
    inputs: Vec<Tensor>,
    outputs: Vec<Tensor>,
    reference: String,
}

fn parse(text: &str, file: &str) -> Result<Parsed, ImportError> {
    let def = Json::parse(text).map_err(|e| ImportError::new(file, "(json)", e))?;
    let field = |k: &str| def.get(k);
    let name = field("name")
        .and_then(Json::as_str)
        .ok_or_else(|| ImportError::new(file, "name", "is missing (a Definition has a name)"))?
        .to_owned();
    let reference = field("reference")
        .and_then(Json::as_str)
        .ok_or_else(|| {
            ImportError::new(
                file,
                "reference",
                "is missing (a Definition's reference is Python with a `run`)",
            )
        })?
        .to_owned();
    if !reference.lines().any(|l| l.starts_with("def run(")) {
        return Err(ImportError::new(
            file,
            "reference",
            "defines no top-level `def run(...)`",
        ));
    }
    let op_type = field("op_type")
        .or_else(|| field("type"))
        .and_then(Json::as_str)
        .unwrap_or("")
        .to_owned();
    let description = field("description")
        .and_then(Json::as_str)
        .unwrap_or(&name)
        .to_owned();
    let axes_json = field("axes")
        .and_then(Json::members)
        .ok_or_else(|| ImportError::new(file, "axes", "must be an object of axes"))?;
    let mut axes = Vec::new();
    let mut consts = BTreeMap::new();
    let mut vars = Vec::new();
    for (a, spec) in axes_json {
        if identifier(a) != *a {
            return Err(ImportError::new(
                file,
                format!("axes.{a}"),
                "the name is not an identifier",
            ));
        }
        match spec.get("type").and_then(Json::as_str) {
            Some("const") => {
                let v = spec.get("value").and_then(Json::as_i64).ok_or_else(|| {
                    ImportError::new(
                        file,
                        format!("axes.{a}.value"),
                        "a const axis needs an integer value",
                    )
                })?;
                consts.insert(a.clone(), v);
            }
            Some("var") => vars.push(a.clone()),
            Some(other) => {
                return Err(ImportError::new(
                    file,
                    format!("axes.{a}.type"),
                    format!("`{other}` is not an axis type ksearch can express (const, var)"),
                ));
            }
            None => {
                return Err(ImportError::new(
                    file,
                    format!("axes.{a}.type"),
                    "is missing",
                ));
            }
        }
        axes.push(a.clone());
    }
    let inputs = tensors(&def, "inputs", file, &axes)?;
    let outputs = tensors(&def, "outputs", file, &axes)?;
    let mut derived: BTreeMap<String, String> = consts
        .iter()
        .map(|(k, v)| (k.clone(), v.to_string()))
        .collect();
    let mut offsets = BTreeMap::new();
    let constraints = match field("constraints") {
        None | Some(Json::Null) => Vec::new(),
        Some(Json::Array(list)) => list.clone(),
        Some(other) => {
            return Err(ImportError::new(
                file,
                "constraints",
                format!("is {}, not a list", other.kind()),
            ));
        }
    };
    for (i, c) in constraints.iter().enumerate() {
        let at = format!("constraints[{i}]");
        let c = c
            .as_str()
            .ok_or_else(|| ImportError::new(file, &at, "is not a string"))?;
        let cannot = || {
            ImportError::new(
                file,
                &at,
                format!(
                    "`{c}` cannot be expressed: ksearch understands `AXIS == expression of axes` and `AXIS == TENSOR[-1].item()`"
                ),
            )
        };
        let (l, r) = sides(c).ok_or_else(cannot)?;
        let (axis, other) = if vars.iter().any(|v| v == l) {
            (l, r)
        } else if vars.iter().any(|v| v == r) {
            (r, l)
        } else {
            // Between consts only: it holds or the definition is wrong.
            let lhs = AxisExpr::parse(&substitute(l, &consts))
                .ok()
                .and_then(|e| e.eval(&BTreeMap::new()).ok());
            let rhs = AxisExpr::parse(&substitute(r, &consts))
                .ok()
                .and_then(|e| e.eval(&BTreeMap::new()).ok());
            match (lhs, rhs) {
                (Some(a), Some(b)) if a == b => continue,
                (Some(a), Some(b)) => {
                    return Err(ImportError::new(
                        file,
                        &at,
                        format!("`{c}` does not hold for the const axes ({a} ≠ {b})"),
                    ));
                }
                _ => return Err(cannot()),
            }
        };
        if let Some(t) = last_element(other) {
            let tensor = inputs.iter().find(|x| x.name == t).ok_or_else(cannot)?;
            if tensor.shape.len() != 1 || tensor.dtype.is_float() {
                return Err(ImportError::new(
                    file,
                    &at,
                    format!(
                        "`{t}` is not a 1-d integer tensor, so its last element cannot be an axis"
                    ),
                ));
            }
            offsets.insert(t.to_owned(), axis.to_owned());
            continue;
        }
        let expr = substitute(other, &consts);
        let parsed = AxisExpr::parse(&expr).map_err(|_| cannot())?;
        if parsed
            .axes()
            .iter()
            .any(|a| !vars.iter().any(|v| v == a) || derived.contains_key(*a) || *a == axis)
        {
            return Err(ImportError::new(
                file,
                &at,
                format!(
                    "`{c}` cannot be expressed: `{axis}` would follow from an axis that itself follows from others"
                ),
            ));
        }
        if derived.insert(axis.to_owned(), expr).is_some() {
            return Err(ImportError::new(
                file,
                &at,
                format!("`{axis}` is constrained twice"),
            ));
        }
    }
    Ok(Parsed {
        name,
        description,
        op_type,
        axes,
        vars,
        derived,
        offsets,
        inputs,
        outputs,
        reference,
    })
}

/// How each input is made; `make_inputs` is needed when any is structured.
fn kinds(
    p: &Parsed,
    scalars: &BTreeMap<String, f64>,
    file: &str,
) -> Result<Vec<Kind>, ImportError> {
    let mut out = Vec::new();
    for t in &p.inputs {
        let kind = if let Some(total) = p.offsets.get(&t.name) {
            Kind::Offsets {
                total: total.clone(),
            }
        } else if let Some(v) = scalars.get(&t.name) {
            Kind::Const(*v)
        } else if !t.dtype.is_float() && t.dtype != Dtype::Bool && !t.shape.is_empty() {
            let n = t.name.as_str();
            let stem = n.rsplit_once('_').map_or("", |(s, _)| s);
            let paired = p
                .offsets
                .keys()
                .any(|o| o.rsplit_once('_').map_or("", |(s, _)| s) == stem);
            let pages = ["num_pages", "num_blocks", "max_num_pages"]
                .into_iter()
                .find(|a| p.axes.iter().any(|x| x == a));
            if (n.ends_with("indices") || n.ends_with("page_ids") || n.ends_with("block_table"))
                && paired
                && pages.is_some()
            {
                Kind::Indices {
                    bound: pages.unwrap_or_default().to_owned(),
                }
            } else if n.contains("last_page_len") && p.axes.iter().any(|a| a == "page_size") {
                Kind::PageLen {
                    bound: "page_size".into(),
                }
            } else if let Some(of) =
                (n.ends_with("len_arr") || n.ends_with("lens") || n.ends_with("seq_lens"))
                    .then(|| {
                        p.offsets
                            .keys()
                            .find(|o| o.contains("kv"))
                            .or(p.offsets.keys().next())
                    })
                    .flatten()
            {
                Kind::Lengths { of: of.clone() }
            } else if n.contains("indptr")
                || n.contains("indices")
                || n.ends_with("_ids")
                || n.contains("offset")
            {
                return Err(ImportError::new(
                    file,
                    format!("inputs.{n}"),
                    format!(
                        "`{n}` looks like an index or offsets tensor, but no constraint ties its values to an axis (as `AXIS == {n}[-1].item()` does for offsets), and random integers would index out of bounds"
                    ),
                ));
            } else {
                Kind::Random
            }
        } else {
            Kind::Random
        };
        out.push(kind);
    }
    Ok(out)
}

/// A workload's axis values.
type Axes = BTreeMap<String, i64>;

/// Workloads from JSON lines (Workloads or Traces): their var axes, and the values of scalar
/// inputs (which must be the same in every workload kept).
fn read_workloads(
    p: &Parsed,
    text: &str,
    file: &str,
    notes: &mut Vec<String>,
) -> Result<(Vec<Axes>, BTreeMap<String, f64>), ImportError> {
    let free: Vec<&String> = p
        .vars
        .iter()
        .filter(|v| !p.derived.contains_key(*v))
        .collect();
    let mut seen = BTreeSet::new();
    let mut all = Vec::new();
    let mut scalars: BTreeMap<String, (f64, usize)> = BTreeMap::new();
    let mut stored = BTreeSet::new();
    for (i, line) in text.lines().enumerate() {
        let at = |f: &str| {
            format!(
                "line {}{}",
                i + 1,
                if f.is_empty() {
                    String::new()
                } else {
                    format!(", field `{f}`")
                }
            )
        };
        if line.trim().is_empty() {
            continue;
        }
        let j = Json::parse(line).map_err(|e| ImportError::new(file, at(""), e))?;
        if let Some(d) = j.get("definition").and_then(Json::as_str)
            && d != p.name
        {
            continue;
        }
        let w = j.get("workload").unwrap_or(&j);
        let axes = w
            .get("axes")
            .and_then(Json::members)
            .ok_or_else(|| ImportError::new(file, at("workload.axes"), "is missing"))?;
        let mut values = BTreeMap::new();
        for (a, v) in axes {
            if !p.vars.contains(a) {
                return Err(ImportError::new(
                    file,
                    at(&format!("workload.axes.{a}")),
                    format!("`{a}` is not a var axis of `{}`", p.name),
                ));
            }
            let v = v.as_i64().filter(|v| *v >= 0).ok_or_else(|| {
                ImportError::new(
                    file,
                    at(&format!("workload.axes.{a}")),
                    "is not a non-negative integer",
                )
            })?;
            values.insert(a.clone(), v);
        }
        if let Some(a) = free.iter().find(|a| !values.contains_key(**a)) {
            return Err(ImportError::new(
                file,
                at("workload.axes"),
                format!("var axis `{a}` has no value"),
            ));
        }
        for (name, input) in w.get("inputs").and_then(Json::members).unwrap_or(&[]) {
            match input.get("type").and_then(Json::as_str) {
                Some("scalar") => {
                    let v = input.get("value").and_then(Json::as_f64).ok_or_else(|| {
                        ImportError::new(
                            file,
                            at(&format!("workload.inputs.{name}.value")),
                            "a scalar input needs a number",
                        )
                    })?;
                    match scalars.get(name) {
                        Some((old, line)) if *old != v => {
                            return Err(ImportError::new(
                                file,
                                at(&format!("workload.inputs.{name}.value")),
                                format!(
                                    "is {v}, but line {line} gives {old}: a scalar input takes one value in a ksearch task"
                                ),
                            ));
                        }
                        _ => {
                            scalars.insert(name.clone(), (v, i + 1));
                        }
                    }
                }
                Some("safetensors") => {
                    stored.insert(name.clone());
                }
                Some("random") | None => {}
                Some(other) => {
                    return Err(ImportError::new(
                        file,
                        at(&format!("workload.inputs.{name}.type")),
                        format!(
                            "`{other}` is not an input source ksearch knows (random, scalar, safetensors)"
                        ),
                    ));
                }
            }
        }
        if seen.insert(values.clone()) {
            all.push(values);
        }
    }
    if !stored.is_empty() {
        notes.push(format!(
            "inputs {} were stored tensors (safetensors) in {file}: ksearch draws fresh inputs for every call instead",
            stored.iter().map(|s| format!("`{s}`")).collect::<Vec<_>>().join(", ")
        ));
    }
    if all.is_empty() {
        return Err(ImportError::new(
            file,
            "(lines)",
            format!("holds no workload of `{}`", p.name),
        ));
    }
    let size = |w: &BTreeMap<String, i64>| w.values().map(|v| (*v).max(1) as f64).product::<f64>();
    all.sort_by(|a, b| size(a).total_cmp(&size(b)));
    if all.len() > MAX_WORKLOADS {
        let n = all.len();
        let keep: Vec<usize> = (0..MAX_WORKLOADS)
            .map(|k| k * (n - 1) / (MAX_WORKLOADS - 1))
            .collect();
        notes.push(format!("{file} holds {n} distinct workloads; kept {MAX_WORKLOADS}, spread from the smallest to the largest"));
        all = keep.into_iter().map(|k| all[k].clone()).collect();
    }
    if all.len() == 1 {
        notes.push("the trace holds one workload: it is used twice (as `…` and `…-again`), since a task has at least two".into());
        let again = all[0].clone();
        all.push(again);
    }
    Ok((all, scalars.into_iter().map(|(k, (v, _))| (k, v)).collect()))
}

fn workload_name(p: &Parsed, axes: &BTreeMap<String, i64>) -> String {
    let parts: Vec<String> = p
        .vars
        .iter()
        .filter(|v| !p.derived.contains_key(*v))
        .filter_map(|v| axes.get(v).map(|x| format!("{v}{x}")))
        .collect();
    if parts.is_empty() {
        "default".into()
    } else {
        parts.join("_")
    }
}

fn plan(p: &Parsed, kinds: &[Kind]) -> String {
    let items: Vec<String> = p
        .inputs
        .iter()
        .zip(kinds)
        .map(|(t, k)| {
            let shape: Vec<String> = t.shape.iter().map(|a| format!("{a:?}")).collect();
            let extra = match k {
                Kind::Random => "\"kind\": \"random\"".to_owned(),
                Kind::Const(v) => format!("\"kind\": \"const\", \"value\": {v:?}"),
                Kind::Offsets { total } => format!("\"kind\": \"offsets\", \"total\": {total:?}"),
                Kind::Indices { bound } => format!("\"kind\": \"indices\", \"bound\": {bound:?}"),
                Kind::PageLen { bound } => format!("\"kind\": \"page_len\", \"bound\": {bound:?}"),
                Kind::Lengths { of } => format!("\"kind\": \"lengths\", \"of\": {of:?}"),
            };
            format!(
                "    {{\"name\": {:?}, \"shape\": [{}], \"dtype\": {:?}, {extra}}},",
                t.name,
                shape.join(", "),
                t.dtype.name()
            )
        })
        .collect();
    format!("[\n{}\n]", items.join("\n"))
}

/// The task for a definition (`definition` is the file's text, `file` its name for errors), with
/// the workloads of `workloads` (text and file name) or generated ones.
pub fn import(
    definition: &str,
    file: &str,
    workloads: Option<(&str, &str)>,
) -> Result<TaskFiles, ImportError> {
    let p = parse(definition, file)?;
    let mut notes = Vec::new();
    let (axis_values, scalars) = match workloads {
        Some((text, wfile)) => read_workloads(&p, text, wfile, &mut notes)?,
        None => {
            let free: Vec<&String> = p
                .vars
                .iter()
                .filter(|v| !p.derived.contains_key(*v))
                .collect();
            notes.push(format!(
                "no workloads given: generated two, with every var axis ({}) {} and {}",
                free.iter()
                    .map(|s| format!("`{s}`"))
                    .collect::<Vec<_>>()
                    .join(", "),
                GENERATED[0].1,
                GENERATED[1].1
            ));
            (
                GENERATED
                    .iter()
                    .map(|(_, v)| free.iter().map(|a| ((*a).clone(), *v)).collect())
                    .collect(),
                BTreeMap::new(),
            )
        }
    };
    let kinds = kinds(&p, &scalars, file)?;
    let structured = kinds
        .iter()
        .any(|k| !matches!(k, Kind::Random | Kind::Const(_)));
    let mut names = BTreeSet::new();
    let workloads: Vec<Workload> = axis_values
        .iter()
        .map(|a| {
            let mut name = workload_name(&p, a);
            while !names.insert(name.clone()) {
                name.push_str("-again");
            }
            Workload {
                name,
                axes: a.clone(),
            }
        })
        .collect();
    let mut dtypes = BTreeSet::new();
    let inputs: Vec<TensorSpec> = p
        .inputs
        .iter()
        .zip(&kinds)
        .map(|(t, k)| TensorSpec {
            name: t.name.clone(),
            shape: t.shape.clone(),
            dtype: t.dtype,
            init: Some(match (k, t.dtype) {
                (Kind::Const(v), d) if d.is_float() => Init::Uniform([*v, *v]),
                (Kind::Const(v), _) => Init::Randint([*v as i64, *v as i64]),
                (_, Dtype::Bool) => Init::Randint([0, 1]),
                (_, d) if d.is_float() => Init::Normal([0.0, 1.0]),
                (_, Dtype::I8) => Init::Randint([-128, 127]),
                _ => Init::Randint([-1024, 1023]),
            }),
            description: None,
        })
        .collect();
    let outputs: Vec<TensorSpec> = p
        .outputs
        .iter()
        .map(|t| {
            dtypes.insert(t.dtype);
            TensorSpec {
                name: t.name.clone(),
                shape: t.shape.clone(),
                dtype: t.dtype,
                init: None,
                description: None,
            }
        })
        .collect();
    // FlashInfer-Bench's default tolerance (atol = rtol = 1e-2) for every float output.
    let tolerance = dtypes
        .into_iter()
        .filter(|d| d.is_float())
        .map(|d| {
            let fib = Tolerance {
                atol: 1e-2,
                rtol: 1e-2,
                norm_rtol: 1e-2,
            };
            let default = Tolerance::default_for(d);
            (
                d,
                if default.rtol > fib.rtol {
                    default
                } else {
                    fib
                },
            )
        })
        .collect();
    let name = identifier(&p.name);
    let baseline = matmul_baseline(&p);
    let spec = TaskSpec {
        format: TASK_FORMAT,
        name: name.clone(),
        description: p.description.clone(),
        class: class_of(&p.op_type),
        backend: BackendKind::Torch,
        axes: p.axes.clone(),
        derived: p.derived.clone(),
        inputs,
        outputs,
        workloads,
        tolerance,
        reference: SourceRef {
            file: "reference.py".into(),
        },
        seed: SourceRef {
            file: "seed.py".into(),
        },
        baseline: baseline.as_ref().map(|_| BaselineRef {
            name: "cuBLAS (torch.matmul)".into(),
            file: "baseline.py".into(),
            libs: Vec::new(),
            install: BTreeMap::new(),
            env: BTreeMap::new(),
        }),
        comparisons: Vec::new(),
        space: None,
        origin: Some(Origin {
            suite: Suite::FlashinferBench,
            name: p.name.clone(),
            file: "definition.json".into(),
        }),
        worker: None,
    };
    let header = format!(
        "# Imported by `ksearch import flashinfer-bench` from the FlashInfer-Bench definition `{}`\n# (definition.json beside this file). Const axes are derived constants.",
        p.name
    );
    let (toml, spec) = task_toml(&spec, &header, file)?;
    let mut reference = p.reference.clone();
    if structured {
        reference
            .push_str(&include_str!("fib_make_inputs.py").replace("{plan}", &plan(&p, &kinds)));
        let made: Vec<String> = p
            .inputs
            .iter()
            .zip(&kinds)
            .filter(|(_, k)| !matches!(k, Kind::Random | Kind::Const(_)))
            .map(|(t, _)| format!("`{}`", t.name))
            .collect();
        notes.push(format!(
            "inputs {} are made by make_inputs in reference.py (offsets, indices, lengths)",
            made.join(", ")
        ));
    }
    let mut files = vec![
        ("task.toml".to_owned(), toml),
        ("reference.py".to_owned(), reference),
        (
            "seed.py".to_owned(),
            format!(
                "# The naive seed: the definition's own reference.\n{}",
                p.reference
            ),
        ),
        ("definition.json".to_owned(), definition.to_owned()),
    ];
    if let Some(b) = baseline {
        files.push(("baseline.py".to_owned(), b));
    }
    Ok(TaskFiles {
        name,
        spec,
        files,
        notes,
    })
}

/// `C = A @ B.T` (the FlashInfer-Bench GEMM) through `torch.matmul`, which runs cuBLAS.
fn matmul_baseline(p: &Parsed) -> Option<String> {
    if !class_of(&p.op_type).eq(&KernelClass::Matmul) || p.inputs.len() != 2 || p.outputs.len() != 1
    {
        return None;
    }
    let (a, b, c) = (&p.inputs[0], &p.inputs[1], &p.outputs[0]);
    let nt = a.shape.len() == 2
        && b.shape.len() == 2
        && c.shape.len() == 2
        && a.shape[1] == b.shape[1]
        && c.shape == [a.shape[0].clone(), b.shape[0].clone()];
    nt.then(|| {
        format!(
            "import torch\n\n\ndef run({a}, {b}):\n    return torch.matmul({a}, {b}.T).to({dtype})\n",
            a = a.name,
            b = b.name,
            dtype = torch_dtype(c.dtype)
        )
    })
}

fn torch_dtype(d: Dtype) -> &'static str {
    match d {
        Dtype::F16 => "torch.float16",
        Dtype::Bf16 => "torch.bfloat16",
        Dtype::F32 => "torch.float32",
        Dtype::F64 => "torch.float64",
        Dtype::I32 => "torch.int32",
        Dtype::I64 => "torch.int64",
        Dtype::F8e4m3 => "torch.float8_e4m3fn",
        Dtype::F8e5m2 => "torch.float8_e5m2",
        Dtype::I8 => "torch.int8",
        Dtype::I16 => "torch.int16",
        Dtype::Bool => "torch.bool",
    }
}

/// A FlashInfer-Bench Solution (JSON) for a torch candidate of a task imported from a
/// definition: the candidate as `main.py`, with a `run` taking the definition's inputs in order
/// (the axes the candidate's `run` names are read from their shapes).
pub fn solution(spec: &TaskSpec, candidate: &str, name: &str, author: &str) -> Option<String> {
    let origin = spec
        .origin
        .as_ref()
        .filter(|o| o.suite == Suite::FlashinferBench)?;
    let inputs: Vec<&str> = spec.inputs.iter().map(|t| t.name.as_str()).collect();
    let mut axes = Vec::new();
    for a in &spec.axes {
        let at = spec.inputs.iter().find_map(|t| {
            t.shape
                .iter()
                .position(|d| d == a)
                .map(|i| (t.name.as_str(), i))
        });
        if let Some((t, i)) = at {
            axes.push(format!("{a:?}: {t}.shape[{i}]"));
        } else if let Some(v) = spec.derived.get(a).filter(|v| v.parse::<i64>().is_ok()) {
            axes.push(format!("{a:?}: {v}"));
        }
    }
    let shim = format!(
        "\n\n# --- Added by `ksearch export`: FlashInfer-Bench calls run with the definition's inputs.\n\
         import inspect as _ksearch_inspect\n_ksearch_run = run\n_ksearch_names = set(_ksearch_inspect.signature(_ksearch_run).parameters)\n\n\n\
         def run({args}):\n    axes = {{{axes}}}\n    return _ksearch_run({args}, **{{k: v for k, v in axes.items() if k in _ksearch_names}})\n",
        args = inputs.join(", "),
        axes = axes.join(", ")
    );
    let language = if candidate.contains("triton") {
        "triton"
    } else if candidate.contains("load_inline") || candidate.contains("load_cu") {
        "cuda"
    } else {
        "python"
    };
    let doc = serde_json::json!({
        "name": name,
        "definition": origin.name,
        "author": author,
        "description": format!("Found by ksearch on the task `{}`.", spec.name),
        "spec": {
            "language": language,
            "target_hardware": ["cuda"],
            "entry_point": "main.py::run",
            "dependencies": [],
            "destination_passing_style": false
        },
        "sources": [{"path": "main.py", "content": format!("{candidate}{shim}")}]
    });
    serde_json::to_string_pretty(&doc).ok()
}

//! The Definition itself: its axes, tensors and constraints, and how each input is made.

use std::collections::BTreeMap;

use ksearch_core::axis_expr::AxisExpr;
use ksearch_core::dtype::Dtype;

use crate::import::{ImportError, Json, identifier};

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

pub(super) struct Tensor {
    pub(super) name: String,
    pub(super) shape: Vec<String>,
    pub(super) dtype: Dtype,
}

/// How `make_inputs` makes one input (see fib_make_inputs.py).
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Kind {
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
pub(super) struct Parsed {
    pub(super) name: String,
    pub(super) description: String,
    pub(super) op_type: String,
    pub(super) axes: Vec<String>,
    pub(super) vars: Vec<String>,
    pub(super) derived: BTreeMap<String, String>,
    pub(super) offsets: BTreeMap<String, String>,
    pub(super) inputs: Vec<Tensor>,
    pub(super) outputs: Vec<Tensor>,
    pub(super) reference: String,
}

pub(super) fn parse(text: &str, file: &str) -> Result<Parsed, ImportError> {
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
pub(super) fn kinds(
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

pub(super) fn plan(p: &Parsed, kinds: &[Kind]) -> String {
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

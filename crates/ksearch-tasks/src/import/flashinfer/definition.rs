//! The Definition itself: its axes, tensors and constraints, and how each input is made.

use std::collections::BTreeMap;

use ksearch_core::axis_expr::AxisExpr;
use ksearch_core::dtype::Dtype;

use super::constraints::{self, Check, Constraints, substitute};
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
    /// Marked `"optional": true`: the reference also runs without it (ksearch always gives it).
    pub(super) optional: bool,
}

/// How `make_inputs` makes one input (see fib_make_inputs.py).
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Kind {
    Random,
    Const(f64),
    Offsets {
        total: String,
    },
    Indices {
        bound: String,
    },
    PageLen {
        bound: String,
    },
    Lengths {
        of: String,
    },
    /// From `least` (an axis; 1 when none) to the product of the axes `most`.
    UpTo {
        most: Vec<String>,
        least: Option<String>,
    },
}

/// The most elements (tokens) a sequence may hold, as a product of axes: its pages times their
/// size, else a `max_seq_len`.
fn longest(p: &Parsed) -> Option<Vec<String>> {
    let has = |a: &str| p.axes.iter().any(|x| x == a);
    if has("max_num_pages") && has("page_size") {
        Some(vec!["max_num_pages".into(), "page_size".into()])
    } else {
        ["max_seq_len", "max_seqlen", "max_len"]
            .into_iter()
            .find(|a| has(a))
            .map(|a| vec![a.to_owned()])
    }
}

/// The axes as the tensors' shapes read them: a shape may name an axis, or give a number or an
/// expression of axes, which become an axis of their own (const, or derived).
struct Shapes<'a> {
    axes: &'a mut Vec<String>,
    consts: &'a mut BTreeMap<String, i64>,
    vars: &'a [String],
    /// The definition's axis names ksearch changed (an axis named like a tensor).
    renames: &'a BTreeMap<String, String>,
    /// Axes made from expressions of var axes in shapes.
    derived: BTreeMap<String, String>,
}

impl Shapes<'_> {
    /// The axis for dimension `i` of tensor `tensor`, given as `d`.
    fn dim(
        &mut self,
        tensor: &str,
        i: usize,
        d: &Json,
        file: &str,
        at: &str,
    ) -> Result<String, ImportError> {
        let new_name = |axes: &[String]| {
            let mut name = format!("{tensor}_{i}");
            while axes.contains(&name) {
                name.push('_');
            }
            name
        };
        if let Some(a) = d.as_str() {
            let a = self.renames.get(a).map_or(a, String::as_str);
            if self.axes.iter().any(|x| x == a) {
                return Ok(a.to_owned());
            }
            let not_axis = || {
                ImportError::new(
                    file,
                    at,
                    format!(
                        "`{a}` is not one of the definition's axes, nor an integer expression of them"
                    ),
                )
            };
            let text = substitute(a, self.consts, self.renames, &[]).ok_or_else(not_axis)?;
            let e = AxisExpr::parse(&text).map_err(|_| not_axis())?;
            if e.axes().iter().any(|x| !self.vars.iter().any(|v| v == x)) {
                return Err(not_axis());
            }
            let name = new_name(self.axes);
            if e.axes().is_empty() {
                let v = e
                    .eval(&BTreeMap::new())
                    .ok()
                    .filter(|v| *v > 0)
                    .ok_or_else(|| {
                        ImportError::new(file, at, format!("`{a}` is not a positive size"))
                    })?;
                self.consts.insert(name.clone(), v);
            } else {
                self.derived.insert(name.clone(), text);
            }
            self.axes.push(name.clone());
            return Ok(name);
        }
        match d.as_i64() {
            Some(v) if v > 0 => {
                let name = new_name(self.axes);
                self.consts.insert(name.clone(), v);
                self.axes.push(name.clone());
                Ok(name)
            }
            _ => Err(ImportError::new(
                file,
                at,
                format!("is {}, not an axis name or a positive size", d.kind()),
            )),
        }
    }
}

fn tensors(
    def: &Json,
    key: &str,
    file: &str,
    shapes: &mut Shapes<'_>,
) -> Result<Vec<Tensor>, ImportError> {
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
                .map(|(i, d)| shapes.dim(name, i, d, file, &format!("{at}.shape[{i}]")))
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
            optional: t.get("optional") == Some(&Json::Bool(true)),
        });
    }
    if out.is_empty() {
        return Err(ImportError::new(file, key, "declares no tensor"));
    }
    Ok(out)
}

/// Calls that make a reference's outputs random (sampling definitions).
const RANDOM_DRAWS: [&str; 6] = [
    "torch.multinomial",
    "torch.rand(",
    "torch.rand_like",
    "torch.randn",
    "torch.bernoulli",
    ".exponential_(",
];

/// The parts of a definition that become a task.
pub(super) struct Parsed {
    pub(super) name: String,
    pub(super) description: String,
    pub(super) op_type: String,
    pub(super) axes: Vec<String>,
    pub(super) vars: Vec<String>,
    pub(super) derived: BTreeMap<String, String>,
    pub(super) offsets: BTreeMap<String, String>,
    /// Relations between axes every workload must satisfy.
    pub(super) checks: Vec<Check>,
    /// The definition's axis names that ksearch changed (an axis named like a tensor).
    pub(super) renames: BTreeMap<String, String>,
    pub(super) inputs: Vec<Tensor>,
    pub(super) outputs: Vec<Tensor>,
    pub(super) reference: String,
}

pub(super) fn parse(text: &str, file: &str) -> Result<Parsed, ImportError> {
    let def = Json::parse(text).map_err(|e| ImportError::new(file, "(json)", e))?;
    if let Json::Array(list) = &def {
        return Err(ImportError::new(
            file,
            "(json)",
            format!(
                "is a list of {} definitions: ksearch imports one Definition (an object) per file",
                list.len()
            ),
        ));
    }
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
    if let Some(draw) = RANDOM_DRAWS.iter().find(|d| reference.contains(*d)) {
        return Err(ImportError::new(
            file,
            "reference",
            format!(
                "draws random numbers (`{draw}`): its outputs are random samples, so no comparison with it can tell a right kernel from a wrong one"
            ),
        ));
    }
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
    // An axis named like a tensor is renamed (`k` → `k_axis`): one name, one thing, in a task.
    let tensor_names: Vec<&str> = ["inputs", "outputs"]
        .into_iter()
        .filter_map(|k| def.get(k).and_then(Json::members))
        .flatten()
        .map(|(n, _)| n.as_str())
        .collect();
    let mut renames = BTreeMap::new();
    for (a, _) in axes_json {
        if tensor_names.contains(&a.as_str()) {
            let mut new = format!("{a}_axis");
            while axes_json.iter().any(|(b, _)| *b == new) || tensor_names.contains(&new.as_str()) {
                new.push('_');
            }
            renames.insert(a.clone(), new);
        }
    }
    let mut axes = Vec::new();
    let mut consts = BTreeMap::new();
    let mut vars = Vec::new();
    for (a0, spec) in axes_json {
        let a = renames.get(a0).unwrap_or(a0);
        if identifier(a) != *a {
            return Err(ImportError::new(
                file,
                format!("axes.{a0}"),
                "the name is not an identifier",
            ));
        }
        match spec.get("type").and_then(Json::as_str) {
            Some("const") => {
                let v = spec.get("value").and_then(Json::as_i64).ok_or_else(|| {
                    ImportError::new(
                        file,
                        format!("axes.{a0}.value"),
                        "a const axis needs an integer value",
                    )
                })?;
                consts.insert(a.clone(), v);
            }
            Some("var") => vars.push(a.clone()),
            Some(other) => {
                return Err(ImportError::new(
                    file,
                    format!("axes.{a0}.type"),
                    format!("`{other}` is not an axis type ksearch can express (const, var)"),
                ));
            }
            None => {
                return Err(ImportError::new(
                    file,
                    format!("axes.{a0}.type"),
                    "is missing",
                ));
            }
        }
        axes.push(a.clone());
    }
    let mut shapes = Shapes {
        axes: &mut axes,
        consts: &mut consts,
        vars: &vars,
        renames: &renames,
        derived: BTreeMap::new(),
    };
    let inputs = tensors(&def, "inputs", file, &mut shapes)?;
    let outputs = tensors(&def, "outputs", file, &mut shapes)?;
    let shape_derived = shapes.derived;
    let Constraints {
        derived,
        offsets,
        checks,
    } = constraints::read(
        field("constraints"),
        file,
        &vars,
        &consts,
        &renames,
        &shape_derived,
        &inputs,
        &outputs,
    )?;
    Ok(Parsed {
        name,
        description,
        op_type,
        axes,
        vars,
        derived,
        offsets,
        checks,
        renames,
        inputs,
        outputs,
        reference,
    })
}

/// A scalar input's value when no workload gives one: a const axis's of the same name (a
/// definition's `k` input beside its `k` axis), else 1 (1e-6 for an epsilon).
pub(super) fn scalar_default(p: &Parsed, t: &Tensor) -> f64 {
    let axis = p.renames.get(&t.name).unwrap_or(&t.name);
    if let Some(v) = p.derived.get(axis).and_then(|v| v.parse::<f64>().ok()) {
        return v;
    }
    if t.dtype.is_float() && t.name.to_ascii_lowercase().contains("eps") {
        1e-6
    } else {
        1.0
    }
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
        } else if t.shape.is_empty() {
            Kind::Const(scalar_default(p, t))
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
            // Positions index a cache's rows (rope's `positions` into `cos_sin_cache`).
            let positions = n
                .contains("position")
                .then(|| {
                    p.inputs
                        .iter()
                        .find(|x| x.name.contains("cache") && x.dtype.is_float())
                        .and_then(|x| x.shape.first().cloned())
                        .or_else(|| p.axes.iter().find(|a| a.starts_with("max_")).cloned())
                })
                .flatten();
            if (n.ends_with("indices") || n.ends_with("page_ids") || n.ends_with("block_table"))
                && paired
                && pages.is_some()
            {
                Kind::Indices {
                    bound: pages.unwrap_or_default().to_owned(),
                }
            } else if let Some(bound) = positions {
                Kind::Indices { bound }
            } else if (n.contains("block_table") || n.contains("page_table"))
                && let Some(pages) = pages
            {
                // A sequence's pages: indices into the cache's pages.
                Kind::Indices {
                    bound: pages.to_owned(),
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
            } else if let Some(most) = (n.ends_with("lens") || n.ends_with("len_arr"))
                .then(|| longest(p))
                .flatten()
            {
                // Sequence lengths with no offsets: up to the most a sequence may hold, and at
                // least `topk` where there is one (shorter, a top-k pads with -inf).
                Kind::UpTo {
                    most,
                    least: p.axes.iter().find(|a| *a == "topk").cloned(),
                }
            } else if n.contains("indptr")
                || n.ends_with("lens")
                || n.contains("indices")
                || n.contains("position")
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
                Kind::UpTo { most, least } => format!(
                    "\"kind\": \"up_to\", \"most\": {most:?}, \"least\": {}",
                    least
                        .as_ref()
                        .map_or("None".to_owned(), |l| format!("{l:?}"))
                ),
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

//! A KernelBench problem (`Model`, `get_inputs`, `get_init_inputs`) as a `torch` task. What the
//! problem makes (shapes, dtypes, the model's arguments) is only known by running it: the binary
//! runs [`PROBE`] (on PyTorch's meta device) and hands its JSON here. Candidates are KernelBench's
//! `ModelNew` as is; the baseline is the problem's `Model` in PyTorch eager, and `torch.compile` of
//! it is a comparison.

use std::collections::{BTreeMap, BTreeSet};

use ksearch_core::dtype::Dtype;
use ksearch_core::task::{
    BackendKind, BaselineRef, KernelClass, Origin, SourceRef, Suite, TASK_FORMAT, TaskSpec,
    TensorSpec, Tolerance, Workload,
};

use super::{ImportError, Json, TaskFiles, identifier, task_toml};

/// The script the binary runs as `python3 - PROBLEM.py` (stdin): one JSON object on stdout.
pub const PROBE: &str = include_str!("kernelbench_probe.py");

fn torch_dtype(name: &str) -> Option<Dtype> {
    Some(match name {
        "float32" => Dtype::F32,
        "float16" => Dtype::F16,
        "bfloat16" => Dtype::Bf16,
        "float64" => Dtype::F64,
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

struct Shaped {
    shape: Vec<i64>,
    dtype: Dtype,
}

struct Run {
    name: String,
    globals: BTreeMap<String, i64>,
    init: Json,
    inputs: Vec<Shaped>,
    outputs: Vec<Shaped>,
    /// What `get_inputs` returns that is not a tensor: its position among `forward`'s
    /// arguments, and its value.
    constants: Vec<(usize, Json)>,
}

fn copy(list: &[Shaped]) -> Vec<Shaped> {
    list.iter()
        .map(|s| Shaped {
            shape: s.shape.clone(),
            dtype: s.dtype,
        })
        .collect()
}

fn shaped(list: Option<&Json>, what: &str, file: &str) -> Result<Vec<Shaped>, ImportError> {
    let Some(Json::Array(items)) = list else {
        return Err(ImportError::new(
            file,
            what,
            "the probe reported no tensors",
        ));
    };
    items
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let at = format!("{what}[{i}]");
            let shape = match t.get("shape") {
                Some(Json::Array(d)) => d
                    .iter()
                    .map(|x| x.as_i64().filter(|v| *v > 0))
                    .collect::<Option<Vec<_>>>(),
                _ => None,
            }
            .ok_or_else(|| {
                ImportError::new(
                    file,
                    &at,
                    "has an empty or unknown shape (a dimension of size 0 cannot be checked)",
                )
            })?;
            let d = t.get("dtype").and_then(Json::as_str).unwrap_or("?");
            let dtype = torch_dtype(d).ok_or_else(|| {
                ImportError::new(file, &at, format!("dtype `{d}` has no ksearch dtype"))
            })?;
            Ok(Shaped { shape, dtype })
        })
        .collect()
}

fn constants(
    list: Option<&Json>,
    what: &str,
    file: &str,
) -> Result<Vec<(usize, Json)>, ImportError> {
    let Some(Json::Array(items)) = list else {
        return Ok(Vec::new());
    };
    items
        .iter()
        .enumerate()
        .map(|(i, c)| match c {
            Json::Array(pair) if pair.len() == 2 => pair[0]
                .as_i64()
                .and_then(|p| usize::try_from(p).ok())
                .map(|p| (p, pair[1].clone()))
                .ok_or_else(|| ImportError::new(file, format!("{what}[{i}]"), "has no position")),
            _ => Err(ImportError::new(
                file,
                format!("{what}[{i}]"),
                "is not a [position, value] pair",
            )),
        })
        .collect()
}

/// `v` as Python writes it (for the task's description).
fn python_literal(v: &Json) -> String {
    match v {
        Json::Null => "None".into(),
        Json::Bool(b) => if *b { "True" } else { "False" }.into(),
        Json::Int(i) => i.to_string(),
        Json::Float(f) => format!("{f:?}"),
        Json::Str(s) => format!("{s:?}"),
        Json::Array(_) | Json::Object(_) => v.kind().into(),
    }
}

/// The task for a problem: `problem` is its text, `file` its name (for errors and the task's
/// name), `probe` the JSON [`PROBE`] printed for it.
pub fn import(problem: &str, file: &str, probe: &str) -> Result<TaskFiles, ImportError> {
    let j = Json::parse(probe).map_err(|e| {
        ImportError::new(
            file,
            "(probe)",
            format!("the probe's answer is not JSON: {e}"),
        )
    })?;
    if let Some(err) = j.get("error").and_then(Json::as_str) {
        let field = j.get("field").and_then(Json::as_str).unwrap_or("(module)");
        return Err(ImportError::new(file, field, err));
    }
    let globals: Vec<(String, i64)> = j
        .get("globals")
        .and_then(Json::members)
        .unwrap_or(&[])
        .iter()
        .filter_map(|(k, v)| v.as_i64().map(|v| (k.clone(), v)))
        .collect();
    let forward: Vec<String> = match j.get("forward") {
        Some(Json::Array(a)) => a
            .iter()
            .filter_map(|x| x.as_str().map(str::to_owned))
            .collect(),
        _ => Vec::new(),
    };
    let mut runs = Vec::new();
    for (i, w) in (match j.get("workloads") {
        Some(Json::Array(a)) => a.as_slice(),
        _ => &[],
    })
    .iter()
    .enumerate()
    {
        let at = format!("workloads[{i}]");
        runs.push(Run {
            name: w
                .get("name")
                .and_then(Json::as_str)
                .unwrap_or("kernelbench")
                .to_owned(),
            globals: w
                .get("globals")
                .and_then(Json::members)
                .unwrap_or(&[])
                .iter()
                .filter_map(|(k, v)| v.as_i64().map(|v| (k.clone(), v)))
                .collect(),
            init: w
                .get("init_inputs")
                .cloned()
                .unwrap_or(Json::Array(Vec::new())),
            inputs: shaped(w.get("inputs"), &format!("{at}.inputs"), file)?,
            outputs: shaped(w.get("outputs"), &format!("{at}.outputs"), file)?,
            constants: constants(w.get("constants"), &format!("{at}.constants"), file)?,
        });
    }
    let mut notes = Vec::new();
    if runs.is_empty() {
        return Err(ImportError::new(
            file,
            "get_inputs",
            "the problem made no workload",
        ));
    }
    let first = Run {
        name: String::new(),
        globals: BTreeMap::new(),
        init: runs[0].init.clone(),
        inputs: copy(&runs[0].inputs),
        outputs: copy(&runs[0].outputs),
        constants: runs[0].constants.clone(),
    };
    if first.inputs.is_empty() {
        return Err(ImportError::new(
            file,
            "get_inputs",
            "returns no tensor: a task has at least one input",
        ));
    }
    // A second workload must have the same tensors, dtypes and model arguments.
    let same = |r: &Run| {
        r.inputs.len() == first.inputs.len()
            && r.outputs.len() == first.outputs.len()
            && r.inputs
                .iter()
                .zip(&first.inputs)
                .all(|(a, b)| a.dtype == b.dtype && a.shape.len() == b.shape.len())
            && r.outputs
                .iter()
                .zip(&first.outputs)
                .all(|(a, b)| a.dtype == b.dtype && a.shape.len() == b.shape.len())
            && r.init == first.init
            && r.constants == first.constants
    };
    runs.retain(|r| same(r));
    if runs.len() < 2 {
        let why = j.get("small_error").and_then(Json::as_str).map_or(
            "the module has no `batch_size` of 4 or more to scale".to_owned(),
            |e| format!("a quarter of `batch_size` failed: {e}"),
        );
        notes.push(format!(
            "one workload only ({why}): it is used twice, since a task has at least two"
        ));
        let again = Run {
            name: "kernelbench-again".into(),
            globals: runs[0].globals.clone(),
            init: runs[0].init.clone(),
            inputs: copy(&runs[0].inputs),
            outputs: copy(&runs[0].outputs),
            constants: runs[0].constants.clone(),
        };
        runs.push(again);
    }
    // Tensor names: forward's parameters (else x0, x1, …), outputs `out` (or out0, out1, …).
    let n_in = runs[0].inputs.len();
    let n_out = runs[0].outputs.len();
    let mut used = BTreeSet::new();
    let fresh = |want: String, used: &mut BTreeSet<String>| {
        let mut name = identifier(&want);
        if matches!(name.as_str(), "input" | "int" | "float" | "main")
            || name.starts_with("ksearch_")
        {
            name = format!("{name}_");
        }
        while !used.insert(name.clone()) {
            name.push('_');
        }
        name
    };
    // Each tensor's position among forward's arguments: the constants hold the others.
    let constants = &runs[0].constants;
    let positions: Vec<usize> = (0..n_in + constants.len())
        .filter(|p| !constants.iter().any(|(c, _)| c == p))
        .collect();
    let in_names: Vec<String> = (0..n_in)
        .map(|i| {
            fresh(
                forward
                    .get(positions[i])
                    .cloned()
                    .filter(|n| !n.starts_with('*'))
                    .unwrap_or_else(|| format!("x{i}")),
                &mut used,
            )
        })
        .collect();
    let out_names: Vec<String> = (0..n_out)
        .map(|i| {
            fresh(
                if n_out == 1 {
                    "out".into()
                } else {
                    format!("out{i}")
                },
                &mut used,
            )
        })
        .collect();
    // Axes: one per distinct (value in each workload), named after a module global with those
    // values where there is one, else after the first tensor dimension that has it.
    let mut axes: Vec<String> = Vec::new();
    let mut by_values: BTreeMap<Vec<i64>, String> = BTreeMap::new();
    let mut shapes: Vec<Vec<String>> = Vec::new();
    let tensors: Vec<(String, usize, bool)> = in_names
        .iter()
        .enumerate()
        .map(|(i, n)| (n.clone(), i, true))
        .chain(
            out_names
                .iter()
                .enumerate()
                .map(|(i, n)| (n.clone(), i, false)),
        )
        .collect();
    for (tname, i, is_input) in &tensors {
        let dims = if *is_input {
            runs[0].inputs[*i].shape.len()
        } else {
            runs[0].outputs[*i].shape.len()
        };
        let mut shape = Vec::new();
        for d in 0..dims {
            let values: Vec<i64> = runs
                .iter()
                .map(|r| {
                    if *is_input {
                        r.inputs[*i].shape[d]
                    } else {
                        r.outputs[*i].shape[d]
                    }
                })
                .collect();
            let axis = by_values.entry(values.clone()).or_insert_with(|| {
                // A global whose value in every workload (its own, or the module's) is this one.
                let global = globals.iter().find(|(g, base)| {
                    runs.iter()
                        .zip(&values)
                        .all(|(r, v)| r.globals.get(g).unwrap_or(base) == v)
                });
                let want = global.map_or(format!("{tname}_{d}"), |(g, _)| g.clone());
                let name = fresh(want, &mut used);
                axes.push(name.clone());
                name
            });
            shape.push(axis.clone());
        }
        shapes.push(shape);
    }
    let axis_values: Vec<BTreeMap<String, i64>> = (0..runs.len())
        .map(|k| {
            by_values
                .iter()
                .map(|(vals, name)| (name.clone(), vals[k]))
                .collect()
        })
        .collect();
    let global_axes: Vec<String> = axes
        .iter()
        .filter(|a| globals.iter().any(|(g, _)| g == *a))
        .cloned()
        .collect();
    if runs.len() > 1
        && axis_values[0] == axis_values[1]
        && !notes.iter().any(|n| n.starts_with("one workload"))
    {
        notes.push("scaling `batch_size` changed no tensor's shape".into());
    }
    let workloads: Vec<Workload> = runs
        .iter()
        .zip(&axis_values)
        .map(|(r, a)| Workload {
            name: r.name.clone(),
            axes: a.clone(),
        })
        .collect();
    let mut dtypes = BTreeSet::new();
    let inputs: Vec<TensorSpec> = in_names
        .iter()
        .enumerate()
        .map(|(i, n)| TensorSpec {
            name: n.clone(),
            shape: shapes[i].clone(),
            dtype: runs[0].inputs[i].dtype,
            init: None,
            description: Some("made by the problem's get_inputs".into()),
        })
        .collect();
    let outputs: Vec<TensorSpec> = out_names
        .iter()
        .enumerate()
        .map(|(i, n)| {
            dtypes.insert(runs[0].outputs[i].dtype);
            TensorSpec {
                name: n.clone(),
                shape: shapes[n_in + i].clone(),
                dtype: runs[0].outputs[i].dtype,
                init: None,
                description: None,
            }
        })
        .collect();
    // KernelBench's check: torch.allclose with atol = rtol = 1e-2.
    let tolerance = dtypes
        .into_iter()
        .filter(|d| d.is_float())
        .map(|d| {
            let kb = Tolerance {
                atol: 1e-2,
                rtol: 1e-2,
                norm_rtol: 1e-2,
            };
            let default = Tolerance::default_for(d);
            (d, if default.rtol > kb.rtol { default } else { kb })
        })
        .collect();
    let stem = file
        .rsplit(['/', '\\'])
        .next()
        .unwrap_or(file)
        .trim_end_matches(".py");
    let name = identifier(&format!(
        "kernelbench_{}",
        stem.trim_end_matches('_').to_ascii_lowercase()
    ));
    let implementation = |n: &str, f: &str| BaselineRef {
        name: n.into(),
        file: f.into(),
        libs: Vec::new(),
        modules: Vec::new(),
        install: BTreeMap::new(),
        env: BTreeMap::new(),
    };
    let spec = TaskSpec {
        format: TASK_FORMAT,
        name: name.clone(),
        description: format!(
            "KernelBench problem {stem}: its Model, on the inputs of its get_inputs.{}",
            if constants.is_empty() {
                String::new()
            } else {
                format!(
                    " `forward` also takes, where get_inputs puts them, these constants (passed as they are, never changed): {}.",
                    constants
                        .iter()
                        .map(|(p, v)| format!(
                            "`{}` = {} (argument {})",
                            forward.get(*p).map_or("?", String::as_str),
                            python_literal(v),
                            p + 1
                        ))
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            }
        ),
        class: class_of(problem),
        backend: BackendKind::Torch,
        axes,
        derived: BTreeMap::new(),
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
        baseline: Some(implementation("PyTorch eager", "baseline.py")),
        comparisons: vec![implementation("torch.compile", "compiled.py")],
        space: None,
        origin: Some(Origin {
            suite: Suite::Kernelbench,
            name: stem.to_owned(),
            file: "problem.py".into(),
        }),
        worker: None,
        build: None,
    };
    let header = format!(
        "# Imported by `ksearch import kernelbench` from {stem}.py (problem.py beside this file)."
    );
    let (toml, spec) = task_toml(&spec, &header, file)?;
    let set: Vec<String> = global_axes.iter().map(|a| format!("{a:?}")).collect();
    let reference = format!(
        "{problem}{}",
        include_str!("kernelbench_reference.py")
            .replace("{globals}", &format!("[{}]", set.join(", ")))
    );
    let files = vec![
        ("task.toml".to_owned(), toml),
        ("reference.py".to_owned(), reference),
        (
            "seed.py".to_owned(),
            format!("{problem}\n\n# The naive seed: the problem's own model.\nModelNew = Model\n"),
        ),
        ("baseline.py".to_owned(), problem.to_owned()),
        (
            "compiled.py".to_owned(),
            format!(
                "{problem}\n\n# torch.compile of the problem's model (a comparison).\ndef ModelNew(*args):\n    import torch as _torch\n\n    return _torch.compile(Model(*args))\n"
            ),
        ),
        ("problem.py".to_owned(), problem.to_owned()),
    ];
    Ok(TaskFiles {
        name,
        spec,
        files,
        notes,
    })
}

fn class_of(problem: &str) -> KernelClass {
    let p = problem.to_ascii_lowercase();
    if p.contains("conv") {
        KernelClass::Convolution
    } else if p.contains("attention") || p.contains("softmax(q") {
        KernelClass::Attention
    } else if p.contains("matmul")
        || p.contains("nn.linear")
        || p.contains("torch.bmm")
        || p.contains("gemm")
    {
        KernelClass::Matmul
    } else if p.contains("norm") {
        KernelClass::Normalization
    } else if p.contains("cumsum") || p.contains("cumprod") || p.contains("scan") {
        KernelClass::Scan
    } else if p.contains("sum(")
        || p.contains("mean(")
        || p.contains("max(")
        || p.contains("softmax")
    {
        KernelClass::Reduction
    } else {
        KernelClass::Elementwise
    }
}

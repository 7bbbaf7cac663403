//! A FlashInfer-Bench Definition (and optionally its workloads, JSON lines of Workloads or
//! Traces) as a `torch` task: const axes become derived constants, `AXIS == expression`
//! constraints derived axes, `AXIS == T[-1]` constraints offsets inputs; the definition's
//! `reference` is the task's reference and its naive seed; FlashInfer-Bench's dtypes map to
//! ksearch's (bf16 and fp8 included). `export` writes a Solution back.

use std::collections::{BTreeMap, BTreeSet};

use ksearch_core::dtype::Dtype;
use ksearch_core::task::{
    BackendKind, BaselineRef, Init, KernelClass, MAX_TENSOR_ELEMENTS, Origin, SourceRef, Suite,
    TASK_FORMAT, TaskSpec, TensorSpec, Tolerance, Workload,
};

use super::{ImportError, TaskFiles, identifier, task_toml};

mod constraints;
mod definition;
mod solution;
mod workloads;

use definition::{Kind, Parsed, kinds, parse, plan};
pub use solution::solution;
use workloads::{read_workloads, workload_name};

/// At most this many workloads are kept from a trace (spread over their sizes): each one is
/// checked and timed in every evaluation.
pub const MAX_WORKLOADS: usize = 6;
/// How many elements (tokens) each range of a generated offsets input holds on average.
const OFFSET_SPREAD: i64 = 16;
/// The values every free `var` axis takes when no workloads are given.
const GENERATED: [(&str, i64); 2] = [("small", 32), ("large", 1024)];
/// At most this many for an axis that counts sequences (the length of an offsets input, or an
/// axis it is derived from) in a generated workload: the suite's references loop over their
/// sequences in Python, a few small kernels and host reads each, and at 1024 sequences a ragged
/// prefill's reference took most of a second a call on an H100, so that its seed's evaluation
/// ran past 200 s. The large workload has longer sequences, not more of them.
const MOST_SEQUENCES: i64 = 32;

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
        None => (generate(&p, file, &mut notes)?, BTreeMap::new()),
    };
    let kinds = kinds(&p, &scalars, file)?;
    let defaulted: Vec<String> = p
        .inputs
        .iter()
        .zip(&kinds)
        .filter(|(t, _)| t.shape.is_empty() && !scalars.contains_key(&t.name))
        .map(|(t, k)| match k {
            Kind::Const(v) => format!("`{}` = {v}", t.name),
            _ => format!("`{}`", t.name),
        })
        .collect();
    if !defaulted.is_empty() {
        notes.push(format!(
            "scalar inputs no workload gave a value: {} (a workloads file with their values sets them)",
            defaulted.join(", ")
        ));
    }
    let optional: Vec<String> = p
        .inputs
        .iter()
        .filter(|t| t.optional)
        .map(|t| format!("`{}`", t.name))
        .collect();
    if !optional.is_empty() {
        notes.push(format!(
            "optional inputs {} are always given: the reference's path without them is not checked",
            optional.join(", ")
        ));
    }
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
            modules: Vec::new(),
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
        build: None,
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

/// Why the var axes `free` do not make a workload of `p`, if they do not.
enum Unfit {
    /// A constraint of the definition does not hold.
    Breaks(String),
    /// A tensor would be larger than a task may hold, or a derived size not positive.
    Size(String),
}

/// Whether the var axes `free` make a workload: every derived size positive, every relation of
/// the definition holding, every tensor within ksearch's limit.
fn fits(p: &Parsed, free: &BTreeMap<String, i64>) -> Result<(), Unfit> {
    let all = constraints::full_axes(&p.derived, free).map_err(Unfit::Size)?;
    let sizing = |a: &String| {
        p.inputs
            .iter()
            .chain(&p.outputs)
            .any(|t| t.shape.contains(a))
    };
    if let Some((a, v)) = all.iter().find(|(a, v)| **v < 1 && sizing(a)) {
        return Err(Unfit::Size(format!(
            "axis `{a}` would be {v}, and it sizes a tensor"
        )));
    }
    for c in &p.checks {
        match c.holds(&all) {
            Ok(true) => {}
            Ok(false) => return Err(Unfit::Breaks(format!("`{}` does not hold", c.text))),
            Err(e) => return Err(Unfit::Breaks(format!("`{}`: {e}", c.text))),
        }
    }
    for t in p.inputs.iter().chain(&p.outputs) {
        let n = elements(t, &all);
        if n > MAX_TENSOR_ELEMENTS {
            return Err(Unfit::Size(format!(
                "tensor `{}` would have {n} elements (ksearch's limit is {MAX_TENSOR_ELEMENTS})",
                t.name
            )));
        }
    }
    Ok(())
}

/// Elements of tensor `t` with the axes `all` (an axis without a value counts 1).
fn elements(t: &definition::Tensor, all: &BTreeMap<String, i64>) -> u128 {
    t.shape
        .iter()
        .map(|a| all.get(a).map_or(1, |v| (*v).max(0) as u128))
        .product()
}

/// Two workloads for a definition given none: every free var axis at one value, the first of
/// GENERATED's value, half, double, a quarter, … (1 to 65536) that satisfies the constraints and
/// keeps every tensor within the limit.
fn generate(
    p: &Parsed,
    file: &str,
    notes: &mut Vec<String>,
) -> Result<Vec<BTreeMap<String, i64>>, ImportError> {
    let free: Vec<&String> = p
        .vars
        .iter()
        .filter(|v| !p.derived.contains_key(*v))
        .collect();
    // An axis that is an offsets input's total (tokens over sequences) is OFFSET_SPREAD times the
    // others, so that each range (sequence) holds several: with one each, a kernel that reads
    // only a sequence's first token would pass. One that counts sequences stops at
    // MOST_SEQUENCES.
    let sequences = sequence_axes(p);
    let at = |v: i64| -> BTreeMap<String, i64> {
        free.iter()
            .map(|a| {
                let total = p.offsets.values().any(|t| t == *a);
                let value = if total {
                    v * OFFSET_SPREAD
                } else if sequences.contains(a.as_str()) {
                    v.min(MOST_SEQUENCES)
                } else {
                    v
                };
                ((*a).clone(), value)
            })
            .collect()
    };
    // A tensor of const sizes only is as large whatever the workload.
    if let Err(Unfit::Size(why)) = fits(p, &at(1))
        && let Ok(consts) = constraints::full_axes(&p.derived, &BTreeMap::new())
        && let Some(t) = p.inputs.iter().chain(&p.outputs).find(|t| {
            t.shape.iter().all(|a| consts.contains_key(a))
                && elements(t, &consts) > MAX_TENSOR_ELEMENTS
        })
    {
        return Err(ImportError::new(
            file,
            format!("inputs.{}", t.name),
            format!("{why}, whatever the workload (its sizes are all const)"),
        ));
    }
    let mut out = Vec::new();
    for (_, base) in GENERATED {
        let tries = (0..17)
            .flat_map(|k| [base >> k, base << k])
            .filter(|v| (1..=65536).contains(v));
        let mut first_failure = None;
        let found = tries.into_iter().find(|v| match fits(p, &at(*v)) {
            Ok(()) => true,
            Err(Unfit::Breaks(why) | Unfit::Size(why)) => {
                first_failure.get_or_insert(why);
                false
            }
        });
        match found {
            Some(v) => out.push(v),
            None => {
                return Err(ImportError::new(
                    file,
                    "axes",
                    format!(
                        "no workload could be generated (every var axis at one value from 1 to 65536; at {base}: {}): give workloads with --workloads FILE",
                        first_failure.unwrap_or_default()
                    ),
                ));
            }
        }
    }
    let counted: Vec<String> = free
        .iter()
        .filter(|a| sequences.contains(a.as_str()))
        .map(|a| format!("`{a}`"))
        .collect();
    notes.push(format!(
        "no workloads given: generated two, with every var axis ({}) {} and {}{}{}",
        free.iter()
            .map(|s| format!("`{s}`"))
            .collect::<Vec<_>>()
            .join(", "),
        out[0],
        out[1],
        if free.iter().any(|a| p.offsets.values().any(|t| t == *a)) {
            format!(" ({OFFSET_SPREAD} times that for offsets' totals)")
        } else {
            String::new()
        },
        if counted.is_empty() {
            String::new()
        } else {
            format!(
                ", and at most {MOST_SEQUENCES} for {} (it counts sequences, which the reference loops over one by one)",
                counted.join(", ")
            )
        }
    ));
    Ok(out.into_iter().map(at).collect())
}

/// The axes that count sequences: the length of an offsets input, and the axes that length is
/// derived from (`len_indptr = batch_size + 1`).
fn sequence_axes(p: &Parsed) -> BTreeSet<&str> {
    let mut out = BTreeSet::new();
    for t in p.inputs.iter().filter(|t| p.offsets.contains_key(&t.name)) {
        let Some(len) = t.shape.first() else { continue };
        out.insert(len.as_str());
        if let Some(expr) = p.derived.get(len) {
            out.extend(
                expr.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                    .filter(|w| p.vars.iter().any(|v| v == w)),
            );
        }
    }
    out
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

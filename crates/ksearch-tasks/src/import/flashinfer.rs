//! A FlashInfer-Bench Definition (and optionally its workloads, JSON lines of Workloads or
//! Traces) as a `torch` task: const axes become derived constants, `AXIS == expression`
//! constraints derived axes, `AXIS == T[-1]` constraints offsets inputs; the definition's
//! `reference` is the task's reference and its naive seed; FlashInfer-Bench's dtypes map to
//! ksearch's (bf16 and fp8 included). `export` writes a Solution back.

use std::collections::{BTreeMap, BTreeSet};

use ksearch_core::dtype::Dtype;
use ksearch_core::task::{
    BackendKind, BaselineRef, Init, KernelClass, Origin, SourceRef, Suite, TASK_FORMAT, TaskSpec,
    TensorSpec, Tolerance, Workload,
};

use super::{ImportError, TaskFiles, identifier, task_toml};

mod definition;
mod solution;
mod workloads;

use definition::{Kind, Parsed, kinds, parse, plan};
pub use solution::solution;
use workloads::{read_workloads, workload_name};

/// At most this many workloads are kept from a trace (spread over their sizes): each one is
/// checked and timed in every evaluation.
pub const MAX_WORKLOADS: usize = 6;
/// The values every free `var` axis takes when no workloads are given.
const GENERATED: [(&str, i64); 2] = [("small", 32), ("large", 1024)];

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

//! The Python packages of `ksearch export`: `<name>/__init__.py` exposes the op as a function
//! with the reference's arguments (the inputs, then the axes as keywords; an axis that sizes an
//! input defaults to that input's extent) and calls the candidate module beside it as the
//! backend's harness calls it.

use std::fmt::Write as _;

use ksearch_core::task::{Task, TaskSpec};

use super::{ExportFile, Provenance, summary_lines};

/// Python string literal text (for a docstring): backslashes doubled and triple quotes
/// escaped, so nothing ends the string early; control characters but newlines and tabs become
/// spaces (a NUL would make the module fail to compile).
fn py_doc(s: &str) -> String {
    let clean: String = s
        .chars()
        .map(|c| {
            if c.is_control() && c != '\n' && c != '\t' {
                ' '
            } else {
                c
            }
        })
        .collect();
    clean
        .replace('\\', "\\\\")
        .replace("\"\"\"", "\\\"\\\"\\\"")
}

/// A Python identifier from a task or tensor name.
fn py_ident(s: &str) -> String {
    let mut id: String = s
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if id.is_empty() || id.starts_with(|c: char| c.is_ascii_digit()) {
        id.insert(0, '_');
    }
    id
}

/// `<name>/__init__.py`: the op as a function with the reference's arguments (the inputs, then
/// the axes as keywords; an axis that sizes an input defaults to that input's extent), calling
/// the candidate's `run`. The candidate module is loaded as the harness loads it, with the
/// global `KSEARCH_TARGET` set: the `KSEARCH_TARGET` environment variable, else the target the
/// run measured on, else `cuda` when MLX has CUDA and `metal` otherwise. Importing without MLX
/// fails with an ImportError that says so.
pub fn mlx_init(spec: &TaskSpec, p: &Provenance) -> String {
    let name = py_ident(&spec.name);
    let call: Vec<String> = spec
        .inputs
        .iter()
        .map(|t| py_ident(&t.name))
        .chain(spec.axes.iter().map(|a| format!("{0}={0}", py_ident(a))))
        .collect();
    let target = match &p.toolchain.target {
        Some(t) => serde_json::to_string(t).unwrap_or_else(|_| "None".into()),
        None => "None".into(),
    };

    let mut doc = py_doc(&spec.description);
    doc.push_str("\n\n");
    for l in summary_lines(p) {
        doc.push_str(&py_doc(&l));
        doc.push('\n');
    }
    let function = op_function(
        spec,
        "mx.array",
        &format!("_candidate.run({})", call.join(", ")),
    );
    // The description last: its text is not searched for placeholders.
    include_str!("mlx_init.py")
        .replace("{name}", &name)
        .replace("{target}", &target)
        .replace("{function}\n", &function)
        .replace("{doc}", &doc)
}

/// `def <name>(inputs, *, axes):` with its docstring (`array` names the inputs' type), filling in
/// the axes an input sizes that the caller left out, then `return <ret>`.
fn op_function(spec: &TaskSpec, array: &str, ret: &str) -> String {
    // For each axis, the first input it sizes, and where.
    let sized_by = |axis: &str| {
        spec.inputs.iter().find_map(|t| {
            t.shape
                .iter()
                .position(|a| a == axis)
                .map(|i| (py_ident(&t.name), i))
        })
    };
    let mut params: Vec<String> = spec.inputs.iter().map(|t| py_ident(&t.name)).collect();
    if !spec.axes.is_empty() {
        params.push("*".into());
    }
    for a in &spec.axes {
        let a_id = py_ident(a);
        params.push(if sized_by(a).is_some() {
            format!("{a_id}=None")
        } else {
            a_id
        });
    }
    let mut o = String::new();
    let _ = writeln!(o, "def {}({}):", py_ident(&spec.name), params.join(", "));
    let _ = writeln!(o, "    \"\"\"{}.", py_doc(&spec.name));
    let _ = writeln!(o);
    let _ = writeln!(o, "    Inputs ({array}, row-major):");
    for t in &spec.inputs {
        let _ = writeln!(o, "        {}: {}[{}]", t.name, t.dtype, t.shape.join(", "));
    }
    let _ = writeln!(o, "    Returns:");
    for t in &spec.outputs {
        let _ = writeln!(o, "        {}: {}[{}]", t.name, t.dtype, t.shape.join(", "));
    }
    let _ = writeln!(o, "    \"\"\"");
    for a in &spec.axes {
        if let Some((input, i)) = sized_by(a) {
            let a_id = py_ident(a);
            let _ = writeln!(
                o,
                "    if {a_id} is None:\n        {a_id} = {input}.shape[{i}]"
            );
        }
    }
    let _ = writeln!(o, "    return {ret}");
    o
}

/// A Python list of strings.
fn py_list(items: impl IntoIterator<Item = String>) -> String {
    let quoted: Vec<String> = items
        .into_iter()
        .map(|s| serde_json::to_string(&s).unwrap_or_default())
        .collect();
    format!("[{}]", quoted.join(", "))
}

/// Whether the task's reference gives models their constructor arguments, as the harness asks
/// it (`init_inputs(**axes)`, or KernelBench's `get_init_inputs()`).
fn builds_models(reference: &str) -> bool {
    reference
        .lines()
        .any(|l| l.starts_with("def init_inputs(") || l.starts_with("def get_init_inputs("))
}

/// `<name>/__init__.py` of a torch task: the op calls the candidate as the harness does, through
/// the harness's own calling convention shipped beside it (`_calling.py`): `run` with the axes
/// its signature names, or `ModelNew` built after `torch.manual_seed(42)` with the reference's
/// constructor arguments for the axes. Outputs are one tensor, or a tuple in the task's order.
pub fn torch_init(spec: &TaskSpec, p: &Provenance) -> String {
    let mut doc = py_doc(&spec.description);
    doc.push_str("\n\n");
    for l in summary_lines(p) {
        doc.push_str(&py_doc(&l));
        doc.push('\n');
    }
    let axes: Vec<String> = spec
        .axes
        .iter()
        .map(|a| format!("{:?}: {}", a, py_ident(a)))
        .collect();
    let inputs: Vec<String> = spec.inputs.iter().map(|t| py_ident(&t.name)).collect();
    let function = op_function(
        spec,
        "torch.Tensor",
        &format!("_call([{}], {{{}}})", inputs.join(", "), axes.join(", ")),
    );
    // The description last: its text is not searched for placeholders.
    include_str!("torch_init.py")
        .replace("{name}", &py_ident(&spec.name))
        .replace(
            "{inputs}",
            &py_list(spec.inputs.iter().map(|t| t.name.clone())),
        )
        .replace(
            "{outputs}",
            &py_list(spec.outputs.iter().map(|t| t.name.clone())),
        )
        .replace("{function}\n", &function)
        .replace("{doc}", &doc)
}

/// The files of a torch task's package.
pub(super) fn torch_package(task: &Task, p: &Provenance, source: &str) -> Vec<ExportFile> {
    let dir = &task.spec.name;
    let mut files = vec![
        ExportFile {
            path: format!("{dir}/__init__.py"),
            text: torch_init(&task.spec, p),
        },
        ExportFile {
            path: format!("{dir}/_candidate.py"),
            text: source.to_owned(),
        },
        ExportFile {
            path: format!("{dir}/_calling.py"),
            text: include_str!("../../../../harness/ksearch_harness/torch_modules.py").to_owned(),
        },
    ];
    if builds_models(&task.reference.text) {
        files.push(ExportFile {
            path: format!("{dir}/_reference.py"),
            text: task.reference.text.clone(),
        });
    }
    files
}

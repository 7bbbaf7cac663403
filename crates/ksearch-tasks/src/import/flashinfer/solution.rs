//! The way back: a FlashInfer-Bench Solution for a candidate of an imported task.

use ksearch_core::task::{Suite, TaskSpec};

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

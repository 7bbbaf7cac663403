//! The best kernel of a run as something a user can drop into a project (`ksearch export`):
//!
//! - backend `c`: `<name>.h` (the documented prototype) and `<name>.c` (the kernel);
//! - backends `mlx` and `torch`: a Python package `<name>/` whose `__init__.py` exposes the op as
//!   a function with the reference's arguments, calling the candidate module as the harness
//!   does (`python`);
//!
//! plus `provenance.json`: where the kernel comes from and what it measured.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Component, Path, PathBuf};

use ksearch_core::backend::ExportLayout;
use ksearch_core::contract::c_signature;
use ksearch_core::protocol::{ErrorStats, Role, Status};
use ksearch_core::task::{Task, TaskSpec};
use ksearch_core::tree::{NodeId, ROOT};
use serde::Serialize;

use crate::data::{ReportError, RunData, run_id};

mod python;

pub use python::{mlx_init, torch_init};

/// One file of an export, with its path relative to the export directory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ExportFile {
    pub path: String,
    pub text: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct Export {
    /// Every file to write, `provenance.json` last.
    pub files: Vec<ExportFile>,
    pub provenance: Provenance,
}

/// Where an exported kernel comes from, and what it measured.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Provenance {
    pub exported_by: String,
    pub run: RunInfo,
    pub task: TaskInfo,
    pub kernel: KernelInfo,
    /// The machine the run measured on (`hardware` in provenance.json).
    #[serde(rename = "hardware")]
    pub machine: String,
    pub toolchain: Toolchain,
    pub libraries: Vec<Library>,
    pub models: Models,
    pub seeds: Seeds,
    pub measurements: Vec<Measurement>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunInfo {
    /// First 16 hex digits of the SHA-256 of the run's configuration and creation time.
    pub id: String,
    pub dir: String,
    pub created_unix: u64,
    pub ksearch_version: String,
    pub rounds: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TaskInfo {
    pub id: String,
    pub name: String,
    pub backend: String,
    /// SHA-256 of the `task.toml` text, when that file could be found and still describes the
    /// task the run recorded.
    pub task_toml_sha256: Option<String>,
    /// SHA-256 of the task as the run recorded it (JSON: spec and every source it names).
    pub recorded_task_sha256: String,
    /// What speedups are quoted against (with what it said it ran, where it describes itself).
    pub baseline: String,
    /// What the baseline said it ran when the run's seed was measured (for OpenBLAS: its
    /// build and the kernels it picked for the CPU), where it describes itself.
    pub baseline_description: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct KernelInfo {
    pub node: NodeId,
    pub title: String,
    /// Titles of the decisions from the seed down to this kernel.
    pub path: Vec<String>,
    pub round: u64,
    pub file: String,
    pub sha256: String,
    /// Over the task's baseline (geometric mean over workloads).
    pub speedup: Option<f64>,
    pub speedup_vs_seed: Option<f64>,
    /// Whether it is the run's best kernel (the export's default).
    pub best: bool,
    /// Whether it is the task's seed kernel (the best when nothing measured better).
    pub seed: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Toolchain {
    /// As the evaluation's compile report gave it (`cc --version`, first line; for `mlx`, the
    /// MLX version and device).
    pub compiler: Option<String>,
    pub compile_command: Option<String>,
    /// `mlx`: the GPU target the run measured on (`metal`, `cuda`), when it was set.
    pub target: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Library {
    pub name: String,
    pub used_by: String,
    /// `None`: the run did not record it.
    pub version: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Models {
    pub proposer: String,
    pub reasoning: Option<String>,
    pub codegen: Option<String>,
    pub base_url: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Seeds {
    /// Seed of the search's random choices.
    pub search: u64,
    /// First input seed of the correctness checks.
    pub input: u64,
    pub seed_kernel_file: String,
    pub seed_kernel_sha256: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Measurement {
    pub workload: String,
    pub axes: BTreeMap<String, i64>,
    pub status: Status,
    pub candidate: Option<Timing>,
    pub parent: Option<Timing>,
    pub baseline: Option<Timing>,
    pub speedup: Option<f64>,
    pub errors: Option<ErrorStats>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Timing {
    pub median_ms: f64,
    pub p10_ms: f64,
    pub p90_ms: f64,
    pub runs: usize,
    pub calls_per_sample: usize,
}

/// The `task.toml` text of the run's task, if it can still be found (built-in, or the
/// directory the run was started with) and still parses to the spec the run recorded.
pub fn find_task_toml(task: &Task) -> Option<String> {
    let id = task.id.trim_end_matches('/');
    let text = match ksearch_tasks::builtin_task_toml(id) {
        Some(t) => t.to_owned(),
        None => {
            let p = Path::new(id);
            let file = if p.is_dir() {
                p.join("task.toml")
            } else {
                p.to_owned()
            };
            ksearch_tasks::read_text(&file, ksearch_tasks::MAX_TOML_BYTES, "a task file").ok()?
        }
    };
    let spec = ksearch_core::parse_task(&text, "task.toml").ok()?;
    (spec == task.spec).then_some(text)
}

/// Export the run's best kernel, looking for the task's `task.toml` to hash.
pub fn export(data: &RunData) -> Result<Export, ReportError> {
    export_with(
        data,
        data.summary.best.node,
        find_task_toml(&data.task).as_deref(),
    )
}

/// Export the solution of node `id`; `task_toml` is the task file's text when known.
pub fn export_with(
    data: &RunData,
    id: NodeId,
    task_toml: Option<&str>,
) -> Result<Export, ReportError> {
    let node = data.node(id)?;
    let sol = node
        .solution
        .as_ref()
        .ok_or(ReportError::OpenNode { node: id })?;
    let source = data
        .sources
        .get(&sol.source_hash)
        .ok_or_else(|| ReportError::MissingSource {
            round: sol.round,
            hash: sol.source_hash.clone(),
        })?;
    let provenance = provenance(data, id, task_toml);
    let spec = &data.task.spec;
    let mut files = match spec.backend.backend().export_layout() {
        ExportLayout::CHeaderAndSource => vec![
            ExportFile {
                path: format!("{}.h", spec.name),
                text: c_header(spec, &provenance),
            },
            ExportFile {
                path: format!("{}.c", spec.name),
                text: c_source(spec, &provenance, source),
            },
        ],
        ExportLayout::MlxPackage => vec![
            ExportFile {
                path: format!("{}/__init__.py", spec.name),
                text: python::mlx_init(spec, &provenance),
            },
            ExportFile {
                path: format!("{}/_candidate.py", spec.name),
                text: source.clone(),
            },
        ],
        ExportLayout::TorchPackage => python::torch_package(&data.task, &provenance, source),
    };
    // A task imported from FlashInfer-Bench goes back as a Solution, too.
    if let Some(solution) = ksearch_tasks::import::flashinfer::solution(
        spec,
        source,
        &format!("ksearch_{}_node{id}", spec.name),
        "ksearch",
    ) {
        files.push(ExportFile {
            path: "solution.json".into(),
            text: solution + "\n",
        });
    }
    let mut json = serde_json::to_string_pretty(&provenance).unwrap_or_default();
    json.push('\n');
    files.push(ExportFile {
        path: "provenance.json".into(),
        text: json,
    });
    Ok(Export { files, provenance })
}

/// Whether `path` is a file of an export's layout: a plain name (`softmax.h`) or one inside the
/// package's directory (`softmax/__init__.py`); never a root, `.` or `..`.
fn in_layout(path: &str) -> bool {
    let parts: Vec<Component<'_>> = Path::new(path).components().collect();
    (1..=2).contains(&parts.len()) && parts.iter().all(|c| matches!(c, Component::Normal(_)))
}

/// Write an export under `dir` (created if needed); returns the paths written. Every file is
/// checked to lie in the export's layout before any is written (its names come from the run's
/// task), a package directory that is a link is refused, and each file goes through a
/// temporary file renamed over it (a link there is replaced, not written through).
pub fn write(export: &Export, dir: &Path) -> Result<Vec<PathBuf>, ReportError> {
    if let Some(f) = export.files.iter().find(|f| !in_layout(&f.path)) {
        return Err(ReportError::OutsideExport {
            path: f.path.clone(),
        });
    }
    fs_err::create_dir_all(dir)?;
    let mut written = Vec::new();
    for f in &export.files {
        let path = dir.join(&f.path);
        if let Some(sub) = Path::new(&f.path)
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
        {
            let sub = dir.join(sub);
            crate::output::refuse_link(&sub)?;
            if !sub.is_dir() {
                fs_err::create_dir(&sub)?;
            }
        }
        crate::output::write_file(&path, &f.text)?;
        written.push(path);
    }
    Ok(written)
}

fn timing(t: Option<&ksearch_core::stats::TimingStats>) -> Option<Timing> {
    t.map(|t| Timing {
        median_ms: t.median_ms,
        p10_ms: t.p10_ms,
        p90_ms: t.p90_ms,
        runs: t.runs,
        calls_per_sample: t.calls_per_sample,
    })
}

/// The provenance of node `id`'s solution.
pub fn provenance(data: &RunData, id: NodeId, task_toml: Option<&str>) -> Provenance {
    let node = data.tree.get(id).unwrap_or_else(|| data.tree.root());
    let sol = node.solution.as_ref();
    let speedup = sol.and_then(|s| s.speedup);
    let eval = data
        .solution_attempt(node.id)
        .and_then(|a| a.evaluation.as_ref());
    let compile = eval.and_then(|e| e.result.compile.as_ref());
    let measurements = eval
        .map(|e| {
            e.result
                .workloads
                .iter()
                .map(|w| Measurement {
                    workload: w.name.clone(),
                    axes: data
                        .task
                        .spec
                        .workload(&w.name)
                        .map(|wl| wl.axes.clone())
                        .unwrap_or_default(),
                    status: w.status,
                    candidate: timing(w.timing(Role::Candidate)),
                    parent: timing(w.timing(Role::Parent)),
                    baseline: timing(w.timing(Role::Baseline)),
                    speedup: e
                        .speedup
                        .as_ref()
                        .and_then(|s| s.workloads.iter().find(|s| s.workload == w.name))
                        .map(|s| s.speedup),
                    errors: w.errors,
                })
                .collect()
        })
        .unwrap_or_default();
    // The kernel's own library, as the worker described it (`mlx 0.29.1 on gpu (cuda)`).
    let kernel_lib = data
        .task
        .spec
        .backend
        .backend()
        .kernel_library()
        .zip(compile)
        .and_then(|(lib, c)| Some((lib, c.compiler.strip_prefix(lib)?.strip_prefix(' ')?)))
        .map(|(lib, rest)| Library {
            name: lib.into(),
            used_by: "kernel".into(),
            version: rest.split_whitespace().next().map(str::to_owned),
        });
    let libraries = kernel_lib
        .into_iter()
        .chain(data.task.baseline.iter().flat_map(|b| {
            b.libs.iter().map(|l| Library {
                name: l.clone(),
                used_by: format!("baseline ({})", b.name),
                version: None,
            })
        }))
        .collect();
    let task_json = serde_json::to_string(&data.task).unwrap_or_default();
    let seed = data.attempt(0);
    Provenance {
        exported_by: format!("ksearch {}", env!("CARGO_PKG_VERSION")),
        run: RunInfo {
            id: run_id(&data.config),
            dir: data.dir.display().to_string(),
            created_unix: data.config.created_unix,
            ksearch_version: data.config.ksearch_version.clone(),
            rounds: data.summary.rounds,
        },
        task: TaskInfo {
            id: data.task.id.clone(),
            name: data.task.spec.name.clone(),
            backend: data.task.spec.backend.name().into(),
            task_toml_sha256: task_toml.map(ksearch_store::content_hash),
            recorded_task_sha256: ksearch_store::content_hash(&task_json),
            baseline: data.summary.baseline.clone(),
            baseline_description: data.summary.baseline_description.clone(),
        },
        kernel: KernelInfo {
            node: node.id,
            title: ksearch_run::solution_title(node, &data.attempts),
            path: data
                .tree
                .path(node.id)
                .iter()
                .filter_map(|i| data.tree.get(*i))
                .map(|n| n.action.title.clone())
                .collect(),
            round: sol.map_or(0, |s| s.round),
            file: sol.map(|s| s.source_file.clone()).unwrap_or_default(),
            sha256: sol.map(|s| s.source_hash.clone()).unwrap_or_default(),
            speedup,
            speedup_vs_seed: data.tree.vs_seed(node.id),
            best: node.id == data.summary.best.node,
            seed: node.id == ROOT,
        },
        machine: data.config.machine.clone(),
        toolchain: Toolchain {
            compiler: compile.map(|c| c.compiler.clone()),
            compile_command: compile.map(|c| c.command.clone()),
            target: data.config.eval.target.clone(),
        },
        libraries,
        models: Models {
            proposer: data.config.proposer.clone(),
            reasoning: data.config.llm.as_ref().map(|l| l.reasoning.clone()),
            codegen: data.config.llm.as_ref().map(|l| l.codegen.clone()),
            base_url: data.config.llm.as_ref().and_then(|l| l.base_url.clone()),
        },
        seeds: Seeds {
            search: data.config.seed,
            input: data.config.eval.base_seed,
            seed_kernel_file: data.task.seed.file.clone(),
            seed_kernel_sha256: seed.map_or_else(
                || ksearch_store::content_hash(&data.task.seed.text),
                |a| a.source_hash.clone(),
            ),
        },
        measurements,
    }
}

/// Text safe inside a C block comment: nothing in it can end the comment. Control characters
/// (a newline among them) become spaces. A backslash, or its trigraph `??/`, at a line's end
/// splices the next line on before comments are recognised (GCC even across trailing blanks),
/// so `*`, a splice and `/` would close the comment: backslashes become `/` and the trigraph is
/// broken up. Then every `*/`, these included, is broken up.
fn c_comment(s: &str) -> String {
    let flat: String = s
        .chars()
        .map(|c| match c {
            c if c.is_control() => ' ',
            '\\' => '/',
            c => c,
        })
        .collect();
    flat.replace("??/", "?? /").replace("*/", "* /")
}

fn summary_lines(p: &Provenance) -> Vec<String> {
    let k = &p.kernel;
    let mut lines = vec![format!(
        "{} ({}): node {} \"{}\", round {} of run {} (ksearch {}).",
        p.task.name, p.task.id, k.node, k.title, k.round, p.run.id, p.run.ksearch_version
    )];
    let speed = match (k.speedup, k.speedup_vs_seed) {
        (Some(s), Some(v)) => format!(
            "{s:.2}x over {}, {v:.2}x over the seed kernel",
            p.task.baseline
        ),
        (Some(s), None) => format!("{s:.2}x over {}", p.task.baseline),
        _ => "not timed".into(),
    };
    lines.push(format!("Measured: {speed}, on {}.", p.machine));
    match (k.seed, k.best) {
        (true, true) => lines.push(
            "No candidate was measured faster than the seed: this is the seed kernel.".into(),
        ),
        (true, false) => lines.push("This is the task's seed kernel.".into()),
        (false, false) => lines.push("Not the run's best kernel: exported by request.".into()),
        (false, true) => {}
    }
    lines.push("Details: provenance.json.".into());
    lines
}

fn guard(name: &str) -> String {
    let mut g: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_uppercase()
            } else {
                '_'
            }
        })
        .collect();
    g.push_str("_H");
    g
}

/// `<name>.h` (`export/c_header.h`): the prototype of the candidate contract, usable from C and
/// C++.
pub fn c_header(spec: &TaskSpec, p: &Provenance) -> String {
    let mut comment = String::new();
    for l in summary_lines(p) {
        let _ = writeln!(comment, " * {}", c_comment(&l));
    }
    let _ = writeln!(comment, " *");
    let _ = writeln!(comment, " * {}", c_comment(&spec.description));
    let _ = writeln!(
        comment,
        " * Tensors are dense, row-major; inputs and outputs never alias."
    );
    for (kind, ts) in [("input", &spec.inputs), ("output", &spec.outputs)] {
        for t in ts {
            let _ = writeln!(
                comment,
                " *   {kind} {}: {}[{}]",
                t.name,
                t.dtype,
                t.shape.join("][")
            );
        }
    }
    // The comment last: the description's text is not searched for placeholders.
    include_str!("export/c_header.h")
        .replace("{guard}", &guard(&spec.name))
        .replace("{signature}", &c_signature(spec))
        .replace("{comment}", comment.trim_end())
}

/// `<name>.c`: the kernel as measured, after a comment and the prototype (so a definition that
/// drifts from the header is a compile error). It stays a valid candidate for `ksearch eval`.
pub fn c_source(spec: &TaskSpec, p: &Provenance, source: &str) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "/*");
    for l in summary_lines(p) {
        let _ = writeln!(o, " * {}", c_comment(&l));
    }
    let _ = writeln!(o, " *");
    let _ = writeln!(
        o,
        " * Build it as it was measured: cc -O3 -march=native -c {}.c",
        spec.name
    );
    if let Some(cc) = &p.toolchain.compiler {
        let _ = writeln!(o, " * Measured with: {}", c_comment(cc));
    }
    let _ = writeln!(o, " */");
    let _ = writeln!(o, "#include <stdint.h>");
    let _ = writeln!(o, "{};", c_signature(spec));
    let _ = writeln!(o, "/* ---- kernel: {} ---- */", c_comment(&p.kernel.file));
    o.push_str(source);
    if !source.ends_with('\n') {
        o.push('\n');
    }
    o
}

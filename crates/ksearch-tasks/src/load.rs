use std::path::{Path, PathBuf};

use ksearch_core::location::{FieldPath, locate};
use ksearch_core::task::{Baseline, Source, Task, TaskError, parse_task};
use thiserror::Error;

mod builtin {
    include!(concat!(env!("OUT_DIR"), "/builtin_files.rs"));
}

#[derive(Debug, Error)]
pub enum LoadError {
    #[error(
        "no task `{arg}`: not a directory with a task.toml, nor a built-in task (built-in: {builtins})"
    )]
    NotFound { arg: String, builtins: String },
    #[error("failed to read {}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Task(#[from] TaskError),
}

/// Names of the built-in tasks, e.g. `cpu/softmax`.
pub fn builtin_names() -> Vec<&'static str> {
    builtin::FILES
        .iter()
        .filter_map(|(path, _)| path.strip_suffix("/task.toml"))
        .collect()
}

fn builtin_file(path: &str) -> Option<&'static str> {
    builtin::FILES
        .iter()
        .find(|(p, _)| *p == path)
        .map(|(_, text)| *text)
}

/// The `task.toml` text of a built-in task.
pub fn builtin_task_toml(name: &str) -> Option<&'static str> {
    builtin_file(&format!("{name}/task.toml"))
}

/// A task from a path (a directory or its `task.toml`), else from the built-in catalog.
pub fn load_task(arg: &str) -> Result<Task, LoadError> {
    let path = Path::new(arg);
    if path.is_dir() {
        return load_dir(path, arg);
    }
    if path.is_file() && path.file_name().is_some_and(|n| n == "task.toml") {
        return load_dir(path.parent().unwrap_or(Path::new(".")), arg);
    }
    if builtin_task_toml(arg.trim_end_matches('/')).is_some() {
        return load_builtin(arg.trim_end_matches('/'));
    }
    Err(LoadError::NotFound {
        arg: arg.to_owned(),
        builtins: builtin_names().join(", "),
    })
}

pub fn load_builtin(name: &str) -> Result<Task, LoadError> {
    let toml = builtin_task_toml(name).ok_or_else(|| LoadError::NotFound {
        arg: name.to_owned(),
        builtins: builtin_names().join(", "),
    })?;
    let file = format!("<built-in>/{name}/task.toml");
    resolve(name, &file, toml, |rel| {
        builtin_file(&format!("{name}/{rel}"))
            .map(str::to_owned)
            .ok_or_else(|| "not in the built-in catalog".to_owned())
    })
}

pub fn load_dir(dir: &Path, id: &str) -> Result<Task, LoadError> {
    let toml_path = dir.join("task.toml");
    let text = std::fs::read_to_string(&toml_path).map_err(|source| LoadError::Io {
        path: toml_path.clone(),
        source,
    })?;
    resolve(id, &toml_path.display().to_string(), &text, |rel| {
        std::fs::read_to_string(dir.join(rel))
            .map_err(|e| format!("could not read {}: {e}", dir.join(rel).display()))
    })
}

/// Parse the task and load every file it names; a missing file is reported at its field.
fn resolve(
    id: &str,
    file: &str,
    text: &str,
    read: impl Fn(&str) -> Result<String, String>,
) -> Result<Task, LoadError> {
    let spec = parse_task(text, file)?;
    // A file that cannot be read is reported at the field that names it.
    let load = |path: FieldPath, rel: &str| -> Result<Source, LoadError> {
        read(rel)
            .map(|text| Source {
                file: rel.to_owned(),
                text,
            })
            .map_err(|message| {
                LoadError::Task(TaskError {
                    file: file.to_owned(),
                    location: locate(text, &path),
                    field: path.to_string(),
                    message,
                })
            })
    };
    let root = FieldPath::root();
    let reference = load(root.key("reference").key("file"), &spec.reference.file)?;
    let seed = load(root.key("seed").key("file"), &spec.seed.file)?;
    let baseline_of =
        |path: FieldPath, b: &ksearch_core::task::BaselineRef| -> Result<Baseline, LoadError> {
            Ok(Baseline {
                name: b.name.clone(),
                source: load(path, &b.file)?,
                libs: b.libs.clone(),
                env: b.env.clone(),
            })
        };
    let baseline = spec
        .baseline
        .as_ref()
        .map(|b| baseline_of(root.key("baseline").key("file"), b))
        .transpose()?;
    let comparisons = spec
        .comparisons
        .iter()
        .enumerate()
        .map(|(i, c)| baseline_of(root.key("comparisons").index(i).key("file"), c))
        .collect::<Result<_, _>>()?;
    Ok(Task {
        id: id.to_owned(),
        spec,
        reference,
        seed,
        baseline,
        comparisons,
    })
}

/// A candidate source file, named by its file name.
pub fn read_candidate(path: &Path) -> Result<Source, LoadError> {
    let text = std::fs::read_to_string(path).map_err(|source| LoadError::Io {
        path: path.to_owned(),
        source,
    })?;
    let file = path.file_name().map_or_else(
        || "candidate.c".to_owned(),
        |n| n.to_string_lossy().into_owned(),
    );
    Ok(Source { file, text })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_builtin_task_loads() {
        let names = builtin_names();
        for expected in ["cpu/softmax", "cpu/matmul", "cpu/linear_recurrence"] {
            assert!(
                names.contains(&expected),
                "{expected} missing from {names:?}"
            );
        }
        for name in names {
            let task = load_task(name).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert!(task.spec.workloads.len() >= 2, "{name}");
            assert!(
                !task.seed.text.is_empty() && !task.reference.text.is_empty(),
                "{name}"
            );
        }
    }

    #[test]
    fn a_missing_file_is_reported_at_its_field() {
        let dir = tempdir();
        let toml = builtin_task_toml("cpu/softmax").unwrap();
        std::fs::write(dir.join("task.toml"), toml).unwrap();
        std::fs::write(dir.join("reference.c"), "x").unwrap();
        let err = load_task(dir.to_str().unwrap()).unwrap_err();
        let LoadError::Task(e) = err else {
            panic!("{err}")
        };
        assert_eq!(e.field, "seed.file");
        let line = toml
            .lines()
            .position(|l| l.starts_with("file = \"seed.c\""))
            .unwrap()
            + 1;
        assert_eq!(e.location.unwrap().line, line);
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn unknown_names_list_the_builtins() {
        let err = load_task("cpu/nope").unwrap_err().to_string();
        assert!(err.contains("cpu/softmax"), "{err}");
    }

    fn tempdir() -> PathBuf {
        let d = std::env::temp_dir().join(format!("ksearch-tasks-test-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        d
    }
}

use std::path::Path;

use ksearch_core::external_worker::Program;
use ksearch_core::location::{FieldPath, locate};
use ksearch_core::space::{TaskSpace, parse_space};
use ksearch_core::task::{
    Baseline, ExternalWorker, Source, Task, TaskError, WorkerRef, parse_task,
};
use thiserror::Error;

use crate::files::{MAX_SOURCE_BYTES, MAX_TOML_BYTES, ReadError, read_text};

mod builtin {
    include!(concat!(env!("OUT_DIR"), "/builtin_files.rs"));
}

#[derive(Debug, Error)]
pub enum LoadError {
    #[error(
        "no task `{arg}`: not a directory with a task.toml, nor a built-in task{} (built-in: {builtins})",
        closest.as_ref().map_or_else(String::new, |c| format!("; did you mean `{c}`?"))
    )]
    NotFound {
        arg: String,
        builtins: String,
        /// The built-in task closest to `arg`, when one is close.
        closest: Option<String>,
    },
    #[error(transparent)]
    Read(#[from] ReadError),
    #[error(transparent)]
    Task(#[from] TaskError),
    /// A directory here has the name of a built-in task, and it is the one read: said, so that
    /// a user who meant the built-in task knows why it is not the one loaded.
    #[error(
        "`{arg}` is the directory {arg}/ here, which shadows the built-in task of that name (give `./{arg}` for the directory; run elsewhere for the built-in one): {source}"
    )]
    Shadowing {
        arg: String,
        #[source]
        source: Box<LoadError>,
    },
}

/// Whether `arg` names both a task directory here and a built-in task: the directory is the
/// one loaded.
pub fn shadows_builtin(arg: &str) -> bool {
    let name = arg.trim_end_matches('/');
    !arg.starts_with("./")
        && !Path::new(arg).is_absolute()
        && Path::new(arg).is_dir()
        && builtin_task_toml(name).is_some()
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
        return load_dir(path, arg).map_err(|e| {
            if shadows_builtin(arg) {
                LoadError::Shadowing {
                    arg: arg.trim_end_matches('/').to_owned(),
                    source: Box::new(e),
                }
            } else {
                e
            }
        });
    }
    // Whatever it is (a file, or a link to a device), a `task.toml` is read as one, so that
    // anything but a regular file of bounded size is refused by name.
    if path.exists() && path.file_name().is_some_and(|n| n == "task.toml") {
        return load_dir(path.parent().unwrap_or(Path::new(".")), arg);
    }
    if builtin_task_toml(arg.trim_end_matches('/')).is_some() {
        return load_builtin(arg.trim_end_matches('/'));
    }
    Err(not_found(arg))
}

/// No task by that name: the built-in ones, and the closest of them.
fn not_found(arg: &str) -> LoadError {
    let names = builtin_names();
    LoadError::NotFound {
        arg: arg.to_owned(),
        builtins: names.join(", "),
        closest: ksearch_core::suggest::closest(arg.trim_end_matches('/'), names.iter().copied())
            .map(str::to_owned),
    }
}

pub fn load_builtin(name: &str) -> Result<Task, LoadError> {
    let toml = builtin_task_toml(name).ok_or_else(|| not_found(name))?;
    let file = format!("<built-in>/{name}/task.toml");
    resolve(
        name,
        &file,
        toml,
        |rel| {
            builtin_file(&format!("{name}/{rel}"))
                .map(str::to_owned)
                .ok_or_else(|| "not in the built-in catalog".to_owned())
        },
        |_| {
            Err((
                FieldPath::root().key("worker"),
                "a built-in task has no directory for a worker of its own".into(),
            ))
        },
    )
}

pub fn load_dir(dir: &Path, id: &str) -> Result<Task, LoadError> {
    let toml_path = dir.join("task.toml");
    let text = read_text(&toml_path, MAX_TOML_BYTES, "a task file")?;
    resolve(
        id,
        &toml_path.display().to_string(),
        &text,
        |rel| {
            read_text(&dir.join(rel), MAX_SOURCE_BYTES, "a source file").map_err(|e| {
                use std::error::Error as _;
                match e.source() {
                    Some(cause) => format!("{e}: {cause}"),
                    None => e.to_string(),
                }
            })
        },
        |w| find_worker(dir, w),
    )
}

/// The program of a task's `[worker]`: in the task directory, at its absolute path, or on
/// `PATH`; it must be an executable file. An error names `worker.command[0]`.
fn find_worker(dir: &Path, w: &WorkerRef) -> Result<ExternalWorker, (FieldPath, String)> {
    let at = || FieldPath::root().key("worker").key("command").index(0);
    let task_dir = dir
        .canonicalize()
        .map_err(|e| (at(), format!("cannot resolve the task directory: {e}")))?;
    let executable = |p: &Path| {
        use std::os::unix::fs::PermissionsExt as _;
        fs_err::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    let program = match w.program() {
        Program::InTask(p) => Some(task_dir.join(p)).filter(|p| executable(p)).ok_or_else(|| {
            format!(
                "`{p}` is not an executable file in the task directory (make it executable, or name its interpreter first: [\"python3\", \"{}\"])",
                p.trim_start_matches("./")
            )
        }),
        Program::Absolute(p) => Some(Path::new(p).to_owned())
            .filter(|p| executable(p))
            .ok_or_else(|| format!("`{p}` is not an executable file")),
        Program::OnPath(name) => std::env::var_os("PATH")
            .iter()
            .flat_map(std::env::split_paths)
            .filter(|d| d.is_absolute())
            .map(|d| d.join(name))
            .find(|p| executable(p))
            .ok_or_else(|| format!("`{name}` is not found on PATH")),
    }
    .map_err(|m| (at(), m))?;
    Ok(ExternalWorker {
        program,
        args: w.args().to_vec(),
        task_dir,
    })
}

/// Parse the task and load every file it names; a missing file is reported at its field.
fn resolve(
    id: &str,
    file: &str,
    text: &str,
    read: impl Fn(&str) -> Result<String, String>,
    find_worker: impl Fn(&WorkerRef) -> Result<ExternalWorker, (FieldPath, String)>,
) -> Result<Task, LoadError> {
    let spec = parse_task(text, file)?;
    let at_field = |path: FieldPath, message: String| {
        LoadError::Task(TaskError {
            file: file.to_owned(),
            location: locate(text, &path),
            field: path.to_string(),
            message,
        })
    };
    // A file that cannot be read is reported at the field that names it.
    let load = |path: FieldPath, rel: &str| -> Result<Source, LoadError> {
        read(rel)
            .map(|text| Source {
                file: rel.to_owned(),
                text,
            })
            .map_err(|message| at_field(path, message))
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
                modules: b.modules.clone(),
                install: b.install.clone(),
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
    let space = spec
        .space
        .as_ref()
        .map(|s| load_space(file, &s.file, &read))
        .transpose()?;
    let worker = spec
        .worker
        .as_ref()
        .map(|w| find_worker(w).map_err(|(path, message)| at_field(path, message)))
        .transpose()?;
    Ok(Task {
        id: id.to_owned(),
        spec,
        reference,
        seed,
        baseline,
        comparisons,
        space,
        worker,
    })
}

/// The space file `rel` (relative to the task directory) and every template it names, which
/// lie next to it; a template that cannot be read is reported at the field that names it.
fn load_space(
    task_file: &str,
    rel: &str,
    read: &impl Fn(&str) -> Result<String, String>,
) -> Result<TaskSpace, LoadError> {
    let shown = match task_file.strip_suffix("task.toml") {
        Some(dir) => format!("{dir}{rel}"),
        None => rel.to_owned(),
    };
    let text = read(rel).map_err(|message| {
        LoadError::Task(TaskError {
            file: task_file.to_owned(),
            location: None,
            field: "space.file".into(),
            message,
        })
    })?;
    let spec = parse_space(&text, &shown)?;
    let dir = rel.rsplit_once('/').map_or("", |(d, _)| d);
    let mut templates = Vec::new();
    let root = FieldPath::root();
    let fields = std::iter::once(root.key("template"))
        .chain((0..spec.includes.len()).map(|i| root.key("includes").index(i)));
    for (name, field) in spec.template_files().zip(fields) {
        let path = if dir.is_empty() {
            name.to_owned()
        } else {
            format!("{dir}/{name}")
        };
        let body = read(&path).map_err(|message| {
            LoadError::Task(TaskError {
                file: shown.clone(),
                location: locate(&text, &field),
                field: field.to_string(),
                message,
            })
        })?;
        templates.push(Source {
            file: name.to_owned(),
            text: body,
        });
    }
    Ok(TaskSpace {
        file: rel.to_owned(),
        spec,
        templates,
    })
}

/// A candidate source file, named by its file name; refused unread when it is not a regular
/// file or is larger than [`MAX_SOURCE_BYTES`].
pub fn read_candidate(path: &Path) -> Result<Source, LoadError> {
    let text = read_text(path, MAX_SOURCE_BYTES, "a candidate")?;
    let file = path.file_name().map_or_else(
        || "candidate.c".to_owned(),
        |n| n.to_string_lossy().into_owned(),
    );
    Ok(Source { file, text })
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

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
        fs_err::write(dir.join("task.toml"), toml).unwrap();
        fs_err::write(dir.join("reference.c"), "x").unwrap();
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
        fs_err::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn unknown_names_list_the_builtins() {
        let err = load_task("cpu/nope").unwrap_err().to_string();
        assert!(err.contains("cpu/softmax"), "{err}");
    }

    #[test]
    fn a_task_file_linked_to_dev_zero_is_refused_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let toml = dir.path().join("task.toml");
        std::os::unix::fs::symlink("/dev/zero", &toml).unwrap();
        for arg in [dir.path(), toml.as_path()] {
            let err = load_task(arg.to_str().unwrap()).unwrap_err();
            assert!(
                matches!(err, LoadError::Read(ReadError::NotAFile { .. })),
                "{err}"
            );
            assert!(err.to_string().contains("task.toml"), "{err}");
        }
    }

    #[test]
    fn a_huge_task_file_is_refused_with_the_limit() {
        let dir = tempfile::tempdir().unwrap();
        let toml = dir.path().join("task.toml");
        fs_err::File::create(&toml)
            .unwrap()
            .set_len(MAX_TOML_BYTES + 1)
            .unwrap();
        let err = load_task(dir.path().to_str().unwrap()).unwrap_err();
        assert!(
            matches!(
                err,
                LoadError::Read(ReadError::TooLarge {
                    limit: MAX_TOML_BYTES,
                    ..
                })
            ),
            "{err}"
        );
        assert!(err.to_string().contains("1 MiB"), "{err}");
    }

    #[test]
    fn a_huge_or_special_source_named_by_a_task_is_refused_at_its_field() {
        let dir = tempfile::tempdir().unwrap();
        let toml = builtin_task_toml("cpu/softmax").unwrap();
        fs_err::write(dir.path().join("task.toml"), toml).unwrap();
        fs_err::write(dir.path().join("reference.c"), "x").unwrap();
        fs_err::File::create(dir.path().join("seed.c"))
            .unwrap()
            .set_len(MAX_SOURCE_BYTES + 1)
            .unwrap();
        let err = load_task(dir.path().to_str().unwrap()).unwrap_err();
        let LoadError::Task(e) = &err else {
            panic!("{err}")
        };
        assert_eq!(e.field, "seed.file");
        assert!(
            e.message.contains("seed.c") && e.message.contains("512 KiB"),
            "{err}"
        );
        fs_err::remove_file(dir.path().join("seed.c")).unwrap();
        std::os::unix::fs::symlink("/dev/zero", dir.path().join("seed.c")).unwrap();
        let err = load_task(dir.path().to_str().unwrap()).unwrap_err();
        assert!(err.to_string().contains("not a regular file"), "{err}");
    }

    #[test]
    fn candidates_are_read_with_the_source_limit() {
        let dir = tempfile::tempdir().unwrap();
        let big = dir.path().join("big.c");
        fs_err::File::create(&big)
            .unwrap()
            .set_len(MAX_SOURCE_BYTES + 1)
            .unwrap();
        let err = read_candidate(&big).unwrap_err().to_string();
        assert!(
            err.contains("big.c") && err.contains("512 KiB") && err.contains("candidate"),
            "{err}"
        );
        let err = read_candidate(Path::new("/dev/zero"))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("/dev/zero") && err.contains("character device"),
            "{err}"
        );
        let ok = dir.path().join("ok.c");
        fs_err::write(&ok, "void f(void) {}").unwrap();
        assert_eq!(read_candidate(&ok).unwrap().file, "ok.c");
    }

    fn tempdir() -> PathBuf {
        let d = std::env::temp_dir().join(format!("ksearch-tasks-test-{}", std::process::id()));
        fs_err::create_dir_all(&d).unwrap();
        d
    }
}

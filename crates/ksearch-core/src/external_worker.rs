//! A worker the task brings (`[worker]` in `task.toml`): a program of the task author's that
//! speaks the worker protocol (`docs/protocol.md`), started instead of the backend's own worker,
//! for harnesses ksearch does not ship.
//!
//! It is trusted as the user's own code, as a task's reference is: ksearch starts it as it
//! starts its own workers (its own process group, a fresh temporary directory, the scrubbed
//! environment, the evaluation's time limit) but does not confine it; sandboxing the candidates
//! it runs, and timing them, is the worker's own work. Every result it returns is validated
//! against its request like any worker's.

use std::path::PathBuf;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::location::FieldPath;

/// `[worker]` as written.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WorkerRef {
    /// The program and its arguments. A program named by a relative path (`./worker.py`) lies
    /// in the task directory; one named without a `/` (`python3`) is looked up on `PATH`.
    pub command: Vec<String>,
}

/// Where the program of a [`WorkerRef`] is to be found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Program<'a> {
    /// A path relative to the task directory.
    InTask(&'a str),
    /// An absolute path.
    Absolute(&'a str),
    /// A name looked up on `PATH`.
    OnPath(&'a str),
}

impl WorkerRef {
    /// The program, once the command is valid.
    pub fn program(&self) -> Program<'_> {
        let p = self.command.first().map_or("", String::as_str);
        if p.starts_with('/') {
            Program::Absolute(p)
        } else if p.contains('/') {
            Program::InTask(p)
        } else {
            Program::OnPath(p)
        }
    }

    /// The arguments after the program.
    pub fn args(&self) -> &[String] {
        self.command.get(1..).unwrap_or_default()
    }
}

/// A task's worker with its program found, as a loaded task carries it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExternalWorker {
    /// The program, as an absolute path.
    pub program: PathBuf,
    pub args: Vec<String>,
    /// The task directory: the worker's working directory, and `KSEARCH_TASK_DIR`.
    pub task_dir: PathBuf,
}

/// The rules `task.toml` can be held to without the file system.
pub(crate) fn validate(path: &FieldPath, worker: &WorkerRef) -> Result<(), (FieldPath, String)> {
    let command = path.key("command");
    let Some(program) = worker.command.first() else {
        return Err((
            command,
            "give the worker's program and its arguments, e.g. [\"./worker.py\"]".into(),
        ));
    };
    if program.trim().is_empty() {
        return Err((command.index(0), "the worker's program is empty".into()));
    }
    if let Some(i) = worker.command.iter().position(|a| a.contains('\0')) {
        return Err((command.index(i), "contains a NUL character".into()));
    }
    if let Program::InTask(p) = worker.program()
        && p.split('/').any(|part| part == "..")
    {
        return Err((
            command.index(0),
            format!(
                "`{p}` must be a path inside the task directory (or an absolute path, or a program on PATH)"
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn worker(command: &[&str]) -> WorkerRef {
        WorkerRef {
            command: command.iter().map(|s| (*s).to_owned()).collect(),
        }
    }

    #[test]
    fn the_program_is_found_by_its_form() {
        assert_eq!(
            worker(&["./w.py", "-q"]).program(),
            Program::InTask("./w.py")
        );
        assert_eq!(worker(&["bin/w"]).program(), Program::InTask("bin/w"));
        assert_eq!(worker(&["/opt/w"]).program(), Program::Absolute("/opt/w"));
        assert_eq!(
            worker(&["python3", "w.py"]).program(),
            Program::OnPath("python3")
        );
        assert_eq!(worker(&["python3", "w.py"]).args(), ["w.py"]);
        assert!(worker(&["w"]).args().is_empty());
    }

    #[test]
    fn a_bad_command_names_its_element() {
        let root = FieldPath::root().key("worker");
        let err = |c: &[&str]| validate(&root, &worker(c)).unwrap_err();
        assert_eq!(err(&[]).0.to_string(), "worker.command");
        assert_eq!(err(&[" "]).0.to_string(), "worker.command[0]");
        let (at, msg) = err(&["../up/w.py"]);
        assert_eq!(at.to_string(), "worker.command[0]");
        assert!(msg.contains("inside the task directory"), "{msg}");
        assert_eq!(err(&["w", "a\0b"]).0.to_string(), "worker.command[1]");
        assert!(validate(&root, &worker(&["./w.py", "--fast"])).is_ok());
    }

    #[test]
    fn a_worker_round_trips_and_is_checked_where_the_task_is_parsed() {
        let mut spec = crate::task::tests_support::matmul_spec();
        spec.worker = Some(worker(&["python3", "worker.py", "--quick"]));
        let text = toml::to_string(&spec).unwrap();
        assert!(text.contains("[worker]"), "{text}");
        assert_eq!(crate::task::parse_task(&text, "task.toml").unwrap(), spec);

        let bad = text.replace("[worker]\n", "[worker]\nprogram = \"w\"\n");
        let e = crate::task::parse_task(&bad, "task.toml").unwrap_err();
        assert_eq!(e.field, "worker.program", "{e}");
        let bad = text.replace("\"python3\", ", "\"../python3\", ");
        let e = crate::task::parse_task(&bad, "task.toml").unwrap_err();
        assert_eq!(e.field, "worker.command[0]", "{e}");
        assert!(e.location.is_some(), "{e}");
    }
}

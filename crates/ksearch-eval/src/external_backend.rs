//! A task's own worker (`[worker]` in `task.toml`, `ksearch_core::external_worker`): a program of
//! the task author's that speaks the worker protocol, started as the built-in workers are (own
//! process group, fresh `TMPDIR`, scrubbed environment, the supervisor's time limit), in the
//! task directory. It is trusted as the user's own code: ksearch does not confine it, and it
//! sandboxes and times its candidates itself; its results are validated as every worker's are.

use std::time::Duration;

use ksearch_core::task::ExternalWorker;

use crate::backend::BackendEval;
use crate::worker_process::WorkerCommand;

/// The variable that names the task directory to a task's own worker.
pub const TASK_DIR_VAR: &str = "KSEARCH_TASK_DIR";

/// The task's own worker. Candidates get the core checks and the task backend's own (its
/// contract); the knowledge layer's rules, which are about the built-in workers' targets, do
/// not apply.
#[derive(Debug, Clone)]
pub struct ExternalBackend {
    pub worker: ExternalWorker,
}

impl BackendEval for ExternalBackend {
    fn worker_command(&self) -> WorkerCommand {
        WorkerCommand {
            program: self.worker.program.clone(),
            args: self.worker.args.clone(),
            env: vec![(
                TASK_DIR_VAR.into(),
                self.worker.task_dir.display().to_string(),
            )],
            // As long as the built-in Python harness may take to import its array library.
            startup_timeout: Duration::from_secs(120),
            current_dir: Some(self.worker.task_dir.clone()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tasks_own_worker_starts_as_written_in_the_task_directory() {
        let source = |file: &str| ksearch_core::task::Source {
            file: file.into(),
            text: String::new(),
        };
        let mut task = ksearch_core::task::Task {
            id: "t".into(),
            spec: ksearch_core::task::tests_support::matmul_spec(),
            reference: source("reference.c"),
            seed: source("seed.c"),
            baseline: None,
            comparisons: Vec::new(),
            space: None,
            worker: None,
        };
        let options = crate::BackendOptions::default();
        let builtin = crate::backend_for(&task, &options)
            .unwrap()
            .worker_command();
        assert_eq!(builtin.args, ["worker", "c"]);
        task.worker = Some(ExternalWorker {
            program: "/opt/bench/worker".into(),
            args: vec!["--quick".into()],
            task_dir: "/tasks/gemm".into(),
        });
        let own = crate::backend_for(&task, &options)
            .unwrap()
            .worker_command();
        assert_eq!(own.display(), "/opt/bench/worker --quick");
        assert_eq!(own.current_dir.as_deref(), Some("/tasks/gemm".as_ref()));
        assert_eq!(
            own.env,
            [(TASK_DIR_VAR.to_owned(), "/tasks/gemm".to_owned())]
        );
    }
}

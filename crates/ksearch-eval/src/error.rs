//! Errors of the evaluation layer. A candidate that fails is not an error: its outcome is an
//! [`ksearch_core::protocol::Status`]. These are failures to evaluate at all.

use thiserror::Error;

#[derive(Debug, Error)]
pub enum EvalError {
    #[error("failed to start worker `{command}`")]
    WorkerSpawn {
        command: String,
        #[source]
        source: std::io::Error,
    },
    #[error("worker `{command}` did not start: {}", if output.is_empty() { "it printed nothing" } else { output.as_str() })]
    WorkerStart { command: String, output: String },
    /// The worker could not carry out the request (the task's reference does not build, a
    /// malformed request). Not the candidate's fault.
    #[error("the worker could not evaluate: {message}")]
    Worker { message: String },
    /// The task's own code failed (its reference, baseline or a comparison does not build,
    /// crashes, or reads past an input): the task is at fault, not the candidate.
    #[error("{message}")]
    Task { message: String },
    #[error("workload `{name}` is not in task `{task}` (it has: {available})")]
    UnknownWorkload {
        name: String,
        task: String,
        available: String,
    },
    #[error("the `{backend}` backend is not available: {reason}")]
    BackendUnavailable { backend: String, reason: String },
    #[error("the evaluation was cancelled")]
    Cancelled,
    #[error("invalid evaluation options: {0}")]
    Options(String),
    /// The task names a baseline or comparison that links a library (or imports a Python
    /// module) missing here (see [`crate::dependencies`]).
    #[error("`{name}` needs {needs}, which {finder} does not find on this machine; {advice}")]
    MissingDependency {
        name: String,
        /// What is missing, as said to a user: "OpenBLAS (-lopenblas)".
        needs: String,
        /// Who was asked: the linker, or the worker's Python.
        finder: String,
        advice: String,
    },
    /// A `c` task's C compiler (`$CC`, else `cc`) is not found: nothing of the task can be built
    /// (see [`crate::dependencies::require_compiler`]).
    #[error("{}: ksearch compiles the task's reference, its baseline and every candidate with it; {advice}", if *named_by_cc { format!("the C compiler `{program}` that CC names is not found") } else { format!("no C compiler is installed (`{program}` is not on PATH)") })]
    MissingCompiler {
        program: String,
        /// `CC` named it (else it is the default, `cc`).
        named_by_cc: bool,
        advice: String,
    },
}

//! Evaluation for ksearch: worker processes and their supervision, and the C worker.
//!
//! Candidate code never runs in the orchestrator: the [`Supervisor`] starts a worker process
//! per backend, speaks the worker protocol with it, and turns hangs and crashes into statuses.

mod ahead_of_time;
mod backend;
pub mod c_worker;
pub mod dependencies;
mod env_scrub;
mod error;
mod evaluator;
pub mod executor;
mod external_backend;
mod knowledge_checks;
mod mlx_backend;
mod output_capture;
pub mod sandbox;
mod secret;
mod shm;
mod supervisor;
mod torch_backend;
mod validate;
mod worker_process;

pub use ahead_of_time::{AheadOfTime, CompiledKernel, CompiledPoints, KernelCompiler};
pub use backend::{
    BackendEval, BackendOptions, BuiltinProcesses, CBackend, DEFAULT_PYTHON, backend_for,
    build_only, build_only_caveat, builtin_processes,
};
pub use env_scrub::is_secret_name;
pub use error::EvalError;
pub use evaluator::{
    Contenders, DEFAULT_TIMEOUT, EvalOptions, Evaluation, Evaluator, LocalEvaluator, MAX_SEEDS,
    MachineCheck, build_request,
};
pub use external_backend::{ExternalBackend, TASK_DIR_VAR};
pub use knowledge_checks::{check as check_rules, knowledge};
pub use mlx_backend::MlxBackend;
pub use supervisor::{PhaseObserver, Supervisor};
pub use torch_backend::TorchBackend;
pub use worker_process::{WorkerCommand, signal_name};

//! One module per subcommand.

mod contract;
mod eval;
mod tasks;

use ksearch_eval::EvalError;
use ksearch_tasks::LoadError;

use crate::cli::Command;
use crate::exit_codes;

pub(crate) fn run(command: Command) -> anyhow::Result<i32> {
    match command {
        Command::Tasks { json } => tasks::run(json),
        Command::Contract { task } => contract::run(&task),
        Command::Eval(args) => eval::run(&args),
        Command::Worker { backend } => match backend.as_str() {
            "c" => Ok(ksearch_eval::c_worker::run()),
            other => {
                anyhow::bail!("there is no built-in worker for backend `{other}` (available: c)")
            }
        },
    }
}

/// Errors in what the user gave us get their own exit code.
pub(crate) fn exit_code_for(err: &anyhow::Error) -> i32 {
    for cause in err.chain() {
        if cause.is::<LoadError>() {
            return exit_codes::INPUT;
        }
        if let Some(EvalError::UnknownWorkload { .. } | EvalError::Options(_)) =
            cause.downcast_ref::<EvalError>()
        {
            return exit_codes::INPUT;
        }
    }
    exit_codes::INTERNAL
}

//! One module per subcommand.

mod answer;
mod contract;
mod eval;
pub(crate) mod export;
pub(crate) mod import;
pub(crate) mod knowledge;
pub(crate) mod report;
pub(crate) mod run;
mod scale;
pub(crate) mod show;
pub(crate) mod space;
mod tasks;
mod tree;

use ksearch_core::task::BackendKind;
use ksearch_eval::EvalError;
use ksearch_tasks::LoadError;

use crate::cli::Command;
use crate::exit_codes;

pub(crate) fn run(command: Command) -> anyhow::Result<i32> {
    match command {
        Command::Tasks { json } => tasks::run(json),
        Command::Contract { task } => contract::run(&task),
        Command::Eval(args) => eval::run(&args),
        Command::Run(args) => run::run(&args),
        Command::Resume(args) => run::resume(&args),
        Command::Answer { run_dir, file } => answer::run(&run_dir, &file),
        Command::Mcp => crate::mcp::serve(),
        Command::Tree { run_dir, json } => tree::run(&run_dir, json),
        Command::Report(args) => report::run(&args),
        Command::Show(args) => show::run(&args),
        Command::Export(args) => export::run(&args),
        Command::Knowledge(args) => knowledge::run(&args),
        Command::Space(args) => space::run(&args),
        Command::Import(args) => import::run(&args),
        Command::Sandbox { spec } => Ok(ksearch_eval::sandbox::launcher_main(&spec)),
        Command::Runner { backend } => match builtin(&backend) {
            Some(p) => Ok((p.runner)()),
            None => anyhow::bail!(
                "there is no built-in runner for backend `{backend}` (available: {})",
                hosted()
            ),
        },
        Command::Worker { backend } => match builtin(&backend) {
            Some(p) => Ok((p.worker)()),
            None => anyhow::bail!(
                "there is no built-in worker for backend `{backend}` (available: {})",
                hosted()
            ),
        },
        Command::EvalJob { job, result } => Ok(ksearch_eval::executor::run_job_file(
            &job,
            &result,
            std::env::current_exe()?,
            Some(ksearch_engine::builtin::machine::weak_baseline),
        )),
    }
}

/// A task by built-in name or directory. A directory here with a built-in task's name is the
/// one loaded, and stderr says so.
pub(crate) fn load_task(arg: &str) -> Result<ksearch_core::Task, LoadError> {
    let task = ksearch_tasks::load_task(arg)?;
    if ksearch_tasks::shadows_builtin(arg) {
        use std::io::Write as _;
        let _ = writeln!(
            std::io::stderr().lock(),
            "note: `{arg}` is the directory {arg}/ here, not the built-in task of that name (give `./{arg}` to say so)"
        );
    }
    Ok(task)
}

/// The worker and runner this binary hosts for the backend named `name`.
fn builtin(name: &str) -> Option<ksearch_eval::BuiltinProcesses> {
    name.parse::<BackendKind>()
        .ok()
        .and_then(ksearch_eval::builtin_processes)
}

/// The backends whose worker and runner this binary hosts: `c`.
fn hosted() -> String {
    BackendKind::ALL
        .into_iter()
        .filter(|k| ksearch_eval::builtin_processes(*k).is_some())
        .map(BackendKind::name)
        .collect::<Vec<_>>()
        .join(", ")
}

/// The manual model's call the run paused for, when `err` is that pause.
pub(crate) fn paused(err: &anyhow::Error) -> Option<&ksearch_engine::ProposeError> {
    use ksearch_engine::{EngineError, ProposeError};
    err.chain().find_map(|cause| {
        // The engine's error is transparent: the proposer's is not in the chain of its own.
        let p = match cause.downcast_ref::<EngineError>() {
            Some(EngineError::Propose(p)) => p,
            _ => cause.downcast_ref::<ProposeError>()?,
        };
        matches!(p, ProposeError::Pending { .. }).then_some(p)
    })
}

/// The one line a pause prints: the prompt file, the answer file, and how to go on.
pub(crate) fn paused_line(err: &anyhow::Error) -> Option<String> {
    let Some(ksearch_engine::ProposeError::Pending {
        call,
        prompt,
        answer,
    }) = paused(err)
    else {
        return None;
    };
    // The files are in RUN_DIR/manual/.
    let run_dir = prompt
        .parent()
        .and_then(std::path::Path::parent)
        .unwrap_or(std::path::Path::new("."));
    Some(format!(
        "paused: model call {call} waits for an answer: prompt {}, answer into {} (or `ksearch answer {} FILE`), then `ksearch resume {}`",
        prompt.display(),
        answer.display(),
        run_dir.display(),
        run_dir.display()
    ))
}

/// Whether `err` is a write to a pipe whose reader has gone (`ksearch report -o - | head`).
pub(crate) fn broken_pipe(err: &anyhow::Error) -> bool {
    err.chain().any(|cause| {
        cause
            .downcast_ref::<std::io::Error>()
            .is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe)
            || cause
                .downcast_ref::<serde_json::Error>()
                .is_some_and(|e| e.io_error_kind() == Some(std::io::ErrorKind::BrokenPipe))
    })
}

/// An error and its causes in one line, each cause once: a cause whose text its error already
/// quotes (`database error in …: attempt to write a readonly database`, then the SQLite error
/// itself, then its code's) is not said again.
pub(crate) fn error_text(err: &anyhow::Error) -> String {
    let mut text = String::new();
    for cause in err.chain() {
        let part = cause.to_string();
        if part.is_empty() || text.contains(&part) {
            continue;
        }
        if !text.is_empty() {
            text.push_str(": ");
        }
        text.push_str(&part);
    }
    text
}

/// The exit code of a failed command: the one mapping from errors to `exit_codes`. Errors in
/// what the user gave get their own code; a pause, and Ctrl-C, theirs.
pub(crate) fn exit_code_for(err: &anyhow::Error) -> i32 {
    use ksearch_engine::{EngineError, ProposeError, RunError};
    use ksearch_store::StoreError;
    if paused(err).is_some() {
        return exit_codes::PAUSED;
    }
    // The code of a store error: a record holding NaN or infinity is a bug in ksearch, never
    // the user's input; any other says what is wrong with the run directory given.
    let store = |e: &StoreError| match e {
        StoreError::NonFinite { .. } => exit_codes::INTERNAL,
        _ => exit_codes::INPUT,
    };
    // An evaluation that could not be made for what the user gave (the task, the options).
    let eval = |e: &EvalError| {
        matches!(
            e,
            EvalError::UnknownWorkload { .. } | EvalError::Options(_) | EvalError::Task { .. }
        )
        .then_some(exit_codes::INPUT)
    };
    let run = |e: &RunError| match e {
        RunError::Store(s) => store(s),
        _ => exit_codes::INPUT,
    };
    for cause in err.chain() {
        if cause.is::<crate::error::UsageError>() {
            return exit_codes::USAGE;
        }
        if cause.is::<crate::error::InputError>() {
            return exit_codes::INPUT;
        }
        // The engine's error is transparent: the errors it wraps are not in the chain.
        if let Some(e) = cause.downcast_ref::<EngineError>() {
            match e {
                EngineError::InterruptedDuringSetup => return exit_codes::INTERRUPTED,
                EngineError::Store(s) => return store(s),
                EngineError::Run(r) => return run(r),
                EngineError::Eval(e) => {
                    if let Some(code) = eval(e) {
                        return code;
                    }
                }
                EngineError::Propose(ProposeError::Unsupported { .. })
                | EngineError::Incomplete { .. }
                | EngineError::NotReplayable { .. } => return exit_codes::INPUT,
                _ => {}
            }
        }
        if let Some(s) = cause.downcast_ref::<StoreError>() {
            return store(s);
        }
        if let Some(r) = cause.downcast_ref::<RunError>() {
            return run(r);
        }
        if let Some(code) = cause.downcast_ref::<EvalError>().and_then(eval) {
            return code;
        }
        if let Some(r) = cause.downcast_ref::<ksearch_report::ReportError>() {
            return if r.is_input() {
                exit_codes::INPUT
            } else {
                exit_codes::INTERNAL
            };
        }
        if let Some(ProposeError::Unsupported { .. }) = cause.downcast_ref() {
            return exit_codes::INPUT;
        }
        if let Some(
            ksearch_llm::LlmError::MissingKey { .. }
            | ksearch_llm::LlmError::InvalidSpec { .. }
            | ksearch_llm::LlmError::Settings { .. },
        ) = cause.downcast_ref()
        {
            return exit_codes::INPUT;
        }
        if cause.is::<LoadError>()
            || cause.is::<ksearch_tasks::ReadError>()
            || cause.is::<ksearch_core::location::FileError>()
            || cause.is::<ksearch_knowledge::cli::CliError>()
            || cause.is::<ksearch_knowledge::LoadError>()
        {
            return exit_codes::INPUT;
        }
    }
    exit_codes::INTERNAL
}

#[cfg(test)]
mod tests {
    use super::{builtin, error_text, hosted};

    #[test]
    fn an_error_chain_says_each_cause_once() {
        let err = anyhow::anyhow!("attempt to write a readonly database")
            .context("database error in run.sqlite: attempt to write a readonly database")
            .context("failed to open the run");
        assert_eq!(
            error_text(&err),
            "failed to open the run: database error in run.sqlite: attempt to write a readonly database"
        );
    }

    #[test]
    fn worker_and_runner_are_found_by_the_backends_exact_name() {
        assert!(builtin("c").is_some());
        // The mlx worker is the Python harness, not this binary.
        assert!(builtin("mlx").is_none());
        assert!(builtin("C").is_none());
        assert!(builtin("torch").is_none());
        assert_eq!(hosted(), "c");
    }
}

//! `ksearch answer RUN_DIR [FILE|-]`: the answer to the model call a run paused for.

use std::io::{Read, Write};
use std::path::Path;

use anyhow::Context;

use crate::error::InputError;
use crate::exit_codes;

/// The most an answer may hold (a kernel source with prose around it is far less).
const ANSWER_LIMIT: u64 = 4 << 20;

pub(crate) fn run(run_dir: &Path, file: &Path) -> anyhow::Result<i32> {
    // The run must be one: a typo in RUN_DIR is not a run without a pending call.
    ksearch_run::open_run(run_dir)?;
    let dir = super::run::manual_dir(run_dir);
    let call = ksearch_llm::pending_call(&dir)
        .with_context(|| format!("failed to read the model calls in {}", dir.display()))?
        .ok_or_else(|| {
            InputError(format!(
                "{} has no model call waiting for an answer (`ksearch resume {}` goes on)",
                run_dir.display(),
                run_dir.display()
            ))
        })?;
    let text = if file == Path::new("-") {
        let mut text = String::new();
        std::io::stdin()
            .take(ANSWER_LIMIT + 1)
            .read_to_string(&mut text)
            .context("failed to read the answer from stdin")?;
        anyhow::ensure!(
            text.len() as u64 <= ANSWER_LIMIT,
            "the answer on stdin is larger than {ANSWER_LIMIT} bytes"
        );
        text
    } else {
        ksearch_tasks::read_text(file, ANSWER_LIMIT, "an answer")?
    };
    if text.trim().is_empty() {
        return Err(InputError(format!(
            "the answer is empty; model call {} still waits for one",
            call.call
        ))
        .into());
    }
    call.write_answer(&text)
        .with_context(|| format!("failed to write {}", call.answer.display()))?;
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "answered model call {} ({} {}, round {}) in {}; `ksearch resume {}` goes on",
        call.call,
        call.role,
        call.purpose,
        call.round,
        call.answer.display(),
        run_dir.display()
    )?;
    Ok(exit_codes::OK)
}

use std::io::Write;

use crate::exit_codes;

pub(crate) fn run(task: &str) -> anyhow::Result<i32> {
    let task = crate::commands::load_task(task)?;
    let mut out = std::io::stdout().lock();
    writeln!(out, "task {} ({} backend)\n", task.id, task.spec.backend)?;
    write!(out, "{}", ksearch_core::contract::contract_for(&task.spec))?;
    Ok(exit_codes::OK)
}

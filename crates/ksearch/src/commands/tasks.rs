use std::io::Write;

use anyhow::Context;
use serde::Serialize;

use crate::exit_codes;

#[derive(Serialize)]
struct TaskRow {
    name: String,
    backend: String,
    class: String,
    workloads: Vec<String>,
    /// Each workload's axes, in the order the task declares its axes.
    sizes: Vec<Size>,
    baseline: String,
    description: String,
}

#[derive(Serialize)]
struct Size {
    workload: String,
    axes: std::collections::BTreeMap<String, i64>,
    /// `small (rows=61 cols=1000)`: the axes in the order the task declares them.
    #[serde(skip)]
    text: String,
}

pub(crate) fn run(json: bool) -> anyhow::Result<i32> {
    let mut rows = Vec::new();
    for name in ksearch_tasks::builtin_names() {
        let task = ksearch_tasks::load_builtin(name)
            .with_context(|| format!("built-in task `{name}` is broken"))?;
        rows.push(TaskRow {
            name: name.to_owned(),
            backend: task.spec.backend.to_string(),
            class: task.spec.class.name().to_owned(),
            workloads: task.spec.workloads.iter().map(|w| w.name.clone()).collect(),
            sizes: task
                .spec
                .workloads
                .iter()
                .map(|w| {
                    let axes: Vec<String> = task
                        .spec
                        .axes
                        .iter()
                        .filter_map(|a| Some(format!("{a}={}", w.axes.get(a)?)))
                        .collect();
                    Size {
                        workload: w.name.clone(),
                        axes: w.axes.clone(),
                        text: format!("{} ({})", w.name, axes.join(" ")),
                    }
                })
                .collect(),
            baseline: task.baseline_name(),
            description: task.spec.description.clone(),
        });
    }
    let mut out = std::io::stdout().lock();
    if json {
        serde_json::to_writer_pretty(&mut out, &rows)?;
        writeln!(out)?;
    } else {
        let width = rows.iter().map(|r| r.name.len()).max().unwrap_or(4).max(4);
        writeln!(
            out,
            "{:width$}  {:7}  {:12}  workloads",
            "task", "backend", "class"
        )?;
        for r in &rows {
            writeln!(
                out,
                "{:width$}  {:7}  {:12}  {}",
                r.name,
                r.backend,
                r.class,
                r.workloads.join(", ")
            )?;
            writeln!(out, "{:width$}  {}", "", r.description)?;
            let sizes: Vec<&str> = r.sizes.iter().map(|s| s.text.as_str()).collect();
            writeln!(out, "{:width$}  sizes: {}", "", sizes.join(" · "))?;
        }
    }
    Ok(exit_codes::OK)
}

//! Workloads from a trace (JSON lines of Workloads or Traces), and their names.

use std::collections::{BTreeMap, BTreeSet};

use super::definition::Parsed;
use super::{MAX_WORKLOADS, Unfit, fits};
use crate::import::{ImportError, Json};

/// A workload's axis values.
pub(super) type Axes = BTreeMap<String, i64>;

/// Workloads from JSON lines (Workloads or Traces): their var axes, and the values of scalar
/// inputs (which must be the same in every workload kept).
pub(super) fn read_workloads(
    p: &Parsed,
    text: &str,
    file: &str,
    notes: &mut Vec<String>,
) -> Result<(Vec<Axes>, BTreeMap<String, f64>), ImportError> {
    let free: Vec<&String> = p
        .vars
        .iter()
        .filter(|v| !p.derived.contains_key(*v))
        .collect();
    let mut seen = BTreeSet::new();
    let mut all = Vec::new();
    let mut scalars: BTreeMap<String, (f64, usize)> = BTreeMap::new();
    let mut stored = BTreeSet::new();
    let mut too_large = Vec::new();
    let mut other_scalars = Vec::new();
    let mut breaking = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let at = |f: &str| {
            format!(
                "line {}{}",
                i + 1,
                if f.is_empty() {
                    String::new()
                } else {
                    format!(", field `{f}`")
                }
            )
        };
        if line.trim().is_empty() {
            continue;
        }
        let j = Json::parse(line).map_err(|e| ImportError::new(file, at(""), e))?;
        if let Some(d) = j.get("definition").and_then(Json::as_str)
            && d != p.name
        {
            continue;
        }
        let w = j.get("workload").unwrap_or(&j);
        let axes = w
            .get("axes")
            .and_then(Json::members)
            .ok_or_else(|| ImportError::new(file, at("workload.axes"), "is missing"))?;
        let mut values = BTreeMap::new();
        for (a, v) in axes {
            if !p.vars.contains(a) {
                return Err(ImportError::new(
                    file,
                    at(&format!("workload.axes.{a}")),
                    format!("`{a}` is not a var axis of `{}`", p.name),
                ));
            }
            let v = v.as_i64().filter(|v| *v >= 0).ok_or_else(|| {
                ImportError::new(
                    file,
                    at(&format!("workload.axes.{a}")),
                    "is not a non-negative integer",
                )
            })?;
            values.insert(a.clone(), v);
        }
        if let Some(a) = free.iter().find(|a| !values.contains_key(**a)) {
            return Err(ImportError::new(
                file,
                at("workload.axes"),
                format!("var axis `{a}` has no value"),
            ));
        }
        let mut other_scalar = None;
        for (name, input) in w.get("inputs").and_then(Json::members).unwrap_or(&[]) {
            match input.get("type").and_then(Json::as_str) {
                Some("scalar") => {
                    let v = input.get("value").and_then(Json::as_f64).ok_or_else(|| {
                        ImportError::new(
                            file,
                            at(&format!("workload.inputs.{name}.value")),
                            "a scalar input needs a number",
                        )
                    })?;
                    // Two decimal texts of one float32 (0.0883883461356163 and
                    // 0.08838834764831843) are one value.
                    let f32_input = p
                        .inputs
                        .iter()
                        .any(|t| t.name == *name && t.dtype == ksearch_core::dtype::Dtype::F32);
                    let same = |a: f64, b: f64| a == b || (f32_input && a as f32 == b as f32);
                    match scalars.get(name) {
                        Some((old, line)) if !same(*old, v) => {
                            other_scalar = Some(format!(
                                "line {} (`{name}` = {v}, not line {line}'s {old})",
                                i + 1
                            ));
                        }
                        Some(_) => {}
                        None => {
                            scalars.insert(name.clone(), (v, i + 1));
                        }
                    }
                }
                Some("safetensors") => {
                    stored.insert(name.clone());
                }
                Some("random") | None => {}
                Some(other) => {
                    return Err(ImportError::new(
                        file,
                        at(&format!("workload.inputs.{name}.type")),
                        format!(
                            "`{other}` is not an input source ksearch knows (random, scalar, safetensors)"
                        ),
                    ));
                }
            }
        }
        if let Some(why) = other_scalar {
            // A ksearch task gives a scalar input one value: the first line's.
            other_scalars.push(why);
            continue;
        }
        match fits(p, &values) {
            Ok(()) => {}
            Err(Unfit::Breaks(why)) => {
                breaking.push(format!("line {} ({why})", i + 1));
                continue;
            }
            Err(Unfit::Size(why)) => {
                too_large.push(format!("line {} ({why})", i + 1));
                continue;
            }
        }
        if seen.insert(values.clone()) {
            all.push(values);
        }
    }
    let left_out: Vec<String> = [
        (too_large, "whose sizes a task cannot hold"),
        (breaking, "which break the definition's constraints"),
        (
            other_scalars,
            "whose scalar inputs differ from the first's (a task gives a scalar one value)",
        ),
    ]
    .into_iter()
    .filter(|(lines, _)| !lines.is_empty())
    .map(|(lines, why)| format!("workloads left out, {why}: {}", lines.join("; ")))
    .collect();
    notes.extend(left_out.iter().cloned());
    if !stored.is_empty() {
        notes.push(format!(
            "inputs {} were stored tensors (safetensors) in {file}: ksearch draws fresh inputs for every call instead",
            stored.iter().map(|s| format!("`{s}`")).collect::<Vec<_>>().join(", ")
        ));
    }
    if all.is_empty() {
        let why = if left_out.is_empty() {
            String::new()
        } else {
            format!(" a task can take: {}", left_out.join("; "))
        };
        return Err(ImportError::new(
            file,
            "(lines)",
            format!("holds no workload of `{}`{why}", p.name),
        ));
    }
    let size = |w: &BTreeMap<String, i64>| w.values().map(|v| (*v).max(1) as f64).product::<f64>();
    all.sort_by(|a, b| size(a).total_cmp(&size(b)));
    if all.len() > MAX_WORKLOADS {
        let n = all.len();
        let keep: Vec<usize> = (0..MAX_WORKLOADS)
            .map(|k| k * (n - 1) / (MAX_WORKLOADS - 1))
            .collect();
        notes.push(format!("{file} holds {n} distinct workloads; kept {MAX_WORKLOADS}, spread from the smallest to the largest"));
        all = keep.into_iter().map(|k| all[k].clone()).collect();
    }
    if all.len() == 1 {
        notes.push("the trace holds one workload: it is used twice (as `…` and `…-again`), since a task has at least two".into());
        let again = all[0].clone();
        all.push(again);
    }
    Ok((all, scalars.into_iter().map(|(k, (v, _))| (k, v)).collect()))
}

pub(super) fn workload_name(p: &Parsed, axes: &BTreeMap<String, i64>) -> String {
    let parts: Vec<String> = p
        .vars
        .iter()
        .filter(|v| !p.derived.contains_key(*v))
        .filter_map(|v| axes.get(v).map(|x| format!("{v}{x}")))
        .collect();
    if parts.is_empty() {
        "default".into()
    } else {
        parts.join("_")
    }
}

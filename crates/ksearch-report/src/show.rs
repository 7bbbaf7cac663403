//! One node in the terminal (`ksearch show RUN_DIR NODE`): its hypothesis, its numbers, its
//! notes, every attempt made on it with its evaluation, and the source of its solution.

use std::fmt::Write as _;

use ksearch_core::protocol::{Role, WorkloadReport};
use ksearch_core::record::AttemptRecord;
use ksearch_core::tree::{Impact, Node, NodeId};
use ksearch_core::units::{time_ms, time_ms_spread};
use serde::Serialize;

use crate::data::{ReportError, RunData, node_status};
use crate::format::x;

/// What `ksearch show --json` prints.
#[derive(Debug, Serialize)]
pub struct ShowJson<'a> {
    pub task: &'a str,
    pub baseline: &'a str,
    pub node: &'a Node,
    pub status: &'static str,
    pub depth: usize,
    /// Ids from the root down to the node.
    pub path: Vec<NodeId>,
    pub children: Vec<NodeId>,
    pub best: bool,
    pub attempts: Vec<&'a AttemptRecord>,
    pub source: Option<SourceJson<'a>>,
}

#[derive(Debug, Serialize)]
pub struct SourceJson<'a> {
    pub file: &'a str,
    pub sha256: &'a str,
    /// `None` when the artifact is missing from the run directory.
    pub text: Option<&'a str>,
}

pub fn json(data: &RunData, id: NodeId) -> Result<ShowJson<'_>, ReportError> {
    let node = data.node(id)?;
    Ok(ShowJson {
        task: &data.task.id,
        baseline: &data.summary.baseline,
        node,
        status: node_status(node),
        depth: data.tree.depth(id),
        path: data.tree.path(id),
        children: data.tree.children(id).map(|c| c.id).collect(),
        best: data.summary.best.node == id,
        attempts: data.attempts_of(id).collect(),
        source: node.solution.as_ref().map(|s| SourceJson {
            file: &s.source_file,
            sha256: &s.source_hash,
            text: data.sources.get(&s.source_hash).map(String::as_str),
        }),
    })
}

fn impact_line(o: &mut String, name: &str, i: &Impact) {
    let line = format!(
        "    {name:<18} {:>4.1}/10  risk {:<6}  {}",
        i.rating,
        i.risk.as_str(),
        i.notes
    );
    let _ = writeln!(o, "{}", line.trim_end());
}

/// Indent every line of a block of text.
fn block(o: &mut String, text: &str, indent: &str) {
    for line in text.trim_end().lines() {
        if line.is_empty() {
            let _ = writeln!(o);
        } else {
            let _ = writeln!(o, "{indent}{line}");
        }
    }
}

fn timing(w: &WorkloadReport, role: Role) -> String {
    w.timing(role).map_or_else(
        || "-".into(),
        |t| time_ms_spread(t.median_ms, t.p10_ms, t.p90_ms),
    )
}

fn attempt(o: &mut String, a: &AttemptRecord) {
    let status = a.status().map_or("pending", |s| s.as_str());
    let _ = write!(
        o,
        "  round {} · {} · cycle {} · {status}",
        a.round,
        a.kind.as_str(),
        a.cycle
    );
    if let Some(s) = a.speedup() {
        let _ = write!(o, " · {s:.2}× over the baseline");
    }
    if let Some(p) = a
        .evaluation
        .as_ref()
        .and_then(|e| e.speedup_vs_parent.as_ref())
    {
        let _ = write!(o, " · {:.2}× over the parent", p.geomean);
    }
    if a.improved {
        let _ = write!(o, " · improved");
    }
    let _ = writeln!(o);
    if !a.note.is_empty() {
        let _ = writeln!(o, "    note: {}", a.note);
    }
    let Some(e) = &a.evaluation else {
        let _ = writeln!(o, "    (evaluation not finished: it runs again on resume)");
        return;
    };
    let r = &e.result;
    if !r.message.is_empty() {
        let _ = writeln!(o, "    message: {}", r.message);
    }
    let load = e
        .load
        .map_or_else(String::new, |l| format!(", {}", l.describe()));
    let _ = writeln!(
        o,
        "    time: {:.2}s (compile {:.2}s, check {:.2}s, timing {:.2}s{load})",
        e.wall_s, r.phases.compile_s, r.phases.check_s, r.phases.timing_s
    );
    for caveat in &e.caveats {
        let _ = writeln!(o, "    caveat: {caveat}");
    }
    if let Some(c) = &r.compile
        && !c.log.trim().is_empty()
    {
        let _ = writeln!(o, "    compiler log:");
        block(
            o,
            &ksearch_core::protocol::trim_log(&c.log, 12, 2000),
            "      ",
        );
    }
    if r.workloads.is_empty() {
        return;
    }
    let _ = writeln!(
        o,
        "    {:<10} {:<13} {:>24} {:>24} {:>24} {:>8}",
        "workload", "status", "candidate (p10–p90)", "parent", "baseline", "speedup"
    );
    for w in &r.workloads {
        let speedup = e
            .speedup
            .as_ref()
            .and_then(|s| s.workloads.iter().find(|s| s.workload == w.name))
            .map(|s| s.speedup);
        let _ = writeln!(
            o,
            "    {:<10} {:<13} {:>24} {:>24} {:>24} {:>8}",
            w.name,
            w.status.as_str(),
            timing(w, Role::Candidate),
            timing(w, Role::Parent),
            timing(w, Role::Baseline),
            x(speedup)
        );
        if let Some(m) = &w.message {
            let _ = writeln!(o, "      {m}");
        }
    }
}

/// The node as `ksearch show` prints it.
pub fn render(data: &RunData, id: NodeId) -> Result<String, ReportError> {
    let n = data.node(id)?;
    let tree = &data.tree;
    let mut o = String::new();
    let best = if data.summary.best.node == id {
        " · ★ best"
    } else {
        ""
    };
    let _ = writeln!(
        o,
        "node {id} · {} · {}{best}",
        node_status(n),
        n.action.title
    );
    let path: Vec<String> = tree.path(id).iter().map(ToString::to_string).collect();
    let _ = writeln!(
        o,
        "{} · depth {} · path {}",
        data.task.id,
        tree.depth(id),
        path.join(" → ")
    );
    if let Some(p) = n.parent.and_then(|p| tree.get(p)) {
        let _ = writeln!(o, "parent: node {} ({})", p.id, p.action.title);
    }
    let children: Vec<String> = tree.children(id).map(|c| c.id.to_string()).collect();
    if !children.is_empty() {
        let _ = writeln!(o, "children: {}", children.join(", "));
    }

    let _ = writeln!(o, "\nhypothesis");
    let _ = writeln!(o, "  decision: {}", n.decision);
    if !n.action.description.is_empty() {
        let _ = writeln!(o, "  description:");
        block(&mut o, &n.action.description, "    ");
    }
    if !n.action.rationale.is_empty() {
        let _ = writeln!(o, "  rationale:");
        block(&mut o, &n.action.rationale, "    ");
    }
    if n.parent.is_some() {
        let _ = writeln!(
            o,
            "  difficulty {}/5 · score {:.2} · rating {:.1}/10 · confidence {:.2}",
            n.action.difficulty, n.action.score, n.rating, n.confidence
        );
        let _ = writeln!(o, "  impacts:");
        impact_line(&mut o, "memory bandwidth", &n.impacts.memory_bandwidth);
        impact_line(&mut o, "register pressure", &n.impacts.register_pressure);
        impact_line(&mut o, "compute fit", &n.impacts.compute_fit);
    }

    let _ = writeln!(o, "\nnumbers");
    if n.parent.is_some() {
        let _ = writeln!(
            o,
            "  predicted over the parent: {}",
            x(Some(n.action.expected_speedup))
        );
    }
    match &n.solution {
        Some(s) => {
            if n.parent.is_some() {
                let interval = s
                    .vs_parent_interval
                    .map(|(lo, hi)| format!(" (95% {lo:.2}×–{hi:.2}×)"))
                    .unwrap_or_default();
                let _ = writeln!(
                    o,
                    "  measured over the parent:  {}{interval} · gate: {}",
                    x(s.speedup_vs_parent),
                    node_status(n)
                );
            }
            let _ = writeln!(
                o,
                "  over the baseline ({}): {}",
                data.summary.baseline,
                x(s.speedup)
            );
            let _ = writeln!(
                o,
                "  solution: round {} · {} · sha256 {}",
                s.round,
                s.source_file,
                &s.source_hash[..s.source_hash.len().min(12)]
            );
            if !s.latency_ms.is_empty() {
                let lat: Vec<String> = s
                    .latency_ms
                    .iter()
                    .map(|(w, v)| format!("{w} {}", time_ms(*v)))
                    .collect();
                let _ = writeln!(o, "  median latency: {}", lat.join(" · "));
            }
        }
        None => {
            let _ = writeln!(
                o,
                "  open: no solution attached · {} failed cycle(s)",
                n.failed_cycles
            );
        }
    }
    if data.judged_too_hard(id) {
        let _ = writeln!(o, "  judged too hard after a failed cycle (kept, revised)");
    }

    if !n.notes.is_empty() {
        let _ = writeln!(o, "\nnotes");
        for note in &n.notes {
            let _ = writeln!(o, "  - {note}");
        }
    }

    let attempts: Vec<&AttemptRecord> = data.attempts_of(id).collect();
    let _ = writeln!(o, "\nattempts ({})", attempts.len());
    if attempts.is_empty() {
        let _ = writeln!(o, "  none yet");
    }
    for a in attempts {
        attempt(&mut o, a);
    }

    if let Some(s) = &n.solution {
        let _ = writeln!(o, "\nsource ({}, round {})", s.source_file, s.round);
        match data.sources.get(&s.source_hash) {
            Some(text) => {
                o.push_str(text);
                if !text.ends_with('\n') {
                    o.push('\n');
                }
            }
            None => {
                let _ = writeln!(o, "  (missing from the run's artifacts: {})", s.source_hash);
            }
        }
    }
    Ok(o)
}

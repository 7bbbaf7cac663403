//! The tree in the terminal: one line per node, drawn as a tree, with the best path marked.

use std::collections::BTreeSet;
use std::fmt::Write as _;

use ksearch_core::tree::{Gate, Node, NodeId, ROOT, Tree};
use ksearch_engine::RunSummary;

fn x(v: Option<f64>) -> String {
    v.map_or_else(|| "-".into(), |v| format!("{v:.2}×"))
}

fn status(n: &Node) -> String {
    match &n.solution {
        Some(s) if n.id != ROOT => match s.gate {
            Gate::Better => "better".into(),
            Gate::Same => "same".into(),
            Gate::Worse => "worse".into(),
            Gate::Unmeasured => "closed".into(),
        },
        Some(_) => "seed".into(),
        None if n.failed_cycles > 0 => format!("failed×{}", n.failed_cycles),
        None => "open".into(),
    }
}

/// The header and the tree, as `ksearch tree` prints them.
pub(crate) fn render(summary: &RunSummary, tree: &Tree) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "{} · {} proposer · {} rounds · best node {} at {} over {} ({} over the seed)",
        summary.task,
        summary.proposer,
        summary.rounds,
        summary.best.node,
        x(summary.best.speedup),
        summary.baseline,
        x(summary.best.speedup_vs_seed)
    );
    let _ = writeln!(
        o,
        "status: better/same/worse = solved, judged against the parent by the paired acceptance gate; ★ = best path\n"
    );
    let _ = writeln!(
        o,
        "{:>4}  {:<9} {:>6} {:>5} {:>8} {:>8} {:>8}  action",
        "node", "status", "rating", "conf", "pred", "meas", "speedup"
    );
    let best_path: BTreeSet<NodeId> = tree.path(summary.best.node).into_iter().collect();
    let mut lines = Vec::new();
    walk(
        tree,
        ROOT,
        String::new(),
        true,
        true,
        &best_path,
        &mut lines,
    );
    for line in lines {
        let _ = writeln!(o, "{line}");
    }
    o
}

fn walk(
    tree: &Tree,
    id: NodeId,
    prefix: String,
    last: bool,
    is_root: bool,
    best: &BTreeSet<NodeId>,
    out: &mut Vec<String>,
) {
    let Some(n) = tree.get(id) else { return };
    let branch = if is_root {
        String::new()
    } else if last {
        format!("{prefix}└─ ")
    } else {
        format!("{prefix}├─ ")
    };
    let sol = n.solution.as_ref();
    let star = if best.contains(&id) { " ★" } else { "" };
    let pred = if is_root {
        "-".into()
    } else {
        x(Some(n.action.expected_speedup))
    };
    out.push(format!(
        "{:>4}  {:<9} {:>6.1} {:>5.2} {:>8} {:>8} {:>8}  {branch}{}{star}",
        id,
        status(n),
        n.rating,
        n.confidence,
        pred,
        x(sol.and_then(|s| s.speedup_vs_parent)),
        x(sol.and_then(|s| s.speedup)),
        n.action.title
    ));
    let children: Vec<NodeId> = tree.children(id).map(|c| c.id).collect();
    let child_prefix = if is_root {
        String::new()
    } else if last {
        format!("{prefix}   ")
    } else {
        format!("{prefix}│  ")
    };
    for (i, c) in children.iter().enumerate() {
        walk(
            tree,
            *c,
            child_prefix.clone(),
            i + 1 == children.len(),
            false,
            best,
            out,
        );
    }
}

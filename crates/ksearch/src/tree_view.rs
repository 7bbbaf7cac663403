//! The tree in the terminal: one line per node, drawn as a tree, with the best path marked.

use std::collections::BTreeSet;
use std::fmt::Write as _;

use ksearch_core::record::AttemptRecord;
use ksearch_core::tree::{Gate, Node, NodeId, ROOT, Tree};
use ksearch_run::RunSummary;

/// The most of an attempt's note shown after a node's action.
const NOTE_CHARS: usize = 72;

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

/// What a solved node kept, where that is not its action as written (`kept_note`), cut to a
/// line of the tree.
fn kept(n: &Node, attempts: &[AttemptRecord]) -> Option<String> {
    let (round, whole) = ksearch_run::kept_note(n, attempts)?;
    let note: String = whole.chars().take(NOTE_CHARS).collect();
    let more = if whole.chars().count() > NOTE_CHARS {
        "…"
    } else {
        ""
    };
    Some(format!(" (kept round {round}: {note}{more})"))
}

/// The header and the tree, as `ksearch tree` prints them. A node whose solution came from a
/// later attempt of its cycle says what that attempt changed.
pub(crate) fn render(summary: &RunSummary, tree: &Tree, attempts: &[AttemptRecord]) -> String {
    let mut o = String::new();
    // Over a reference (no production baseline) the seed comes first, as in the summary.
    let (vs_seed, vs_baseline) = (
        format!("{} over the seed", x(summary.best.speedup_vs_seed)),
        format!("{} over {}", x(summary.best.speedup), summary.baseline),
    );
    let (first, second) = if summary.baseline_is_reference {
        (vs_seed, vs_baseline)
    } else {
        (vs_baseline, vs_seed)
    };
    let _ = writeln!(
        o,
        "{} · {} proposer · {} rounds · best node {} at {first} ({second})",
        summary.task, summary.proposer, summary.rounds, summary.best.node,
    );
    if summary.tokens > 0 {
        let calls: u64 = summary.llm.values().map(|t| t.calls).sum();
        let _ = writeln!(
            o,
            "models: ${:.4} for {} tokens{} in {calls} calls",
            summary.cost_usd,
            summary.tokens,
            if summary.llm.values().any(|t| t.tokens_estimated) {
                " (estimated)"
            } else {
                ""
            }
        );
    }
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
    walk(tree, attempts, ROOT, "", true, true, &best_path, &mut lines);
    for line in lines {
        let _ = writeln!(o, "{line}");
    }
    o
}

#[allow(clippy::too_many_arguments)]
fn walk(
    tree: &Tree,
    attempts: &[AttemptRecord],
    id: NodeId,
    prefix: &str,
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
    let kept = if is_root { None } else { kept(n, attempts) };
    let under_way = if ksearch_run::is_under_way(n) {
        " (cycle under way: its best attempt so far)"
    } else {
        ""
    };
    out.push(format!(
        "{:>4}  {:<9} {:>6.1} {:>5.2} {:>8} {:>8} {:>8}  {branch}{}{star}{}{under_way}",
        id,
        status(n),
        n.rating,
        n.confidence,
        pred,
        x(sol.and_then(|s| s.speedup_vs_parent)),
        x(sol.and_then(|s| s.speedup)),
        n.action.title,
        kept.unwrap_or_default()
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
            attempts,
            *c,
            &child_prefix,
            i + 1 == children.len(),
            false,
            best,
            out,
        );
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use ksearch_core::record::AttemptKind;
    use ksearch_core::tree::{Action, Gate, NewNode, Solution};
    use ksearch_core::tree_edit::{EditOp, EditScript, apply};
    use ksearch_run::{Best, RunSummary};

    use super::*;

    fn sol(round: u64, speedup: f64, vs_parent: Option<f64>, gate: Gate) -> Solution {
        Solution {
            round,
            source_hash: format!("h{round}"),
            source_file: "k.c".into(),
            speedup: Some(speedup),
            speedup_vs_parent: vs_parent,
            vs_parent_interval: vs_parent.map(|v| (v * 0.95, v * 1.05)),
            gate,
            latency_ms: BTreeMap::new(),
            baseline_ms: Default::default(),
        }
    }

    fn node(title: &str, expected: f64, confidence: f64) -> NewNode {
        NewNode {
            decision: title.into(),
            action: Action {
                title: title.into(),
                description: String::new(),
                difficulty: 2,
                score: 0.5,
                expected_speedup: expected,
                rationale: String::new(),
            },
            rating: 6.0,
            confidence,
            impacts: Default::default(),
            payload: serde_json::Value::Null,
        }
    }

    #[test]
    fn the_tree_view_marks_status_and_the_best_path() {
        let mut t = Tree::new(vec![], sol(0, 1.2, None, Gate::Unmeasured));
        let ins = |p, n| EditOp::Insert { parent: p, node: n };
        apply(
            &mut t,
            &EditScript {
                ops: vec![
                    ins(0, node("loop interchange: ikj", 8.0, 0.4)),
                    ins(0, node("tile k: 64", 2.0, 0.4)),
                    ins(0, node("unroll: 4", 1.2, 0.3)),
                ],
            },
            0,
        )
        .unwrap();
        t.attach(1, sol(1, 14.4, Some(12.0), Gate::Better), 1);
        t.attach(2, sol(3, 1.25, Some(1.04), Gate::Same), 3);
        t.record_failed_cycle(3, 5);
        apply(
            &mut t,
            &EditScript {
                ops: vec![
                    ins(1, node("vector width: 16", 1.8, 0.5)),
                    ins(1, node("register block: 4×16", 2.5, 0.5)),
                ],
            },
            6,
        )
        .unwrap();
        t.attach(5, sol(7, 30.0, Some(2.08), Gate::Better), 7);
        let summary = RunSummary {
            run_dir: "/runs/x".into(),
            task: "cpu/matmul".into(),
            proposer: "builtin".into(),
            baseline: "OpenBLAS cblas_sgemm (1 thread)".into(),
            baseline_description: None,
            baseline_is_reference: false,
            baseline_left_out: None,
            rounds: 7,
            nodes: t.len(),
            cycles: 4,
            best: Best {
                node: 5,
                title: "register block: 4×16".into(),
                speedup: Some(30.0),
                speedup_vs_seed: Some(25.0),
                latency_ms: BTreeMap::new(),
            },
            seed_latency_ms: BTreeMap::new(),
            stop_reason: None,
            stop_detail: None,
            wall_s: 10.0,
            eval_s: 9.9,
            orchestrator_s: 0.1,
            orchestrator_fraction: 0.01,
            calibration: ksearch_core::calibration::calibration(&t),
            cost_usd: 0.0,
            tokens: 0,
            llm: BTreeMap::new(),
        };
        let attempt = |round, node, kind, note: &str| AttemptRecord {
            round,
            node,
            cycle: u64::from(node),
            kind,
            source_hash: format!("h{round}"),
            source_file: "k.c".into(),
            note: note.into(),
            evaluation: None,
            improved: true,
            payload: serde_json::Value::Null,
        };
        // Node 2's cycle kept its second attempt (round 3), which changed what its action said.
        let attempts = [
            attempt(
                1,
                1,
                AttemptKind::Implement,
                "implement: loop order ijk → ikj",
            ),
            attempt(
                2,
                2,
                AttemptKind::Implement,
                "implement: `tile_k` none → 64",
            ),
            attempt(3, 2, AttemptKind::Improve, "improve: `tile_k`\nnone → 32"),
            attempt(
                7,
                5,
                AttemptKind::Implement,
                "implement: register block 4×8 → 4×16",
            ),
        ];
        insta::assert_snapshot!(render(&summary, &t, &attempts));
        // The summary's best and an export name a kept node's kernel the same way, whole.
        assert_eq!(
            ksearch_run::solution_title(t.get(2).unwrap(), &attempts),
            "tile k: 64 (kept round 3: improve: `tile_k` none → 32)"
        );
        assert_eq!(
            ksearch_run::solution_title(t.get(5).unwrap(), &attempts),
            "register block: 4×16"
        );
    }
}

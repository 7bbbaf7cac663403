//! A cycle under way, seen as if it ended now. Its best attempt so far is attached to its node
//! only when the cycle ends; until then the stored tree does not hold it. What a viewer reads
//! (`tree`, `show`, `export`, the report, the run's best on the progress line) attaches it, so
//! that a measured, passed attempt is seen and exported at once: while a manual run waits for
//! an answer, while a run is going, after a Ctrl-C.

use ksearch_core::gate;
use ksearch_core::record::{AttemptRecord, CycleRecord};
use ksearch_core::tree::{Node, Solution, Tree};

/// How the note of a node shown with its cycle's best attempt so far begins.
const UNDER_WAY: &str = "cycle under way";

/// The note a node shown with its cycle's best attempt so far carries.
pub fn open_cycle_note(cycle: u64, round: u64) -> String {
    format!(
        "{UNDER_WAY} (cycle {cycle}): its best attempt so far (round {round}) is shown as this node's solution, judged against the parent as the cycle's end will judge it; the cycle may keep a later one"
    )
}

/// Whether `node` is shown with the best attempt so far of a cycle under way
/// ([`with_open_cycles`]) rather than a solution its cycle's end attached.
pub fn is_under_way(node: &Node) -> bool {
    node.solution.is_some() && node.notes.last().is_some_and(|n| n.starts_with(UNDER_WAY))
}

/// `tree` with the best attempt so far of every cycle that has not ended attached to its node,
/// judged against the parent by the acceptance gate exactly as the cycle's end will judge it
/// (the same paired samples, the same seed), and noted as such ([`open_cycle_note`]). A node
/// already closed, or a cycle with nothing passed, is left as it is.
pub fn with_open_cycles(
    tree: &Tree,
    attempts: &[AttemptRecord],
    cycles: &[CycleRecord],
    run_seed: u64,
) -> Tree {
    let mut tree = tree.clone();
    for c in cycles.iter().filter(|c| c.outcome.is_none()) {
        let Some(round) = c.best_round else { continue };
        if !tree
            .get(c.node)
            .is_some_and(ksearch_core::tree::Node::is_open)
        {
            continue;
        }
        let Some((best, eval)) = attempts
            .iter()
            .find(|a| a.round == round && a.node == c.node)
            .and_then(|a| Some((a, a.evaluation.as_ref()?)))
        else {
            continue;
        };
        let vs_parent = gate::vs_parent(&eval.result, run_seed, round);
        tree.attach(c.node, Solution::of(best, eval, vs_parent), round);
        tree.note(c.node, open_cycle_note(c.id, round), round);
    }
    tree
}

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

#[cfg(test)]
mod tests {
    use ksearch_core::protocol::{
        CapturedOutput, ContenderTiming, EvaluateResult, Phases, Role, Status, WorkloadReport,
    };
    use ksearch_core::record::{AttemptKind, CycleOutcome, Evaluation};
    use ksearch_core::score::{Speedup, WorkloadSpeedup};
    use ksearch_core::stats::TimingStats;
    use ksearch_core::tree::{Action, Gate, NewNode, ROOT};

    use super::*;

    /// A passed evaluation: the candidate, the baseline and the parent each took this long on
    /// every sample of one workload.
    fn evaluation(candidate_ms: f64, baseline_ms: f64, parent_ms: f64) -> Evaluation {
        let timing = |role, ms: f64| ContenderTiming {
            role,
            label: format!("{role}"),
            stats: TimingStats::from_samples(vec![ms; 8], 1),
        };
        let speedup = |over: f64| Speedup {
            geomean: over / candidate_ms,
            workloads: vec![WorkloadSpeedup {
                workload: "small".into(),
                candidate_ms,
                other_ms: over,
                speedup: over / candidate_ms,
            }],
        };
        Evaluation {
            result: EvaluateResult {
                id: 1,
                status: Status::Passed,
                message: String::new(),
                compile: None,
                workloads: vec![WorkloadReport {
                    name: "small".into(),
                    status: Status::Passed,
                    message: None,
                    errors: None,
                    timings: vec![
                        timing(Role::Candidate, candidate_ms),
                        timing(Role::Baseline, baseline_ms),
                        timing(Role::Parent, parent_ms),
                    ],
                }],
                phases: Phases::default(),
                output: CapturedOutput::default(),
                sandbox: None,
                described: Vec::new(),
            },
            speedup: Some(speedup(baseline_ms)),
            speedup_vs_parent: Some(speedup(parent_ms)),
            baseline: "reference".into(),
            wall_s: 1.0,
            load: None,
            caveats: Vec::new(),
        }
    }

    /// The seed at 1× and one action under it, a cycle on it whose round 1 passed as
    /// `evaluation`; `ended`: the cycle's end has attached it already.
    fn run(evaluation: Evaluation, ended: bool) -> (Tree, Vec<AttemptRecord>, Vec<CycleRecord>) {
        let seed = seed_solution();
        let mut tree = Tree::new(Vec::new(), seed);
        let action = NewNode {
            decision: "vectorize".into(),
            action: Action {
                title: "vectorize".into(),
                description: String::new(),
                difficulty: 2,
                score: 0.5,
                expected_speedup: 2.0,
                rationale: String::new(),
            },
            rating: 5.0,
            confidence: 0.5,
            impacts: Default::default(),
            payload: serde_json::Value::Null,
        };
        ksearch_core::tree_edit::insert_initial(&mut tree, vec![action.clone(), action], 0)
            .unwrap();
        let attempt = AttemptRecord {
            round: 1,
            node: 1,
            cycle: 1,
            kind: AttemptKind::Implement,
            source_hash: "h1".into(),
            source_file: "k.c".into(),
            note: String::new(),
            evaluation: Some(evaluation),
            improved: true,
            payload: serde_json::Value::Null,
        };
        let cycle = CycleRecord {
            id: 1,
            node: 1,
            started_round: 1,
            ended_round: ended.then_some(1),
            outcome: ended.then_some(CycleOutcome::Passed),
            best_round: Some(1),
            stagnation: 0,
            attempts: 1,
        };
        (tree, vec![attempt], vec![cycle])
    }

    fn seed_solution() -> Solution {
        Solution {
            round: 0,
            source_hash: "h0".into(),
            source_file: "seed.c".into(),
            speedup: Some(1.0),
            speedup_vs_parent: None,
            vs_parent_interval: None,
            gate: Gate::Unmeasured,
            latency_ms: [("small".to_owned(), 2.0)].into(),
            baseline_ms: [("small".to_owned(), 2.0)].into(),
        }
    }

    #[test]
    fn a_cycle_under_way_shows_its_best_attempt_as_the_cycle_end_will_judge_it() {
        // Twice as fast as its parent (the seed): the run's best at once, marked as under way.
        let (tree, attempts, cycles) = run(evaluation(1.0, 2.0, 2.0), false);
        assert!(tree.get(1).unwrap().is_open());
        let shown = with_open_cycles(&tree, &attempts, &cycles, 7);
        let node = shown.get(1).unwrap();
        let solution = node.solution.as_ref().unwrap();
        assert_eq!((solution.round, solution.gate), (1, Gate::Better));
        assert_eq!(solution.speedup, Some(2.0));
        assert!(is_under_way(node), "{:?}", node.notes);
        assert_eq!(shown.best().id, 1);
        assert!(!is_under_way(shown.get(ROOT).unwrap()));
        assert!(shown.get(2).unwrap().is_open(), "no cycle works on node 2");

        // Faster than the baseline, but not than its parent: shown, never the best.
        let (tree, attempts, cycles) = run(evaluation(1.0, 2.0, 1.0), false);
        let shown = with_open_cycles(&tree, &attempts, &cycles, 7);
        assert_eq!(
            shown.get(1).unwrap().solution.as_ref().unwrap().gate,
            Gate::Same
        );
        assert_eq!(shown.best().id, ROOT);

        // A cycle that ended is the stored tree's business.
        let (tree, attempts, cycles) = run(evaluation(1.0, 2.0, 2.0), true);
        assert_eq!(with_open_cycles(&tree, &attempts, &cycles, 7), tree);
    }
}

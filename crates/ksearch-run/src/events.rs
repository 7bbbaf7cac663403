//! What the engine records beside the tree, the cycles and the attempts, in the order it
//! happened: one typed event each. The store keeps each as its kind (`session_ended`) and its
//! data (JSON); these types are the only writer and the readers' only way in.

use ksearch_core::gate::PairedRatio;
use ksearch_core::tree::NodeId;
use ksearch_core::tree_edit::EditOp;
use serde::{Deserialize, Serialize};

use crate::run_config::{CostStop, SessionEnd};

/// One recorded event. Serialised adjacently tagged: `kind` is the variant's name in snake
/// case, `data` its fields, the shape the store has always held.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", content = "data", rename_all = "snake_case")]
pub enum RunEvent {
    /// The initial world model's actions were inserted under the root.
    WorldModel { actions: Vec<NodeId> },
    /// An evaluation held a number that cannot be believed; it was recorded as rejected.
    EvaluationNotAdmitted { round: u64, problem: String },
    /// The orchestrator died during an evaluation; `outcome` says what happens to it.
    EvaluationLost {
        round: u64,
        times: u32,
        outcome: String,
    },
    /// The model gave up: no usable answer after every re-ask.
    UnusableModel { detail: String },
    /// A session stopped cleanly: why, and where (what a replay stops at).
    SessionEnded(SessionEnd),
    /// A model call was refused by the cost cap.
    CostCap(CostStop),
    /// A cycle started on `node`; `ranking` is every executable node's value then.
    CycleStarted {
        cycle: u64,
        node: NodeId,
        ranking: Vec<(NodeId, f64)>,
    },
    /// An attempt timed paired against the cycle's best (stored as `comparison`).
    VsIncumbent {
        round: u64,
        #[serde(rename = "comparison")]
        ratio: PairedRatio,
    },
    /// A cycle's best attempt became `node`'s solution.
    Attached {
        node: NodeId,
        round: u64,
        vs_parent: Option<PairedRatio>,
    },
    /// A solved node was left without an open child: the engine inserted one.
    FallbackChild { node: NodeId, child: NodeId },
    /// A cycle passed nothing and the proposer decided what becomes of the node.
    TooHard { node: NodeId, decision: String },
    /// An edit of the tree was applied.
    Edit {
        ops: Vec<EditOp>,
        created: Vec<NodeId>,
    },
    /// An edit of the tree was refused (and sent back to the proposer with the error).
    EditRejected { ops: Vec<EditOp>, error: String },
    /// With several evaluations in flight at once: one ended. These events are in the order
    /// the evaluations ended, which a replay follows to reach the same tree.
    EvaluationFinished {
        round: u64,
        /// The executor's slot, and where that is (`cpu 1`, `slurm job 12 on node3`).
        slot: u32,
        place: String,
        /// Seconds since the Unix epoch.
        started_unix: f64,
        finished_unix: f64,
        /// Runs of it that were lost and started again first (a cancelled Slurm job).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        retried: Vec<String>,
    },
}

impl RunEvent {
    /// The kind the store files it under: `session_ended`.
    pub fn kind(&self) -> String {
        self.stored().0
    }

    /// Its kind and its data, as the store keeps them.
    pub fn stored(&self) -> (String, serde_json::Value) {
        let mut value = serde_json::to_value(self).expect("events serialize");
        let kind = value["kind"].as_str().unwrap_or_default().to_owned();
        (kind, value["data"].take())
    }

    /// An event read back from its kind and data.
    pub fn from_stored(kind: &str, data: &serde_json::Value) -> Result<Self, serde_json::Error> {
        serde_json::from_value(serde_json::json!({ "kind": kind, "data": data }))
    }
}

/// `(round, kind, data)` rows read back as typed events, in order; an unreadable one is named.
pub fn decode(rows: &[(u64, String, serde_json::Value)]) -> Result<Vec<(u64, RunEvent)>, String> {
    rows.iter()
        .map(|(round, kind, data)| {
            RunEvent::from_stored(kind, data)
                .map(|e| (*round, e))
                .map_err(|e| format!("event `{kind}` of round {round} is unreadable: {e}"))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The shapes the engine wrote as hand-made JSON before the events were typed: a run
    /// recorded then reads as these events.
    #[test]
    fn events_keep_the_stored_shape() {
        let e = RunEvent::TooHard {
            node: 3,
            decision: "Delete".into(),
        };
        let (kind, data) = e.stored();
        assert_eq!(kind, "too_hard");
        assert_eq!(data, serde_json::json!({ "node": 3, "decision": "Delete" }));
        assert_eq!(RunEvent::from_stored(&kind, &data).unwrap(), e);
        let c = RunEvent::CycleStarted {
            cycle: 1,
            node: 2,
            ranking: vec![(2, 0.5)],
        };
        assert_eq!(
            c.stored().1,
            serde_json::json!({ "cycle": 1, "node": 2, "ranking": [[2, 0.5]] })
        );
        let rows = vec![
            (
                0,
                "world_model".to_owned(),
                serde_json::json!({ "actions": [1, 2] }),
            ),
            (4, "no_such_event".to_owned(), serde_json::json!({})),
        ];
        let err = decode(&rows).unwrap_err();
        assert!(err.contains("event `no_such_event` of round 4"), "{err}");
        assert_eq!(
            decode(&rows[..1]).unwrap(),
            vec![(
                0,
                RunEvent::WorldModel {
                    actions: vec![1, 2]
                }
            )]
        );
    }
}

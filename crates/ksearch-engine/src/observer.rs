//! Progress reporting: the engine tells an observer what it is doing; the CLI draws it.

use ksearch_core::protocol::Status;
use ksearch_core::record::AttemptKind;
use ksearch_core::tree::NodeId;

use ksearch_run::StopReason;

#[derive(Debug, Clone)]
pub enum Progress<'a> {
    /// The proposer is asked for something (a model call may take a while): `what` in words,
    /// e.g. `the initial world model`, `implement node 3`, `refine after node 3`.
    Proposing {
        what: &'a str,
    },
    CycleStarted {
        cycle: u64,
        node: NodeId,
        title: &'a str,
    },
    AttemptStarted {
        round: u64,
        kind: AttemptKind,
        node: NodeId,
        title: &'a str,
    },
    AttemptFinished {
        round: u64,
        status: Status,
        speedup: Option<f64>,
        best_speedup: Option<f64>,
        /// Model spend of the run so far, US dollars.
        spent_usd: f64,
    },
    CycleEnded {
        cycle: u64,
        node: NodeId,
        passed: bool,
    },
    /// What makes an evaluation's numbers less trustworthy (`ksearch_core::caveats`), said
    /// once for the seed, whose numbers every speedup is measured against.
    Caveats {
        round: u64,
        caveats: &'a [String],
    },
    Stopped {
        reason: StopReason,
    },
}

pub trait Observer {
    fn progress(&mut self, event: &Progress<'_>);
}

/// Reports nothing.
#[derive(Debug, Default)]
pub struct Silent;

impl Observer for Silent {
    fn progress(&mut self, _: &Progress<'_>) {}
}

//! The ksearch search engine: the cycle loop over the hypothesis tree, its budgets and
//! acceptance gate, and the [`Proposer`] port with the builtin proposer.

pub mod builtin;
mod engine;
pub mod llm;
mod observer;
mod proposer;
mod replay;
mod run_config;
mod summary;

pub use engine::{
    Budget, Engine, EngineError, MAX_FAILED_CYCLES, Parts, RunRecords, StoredRun, open_run,
    read_run, read_summary,
};
pub use observer::{Observer, Progress, Silent};
pub use proposer::{
    Candidate, CycleEvidence, Evaluated, GenerateRequest, ProposeContext, ProposeError, Proposer,
    TooHard, WorldModel,
};
pub use replay::ReplayEvaluator;
pub use run_config::{
    DEFAULT_WINDOW, EngineState, EvalSettings, LlmModels, RUN_FORMAT, RunConfig, StopReason,
};
pub use summary::{Best, LlmTotals, RunSummary, summarize};

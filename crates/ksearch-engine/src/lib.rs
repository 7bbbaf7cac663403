//! The ksearch search engine: the cycle loop over the hypothesis tree, its budgets and
//! acceptance gate, and the [`Proposer`] port with the builtin proposer.

pub mod builtin;
mod engine;
pub mod events;
pub mod llm;
mod observer;
mod proposer;
mod replay;
mod run_config;
mod summary;

pub use engine::{
    Budget, Engine, EngineError, MAX_FAILED_CYCLES, MAX_LOST_EVALUATIONS, Parts, ReplayPlan,
    RunRecords, StoredRun, open_run, open_run_writer, read_run, read_summary, replay_path,
};
pub use observer::{Observer, Progress, Silent};
pub use proposer::{
    Candidate, CycleEvidence, Evaluated, GenerateRequest, ProposeContext, ProposeError, Proposer,
    TooHard, WorldModel,
};
pub use replay::ReplayEvaluator;
pub use run_config::{
    ConfigError, CostStop, DEFAULT_WINDOW, EngineState, EvalSettings, InFlight, LlmModels,
    MAX_TIMEOUT_S, MAX_TIMING_MS, Position, ROUND_TIMEOUT_FACTOR, ROUND_TIMEOUT_FLOOR_S,
    RUN_FORMAT, RunConfig, SessionEnd, StopReason, check_range, round_timeout_s,
};
pub use summary::{Best, LlmTotals, RunSummary, asked_again, summarize};

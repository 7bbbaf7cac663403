//! The ksearch search engine: the cycle loop over the hypothesis tree, its budgets and
//! acceptance gate, and the [`Proposer`] port with the builtin proposer.

pub mod builtin;
mod engine;
mod eval_options;
pub mod llm;
mod observer;
mod proposer;
mod replay;

pub use engine::{
    Budget, Engine, EngineError, MAX_FAILED_CYCLES, MAX_LOST_EVALUATIONS, Parts, ReplayPlan,
    replay_path,
};
pub use eval_options::eval_options;
pub use ksearch_run::events;
pub use ksearch_run::{
    Best, ConfigError, CostStop, DEFAULT_WINDOW, EngineState, EvalSettings, InFlight, LlmModels,
    LlmTotals, MAX_TIMEOUT_S, MAX_TIMING_MS, Position, ROUND_TIMEOUT_FACTOR, ROUND_TIMEOUT_FLOOR_S,
    RUN_FORMAT, RunConfig, RunError, RunRecords, RunSummary, SessionEnd, StopReason, StoredRun,
    asked_again, check_range, open_run, open_run_writer, read_run, read_summary, round_timeout_s,
    summarize,
};
pub use observer::{Observer, Progress, Silent};
pub use proposer::{
    Candidate, CycleEvidence, Evaluated, GenerateRequest, ProposeContext, ProposeError, Proposer,
    TooHard, WorldModel,
};
pub use replay::{FinishedRecord, ReplayEvaluator};

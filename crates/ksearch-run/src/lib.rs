//! A stored run's format: what a run is configured with, the engine's persistent state, the
//! events it records and the summary of it all. The engine writes these; the viewers (`tree`,
//! `show`, `report`, `export`) read them.

pub mod events;
mod open;
mod open_cycle;
mod run_config;
mod summary;

pub use open::{
    META_CONFIG, META_TASK, RunError, RunRecords, StoredRun, check_tree, open_run, open_run_writer,
    read_run, read_summary,
};
pub use open_cycle::{is_under_way, open_cycle_note, with_open_cycles};
pub use run_config::{
    ConfigError, CostStop, DEFAULT_WINDOW, EngineState, EvalSettings, InFlight, LeftOut, LlmModels,
    MAX_TIMEOUT_S, MAX_TIMING_MS, Position, ROUND_TIMEOUT_FACTOR, ROUND_TIMEOUT_FLOOR_S,
    RUN_FORMAT, RunConfig, SessionEnd, StopReason, check_range, round_timeout_s,
};
pub use summary::{
    Best, LlmTotals, RunSummary, asked_again, kept_note, no_baseline_words, solution_title,
    summarize,
};

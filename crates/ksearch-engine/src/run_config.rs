//! What a run is configured with and the engine's persistent state; both are stored in the run
//! store so `resume` continues exactly where a run stopped.

use std::time::Duration;

use ksearch_core::protocol::TimingPlan;
use ksearch_core::tree::NodeId;
use ksearch_eval::EvalOptions;
use serde::{Deserialize, Serialize};

/// Version of the run's stored meta documents.
pub const RUN_FORMAT: u32 = 1;

/// Default stagnation window: a cycle ends after this many attempts without improvement.
pub const DEFAULT_WINDOW: u32 = 5;

/// How candidates are evaluated during the run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EvalSettings {
    /// Empty: every workload of the task.
    pub workloads: Vec<String>,
    pub seeds: usize,
    pub base_seed: u64,
    pub timing: Option<TimingPlan>,
    pub timeout_s: f64,
    /// mlx backend: `metal` or `cuda` (the GPU MLX finds when unset).
    #[serde(default)]
    pub target: Option<String>,
    /// mlx backend: the Python interpreter (`python3` when unset).
    #[serde(default)]
    pub python: Option<String>,
    /// The device whose limits the knowledge rules check and prompts describe (a name from
    /// `ksearch knowledge hardware`); the local GPU when unset.
    #[serde(default)]
    pub hardware: Option<String>,
}

impl Default for EvalSettings {
    fn default() -> Self {
        Self {
            workloads: Vec::new(),
            seeds: 3,
            base_seed: 1,
            timing: Some(TimingPlan::default()),
            timeout_s: 300.0,
            target: None,
            python: None,
            hardware: None,
        }
    }
}

impl EvalSettings {
    pub fn options(&self) -> EvalOptions {
        EvalOptions {
            workloads: self.workloads.clone(),
            seeds: self.seeds,
            base_seed: self.base_seed,
            timing: self.timing,
            timeout: Duration::from_secs_f64(self.timeout_s),
        }
    }
}

/// The models of an LLM-driven run. Keys are never stored: they come from the environment or
/// the config file each session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LlmModels {
    /// e.g. `openai:gpt-5`: world model, refine, too-hard.
    pub reasoning: String,
    /// Implement, debug, improve.
    pub codegen: String,
    pub base_url: Option<String>,
    pub max_cost_usd: Option<f64>,
    pub reasoning_effort: Option<String>,
    pub max_output_tokens: u32,
    /// How much of the knowledge layer goes into prompts: `none`, `hardware` or `full`.
    #[serde(default = "default_knowledge")]
    pub knowledge: String,
}

fn default_knowledge() -> String {
    "full".into()
}

/// Fixed for the life of a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunConfig {
    pub format: u32,
    pub ksearch_version: String,
    /// e.g. `builtin`, or the LLM proposer's name.
    pub proposer: String,
    /// Set for LLM-driven runs.
    #[serde(default)]
    pub llm: Option<LlmModels>,
    pub seed: u64,
    /// Stagnation window of a cycle.
    pub window: u32,
    /// Hard cap on attempts in one cycle.
    pub max_cycle_attempts: u32,
    pub eval: EvalSettings,
    /// Seconds since the Unix epoch.
    pub created_unix: u64,
    /// One line about the machine, e.g. the CPU model.
    pub hardware: String,
}

/// Why a session of the run stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// The round budget (`--iterations`) is spent.
    Iterations,
    /// The time budget (`--time`) is spent.
    Time,
    /// Ctrl-C; the interrupted attempt runs again on resume.
    Interrupted,
    /// The proposer has nothing left to try.
    Exhausted,
    /// The next model call would exceed `--max-cost`.
    Cost,
}

/// The engine's state between steps, committed with every step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EngineState {
    /// Round of the next new attempt; round 0 is the seed.
    pub next_round: u64,
    pub next_cycle: u64,
    pub current_cycle: Option<u64>,
    pub next_node: NodeId,
    /// The seed was measured and the world model built.
    pub initialized: bool,
    /// Total rounds the run may reach, as last set by `run` or `resume`.
    pub round_budget: Option<u64>,
    /// Wall time over all sessions, and the part spent inside evaluations.
    pub wall_s: f64,
    pub eval_s: f64,
    pub sessions: u32,
    pub stop_reason: Option<StopReason>,
}

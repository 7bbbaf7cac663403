//! What a run is configured with and the engine's persistent state; both are stored in the run
//! store so `resume` continues exactly where a run stopped.

use ksearch_core::protocol::TimingPlan;
use ksearch_core::tree::NodeId;
use serde::{Deserialize, Serialize};

/// Version of the run's stored meta documents.
pub const RUN_FORMAT: u32 = 1;

/// Default stagnation window: a cycle ends after this many attempts without improvement.
pub const DEFAULT_WINDOW: u32 = 5;

/// The longest wall-clock limit one evaluation may have, in seconds (a week).
pub const MAX_TIMEOUT_S: f64 = 7.0 * 86_400.0;
/// The longest warm-up, minimum or maximum timing time per workload, in milliseconds (an hour).
pub const MAX_TIMING_MS: f64 = 3_600_000.0;

/// Without `--timeout`, a round's evaluation may take this many times the seed's (which built,
/// checked and timed the same workloads)...
pub const ROUND_TIMEOUT_FACTOR: f64 = 4.0;
/// ...and at least this long, in seconds.
pub const ROUND_TIMEOUT_FLOOR_S: f64 = 30.0;

/// The wall-clock limit of a round's evaluation when the user set none, derived from the seed's
/// evaluation: [`ROUND_TIMEOUT_FACTOR`] times its wall time, at least [`ROUND_TIMEOUT_FLOOR_S`].
pub fn round_timeout_s(seed_wall_s: f64) -> f64 {
    let derived = ROUND_TIMEOUT_FACTOR * seed_wall_s;
    if derived.is_finite() {
        derived.clamp(ROUND_TIMEOUT_FLOOR_S, MAX_TIMEOUT_S)
    } else {
        MAX_TIMEOUT_S
    }
}

/// A configuration value out of its range: names the field.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("`{field}` is {value}; it must be {allowed}")]
pub struct ConfigError {
    /// e.g. `eval.timeout_s`.
    pub field: &'static str,
    pub value: String,
    pub allowed: String,
}

/// Check that `value` is finite and in `lo..=hi` (`lo` excluded when `lo_open`).
pub fn check_range(
    field: &'static str,
    value: f64,
    lo: f64,
    lo_open: bool,
    hi: f64,
    unit: &str,
) -> Result<(), ConfigError> {
    let above = if lo_open { value > lo } else { value >= lo };
    if value.is_finite() && above && value <= hi {
        return Ok(());
    }
    let allowed = match (lo_open, hi == f64::MAX) {
        (true, true) => format!("a number of {unit} greater than {lo}"),
        (true, false) => format!("a number of {unit} greater than {lo} and at most {hi}"),
        (false, true) => format!("a number of {unit} from {lo} up"),
        (false, false) => format!("a number of {unit} from {lo} to {hi}"),
    };
    Err(ConfigError {
        field,
        value: value.to_string(),
        allowed,
    })
}

/// How candidates are evaluated during the run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EvalSettings {
    /// Empty: every workload of the task.
    pub workloads: Vec<String>,
    pub seeds: usize,
    pub base_seed: u64,
    pub timing: Option<TimingPlan>,
    /// The wall-clock limit of one evaluation: of every one when `timeout_given`, else of the
    /// seed's alone (later rounds get [`round_timeout_s`] of the seed's measured time).
    pub timeout_s: f64,
    /// The user set `timeout_s` (`--timeout`): it applies to every evaluation. (Left out of
    /// the stored record when false, so that a run's record, and its id, read as before.)
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub timeout_given: bool,
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
    /// The task's production baseline, left out because the machine that started the run
    /// lacked what it needs: speedups are over the reference instead. (Left out of the record
    /// when there is none.)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline_left_out: Option<LeftOut>,
}

/// A task's implementation that a run left out, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeftOut {
    /// Its name, e.g. "OpenBLAS cblas_sgemm (1 thread)".
    pub name: String,
    /// What the machine lacked, as said to a user: "OpenBLAS (-lopenblas)".
    pub needs: String,
}

impl Default for EvalSettings {
    fn default() -> Self {
        Self {
            workloads: Vec::new(),
            seeds: ksearch_core::protocol::DEFAULT_SEEDS,
            base_seed: ksearch_core::protocol::DEFAULT_BASE_SEED,
            timing: Some(TimingPlan::DEFAULT),
            timeout_s: ksearch_core::protocol::DEFAULT_TIMEOUT_S as f64,
            timeout_given: false,
            target: None,
            python: None,
            hardware: None,
            baseline_left_out: None,
        }
    }
}

impl EvalSettings {
    /// The limit of a round's evaluation, and where it comes from in words, given the seed's
    /// evaluation time (`None` while the seed has not been measured: the seed's own limit).
    pub fn round_timeout(&self, seed_wall_s: Option<f64>) -> (f64, String) {
        match seed_wall_s.filter(|_| !self.timeout_given) {
            Some(wall) => (
                round_timeout_s(wall),
                format!(
                    "{ROUND_TIMEOUT_FACTOR} × the seed's evaluation ({wall:.1} s), at least {ROUND_TIMEOUT_FLOOR_S} s; `--timeout` sets another"
                ),
            ),
            None if self.timeout_given => (self.timeout_s, "set by `--timeout`".to_owned()),
            None => (
                self.timeout_s,
                "the first evaluation's default; later rounds get a limit from its time, or `--timeout`'s"
                    .to_owned(),
            ),
        }
    }

    /// Every number in range: the timeout, the timing plan's times, the seed count.
    pub fn validate(&self) -> Result<(), ConfigError> {
        check_range(
            "eval.timeout_s",
            self.timeout_s,
            0.0,
            true,
            MAX_TIMEOUT_S,
            "seconds",
        )?;
        if self.seeds == 0 {
            return Err(ConfigError {
                field: "eval.seeds",
                value: "0".into(),
                allowed: "at least 1".into(),
            });
        }
        if let Some(t) = &self.timing {
            let (ms, unit) = (MAX_TIMING_MS, "milliseconds");
            check_range("eval.timing.warmup_ms", t.warmup_ms, 0.0, false, ms, unit)?;
            check_range(
                "eval.timing.min_time_ms",
                t.min_time_ms,
                0.0,
                false,
                ms,
                unit,
            )?;
            check_range(
                "eval.timing.max_time_ms",
                t.max_time_ms,
                0.0,
                true,
                ms,
                unit,
            )?;
            check_range(
                "eval.timing.target_sample_ms",
                t.target_sample_ms,
                0.0,
                true,
                ms,
                unit,
            )?;
        }
        Ok(())
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
    /// One line about the machine the run measures on, e.g. the CPU model (stored as
    /// `hardware`).
    #[serde(rename = "hardware")]
    pub machine: String,
    /// The CPU the run measures on, as detected when it started. The prompts of C kernels
    /// describe it from here, so a resume or a replay renders the same prompts anywhere. Runs
    /// recorded before it existed have none (and their prompts described no CPU).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_cpu: Option<ksearch_knowledge::HostCpu>,
}

impl RunConfig {
    /// Every number in range, so that nothing read from a stored run can make ksearch panic.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.eval.validate()?;
        if self.window == 0 {
            return Err(ConfigError {
                field: "window",
                value: "0".into(),
                allowed: "at least 1".into(),
            });
        }
        if self.max_cycle_attempts == 0 {
            return Err(ConfigError {
                field: "max_cycle_attempts",
                value: "0".into(),
                allowed: "at least 1".into(),
            });
        }
        if let Some(cap) = self.llm.as_ref().and_then(|m| m.max_cost_usd) {
            check_range("llm.max_cost_usd", cap, 0.0, true, f64::MAX, "US dollars")?;
        }
        Ok(())
    }
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
    /// The model gave nothing usable several questions in a row (`EngineState::stop_detail`
    /// says what was wrong with the last answer).
    UnusableModel,
}

impl StopReason {
    /// The name as it is serialized.
    pub fn as_str(self) -> &'static str {
        match self {
            StopReason::Iterations => "iterations",
            StopReason::Time => "time",
            StopReason::Interrupted => "interrupted",
            StopReason::Exhausted => "exhausted",
            StopReason::Cost => "cost",
            StopReason::UnusableModel => "unusable_model",
        }
    }
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
    /// Cycles in a row that made no attempt at all (the search is exhausted at 25). Kept
    /// across a kill, so a resumed run counts on as an uninterrupted one would; a session
    /// that stopped cleanly starts again from 0.
    #[serde(default)]
    pub empty_cycles: u32,
    /// The evaluation in flight, committed before it starts and cleared when it ends or is
    /// abandoned (Ctrl-C). Found set on resume, it means the orchestrator died during it.
    #[serde(default)]
    pub evaluating: Option<InFlight>,
    /// With several evaluations in flight at once (`--jobs`, `--executor slurm`): the others
    /// beside `evaluating`, each as it. (Left out of the record when empty, so that a run of
    /// one evaluation at a time is stored as before.)
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub evaluating_also: Vec<InFlight>,
    /// Why the last session stopped, in words, where the reason alone does not say (an
    /// unusable model: which, and its last fault).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_detail: Option<String>,
    /// A cycle that a budget closed with a pass, whose refine call (a model's, or the builtin
    /// proposer's) the next session makes first: a run out of rounds asks for nothing more.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refine_owed: Option<u64>,
}

/// An evaluation that has started and not finished.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct InFlight {
    /// The attempt's round (0: the seed).
    pub round: u64,
    /// Times the orchestrator died while evaluating it. After the first, the evaluation runs
    /// once more; after the second, the attempt is recorded as `crashed` and never run again.
    pub lost: u32,
}

/// Where a run stands, in terms a replay reproduces exactly: model calls made, evaluations
/// finished, the next round and cycle.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Position {
    /// Model calls made so far (the journal's length), all sessions.
    pub calls: u64,
    /// Attempts whose evaluation finished, the seed included.
    pub evaluations: u64,
    pub next_round: u64,
    pub next_cycle: u64,
}

impl std::fmt::Display for Position {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} model calls, {} evaluations, next round {}, next cycle {}",
            self.calls, self.evaluations, self.next_round, self.next_cycle
        )
    }
}

/// A model call refused because it could go above the cost cap.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct CostStop {
    /// Calls made before the refused one (its index in the journal).
    pub call: u64,
    pub spent_usd: f64,
    pub next_usd: f64,
    pub cap_usd: f64,
}

/// How a session of the run ended (the `session_ended` event): what a replay needs to stop
/// where the recorded session stopped, for the same reason.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionEnd {
    /// 1 for the session that created the run.
    pub session: u32,
    pub reason: StopReason,
    /// Where the run stood when the session decided to stop (before a cycle with a pass was
    /// closed for a round or time budget).
    pub at: Position,
    /// Ctrl-C during an evaluation: the round whose evaluation was abandoned (the first, when
    /// several were in flight).
    #[serde(default)]
    pub abandoned_round: Option<u64>,
    /// The call the cost cap refused: the reason `cost`, or a round or time budget whose
    /// closing of the current cycle the cap refused (the cycle then stays open).
    #[serde(default)]
    pub cost: Option<CostStop>,
    /// The most evaluations this session had in flight at once, when it ran them through an
    /// executor (`--jobs`, `--executor slurm`); `None` for one at a time as always (and left
    /// out of the record then). A replay runs the session the same way, finishing evaluations
    /// in the recorded order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jobs: Option<u32>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> RunConfig {
        RunConfig {
            format: RUN_FORMAT,
            ksearch_version: "test".into(),
            proposer: "builtin".into(),
            llm: None,
            seed: 0,
            window: DEFAULT_WINDOW,
            max_cycle_attempts: 15,
            eval: EvalSettings::default(),
            created_unix: 0,
            machine: "test".into(),
            host_cpu: None,
        }
    }

    fn field_of(c: &RunConfig) -> Option<&'static str> {
        c.validate().err().map(|e| e.field)
    }

    #[test]
    fn the_default_configuration_is_valid() {
        assert_eq!(config().validate(), Ok(()));
    }

    /// The host CPU is recorded with the run (its prompts describe it); a configuration
    /// stored before that existed reads back without one.
    #[test]
    fn the_host_cpu_is_kept_and_older_configurations_read_back_without_it() {
        let mut c = config();
        let old = serde_json::to_value(&c).unwrap();
        assert!(old.get("host_cpu").is_none(), "none is not written: {old}");
        assert_eq!(serde_json::from_value::<RunConfig>(old).unwrap(), c);
        c.host_cpu = Some(ksearch_knowledge::HostCpu::parse(
            "model name\t: Test CPU\nflags\t\t: avx avx2 fma\n",
            ksearch_knowledge::CacheSizes::default(),
            4,
        ));
        let text = serde_json::to_string(&c).unwrap();
        assert_eq!(serde_json::from_str::<RunConfig>(&text).unwrap(), c);
    }

    #[test]
    fn every_bad_number_is_named_by_its_field() {
        let bad_f64 = [f64::NAN, f64::INFINITY, f64::NEG_INFINITY, -1.0, 1e20];
        for v in bad_f64 {
            let mut c = config();
            c.eval.timeout_s = v;
            assert_eq!(field_of(&c), Some("eval.timeout_s"), "{v}");
            let mut c = config();
            c.eval.timing.as_mut().unwrap().warmup_ms = v;
            assert_eq!(field_of(&c), Some("eval.timing.warmup_ms"), "{v}");
            let mut c = config();
            c.eval.timing.as_mut().unwrap().min_time_ms = v;
            assert_eq!(field_of(&c), Some("eval.timing.min_time_ms"), "{v}");
            let mut c = config();
            c.eval.timing.as_mut().unwrap().max_time_ms = v;
            assert_eq!(field_of(&c), Some("eval.timing.max_time_ms"), "{v}");
            let mut c = config();
            c.eval.timing.as_mut().unwrap().target_sample_ms = v;
            assert_eq!(field_of(&c), Some("eval.timing.target_sample_ms"), "{v}");
        }
        let mut c = config();
        c.eval.timeout_s = 0.0;
        assert_eq!(field_of(&c), Some("eval.timeout_s"));
        let mut c = config();
        c.eval.timing.as_mut().unwrap().max_time_ms = 0.0;
        assert_eq!(field_of(&c), Some("eval.timing.max_time_ms"));
        let mut c = config();
        c.eval.seeds = 0;
        assert_eq!(field_of(&c), Some("eval.seeds"));
        let mut c = config();
        c.window = 0;
        assert_eq!(field_of(&c), Some("window"));
        let mut c = config();
        c.max_cycle_attempts = 0;
        assert_eq!(field_of(&c), Some("max_cycle_attempts"));
        let mut c = config();
        c.llm = Some(LlmModels {
            reasoning: "openai:m".into(),
            codegen: "openai:m".into(),
            base_url: None,
            max_cost_usd: Some(f64::NAN),
            reasoning_effort: None,
            max_output_tokens: 100,
            knowledge: "full".into(),
        });
        assert_eq!(field_of(&c), Some("llm.max_cost_usd"));
        // Zero warm-up and minimum time are allowed; so are the largest values.
        let mut c = config();
        let t = c.eval.timing.as_mut().unwrap();
        t.warmup_ms = 0.0;
        t.min_time_ms = 0.0;
        t.max_time_ms = MAX_TIMING_MS;
        c.eval.timeout_s = MAX_TIMEOUT_S;
        assert_eq!(c.validate(), Ok(()));
    }

    #[test]
    fn the_message_says_the_value_and_the_range() {
        let mut c = config();
        c.eval.timeout_s = 1e20;
        let e = c.validate().unwrap_err().to_string();
        assert_eq!(
            e,
            "`eval.timeout_s` is 100000000000000000000; it must be a number of seconds greater than 0 and at most 604800"
        );
    }

    #[test]
    fn a_rounds_limit_follows_the_seed_unless_the_user_set_one() {
        let s = EvalSettings::default();
        assert_eq!(s.round_timeout(Some(2.0)).0, ROUND_TIMEOUT_FLOOR_S);
        assert_eq!(s.round_timeout(Some(95.0)).0, 380.0);
        assert!(
            s.round_timeout(Some(95.0))
                .1
                .contains("the seed's evaluation (95.0 s)")
        );
        assert_eq!(s.round_timeout(None).0, s.timeout_s);
        assert_eq!(round_timeout_s(f64::INFINITY), MAX_TIMEOUT_S);
        let given = EvalSettings {
            timeout_s: 7.0,
            timeout_given: true,
            ..EvalSettings::default()
        };
        assert_eq!(
            given.round_timeout(Some(95.0)),
            (7.0, "set by `--timeout`".to_owned())
        );
    }

    #[test]
    fn stop_reason_names_are_the_serialized_ones() {
        for r in [
            StopReason::Iterations,
            StopReason::Time,
            StopReason::Interrupted,
            StopReason::Exhausted,
            StopReason::Cost,
            StopReason::UnusableModel,
        ] {
            assert_eq!(
                serde_json::to_string(&r).unwrap(),
                format!("\"{}\"", r.as_str())
            );
        }
    }

    #[test]
    fn an_older_state_reads_with_nothing_in_flight() {
        let old = r#"{"next_round":3,"next_cycle":2,"current_cycle":null,"next_node":4,
            "initialized":true,"round_budget":5,"wall_s":1.0,"eval_s":0.5,"sessions":1,
            "stop_reason":"iterations"}"#;
        let s: EngineState = serde_json::from_str(old).unwrap();
        assert_eq!((s.empty_cycles, s.evaluating), (0, None));
    }
}

//! Shared helpers of the conformance suite.

use std::path::PathBuf;
use std::time::Duration;

use ksearch_core::protocol::TimingPlan;
use ksearch_core::task::{Source, Task};
use ksearch_eval::{Compare, EvalOptions, Evaluation, Evaluator, LocalEvaluator};

/// What a candidate does, independent of the language it is written in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Behaviour {
    Good,
    /// Does the work four times: clearly slower even where per-call overhead and a loaded
    /// machine blur the ratio.
    FourTimesSlower,
    Wrong,
    Zeros,
    Nan,
    PartialWrite,
    MutatesInput,
    CachesFirstAnswer,
    CachesAfterManyCalls,
    /// Forks a child; both loop forever after writing their pids to the file.
    InfiniteLoop {
        pid_file: PathBuf,
    },
    Segfault,
    SyntaxError,
    FloodsStdout,
    Exits,
}

pub(crate) trait Fixture {
    fn task(&self) -> &Task;
    fn source(&self, b: &Behaviour) -> Source;
    fn evaluator(&self) -> LocalEvaluator;
    fn assert_compile_message(&self, e: &Evaluation);

    fn evaluate_with(
        &self,
        ev: &mut LocalEvaluator,
        b: &Behaviour,
        parent: Option<&Source>,
        opts: &EvalOptions,
    ) -> Evaluation {
        ev.evaluate(
            self.task(),
            &self.source(b),
            Compare {
                parent,
                incumbent: None,
            },
            opts,
        )
        .expect("evaluation completes")
    }

    fn evaluate(&self, b: &Behaviour, parent: Option<&Source>, opts: &EvalOptions) -> Evaluation {
        self.evaluate_with(&mut self.evaluator(), b, parent, opts)
    }
}

/// Three seeds, short timing: enough to exercise every phase quickly.
pub(crate) fn quick_options() -> EvalOptions {
    EvalOptions {
        workloads: vec!["small".into()],
        seeds: 3,
        base_seed: 11,
        timing: Some(TimingPlan {
            warmup_ms: 2.0,
            min_runs: 5,
            min_time_ms: 10.0,
            max_time_ms: 2_000.0,
            target_sample_ms: 0.5,
            rotate_bytes: 4 << 20,
        }),
        timeout: Duration::from_secs(60),
    }
}

/// Whether `pid` is a live process (zombies count as dead).
pub(crate) fn process_alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => false,
        Ok(stat) => {
            let state = stat
                .rsplit_once(") ")
                .and_then(|(_, rest)| rest.chars().next());
            state != Some('Z') && state != Some('X')
        }
    }
}

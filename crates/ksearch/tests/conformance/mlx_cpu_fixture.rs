//! Candidates for the `mlx` backend on MLX's CPU device (`--target cpu`): the module is traced
//! in a tracer runner and its graph executed in an executor runner, the path every MLX target
//! takes, checked where no GPU exists. (Custom kernels need a GPU; these modules use MLX ops.)
//! A traced graph is a pure function of its inputs: it cannot keep answers, defer work or time
//! itself, so those attacks come to an honest result here.

use std::path::PathBuf;

use ksearch_core::protocol::Status;
use ksearch_core::task::{Source, Task};
use ksearch_eval::{Evaluation, LocalEvaluator, MlxBackend};

use crate::numpy_fixture::assert_python_compile_message;
use crate::python_candidates::{Lib, source};
use crate::support::{Behaviour, Expect, Fixture, default_expect};

pub(crate) struct MlxCpuFixture {
    task: Task,
}

const MLX: Lib = Lib {
    prelude: "import mlx.core as mx\n\ndef _softmax(x):\n    e = mx.exp(x - x.max(axis=1, keepdims=True))\n    return (e / e.sum(axis=1, keepdims=True)).astype(mx.float32)\n",
    // A traced graph cannot write its inputs: the assignment only changes what it computes from.
    // A whole row, so the wrong output is certain (one element of a softmax row can be too
    // small to matter).
    mutate: "x[0, :] = 0.0",
    partial: "y = _softmax(x)\nrow = mx.full((1, cols), float('nan'), dtype=mx.float32)\nreturn mx.concatenate([y[:-1], row], axis=0)",
    nan: "y = _softmax(x)\ny[1, 1] = float('nan')\nreturn y",
    wrong: "y = _softmax(x)\ny[rows // 2, cols // 2] += 0.01\nreturn y",
    zeros: "return mx.zeros_like(x)",
    four_times: "y = _softmax(x)\nfor _ in range(3):\n    y = _softmax(x + 0.0 * y)\nreturn y",
    flood_lines: 6000,
};

impl MlxCpuFixture {
    /// Only built into tests that run where MLX was found (`has_mlx`, see build.rs).
    pub(crate) fn new() -> Self {
        let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/mlx_softmax");
        Self {
            task: ksearch_tasks::load_task(dir.to_str().unwrap()).expect("fixture task"),
        }
    }
}

impl Fixture for MlxCpuFixture {
    fn task(&self) -> &Task {
        &self.task
    }

    fn evaluator(&self) -> LocalEvaluator {
        LocalEvaluator::new(Box::new(
            MlxBackend::new(
                None,
                Some("cpu".into()),
                None,
                env!("CARGO_BIN_EXE_ksearch").into(),
            )
            .expect("the harness unpacks"),
        ))
    }

    fn source(&self, b: &Behaviour) -> Source {
        Source {
            file: "candidate.py".into(),
            text: source(&MLX, b),
        }
    }

    fn expect(&self, b: &Behaviour) -> Expect {
        match b {
            // MLX arrays are values: the assignment changes the candidate's copy, not the input,
            // and the result is computed from the wrong values.
            Behaviour::MutatesInput => Expect::Status(Status::Incorrect, "out of tolerance"),
            // The module only runs while traced (once per workload): memory, counters, clocks
            // and threads never see a call; what it traced is an honest graph.
            Behaviour::CachesFirstAnswer
            | Behaviour::CachesByAddress
            | Behaviour::GarbageWhenTimed
            | Behaviour::WorkAfterDone
            | Behaviour::BackgroundWork => Expect::Status(Status::Passed, "passed"),
            other => default_expect(other),
        }
    }

    fn assert_compile_message(&self, e: &Evaluation) {
        assert_python_compile_message(self, e);
    }
}

//! Candidates for the `mlx` backend's Python harness, run with `--target numpy` on a test task:
//! the module runs in a direct runner, so every attack a Python candidate can make in its own
//! process is checked where no GPU exists.

use std::path::PathBuf;

use ksearch_core::task::{Source, Task};
use ksearch_eval::{Evaluation, LocalEvaluator, MlxBackend};

use crate::python_candidates::{Lib, source};
use crate::support::{Behaviour, Expect, Fixture, default_expect, printed};

pub(crate) struct NumpyFixture {
    task: Task,
}

const NUMPY: Lib = Lib {
    prelude: "import numpy as np\n\ndef _softmax(x):\n    e = np.exp(x - x.max(axis=1, keepdims=True))\n    return (e / e.sum(axis=1, keepdims=True)).astype(np.float32)\n",
    mutate: "x[0, 5] = 0.0",
    partial: "y = np.full_like(x, np.nan)\ny[:-1] = _softmax(x[:-1])\nreturn y",
    nan: "y = _softmax(x)\ny[1, 1] = np.nan\nreturn y",
    wrong: "y = _softmax(x)\ny[rows // 2, cols // 2] += 0.01\nreturn y",
    zeros: "return np.zeros_like(x)",
    four_times: "for _ in range(3):\n    _softmax(x)\nreturn _softmax(x)",
    flood_lines: 2000,
};

impl NumpyFixture {
    /// Only built into tests that run where numpy was found (`has_numpy`, see build.rs).
    pub(crate) fn new() -> Self {
        let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/numpy_softmax");
        Self {
            task: ksearch_tasks::load_task(dir.to_str().unwrap()).expect("fixture task"),
        }
    }
}

impl Fixture for NumpyFixture {
    fn task(&self) -> &Task {
        &self.task
    }

    fn evaluator(&self) -> LocalEvaluator {
        LocalEvaluator::new(Box::new(
            MlxBackend::new(
                None,
                Some("numpy".into()),
                None,
                env!("CARGO_BIN_EXE_ksearch").into(),
            )
            .expect("the harness unpacks"),
        ))
    }

    fn source(&self, b: &Behaviour) -> Source {
        Source {
            file: "candidate.py".into(),
            text: source(&NUMPY, b),
        }
    }

    fn expect(&self, b: &Behaviour) -> Expect {
        match b {
            // A Python thread takes turns with the runner's (one interpreter lock, one CPU): it
            // may go unseen, but it only slows the candidate down.
            Behaviour::BackgroundWork => Expect::CaughtOrNoFaster("outside its timed calls"),
            // Its batches are at least 10 ms long: 200 µs after each is within the allowance
            // for CPU outside its calls, and gains no more than that.
            Behaviour::WorksWhileOthersAreTimed => {
                Expect::CaughtOrNoFaster("outside its timed calls")
            }
            other => default_expect(other),
        }
    }

    fn assert_compile_message(&self, e: &Evaluation) {
        assert_python_compile_message(self, e);
    }
}

pub(crate) fn assert_python_compile_message(f: &impl Fixture, e: &Evaluation) {
    let c = e.result.compile.as_ref().expect("compile report");
    let line = f
        .source(&Behaviour::SyntaxError)
        .text
        .lines()
        .position(|l| l.contains("return = y"))
        .unwrap()
        + 1;
    assert!(
        c.log.contains(&format!("candidate.py:{line}:")),
        "log points at line {line}: {}",
        c.log
    );
    assert!(
        e.result.message.contains("invalid syntax"),
        "{}",
        e.result.message
    );
}

/// Attacks only a direct runner allows. (Named so that CI's run without namespaces, which
/// filters on `mlx_harness`, takes it too.)
mod mlx_harness_numpy_only {
    use super::*;
    use ksearch_core::protocol::Status;

    /// A direct runner reads its inputs from memory the judge shares with every contender; a
    /// candidate that could write it would change what the baseline computes from. This one is
    /// honest when checked and, when timed, tries mprotect, /proc/self/mem and
    /// /proc/self/map_files on its inputs, then returns what the zeroed inputs would give.
    #[test]
    #[cfg_attr(
        not(has_numpy),
        ignore = "needs python3 with numpy (`.ci/run` installs it: pip install numpy)"
    )]
    fn writing_the_shared_inputs_while_timed_is_refused_and_caught() {
        let f = NumpyFixture::new();
        let text = include_str!("../fixtures/hostile/writes_shared_inputs.py");
        let e = f.evaluate_text("candidate.py", text);
        let out = printed(&e);
        assert!(!out.contains("WROTE"), "{out}");
        for route in ["map_files refused", "mprotect refused", "proc_mem refused"] {
            assert!(out.contains(route), "{route}: {out}");
        }
        assert_eq!(e.result.status, Status::Incorrect, "{}", e.result.message);
        assert!(
            e.result.message.contains("while timed"),
            "{}",
            e.result.message
        );
    }

    /// A module that writes its input wherever the memory allows (a check's writable copy; in
    /// a user's program, the caller's array) and replaces what the runner compares inputs with
    /// (`np.array_equal`) so that the check agrees: the runner holds its own reference to it,
    /// taken before any candidate code runs.
    #[test]
    #[cfg_attr(
        not(has_numpy),
        ignore = "needs python3 with numpy (`.ci/run` installs it: pip install numpy)"
    )]
    fn inputs_written_under_a_silenced_check_are_caught() {
        let f = NumpyFixture::new();
        let text = include_str!("../fixtures/hostile/silences_the_numpy_input_check.py");
        let e = f.evaluate_text("candidate.py", text);
        let out = printed(&e);
        assert!(
            out.contains("WROTE the input, and the runner's check agreed"),
            "{out}"
        );
        assert_eq!(e.result.status, Status::Incorrect, "{}", e.result.message);
        assert!(
            e.result.message.contains("modified input `x`"),
            "{}",
            e.result.message
        );
    }

    /// A candidate that wants to compute its answer straight in the memory the judge reads
    /// outputs from (numpy skips a copy onto itself, so its time would lack the copy every other
    /// contender's includes): it turns off the runner's own guards, then tries every descriptor
    /// it holds. The runner has no mapping of that memory, only a write-only descriptor, which
    /// cannot be mapped, reopened for reading or have its mode changed: every answer reaches the
    /// judge through a copy.
    #[test]
    #[cfg_attr(
        not(has_numpy),
        ignore = "needs python3 with numpy (`.ci/run` installs it: pip install numpy)"
    )]
    fn the_judges_output_memory_cannot_be_written_in_place() {
        let f = NumpyFixture::new();
        crate::python_judge_rules::output_memory_out_of_reach(
            &f,
            crate::python_judge_rules::NUMPY_PRELUDE,
            "return reach(x, _softmax)",
        );
    }

    /// The runner writes each output into the judge's memory with `os.pwrite`, in the
    /// interpreter the candidate shares: this one replaces it with a write of nothing once it
    /// believes it is timed, and skips its own work. The slots it never wrote were poisoned.
    #[test]
    #[cfg_attr(
        not(has_numpy),
        ignore = "needs python3 with numpy (`.ci/run` installs it: pip install numpy)"
    )]
    fn replacing_the_runners_copy_of_outputs_is_caught() {
        let f = NumpyFixture::new();
        let text = include_str!("../fixtures/hostile/patches_the_runners_copy.py");
        let e = f.evaluate_text("candidate.py", text);
        let out = printed(&e);
        assert!(out.contains("PATCHED the runner's write skipped"), "{out}");
        assert_eq!(e.result.status, Status::Incorrect, "{}", e.result.message);
    }

    /// Through its input's `base` the module reaches the runner's mapping of every input set;
    /// on inputs new to it, it computes every set's answer at once, and answers later calls by
    /// copies. The judge times whole batches, so a round's work counts however it is spread
    /// over the round's calls: no gain over the honest module. (It computes sets the round
    /// does not use too, so it may be slower by any amount: no floor.)
    #[test]
    #[cfg_attr(
        not(has_numpy),
        ignore = "needs python3 with numpy (`.ci/run` installs it: pip install numpy)"
    )]
    fn answering_from_a_whole_pool_computed_at_once_gains_nothing() {
        let f = NumpyFixture::new();
        let source = ksearch_core::task::Source {
            file: "candidate.py".into(),
            text: include_str!("../fixtures/hostile/precomputes_every_set.py").into(),
        };
        let e = crate::no_faster_than(
            &f,
            &source,
            &f.source(&Behaviour::Good),
            "a module answering from a precomputed pool",
            None,
            0.0,
        );
        let out = printed(&e);
        assert!(
            out.contains("PRECOMPUTED every set of the mapping"),
            "{out}"
        );
        assert!(out.contains("ANSWERED from the precomputation"), "{out}");
    }
}

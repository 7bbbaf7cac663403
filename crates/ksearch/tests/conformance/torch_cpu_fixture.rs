//! Candidates for the `torch` backend on PyTorch's CPU build (`--target cpu`): the module runs
//! in a torch runner on inputs in shared memory, as on the GPU (where the memory is the
//! device's), so every attack a Python candidate can make in its own process is checked where
//! no GPU exists.

use std::path::PathBuf;

use ksearch_core::task::{Source, Task};
use ksearch_eval::{Evaluation, LocalEvaluator, TorchBackend};

use crate::numpy_fixture::assert_python_compile_message;
use crate::python_candidates::{Lib, source};
use crate::support::{Behaviour, Expect, Fixture, default_expect};

pub(crate) struct TorchCpuFixture {
    task: Task,
}

const TORCH: Lib = Lib {
    prelude: "import torch\n\ndef _softmax(x):\n    return torch.softmax(x, dim=1)\n",
    mutate: "x[0, 5] = 0.0",
    partial: "y = torch.full_like(x, float('nan'))\ny[:-1] = _softmax(x[:-1])\nreturn y",
    nan: "y = _softmax(x)\ny[1, 1] = float('nan')\nreturn y",
    wrong: "y = _softmax(x)\ny[rows // 2, cols // 2] += 0.01\nreturn y",
    zeros: "return torch.zeros_like(x)",
    four_times: "for _ in range(3):\n    _softmax(x)\nreturn _softmax(x)",
    flood_lines: 2000,
};

impl TorchCpuFixture {
    /// Only built into tests that run where PyTorch was found (`has_torch`, see build.rs).
    pub(crate) fn new() -> Self {
        let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/torch_softmax");
        Self {
            task: ksearch_tasks::load_task(dir.to_str().unwrap()).expect("fixture task"),
        }
    }
}

impl Fixture for TorchCpuFixture {
    fn task(&self) -> &Task {
        &self.task
    }

    fn evaluator(&self) -> LocalEvaluator {
        LocalEvaluator::new(Box::new(
            TorchBackend::new(
                None,
                Some("cpu".into()),
                env!("CARGO_BIN_EXE_ksearch").into(),
            )
            .expect("the harness unpacks"),
        ))
    }

    fn source(&self, b: &Behaviour) -> Source {
        Source {
            file: "candidate.py".into(),
            text: source(&TORCH, b),
        }
    }

    fn expect(&self, b: &Behaviour) -> Expect {
        match b {
            // As on the numpy target: a Python thread takes turns with the runner's.
            Behaviour::BackgroundWork | Behaviour::WorksWhileOthersAreTimed => {
                Expect::CaughtOrNoFaster("outside its timed calls")
            }
            other => default_expect(other),
        }
    }

    /// The judge and the runner each import PyTorch (seconds on a loaded two-core machine).
    fn start_slack(&self) -> std::time::Duration {
        std::time::Duration::from_secs(16)
    }

    /// A torch runner also copies each output into the judge's slot, a fixed cost per call
    /// beside the kernel (0.61 was seen with the load average at 9 on two cores).
    fn slower_bound(&self) -> f64 {
        0.75
    }

    fn assert_compile_message(&self, e: &Evaluation) {
        assert_python_compile_message(self, e);
    }
}

/// Attacks on the torch runner's shared sets. (Named so that CI's filter on the harness's
/// name takes it with the rest of the torch suite.)
mod torch_harness_cpu_only {
    use super::*;
    use crate::support::{passed_and_printed, printed};
    use ksearch_core::protocol::Status;

    /// A memoiser keyed by where its input lies, not by what it holds: the judge refills the
    /// same sets every round (and, for a workload whose set fits the device once, times every
    /// call on one set), so once it answers from memory it returns the last round's answer for
    /// this round's inputs, which the judge compares with the baseline's. Mostly that is while
    /// timed; when the allocator hands a check's fresh copy an address the memoiser has seen
    /// three times (one CI run of 2026-12-06), the check catches it first.
    #[test]
    #[cfg_attr(
        not(has_torch),
        ignore = "needs python3 with PyTorch (`.ci/run` installs it: pip install torch==2.11.0)"
    )]
    fn answers_remembered_by_address_are_caught() {
        let e = caught(
            include_str!("../fixtures/hostile/remembers_by_address.py"),
            "REMEMBERED by address",
        );
        let m = &e.result.message;
        assert!(
            m.contains("while timed") || m.contains("but the reference gives"),
            "{m}"
        );
    }

    /// Checks and timed calls told apart by the input's storage (a checked call's fresh copy
    /// against a timed call's view of the round's shared sets), and the work skipped when
    /// timed: the timed outputs, sampled and compared with the baseline's, give it away.
    #[test]
    #[cfg_attr(
        not(has_torch),
        ignore = "needs python3 with PyTorch (`.ci/run` installs it: pip install torch==2.11.0)"
    )]
    fn work_skipped_when_the_inputs_storage_says_timed_is_caught() {
        caught_while_timed(
            include_str!("../fixtures/hostile/tells_checks_by_their_storage.py"),
            "TIMED by storage",
        );
    }

    /// Checks and timed calls told apart by whether the input's memory may be written (a
    /// check's copy may, the timed calls' shared inputs are mapped read-only), and the work
    /// skipped when timed: the timed outputs, sampled and compared with the baseline's, give it
    /// away.
    #[test]
    #[cfg_attr(
        not(has_torch),
        ignore = "needs python3 with PyTorch (`.ci/run` installs it: pip install torch==2.11.0)"
    )]
    fn work_skipped_when_the_input_is_read_only_is_caught() {
        caught_while_timed(
            include_str!("../fixtures/hostile/tells_checks_by_writability.py"),
            "TIMED by a read-only input",
        );
    }

    /// Checks and timed calls told apart by their rhythm (a timed batch calls back to back, a
    /// check comes alone), and the work skipped in a burst: the timed outputs, sampled and
    /// compared with the baseline's, give it away.
    #[test]
    #[cfg_attr(
        not(has_torch),
        ignore = "needs python3 with PyTorch (`.ci/run` installs it: pip install torch==2.11.0)"
    )]
    fn work_skipped_in_back_to_back_calls_is_caught() {
        caught_while_timed(
            include_str!("../fixtures/hostile/skips_work_in_bursts.py"),
            "BURST taken for timed",
        );
    }

    /// Checks and timed calls told apart by reading the runner's own variables up the call
    /// stack (the candidate runs in the runner's process), and the work skipped when timed: the
    /// timed outputs, sampled and compared with the baseline's, give it away.
    #[test]
    #[cfg_attr(
        not(has_torch),
        ignore = "needs python3 with PyTorch (`.ci/run` installs it: pip install torch==2.11.0)"
    )]
    fn work_skipped_when_the_runners_frame_says_timed_is_caught() {
        caught_while_timed(
            include_str!("../fixtures/hostile/reads_the_runners_frame.py"),
            "TIMED by the runner's frame",
        );
    }

    /// A candidate that writes its input wherever the memory allows (a check's writable copy;
    /// in a user's program, the caller's tensor) and replaces what the runner compares inputs
    /// with (`torch.equal`) so that the check agrees: the runner holds its own references to
    /// what it checks with, taken before any candidate code runs.
    #[test]
    #[cfg_attr(
        not(has_torch),
        ignore = "needs python3 with PyTorch (`.ci/run` installs it: pip install torch==2.11.0)"
    )]
    fn inputs_written_under_a_silenced_check_are_caught() {
        let e = caught(
            include_str!("../fixtures/hostile/silences_the_input_check.py"),
            "WROTE the input, and the runner's check agreed",
        );
        assert!(
            e.result.message.contains("modified input `x`"),
            "{}",
            e.result.message
        );
    }

    /// A candidate that wants to compute its answer straight in the memory the judge reads
    /// outputs from (PyTorch skips a copy onto itself, so its time would lack the copy every
    /// other contender's includes): it turns off the runner's own guard (a closure in the
    /// runner's frame), then tries every descriptor it holds. On the CPU the runner has no
    /// mapping of that memory, only a write-only descriptor, which cannot be mapped, reopened for
    /// reading or have its mode changed: every answer reaches the judge through a copy.
    #[test]
    #[cfg_attr(
        not(has_torch),
        ignore = "needs python3 with PyTorch (`.ci/run` installs it: pip install torch==2.11.0)"
    )]
    fn the_judges_output_memory_cannot_be_written_in_place() {
        let f = TorchCpuFixture::new();
        crate::python_judge_rules::output_memory_out_of_reach(
            &f,
            crate::python_judge_rules::TORCH_PRELUDE,
            "return reach(x, _softmax, torch.from_numpy)",
        );
    }

    /// An answer of a tensor subclass whose `__torch_function__` (candidate code) would run in
    /// the runner's own step wherever the runner asks the answer something: where a call looks
    /// timed it holds half the rows, says it has the whole shape and turns the runner's copy of
    /// it into nothing. The runner reads an answer as a plain tensor: its true shape is refused.
    #[test]
    #[cfg_attr(
        not(has_torch),
        ignore = "needs python3 with PyTorch (`.ci/run` installs it: pip install torch==2.11.0)"
    )]
    fn an_answers_subclass_cannot_lie_to_the_runner() {
        let e = caught(
            include_str!("../fixtures/hostile/skips_the_runners_copy_through_a_subclass.py"),
            "ANSWERED half the rows under a claimed shape",
        );
        let m = &e.result.message;
        assert!(
            m.contains("while timed") && m.contains("output `y` has shape (61, 2000)"),
            "{m}"
        );
        let out = printed(&e);
        assert!(
            !out.contains("CLAIMED") && !out.contains("SKIPPED"),
            "{out}"
        );
    }

    /// A candidate that starts a helper process to work while the other contenders are timed
    /// (out of reach of the pause and of the CPU accounting of the runner's threads), through
    /// `posix_spawn` and `subprocess` rather than a plain fork: the sandbox refuses both, and
    /// the evaluation is the honest softmax's.
    #[test]
    #[cfg_attr(
        not(has_torch),
        ignore = "needs python3 with PyTorch (`.ci/run` installs it: pip install torch==2.11.0)"
    )]
    fn a_helper_process_started_to_slow_the_others_is_refused() {
        let f = TorchCpuFixture::new();
        let e = f.evaluate_text(
            "candidate.py",
            include_str!("../fixtures/hostile/starts_a_helper_to_slow_the_others.py"),
        );
        let out = passed_and_printed(&e);
        for how in ["posix_spawn", "subprocess"] {
            assert!(
                out.contains(&format!("HELPER via {how}: refused")),
                "{how}: {out}"
            );
        }
        assert!(!out.contains("STARTED"), "{out}");
    }

    /// `text` evaluated as the candidate: its attack ran (it printed `marker`) and the judge
    /// found its timed outputs wrong.
    fn caught_while_timed(text: &str, marker: &str) {
        let e = caught(text, marker);
        assert!(
            e.result.message.contains("while timed"),
            "{}",
            e.result.message
        );
    }

    /// `text` evaluated as the candidate: its attack ran (it printed `marker`) and the judge
    /// found it incorrect.
    fn caught(text: &str, marker: &str) -> ksearch_eval::Evaluation {
        let f = TorchCpuFixture::new();
        let e = f.evaluate_text("candidate.py", text);
        let out = printed(&e);
        assert!(
            out.contains(marker),
            "{out}\n{:?}: {}",
            e.result.status,
            e.result.message
        );
        assert_eq!(e.result.status, Status::Incorrect, "{}", e.result.message);
        e
    }
}

/// A module that remembers its first answer and hands it back for every later call, and rebinds
/// what the runner reads outputs through (`torch._C._cuda_synchronize`, the tensor methods that
/// detach, reshape and copy) so that a runner still calling them through torch would take the
/// remembered bytes for each call's answer: the runner holds its own references, taken before
/// any module loads, and the answer for other inputs is wrong.
#[test]
#[cfg_attr(
    not(has_torch),
    ignore = "needs python3 with PyTorch (`.ci/run` installs it)"
)]
fn a_module_that_rebinds_what_the_runner_reads_through_is_caught() {
    let text = "import torch\n\n_kept = []\n\n\ndef _same(self, *a, **k):\n    return _kept[0] if _kept else self\n\n\ndef run(x, *, rows, cols):\n    if not _kept:\n        _kept.append(torch.softmax(x, dim=1))\n        torch._C._cuda_synchronize = lambda: None\n        for _name in ('detach', 'contiguous', 'clone', 'reshape', 'view', 'copy_'):\n            setattr(torch.Tensor, _name, _same)\n        print('REBOUND', flush=True)\n    return _kept[0]\n";
    let e = TorchCpuFixture::new().evaluate_text("candidate.py", text);
    assert_eq!(
        e.result.status,
        ksearch_core::protocol::Status::Incorrect,
        "{}",
        e.result.message
    );
    assert!(
        e.result.output.head.contains("REBOUND"),
        "it ran: {:?}",
        e.result.output
    );
}

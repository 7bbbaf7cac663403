//! The Python judges' rules for timed calls, each held to an attack: which timed calls are
//! compared (any place in any batch), warm-up and sizing calls checked, batch sizes no candidate
//! chooses, timers that fire while another contender is timed, the judge's output memory out of a
//! runner's reach, and MLX answers a graph cannot hold. (Named `mlx_harness_*` and
//! `torch_harness_*` so that CI's filtered runs take them.)

use ksearch_core::protocol::Status;
use ksearch_core::task::Source;
use ksearch_eval::{Contenders, EvalOptions, Evaluation, Evaluator};

use crate::mlx_cpu_fixture::MlxCpuFixture;
use crate::numpy_fixture::NumpyFixture;
use crate::support::{Fixture, passed_and_printed, printed, quick_options};
use crate::torch_cpu_fixture::TorchCpuFixture;

const NUMPY: &str = "import numpy as np\n\n\ndef _softmax(x):\n    e = np.exp(x - x.max(axis=1, keepdims=True))\n    return (e / e.sum(axis=1, keepdims=True)).astype(np.float32)\n\n\ndef _uniform(x):\n    return np.full_like(x, 1.0 / x.shape[1])\n";
const TORCH: &str = "import torch\n\n\ndef _softmax(x):\n    return torch.softmax(x, dim=1)\n\n\ndef _uniform(x):\n    return torch.full_like(x, 1.0 / x.shape[1])\n";
const PHASES: &str = include_str!("../fixtures/hostile/reads_its_timing_phase.py");

/// A module of `prelude` (with `_softmax` and `_uniform`), the phase reader and `run`'s `body`.
fn phased(prelude: &str, body: &str) -> String {
    let body: String = body.lines().map(|l| format!("    {l}\n")).collect();
    format!("{prelude}\n{PHASES}\n\ndef run(x, *, rows, cols):\n    where, at, k = phase()\n{body}")
}

/// `text` evaluated as the candidate with `opts`, beside the task's own code only.
fn evaluate<F: Fixture>(f: &F, text: &str, opts: &EvalOptions) -> Evaluation {
    let source = Source {
        file: "candidate.py".into(),
        text: text.into(),
    };
    f.evaluator()
        .evaluate(f.task(), &source, Contenders::default(), opts)
        .expect("evaluation completes")
}

/// `text` is `incorrect`, saying `part`, and printed `marker` (its attack ran).
fn caught<F: Fixture>(f: &F, text: &str, marker: &str, part: &str) -> Evaluation {
    let mut opts = quick_options();
    if let Some(t) = opts.timing.as_mut() {
        t.min_runs = 10;
    }
    let e = evaluate(f, text, &opts);
    let out = printed(&e);
    assert!(
        out.contains(marker),
        "{marker}: {out}\n{}",
        e.result.message
    );
    assert_eq!(e.result.status, Status::Incorrect, "{}", e.result.message);
    assert!(
        e.result.message.contains(part),
        "{part}: {}",
        e.result.message
    );
    e
}

/// Honest in every check, in warm-up and while sizing, and in the first half of every timed
/// batch; from the middle of each timed batch on, the uniform distribution (finite, each row
/// summing to one, cheap). The baseline's window lies anywhere in the round, wrapping around its
/// end, and the kept calls anywhere in any batch: the second half of a batch is compared as often
/// as the first.
fn cheap_late_in_each_timed_batch_is_caught<F: Fixture>(f: &F, prelude: &str) {
    let text = phased(
        prelude,
        "if where == 'timed' and at >= k // 2:\n    _say('CHEAP from the middle of each timed batch')\n    return _uniform(x)\nreturn _softmax(x)",
    );
    caught(f, &text, "CHEAP from the middle", "while timed, call");
}

/// No work at all in warm-up and while sizing (its input back, at no cost: fast, so that its
/// batches would be sized long), honest otherwise: warm-up and sizing calls are compared with the
/// baseline's on the same set, as timed calls are.
fn no_work_before_the_rounds_is_caught<F: Fixture>(f: &F, prelude: &str) {
    let text = phased(
        prelude,
        "if where in ('warm-up', 'sizing'):\n    _say('NO WORK in warm-up and while sizing')\n    return x * 1\nreturn _softmax(x)",
    );
    caught(f, &text, "NO WORK", "while timed in warm-up");
}

/// Slow (ten times the work) only in warm-up and while sizing, honest in the rounds, timed
/// against its honest twin: a batch's size comes from the contender's fastest timed batch, and
/// the round's sets grow with it, so its sizing decides nothing it is timed over. (It was timed at
/// 1.45x its twin in the hidden set of issue 43.)
fn slow_only_before_the_rounds_gains_nothing<F: Fixture>(f: &F, prelude: &str) {
    let slow = phased(
        prelude,
        "if SLOW and where in ('warm-up', 'sizing'):\n    _say('SLOW in warm-up and while sizing')\n    for _ in range(10):\n        _softmax(x)\nreturn _softmax(x)",
    );
    let text = format!("SLOW = True\n{slow}");
    let twin = Source {
        file: "twin.py".into(),
        text: text.replace("SLOW = True", "SLOW = False"),
    };
    let candidate = Source {
        file: "candidate.py".into(),
        text,
    };
    let e = crate::no_faster_than(
        f,
        &candidate,
        &twin,
        "slow only before the rounds",
        None,
        crate::NOISE_FLOOR,
    );
    assert!(printed(&e).contains("SLOW in warm-up"), "{}", printed(&e));
}

/// A module that arms a timer at the end of every call, whose handler works 3 ms (CPU) once it
/// fires, 2 ms later: while the judge times the next contender, on the one CPU every runner
/// shares. The judge reads every untrusted runner's CPU clock around each batch.
const ARMS_TIMERS: &str = "import signal, time\n_fired = [0]\n\n\ndef _work(signum, frame):\n    _fired[0] += 1\n    if _fired[0] == 1:\n        print('TIMER fired', flush=True)\n    end = time.thread_time() + 0.003\n    while time.thread_time() < end:\n        pass\n\n\nsignal.signal(signal.SIGALRM, _work)\n_run = run\n\n\ndef run(x, **axes):\n    y = _run(x, **axes)\n    signal.setitimer(signal.ITIMER_REAL, 0.002)\n    return y\n";

/// On the numpy target the runner is not paused between its calls: the work its timer does
/// while the baseline is timed is refused (as the C judge refuses it).
fn timers_firing_while_others_are_timed_are_caught<F: Fixture>(f: &F, prelude: &str) {
    let text =
        format!("{prelude}\n\ndef run(x, *, rows, cols):\n    return _softmax(x)\n\n{ARMS_TIMERS}");
    caught(
        f,
        &text,
        "TIMER fired",
        "outside its timed calls while the baseline",
    );
}

/// The torch judge pauses an untrusted runner (SIGSTOP) between its calls: a timer that expires
/// meanwhile runs its handler only once the runner is continued for its own next batch, whose
/// time then holds it. Caught, or no faster than the honest module it wraps.
fn timers_on_a_paused_runner_gain_nothing<F: Fixture>(f: &F, prelude: &str) {
    let text =
        format!("{prelude}\n\ndef run(x, *, rows, cols):\n    return _softmax(x)\n\n{ARMS_TIMERS}");
    let candidate = Source {
        file: "candidate.py".into(),
        text,
    };
    let e = crate::no_faster_than_good_source(
        f,
        &candidate,
        "arms timers",
        Some("outside its timed calls"),
    );
    assert!(printed(&e).contains("TIMER fired"), "{}", printed(&e));
}

/// The judge's output memory out of reach of `run_line` over the helper that looks for it
/// (`reaches_for_the_output_memory.py`): every route refused, and the answer, right, reaches the
/// judge through the runner's write.
pub(crate) fn output_memory_out_of_reach<F: Fixture>(f: &F, prelude: &str, run_line: &str) {
    let text = format!(
        "{prelude}\n{}\n\ndef run(x, *, rows, cols):\n    {run_line}\n",
        include_str!("../fixtures/hostile/reaches_for_the_output_memory.py")
    );
    let e = evaluate(f, &text, &quick_options());
    let out = passed_and_printed(&e);
    for refused in [
        "looked for the runner's guards",
        "map of the output descriptor refused",
        "reopen of the output memory refused",
        "mode change of the output memory refused",
    ] {
        assert!(out.contains(refused), "{refused}: {out}");
    }
    for got in ["MAPPED", "REOPENED", "CHANGED", "ANSWERED"] {
        assert!(!out.contains(got), "{got}: {out}");
    }
}

pub(crate) const NUMPY_PRELUDE: &str = NUMPY;
pub(crate) const TORCH_PRELUDE: &str = TORCH;

#[test]
#[cfg_attr(
    not(has_numpy),
    ignore = "needs python3 with numpy (`.ci/run` installs it: pip install numpy)"
)]
fn mlx_harness_numpy_cheap_answers_late_in_each_timed_batch_are_caught() {
    cheap_late_in_each_timed_batch_is_caught(&NumpyFixture::new(), NUMPY);
}

#[test]
#[cfg_attr(
    not(has_torch),
    ignore = "needs python3 with PyTorch (`.ci/run` installs it: pip install torch==2.11.0)"
)]
fn torch_harness_cpu_cheap_answers_late_in_each_timed_batch_are_caught() {
    cheap_late_in_each_timed_batch_is_caught(&TorchCpuFixture::new(), TORCH);
}

#[test]
#[cfg_attr(
    not(has_numpy),
    ignore = "needs python3 with numpy (`.ci/run` installs it: pip install numpy)"
)]
fn mlx_harness_numpy_no_work_before_the_rounds_is_caught() {
    no_work_before_the_rounds_is_caught(&NumpyFixture::new(), NUMPY);
}

#[test]
#[cfg_attr(
    not(has_torch),
    ignore = "needs python3 with PyTorch (`.ci/run` installs it: pip install torch==2.11.0)"
)]
fn torch_harness_cpu_no_work_before_the_rounds_is_caught() {
    no_work_before_the_rounds_is_caught(&TorchCpuFixture::new(), TORCH);
}

#[test]
#[cfg_attr(
    not(has_numpy),
    ignore = "needs python3 with numpy (`.ci/run` installs it: pip install numpy)"
)]
fn mlx_harness_numpy_slow_only_before_the_rounds_gains_nothing() {
    slow_only_before_the_rounds_gains_nothing(&NumpyFixture::new(), NUMPY);
}

#[test]
#[cfg_attr(
    not(has_torch),
    ignore = "needs python3 with PyTorch (`.ci/run` installs it: pip install torch==2.11.0)"
)]
fn torch_harness_cpu_slow_only_before_the_rounds_gains_nothing() {
    slow_only_before_the_rounds_gains_nothing(&TorchCpuFixture::new(), TORCH);
}

#[test]
#[cfg_attr(
    not(has_numpy),
    ignore = "needs python3 with numpy (`.ci/run` installs it: pip install numpy)"
)]
fn mlx_harness_numpy_timers_firing_while_others_are_timed_are_caught() {
    timers_firing_while_others_are_timed_are_caught(&NumpyFixture::new(), NUMPY);
}

#[test]
#[cfg_attr(
    not(has_torch),
    ignore = "needs python3 with PyTorch (`.ci/run` installs it: pip install torch==2.11.0)"
)]
fn torch_harness_cpu_timers_on_a_paused_runner_gain_nothing() {
    timers_on_a_paused_runner_gain_nothing(&TorchCpuFixture::new(), TORCH);
}

/// Both of the MLX test task's workloads: a module that keeps arrays of one trace has another to
/// return them in.
fn both_workloads() -> EvalOptions {
    let mut opts = quick_options();
    opts.workloads = vec!["small".into(), "tall".into()];
    opts
}

/// An MLX module whose `run` returns the arrays of its previous call when calls come fast (its
/// workloads are traced one after the other): MLX 0.32.4 wrote such a graph by reading memory its
/// arrays do not have, and the tracer died of SIGSEGV ("crashed" in the compile phase). Whatever
/// a module returns, the verdict is about its answer.
#[test]
#[cfg_attr(
    not(has_mlx),
    ignore = "needs python3 with MLX for CPU (`.ci/run` installs it: pip install \"mlx[cpu]\")"
)]
fn mlx_harness_cpu_arrays_of_an_earlier_trace_are_an_incorrect_answer() {
    let f = MlxCpuFixture::new();
    let text = "import time\nimport mlx.core as mx\n_last = {'t': 0.0, 'out': None}\n\n\ndef run(x, *, rows, cols):\n    now = time.monotonic()\n    if _last['out'] is not None and now - _last['t'] < 30.0:\n        print('RETURNED the previous call\\'s arrays', flush=True)\n        out = _last['out']\n        return out[: x.shape[0], : x.shape[1]] * 0.5 + out[: x.shape[0], : x.shape[1]] * 0.5\n    e = mx.exp(x - x.max(axis=1, keepdims=True))\n    _last['t'], _last['out'] = now, (e / e.sum(axis=1, keepdims=True)).astype(mx.float32)\n    return _last['out']\n";
    let e = evaluate(&f, text, &both_workloads());
    assert!(printed(&e).contains("RETURNED"), "{}", printed(&e));
    assert_eq!(e.result.status, Status::Incorrect, "{}", e.result.message);
    assert!(
        e.result.message.contains("another trace"),
        "{}",
        e.result.message
    );
}

/// The same with arrays of a trace the module made itself when imported (`mx.export_function`
/// with a callback), added to what it computes.
#[test]
#[cfg_attr(
    not(has_mlx),
    ignore = "needs python3 with MLX for CPU (`.ci/run` installs it: pip install \"mlx[cpu]\")"
)]
fn mlx_harness_cpu_arrays_of_a_trace_of_its_own_are_an_incorrect_answer() {
    let f = MlxCpuFixture::new();
    let text = "import mlx.core as mx\n_kept = []\nmx.export_function(lambda message: None, lambda a: (_kept.append(a * 0.0) or a,), mx.zeros((1,)))\nprint('TRACED its own', flush=True)\n\n\ndef run(x, *, rows, cols):\n    e = mx.exp(x - x.max(axis=1, keepdims=True))\n    return (e / e.sum(axis=1, keepdims=True)).astype(mx.float32) + _kept[0]\n";
    let e = evaluate(&f, text, &quick_options());
    assert!(printed(&e).contains("TRACED its own"), "{}", printed(&e));
    assert_eq!(e.result.status, Status::Incorrect, "{}", e.result.message);
    assert!(
        e.result.message.contains("another trace"),
        "{}",
        e.result.message
    );
}

/// A tracer that sends bytes of its own making as its graphs (it shares the tracer's interpreter
/// and rewrites its answer): the executor, which runs no candidate code, cannot load them, and
/// the verdict is about the candidate's answer, not a crash of the judge's side.
#[test]
#[cfg_attr(
    not(has_mlx),
    ignore = "needs python3 with MLX for CPU (`.ci/run` installs it: pip install \"mlx[cpu]\")"
)]
fn mlx_harness_cpu_graphs_that_cannot_be_loaded_are_an_incorrect_answer() {
    let f = MlxCpuFixture::new();
    let text = "import os, sys\nimport mlx.core as mx\n_r = sys.modules['__main__']\n_send = _r.link.send\n\n\ndef _reply(sock, header, payload=b''):\n    if header.get('op') == 'traced':\n        print('SENT graphs of its own making', flush=True)\n        forged = [os.urandom(n) for n in header['sizes']]\n        return _send(sock, header, b''.join(forged))\n    return _send(sock, header, payload)\n\n\n_r.reply = _reply\n\n\ndef run(x, *, rows, cols):\n    e = mx.exp(x - x.max(axis=1, keepdims=True))\n    return (e / e.sum(axis=1, keepdims=True)).astype(mx.float32)\n";
    let e = evaluate(&f, text, &quick_options());
    assert!(printed(&e).contains("SENT graphs"), "{}", printed(&e));
    assert_eq!(e.result.status, Status::Incorrect, "{}", e.result.message);
    assert!(
        e.result.message.contains("could not be loaded"),
        "{}",
        e.result.message
    );
}

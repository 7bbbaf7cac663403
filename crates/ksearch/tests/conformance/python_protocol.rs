//! The Python harness's judge and what its runners send it. A module shares its runner's
//! interpreter (a direct or torch runner's, an MLX tracer's), so it can rewrite every answer the
//! runner gives: whatever comes, the judge reads it or loses the runner (`runtime_error`, "broke
//! the protocol"), and keeps serving. It can also keep the descriptors its runner is handed (its
//! output memory) and send descriptors of its own. (Named `mlx_harness_*` and `torch_harness_*`
//! so that CI's filtered runs take them.)

use ksearch_core::protocol::Status;
use ksearch_core::task::Source;
use ksearch_eval::{Contenders, Evaluation, Evaluator};

use crate::mlx_cpu_fixture::MlxCpuFixture;
use crate::numpy_fixture::NumpyFixture;
use crate::support::{Fixture, passed_and_printed, printed, quick_options};
use crate::torch_cpu_fixture::TorchCpuFixture;

const NUMPY_RUN: &str = "import numpy as np\n\n\ndef run(x, *, rows, cols):\n    e = np.exp(x - x.max(axis=1, keepdims=True))\n    return (e / e.sum(axis=1, keepdims=True)).astype(np.float32)\n";
const TORCH_RUN: &str =
    "import torch\n\n\ndef run(x, *, rows, cols):\n    return torch.softmax(x, dim=1)\n";
const MLX_RUN: &str = "import mlx.core as mx\n\n\ndef run(x, *, rows, cols):\n    e = mx.exp(x - x.max(axis=1, keepdims=True))\n    return (e / e.sum(axis=1, keepdims=True)).astype(mx.float32)\n";

/// A module whose runner answers the request `op` with `answer` (Python statements with `sock`,
/// `header` and `payload`, the runner's own answer, in scope) instead of its own.
fn answering(op: &str, answer: &str, run: &str) -> String {
    let answer: String = answer.lines().map(|l| format!("        {l}\n")).collect();
    format!(
        "import json, struct, sys\n_r = sys.modules['__main__']\n_send = _r.link.send\n\n\ndef _reply(sock, header, payload=b''):\n    if header.get('op') == {op:?}:\n{answer}        return\n    _send(sock, header, payload)\n\n\n_r.reply = _reply\n\n{run}"
    )
}

/// A header of JSON nested 60000 deep: under the header size limit, past `json`'s recursion
/// limit.
const DEEP_JSON: &str = "sock.sendall(struct.pack('<I', 120000) + b'[' * 60000 + b']' * 60000)";

/// Each of `texts` evaluated in turn by one worker, then `honest`: the worker must answer every
/// one, and pass the honest module after them.
fn in_turn<F: Fixture>(f: &F, texts: &[String], honest: &str) -> Vec<Evaluation> {
    let mut ev = f.evaluator();
    let mut evaluate = |text: &str| {
        let source = Source {
            file: "candidate.py".into(),
            text: text.into(),
        };
        ev.evaluate(f.task(), &source, Contenders::default(), &quick_options())
            .unwrap_or_else(|e| panic!("the worker did not evaluate {text:?}: {e}"))
    };
    let out: Vec<Evaluation> = texts.iter().map(|t| evaluate(t)).collect();
    let after = evaluate(honest);
    assert_eq!(
        after.result.status,
        Status::Passed,
        "{}",
        after.result.message
    );
    out
}

fn assert_broke(e: &Evaluation, part: &str) {
    assert_eq!(
        e.result.status,
        Status::RuntimeError,
        "{}",
        e.result.message
    );
    assert!(
        e.result.message.contains("broke the protocol") && e.result.message.contains(part),
        "{part}: {}",
        e.result.message
    );
}

/// A direct or torch runner's answer to "load" rewritten: deeply nested JSON (the judge's
/// parser raised RecursionError, which stopped the worker's evaluation as a harness failure), a
/// header that is no object, one without an `op`, an error without a message, a payload nobody
/// asked for.
fn malformed_answers_are_runtime_errors<F: Fixture>(f: &F, run: &str) {
    let answers = [
        (DEEP_JSON, "maximum recursion depth"),
        (
            "sock.sendall(struct.pack('<I', 3) + b'[1]')",
            "not an object",
        ),
        ("_send(sock, {'sizes': [1]})", "without an `op`"),
        (
            "_send(sock, {'op': 'error', 'message': 5})",
            "without a message",
        ),
        (
            "_send(sock, header, b'x' * 4096)",
            "a payload of 4096 bytes",
        ),
    ];
    let texts: Vec<String> = answers
        .iter()
        .map(|(a, _)| answering("loaded", a, run))
        .collect();
    for (e, (_, part)) in in_turn(f, &texts, run).iter().zip(answers) {
        assert_broke(e, part);
    }
}

#[test]
#[cfg_attr(
    not(has_numpy),
    ignore = "needs python3 with numpy (`.ci/run` installs it: pip install numpy)"
)]
fn mlx_harness_numpy_malformed_answers_are_runtime_errors() {
    malformed_answers_are_runtime_errors(&NumpyFixture::new(), NUMPY_RUN);
}

#[test]
#[cfg_attr(
    not(has_torch),
    ignore = "needs python3 with PyTorch (`.ci/run` installs it: pip install torch==2.11.0)"
)]
fn torch_harness_cpu_malformed_answers_are_runtime_errors() {
    malformed_answers_are_runtime_errors(&TorchCpuFixture::new(), TORCH_RUN);
}

/// A tracer's `traced` answer rewritten: without an `op`, sizes that are a string or floats (the
/// judge summed and sliced them unchecked), nested too deep, and graphs larger than a tracer may
/// write (96 MiB for one workload: the judge read any payload up to 16 GiB, and held it three
/// times).
#[test]
#[cfg_attr(
    not(has_mlx),
    ignore = "needs python3 with MLX for CPU (`.ci/run` installs it: pip install \"mlx[cpu]\")"
)]
fn mlx_harness_cpu_malformed_graphs_are_runtime_errors() {
    let answers = [
        (
            "_send(sock, {'sizes': header['sizes']}, payload)",
            "without an `op`",
        ),
        (
            "_send(sock, {'op': 'traced', 'sizes': 'a' * len(header['sizes'])}, payload)",
            "do not add up",
        ),
        (
            "_send(sock, {'op': 'traced', 'sizes': [float(n) for n in header['sizes']]}, payload)",
            "do not add up",
        ),
        (DEEP_JSON, "maximum recursion depth"),
        (
            "n = 96 << 20\nhead = json.dumps({'op': 'traced', 'sizes': [n], 'payload': n}).encode()\nsock.sendall(struct.pack('<I', len(head)) + head)\nfor _ in range(6):\n    sock.sendall(bytes(16 << 20))",
            "where at most 67108864 were asked for",
        ),
    ];
    let texts: Vec<String> = answers
        .iter()
        .map(|(a, _)| answering("traced", a, MLX_RUN))
        .collect();
    for (e, (_, part)) in in_turn(&MlxCpuFixture::new(), &texts, MLX_RUN)
        .iter()
        .zip(answers)
    {
        assert_broke(e, part);
    }
}

/// Descriptors attached to the clock byte (SCM_RIGHTS): the judge reads that socket with room
/// for its timestamp, so they were installed in the judge and never closed (7,642 of them, and
/// 5 GB of memfds, over a three-round run).
fn descriptors_with_the_clock_byte_are_refused<F: Fixture>(f: &F, run: &str) {
    let text = format!(
        "import array, os, socket, sys\n_r = sys.modules['__main__']\n\n\ndef _tick():\n    fds = [os.open('/dev/null', os.O_RDONLY) for _ in range(8)] + list(os.pipe())\n    _r.CLOCK[0].sendmsg([b'd'], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array('i', fds))])\n    for fd in fds:\n        os.close(fd)\n\n\n_r.tick = _tick\n\n{run}"
    );
    let e = &in_turn(f, &[text], run)[0];
    assert_broke(e, "file descriptors");
}

#[test]
#[cfg_attr(
    not(has_numpy),
    ignore = "needs python3 with numpy (`.ci/run` installs it: pip install numpy)"
)]
fn mlx_harness_numpy_descriptors_with_the_clock_byte_are_refused() {
    descriptors_with_the_clock_byte_are_refused(&NumpyFixture::new(), NUMPY_RUN);
}

#[test]
#[cfg_attr(
    not(has_torch),
    ignore = "needs python3 with PyTorch (`.ci/run` installs it: pip install torch==2.11.0)"
)]
fn torch_harness_cpu_descriptors_with_the_clock_byte_are_refused() {
    descriptors_with_the_clock_byte_are_refused(&TorchCpuFixture::new(), TORCH_RUN);
}

/// A module that keeps the descriptors its runner closes after mapping them (its inputs), and
/// finds those it keeps open (its outputs, written through a write-only descriptor), then tries to
/// grow and to truncate each, through a descriptor reopened for writing or the one it holds, at
/// its first call and once timed: truncated outputs killed the judge with SIGBUS when it read its
/// own mapping.
fn resizing_the_shared_memory_harms_no_judge<F: Fixture>(f: &F, run: &str) {
    let text = format!(
        "import fcntl, os as _os, sys, types\n_r = sys.modules['__main__']\n_kept = []\n_calls = [0]\n\n\nclass _Os(types.ModuleType):\n    def __getattr__(self, name):\n        return getattr(_os, name)\n\n\n_shim = _Os('os')\n_shim.close = lambda fd: (_kept.append(_os.dup(fd)), _os.close(fd))\n_r.os = _shim\n\n\ndef _held():\n    for fd in range(3, 256):\n        try:\n            if _os.readlink(f'/proc/self/fd/{{fd}}').startswith('/memfd:'):\n                yield fd\n        except OSError:\n            pass\n\n\ndef _resize():\n    for fd in set(_kept) | set(_held()):\n        link = _os.readlink(f'/proc/self/fd/{{fd}}')\n        size = _os.fstat(fd).st_size\n        try:\n            w = _os.open(f'/proc/self/fd/{{fd}}', _os.O_RDWR)\n        except OSError:\n            if fcntl.fcntl(fd, fcntl.F_GETFL) & _os.O_ACCMODE == _os.O_RDONLY:\n                continue\n            w = _os.dup(fd)\n        for what, to in (('grow', 2 * size + 4096), ('truncate', 0)):\n            try:\n                _os.ftruncate(w, to)\n                print(what.upper() + 'D', link, flush=True)\n            except OSError:\n                print(what, 'refused:', link, flush=True)\n        _os.close(w)\n\n\n{run}\n_run = run\n\n\ndef run(x, **axes):\n    _calls[0] += 1\n    if _calls[0] in (1, 6):\n        _resize()\n    return _run(x, **axes)\n"
    );
    let e = &in_turn(f, &[text], run)[0];
    let out = passed_and_printed(e);
    assert!(
        !out.contains("GROWD") && !out.contains("TRUNCATED"),
        "{out}"
    );
    for what in ["grow", "truncate"] {
        assert!(
            out.contains(&format!("{what} refused: /memfd:ksearch-shm")),
            "{what}: {out}"
        );
    }
}

#[test]
#[cfg_attr(
    not(has_numpy),
    ignore = "needs python3 with numpy (`.ci/run` installs it: pip install numpy)"
)]
fn mlx_harness_numpy_resizing_the_shared_memory_harms_no_judge() {
    resizing_the_shared_memory_harms_no_judge(&NumpyFixture::new(), NUMPY_RUN);
}

#[test]
#[cfg_attr(
    not(has_torch),
    ignore = "needs python3 with PyTorch (`.ci/run` installs it: pip install torch==2.11.0)"
)]
fn torch_harness_cpu_resizing_the_shared_memory_harms_no_judge() {
    resizing_the_shared_memory_harms_no_judge(&TorchCpuFixture::new(), TORCH_RUN);
}

/// The judge works in a fresh directory of its own, under the temporary directory: its runners'
/// sandboxes were shown it (it is first on the judge's `sys.path`, under `-m`), with the root
/// directories of every runner's sandbox in it. A module lists what it can of the temporary
/// directory.
fn the_judges_directory_is_not_shown<F: Fixture>(f: &F, run: &str) {
    let tmp = std::env::temp_dir().display().to_string();
    let text = format!(
        "import os\n\n_saw = []\nfor _top, _dirs, _files in os.walk({tmp:?}):\n    _saw += [n for n in _dirs + _files if n.startswith(('ksearch-worker-', 'sandbox-root-'))]\n    if _top.count(os.sep) > 6:\n        _dirs[:] = []\nprint('SAW' if _saw else 'saw nothing of the judge', sorted(set(_saw))[:4], flush=True)\n\n{run}"
    );
    let e = &in_turn(f, &[text], run)[0];
    let out = passed_and_printed(e);
    assert!(out.contains("saw nothing of the judge"), "{out}");
}

#[test]
#[cfg_attr(
    not(has_numpy),
    ignore = "needs python3 with numpy (`.ci/run` installs it: pip install numpy)"
)]
fn mlx_harness_numpy_the_judges_directory_is_not_shown() {
    the_judges_directory_is_not_shown(&NumpyFixture::new(), NUMPY_RUN);
}

#[test]
#[cfg_attr(
    not(has_mlx),
    ignore = "needs python3 with MLX for CPU (`.ci/run` installs it: pip install \"mlx[cpu]\")"
)]
fn mlx_harness_cpu_the_judges_directory_is_not_shown() {
    the_judges_directory_is_not_shown(&MlxCpuFixture::new(), MLX_RUN);
}

/// A module whose import fails with a lone surrogate in its message: the judge wrote it into its
/// result escaped, which ksearch's JSON reader refuses, and the evaluation was void (`rejected`).
#[test]
#[cfg_attr(
    not(has_numpy),
    ignore = "needs python3 with numpy (`.ci/run` installs it: pip install numpy)"
)]
fn mlx_harness_numpy_an_error_with_lone_surrogates_is_reported() {
    let text = format!("raise RuntimeError('half a pair: \\ud83d.')\n\n{NUMPY_RUN}");
    let e = &in_turn(&NumpyFixture::new(), &[text], NUMPY_RUN)[0];
    assert_eq!(
        e.result.status,
        Status::RuntimeError,
        "{}",
        e.result.message
    );
    assert!(
        e.result.message.contains("half a pair: \u{fffd}."),
        "{}",
        e.result.message
    );
}

/// A module that answers every timed batch twice: a "done" (and its clock byte) sent as the batch
/// arrives, before any work, then the runner's own when the work is done. The judge's clock
/// stops at once, and every later answer it reads is the one a step behind. It is stopped
/// either way: the judge reads the outputs of the batch (a warm-up call is a timed batch of one)
/// the moment the early "done" comes, and finds them unwritten, or it finds the second "done"
/// waiting when it turns to the runner again.
fn answering_twice_when_timed_is_stopped<F: Fixture>(f: &F, run: &str) {
    let text = format!(
        "import sys\n_r = sys.modules['__main__']\n_request = _r.request\n\n\ndef _early(sock, with_fds=False):\n    got = _request(sock, with_fds)\n    if got is not None and got[0].get('op') == 'go':\n        if _r.CLOCK[0] is not None:\n            _r.CLOCK[0].send(b'd')\n        _r.link.send(sock, {{'op': 'done'}})\n    return got\n\n\n_r.request = _early\n\n{run}"
    );
    let e = &in_turn(f, &[text], run)[0];
    assert!(e.speedup.is_none(), "measured: {:?}", e.speedup);
    if e.result.status == Status::Incorrect {
        assert!(
            e.result.message.contains("while timed")
                && e.result.message.contains("was the work skipped?"),
            "{}",
            e.result.message
        );
    } else {
        assert_broke(e, "nobody asked for");
    }
}

#[test]
#[cfg_attr(
    not(has_numpy),
    ignore = "needs python3 with numpy (`.ci/run` installs it: pip install numpy)"
)]
fn mlx_harness_numpy_answering_twice_when_timed_is_stopped() {
    answering_twice_when_timed_is_stopped(&NumpyFixture::new(), NUMPY_RUN);
}

#[test]
#[cfg_attr(
    not(has_torch),
    ignore = "needs python3 with PyTorch (`.ci/run` installs it: pip install torch==2.11.0)"
)]
fn torch_harness_cpu_answering_twice_when_timed_is_stopped() {
    answering_twice_when_timed_is_stopped(&TorchCpuFixture::new(), TORCH_RUN);
}

/// A torch module that watches, from a thread of its own, the input memory of its last call
/// whenever it is not in a call, and reports how long before a call it had already seen that
/// call's inputs (`lead`): what it would have had to compute the answer in advance, on the GPU
/// at no CPU cost. Timed beside a parent that takes 500 ms a call, so that in the rounds where
/// the parent goes first a memory shared by both would show the round's inputs 500 ms early.
const WATCHES_ITS_INPUTS: &str = r#"import threading
import time

import torch

_s = {"in_call": False, "last": None, "seen": {}, "got": set(), "lead": 0.0, "polls": 0, "calls": 0}


def _fingerprint(x):
    return tuple(x.reshape(-1)[:8].tolist())


def _watch():
    while True:
        time.sleep(0.05)
        x = _s["last"]
        if x is None or _s["in_call"]:
            continue
        _s["polls"] += 1
        _s["seen"].setdefault(_fingerprint(x), time.monotonic())


threading.Thread(target=_watch, daemon=True).start()


def run(x, *, rows, cols):
    start = time.monotonic()
    _s["in_call"] = True
    try:
        f = _fingerprint(x)
        if f not in _s["got"]:
            _s["got"].add(f)
            first = _s["seen"].get(f)
            if first is not None:
                _s["lead"] = max(_s["lead"], start - first)
        _s["last"] = x
        _s["calls"] += 1
        print(f"watcher: lead {_s['lead'] * 1e3:.1f} ms, {_s['polls']} polls, {_s['calls']} calls", flush=True)
        return torch.softmax(x, dim=1)
    finally:
        _s["in_call"] = False
"#;

#[test]
#[cfg_attr(
    not(has_torch),
    ignore = "needs python3 with PyTorch (`.ci/run` installs it: pip install torch==2.11.0)"
)]
fn torch_harness_cpu_no_runner_sees_a_calls_inputs_before_its_own_call() {
    let f = TorchCpuFixture::new();
    let e = beside_a_slow_parent(&f, "watcher.py", WATCHES_ITS_INPUTS, 0.5);
    assert_eq!(e.result.status, Status::Passed, "{}", e.result.message);
    let text = printed(&e);
    let last = text
        .lines()
        .rfind(|l| l.starts_with("watcher: lead "))
        .unwrap_or_else(|| panic!("the watcher printed nothing: {text}"));
    let words: Vec<&str> = last.split_whitespace().collect();
    let lead_ms: f64 = words[2].parse().unwrap();
    let polls: u64 = words[4].parse().unwrap();
    // Its thread ran (it polled while its runner was answering the judge), but not while the
    // parent was timed: an untrusted runner is paused (SIGSTOP) between its calls, and the
    // parent's eight or more batches of 500 ms would have given it over 80 polls.
    assert!(polls >= 1, "{last}");
    assert!(polls < 60, "{last}");
    // What it can see early is only what the judge writes just before its own batch, while the
    // batch's earlier calls run (62 ms at most on a loaded 2-core machine; 340 ms with one input
    // memory for all and a 300 ms parent).
    assert!(lead_ms < 250.0, "{last}");
}

/// `text` evaluated on the torch CPU target beside a parent that sleeps `sleep_s` seconds a call,
/// for at least eight samples each: the candidate's runner waits through the parent's batches.
fn beside_a_slow_parent(f: &TorchCpuFixture, file: &str, text: &str, sleep_s: f64) -> Evaluation {
    let parent = Source {
        file: "parent.py".into(),
        text: format!(
            "import time\n\n{TORCH_RUN}\n\nrun_ = run\n\n\ndef run(x, **axes):\n    time.sleep({sleep_s})\n    return run_(x, **axes)\n",
        ),
    };
    let candidate = Source {
        file: file.into(),
        text: text.into(),
    };
    let mut opts = quick_options();
    if let Some(t) = opts.timing.as_mut() {
        t.min_runs = 8;
    }
    f.evaluator()
        .evaluate(
            f.task(),
            &candidate,
            Contenders {
                parent: Some(&parent),
                incumbent: None,
                comparisons: false,
            },
            &opts,
        )
        .unwrap()
}

/// A torch module that leaves its runner's process group (`setsid`), so that a signal to the
/// group misses it, and keeps a thread ticking every 5 ms (too little CPU for the judge's
/// accounting to see): what a module would use to work (precompute, or hold the GPU) while
/// another contender is timed. It reports the most ticks between the end of one of its calls and
/// the start of the next (`gap`): through one of the parent's calls, a runner left running
/// ticks once every 5 ms.
const LEAVES_ITS_GROUP: &str = r#"import os
import threading
import time

import torch

try:
    os.setsid()
    _left = "left its group"
except OSError:
    _left = "setsid refused"
_s = {"ticks": 0, "mark": 0, "gap": 0, "calls": 0}


def _tick():
    while True:
        time.sleep(0.005)
        _s["ticks"] += 1


threading.Thread(target=_tick, daemon=True).start()


def run(x, *, rows, cols):
    if _s["calls"] > 0:
        _s["gap"] = max(_s["gap"], _s["ticks"] - _s["mark"])
    _s["calls"] += 1
    y = torch.softmax(x, dim=1)
    print(f"ticker ({_left}): gap {_s['gap']} ticks, {_s['ticks']} ticks, {_s['calls']} calls", flush=True)
    _s["mark"] = _s["ticks"]
    return y
"#;

#[test]
#[cfg_attr(
    not(has_torch),
    ignore = "needs python3 with PyTorch (`.ci/run` installs it: pip install torch==2.11.0)"
)]
fn torch_harness_cpu_a_runner_that_leaves_its_process_group_is_paused_all_the_same() {
    let f = TorchCpuFixture::new();
    // Parent calls of 2 s (400 ticks each), beyond the gaps of a paused ticker even on a loaded
    // machine (39-51 ticks alone; up to 201 beside memory-heavy tests).
    let e = beside_a_slow_parent(&f, "ticker.py", LEAVES_ITS_GROUP, 2.0);
    // Passed, or caught using the CPU outside its calls (which the GPU target does not account
    // for): either way, paused between its calls.
    if e.result.status != Status::Passed {
        assert_eq!(e.result.status, Status::Incorrect, "{}", e.result.message);
        assert!(
            e.result.message.contains("outside its timed calls"),
            "{}",
            e.result.message
        );
    }
    let text = printed(&e);
    let last = text
        .lines()
        .rfind(|l| l.starts_with("ticker ("))
        .unwrap_or_else(|| panic!("the ticker printed nothing: {text}"));
    let words: Vec<&str> = last.split_whitespace().collect();
    let at = words.iter().position(|w| *w == "gap").unwrap();
    let gap: u64 = words[at + 1].parse().unwrap();
    let ticks: u64 = words[at + 3].parse().unwrap();
    // The thread ran (while its runner answered the judge, and in untimed phases), but never
    // through one of the parent's 2 s calls (400 ticks, fewer where sleeps overrun; left
    // running beside a parent of 0.5 s calls, it ticked 335 times in one gap).
    assert!(ticks >= 1, "{last}");
    assert!(gap < 300, "{last}");
}

/// A torch module that remembers its answers by where its input lies in the memory it was
/// given (its set) and eight of its values, and returns a copy of the remembered answer when
/// both match: what pays wherever a set's inputs stay the same from one round, or one batch, to
/// the next, as a slow kernel's would. It prints its first hit. `{HITS}` is replaced to make its honest twin, which
/// computes every key and never uses one.
const REMEMBERS_BY_SET_AND_SAMPLE: &str = r#"import torch

_memo = {}
_picks = {}
_count = {"calls": 0, "hits": 0}


def run(x, *, rows, cols):
    _count["calls"] += 1
    flat = x.reshape(-1)
    if flat.numel() not in _picks:
        _picks[flat.numel()] = torch.linspace(0, flat.numel() - 1, 8).long()
    key = (x.untyped_storage().data_ptr(), x.storage_offset(), tuple(flat[_picks[flat.numel()]].tolist()))
    hit = _memo.get(key)
    if hit is not None and {HITS}:
        _count["hits"] += 1
        if _count["hits"] == 1:
            print(f"memo hit at call {_count['calls']}", flush=True)
        return hit.clone()
    # A slow kernel (its softmax fifty times), so that a remembered answer would pay far
    # beyond the noise of a loaded machine.
    for _ in range(50):
        y = torch.softmax(x, dim=1)
    if len(_memo) > 4096:
        _memo.clear()
    _memo[key] = y.clone()
    return y
"#;

#[test]
#[cfg_attr(
    not(has_torch),
    ignore = "needs python3 with PyTorch (`.ci/run` installs it: pip install torch==2.11.0)"
)]
fn torch_harness_cpu_answers_remembered_by_set_and_a_sample_gain_nothing() {
    let f = TorchCpuFixture::new();
    let source = |hits: &str, file: &str| Source {
        file: file.into(),
        text: REMEMBERS_BY_SET_AND_SAMPLE.replace("{HITS}", hits),
    };
    // Each contender's copy of a set is written just before its batch, with the round's new
    // values: a timed call never finds its set as it was, so the module is timed as its honest
    // twin (the same key made on every call) is, or caught. Its warm-up calls, which repeat a
    // set and are not timed, do hit.
    let e = crate::no_faster_than(
        &f,
        &source("True", "memo.py"),
        &source("False", "twin.py"),
        "memo.py",
        Some("while timed"),
        crate::NOISE_FLOOR,
    );
    if e.result.status == Status::Passed {
        assert!(printed(&e).contains("memo hit at call"), "{}", printed(&e));
    }
}

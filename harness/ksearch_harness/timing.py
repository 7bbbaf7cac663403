"""Timing on MLX: one synchronisation (`mx.eval`) costs a fixed host overhead (about
0.15–0.2 ms on the CUDA backend, measured on an H200), so each sample is a batch of independent
calls on rotating input sets followed by one synchronisation, reported per call. Contenders are
interleaved round by round, alternating order; the candidate, its parent and the baseline are
timed the same way in the same process."""

import time

from .gauntlet import call, make_inputs
from .stats import batch_size, timing_stats

MAX_SETS = 8
MIN_SAMPLES_FLOOR = 3
# A batch lasts at least this long, so the synchronisation is a small part of it.
MIN_BATCH_MS = 10.0


def rotation_sets(bytes_per_set, rotate_bytes):
    target = rotate_bytes if rotate_bytes > 0 else 512 << 20
    return max(1, min(MAX_SETS, -(-target // max(bytes_per_set, 1))))


def bytes_per_call(task, axes):
    from .arrays import NP_DTYPES

    size = {"bf16": 2, **{k: v().itemsize for k, v in NP_DTYPES.items()}}
    total = 0
    for spec in task["inputs"] + task["outputs"]:
        n = 1
        for a in spec["shape"]:
            n *= int(axes[a])
        total += n * size[spec["dtype"]]
    return total


def time_workload(backend, task, workload, plan, seed, runs):
    """Per-call timing of each `run` in `runs` (candidate first) on one workload."""
    axes = {k: int(v) for k, v in workload["axes"].items()}
    n_out = len(task["outputs"])
    n_sets = rotation_sets(bytes_per_call(task, axes), plan.get("rotate_bytes", 0))
    sets = [make_inputs(backend, task, workload, seed + s) for s in range(n_sets)]
    state = {"next": 0}

    def batch(run, calls, what):
        t0 = time.perf_counter()
        outs = []
        for _ in range(calls):
            outs.extend(call(run, sets[state["next"]], axes, n_out, what))
            state["next"] = (state["next"] + 1) % n_sets
        backend.sync(outs)
        return (time.perf_counter() - t0) * 1e3

    sizes = []
    for i, run in enumerate(runs):
        what = "the candidate" if i == 0 else f"contender {i}"
        # The first call may compile the kernel: it is warm-up, never a sample.
        batch(run, 1, what)
        spent, calls, last = 0.0, 0, 0.0
        while calls < 2 or spent < plan["warmup_ms"]:
            last = batch(run, 1, what)
            spent += last
            calls += 1
        sizes.append(batch_size(last, max(plan["target_sample_ms"], MIN_BATCH_MS)))

    samples = [[] for _ in runs]
    measured = [0.0 for _ in runs]
    started = time.perf_counter()
    min_runs = int(plan["min_runs"])
    rnd = 0
    while True:
        order = range(len(runs)) if rnd % 2 == 0 else reversed(range(len(runs)))
        for i in order:
            ms = batch(runs[i], sizes[i], "the candidate" if i == 0 else f"contender {i}")
            samples[i].append(ms / sizes[i])
            measured[i] += ms
        rnd += 1
        enough = all(len(s) >= min_runs and m >= plan["min_time_ms"] for s, m in zip(samples, measured))
        out_of_time = (time.perf_counter() - started) * 1e3 >= plan["max_time_ms"] and all(
            len(s) >= min(MIN_SAMPLES_FLOOR, max(min_runs, 1)) for s in samples
        )
        if enough or out_of_time:
            break
    return [timing_stats(s, k) for s, k in zip(samples, sizes)]

"""Timing, measured by the judge's clock around each batch a runner runs: contenders interleaved
round by round, order alternating. On MLX one synchronisation costs a fixed host overhead (about
0.15-0.2 ms on the CUDA backend, measured on an H200), so a batch lasts at least MIN_BATCH_MS.

Every timed call sees inputs no earlier call saw: each round draws fresh inputs for every call
(from seeds the runner cannot predict). The baseline (the task's own code) runs every set of the
round; every untrusted contender's timed outputs are checked against the baseline's: sampled
elements of every call, and the whole output of one call per round chosen after the fact. A
direct runner's samples are read the moment it says "done", and CPU it uses outside its timed
calls is caught."""

import random

import numpy as np

from .contenders import BadOutput, GraphContender, Pool
from .gauntlet import compare, index_name
from .stats import batch_size, timing_stats

MIN_SAMPLES_FLOOR = 3
# A batch lasts at least this long, so the synchronisation is a small part of it.
MIN_BATCH_MS = 10.0
MAX_CALLS = 64
SAMPLED = 16
TIMED_TOLERANCE_FACTOR = 3.0
# CPU a runner may use outside its timed calls, besides a share of its timed time: tight with
# the scheduler's nanoseconds, loose with clock ticks.
OUTSIDE_CPU_PRECISE = (0.01, 0.05)
OUTSIDE_CPU_TICKS = (0.05, 0.05)
# And per batch: reading the order and answering cost a Python runner this much.
OUTSIDE_CPU_PER_BATCH_S = 300e-6


class TimedIncorrect(Exception):
    def __init__(self, index, message):
        super().__init__(message)
        self.index = index
        self.message = message


class TimedFailure(Exception):
    """A contender raised or died while timed."""

    def __init__(self, index, error):
        super().__init__(str(error))
        self.index = index
        self.error = error


def scaled(tol):
    return {k: v * TIMED_TOLERANCE_FACTOR for k, v in tol.items()}


def time_workload(task, workload, plan, tolerances, contenders, baseline):
    """Per-call timing of each contender (the candidate first) on one workload."""
    secret = random.SystemRandom()
    graph = isinstance(contenders[0], GraphContender)
    n = len(contenders)
    outs = task["outputs"]
    axes = {k: int(v) for k, v in workload["axes"].items()}
    sizes = [int(np.prod([axes[a] for a in s["shape"]], dtype=np.int64)) for s in outs]

    def guarded(i, f, *args):
        try:
            return f(*args)
        except (BadOutput, TimedIncorrect):
            raise
        except Exception as e:  # noqa: BLE001 - CandidateError, RunnerLost
            raise TimedFailure(i, e) from None

    pool = None
    try:
        # Warm-up, which also sizes the batches. The first call may compile the kernel.
        warm_sets = 2
        if graph:
            for i, c in enumerate(contenders):
                guarded(i, c.round, workload, [secret.getrandbits(62) for _ in range(warm_sets)])
        else:
            pool = Pool(task, workload, warm_sets)
            for s in range(warm_sets):
                pool.fill(task, workload, s, secret.getrandbits(62))
            for i, c in enumerate(contenders):
                guarded(i, c.map_pool, pool)

        def go(i, c, k):
            if graph:
                return guarded(i, c.go, workload, k)
            return guarded(i, c.call, pool, list(range(k)), True)

        ks = []
        for i, c in enumerate(contenders):
            go(i, c, 1)
            spent, calls, last = 0.0, 0, 0.0
            while calls < 2 or spent * 1e3 < plan["warmup_ms"]:
                last = go(i, c, 1)
                spent += last
                calls += 1
            ks.append(batch_size(last * 1e3, max(plan["target_sample_ms"], MIN_BATCH_MS), MAX_CALLS))
        round_len = max(ks)
        ks[baseline] = round_len
        if not graph:
            for i, c in enumerate(contenders):
                c.drop_pool(pool)
            pool.close()
            pool = Pool(task, workload, round_len)
            for i, c in enumerate(contenders):
                guarded(i, c.map_pool, pool)

        cpu0 = [c.cpu_time() for c in contenders]
        timed_s = [0.0] * n
        samples = [[] for _ in contenders]
        measured = [0.0] * n
        import time

        started = time.perf_counter()
        min_runs = int(plan["min_runs"])
        rnd = 0
        while True:
            seeds = [secret.getrandbits(62) for _ in range(round_len)]
            sets = list(range(round_len))
            if graph:
                for i, c in enumerate(contenders):
                    guarded(i, c.round, workload, seeds)
            else:
                for s, seed in zip(sets, seeds):
                    pool.fill(task, workload, s, seed)
            snaps = [None] * n
            order = range(n) if rnd % 2 == 0 else reversed(range(n))
            for i in order:
                c, k = contenders[i], ks[i]
                seconds = go(i, c, k)
                if not c.trusted:
                    positions = [(call, t, secret.randrange(sizes[t])) for call in range(k) for t in range(len(outs)) for _ in range(min(SAMPLED, sizes[t])) if sizes[t]]
                    values = guarded(i, c.sample, workload, positions) if graph else guarded(i, c.sample, pool, sets, positions)
                    snaps[i] = (positions, values)
                samples[i].append(seconds * 1e3 / k)
                measured[i] += seconds * 1e3
                timed_s[i] += seconds
            verify_round(task, workload, tolerances, contenders, baseline, ks, snaps, secret, graph, pool, sets, guarded)
            rnd += 1
            enough = all(len(s) >= min_runs and m >= plan["min_time_ms"] for s, m in zip(samples, measured))
            out_of_time = (time.perf_counter() - started) * 1e3 >= plan["max_time_ms"] and all(
                len(s) >= min(MIN_SAMPLES_FLOOR, max(min_runs, 1)) for s in samples
            )
            if enough or out_of_time:
                break
        for i, c in enumerate(contenders):
            if c.trusted or cpu0[i] is None:
                continue
            now = c.cpu_time()
            if now is None:
                continue
            outside = now[0] - cpu0[i][0] - timed_s[i]
            fixed, share = OUTSIDE_CPU_PRECISE if now[1] and cpu0[i][1] else OUTSIDE_CPU_TICKS
            if outside > fixed + share * timed_s[i] + OUTSIDE_CPU_PER_BATCH_S * len(samples[i]):
                raise TimedIncorrect(i, f"used {outside * 1e3:.0f} ms of CPU outside its timed calls on workload `{workload['name']}` ({timed_s[i] * 1e3:.0f} ms while timed): work done after it said \"done\" or in the background is not allowed")
        return [timing_stats(s, k) for s, k in zip(samples, ks)]
    finally:
        if pool is not None:
            for c in contenders:
                if not graph:
                    c.drop_pool(pool)
            pool.close()


def verify_round(task, workload, tolerances, contenders, baseline, ks, snaps, secret, graph, pool, sets, guarded):
    outs = task["outputs"]
    axes = workload["axes"]
    base = contenders[baseline]
    for i, c in enumerate(contenders):
        if c.trusted:
            continue
        positions, values = snaps[i]
        truth = guarded(baseline, base.sample, workload, positions) if graph else guarded(baseline, base.sample, pool, sets, positions)
        for (call, t, idx), v, r in zip(positions, values, truth):
            tol = scaled(tolerances[outs[t]["dtype"]])
            shape = tuple(int(axes[a]) for a in outs[t]["shape"])
            at = index_name(outs[t]["name"], shape, idx)
            if not np.isfinite(v):
                raise TimedIncorrect(i, f"while timed, call {call + 1} of a batch left {at} = {v} (was the work skipped?)")
            if abs(v - r) > tol["atol"] + tol["rtol"] * abs(r):
                raise TimedIncorrect(i, f"while timed, call {call + 1} of a batch gave {at} = {v:e} where the baseline gives {r:e} on the same inputs (timed outputs are checked; every timed call gets new inputs)")
        call = secret.randrange(ks[i])
        mine = guarded(i, c.fetch, workload, call) if graph else guarded(i, c.fetch, pool, sets, call)
        theirs = guarded(baseline, base.fetch, workload, call) if graph else guarded(baseline, base.fetch, pool, sets, call)
        if not graph:
            now = c.sample(pool, sets, [p for p in positions if p[0] == call])
            then = [v for p, v in zip(positions, values) if p[0] == call]
            for a, b in zip(now, then):
                if a != b and not (np.isnan(a) and np.isnan(b)):
                    raise TimedIncorrect(i, "an output of a timed call changed after the runner said \"done\": work after \"done\" is not timed and not allowed")
        for t, (m, r) in enumerate(zip(mine, theirs)):
            _, failure = compare(outs[t], m, r.astype(np.float64), scaled(tolerances[outs[t]["dtype"]]))
            if failure:
                raise TimedIncorrect(i, f"while timed, call {call + 1} of a batch: {failure} (compared with the baseline on the same inputs)")

"""Timing, measured by the judge's clock around each batch a runner runs: contenders interleaved
round by round, the order rotating (`round_order`). On MLX one synchronisation costs a fixed
host overhead (about 0.15-0.2 ms on the CUDA backend, measured on an H200), so a batch lasts at
least MIN_BATCH_MS where MAX_CALLS calls (GRAPH_MAX_CALLS for a graph runner) allow it.

Every timed call sees inputs no earlier call saw: each round draws fresh inputs for every call
(from seeds the runner cannot predict). Each contender runs its own number of calls a batch. The
baseline (the task's own code) runs a window of the round's sets at a secret offset inside the
candidate's calls, so a slow baseline costs one batch of its own, not one call per set; every
untrusted contender's timed outputs are checked, on calls chosen after the batch (every call of a
direct runner, eight of a graph runner's): sampled elements must be finite (outputs start as
NaN), those of calls on the baseline's window must match the baseline's, and
the whole output of one such call, chosen after the fact, is compared in the first round and in a
secret share of the others (a whole output crosses the process boundary, which costs more than
the batch on short kernels). A direct runner's samples are read the moment it says "done", and
CPU it uses outside its timed calls is caught; a "done" that comes late (link.LATE_REPLY_S) makes
the batch count up to it. A direct runner's batch size, taken from one batch before timing,
grows during timing to what its fastest batch asks for, within the round's sets."""

import random

import numpy as np

from .contenders import BadOutput, GraphContender, Pool
from .gauntlet import compare, index_name, is_tensor
from .stats import batch_size, timing_stats
from .torch_arrays import STORAGE

MIN_SAMPLES_FLOOR = 3
# A graph runner (MLX) holds a whole round of input sets on the device, with its outputs and the
# f32 draw of one input: a round stays under this many bytes, so that the baseline's and the
# candidate's processes fit on one GPU together (rounds of 64 sets of mlx/attention's n4096,
# every workload's kept, took tens of GB a runner and ran an H200 out of memory).
GRAPH_ROUND_BYTES = 8 << 30
# A graph runner's batch holds up to this many calls (as many as its round's bytes allow), so
# that a short kernel's batch reaches MIN_BATCH_MS and its rounds, which draw inputs and fetch
# samples, are few.
GRAPH_MAX_CALLS = 1024
# A batch lasts at least this long, so the synchronisation is a small part of it.
MIN_BATCH_MS = 10.0
MAX_CALLS = 64
# Batches that size a contender's batch, at most (`size_batches`).
SIZING_BATCHES = 3
# Timed calls of each untrusted contender checked against the reference at the task's own
# tolerance (each from a different round, chosen in secret: `Kept`), as far as their outputs
# fit in KEPT_BYTES of the judge's memory. A kernel that drifts on a share p of its timed calls
# passes all of them with chance (1 - p)^KEPT_CALLS: on NVIDIA GPUs, an MLX kernel that told
# timed calls apart by its inputs' addresses drifted on some of them only (MLX may run a batch's
# independent kernels out of order) and passed a single kept call.
KEPT_CALLS = 4
KEPT_BYTES = 1 << 30
# The share of rounds after the first whose whole output of one call is compared.
WHOLE_CHECK_SHARE = 0.125
# Elements sampled per output of each sampled call.
SAMPLED = 16
# A graph runner answers a sample with a gather per (call, output), about a millisecond each on
# MLX's CUDA backend, more than a whole batch of a short kernel: it is asked about this many of a
# batch's calls, chosen after the batch, half of them on the baseline's window where it can.
# (A direct runner's outputs are in shared memory: every call is sampled.)
GRAPH_SAMPLED_CALLS = 8
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


def graph_round_calls(task, axes, max_calls, round_bytes=GRAPH_ROUND_BYTES):
    """The most calls a graph runner's batch may hold: as many as `round_bytes` of input sets
    (with the f32 draw of the largest input) and outputs (with the poison before them) allow,
    at least one: a set larger than that is timed one call a batch, as the torch backend times
    a set that fits the GPU once."""
    def elements(spec):
        return int(np.prod([axes[a] for a in spec["shape"]], dtype=np.int64))

    def nbytes(spec):
        return elements(spec) * np.dtype(STORAGE[spec["dtype"]]).itemsize

    draw = max((elements(s) * 4 for s in task["inputs"]), default=0)
    per_set = sum(nbytes(s) for s in task["inputs"]) + draw + sum(2 * nbytes(s) for s in task["outputs"])
    return int(max(1, min(max_calls, round_bytes // max(per_set, 1))))


def kept_slots(task, axes, untrusted, graph):
    """How many timed calls of each untrusted contender are kept for the check against the
    reference: KEPT_CALLS, fewer where their outputs (and a direct runner's inputs) would take
    more than KEPT_BYTES of the judge's memory, at least one."""
    def nbytes(spec):
        return int(np.prod([axes[a] for a in spec["shape"]], dtype=np.int64)) * np.dtype(STORAGE[spec["dtype"]]).itemsize

    per_call = untrusted * sum(nbytes(s) for s in task["outputs"])
    if not graph:
        per_call += sum(nbytes(s) for s in task["inputs"])
    return int(max(1, min(KEPT_CALLS, KEPT_BYTES // max(per_call, 1))))


def graph_round_bytes(arrays):
    """GRAPH_ROUND_BYTES, or an eighth of the device's memory where that is less (a Mac's GPU
    shares its RAM: two runners' rounds must leave room for everything else)."""
    try:
        memory = int(arrays.mx.device_info().get("memory_size", 0))
    except Exception:  # noqa: BLE001 - an MLX without device_info
        memory = 0
    return min(GRAPH_ROUND_BYTES, memory // 8) if memory > 0 else GRAPH_ROUND_BYTES


def time_workload(task, workload, plan, tolerances, contenders, baseline, new_pool=Pool, max_calls=MAX_CALLS, round_bytes=GRAPH_ROUND_BYTES, truth=None):
    """Per-call timing of each contender (the candidate first) on one workload. `new_pool`
    makes the input sets of direct runners (the numpy target's, or the torch backend's);
    `max_calls` bounds a batch, and `round_bytes` a graph runner's round. `truth` (a
    `worker.Truth`) gives the reference's outputs on a timed call's inputs: up to KEPT_CALLS
    timed calls of each untrusted contender, kept in secret, are checked against them at the
    task's own tolerance once the workload is timed (`Kept`)."""
    # Seeds, sampled positions and checked rounds come from a generator seeded from the OS's
    # secret randomness, which no runner can read.
    secret = np.random.Generator(np.random.PCG64(random.SystemRandom().getrandbits(128)))

    def seed():
        return int(secret.integers(0, 1 << 62))
    graph = isinstance(contenders[0], GraphContender)
    n = len(contenders)
    outs = task["outputs"]
    axes = {k: int(v) for k, v in workload["axes"].items()}
    sizes = [int(np.prod([axes[a] for a in s["shape"]], dtype=np.int64)) for s in outs]
    if graph:
        max_calls = graph_round_calls(task, axes, max_calls, round_bytes)

    def guarded(i, f, *args, **kwargs):
        try:
            return f(*args, **kwargs)
        except (BadOutput, TimedIncorrect):
            raise
        except Exception as e:  # noqa: BLE001 - CandidateError, RunnerLost
            raise TimedFailure(i, e) from None

    pool = None
    try:
        # Warm-up, which also sizes the batches. The first call may compile the kernel. A
        # workload whose sets fit the memory only once (max_calls 1) warms up on that one.
        warm_sets = min(2, max_calls)
        if graph:
            for i, c in enumerate(contenders):
                guarded(i, c.round, workload, seed(), warm_sets)
        else:
            pool = new_pool(task, workload, warm_sets)
            for s in range(warm_sets):
                pool.fill(task, workload, s, seed())
            for i, c in enumerate(contenders):
                guarded(i, c.map_pool, pool)

        def go(i, c, k, at=0):
            if graph:
                return guarded(i, c.go, workload, k, at)
            return guarded(i, c.call, pool, list(range(at, at + k)), True)

        def sets_for(count):
            """Room for `count` calls on fresh inputs, for every contender."""
            nonlocal pool
            if graph:
                for i, c in enumerate(contenders):
                    guarded(i, c.round, workload, seed(), count)
                return
            release(contenders, pool)
            pool = None  # released once: `finally` has nothing left if new_pool fails
            pool = new_pool(task, workload, count)
            for s in range(count):
                pool.fill(task, workload, s, seed())
            for i, c in enumerate(contenders):
                guarded(i, c.map_pool, pool)

        target_ms = max(plan["target_sample_ms"], MIN_BATCH_MS)
        ks = []
        for i, c in enumerate(contenders):
            go(i, c, 1)
            spent, calls, last = 0.0, 0, 0.0
            while calls < 2 or spent * 1e3 < plan["warmup_ms"]:
                last = go(i, c, 1)
                spent += last
                calls += 1
            ks.append(batch_size(last * 1e3, target_ms, max_calls))
        if graph:
            ks = size_batches(ks, lambda i, k: go(i, contenders[i], k), sets_for, target_ms, max_calls)
        else:
            # A single call's time holds a whole synchronisation: size again from one batch
            # (outputs in shared memory the judge made: no memory is new to the first batch).
            sets_for(max(ks))
            for i, c in enumerate(contenders):
                if ks[i] > 1:
                    ks[i] = batch_size(go(i, c, ks[i]) * 1e3 / ks[i], target_ms, max_calls)
        round_len = max(ks)
        if not graph:
            sets_for(round_len)

        cpu0 = [c.cpu_time() for c in contenders]
        timed_s = [0.0] * n
        samples = [[] for _ in contenders]
        measured = [0.0] * n
        import time

        started = time.perf_counter()
        min_runs = int(plan["min_runs"])
        rnd = 0
        kept = []
        untrusted = [i for i, c in enumerate(contenders) if not c.trusted]
        slots = kept_slots(task, axes, len(untrusted), graph)
        while True:
            # The baseline runs its own number of calls on a window of the round's sets at a
            # secret offset inside the candidate's calls (or over all of them, when the baseline
            # runs more); the others run from set 0. No runner can tell which of its calls the
            # baseline also ran: those are compared with it, and every sampled value must be
            # finite (outputs start as NaN).
            window = (int(secret.integers(0, max(ks[0] - ks[baseline], 0) + 1)), ks[baseline])
            starts = [window[0] if i == baseline else 0 for i in range(n)]
            if graph:
                round_seed = seed()
                for i, c in enumerate(contenders):
                    if i == baseline and c.trusted:
                        # A trusted baseline's executor cuts only the window's sets (as its
                        # sets 0, 1, ...), not every set of a short kernel's round.
                        guarded(i, c.round, workload, round_seed, round_len, window)
                        starts[i] = 0
                    else:
                        guarded(i, c.round, workload, round_seed, round_len)
            else:
                for s in range(round_len):
                    pool.fill(task, workload, s, seed())
            sets = [list(range(a, a + k)) for a, k in zip(starts, ks)]
            snaps = [None] * n
            for i in round_order(rnd, n):
                c, k = contenders[i], ks[i]
                seconds = go(i, c, k, starts[i])
                if not c.trusted:
                    positions = sample_positions(secret, sampled_calls(secret, k, window, graph), sizes)
                    values = guarded(i, c.sample, workload, positions) if graph else guarded(i, c.sample, pool, sets[i], positions)
                    snaps[i] = (positions, values)
                samples[i].append(seconds * 1e3 / k)
                measured[i] += seconds * 1e3
                timed_s[i] += seconds
            # Shared memory is cheap to read: a direct runner's whole output (and its guards) is
            # checked every round.
            whole = not graph or rnd == 0 or secret.random() < WHOLE_CHECK_SHARE
            verify_round(task, workload, tolerances, contenders, baseline, ks, snaps, secret, whole, graph, pool, sets, window, guarded)
            # Reservoir sampling over the rounds: `slots` rounds are kept, each round with the
            # same chance in the end, and one call of each, chosen in secret.
            slot = rnd if rnd < slots else int(secret.integers(0, rnd + 1))
            if truth is not None and untrusted and slot < slots:
                call = int(secret.integers(0, min(ks[i] for i in untrusted)))
                if graph:
                    where = (round_seed, round_len, call)
                    got = {i: guarded(i, contenders[i].fetch, workload, call) for i in untrusted}
                else:
                    where = pool.input_arrays(call)
                    got = {i: guarded(i, contenders[i].fetch, pool, sets[i], call) for i in untrusted}
                entry = Kept(rnd, call, where, got)
                if slot < len(kept):
                    kept[slot] = entry
                else:
                    kept.append(entry)
            if not graph:
                # A batch size comes from one batch before timing, and a stall in it (a loaded
                # machine) sizes the batch short; every call of a short batch then carries a
                # larger share of the judge's round trip. A contender's batches grow, within the
                # round's sets, to what its fastest batch so far asks for.
                for i in range(n):
                    ks[i] = max(ks[i], min(batch_size(min(samples[i]), target_ms, max_calls), round_len))
            rnd += 1
            enough = all(len(s) >= min_runs and m >= plan["min_time_ms"] for s, m in zip(samples, measured))
            out_of_time = (time.perf_counter() - started) * 1e3 >= plan["max_time_ms"] and all(
                len(s) >= min(MIN_SAMPLES_FLOOR, max(min_runs, 1)) for s in samples
            )
            if enough or out_of_time:
                break
        # The kept calls are checked once the pool and the contenders' copies are let go: the
        # reference's run needs room of its own on a GPU that one set of each nearly filled.
        if pool is not None:
            release(contenders, pool)
            pool = None
        for entry in sorted(kept, key=lambda e: e.rnd):
            entry.check(task, tolerances, truth, graph)
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
            release(contenders, pool)


def release(contenders, pool):
    """Every contender's mapping of a direct runners' `pool`, then the pool."""
    for c in contenders:
        c.drop_pool(pool)
    pool.close()


def round_order(rnd, n):
    """The order of `n` contenders in round `rnd`: rotated a place each round, so that every
    contender runs in every place equally often (first after the round's inputs are drawn among
    them). The order used to alternate, forward and back, which with three contenders put the
    baseline second in every round. (On an H100 the seed of KernelBench's RMSNorm, the
    baseline's own code, measured 0.97x the baseline then: its fast samples equal to the
    baseline's, its slow ones 6% slower. Whether the place was the cause is not yet measured.)"""
    return [(rnd + j) % n for j in range(n)]


def size_batches(ks, batch, new_sets, target_ms, max_calls):
    """Calls a batch for each graph runner, from `ks` (sized from single calls, each holding a
    whole synchronisation): batches of the current sizes on new sets (`new_sets(count)`, then
    `batch(i, k)` gives contender i's seconds for k calls), at least two and at most
    SIZING_BATCHES. The first batch that uses more sets than before may also pay for its
    outputs' memory (on an H200, an MLX state update's batches came out at 2-6 ms of the 10 ms
    asked after sizing from it alone, and its timing took two to four times the rounds); a size
    only grows, and is measured again while it grows by more than a quarter."""
    ks = list(ks)
    for attempt in range(SIZING_BATCHES):
        new_sets(max(ks))
        grew = False
        for i, k in enumerate(ks):
            if k <= 1:
                continue
            estimate = batch_size(batch(i, k) * 1e3 / k, target_ms, max_calls)
            grew = grew or estimate > 1.25 * k
            ks[i] = max(k, estimate)
        if attempt >= 1 and not grew:
            break
    return ks


class Kept:
    """One timed call (its round, its place in the batch, its inputs, and each untrusted
    contender's outputs of it), to be checked against the reference at the task's own
    tolerance: a kernel that tells timed calls from checked ones could otherwise drift within
    the looser tolerance of the comparisons with the baseline (computing less precisely, and
    faster) wherever it is timed. A graph round's inputs are kept as its seed, its size and the
    call, and drawn again for the check."""

    def __init__(self, rnd, call, inputs, outputs):
        self.rnd, self.call, self.inputs, self.outputs = rnd, call, inputs, outputs

    def check(self, task, tolerances, truth, graph):
        inputs = truth.inputs_of_round(*self.inputs) if graph else self.inputs
        expected = truth.outputs(inputs)
        del inputs
        for i, got in self.outputs.items():
            for spec, g, e in zip(task["outputs"], got, expected):
                _, failure = compare(spec, g, e, tolerances[spec["dtype"]])
                if failure:
                    raise TimedIncorrect(i, f"while timed, call {self.call + 1} of a batch in round {self.rnd + 1}: {failure} (compared with the reference on the same inputs, at the task's tolerance)")


def sampled_calls(rng, k, window, graph):
    """The calls of a `k`-call batch whose outputs are sampled: all of them for a direct runner;
    for a graph runner GRAPH_SAMPLED_CALLS, half on the baseline's window where it has them."""
    if not graph or k <= GRAPH_SAMPLED_CALLS:
        return list(range(k))
    at, width = window
    shared = [c for c in range(k) if at <= c < at + width]
    others = [c for c in range(k) if not at <= c < at + width]
    mine = [int(c) for c in rng.permutation(shared)[:GRAPH_SAMPLED_CALLS // 2]] if shared else []
    mine += [int(c) for c in rng.permutation(others)[:GRAPH_SAMPLED_CALLS - len(mine)]]
    return sorted(mine)


def sample_positions(rng, calls, sizes):
    """SAMPLED positions in every output of each of `calls`: (call, output, flat index)."""
    out = []
    for t, size in enumerate(sizes):
        if size:
            m = min(SAMPLED, size)
            idx = rng.integers(0, size, (len(calls), m))
            out.extend((call, t, int(i)) for call, row in zip(calls, idx) for i in row)
    return out


def verify_round(task, workload, tolerances, contenders, baseline, ks, snaps, secret, whole, graph, pool, sets, window, guarded):
    """Check a round's sampled values: every one finite; those of calls on the baseline's window
    equal to the baseline's within the timed tolerance; and, when `whole`, one such call entirely."""
    outs = task["outputs"]
    axes = workload["axes"]
    base = contenders[baseline]
    at, width = window

    def where(t, idx):
        return index_name(outs[t]["name"], tuple(int(axes[a]) for a in outs[t]["shape"]), idx)

    def base_sample(positions):
        if graph:
            return guarded(baseline, base.sample, workload, positions)
        return guarded(baseline, base.sample, pool, sets[baseline], positions)

    for i, c in enumerate(contenders):
        if c.trusted:
            continue
        positions, values = snaps[i]
        v = np.asarray(values, dtype=np.float64)
        bad = ~np.isfinite(v)
        if bad.any():
            call, t, idx = positions[int(np.flatnonzero(bad)[0])]
            raise TimedIncorrect(i, f"while timed, call {call + 1} of a batch left {where(t, idx)} = {v[bad][0]} (was the work skipped?)")
        # Calls `at` .. `at + width - 1` ran on the sets the baseline ran, as its calls 0, 1, ...
        shared = [j for j, p in enumerate(positions) if at <= p[0] < at + width]
        if shared:
            mine = v[shared]
            theirs = np.asarray(base_sample([(positions[j][0] - at, positions[j][1], positions[j][2]) for j in shared]), dtype=np.float64)
            t_of = np.fromiter((positions[j][1] for j in shared), dtype=np.int64, count=len(shared))
            atol = np.array([scaled(tolerances[o["dtype"]])["atol"] for o in outs])[t_of]
            rtol = np.array([scaled(tolerances[o["dtype"]])["rtol"] for o in outs])[t_of]
            with np.errstate(invalid="ignore"):
                off = np.abs(mine - theirs) > atol + rtol * np.abs(theirs)
            if off.any():
                k = int(np.flatnonzero(off)[0])
                call, t, idx = positions[shared[k]]
                raise TimedIncorrect(i, f"while timed, call {call + 1} of a batch gave {where(t, idx)} = {mine[k]:e} where the baseline gives {theirs[k]:e} on the same inputs (timed outputs are checked; every timed call gets new inputs)")
        if not graph:
            call = int(secret.integers(0, ks[i]))
            now = c.sample(pool, sets[i], [p for p in positions if p[0] == call])
            then = [v for p, v in zip(positions, values) if p[0] == call]
            for a, b in zip(now, then):
                if a != b and not (np.isnan(a) and np.isnan(b)):
                    raise TimedIncorrect(i, "an output of a timed call changed after the runner said \"done\": work after \"done\" is not timed and not allowed")
        calls = range(at, min(at + width, ks[i]))
        if not whole or not calls:
            continue
        call = int(secret.choice(calls))
        # A torch runner's outputs on the GPU are compared where they are (`views`).
        mine = guarded(i, c.fetch, workload, call) if graph else guarded(i, c.fetch, pool, sets[i], call, views=True)
        theirs = guarded(baseline, base.fetch, workload, call - at) if graph else guarded(baseline, base.fetch, pool, sets[baseline], call - at, views=True)
        for t, (m, r) in enumerate(zip(mine, theirs)):
            tol = scaled(tolerances[outs[t]["dtype"]])
            if is_tensor(m):
                _, failure = compare(outs[t], m, r, tol)
            elif close_enough(outs[t], m, r, tol):
                continue
            else:
                _, failure = compare(outs[t], m, r.astype(np.float64), tol)
            if failure:
                raise TimedIncorrect(i, f"while timed, call {call + 1} of a batch: {failure} (compared with the baseline on the same inputs)")


def close_enough(spec, got, want, tol):
    """A quick check of a whole timed output against the baseline's: every element within
    `tol` and the norm of the difference within `norm_rtol`, in float32 for 16- and 32-bit
    floats (float64 otherwise). False sends the pair to `gauntlet.compare`, which decides and
    says why; comparing every output in float64 took a third of an evaluation of large
    outputs."""
    real = np.float32 if spec["dtype"] in ("f16", "bf16", "f32") else np.float64
    a = np.asarray(got).astype(real, copy=False).reshape(-1)
    b = np.asarray(want).astype(real, copy=False).reshape(-1)
    d = a - b
    np.abs(d, out=d)
    bound = np.abs(b)
    bound *= real(tol["rtol"])
    bound += real(tol["atol"])
    with np.errstate(invalid="ignore"):
        if not (d <= bound).all():  # a NaN anywhere fails here too
            return False
    diff_sq = float(np.dot(d, d))
    ref_sq = float(np.dot(b, b))
    return diff_sq <= (tol["norm_rtol"] ** 2) * ref_sq

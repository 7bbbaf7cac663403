"""Timing, measured by the judge's clock around each batch a runner runs: contenders interleaved
round by round, the order rotating (`round_order`). On MLX one synchronisation costs a fixed
host overhead (about 0.15-0.2 ms on the CUDA backend, measured on an H200), so a batch lasts at
least MIN_BATCH_MS where MAX_CALLS calls (GRAPH_MAX_CALLS for a graph runner) allow it.

Every timed call sees inputs no earlier call saw: each round draws fresh inputs for every call
(from seeds the runner cannot predict). Each contender runs its own number of calls a batch. The
baseline (the task's own code) runs a window of the round's sets at a secret offset, wrapping
around the round's end, so that every set is in it with the same chance (`timed_checks`); a
slow baseline costs one batch of its own, not one call per set. Every untrusted contender's
timed outputs are checked, on calls chosen after the batch (every call of a direct runner, eight
of a graph runner's): sampled elements must be finite (outputs start as NaN), those of calls on
the baseline's window must match the baseline's, and the whole output of one such call, chosen
after the fact, is compared in the first round and in a secret share of the others (a whole
output crosses the process boundary, which costs more than the batch on short kernels). Four
calls of each untrusted contender, drawn uniformly over all its timed calls, are checked against
the reference at the task's own tolerance. Warm-up and sizing calls are checked too: sampled
elements finite, and equal to the baseline's where it ran the same set (it warms up first).

A batch's size is what the contender's fastest timed batch so far asks for (from the second
round on; the sizing batches before timing set the first round's only), and the round's sets
grow with it: neither the candidate's warm-up nor its sizing calls decide how many calls it is
timed over. A direct runner's samples are read the moment it says "done"; the CPU a runner on
the CPU uses while it owes no answer is charged to its next batch (`link.Runner.timed`); an
untrusted runner may use next to no CPU while another contender is timed (`Watch`), and may have
no process of its own alive when any batch starts; a "done" that comes late (link.LATE_REPLY_S)
makes the batch count up to it."""

import random
import time

import numpy as np

from .contenders import BadOutput, GraphContender, Pool
from .stats import batch_size, settled, timing_stats
from .timed_checks import (  # noqa: F401 - the names the judge's tests and tools know here
    GRAPH_SAMPLED_CALLS,
    KEPT_BYTES,
    KEPT_CALLS,
    SAMPLED,
    TIMED_TOLERANCE_FACTOR,
    WHOLE_CHECK_SHARE,
    Kept,
    Reservoir,
    TimedIncorrect,
    Window,
    check_kept,
    check_values,
    close_enough,
    sample_positions,
    sampled_calls,
    scaled,
    verify_round,
)
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
# CPU a runner may use outside its timed calls, besides a share of its timed time: tight with
# the scheduler's nanoseconds, loose with clock ticks. What a runner on the CPU uses while it
# owes no answer is added to its next batch anyway, so work within this gains nothing; the limit
# refuses background work outright. (An honest torch runner on PyTorch's CPU build, timed 27 ms
# in all on a two-core machine under load, used 13 ms outside its calls: past 10 ms and 0.3 ms a
# batch.)
OUTSIDE_CPU_PRECISE = (0.02, 0.05)
OUTSIDE_CPU_TICKS = (0.05, 0.05)
# And per batch: reading the order and answering cost a Python runner about this much.
OUTSIDE_CPU_PER_BATCH_S = 1e-3
# CPU an untrusted runner may use while another contender's batch runs (`Watch`), as the C
# judge allows (c_worker/verify.rs, `idle_cpu`): all runners on the CPU share one, and a thread
# of one that works then slows the contender being timed. One reading over it is forgiven per
# runner and workload (a loaded machine once charged an idle C runner 382 us).
IDLE_CPU_S = 100e-6
IDLE_CPU_SHARE = 0.01


class TimedFailure(Exception):
    """A contender raised or died while timed."""

    def __init__(self, index, error):
        super().__init__(str(error))
        self.index = index
        self.error = error


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
    reference: KEPT_CALLS, fewer where their outputs (and a direct runner's inputs, kept with
    each, since each contender's calls are drawn on their own) would take more than KEPT_BYTES of
    the judge's memory, at least one."""
    def nbytes(spec):
        return int(np.prod([axes[a] for a in spec["shape"]], dtype=np.int64)) * np.dtype(STORAGE[spec["dtype"]]).itemsize

    per_call = sum(nbytes(s) for s in task["outputs"])
    if not graph:
        per_call += sum(nbytes(s) for s in task["inputs"])
    return int(max(1, min(KEPT_CALLS, KEPT_BYTES // max(untrusted * per_call, 1))))


def graph_round_bytes(arrays):
    """GRAPH_ROUND_BYTES, or an eighth of the device's memory where that is less (a Mac's GPU
    shares its RAM: two runners' rounds must leave room for everything else)."""
    try:
        memory = int(arrays.mx.device_info().get("memory_size", 0))
    except Exception:  # noqa: BLE001 - an MLX without device_info
        memory = 0
    return min(GRAPH_ROUND_BYTES, memory // 8) if memory > 0 else GRAPH_ROUND_BYTES


def who(contenders, i):
    """How a message names contender `i`."""
    return "the candidate" if i == 0 else f"the {contenders[i].role} `{contenders[i].label}`"


class Watch:
    """What the judge holds every untrusted runner to while any contender's batch runs: it uses
    next to no CPU while another contender is timed (IDLE_CPU_S and IDLE_CPU_SHARE of the batch,
    by its process CPU clock; one reading over it forgiven per runner and workload), and it has
    no process of its own alive when a batch starts (on the GPU such a process could keep
    queuing kernels while others are timed, out of reach of the judge's pause and of its quiet
    test: `link.Runner.descendants`)."""

    def __init__(self, contenders, workload):
        self.contenders, self.workload = contenders, workload
        self.untrusted = [i for i, c in enumerate(contenders) if not c.trusted]
        self.strikes = set()

    def strays(self):
        for j in self.untrusted:
            found = self.contenders[j].strays()
            if found:
                pids = ", ".join(f"{name} (pid {pid})" for pid, name in found[:4])
                raise TimedIncorrect(j, f"started a process that was still running when a batch was to be timed on workload `{self.workload['name']}`: {pids}; a process of its own could work while other contenders are timed, so none may outlive the call that started it")

    def batch(self, i, run):
        """Contender `i`'s batch (`run()`, its seconds), watched."""
        self.strays()
        others = [(j, self.contenders[j].cpu_seconds()) for j in self.untrusted if j != i]
        seconds = run()
        for j, before in others:
            now = self.contenders[j].cpu_seconds() if before is not None else None
            if now is None:
                continue
            used = now - before
            if used <= IDLE_CPU_S + IDLE_CPU_SHARE * seconds:
                continue
            if j not in self.strikes:
                self.strikes.add(j)
                continue
            raise TimedIncorrect(j, f"used {used * 1e6:.0f} µs of CPU outside its timed calls while {who(self.contenders, i)} was timed ({seconds * 1e6:.0f} µs) on workload `{self.workload['name']}`: work while another contender is timed is not allowed (it competes with it for the machine)")
        return seconds


def time_workload(task, workload, plan, tolerances, contenders, baseline, new_pool=Pool, max_calls=MAX_CALLS, round_bytes=GRAPH_ROUND_BYTES, truth=None):
    """Per-call timing of each contender (the candidate first) on one workload. `new_pool`
    makes the input sets of direct runners (the numpy target's, or the torch backend's);
    `max_calls` bounds a batch, and `round_bytes` a graph runner's round. `truth` (a
    `worker.Truth`) gives the reference's outputs on a timed call's inputs: up to KEPT_CALLS
    timed calls of each untrusted contender, drawn in secret over all its timed calls, are
    checked against them at the task's own tolerance once the workload is timed (`Kept`)."""
    # Seeds, sampled positions and checked rounds come from a generator seeded from the OS's
    # secret randomness, which no runner can read.
    secret = np.random.Generator(np.random.PCG64(random.SystemRandom().getrandbits(128)))

    def seed():
        return int(secret.integers(0, 1 << 62))
    graph = isinstance(contenders[0], GraphContender)
    n = len(contenders)
    axes = {k: int(v) for k, v in workload["axes"].items()}
    sizes = [int(np.prod([axes[a] for a in s["shape"]], dtype=np.int64)) for s in task["outputs"]]
    if graph:
        max_calls = graph_round_calls(task, axes, max_calls, round_bytes)
    base = contenders[baseline]
    untrusted = [i for i, c in enumerate(contenders) if not c.trusted]
    watch = Watch(contenders, workload)
    # The baseline first, then the others: every untrusted warm-up and sizing call is compared
    # with the baseline's on the same set where the baseline ran it.
    order = [baseline] + [i for i in range(n) if i != baseline]

    def guarded(i, f, *args, **kwargs):
        try:
            return f(*args, **kwargs)
        except (BadOutput, TimedIncorrect):
            raise
        except Exception as e:  # noqa: BLE001 - CandidateError, RunnerLost
            raise TimedFailure(i, e) from None

    pool = None
    # Sets the pool holds; how many calls on sets 0, 1, ... the baseline's last batch ran on
    # the current sets (what an untrusted warm-up or sizing call on them is compared with).
    capacity = 0
    base_ran = 0
    try:
        def new_sets(count):
            """Fresh input sets, the same for every contender: a pool of `count` sets (direct
            runners), or a round of `count` sets every graph runner draws from one seed."""
            nonlocal pool, capacity, base_ran
            base_ran = 0
            if graph:
                s = seed()
                for i, c in enumerate(contenders):
                    guarded(i, c.round, workload, s, count)
                return
            if pool is not None:
                old, pool = pool, None  # released once: `finally` has nothing left if new_pool fails
                release(contenders, old)
            pool = new_pool(task, workload, count)
            capacity = count
            for s in range(count):
                pool.fill(task, workload, s, seed())
            for i, c in enumerate(contenders):
                guarded(i, c.map_pool, pool)

        def go(i, k, at_or_sets):
            """Contender i's timed batch of `k` calls, watched (`Watch`): on a direct runner's
            sets `at_or_sets`, or from a graph runner's set `at_or_sets` on."""
            c = contenders[i]
            if graph:
                return watch.batch(i, lambda: guarded(i, c.go, workload, k, at_or_sets))
            return watch.batch(i, lambda: guarded(i, c.call, pool, at_or_sets, True))

        def early_batch(i, k, when):
            """Contender i's `k` calls on sets 0 .. k - 1 before the rounds (warm-up, sizing), its
            seconds; an untrusted contender's sampled outputs are checked at once."""
            nonlocal base_ran
            seconds = go(i, k, 0 if graph else list(range(k)))
            if i == baseline:
                base_ran = k
                return seconds
            if contenders[i].trusted:
                return seconds
            ran = Window(0, base_ran, max(k, base_ran, 1), circular=False)
            positions = sample_positions(secret, sampled_calls(secret, k, ran, graph), sizes)
            if graph:
                values = guarded(i, contenders[i].sample, workload, positions)
            else:
                values = guarded(i, contenders[i].sample, pool, list(range(k)), positions)

            def theirs_of(positions):
                shared = [j for j, p in enumerate(positions) if ran.index(p[0]) is not None]
                if not shared:
                    return [], []
                picked = [positions[j] for j in shared]
                if graph:
                    return shared, guarded(baseline, base.sample, workload, picked)
                return shared, guarded(baseline, base.sample, pool, list(range(base_ran)), picked)
            check_values(task, workload, tolerances, i, positions, values, theirs_of, when)
            return seconds

        target_ms = max(plan["target_sample_ms"], MIN_BATCH_MS)
        watch.strays()
        # Warm-up, on one set (the same for every contender): the first call may compile the
        # kernel. A workload whose sets fit the memory only once (max_calls 1) warms up on it.
        new_sets(min(2, max_calls))
        ks = [1] * n
        for i in order:
            early_batch(i, 1, "while timed in warm-up")
            spent, calls, last = 0.0, 0, 0.0
            while calls < 2 or spent * 1e3 < plan["warmup_ms"]:
                last = early_batch(i, 1, "while timed in warm-up")
                spent += last
                calls += 1
            ks[i] = batch_size(last * 1e3, target_ms, max_calls)
        # Sized again from batches: a single call's time holds a whole synchronisation. These
        # sizes set the first round's batches only.
        ks = size_batches(ks, lambda i, k: early_batch(i, k, "while timed in a sizing batch"), new_sets, target_ms, max_calls,
                          order, SIZING_BATCHES if graph else 1)

        samples = [[] for _ in contenders]
        # Each contender's batch size in its last batch (what the report says it ran).
        used = list(ks)
        measured = [0.0] * n
        timed_s = [0.0] * n
        cpu0 = [cpu_now(c) for c in contenders]
        started = time.perf_counter()
        min_runs = int(plan["min_runs"])
        rnd = 0
        slots = kept_slots(task, axes, len(untrusted), graph)
        reservoirs = {i: Reservoir(slots) for i in untrusted}
        kept = {i: [] for i in untrusted}
        while True:
            round_len = max(ks)
            if not graph and round_len > capacity:
                # Room to grow: at least twice the sets, so that a batch growing a call or two a
                # round does not make (and map into every runner) a pool every round.
                new_sets(min(max(round_len, 2 * capacity), max_calls))
            # The baseline runs its own number of calls on a window of the round's sets at a
            # secret offset, wrapping around (a graph runner other than a trusted one runs its
            # sets in a row: its window does not wrap); the others run from set 0. No runner can
            # tell which of its calls the baseline also ran: those are compared with it, and
            # every sampled value must be finite (outputs start as NaN).
            window = Window.draw(secret, round_len, ks[baseline], circular=not graph or base.trusted)
            starts = [0] * n
            if graph:
                round_seed = seed()
                for i, c in enumerate(contenders):
                    if i == baseline and c.trusted:
                        # A trusted baseline's executor cuts only the window's sets (as its
                        # sets 0, 1, ...), not every set of a short kernel's round.
                        guarded(i, c.round, workload, round_seed, round_len, window.keep())
                    else:
                        guarded(i, c.round, workload, round_seed, round_len)
                        if i == baseline:
                            starts[i] = window.at
            else:
                for s in range(round_len):
                    pool.fill(task, workload, s, seed())
            sets = [window.sets() if i == baseline else list(range(ks[i])) for i in range(n)]
            snaps = [None] * n
            for i in round_order(rnd, n):
                c, k = contenders[i], ks[i]
                seconds = go(i, k, starts[i] if graph else sets[i])
                if not c.trusted:
                    positions = sample_positions(secret, sampled_calls(secret, k, window, graph), sizes)
                    values = guarded(i, c.sample, workload, positions) if graph else guarded(i, c.sample, pool, sets[i], positions)
                    snaps[i] = (positions, values)
                    if truth is not None:
                        keep_calls(i, c, rnd, reservoirs[i].offer(secret, k), kept, graph, workload, pool, sets,
                                   (round_seed, round_len) if graph else None, guarded)
                used[i] = k
                samples[i].append(seconds * 1e3 / k)
                measured[i] += seconds * 1e3
                timed_s[i] += seconds
            whole = not graph or rnd == 0 or secret.random() < WHOLE_CHECK_SHARE
            verify_round(task, workload, tolerances, contenders, baseline, ks, snaps, secret, whole, graph, pool, sets, window, guarded)
            # From the second round on, a batch is as long as the contender's fastest timed batch
            # asks for: neither its warm-up nor its sizing calls decide it (a candidate that was
            # slow there would be timed over batches of its choosing; a stall in them, on a
            # loaded machine, left every call of a short batch carrying more of the round trip).
            for i in range(n):
                ks[i] = batch_size(min(samples[i]), target_ms, max_calls)
            rnd += 1
            # Enough: `min_runs` rounds, and `min_time_ms` measured by each contender or the
            # candidate's paired intervals already within a percent (`stats.settled`).
            enough = all(len(s) >= min_runs for s in samples) and (
                all(m >= plan["min_time_ms"] for m in measured) or settled(samples, rnd, min_runs))
            out_of_time = (time.perf_counter() - started) * 1e3 >= plan["max_time_ms"] and all(
                len(s) >= min(MIN_SAMPLES_FLOOR, max(min_runs, 1)) for s in samples
            )
            if enough or out_of_time:
                break
        # The kept calls are checked once the pool and the contenders' copies are let go: the
        # reference's run needs room of its own on a GPU that one set of each nearly filled.
        if pool is not None:
            old, pool = pool, None
            release(contenders, old)
        if truth is not None:
            check_kept(task, tolerances, truth, graph, [e for entries in kept.values() for e in entries if e is not None])
        for i, c in enumerate(contenders):
            if c.trusted or cpu0[i] is None:
                continue
            now = cpu_now(c)
            if now is None:
                continue
            outside = now[0] - cpu0[i][0] - timed_s[i]
            fixed, share = OUTSIDE_CPU_PRECISE if now[1] and cpu0[i][1] else OUTSIDE_CPU_TICKS
            if outside > fixed + share * timed_s[i] + OUTSIDE_CPU_PER_BATCH_S * len(samples[i]):
                raise TimedIncorrect(i, f"used {outside * 1e3:.0f} ms of CPU outside its timed calls on workload `{workload['name']}` ({timed_s[i] * 1e3:.0f} ms while timed): work done after it said \"done\" or in the background is not allowed")
        return [timing_stats(s, k) for s, k in zip(samples, used)]
    finally:
        if pool is not None:
            release(contenders, pool)


def cpu_now(c):
    """`(seconds, precise)` of CPU contender `c`'s runner has used, or None: its process CPU
    clock where the kernel offers it (every thread, live or gone), else `cpu_time`."""
    seconds = c.cpu_seconds()
    if seconds is not None:
        return seconds, True
    return c.cpu_time()


def keep_calls(i, c, rnd, won, kept, graph, workload, pool, sets, graph_round, guarded):
    """Contender i's calls of this batch that its reservoir keeps (`won`: `(slot, call)`): their
    outputs copied now, with their inputs (a direct runner's: a copy of the pool's set, shared
    with another contender's kept call on it; a graph round's: its seed, its size and the call)."""
    slots = kept[i]
    for slot, call in won:
        if graph:
            key = (*graph_round, call)
            entry = Kept(i, rnd, call, key, key, guarded(i, c.fetch, workload, call))
        else:
            key = (rnd, sets[i][call])
            inputs = next((e.inputs for es in kept.values() for e in es if e is not None and e.key == key), None)
            if inputs is None:
                inputs = pool.input_arrays(sets[i][call])
            entry = Kept(i, rnd, call, key, inputs, guarded(i, c.fetch, pool, sets[i], call))
        while len(slots) <= slot:
            slots.append(None)
        slots[slot] = entry


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


def size_batches(ks, batch, new_sets, target_ms, max_calls, order=None, attempts=SIZING_BATCHES):
    """Calls a batch for each contender before timing, from `ks` (sized from single calls,
    each holding a whole synchronisation): batches of the current sizes on new sets
    (`new_sets(count)`, then `batch(i, k)` gives contender i's seconds for k calls, in `order`),
    at least two and at most `attempts` of them where more than one is asked for. The first batch
    that uses more sets than before may also pay for its outputs' memory (on an H200, an MLX
    state update's batches came out at 2-6 ms of the 10 ms asked after sizing from it alone, and
    its timing took two to four times the rounds); a size only grows, and is measured again while
    it grows by more than a quarter. These sizes hold for the first round of timing only."""
    ks = list(ks)
    order = list(range(len(ks))) if order is None else list(order)
    for attempt in range(attempts):
        new_sets(max(ks))
        grew = False
        for i in order:
            k = ks[i]
            if k <= 1:
                continue
            estimate = batch_size(batch(i, k) * 1e3 / k, target_ms, max_calls)
            grew = grew or estimate > 1.25 * k
            ks[i] = max(k, estimate)
        if attempt >= 1 and not grew:
            break
    return ks

"""What the judge checks of timed calls (`timing.time_workload`): sampled elements of every
untrusted call, compared with the baseline where the baseline ran the same set (the window), the
whole output of one such call now and then, and a reservoir of kept calls per untrusted
contender, checked against the reference at the task's own tolerance once the workload is timed.

Every timed call of an untrusted contender is as likely as any other to be compared: the
baseline's window lies on the round's sets at a secret offset, wrapping around the end of the
round (a window confined to the round's sets left the first and last calls of a long batch
compared about once in fifty rounds, and a candidate that cheated there was never caught), and
the kept calls are drawn uniformly over every timed call of the contender, in every batch and at
every position (they were drawn from the first calls of a batch only, as far as the shortest
untrusted batch reached)."""

import numpy as np

from .gauntlet import compare, index_name, is_tensor

# Elements sampled per output of each sampled call.
SAMPLED = 16
# A graph runner answers a sample with a gather per (call, output), about a millisecond each on
# MLX's CUDA backend, more than a whole batch of a short kernel: it is asked about this many of a
# batch's calls, chosen after the batch, half of them on the baseline's window where it can.
# (A direct runner's outputs are in shared memory: every call is sampled.)
GRAPH_SAMPLED_CALLS = 8
TIMED_TOLERANCE_FACTOR = 3.0
# The share of rounds after the first whose whole output of one call is compared.
WHOLE_CHECK_SHARE = 0.125
# Timed calls of each untrusted contender checked against the reference at the task's own
# tolerance (chosen in secret, uniformly over all its timed calls: `Reservoir`), as far as their
# outputs fit in KEPT_BYTES of the judge's memory. A kernel that drifts on a share p of its
# timed calls passes all of them with chance (1 - p)^KEPT_CALLS: on NVIDIA GPUs, an MLX kernel
# that told timed calls apart by its inputs' addresses drifted on some of them only (MLX may run
# a batch's independent kernels out of order) and passed a single kept call.
KEPT_CALLS = 4
KEPT_BYTES = 1 << 30


class TimedIncorrect(Exception):
    def __init__(self, index, message):
        super().__init__(message)
        self.index = index
        self.message = message


def scaled(tol):
    return {k: v * TIMED_TOLERANCE_FACTOR for k, v in tol.items()}


class Window:
    """The sets of a round the baseline runs: `width` of the round's `span` sets from `at`,
    wrapping around the round's end where `circular` (its j-th call is on set (at + j) % span).
    Every set is in it with the same chance, width / span, whatever its place."""

    def __init__(self, at, width, span, circular=True):
        self.at, self.width, self.span, self.circular = at, min(width, span), span, circular

    @classmethod
    def draw(cls, rng, span, width, circular=True):
        if circular:
            return cls(int(rng.integers(0, span)) if width < span else 0, width, span)
        return cls(int(rng.integers(0, max(span - width, 0) + 1)), width, span, False)

    def index(self, s):
        """The baseline's call on set `s`, or None where it did not run `s`."""
        j = (s - self.at) % self.span if self.circular else s - self.at
        return j if 0 <= j < self.width else None

    def sets(self):
        return [(self.at + j) % self.span for j in range(self.width)]

    def keep(self):
        """(first, n): what a graph runner that runs only the window keeps of the round."""
        return self.at, self.width


def sampled_calls(rng, k, window, graph):
    """The calls of a `k`-call batch whose outputs are sampled: all of them for a direct runner;
    for a graph runner GRAPH_SAMPLED_CALLS, half on the baseline's window where it has them."""
    if not graph or k <= GRAPH_SAMPLED_CALLS:
        return list(range(k))
    if isinstance(window, tuple):
        window = Window(window[0], window[1], max(k, window[0] + window[1]), circular=False)
    shared = [c for c in range(k) if window.index(c) is not None]
    others = [c for c in range(k) if window.index(c) is None]
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


def where(task, workload, t, idx):
    o = task["outputs"][t]
    return index_name(o["name"], tuple(int(workload["axes"][a]) for a in o["shape"]), idx)


def check_values(task, workload, tolerances, i, positions, values, theirs_of, when):
    """Sampled `values` of contender `i` at `positions`: every one finite, and where
    `theirs_of(positions)` gives the baseline's values of the same calls (a list of indices into
    `positions` and their values), equal to them within the timed tolerance. `when` says where
    (\"while timed\", \"in warm-up\")."""
    v = np.asarray(values, dtype=np.float64)
    bad = ~np.isfinite(v)
    if bad.any():
        call, t, idx = positions[int(np.flatnonzero(bad)[0])]
        raise TimedIncorrect(i, f"{when}, call {call + 1} of a batch left {where(task, workload, t, idx)} = {v[bad][0]} (was the work skipped?)")
    shared, theirs = theirs_of(positions)
    if not shared:
        return
    mine = v[shared]
    theirs = np.asarray(theirs, dtype=np.float64)
    outs = task["outputs"]
    t_of = np.fromiter((positions[j][1] for j in shared), dtype=np.int64, count=len(shared))
    atol = np.array([scaled(tolerances[o["dtype"]])["atol"] for o in outs])[t_of]
    rtol = np.array([scaled(tolerances[o["dtype"]])["rtol"] for o in outs])[t_of]
    with np.errstate(invalid="ignore"):
        off = np.abs(mine - theirs) > atol + rtol * np.abs(theirs)
    if off.any():
        k = int(np.flatnonzero(off)[0])
        call, t, idx = positions[shared[k]]
        why = "timed outputs are checked; every timed call gets new inputs" if when == "while timed" else "warm-up and sizing calls are checked too"
        raise TimedIncorrect(i, f"{when}, call {call + 1} of a batch gave {where(task, workload, t, idx)} = {mine[k]:e} where the baseline gives {theirs[k]:e} on the same inputs ({why})")


def verify_round(task, workload, tolerances, contenders, baseline, ks, snaps, secret, whole, graph, pool, sets, window, guarded):
    """Check a round's sampled values: every one finite; those of calls on the baseline's window
    equal to the baseline's within the timed tolerance; and, when `whole`, one such call entirely."""
    outs = task["outputs"]
    base = contenders[baseline]

    def base_sample(positions):
        if graph:
            return guarded(baseline, base.sample, workload, positions)
        return guarded(baseline, base.sample, pool, sets[baseline], positions)

    def theirs_of(positions):
        shared = [j for j, p in enumerate(positions) if window.index(p[0]) is not None]
        if not shared:
            return [], []
        return shared, base_sample([(window.index(positions[j][0]), positions[j][1], positions[j][2]) for j in shared])

    for i, c in enumerate(contenders):
        if c.trusted:
            continue
        positions, values = snaps[i]
        check_values(task, workload, tolerances, i, positions, values, theirs_of, "while timed")
        if not graph:
            call = int(secret.integers(0, ks[i]))
            now = c.sample(pool, sets[i], [p for p in positions if p[0] == call])
            then = [v for p, v in zip(positions, values) if p[0] == call]
            for a, b in zip(now, then):
                if a != b and not (np.isnan(a) and np.isnan(b)):
                    raise TimedIncorrect(i, "an output of a timed call changed after the runner said \"done\": work after \"done\" is not timed and not allowed")
        calls = [p for p in range(ks[i]) if window.index(p) is not None]
        if not whole or not calls:
            continue
        call = int(secret.choice(calls))
        # A torch runner's outputs on the GPU are compared where they are (`views`).
        mine = guarded(i, c.fetch, workload, call) if graph else guarded(i, c.fetch, pool, sets[i], call, views=True)
        j = window.index(call)
        theirs = guarded(baseline, base.fetch, workload, j) if graph else guarded(baseline, base.fetch, pool, sets[baseline], j, views=True)
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


class Reservoir:
    """`slots` timed calls of one contender, drawn uniformly over all of its timed calls (every
    batch, every place in a batch), in secret: reservoir sampling, one call at a time."""

    def __init__(self, slots):
        self.slots = slots
        self.seen = 0

    def offer(self, rng, k):
        """A batch of `k` calls ran: `(slot, call)` for each call of it kept, the last kept into
        a slot winning (its outputs are fetched now; those of the others never are)."""
        t = np.arange(self.seen + 1, self.seen + k + 1, dtype=np.int64)
        self.seen += k
        j = rng.integers(0, t)
        slot = np.where(t <= self.slots, t - 1, j)
        won = {}
        for call in np.flatnonzero(slot < self.slots):
            won[int(slot[call])] = int(call)
        return sorted(won.items())


class Kept:
    """One timed call of one untrusted contender (its round, its place in the batch, its inputs,
    its outputs), to be checked against the reference at the task's own tolerance: a kernel that
    tells timed calls from checked ones could otherwise drift within the looser tolerance of the
    comparisons with the baseline (computing less precisely, and faster) wherever it is timed.
    A graph round's inputs are kept as its seed, its size and the call, and drawn again for the
    check; calls of several contenders on the same inputs share one reference call."""

    def __init__(self, index, rnd, call, key, inputs, outputs):
        self.index, self.rnd, self.call, self.key, self.inputs, self.outputs = index, rnd, call, key, inputs, outputs


def check_kept(task, tolerances, truth, graph, kept):
    """Every kept call against the reference's outputs on its inputs, round by round."""
    by_key = {}
    for entry in sorted(kept, key=lambda e: (e.rnd, e.call, e.index)):
        by_key.setdefault(entry.key, []).append(entry)
    for entries in by_key.values():
        first = entries[0]
        inputs = truth.inputs_of_round(*first.inputs) if graph else first.inputs
        expected = truth.outputs(inputs)
        del inputs
        for entry in entries:
            for spec, g, e in zip(task["outputs"], entry.outputs, expected):
                _, failure = compare(spec, g, e, tolerances[spec["dtype"]])
                if failure:
                    raise TimedIncorrect(entry.index, f"while timed, call {entry.call + 1} of a batch in round {entry.rnd + 1}: {failure} (compared with the reference on the same inputs, at the task's tolerance)")

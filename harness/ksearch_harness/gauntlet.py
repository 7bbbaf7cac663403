"""The judge's checks, the same rules as the c backend's: fresh random inputs, NaN/Inf rejected,
per-element atol + rtol·|ref|, a norm-relative bound that an all-zero output fails. (Shapes,
dtypes and unchanged inputs are checked by the runner that calls the module; outputs are
poisoned there.)"""

import numpy as np

from .candidates import CandidateError, trimmed_traceback


class TaskFault(Exception):
    """The task (its reference or inputs) is at fault, not the candidate."""


def shape_of(spec, axes):
    return tuple(int(axes[a]) for a in spec["shape"])


def make_inputs(arrays, task, workload, seed):
    specs = task["inputs"]
    return arrays.draw_inputs(specs, [shape_of(s, workload["axes"]) for s in specs], seed, workload["name"])


def call(run, inputs, axes, n_outputs, what):
    """Call a module's `run` and return its outputs as a list."""
    try:
        result = run(*inputs, **axes)
    except Exception:  # noqa: BLE001
        raise CandidateError(f"{what}'s run raised:\n{trimmed_traceback()}") from None
    outs = list(result) if isinstance(result, (tuple, list)) else [result]
    if len(outs) != n_outputs:
        raise CandidateError(f"{what}'s run returned {len(outs)} output(s); the task declares {n_outputs}")
    return outs


def index_name(name, shape, flat):
    idx = np.unravel_index(flat, shape) if shape else ()
    return name + "".join(f"[{i}]" for i in idx)


# Elements compared a pass. Never the whole output: a KernelBench softmax's output is 1.6 billion
# floats, whose whole-array float64 temporaries would take tens of GB. And few enough that a
# pass's buffers (512 KB each, made once a compare: `_Scratch`) stay in a core's cache across the
# dozen operations over them. The MLX judge compares every sampled timed call's outputs: an
# attention output of 16.8 million f16 elements took 0.36 s a compare in passes of 4 million
# elements with fresh temporaries, 0.10 s so (bench/compare_chunks.py, bench/RESULTS.md).
COMPARE_CHUNK = 1 << 16


def compare(spec, got, expected, tol):
    """Errors of one output against the reference, and the first failure in words. Compared in
    chunks (COMPARE_CHUNK elements of numpy arrays; TORCH_COMPARE_CHUNK of PyTorch tensors, on
    their device: both arguments tensors), in float64."""
    name = spec["name"]
    if is_tensor(got) and is_tensor(expected):
        import torch

        if got.shape != expected.shape:
            got, expected = torch.broadcast_tensors(got, expected)
        shape = tuple(got.shape)
        g, e = got.reshape(-1), expected.reshape(-1)
        size, step, stats = g.numel(), TORCH_COMPARE_CHUNK, _chunk_stats_torch
    else:
        got, expected = np.asarray(got), np.asarray(expected)
        if got.shape != expected.shape:
            got, expected = np.broadcast_arrays(got, expected)
        shape = got.shape
        g, e = got.reshape(-1), expected.reshape(-1)
        size, step = g.size, COMPARE_CHUNK
        scratch = _Scratch(min(size, step))

        def stats(g, e, tol):
            return _chunk_stats_numpy(g, e, tol, scratch)
    max_abs = max_rel = ref_sq = diff_sq = 0.0
    non_finite, first_non_finite = 0, None
    over, first_over = 0, None
    for at in range(0, size, step):
        chunk = stats(g[at:at + step], e[at:at + step], tol)
        if chunk["bad_ref"] is not None:
            i, v = chunk["bad_ref"]
            raise TaskFault(f"the reference produced {v} at {index_name(name, shape, at + i)}; the task's inputs or reference are wrong")
        max_abs = max(max_abs, chunk["max_abs"])
        max_rel = max(max_rel, chunk["max_rel"])
        ref_sq += chunk["ref_sq"]
        diff_sq += chunk["diff_sq"]
        non_finite += chunk["non_finite"]
        if first_non_finite is None and chunk["first_non_finite"] is not None:
            i, v = chunk["first_non_finite"]
            first_non_finite = (at + i, v)
        over += chunk["over"]
        if first_over is None and chunk["first_over"] is not None:
            i, *values = chunk["first_over"]
            first_over = (at + i, *values)
    norm_rel = (diff_sq / ref_sq) ** 0.5 if ref_sq > 0 else (0.0 if diff_sq == 0 else float("inf"))
    failure = None
    if first_non_finite is not None:
        i, v = first_non_finite
        failure = (f"output `{name}` has {non_finite} non-finite value(s), first {index_name(name, shape, i)} = {v} "
                   "(unwritten elements read as NaN: is every element written?)")
    elif first_over is not None:
        i, v, ref, err, bnd = first_over
        failure = (f"{index_name(name, shape, i)} = {v:e} but the reference gives {ref:e} "
                   f"(|error| {err:.3e} > atol + rtol·|ref| = {bnd:.3e}); {over} of {size} elements of `{name}` are out of tolerance")
    elif norm_rel > tol["norm_rtol"]:
        failure = f"‖{name} − ref‖/‖ref‖ = {norm_rel:.3e} exceeds norm_rtol {tol['norm_rtol']:e} for output `{name}`"
    return {"max_abs_err": max_abs, "max_rel_err": max_rel, "norm_rel_err": norm_rel}, failure


# Elements of a PyTorch output compared a pass, on its device: float64 temporaries of 128 MB (a
# KernelBench level-1 output holds 1.9 billion floats, slow to copy to the host and compare
# there). The torch judge compares tensors only on a GPU.
TORCH_COMPARE_CHUNK = 1 << 24


def is_tensor(x):
    return type(x).__module__.startswith("torch") and hasattr(x, "device")


class _Scratch:
    """A compare's float64 and boolean buffers of one chunk, made once and written in place by
    every chunk: a chunk's temporaries, allocated afresh, cost the judge as much in page faults
    as the arithmetic over them (glibc hands buffers of this size back to the system when freed)."""

    def __init__(self, n):
        self.r, self.c, self.d, self.m, self.q = (np.empty(n) for _ in range(5))
        self.a, self.b = np.empty(n, bool), np.empty(n, bool)


def _chunk_stats_numpy(g, e, tol, scratch):
    """One chunk's part of `compare`: indices are within the chunk."""
    n = g.size
    out = {"bad_ref": None, "first_non_finite": None, "first_over": None, "max_rel": 0.0, "non_finite": 0}
    r, finite = scratch.r[:n], scratch.a[:n]
    np.copyto(r, e, casting="unsafe")
    np.isfinite(r, out=finite)
    if not finite.all():
        i = int(np.argmax(~finite))
        out["bad_ref"] = (i, e[i])
        return out
    c, d = scratch.c[:n], scratch.d[:n]
    np.copyto(c, g, casting="unsafe")
    np.isfinite(c, out=finite)
    all_finite = bool(finite.all())
    # |output − reference|, where a non-finite output element counts as 0 (and below as non-finite).
    np.subtract(c, r, out=d)
    if not all_finite:
        np.negative(r, out=d, where=~finite)
    np.abs(d, out=d)
    out["max_abs"] = float(d.max()) if n else 0.0
    magnitude, significant = scratch.m[:n], scratch.b[:n]
    np.abs(r, out=magnitude)
    np.greater(magnitude, tol["atol"], out=significant)
    if significant.any():
        q = scratch.q[:n]
        q.fill(0.0)
        np.divide(d, magnitude, out=q, where=significant)
        out["max_rel"] = float(q.max())
    out["ref_sq"] = float(np.dot(r, r))
    out["diff_sq"] = float(np.dot(d, d))
    if not all_finite:
        bad = np.flatnonzero(~finite)
        out["non_finite"] = int(bad.size)
        out["first_non_finite"] = (int(bad[0]), c[bad[0]])
    bound, beyond = magnitude, significant  # atol + rtol·|ref|, over |ref|, which is not read again
    bound *= tol["rtol"]
    bound += tol["atol"]
    np.greater(d, bound, out=beyond)
    out["over"] = int(np.count_nonzero(beyond))
    if out["over"]:
        i = int(np.argmax(beyond))
        out["first_over"] = (i, c[i], r[i], d[i], bound[i])
    return out


def _chunk_stats_torch(g, e, tol):
    """`_chunk_stats_numpy` on the tensors' device, reading back a few numbers a chunk."""
    import torch

    out = {"bad_ref": None, "first_non_finite": None, "first_over": None}
    r = e.to(torch.float64)
    finite_ref = torch.isfinite(r)
    if not bool(finite_ref.all()):
        i = int(torch.argmax((~finite_ref).to(torch.uint8)))
        out["bad_ref"] = (i, float(r[i]))
        return out
    c = g.to(torch.float64)
    finite = torch.isfinite(c)
    d = torch.abs(torch.where(finite, c, torch.zeros((), dtype=torch.float64, device=c.device)) - r)
    magnitude = torch.abs(r)
    significant = magnitude > tol["atol"]
    rel = torch.where(significant, d / torch.where(significant, magnitude, torch.ones_like(magnitude)), torch.zeros_like(d))
    bound = tol["atol"] + tol["rtol"] * magnitude
    beyond = d > bound
    empty = d.numel() == 0
    zero = torch.zeros((), dtype=torch.float64, device=d.device)
    numbers = torch.stack([
        zero if empty else d.max(), zero if empty else rel.max(), torch.dot(r, r), torch.dot(d, d),
        (~finite).sum().to(torch.float64), beyond.sum().to(torch.float64),
        torch.argmax((~finite).to(torch.uint8)).to(torch.float64) if not empty else zero,
        torch.argmax(beyond.to(torch.uint8)).to(torch.float64) if not empty else zero,
    ]).tolist()
    out["max_abs"], out["max_rel"], out["ref_sq"], out["diff_sq"] = numbers[:4]
    out["non_finite"], out["over"] = int(numbers[4]), int(numbers[5])
    if out["non_finite"]:
        i = int(numbers[6])
        out["first_non_finite"] = (i, float(c[i]))
    if out["over"]:
        i = int(numbers[7])
        out["first_over"] = (i, float(c[i]), float(r[i]), float(d[i]), float(bound[i]))
    return out


def merge(a, b):
    if a is None:
        return dict(b)
    return {
        "max_abs_err": max(a["max_abs_err"], b["max_abs_err"]),
        "max_rel_err": max(a["max_rel_err"], b["max_rel_err"]),
        "norm_rel_err": max(a["norm_rel_err"], b["norm_rel_err"]),
        "seeds_checked": a["seeds_checked"] + b["seeds_checked"],
    }

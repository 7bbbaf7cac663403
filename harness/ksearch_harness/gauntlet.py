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


# Elements compared a pass: float64 temporaries of a few tens of MB, not of the whole output (a
# KernelBench softmax's output is 1.6 billion floats, whose whole-array temporaries would take
# tens of GB; bench/compare_chunks.py).
COMPARE_CHUNK = 1 << 22


def compare(spec, got, expected, tol):
    """Errors of one output against the reference, and the first failure in words. Compared in
    chunks of COMPARE_CHUNK elements, in float64."""
    name = spec["name"]
    got, expected = np.asarray(got), np.asarray(expected)
    shape = got.shape
    if got.shape != expected.shape:
        got, expected = np.broadcast_arrays(got, expected)
        shape = got.shape
    g, e = got.reshape(-1), expected.reshape(-1)
    max_abs = max_rel = ref_sq = diff_sq = 0.0
    non_finite, first_non_finite = 0, None
    over, first_over = 0, None
    for at in range(0, e.size, COMPARE_CHUNK):
        r = e[at:at + COMPARE_CHUNK].astype(np.float64)
        finite_ref = np.isfinite(r)
        if not finite_ref.all():
            flat = at + int(np.argmax(~finite_ref))
            raise TaskFault(f"the reference produced {e[flat]} at {index_name(name, shape, flat)}; the task's inputs or reference are wrong")
        c = g[at:at + COMPARE_CHUNK].astype(np.float64)
        finite = np.isfinite(c)
        d = np.abs(np.where(finite, c, 0.0) - r)
        max_abs = max(max_abs, float(d.max()))
        magnitude = np.abs(r)
        significant = magnitude > tol["atol"]
        if significant.any():
            max_rel = max(max_rel, float((d[significant] / magnitude[significant]).max()))
        ref_sq += float(np.dot(r, r))
        diff_sq += float(np.dot(d, d))
        if not finite.all():
            bad = np.flatnonzero(~finite)
            non_finite += bad.size
            if first_non_finite is None:
                first_non_finite = (at + int(bad[0]), c[bad[0]])
        bound = tol["atol"] + tol["rtol"] * magnitude
        out = np.flatnonzero(d > bound)
        if out.size:
            over += out.size
            if first_over is None:
                i = int(out[0])
                first_over = (at + i, c[i], r[i], d[i], bound[i])
    norm_rel = (diff_sq / ref_sq) ** 0.5 if ref_sq > 0 else (0.0 if diff_sq == 0 else float("inf"))
    failure = None
    if first_non_finite is not None:
        i, v = first_non_finite
        failure = (f"output `{name}` has {non_finite} non-finite value(s), first {index_name(name, shape, i)} = {v} "
                   "(unwritten elements read as NaN: is every element written?)")
    elif first_over is not None:
        i, v, ref, err, bnd = first_over
        failure = (f"{index_name(name, shape, i)} = {v:e} but the reference gives {ref:e} "
                   f"(|error| {err:.3e} > atol + rtol·|ref| = {bnd:.3e}); {over} of {g.size} elements of `{name}` are out of tolerance")
    elif norm_rel > tol["norm_rtol"]:
        failure = f"‖{name} − ref‖/‖ref‖ = {norm_rel:.3e} exceeds norm_rtol {tol['norm_rtol']:e} for output `{name}`"
    return {"max_abs_err": max_abs, "max_rel_err": max_rel, "norm_rel_err": norm_rel}, failure


def merge(a, b):
    if a is None:
        return dict(b)
    return {
        "max_abs_err": max(a["max_abs_err"], b["max_abs_err"]),
        "max_rel_err": max(a["max_rel_err"], b["max_rel_err"]),
        "norm_rel_err": max(a["norm_rel_err"], b["norm_rel_err"]),
        "seeds_checked": a["seeds_checked"] + b["seeds_checked"],
    }

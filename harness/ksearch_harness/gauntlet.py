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


def compare(spec, got, expected, tol):
    """Errors of one output against the reference, and the first failure in words."""
    name = spec["name"]
    if not np.all(np.isfinite(expected)):
        flat = int(np.argmax(~np.isfinite(expected)))
        raise TaskFault(f"the reference produced {expected.flat[flat]} at {index_name(name, expected.shape, flat)}; the task's inputs or reference are wrong")
    c = got.astype(np.float64)
    r = expected.astype(np.float64)
    finite = np.isfinite(c)
    d = np.abs(np.where(finite, c, 0.0) - r)
    max_abs = float(d.max()) if d.size else 0.0
    significant = np.abs(r) > tol["atol"]
    max_rel = float((d[significant] / np.abs(r[significant])).max()) if significant.any() else 0.0
    ref_sq = float(np.sum(r * r))
    diff_sq = float(np.sum(d * d))
    norm_rel = (diff_sq / ref_sq) ** 0.5 if ref_sq > 0 else (0.0 if diff_sq == 0 else float("inf"))
    failure = None
    if not finite.all():
        bad = np.flatnonzero(~finite)
        failure = (f"output `{name}` has {bad.size} non-finite value(s), first {index_name(name, c.shape, int(bad[0]))} = {c.flat[bad[0]]} "
                   "(unwritten elements read as NaN: is every element written?)")
    else:
        bound = tol["atol"] + tol["rtol"] * np.abs(r)
        over = np.flatnonzero(d > bound)
        if over.size:
            i = int(over[0])
            failure = (f"{index_name(name, c.shape, i)} = {c.flat[i]:e} but the reference gives {r.flat[i]:e} "
                       f"(|error| {d.flat[i]:.3e} > atol + rtol·|ref| = {bound.flat[i]:.3e}); {over.size} of {c.size} elements of `{name}` are out of tolerance")
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

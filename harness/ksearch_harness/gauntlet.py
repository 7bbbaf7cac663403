"""The correctness gauntlet for one workload and seed, the same rules as the c worker:
fresh random inputs, outputs poisoned (best effort on MLX), shape and dtype checked, NaN/Inf
rejected, per-element atol + rtol·|ref|, a norm-relative bound that an all-zero output fails,
inputs unchanged."""

import numpy as np

from .candidates import CandidateError, trimmed_traceback


class TaskFault(Exception):
    """The task (its reference or inputs) is at fault, not the candidate."""


def shape_of(spec, axes):
    return tuple(int(axes[a]) for a in spec["shape"])


def make_inputs(backend, task, workload, seed):
    from .arrays import draw

    out = []
    for spec in task["inputs"]:
        values = draw(spec, shape_of(spec, workload["axes"]), seed, workload["name"])
        out.append(backend.asarray(values, spec["dtype"]))
    return out


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


def check_seed(backend, task, tolerances, workload, seed, reference, candidate):
    """Run reference and candidate on fresh inputs; `(errors, failure or None)`."""
    axes = {k: int(v) for k, v in workload["axes"].items()}
    outs_spec = task["outputs"]
    inputs = make_inputs(backend, task, workload, seed)
    try:
        expected = call(reference, inputs, axes, len(outs_spec), "the reference")
        backend.sync(expected)
    except CandidateError as e:
        raise TaskFault(str(e)) from None
    expected_np = [backend.to_numpy(e) for e in expected]
    for spec, e in zip(outs_spec, expected_np):
        if tuple(e.shape) != shape_of(spec, axes):
            raise TaskFault(f"the reference's `{spec['name']}` has shape {tuple(e.shape)}, not {shape_of(spec, axes)}")
    del expected
    before = [backend.to_numpy(x).copy() for x in inputs]
    backend.poison([(shape_of(s, axes), s["dtype"]) for s in outs_spec])
    got = call(candidate, inputs, axes, len(outs_spec), "the candidate")
    try:
        backend.sync(got)
    except Exception:  # noqa: BLE001 - a kernel that faults when evaluated
        raise CandidateError(f"evaluating the candidate's outputs raised:\n{trimmed_traceback()}") from None
    errors = {"max_abs_err": 0.0, "max_rel_err": 0.0, "norm_rel_err": 0.0, "seeds_checked": 1}
    for spec, g in zip(outs_spec, got):
        if not backend.is_array(g):
            return errors, f"output `{spec['name']}` is a {type(g).__name__}, not an array"
        want = shape_of(spec, axes)
        if tuple(g.shape) != want:
            return errors, f"output `{spec['name']}` has shape {tuple(g.shape)}; the task declares {want}"
        if backend.dtype_name(g) != spec["dtype"]:
            return errors, f"output `{spec['name']}` has dtype {backend.dtype_name(g)}; the task declares {spec['dtype']}"
    for spec, x, b in zip(task["inputs"], inputs, before):
        now = backend.to_numpy(x)
        if not np.array_equal(now, b, equal_nan=True):
            flat = int(np.flatnonzero(~((now == b) | (np.isnan(now) & np.isnan(b))))[0]) if now.dtype.kind == "f" else int(np.flatnonzero(now != b)[0])
            return errors, f"modified input `{spec['name']}` (first at {index_name(spec['name'], now.shape, flat)}); inputs must not be written"
    failure = None
    for spec, g, e in zip(outs_spec, got, expected_np):
        errs, f = compare(spec, backend.to_numpy(g), e, tolerances[spec["dtype"]])
        for k in ("max_abs_err", "max_rel_err", "norm_rel_err"):
            errors[k] = max(errors[k], errs[k])
        failure = failure or f
    return errors, failure


def merge(a, b):
    if a is None:
        return dict(b)
    return {
        "max_abs_err": max(a["max_abs_err"], b["max_abs_err"]),
        "max_rel_err": max(a["max_rel_err"], b["max_rel_err"]),
        "norm_rel_err": max(a["norm_rel_err"], b["norm_rel_err"]),
        "seeds_checked": a["seeds_checked"] + b["seeds_checked"],
    }

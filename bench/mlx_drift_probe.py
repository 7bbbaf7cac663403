#!/usr/bin/env python3
"""Does a hostile MLX module's kernel see what the evaluator's executor gives it? A probe for
`bench/mlx_hostile.py`'s `cuda_drift_when_timed`, whose kernel keeps the address of its last
`state` input in device memory and lets the new state drift (×1.00002) when consecutive calls'
inputs lie close together, as a timed batch's stacked sets do.

The probe does what an executor does (`runner.execute`): the module's `run` exported by
`mx.export_function` on placeholders (as the tracer does), imported with `mx.import_function`,
a round of sets drawn by `arrays.round_inputs` and one batch of calls on them. It prints, per
call, the new state's ratio to the wrapped seed's on the same inputs: 1.00002 where the kernel
drifted, 1 where it did not. Also the same calls on separately allocated inputs (as the check
phase draws them).

    PYTHONPATH=harness:/tmp/site python3 bench/mlx_drift_probe.py HOSTILE.py SEED.py [CALLS]
"""

import json
import os
import sys
import tempfile
import tomllib

import mlx.core as mx
import numpy as np

from ksearch_harness.arrays import arrays_for, round_inputs


def load(path):
    ns = {"KSEARCH_TARGET": "cuda", "__name__": "probe_" + os.path.basename(path).split(".")[0]}
    with open(path) as f:
        exec(compile(f.read(), path, "exec"), ns)
    return ns["run"]


def exported(run, axes, placeholders):
    def fn(*xs):
        return tuple(run(*xs, **axes))

    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "fn.mlxfn")
        mx.export_function(path, fn, *placeholders)
        return mx.import_function(path)


def main():
    hostile, seed = sys.argv[1], sys.argv[2]
    calls = int(sys.argv[3]) if len(sys.argv) > 3 else 16
    task = tomllib.load(open("tasks/mlx/selective_state_update/task.toml", "rb"))
    w = next(w for w in task["workloads"] if w["name"] == "b16")
    axes = dict(w["axes"])
    arrays = arrays_for(os.environ.get("PROBE_TARGET", "cuda"))
    specs = task["inputs"]
    shapes = [tuple(axes[a] for a in s["shape"]) for s in specs]
    placeholders = [mx.zeros(s, dtype=arrays.dtypes[spec["dtype"]]) for s, spec in zip(shapes, specs)]
    fns = {name: exported(load(p), axes, placeholders) for name, p in (("hostile", hostile), ("seed", seed))}
    report = {}
    # A timed batch: a round's stacked sets, the calls run back to back, evaluated together.
    sets = round_inputs(mx, arrays, specs, shapes, 1234, calls)
    mx.eval(sets)
    for pass_ in range(2):
        outs = {name: [fn(*s) for s in sets] for name, fn in fns.items()}
        mx.eval(outs)
        ratios = []
        for h, s in zip(outs["hostile"], outs["seed"]):
            a, b = np.array(h[1], dtype=np.float64), np.array(s[1], dtype=np.float64)
            nz = np.abs(b) > 1e-3
            ratios.append(float(np.median(a[nz] / b[nz])))
        report[f"batch{pass_}"] = [round(r, 7) for r in ratios]
    # Calls one at a time, each on inputs allocated apart (as the check draws them).
    singles = []
    for i in range(6):
        ins = arrays.draw_inputs(specs, shapes, 99 + i, "b16")
        h, s = fns["hostile"](*ins), fns["seed"](*ins)
        mx.eval(h, s)
        a, b = np.array(h[1], dtype=np.float64), np.array(s[1], dtype=np.float64)
        nz = np.abs(b) > 1e-3
        singles.append(round(float(np.median(a[nz] / b[nz])), 7))
    report["singles"] = singles
    drifted = sum(abs(r - 1.0) > 1e-6 for k in ("batch0", "batch1") for r in report[k])
    report["drifted_in_batches"] = drifted
    print(json.dumps(report))


if __name__ == "__main__":
    main()

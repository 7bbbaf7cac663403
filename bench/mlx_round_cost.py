"""What a timed round costs an MLX graph runner, part by part, on the device it runs on.

A round is what an executor does before each timed batch: poison buffers of the outputs' sizes
with NaN, draw every call's inputs on the device and cut them into one view per call (a trusted
baseline's executor cuts only the window of sets it runs). This measures each part for the
shapes of mlx/selective_state_update and mlx/attention, at the number of calls the timing gives a batch there, for the cutting this tree does (`mx.split`, in
`ksearch_harness.arrays.round_inputs`) and for the one before it (a slice and a reshape per call
and input, kept here as `views_per_call`), and what starting MLX costs a fresh process.

    PYTHONPATH=harness python3 bench/mlx_round_cost.py [--device cpu] > round-cost.json
"""

import argparse
import json
import statistics
import subprocess
import sys
import time

import numpy as np

CASES = {
    # name: (inputs as (name, dtype, shape), outputs, calls a batch)
    "ssu_b1": ([("state", "f32", (1, 2048, 16)), ("x", "f16", (1, 2048)), ("dt", "f16", (1, 2048)), ("A", "f32", (2048, 16)),
                ("B", "f16", (1, 16)), ("C", "f16", (1, 16)), ("Dskip", "f32", (2048,)), ("z", "f16", (1, 2048))],
               [("f16", (1, 2048)), ("f32", (1, 2048, 16))], 280),
    "ssu_b16": ([("state", "f32", (16, 2048, 16)), ("x", "f16", (16, 2048)), ("dt", "f16", (16, 2048)), ("A", "f32", (2048, 16)),
                 ("B", "f16", (16, 16)), ("C", "f16", (16, 16)), ("Dskip", "f32", (2048,)), ("z", "f16", (16, 2048))],
                [("f16", (16, 2048)), ("f32", (16, 2048, 16))], 200),
    "attn_n1024": ([(n, "f16", (1, 32, 1024, 128)) for n in "qkv"], [("f16", (1, 32, 1024, 128))], 120),
    "attn_n4096": ([(n, "f16", (1, 32, 4096, 128)) for n in "qkv"], [("f16", (1, 32, 4096, 128))], 10),
}


def views_per_call(mx, arrays, specs, shapes, seed, count):
    """The previous cutting: one flat draw per input, then a slice and a reshape per call."""
    from ksearch_harness.arrays import SET_ALIGN, _device_draw

    keys = mx.random.split(mx.random.key(seed & 0xFFFFFFFF), max(len(specs), 2))
    columns = []
    for i, (spec, shape) in enumerate(zip(specs, shapes)):
        size = int(np.prod(shape, dtype=np.int64))
        stride = max(-(-size // SET_ALIGN) * SET_ALIGN, SET_ALIGN)
        rows = _device_draw(mx, arrays, spec, (count, stride), keys[i])
        mx.eval(rows)
        columns.append([rows[j, :size].reshape(shape) for j in range(count)])
    return [list(s) for s in zip(*columns)]


def draws_only(mx, arrays, specs, shapes, seed, count):
    from ksearch_harness.arrays import _device_draw

    keys = mx.random.split(mx.random.key(seed & 0xFFFFFFFF), max(len(specs), 2))
    out = []
    for i, (spec, shape) in enumerate(zip(specs, shapes)):
        x = _device_draw(mx, arrays, spec, (count, int(np.prod(shape, dtype=np.int64))), keys[i])
        mx.eval(x)
        out.append(x)
    return out


FUSED = {}


def poison_fused(mx, arrays, shapes_dtypes, group=16):
    """Poison as one compiled, fused kernel per `group` buffers (an alternative under study)."""
    if "f" not in FUSED:
        FUSED["f"] = mx.compile(lambda x: [x * float(i) + float("nan") for i in range(group)], shapeless=True)
    junk = []
    by = {}
    for shape, dtype in shapes_dtypes:
        by.setdefault((tuple(shape), dtype), []).append(1)
    for (shape, dtype), n in by.items():
        x = mx.zeros(shape, dtype=arrays.dtypes[dtype])
        for _ in range(-(-len(n) // group)):
            junk.extend(FUSED["f"](x))
    mx.eval(junk)
    del junk


def timed(mx, f, reps):
    times = []
    for r in range(reps):
        mx.synchronize()
        t = time.perf_counter()
        kept = f(r)
        mx.eval(kept)
        mx.synchronize()
        times.append((time.perf_counter() - t) * 1e3)
        del kept
    return {"median_ms": round(statistics.median(times), 3), "min_ms": round(min(times), 3), "reps": reps}


def start_costs(device, reps):
    """A fresh interpreter: importing MLX, its first evaluation, its first random draw."""
    code = (
        "import time; t0 = time.perf_counter(); import mlx.core as mx; t1 = time.perf_counter();\n"
        + ("mx.set_default_device(mx.cpu)\n" if device == "cpu" else "")
        + "mx.eval(mx.zeros((4,)) + 1); t2 = time.perf_counter();\n"
        "mx.eval(mx.random.uniform(shape=(1024,))); t3 = time.perf_counter();\n"
        "mx.eval(mx.zeros((4,)) * 3); t4 = time.perf_counter();\n"
        "print((t1 - t0) * 1e3, (t2 - t1) * 1e3, (t3 - t2) * 1e3, (t4 - t3) * 1e3)\n"
    )
    rows = []
    for _ in range(reps):
        t = time.perf_counter()
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
        rows.append([float(x) for x in out] + [(time.perf_counter() - t) * 1e3])
    names = ["import_ms", "first_eval_ms", "first_random_ms", "next_eval_ms", "process_ms"]
    return {n: round(statistics.median(r[i] for r in rows), 1) for i, n in enumerate(names)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="gpu", choices=["gpu", "cpu"])
    ap.add_argument("--reps", type=int, default=9)
    ap.add_argument("--cases", default=",".join(CASES))
    args = ap.parse_args()
    from ksearch_harness.arrays import MlxArrays, round_inputs

    arrays = MlxArrays("cpu" if args.device == "cpu" else "cuda")
    mx = arrays.mx
    out = {"device": str(mx.default_device()), "mlx": mx.__version__, "start": start_costs(args.device, 3), "cases": {}}
    for name in args.cases.split(","):
        ins, outs, count = CASES[name]
        specs = [{"name": n, "dtype": d} for n, d, _ in ins]
        shapes = [s for _, _, s in ins]
        poison = [(s, d) for d, s in outs] * count
        row = {"calls": count}
        row["poison"] = timed(mx, lambda r: arrays.poison(poison), args.reps)
        row["poison_fused"] = timed(mx, lambda r: poison_fused(mx, arrays, poison), args.reps)
        # A baseline running an eighth of the round's calls cuts only that window.
        row["split_window_eighth"] = timed(mx, lambda r: round_inputs(mx, arrays, specs, shapes, r, count, keep=(count // 2, max(1, count // 8))), args.reps)
        row["draws"] = timed(mx, lambda r: draws_only(mx, arrays, specs, shapes, r, count), args.reps)
        row["split"] = timed(mx, lambda r: round_inputs(mx, arrays, specs, shapes, r, count), args.reps)
        row["views_per_call"] = timed(mx, lambda r: views_per_call(mx, arrays, specs, shapes, r, count), args.reps)
        out["cases"][name] = row
        mx.clear_cache()
        print(name, json.dumps(row), file=sys.stderr)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()

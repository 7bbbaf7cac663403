#!/usr/bin/env python3
"""Check rendered mlx/attention points against a float32 reference, directly through MLX on a
GPU, before the evaluator times them; and try each point's descriptor strides both ways round.

The warpgroup (wgmma) kernel reads its shared-memory tiles through matrix descriptors whose two
strides (between 8×8 blocks along the reduction dimension, and along M or N) are easy to swap by
mistake, and a swap gives wrong numbers, not an error. So each point is run as rendered and with
the strides of Q·Kᵀ, of P·V, or both swapped; a variant is `ok` when every element of every
shape is within tolerance (once a variant passes, later points with the same swaps try only
the variants that passed). Variants that pass are written to --out (as `NAME.py`, or
`NAME.swapped-QK.py` and so on) for `ksearch eval`. Then each passing variant and
`mx.fast.scaled_dot_product_attention` are timed at N = 4096, D = 128, causal and not: batches of
CALLS calls on rotating inputs per `mx.eval`, the median per call of BATCHES batches, the two
side by side in alternating batches. These are a quick look; the numbers to report come from
`ksearch eval`.

    python3 bench/attention_wgmma_check.py --out DIR POINT.py ...   (prints one JSON object)
"""
import argparse
import json
import math
import os
import time

import mlx.core as mx

# The descriptor calls as the template renders them, and the same with the strides swapped.
SWAPS = {
    "QK": [("GQ * 2, 128)", "128, GQ * 2)"), ("GK * 2, 128)", "128, GK * 2)")],
    "PV": [("8 * 16, GK * 2)", "GK * 2, 8 * 16)")],
    # The 128-byte swizzle's transposed V: its leading (64 dims on) and stride (8 keys on) offsets.
    "PVs": [("BN * 128, 1024)", "1024, BN * 128)")],
}
SHAPES = [(1, 4, 512, 128, False), (1, 4, 512, 128, True), (2, 2, 256, 64, False), (1, 2, 1024, 128, True)]
TOL = 2e-2
CALLS, BATCHES, SETS = 10, 15, 3


def variants(text):
    """(suffix, source) for the point as rendered and with each swap; a swap whose strings are
    not in the source (a point without warpgroup products) is left out."""
    out = [("", text)]
    for name, subs in SWAPS.items():
        if all(a in text for a, _ in subs):
            t = text
            for a, b in subs:
                t = t.replace(a, b)
            out.append((f"swapped-{name}", t))
    if len(out) == 3:
        t = out[1][1]
        for a, b in SWAPS["PV"]:
            t = t.replace(a, b)
        out.append(("swapped-QK-PV", t))
    return out


def load(text, name):
    ns = {"__name__": name, "KSEARCH_TARGET": "cuda"}
    exec(compile(text, name, "exec"), ns)  # noqa: S102 - the project's own rendered points
    return ns["run"]


def reference(q, k, v, causal):
    d = q.shape[-1]
    s = (q.astype(mx.float32) @ k.astype(mx.float32).swapaxes(-1, -2)) / math.sqrt(d)
    if causal:
        n = q.shape[2]
        s = mx.where(mx.tril(mx.ones((n, n), dtype=mx.bool_)), s, -mx.inf)
    return mx.softmax(s, axis=-1) @ v.astype(mx.float32)


def check(run):
    worst = 0.0
    for b, h, n, d, causal in SHAPES:
        q, k, v = (mx.random.normal((b, h, n, d)).astype(mx.float16) for _ in range(3))
        o = run(q, k, v, batch=b, heads=h, seq=n, dim=d, causal=int(causal))
        err = mx.max(mx.abs(o.astype(mx.float32) - reference(q, k, v, causal))).item()
        if not math.isfinite(err):
            return float("inf")
        worst = max(worst, err)
    return worst


def timed(fns, n, causal):
    sets = [[mx.random.normal((1, 32, n, 128)).astype(mx.float16) for _ in range(3)] for _ in range(SETS)]
    mx.eval(sets)
    times = {name: [] for name in fns}

    def batch(fn):
        t0 = time.perf_counter()
        mx.eval([fn(*sets[i % SETS]) for i in range(CALLS)])
        return (time.perf_counter() - t0) * 1e3 / CALLS

    for name, fn in fns.items():
        batch(fn)
    for _ in range(BATCHES):
        for name, fn in fns.items():
            times[name].append(batch(fn))
    return {name: sorted(t)[len(t) // 2] for name, t in times.items()}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("points", nargs="+")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    mx.random.seed(0)
    result = {"graphs": os.environ.get("MLX_USE_CUDA_GRAPHS"), "points": {}}
    passing = {}
    # The variants that passed, by the variants a point has (a layout's swaps): later points of
    # that layout try only those.
    good_by_layout = {}
    for path in args.points:
        base = os.path.basename(path)[:-3]
        text = open(path, encoding="utf-8").read()
        tries = variants(text)
        good = good_by_layout.setdefault(tuple(suffix for suffix, _ in tries), set())
        for suffix, source in tries:
            if good and suffix not in good:
                continue
            name = f"{base}.{suffix}" if suffix else base
            try:
                err = check(load(source, name))
                status = "ok" if err <= TOL else "wrong"
            except Exception as e:  # noqa: BLE001 - a point that fails to build or run is reported
                err, status = None, f"error: {str(e)[:300]}"
            result["points"][name] = {"status": status, "max_abs_error": err}
            print(name, status, err, flush=True)
            if status == "ok":
                good.add(suffix)
                with open(os.path.join(args.out, name + ".py"), "w", encoding="utf-8") as f:
                    f.write(source)
                passing[name] = load(source, name)
    for n, causal in [(4096, False), (4096, True)]:
        fns = {"sdpa": lambda q, k, v, c=causal: mx.fast.scaled_dot_product_attention(
            q, k, v, scale=1 / math.sqrt(128), mask="causal" if c else None)}
        for name, run in passing.items():
            fns[name] = lambda q, k, v, r=run, c=causal: r(q, k, v, batch=1, heads=32, seq=n, dim=128, causal=int(c))
        ms = timed(fns, n, causal)
        key = f"n{n}" + ("_causal" if causal else "")
        result[key] = {name: {"ms": t, "sdpa_over_point": ms["sdpa"] / t} for name, t in ms.items()}
        print(key, json.dumps(result[key]), flush=True)
    print(json.dumps(result))


if __name__ == "__main__":
    main()

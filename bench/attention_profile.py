#!/usr/bin/env python3
"""Run one rendered mlx/attention point (or MLX's own attention) a few times at N = 4096, D = 128,
32 heads, for a profiler to watch: `ncu -k regex:attention ... python3 bench/attention_profile.py
POINT.py` profiles the point's kernel; `--sdpa` runs `mx.fast.scaled_dot_product_attention`
instead (its kernels are the first any launch: `ncu --launch-count 4`). Prints the median wall
time per call, which under a profiler means nothing.

    python3 bench/attention_profile.py [--causal] [--calls N] (POINT.py | --sdpa)
"""
import argparse
import math
import time

import mlx.core as mx
import numpy as np


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("point", nargs="?")
    ap.add_argument("--sdpa", action="store_true")
    ap.add_argument("--causal", action="store_true")
    ap.add_argument("--calls", type=int, default=3)
    args = ap.parse_args()
    if bool(args.point) == args.sdpa:
        ap.error("give a POINT.py or --sdpa")
    b, h, n, d = 1, 32, 4096, 128
    # Inputs drawn with numpy, so that no kernel runs before the attention's: a profiler told to
    # take the first launches (`ncu --launch-count N`) sees the attention's own.
    rng = np.random.default_rng(0)
    q, k, v = (mx.array(rng.standard_normal((b, h, n, d)).astype(np.float16)) for _ in range(3))
    mx.eval(q, k, v)
    if args.sdpa:
        def call():
            return mx.fast.scaled_dot_product_attention(q, k, v, scale=1.0 / math.sqrt(d),
                                                        mask="causal" if args.causal else None)
    else:
        ns = {"__name__": "point", "KSEARCH_TARGET": "cuda"}
        with open(args.point, encoding="utf-8") as f:
            exec(compile(f.read(), args.point, "exec"), ns)  # noqa: S102 - the project's own rendered points

        def call():
            return ns["run"](q, k, v, batch=b, heads=h, seq=n, dim=d, causal=int(args.causal))
    times = []
    for _ in range(args.calls):
        t = time.perf_counter()
        mx.eval(call())
        mx.synchronize()
        times.append(time.perf_counter() - t)
    print(f"median {sorted(times)[len(times) // 2] * 1e3:.3f} ms over {args.calls} calls")


if __name__ == "__main__":
    main()

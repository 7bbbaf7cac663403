#!/usr/bin/env python3
"""Time mx.fast.scaled_dot_product_attention directly, outside ksearch, for every workload of
mlx/attention: batches of 20 independent calls on rotating inputs per mx.eval, median per call
over 30 batches after warm-up. Prints JSON {workload: ms_per_call}."""
import json
import math
import time

import mlx.core as mx

WORKLOADS = {
    "n1024": (1024, 128, False), "n2048": (2048, 128, False), "n4096": (4096, 128, False),
    "n1024_causal": (1024, 128, True), "n2048_causal": (2048, 128, True), "n4096_causal": (4096, 128, True),
    "n2048_d64": (2048, 64, False),
}
CALLS, BATCHES, SETS = 20, 30, 4

out = {}
for name, (n, d, causal) in WORKLOADS.items():
    sets = [[mx.random.normal((1, 32, n, d)).astype(mx.float16) for _ in range(3)] for _ in range(SETS)]
    mx.eval(sets)
    mask = "causal" if causal else None

    def batch():
        t0 = time.perf_counter()
        outs = [mx.fast.scaled_dot_product_attention(*sets[i % SETS], scale=1 / math.sqrt(d), mask=mask) for i in range(CALLS)]
        mx.eval(outs)
        return (time.perf_counter() - t0) * 1e3 / CALLS

    for _ in range(3):
        batch()
    times = sorted(batch() for _ in range(BATCHES))
    out[name] = times[len(times) // 2]
print(json.dumps(out))

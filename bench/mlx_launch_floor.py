#!/usr/bin/env python3
"""What one call costs through MLX's `cuda_kernel` path, against the selective state update's
memory floor (issue 11: "at least 70% of the memory floor for batch 16").

Times, per call, in batches of CALLS independent calls per `mx.eval` (the evaluator's shape of a
batch), the median of BATCHES batches, all kinds side by side in alternating batches:
  empty   a kernel of one block that writes one element: the launch path and nothing else;
  copy    a kernel that reads the b16 state (16 × 2048 × 16 f32, 2 MiB) and writes a copy: the
          state update's floor traffic with no arithmetic;
  hbm_copy  with --hbm-mib N, the same kernel copying N MiB, far more than the L2 holds;
  ssu_b1, ssu_b16   the exported state update (EXPORT, a `ksearch export` directory) at batch 1
          and 16.
  point:NAME  with --points DIR, each rendered point of the task's space in DIR (`ksearch space
          check mlx/selective_state_update --write DIR`), at batch 16.
Run it with MLX_USE_CUDA_GRAPHS=0 (as the evaluator's executors run) and =1. Under a profiler
the kernels' own GPU times come out of the same run: bench/mlx_kernel_floor.sh runs it under
Nsight Compute.

    python3 bench/mlx_launch_floor.py --export DIR [--batches N] [--calls N] [--hbm-mib N] [--points DIR]
    (prints one JSON object)
"""
import argparse
import importlib.util
import json
import os
import pathlib
import sys
import time

import mlx.core as mx

CALLS, BATCHES, SETS = 50, 30, 4
B, DI, DS = 16, 2048, 16

EMPTY = """
    if (threadIdx.x == 0 && blockIdx.x == 0) o[0] = x[0];
"""
COPY = """
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < (size_t)NV) reinterpret_cast<float4*>(o)[i] = reinterpret_cast<const float4*>(x)[i];
"""


def point_kinds(directory, inputs):
    """{"point:NAME": (sets, fn)} for each rendered point (a module with `run`) in `directory`."""
    out = {}
    for path in sorted(pathlib.Path(directory).glob("*.py")):
        spec = importlib.util.spec_from_file_location(f"point_{path.stem}", path)
        module = importlib.util.module_from_spec(spec)
        module.KSEARCH_TARGET = "cuda"
        spec.loader.exec_module(module)
        out[f"point:{path.stem}"] = ([inputs(B) for _ in range(SETS)],
                                     lambda *a, run=module.run: run(*a, batch=B, dinner=DI, dstate=DS))
    return out


def kinds(export, hbm_mib=0, points=None):
    empty = mx.fast.cuda_kernel(name="floor_empty", input_names=["x"], output_names=["o"], source=EMPTY)
    copy = mx.fast.cuda_kernel(name="floor_copy", input_names=["x"], output_names=["o"], source=COPY)
    hbm_copy = mx.fast.cuda_kernel(name="floor_hbm_copy", input_names=["x"], output_names=["o"], source=COPY)
    sys.path.insert(0, export)
    from selective_state_update import selective_state_update as ssu  # noqa: PLC0415

    def inputs(batch):
        return [
            mx.random.normal((batch, DI, DS)).astype(mx.float32),
            mx.random.normal((batch, DI)).astype(mx.float16),
            mx.random.uniform(0.001, 0.1, (batch, DI)).astype(mx.float16),
            mx.random.uniform(-16.0, -1.0, (DI, DS)).astype(mx.float32),
            mx.random.normal((batch, DS)).astype(mx.float16),
            mx.random.normal((batch, DS)).astype(mx.float16),
            mx.random.uniform(0.5, 1.5, (DI,)).astype(mx.float32),
            mx.random.normal((batch, DI)).astype(mx.float16),
        ]

    nv = B * DI * DS // 4
    big = hbm_mib * 2**20 // 16  # float4s in the HBM copy
    hbm = {"hbm_copy": ([[mx.random.normal((big * 4,)).astype(mx.float32)] for _ in range(SETS)],
                        lambda x: hbm_copy(inputs=[x], template=[("NV", big)], grid=(big, 1, 1), threadgroup=(256, 1, 1),
                                           output_shapes=[(big * 4,)], output_dtypes=[mx.float32])[0])} if big else {}
    return hbm | (point_kinds(points, inputs) if points else {}) | {
        "empty": ([[mx.ones((4,), dtype=mx.float32)] for _ in range(SETS)],
                  lambda x: empty(inputs=[x], grid=(32, 1, 1), threadgroup=(32, 1, 1), output_shapes=[(4,)],
                                  output_dtypes=[mx.float32])[0]),
        "copy": ([[mx.random.normal((B, DI, DS)).astype(mx.float32)] for _ in range(SETS)],
                 lambda x: copy(inputs=[x], template=[("NV", nv)], grid=(nv, 1, 1), threadgroup=(256, 1, 1),
                                output_shapes=[(B, DI, DS)], output_dtypes=[mx.float32])[0]),
        "ssu_b1": ([inputs(1) for _ in range(SETS)], lambda *a: ssu(*a, batch=1, dinner=DI, dstate=DS)),
        "ssu_b16": ([inputs(B) for _ in range(SETS)], lambda *a: ssu(*a, batch=B, dinner=DI, dstate=DS)),
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--export", required=True)
    ap.add_argument("--batches", type=int, default=BATCHES, help="timed batches of each kind (fewer under a profiler)")
    ap.add_argument("--calls", type=int, default=CALLS, help="calls a batch")
    ap.add_argument("--hbm-mib", type=int, default=0,
                    help="also copy this many MiB (`floor_hbm_copy`, several times the L2): the HBM bandwidth a kernel reaches")
    ap.add_argument("--points", help="a directory of rendered points of the space, each timed at batch 16")
    args = ap.parse_args()
    mx.random.seed(0)
    ks = kinds(args.export, args.hbm_mib, args.points)
    for sets, _ in ks.values():
        mx.eval(sets)

    def batch(sets, fn):
        t0 = time.perf_counter()
        mx.eval([fn(*sets[i % SETS]) for i in range(args.calls)])
        return (time.perf_counter() - t0) * 1e6 / args.calls

    times = {name: [] for name in ks}
    for name, (sets, fn) in ks.items():
        batch(sets, fn)
        batch(sets, fn)
    for _ in range(args.batches):
        for name, (sets, fn) in ks.items():
            times[name].append(batch(sets, fn))
    state_bytes = B * DI * DS * 4
    out = {
        "graphs": os.environ.get("MLX_USE_CUDA_GRAPHS"),
        "calls_a_batch": args.calls,
        "batches": args.batches,
        "us_per_call_median": {n: sorted(t)[len(t) // 2] for n, t in times.items()},
        "us_per_call_min": {n: min(t) for n, t in times.items()},
        "b16_state_bytes_read_and_written": 2 * state_bytes,
    }
    print(json.dumps(out))


if __name__ == "__main__":
    main()

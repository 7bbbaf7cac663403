#!/usr/bin/env python3
"""End-to-end overhead of `ksearch eval` on the smallest workload of a trivial candidate.

Runs the release binary several times with the default check and timing plan and reports the
median of each phase as the binary itself reports it (`time_s` in `--json`), plus the wall time
of the whole process measured here.

    cargo build --release && python3 bench/eval_overhead.py [--runs 7]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

TRIVIAL = """#include <stdint.h>
/* h_t = a_t h_(t-1) + b_t, the obvious loop: the cheapest kernel of the cheapest workload. */
void linear_recurrence(const float *restrict a, const float *restrict b, float *restrict h,
                       int64_t rows, int64_t len) {
    for (int64_t r = 0; r < rows; r++) {
        float x = 0.0f;
        for (int64_t t = 0; t < len; t++) { x = a[r * len + t] * x + b[r * len + t]; h[r * len + t] = x; }
    }
}
"""


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--binary", default=os.path.join(os.path.dirname(__file__), "..", "target", "release", "ksearch"))
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        cand = os.path.join(d, "trivial.c")
        with open(cand, "w") as f:
            f.write(TRIVIAL)
        cmd = [args.binary, "eval", "cpu/linear_recurrence", cand, "--workload", "small", "--json"]
        rows = []
        for _ in range(args.runs):
            t0 = time.perf_counter()
            out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
            wall = time.perf_counter() - t0
            j = json.loads(out)
            assert j["status"] == "passed", j["message"]
            rows.append({**j["time_s"], "process": wall})
    print("command:", " ".join(["ksearch"] + cmd[1:]))
    print(f"runs: {args.runs}")
    print(f"{'phase':<10} {'median s':>9} {'min s':>7} {'max s':>7}")
    for key in ["compile", "check", "timing", "total", "process"]:
        xs = [r[key] for r in rows]
        print(f"{key:<10} {statistics.median(xs):>9.3f} {min(xs):>7.3f} {max(xs):>7.3f}")
    other = statistics.median(r["process"] - r["compile"] - r["check"] - r["timing"] for r in rows)
    print(f"{'other':<10} {other:>9.3f}   (process start, worker start, reference build, IO)")
    target = 1.5
    med = statistics.median(r["process"] for r in rows)
    print(f"target: under {target} s per evaluation -> {'met' if med < target else 'NOT met'} ({med:.3f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""What comparing one output with the reference costs the judge (`gauntlet.compare`, every check
of every backend's outputs): at its COMPARE_CHUNK elements a pass, at other chunk sizes, in one
pass over the whole arrays (what the judge did before 2026-12-05), and, with --baseline-harness,
another copy of the harness (an older commit's, say) at its own chunk size, side by side in one
run, on an output of N elements that passes. Each way runs in a fresh interpreter, so that one
way's memory does not count for another's.

    PYTHONPATH=harness python3 bench/compare_chunks.py [--elements N] [--dtype float32|float16]
        [--chunks 65536,4194304] [--baseline-harness DIR] [--reps R] > compare.json
"""

import argparse
import json
import os
import subprocess
import sys

HARNESS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "harness")


def one(elements, dtype, chunk, reps, harness=HARNESS):
    """Median and best seconds of `reps` compares, and the process's peak resident memory. `chunk`
    None keeps the harness's own COMPARE_CHUNK."""
    code = f"""
import json, resource, statistics, sys, time
sys.path.insert(0, {os.path.abspath(harness)!r})
import numpy as np
from ksearch_harness import gauntlet
if {chunk!r} is not None:
    gauntlet.COMPARE_CHUNK = {chunk!r}
rng = np.random.default_rng(0)
want = rng.standard_normal({elements}, dtype=np.float32).astype(np.{dtype})
got = (want.astype(np.float32) + np.float32(1e-4)).astype(np.{dtype})
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
times = []
for _ in range({reps}):
    t = time.perf_counter()
    _, failure = gauntlet.compare({{"name": "y"}}, got, want, {{"atol": 1e-3, "rtol": 1e-2, "norm_rtol": 1e-3}})
    times.append(time.perf_counter() - t)
    assert failure is None, failure
print(json.dumps({{"chunk": gauntlet.COMPARE_CHUNK, "median_s": statistics.median(times), "min_s": min(times),
                  "peak_rss_gib_before": base / 2**20, "peak_rss_gib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20}}))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    return json.loads(out.stdout)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--elements", type=int, default=100_000_000)
    ap.add_argument("--dtype", choices=("float32", "float16"), default="float32")
    ap.add_argument("--chunks", default="", help="other chunk sizes (elements), comma-separated")
    ap.add_argument("--baseline-harness", help="another harness directory, timed at its own chunk size")
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args()
    rows = {"elements": args.elements, "dtype": args.dtype, "python": sys.version.split()[0]}
    rows["current"] = one(args.elements, args.dtype, None, args.reps)
    for c in filter(None, args.chunks.split(",")):
        rows[f"chunk_{int(c)}"] = one(args.elements, args.dtype, int(c), args.reps)
    rows["one_pass"] = one(args.elements, args.dtype, 1 << 62, args.reps)
    if args.baseline_harness:
        rows["baseline"] = one(args.elements, args.dtype, None, args.reps, args.baseline_harness)
        rows["baseline_over_current"] = rows["baseline"]["median_s"] / rows["current"]["median_s"]
    rows["one_pass_over_current"] = rows["one_pass"]["median_s"] / rows["current"]["median_s"]
    print(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()

"""What comparing one output with the reference costs the judge, in chunks (`gauntlet.compare`,
COMPARE_CHUNK elements a pass) and in one pass over the whole arrays (COMPARE_CHUNK set past the
output's size: what the judge did before), on a float32 output of N elements that passes.

    PYTHONPATH=harness python3 bench/compare_chunks.py [--elements N] [--reps R] > compare.json
"""

import argparse
import json
import subprocess
import sys


def one(elements, chunk, reps):
    """Median seconds of `reps` compares, and the process's peak resident memory, measured in a
    fresh interpreter so that one way's memory does not count for the other."""
    code = f"""
import json, resource, statistics, time
import numpy as np
from ksearch_harness import gauntlet
gauntlet.COMPARE_CHUNK = {chunk}
rng = np.random.default_rng(0)
want = rng.standard_normal({elements}, dtype=np.float32)
got = want + np.float32(1e-6)
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
times = []
for _ in range({reps}):
    t = time.perf_counter()
    _, failure = gauntlet.compare({{"name": "y"}}, got, want, {{"atol": 1e-3, "rtol": 1e-3, "norm_rtol": 1e-4}})
    times.append(time.perf_counter() - t)
    assert failure is None, failure
print(json.dumps({{"median_s": statistics.median(times), "min_s": min(times), "peak_rss_gib_before": base / 2**20,
                  "peak_rss_gib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20}}))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--elements", type=int, default=100_000_000)
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args()
    from ksearch_harness import gauntlet

    rows = {"elements": args.elements, "chunk": gauntlet.COMPARE_CHUNK, "python": sys.version.split()[0]}
    rows["chunked"] = one(args.elements, gauntlet.COMPARE_CHUNK, args.reps)
    rows["one_pass"] = one(args.elements, 1 << 62, args.reps)
    rows["one_pass_over_chunked"] = rows["one_pass"]["median_s"] / rows["chunked"]["median_s"]
    print(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Ranks a stored run's passing evaluations two ways: by their own speedup over the baseline (the
baseline timed beside them) and by the rule `ksearch` ranks its best node by since the baseline's
times are kept in the tree: each evaluation's speedup counts only as high as both its own
baseline and the baseline's typical time (per workload, the median of its times; `ksearch` takes
them beside the tree's solutions, this script beside every passing attempt, a superset) allow.
For runs stored before those times were kept, whose trees cannot apply the rule, this reads them
from the attempt records.

    python3 bench/rerank_typical.py RUN_DIR [--top 8]
"""
import argparse
import json
import math
import os
import sqlite3
import statistics


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("run_dir")
    ap.add_argument("--top", type=int, default=8)
    args = ap.parse_args()
    db = sqlite3.connect(f"file:{os.path.join(args.run_dir, 'run.sqlite')}?mode=ro", uri=True)
    rows, baseline = [], {}
    for rnd, node, data in db.execute("SELECT round, node, data FROM attempts WHERE status = 'passed' ORDER BY round"):
        result = (json.loads(data).get("evaluation") or {}).get("result") or {}
        own, base = {}, {}
        for w in result.get("workloads", []):
            for t in w.get("timings", []):
                if t["role"] == "candidate":
                    own[w["name"]] = t["stats"]["median_ms"]
                elif t["role"] == "baseline":
                    base[w["name"]] = t["stats"]["median_ms"]
        if own and set(own) == set(base):
            rows.append((rnd, node, own, base))
            for w, ms in base.items():
                baseline.setdefault(w, []).append(ms)
    typical = {w: statistics.median(v) for w, v in baseline.items() if len(v) >= 3}

    def geomean(xs):
        return math.exp(sum(math.log(x) for x in xs) / len(xs))
    ranked = []
    for rnd, node, own, base in rows:
        mine = geomean([base[w] / own[w] for w in own])
        at_typical = geomean([typical[w] / own[w] for w in own]) if all(w in typical for w in own) else mine
        ranked.append((min(mine, at_typical), mine, at_typical, rnd, node, own, base))
    print("typical baseline (ms):", {w: round(v, 4) for w, v in typical.items()},
          "from", {w: len(v) for w, v in baseline.items()}, "evaluations")
    print(f"{'round':>5} {'node':>4} {'own':>7} {'typical':>7} {'ranked':>7}  candidate ms / baseline ms")
    for r in sorted(ranked, key=lambda r: -r[1])[: args.top]:
        ranks, mine, at_typical, rnd, node, own, base = r
        times = ", ".join(f"{w} {own[w]:.3f}/{base[w]:.3f}" for w in own)
        print(f"{rnd:>5} {node:>4} {mine:>7.3f} {at_typical:>7.3f} {ranks:>7.3f}  {times}")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""The old evaluator (one worker process that also ran the candidate) against the new one (a
judge and sandboxed runners), on honest kernels: each CPU task's seed, evaluated alternately by
the two binaries, REPS times each, in one run. Reports, per task and workload, new/old for the
candidate's and the baseline's median per-call times (they must agree within noise: the new
evaluator must not make honest kernels slower or faster), and new/old for the wall time of an
evaluation.

    python3 bench/eval_old_new.py OLD_KSEARCH NEW_KSEARCH OUT.json [REPS] [TASK[:WORKLOAD] ...]

A task may name one workload (`cpu/matmul:small`): only that one is evaluated.

The old binary is built from commit 97eb33f (the last before the judge/runner split):
    git worktree add /tmp/ksearch-old 97eb33f && (cd /tmp/ksearch-old && cargo build --release)
"""

import json
import math
import statistics
import subprocess
import sys
import time

TASKS = ["cpu/softmax", "cpu/linear_recurrence", "cpu/matmul"]


def evaluate(binary, task):
    task, _, workload = task.partition(":")
    t0 = time.perf_counter()
    args = [binary, "eval", task, "--json"] + (["--workload", workload] if workload else [])
    p = subprocess.run(args, capture_output=True, text=True, timeout=1800)
    wall = time.perf_counter() - t0
    if p.returncode != 0:
        raise SystemExit(f"{binary} eval {task} failed: {p.stderr}")
    j = json.loads(p.stdout)
    if j["status"] != "passed":
        raise SystemExit(f"{binary} eval {task}: {j['status']}: {j['message']}")
    return wall, {w["name"]: (w["latency_ms"]["median"], w["baseline_latency_ms"]["median"]) for w in j["workloads"]}


def gmean(xs):
    return math.exp(sum(math.log(x) for x in xs) / len(xs))


def main():
    old, new, out = sys.argv[1:4]
    reps = int(sys.argv[4]) if len(sys.argv) > 4 else 3
    tasks = sys.argv[5:] or TASKS
    raw = {t: {"old": [], "new": []} for t in tasks}
    for r in range(reps):
        for t in tasks:
            # Alternate which goes first, so drift hits both alike.
            order = [("old", old), ("new", new)] if r % 2 == 0 else [("new", new), ("old", old)]
            for name, binary in order:
                wall, w = evaluate(binary, t)
                raw[t][name].append({"wall_s": wall, "workloads": w})
                print(f"rep {r + 1} {t:<22} {name}: wall {wall:6.1f} s  " + "  ".join(f"{k} {v[0]:.4f}/{v[1]:.4f} ms" for k, v in w.items()), flush=True)
    summary = {}
    print(f"\n{'task':<22} {'workload':<10} {'candidate new/old':>18} {'baseline new/old':>17}")
    cand_all, base_all, wall_all = [], [], []
    for t in tasks:
        summary[t] = {"workloads": {}}
        for w in raw[t]["old"][0]["workloads"]:
            c = [n["workloads"][w][0] / o["workloads"][w][0] for n, o in zip(raw[t]["new"], raw[t]["old"])]
            b = [n["workloads"][w][1] / o["workloads"][w][1] for n, o in zip(raw[t]["new"], raw[t]["old"])]
            summary[t]["workloads"][w] = {"candidate_new_over_old": gmean(c), "baseline_new_over_old": gmean(b), "candidate_ratios": c, "baseline_ratios": b}
            cand_all += c
            base_all += b
            print(f"{t:<22} {w:<10} {gmean(c):>18.3f} {gmean(b):>17.3f}")
        walls = [n["wall_s"] / o["wall_s"] for n, o in zip(raw[t]["new"], raw[t]["old"])]
        wall_all += walls
        summary[t]["wall_new_over_old"] = gmean(walls)
        summary[t]["wall_s"] = {"old": statistics.median(x["wall_s"] for x in raw[t]["old"]), "new": statistics.median(x["wall_s"] for x in raw[t]["new"])}
        print(f"{t:<22} {'wall':<10} {gmean(walls):>18.3f}   (median {summary[t]['wall_s']['old']:.1f} s old, {summary[t]['wall_s']['new']:.1f} s new)")
    summary["all"] = {"candidate_new_over_old": gmean(cand_all), "baseline_new_over_old": gmean(base_all), "wall_new_over_old": gmean(wall_all)}
    print(f"\nall: candidate {gmean(cand_all):.3f}, baseline {gmean(base_all):.3f}, wall {gmean(wall_all):.3f} (new/old, geometric means)")
    with open(out, "w") as f:
        json.dump({"reps": reps, "summary": summary, "raw": raw}, f, indent=1)


if __name__ == "__main__":
    main()

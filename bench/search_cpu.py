#!/usr/bin/env python3
"""The builtin proposer on the built-in CPU tasks: 30 rounds each, single-threaded.

For each task this runs `ksearch run cpu/<task> --model builtin --iterations 30`, then re-measures
the run's best kernel against the task's seed side by side (`ksearch eval --against seed.c`, one
worker, interleaved), so the speedup over the seed is a paired measurement and not only the
search's own estimate. It also reports the orchestrator's share of the run's wall time.

    cargo build --release && python3 bench/search_cpu.py [--tasks matmul softmax linear_recurrence]
"""
import argparse
import json
import os
import subprocess
import sys
import time

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
TARGETS = {"matmul": 8.0, "softmax": 2.0, "linear_recurrence": 2.0}


def run(cmd):
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tasks", nargs="+", default=list(TARGETS))
    ap.add_argument("--iterations", type=int, default=30)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--binary", default=os.path.join(ROOT, "target", "release", "ksearch"))
    ap.add_argument("--runs-dir", default=os.path.join(ROOT, "bench", "runs"))
    args = ap.parse_args()
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    rows = []
    for task in args.tasks:
        run_dir = os.path.join(args.runs_dir, f"{task}-{stamp}")
        t0 = time.perf_counter()
        summary = json.loads(run([args.binary, "run", f"cpu/{task}", "--model", "builtin",
                                  "--iterations", str(args.iterations), "--seed", str(args.seed),
                                  "--run-dir", run_dir, "--json", "--quiet"]))
        wall = time.perf_counter() - t0
        tree = json.loads(run([args.binary, "tree", run_dir, "--json"]))
        best = next(n for n in tree["nodes"] if n["id"] == summary["best"]["node"])
        best_src = os.path.join(run_dir, "artifacts", best["solution"]["source_hash"])
        best_c = os.path.join(run_dir, "best.c")
        with open(best_src) as f, open(best_c, "w") as g:
            g.write(f.read())
        seed_c = os.path.join(ROOT, "tasks", "cpu", task, "seed.c")
        check = json.loads(run([args.binary, "eval", f"cpu/{task}", best_c, "--against", seed_c, "--json"]))
        rows.append((task, summary, wall, check))
        print(f"{task}: done in {wall:.0f} s", file=sys.stderr)

    print(f"ksearch run cpu/<task> --model builtin --iterations {args.iterations} --seed {args.seed}")
    print(f"{'task':<18} {'rounds':>6} {'nodes':>5} {'best node':<44} {'search: vs seed':>15} "
          f"{'paired: vs seed':>15} {'vs baseline':>11} {'target':>7} {'orch. %':>7} {'wall s':>7}")
    ok = True
    for task, s, wall, check in rows:
        paired = check["speedup_vs_against"]
        target = TARGETS.get(task)
        met = paired is not None and target is not None and paired >= target
        ok &= met
        title = f"{s['best']['node']}: {s['best']['title']}"[:44]
        print(f"{task:<18} {s['rounds']:>6} {s['nodes']:>5} {title:<44} {s['best']['speedup_vs_seed']:>14.2f}× "
              f"{paired:>14.2f}× {check['speedup']:>10.2f}× {target:>6.0f}× {100 * s['orchestrator_fraction']:>6.2f}% {wall:>7.0f}")
        per = ", ".join(f"{w['name']} {w['latency_ms']['median']:.4f} ms" for w in check["workloads"])
        print(f"{'':<18} best kernel: {per}; baseline: {check['baseline']}")
    print("targets:", "all met" if ok else "NOT all met")
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Rounds per hour with several evaluations at once (`--jobs`), and whether a candidate measures
the same when its evaluation shares the machine (issue 44).

For each `--jobs` value (and each repeat), runs one builtin search of `--iterations` rounds on
the task and workloads given, then reads its run store:

- rounds per hour: the rounds after the seed over the time from the seed's end to the run's end
  (the seed is measured once, before any round, whatever `--jobs` says), and over the run's
  whole wall time;
- per candidate: its speedup over the baseline (both timed in its own evaluation). The same
  candidate (the same source) is often evaluated by the runs of each `--jobs` value; the ratio
  of its speedups between two runs says whether sharing the machine changed what it measures.
  Two runs of the same `--jobs` (the repeats) say how much such a ratio moves by noise alone.

The runs go one after another in the order given, repeated: `--jobs 1 2 --repeat 2` runs 1, 2,
1, 2, so a change of the machine's load over time falls on both.

    cargo build --release
    python3 bench/scale/rounds_per_hour.py --task cpu/softmax --jobs 1 2 --iterations 24 \
        --out bench/results/scale-cpu-2026-12-07/softmax.json
    # through Slurm (a cluster whose nodes see this checkout; .ci/slurm-one-node starts one):
    python3 bench/scale/rounds_per_hour.py --executor slurm --jobs 1 2 ...
    # on a GPU machine (the lead's): an MLX or torch task, its workload, its target
    python3 bench/scale/rounds_per_hour.py --task mlx/attention --workload decode \
        --jobs 1 2 --iterations 16 -- --target cuda

Flags after `--` go to `ksearch run` as they are.
"""
import argparse
import json
import math
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")


def load_avg() -> float:
    with open("/proc/loadavg") as f:
        return float(f.read().split()[0])


def read_run(run_dir: str) -> dict:
    db = sqlite3.connect(os.path.join(run_dir, "run.sqlite"))
    attempts = []
    for rnd, status, speedup, source_hash, data in db.execute(
        "select round, status, speedup, source_hash, data from attempts order by round"
    ):
        evaluation = json.loads(data).get("evaluation") or {}
        attempts.append({
            "round": rnd,
            "status": status,
            "speedup": speedup,
            "source_hash": source_hash,
            "wall_s": evaluation.get("wall_s"),
        })
    finished = [json.loads(d) for (d,) in db.execute(
        "select data from events where kind = 'evaluation_finished' order by id")]
    db.close()
    return {"attempts": attempts, "finished": finished}


def one_run(args, jobs: int, extra: list) -> dict:
    run_dir = tempfile.mkdtemp(prefix=f"scale-j{jobs}-", dir=args.runs_dir)
    os.rmdir(run_dir)
    cmd = [args.binary, "run", args.task, "--model", "builtin", "--iterations",
           str(args.iterations), "--seed", str(args.seed), "--jobs", str(jobs),
           "--executor", args.executor, "--run-dir", run_dir, "--json", "--quiet"]
    for w in args.workload:
        cmd += ["--workload", w]
    cmd += extra
    load_before = load_avg()
    t0 = time.time()
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, cwd=args.cwd).stdout
    wall = time.time() - t0
    summary = json.loads(out)
    rec = read_run(run_dir)
    seed = next(a for a in rec["attempts"] if a["round"] == 0)
    rounds = [a for a in rec["attempts"] if a["round"] > 0 and a["status"] is not None]
    # From the seed's end: the seed's own evaluation time after the run's start is taken off
    # (the world model and the run's setup stay in, as they would for any run).
    after_seed = summary["wall_s"] - (seed["wall_s"] or 0.0)
    return {
        "jobs": jobs,
        "run_dir": run_dir,
        "command": " ".join(cmd),
        "rounds": len(rounds),
        "wall_s": summary["wall_s"],
        "process_wall_s": wall,
        "seed_wall_s": seed["wall_s"],
        "rounds_per_hour": 3600.0 * len(rounds) / summary["wall_s"],
        "rounds_per_hour_after_seed": 3600.0 * len(rounds) / after_seed,
        "eval_s": summary["eval_s"],
        "mean_round_evaluation_s": statistics.mean(a["wall_s"] for a in rounds if a["wall_s"]),
        "best_speedup": summary["best"]["speedup"],
        "load_1m_before": load_before,
        "load_1m_after": load_avg(),
        "candidates": {a["source_hash"]: a["speedup"] for a in rounds
                       if a["status"] == "passed" and a["speedup"]},
        "finished": rec["finished"],
    }


def paired_log_ratios(a: dict, b: dict) -> list:
    """log(speedup in b / speedup in a) of every candidate both runs measured."""
    common = sorted(set(a["candidates"]) & set(b["candidates"]))
    return [math.log(b["candidates"][h] / a["candidates"][h]) for h in common]


def describe(logs: list) -> dict:
    if not logs:
        return {"candidates": 0}
    return {
        "candidates": len(logs),
        "geomean_ratio": math.exp(statistics.mean(logs)),
        "median_ratio": math.exp(statistics.median(logs)),
        "min_ratio": math.exp(min(logs)),
        "max_ratio": math.exp(max(logs)),
        "mean_abs_log": statistics.mean(abs(x) for x in logs),
    }


def main() -> int:
    argv = sys.argv[1:]
    extra = []
    if "--" in argv:
        i = argv.index("--")
        argv, extra = argv[:i], argv[i + 1:]
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--task", default="cpu/softmax")
    ap.add_argument("--workload", action="append", default=[],
                    help="repeatable; every workload of the task when none")
    ap.add_argument("--jobs", nargs="+", type=int, default=[1, 2])
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--iterations", type=int, default=24)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--executor", default="local", choices=["local", "slurm"])
    ap.add_argument("--binary", default=os.path.join(ROOT, "target", "release", "ksearch"))
    ap.add_argument("--runs-dir", default=os.path.join(ROOT, "bench", "runs"))
    ap.add_argument("--cwd", default=ROOT, help="where ksearch runs (its ksearch.toml)")
    ap.add_argument("--out", help="the raw results, JSON")
    args = ap.parse_args(argv)
    os.makedirs(args.runs_dir, exist_ok=True)

    runs = []
    for rep in range(args.repeat):
        for jobs in args.jobs:
            r = one_run(args, jobs, extra)
            r["repeat"] = rep
            runs.append(r)
            print(f"--jobs {jobs} (repeat {rep}): {r['rounds']} rounds in {r['wall_s']:.1f} s, "
                  f"{r['rounds_per_hour_after_seed']:.0f} rounds/h after the seed, "
                  f"{r['mean_round_evaluation_s']:.2f} s per evaluation, "
                  f"load {r['load_1m_before']:.2f}→{r['load_1m_after']:.2f}", file=sys.stderr)

    by_jobs = {j: [r for r in runs if r["jobs"] == j] for j in args.jobs}
    base = args.jobs[0]
    summary = {"task": args.task, "workloads": args.workload, "executor": args.executor,
               "iterations": args.iterations, "extra": extra, "jobs": {}}
    for j, rs in by_jobs.items():
        rph = [r["rounds_per_hour_after_seed"] for r in rs]
        entry = {
            "rounds_per_hour_after_seed": rph,
            "rounds_per_hour_whole_run": [r["rounds_per_hour"] for r in rs],
            "mean_rounds_per_hour_after_seed": statistics.mean(rph),
        }
        # Noise: the same --jobs run twice. Effect: against the first --jobs value.
        noise = [x for a in rs for b in rs if a is not b and a["repeat"] < b["repeat"]
                 for x in paired_log_ratios(a, b)]
        entry["speedups_same_jobs_repeated"] = describe(noise)
        if j != base:
            logs = [x for a in by_jobs[base] for b in rs for x in paired_log_ratios(a, b)]
            entry[f"speedups_vs_jobs_{base}"] = describe(logs)
            entry[f"throughput_vs_jobs_{base}"] = (
                statistics.mean(rph) / summary["jobs"][base]["mean_rounds_per_hour_after_seed"])
        summary["jobs"][j] = entry

    print(json.dumps(summary, indent=2))
    if args.out:
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        with open(args.out, "w") as f:
            json.dump({"summary": summary, "runs": runs}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())

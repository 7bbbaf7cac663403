#!/usr/bin/env python3
"""The MLX evaluator's wall time, before and after a change, on the same candidate files: each file
evaluated by the OLD and the NEW binary alternately, REPS times each, with the same short timing
flags as bench/mlx_space_h200.sh, in one run on one GPU. Reports per file the wall of one
evaluation, its phases (compile, check, timing) and the candidate's speedup over the baseline for
both binaries (the speedups must agree within noise: a cheaper evaluator must not change what it
measures).

    python3 bench/mlx_eval_wall.py OLD NEW OUT.json REPS TASK=FILE [TASK=FILE ...]

TASK is an MLX task's name without `mlx/` (e.g. selective_state_update); PYTHONPATH must reach
MLX (on the H200: /tmp/site, see bench/mlx_space_h200.sh)."""

import json
import statistics
import subprocess
import sys
import time

QUICK = ["--seeds", "1", "--min-runs", "5", "--min-time-ms", "50", "--warmup-ms", "20", "--max-time-ms", "3000", "--target", "cuda"]


def evaluate(binary, task, file):
    t0 = time.perf_counter()
    p = subprocess.run([binary, "eval", f"mlx/{task}", file, "--json", *QUICK], capture_output=True, text=True, timeout=1800)
    wall = time.perf_counter() - t0
    try:
        j = json.loads(p.stdout)
    except json.JSONDecodeError:
        return {"wall_s": wall, "status": "no result", "message": p.stderr[-400:]}
    return {
        "wall_s": wall,
        "status": j["status"],
        "message": j["message"],
        "speedup": j.get("speedup"),
        "phases_s": j.get("time_s"),
        "workloads": {w["name"]: {"candidate_ms": (w.get("latency_ms") or {}).get("median"), "baseline_ms": (w.get("baseline_latency_ms") or {}).get("median")} for w in j.get("workloads", [])},
    }


def main():
    old, new, out, reps = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    pairs = [a.split("=", 1) for a in sys.argv[5:]]
    runs = []
    for task, file in pairs:
        for rep in range(reps):
            for which, binary in (("old", old), ("new", new)):
                r = evaluate(binary, task, file)
                r.update({"task": task, "file": file, "binary": which, "rep": rep})
                runs.append(r)
                print(f"{task:24} {file:28} {which:3} {r['status']:10} wall {r['wall_s']:7.1f} s  speedup {r.get('speedup') or 0:8.3f}  {r.get('phases_s')}", flush=True)
    summary = []
    for task, file in pairs:
        mine = [r for r in runs if r["task"] == task and r["file"] == file]
        med = {w: statistics.median(r["wall_s"] for r in mine if r["binary"] == w) for w in ("old", "new")}
        sp = {w: [r.get("speedup") for r in mine if r["binary"] == w and r.get("speedup")] for w in ("old", "new")}
        row = {"task": task, "file": file, "wall_old_s": med["old"], "wall_new_s": med["new"], "wall_new_over_old": med["new"] / med["old"],
               "speedup_old": statistics.median(sp["old"]) if sp["old"] else None, "speedup_new": statistics.median(sp["new"]) if sp["new"] else None}
        summary.append(row)
        print(json.dumps(row))
    with open(out, "w") as f:
        json.dump({"reps": reps, "flags": QUICK, "runs": runs, "summary": summary}, f, indent=1)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Summarise the JSON that bench/mlx_h200.sh wrote: status and per-workload latency of every
seed and baseline evaluation, and the harness-vs-direct check of MLX's SDPA."""
import glob
import json
import os
import sys

out = sys.argv[1]
direct = {}
p = os.path.join(out, "sdpa-direct.json")
if os.path.exists(p) and os.path.getsize(p):
    direct = json.load(open(p))
for path in sorted(glob.glob(os.path.join(out, "*.json"))):
    name = os.path.basename(path)[:-5]
    if name == "sdpa-direct":
        continue
    try:
        j = json.load(open(path))
    except json.JSONDecodeError:
        print(f"{name}: no result; stderr: {open(path[:-5] + '.err').read()[-2000:]}")
        continue
    sp = j.get("speedup")
    print(f"\n{name}: {j['status']} — {j['message'][:300]}")
    print(f"  baseline: {j['baseline']}; speedup over it: {sp:.3f}×" if sp else f"  baseline: {j['baseline']}")
    print(f"  {'workload':<14} {'status':<10} {'max abs err':>11} {'norm rel':>9} {'candidate ms':>13} {'baseline ms':>12} {'direct SDPA ms':>15} {'harness/direct':>15}")
    for w in j["workloads"]:
        c = w.get("latency_ms") or {}
        b = w.get("baseline_latency_ms") or {}
        d = direct.get(w["name"]) if name == "attention-seed" else None
        ratio = f"{b['median'] / d:.3f}" if d and b else ""
        print(f"  {w['name']:<14} {w['status']:<10} {w.get('max_abs_err') or 0:>11.2e} {w.get('norm_rel_err') or 0:>9.2e} "
              f"{c.get('median', float('nan')):>13.4f} {b.get('median', float('nan')):>12.4f} {d or float('nan'):>15.4f} {ratio:>15}")
    for cmp in j.get("comparisons", []):
        print(f"  compared with {cmp['label']}: candidate is {cmp['speedup']:.2f}× faster")

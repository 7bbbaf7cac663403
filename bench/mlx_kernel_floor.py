#!/usr/bin/env python3
"""Reads Nsight Compute's CSV of bench/mlx_kernel_floor.sh (each profiled launch's duration and
DRAM bytes) and says how close the selective state update's own GPU time comes to its memory
floor at batch 16 (issue 11's target: 70%).

    python3 bench/mlx_kernel_floor.py NCU.csv [RATED_GB_PER_S [HBM_MIB]]   (prints one JSON object)

The floor is the batch-16 f32 state read and written once (2 × 16 × 2048 × 16 × 4 bytes; the
other inputs and the output add 3% and are left out, which makes the floor harder to reach) in
the time a plain copy of that state takes in the same run (`floor_copy`): the bandwidth a kernel
of that size reaches on this GPU. With RATED_GB_PER_S, also at the GPU's rated bandwidth. With
HBM_MIB (the launcher's --hbm-mib), the HBM bandwidth a large copy (`floor_hbm_copy`) reaches:
the measured bandwidth that other floors (the scan's) are quoted at. Launches are told apart by kernel name, and the state update's two batches
by the DRAM bytes each moved (batch 16 moves 16 times the state of batch 1). Where the launcher
also ran points of the task's space (--points), `points` gives each batch-16 kernel, told apart
by its name (its threads per channel and vector width) and its block size, against the floor.
Accepts ncu's "details" layout (a row per metric: Metric Name, Metric Unit, Metric Value) and its
"raw" one (a column per metric), with --print-units base (ns, bytes)."""

import csv
import io
import json
import statistics
import sys

STATE_BYTES_B16 = 16 * 2048 * 16 * 4
METRICS = ("gpu__time_duration.sum", "dram__bytes_read.sum", "dram__bytes_write.sum")


def number(text):
    return float(text.replace(",", ""))


def launches(text):
    """{launch ID: {"name": kernel name, metric: value}} from ncu's CSV (lines before its header,
    the profiled program's own output and ncu's ==PROF== notes, are skipped)."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith('"ID"')), None)
    if start is None:
        raise SystemExit("no Nsight Compute CSV header (a line starting with \"ID\") in the input")
    out = {}
    for row in csv.DictReader(io.StringIO("\n".join(lines[start:]))):
        if not row.get("ID", "").strip().isdigit():
            continue  # the raw layout's units row
        launch = out.setdefault(int(row["ID"]), {"name": row["Kernel Name"], "block": row.get("Block Size", "")})
        if "Metric Name" in row:
            if row["Metric Name"] in METRICS:
                launch[row["Metric Name"]] = number(row["Metric Value"])
        else:
            for m in METRICS:
                if row.get(m):
                    launch[m] = number(row[m])
    return out


def moved(launch):
    """DRAM bytes a launch read and wrote."""
    return launch["dram__bytes_read.sum"] + launch["dram__bytes_write.sum"]


def summary(found, rated_gb_per_s=None, hbm_bytes=None):
    groups = {}
    for launch in found.values():
        if not all(m in launch for m in METRICS):
            continue
        name = launch["name"]
        kind = ("hbm_copy" if "floor_hbm_copy" in name else "copy" if "floor_copy" in name
                else "state_update" if "state_update" in name else None)
        if kind:
            groups.setdefault(kind, []).append(launch)
    if "copy" not in groups or "state_update" not in groups:
        raise SystemExit(f"need launches of floor_copy and of the state update; found kernels {sorted({v['name'] for v in found.values()})}")
    # Batch 16 moves about 16 times batch 1's bytes: split the state update's launches at the
    # geometric middle of the least and the most any of them moved.
    least, most = min(map(moved, groups["state_update"])), max(map(moved, groups["state_update"]))
    cut = (least * most) ** 0.5
    b1 = [x for x in groups["state_update"] if moved(x) < cut]
    b16 = [x for x in groups["state_update"] if moved(x) >= cut]
    # Only the export runs batch 1: with points beside it, its batch-16 launches are those of its
    # kernel and block size.
    export = {(x["name"], x["block"]) for x in b1}
    kinds = {"copy": groups["copy"], "hbm_copy": groups.get("hbm_copy", []), "state_update_b1": b1,
             "state_update_b16": [x for x in b16 if not export or (x["name"], x["block"]) in export]}
    out = {}
    for kind, xs in kinds.items():
        if not xs:
            continue
        ns = statistics.median(x["gpu__time_duration.sum"] for x in xs)
        b = statistics.median(moved(x) for x in xs)
        out[kind] = {"launches": len(xs), "median_ns": ns, "median_dram_bytes": b, "gb_per_s": b / ns}
    if "state_update_b16" not in out:
        raise SystemExit("no batch-16 launches of the state update")
    # The copy moves the floor's bytes (the batch-16 state read and written): its time is the
    # floor's time at the bandwidth a kernel of this size reaches here (DRAM bytes say less
    # when written lines are still in L2 as the kernel ends).
    floor_ns = out["copy"]["median_ns"]
    out["floor"] = {"bytes": 2 * STATE_BYTES_B16, "floor_ns": floor_ns, "copy_gb_per_s": 2 * STATE_BYTES_B16 / floor_ns,
                    "b16_fraction_of_floor": floor_ns / out["state_update_b16"]["median_ns"]}
    if "hbm_copy" in out and hbm_bytes:
        # A copy of hbm_bytes, read and written: the HBM bandwidth a kernel reaches here.
        out["hbm"] = {"bytes_moved": 2 * hbm_bytes, "median_ns": out["hbm_copy"]["median_ns"],
                      "gb_per_s": 2 * hbm_bytes / out["hbm_copy"]["median_ns"]}
    points = {}
    for x in b16:
        points.setdefault((x["name"].split("(")[0], x["block"]), []).append(x["gpu__time_duration.sum"])
    if len(points) > 1:
        rows = [{"kernel": name, "block": block, "launches": len(ns), "median_ns": statistics.median(ns),
                 "fraction_of_floor": floor_ns / statistics.median(ns)} for (name, block), ns in points.items()]
        out["points"] = sorted(rows, key=lambda r: r["median_ns"])
    if rated_gb_per_s:
        rated_ns = 2 * STATE_BYTES_B16 / rated_gb_per_s
        out["floor"].update(rated_gb_per_s=rated_gb_per_s, rated_floor_ns=rated_ns,
                            b16_fraction_of_rated_floor=rated_ns / out["state_update_b16"]["median_ns"])
    return out


def main():
    with open(sys.argv[1]) as f:
        found = launches(f.read())
    rated = float(sys.argv[2]) if len(sys.argv) > 2 and sys.argv[2] else None
    hbm_bytes = int(sys.argv[3]) * 2**20 if len(sys.argv) > 3 else None
    print(json.dumps(summary(found, rated, hbm_bytes), indent=1))


if __name__ == "__main__":
    main()

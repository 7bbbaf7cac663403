#!/usr/bin/env bash
# The harness's timing of mx.fast.scaled_dot_product_attention against a direct MLX measurement,
# repeated: `ksearch eval mlx/attention baseline.py` (SDPA as the candidate, timed by the harness
# beside itself as the baseline) and bench/mlx_direct_sdpa.py, alternately, `REPS` times.
# Device, after the install step of bench/mlx_h200.sh:  bash bench/mlx_sdpa_check.sh
set -uo pipefail
export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
K=${KSEARCH:-.device/bin/ksearch}
OUT=${OUT:-/tmp/ksearch-bench}
REPS=${REPS:-2}
mkdir -p "$OUT"
for i in $(seq 1 "$REPS"); do
  "$K" eval mlx/attention tasks/mlx/attention/baseline.py --target cuda --json --seeds 1 > "$OUT/sdpa-harness-$i.json"
  python3 bench/mlx_direct_sdpa.py > "$OUT/sdpa-direct-$i.json"
done
python3 - "$OUT" "$REPS" <<'PY'
import json, math, sys
out, reps = sys.argv[1], int(sys.argv[2])
print(f"{'workload':<14}" + "".join(f" {'harness '+str(i):>10} {'direct '+str(i):>10} {'ratio':>7}" for i in range(1, reps + 1)))
logs = []
for w in json.load(open(f"{out}/sdpa-direct-1.json")):
    row = f"{w:<14}"
    for i in range(1, reps + 1):
        h = next(x for x in json.load(open(f"{out}/sdpa-harness-{i}.json"))["workloads"] if x["name"] == w)
        # The candidate and the baseline are both SDPA: take the mean of the two medians.
        hm = (h["latency_ms"]["median"] + h["baseline_latency_ms"]["median"]) / 2
        d = json.load(open(f"{out}/sdpa-direct-{i}.json"))[w]
        logs.append(math.log(hm / d))
        row += f" {hm:>10.4f} {d:>10.4f} {hm / d:>7.3f}"
    print(row)
print(f"geometric mean of harness/direct: {math.exp(sum(logs) / len(logs)):.3f}; worst: {math.exp(max(logs, key=abs)):.3f}")
PY

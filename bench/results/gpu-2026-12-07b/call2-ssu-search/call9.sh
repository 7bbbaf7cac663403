#!/usr/bin/env bash
# Issue 11's state update: the builtin search of its space (now with `loads_first`), its export's
# own GPU time under Nsight Compute against the copy floor, then the space's points likewise.
set -u
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
mkdir -p .device/bin
xz -dc .device/binxz/ksearch.xz > .device/bin/ksearch && chmod +x .device/bin/ksearch
K=.device/bin/ksearch
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv > "$OUT/gpu.csv"
cat "$OUT/gpu.csv"
python3 -c 'import mlx.core as mx; print(mx.device_info())'
start=$SECONDS
QUICK=(--seeds 1 --min-runs 5 --min-time-ms 50 --warmup-ms 20 --max-time-ms 3000 --target cuda)
rd=/tmp/ssu/run-selective_state_update
mkdir -p /tmp/ssu
timeout -s INT ${SEARCH_S:-230} "$K" run mlx/selective_state_update --model builtin --iterations 200 --time ${SEARCH_TIME:-180s} \
  --seed 0 --run-dir "$rd" --json "${QUICK[@]}" > "$OUT/run-ssu.json" 2> "$OUT/run-ssu.err"
echo "run exit $? after $((SECONDS - start)) s"
"$K" tree "$rd" > "$OUT/tree-ssu.txt" 2>&1
"$K" report "$rd" -o "$OUT/report-ssu.html" > /dev/null 2>&1
"$K" export "$rd" -o /tmp/ssu/export-selective_state_update > "$OUT/export-ssu.txt" 2>&1; echo "export exit $?"
tar czf "$OUT/ssu-run.tgz" -C /tmp/ssu .
python3 -c "import json,sys; j=json.load(open(sys.argv[1])); b=j['best']; print(j['task'], 'stop', j['stop_reason'], 'rounds', j['rounds'], 'best', b['node'], b['title'], 'speedup', round(b['speedup'], 3), 'vs seed', round(b['speedup_vs_seed'], 3), 'wall', round(j['wall_s']))" "$OUT/run-ssu.json" || tail -5 "$OUT/run-ssu.err"
tail -25 "$OUT/tree-ssu.txt"
mkdir -p "$OUT/floor-export" "$OUT/floor-points"
OUT=$OUT/floor-export NCU_S=100 LAUNCHES=80 EXPORT=/tmp/ssu/export-selective_state_update bash bench/mlx_kernel_floor.sh > /dev/null 2>&1
echo "floor of the export, exit $? after $((SECONDS - start)) s"; cat "$OUT/floor-export/kernel-floor.json"
left=$(( ${CALL_S:-560} - (SECONDS - start) - 20 ))
n=$(ls .device/ssu-points/*.py | wc -l); echo "points: $n, $left s left"
OUT=$OUT/floor-points NCU_S=$left LAUNCHES=$(( (n + 4) * 15 + 40 )) EXPORT=/tmp/ssu/export-selective_state_update POINTS=.device/ssu-points \
  bash bench/mlx_kernel_floor.sh > /dev/null 2>&1; echo "floor of the points, exit $?"
python3 - "$OUT/floor-points/kernel-floor.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
for r in j.get("points", [])[:30]: print(r)
PY
tail -3 "$OUT/floor-points/kernel-floor.err"

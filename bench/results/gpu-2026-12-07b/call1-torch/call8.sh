#!/usr/bin/env bash
# Torch judge's wait for a quiet GPU, on a GPU for the first time (commit 64bafd2's fix).
set -u
mkdir -p .device/bin
xz -dc .device/binxz/ksearch.xz > .device/bin/ksearch && chmod +x .device/bin/ksearch
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv > "$OUT/gpu.csv"
cat "$OUT/gpu.csv"
HARD_S=${HARD_S:-330} bash bench/torch_h200.sh faults passed--seed_after_faults nogain--spins_after_done nogain--defers_past_done_M256 nogain--defers_past_done_M4096
timeout ${TS_S:-90} python3 bench/gpu_timeslice.py --out "$OUT/timeslice.json" > "$OUT/timeslice.out" 2>&1; echo "timeslice exit $?"
tail -c 3000 "$OUT/timeslice.out"

#!/usr/bin/env bash
# Mamba-370m end to end on an H200 (issue 12), after the MLX install (.device/mlx2/install.sh; the
# ksearch binary in .device/bin, as for bench/mlx_space_h200.sh), in steps (STEPS, default all
# three; each of the first two fits one device call, and a later step finds what an earlier one
# left in /tmp/ksearch-mamba while the machine stays warm):
#   search  the builtin proposer on mlx/selective_scan for SCAN_TIME (default 3m), then `export`
#           of its best kernel; the same on mlx/selective_state_update for STEP_TIME (default 90s)
#   e2e     bench/mamba_e2e.py with those two exports: mlx-lm as installed, mlx-lm with the
#           exported kernels (checked against it first), mamba.py on PyTorch, side by side, at
#           LENGTHS (default 512,1024,2048,4096; mlx-lm's own prefill takes about 40 s at 4096),
#           then where a decode step and the longest prefill spend their time
#   sweep   the MLX decodes again for each value of OPS_SWEEP (default "20 64 200") of
#           MLX_MAX_OPS_PER_BUFFER (how many operations MLX's CUDA backend puts in one CUDA graph)
# Results (runs, trees, exports, the e2e JSON) are packed into $OUT/mamba-STEP.tgz after each
# step; the e2e lines and the two search summaries are printed.
# Usage: [STEPS="search e2e sweep"] bash bench/mamba_h200.sh
set -uo pipefail
export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
export PYTHONUNBUFFERED=1
K=${KSEARCH:-.device/bin/ksearch}
OUTDIR=${OUT:-/tmp/out}
R=/tmp/ksearch-mamba
mkdir -p "$OUTDIR" "$R"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv > "$R/gpu.csv" 2>&1
QUICK=(--seeds 1 --min-runs 5 --min-time-ms 50 --warmup-ms 20 --max-time-ms 3000 --target cuda)

search() { # search TASK TIME: a builtin run bounded by TIME, then its tree and export
  local task=$1 time=$2
  local rd="$R/run-$task"
  timeout -s INT 400 "$K" run "mlx/$task" --model builtin --hardware h200 --iterations 200 --time "$time" \
    --seed 0 --run-dir "$rd" --json "${QUICK[@]}" > "$R/run-$task.json" 2> "$R/run-$task.err"
  echo "run mlx/$task: exit $?"
  "$K" tree "$rd" > "$R/tree-$task.txt" 2>&1
  "$K" export "$rd" -o "$R/export-$task" > "$R/export-$task.txt" 2>&1
  echo "export mlx/$task: exit $?"
  python3 -c "import json,sys; j=json.load(open(sys.argv[1])); b=j['best']; print(j['task'], 'stop', j['stop_reason'], 'rounds', j['rounds'], 'best', b['node'], b['title'], 'speedup', round(b['speedup'], 3), 'vs seed', round(b['speedup_vs_seed'], 3), 'wall', round(j['wall_s']))" "$R/run-$task.json" 2>/dev/null \
    || tail -5 "$R/run-$task.err"
}

for step in ${STEPS:-search e2e sweep}; do
  case "$step" in
    search)
      search selective_scan "${SCAN_TIME:-3m}"
      search selective_state_update "${STEP_TIME:-90s}"
      ;;
    e2e)
      python3 bench/mamba_e2e.py --scan "$R/export-selective_scan" --step "$R/export-selective_state_update" \
        --out "$R/mamba-e2e.json" --reps "${REPS:-2}" --lengths "${LENGTHS:-512,1024,2048,4096}" 2>&1 | tee "$R/mamba-e2e.log"
      ;;
    sweep)
      for ops in ${OPS_SWEEP:-20 64 200}; do
        MLX_MAX_OPS_PER_BUFFER=$ops python3 bench/mamba_e2e.py --scan "$R/export-selective_scan" \
          --step "$R/export-selective_state_update" --decode-only --out "$R/mamba-decode-ops$ops.json" 2>&1 \
          | tee "$R/mamba-decode-ops$ops.log"
      done
      ;;
    *) echo "unknown step $step (search, e2e, sweep)"; exit 2 ;;
  esac
  tar czf "$OUTDIR/mamba-$step.tgz" -C "$R" .
done

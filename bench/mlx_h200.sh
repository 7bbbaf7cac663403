#!/usr/bin/env bash
# The mlx backend on an NVIDIA H200 through MLX's CUDA backend: every CUDA seed and every
# baseline through the full gauntlet (`ksearch eval --target cuda`), and a direct MLX timing of
# mx.fast.scaled_dot_product_attention to cross-check the harness's numbers.
#
# Here:   cargo build --release && mkdir -p .device/bin && cp target/release/ksearch .device/bin/ && strip .device/bin/ksearch
#         bash ../shared/device/stage-mlx-cuda
# Device: call 1, carry [".device/mlx1"]:            bash .device/mlx1/stash.sh
#         call 2, carry [".device/mlx2", ".device/bin"]: bash .device/mlx2/install.sh && bash bench/mlx_h200.sh attention
#         call 3 (warm), carry [".device/bin"]:          bash bench/mlx_h200.sh selective_state_update selective_scan
# Results are written to $OUT (one JSON per evaluation) and summarised on stdout.
set -uo pipefail
export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
export PYTHONUNBUFFERED=1
K=${KSEARCH:-.device/bin/ksearch}
OUT=${OUT:-/tmp/ksearch-bench}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/gpu.txt"
python3 -c 'import mlx.core as mx; print("mlx", mx.__version__, mx.default_device())' | tee "$OUT/mlx.txt"
tasks=("$@")
[ ${#tasks[@]} -gt 0 ] || tasks=(attention selective_state_update selective_scan)
for t in "${tasks[@]}"; do
  echo "== mlx/$t: seed"
  "$K" eval "mlx/$t" --target cuda --json > "$OUT/$t-seed.json" 2> "$OUT/$t-seed.err"; echo "exit $?"
  for b in tasks/mlx/$t/baseline*.py; do
    name=$(basename "$b" .py)
    echo "== mlx/$t: $name as a candidate"
    "$K" eval "mlx/$t" "$b" --target cuda --json --min-time-ms 100 > "$OUT/$t-$name.json" 2> "$OUT/$t-$name.err"; echo "exit $?"
  done
  if [ "$t" = attention ]; then
    echo "== direct timing of mx.fast.scaled_dot_product_attention"
    python3 bench/mlx_direct_sdpa.py > "$OUT/sdpa-direct.json"
  fi
done
python3 bench/mlx_summary.py "$OUT"

#!/usr/bin/env bash
# The selective state update's own GPU time against its memory floor (issue 11: "at least 70% of
# the memory floor for batch 16"), which MLX's per-call cost hides from the evaluator's per-call
# times (bench/mlx_launch_floor.py). Runs that script under Nsight Compute at the GPU's own clocks
# (--clock-control none) with the caches flushed before each kernel (as a decode step finds the
# state: 48 layers' states and the weights pass through L2 between two steps of one layer), and
# writes each profiled launch's duration and DRAM bytes for the state update at batch 1 and 16
# and for a plain copy of the batch-16 state (the bandwidth a kernel of that size reaches on this
# GPU), and for a copy of 256 MiB (the HBM bandwidth a kernel reaches: the scan's floor's).
#   EXPORT=DIR bash bench/mlx_kernel_floor.sh   (on the GPU machine, after .device/mlx2/install.sh;
#   results in $OUT/kernel-floor.csv and $OUT/kernel-floor.json)
# POINTS=DIR adds each rendered point of the space in DIR (`ksearch space check
# mlx/selective_state_update --write DIR`) at batch 16 (raise LAUNCHES: 15 launches a point).
set -eu
OUTDIR=${OUT:-/tmp/out}
mkdir -p "$OUTDIR"
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
MLX_USE_CUDA_GRAPHS=0 timeout "${NCU_S:-240}" "$NCU" --clock-control none --cache-control all \
  --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum \
  -k "regex:state_update|floor_copy|floor_hbm_copy" --launch-count "${LAUNCHES:-80}" --csv --print-units base --log-file "$OUTDIR/kernel-floor.csv" \
  python3 bench/mlx_launch_floor.py --export "$EXPORT" --batches 1 --calls 5 --hbm-mib 256 ${POINTS:+--points "$POINTS"} > "$OUTDIR/kernel-floor.out" 2> "$OUTDIR/kernel-floor.err"
# The rated bandwidth of the GPU in hand (GB/s): H200 4,800; H100 SXM 3,350.
rated=$(nvidia-smi --query-gpu=name --format=csv,noheader | awk '/H200/ {print 4800; exit} /H100/ {print 3350; exit}')
python3 bench/mlx_kernel_floor.py "$OUTDIR/kernel-floor.csv" "$rated" 256 > "$OUTDIR/kernel-floor.json"
cat "$OUTDIR/kernel-floor.json"

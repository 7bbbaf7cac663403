#!/usr/bin/env bash
# The judge's third round and the throughput work (issues 43 and 44) on a lent NVIDIA GPU, old
# binary against new, in steps that each fit one device call:
#   cpu      the c judge on the GPU host's idle CPUs: bench/eval_old_new.py (wall and seed
#            timings, 3 reps) and bench/gate_old_new.py (the gate's verdicts, 2 reps)
#   mlxeval  `eval mlx/attention` (n4096 + n4096_causal) and `eval mlx/selective_state_update`
#            of each task's seed, old and new alternately, REPS times (default 2); the new one's
#            judge profiled
#            (bench/judge_profile)
#   rounds   `ksearch run mlx/attention --model builtin` on n4096 + n4096_causal for ROUND_TIME
#            seconds (default 150) each, old then new: rounds made and each round's wall
#   hostile  bench/mlx_hostile.py against mlx/selective_state_update (b16), new then old (the old
#            one only on the attacks named in OLD_ONLY, where set)
#   rebound  the torch runner's wait rebound by a module (bench/torch_faults/sync_rebound.py) and
#            defers_past_done at M256, with longer timing (MIN_RUNS=20, MAX_TIME_MS=8000), new and
#            (the rebound one) ksearch-prev, the binary before the runner's wait was the C
#            function; then a FlashInfer-Bench definition (.device/fi/*.json) imported without
#            workloads by the new binary and its seed evaluated
#   paged    `eval mlx/paged_attention` of its seed and of bench/mlx_paged_decode.py (every
#            workload, against the gathered-pages SDPA baseline)
#   torch    bench/torch_h200.sh faults (new; the attacks on timing and the seed after them), the
#            helper-process attack with the old binary, and bench/gpu_short_streams.py
# The binaries travel xz-compressed in .device/bin, or $BIN (ksearch.xz: new, ksearch-old.xz: old,
# ksearch-prev.xz: the one before the last change); MLX
# from .device/mlx2 (see ../shared/device/stage-mlx-cuda). Results in $OUT/STEP.tgz.
# Usage: bash bench/gpu_round3.sh STEP
set -uo pipefail
step=$1
B=/tmp/ksb
mkdir -p "$B"
for f in ksearch ksearch-old ksearch-prev; do
  [ -f "${BIN:-.device/bin}/$f.xz" ] || continue
  [ -x "$B/$f" ] || { xz -dc "${BIN:-.device/bin}/$f.xz" > "$B/$f" && chmod +x "$B/$f"; }
done
K=$B/ksearch
OLD=$B/ksearch-old
if [ "$step" != cpu ] && [ "$step" != torch ] && [ "$step" != rebound ]; then
  bash .device/mlx2/install.sh > /dev/null || exit 3
  export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
R=/tmp/round3-$step
mkdir -p "$R"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv > "$R/gpu.csv" 2>&1
cat "$R/gpu.csv"
ms() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }
case "$step" in
  cpu)
    python3 bench/eval_old_new.py "$OLD" "$K" "$R/eval_old_new.json" 3 cpu/softmax:small cpu/softmax:rows4k \
      cpu/linear_recurrence cpu/matmul:small cpu/matmul:skinny | tee "$R/eval_old_new.txt"
    python3 bench/gate_old_new.py "$OLD" "$K" "$R/gate_old_new.json" 2 small | tee "$R/gate_old_new.txt"
    ;;
  mlxeval)
    for i in $(seq 1 "${REPS:-2}"); do
      for b in "$OLD" "$K"; do
        n=$(basename "$b")
        prof=()
        [ "$b" = "$K" ] && prof=(env JUDGE_PROFILE_OUT="$R/judge-profile.jsonl" PYTHONPATH="$PWD/bench/judge_profile:$PYTHONPATH")
        s=$(date +%s%N)
        "${prof[@]}" "$b" eval mlx/attention --target cuda --workload n4096 --workload n4096_causal --json > "$R/attn-$n-$i.json" 2> "$R/attn-$n-$i.err"
        echo "attention $n $i $(ms "$s") ms" | tee -a "$R/wall.txt"
        s=$(date +%s%N)
        "${prof[@]}" "$b" eval mlx/selective_state_update --target cuda --json > "$R/ssu-$n-$i.json" 2> "$R/ssu-$n-$i.err"
        echo "selective_state_update $n $i $(ms "$s") ms" | tee -a "$R/wall.txt"
      done
    done
    for f in "$R"/*.json; do
      python3 -c "import json,sys; j=json.load(open(sys.argv[1])); print(sys.argv[1].rsplit('/',1)[1], j['status'], j.get('time_s'), [(w['name'], w['latency_ms']['median'], w['latency_ms']['runs'], w['baseline_latency_ms']['median']) for w in j['workloads'] if w.get('latency_ms')])" "$f" 2>/dev/null | tee -a "$R/summary.txt"
    done
    ;;
  rounds)
    rt=${ROUND_TIME:-150}
    for b in "$OLD" "$K"; do
      n=$(basename "$b")
      s=$(date +%s%N)
      timeout -s INT $((rt + 60)) "$b" run mlx/attention --model builtin --target cuda --workload n4096 \
        --workload n4096_causal --time "${rt}s" --iterations 100 --run-dir "$R/runs-$n" > "$R/run-$n.txt" 2>&1
      echo "$n: $(ms "$s") ms" | tee -a "$R/wall.txt"
      tail -5 "$R/run-$n.txt"
      "$b" tree "$R"/runs-"$n"/* > "$R/tree-$n.txt" 2>&1
      head -30 "$R/tree-$n.txt"
    done
    ;;
  hostile)
    for b in "$K" "$OLD"; do
      n=$(basename "$b")
      only=()
      [ "$b" = "$OLD" ] && [ -n "${OLD_ONLY:-}" ] && only=(env ONLY="$OLD_ONLY")
      timeout 280 "${only[@]}" python3 bench/mlx_hostile.py "$b" mlx/selective_state_update cuda "$R/hostile-$n" b16 | tee "$R/hostile-$n.txt"
    done
    ;;
  rebound)
    export MIN_RUNS=20 MAX_TIME_MS=8000
    KSEARCH="$K" OUT="$R/new" bash bench/torch_h200.sh faults nogain--sync_rebound nogain--defers_past_done_M256 2>&1 | tail -8
    [ -x "$B/ksearch-prev" ] && KSEARCH="$B/ksearch-prev" OUT="$R/prev" bash bench/torch_h200.sh faults nogain--sync_rebound 2>&1 | tail -4
    unset MIN_RUNS MAX_TIME_MS
    for d in .device/fi/*.json; do
      [ -f "$d" ] || continue
      n=$(basename "$d" .json)
      "$K" import flashinfer-bench "$d" --output "$R/$n" > "$R/import-$n.txt" 2>&1
      s=$(date +%s%N)
      timeout 150 "$K" eval "$R/$n" --target cuda --json > "$R/eval-$n.json" 2> "$R/eval-$n.err"
      echo "eval $n: rc $? in $(ms "$s") ms" | tee -a "$R/wall.txt"
      python3 -c "import json,sys; j=json.load(open(sys.argv[1])); print(j['status'], j.get('time_s'), [(w['name'], w.get('latency_ms', {}).get('median'), w.get('baseline_latency_ms', {}).get('median')) for w in j['workloads']])" "$R/eval-$n.json"
    done
    ;;
  paged)
    for c in seed bench/mlx_paged_decode.py; do
      n=$(basename "$c" .py)
      arg=()
      [ "$c" != seed ] && arg=("$c")
      s=$(date +%s%N)
      timeout 240 "$K" eval mlx/paged_attention "${arg[@]}" --target cuda --json > "$R/paged-$n.json" 2> "$R/paged-$n.err"
      echo "paged $n: rc $? in $(ms "$s") ms" | tee -a "$R/wall.txt"
      python3 -c "import json,sys; j=json.load(open(sys.argv[1])); print(j['status'], j.get('speedup'), [(w['name'], w.get('latency_ms', {}).get('median'), w.get('baseline_latency_ms', {}).get('median')) for w in j['workloads']])" "$R/paged-$n.json"
    done
    ;;
  torch)
    OUT_SAVE=${OUT:-}
    KSEARCH="$K" OUT="$R/new" bash bench/torch_h200.sh faults incorrect--child_queues_kernels incorrect--writes_input \
      nogain--spins_after_done nogain--defers_past_done_M256 nogain--remembers_answers passed--seed_after_faults 2>&1 | tail -40
    KSEARCH="$OLD" OUT="$R/old" bash bench/torch_h200.sh faults incorrect--child_queues_kernels 2>&1 | tail -10
    OUT=$OUT_SAVE
    timeout 120 python3 bench/gpu_short_streams.py "$R/short_streams.json" | tee "$R/short_streams.txt"
    ;;
esac
tar czf "$OUT/$step.tgz" -C /tmp "round3-$step" 2>/dev/null
ls -la "$OUT"

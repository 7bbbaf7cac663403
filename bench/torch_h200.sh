#!/usr/bin/env bash
# The torch backend on an NVIDIA H200 (torch 2.11, triton 3.6, nvcc 13 preinstalled; no cargo), in
# steps that each fit one device call (well under 9 minutes of wall time):
#   evals [TASK...]  every built-in torch task's seed (or the TASKs named) with `ksearch eval
#                    --target cuda --json`, short timing: against its baselines and comparisons
#                    (EVAL_TIMEOUT, default 90, is each evaluation's --timeout in seconds;
#                    EVAL_ARGS adds arguments to each, e.g. "--workload small")
#   faults [NAME...] torch/gemm_bf16 candidates from bench/torch_faults/ that must come to a
#                    stated status (an illegal address, out of memory, a kernel that never ends,
#                    a written input: the gauntlet on the GPU), answers remembered by set, a
#                    kernel left spinning after "done" and kernels left to finish after it
#                    and torch.cuda.synchronize's C function rebound (each: no gain over its
#                    honest twin, or `incorrect`), a helper process
#                    that queues short kernels after every call (`incorrect`), a `.cu` through
#                    load_cu and a load_inline extension (both must pass), and a Triton point of
#                    the GEMM space; with NAMEs (`<expected>--<candidate>`), only those
#   dobench          the timing cross-check: bench/torch_do_bench.py times the same kernels with
#                    triton.testing.do_bench and with the harness (agreement within 5% asked on
#                    kernels of 50 us and more)
#   tma              the GEMM space's Hopper knobs on torch/gemm_bf16's M4096: TMA tile loads
#                    against pointer loads, and persistent programs against one program a tile,
#                    each evaluated `--against` its twin (and against cuBLAS), for the best point
#                    of the 2026-12-05 search and the tile Triton's tutorial starts from on
#                    Hopper, rendered and compiled ahead of time by `ksearch space check
#                    --hardware h200 --write`
#   search           the builtin proposer on torch/gemm_bf16's M4096 workload (4096^3 bf16, the
#                    Triton space; target: 0.8x of cuBLAS), stopped by SEARCH_TIME (default
#                    6m30s) and, as Ctrl-C would, by BUDGET_S (default 470); WINDOW sets --window
#                    (a cycle's attempts without improvement before it ends); then tree, report and
#                    export. It resumes the run in $RUNS/gemm_bf16 (default .device/runs) when one
#                    is there: carry it back from an earlier call's tgz to go on
# The ksearch binary is .device/bin/ksearch (a release build made where cargo is; KSEARCH
# overrides); PYTHON (default python3) is the Python with torch; TARGET=cpu tries the evals and
# dobench steps on PyTorch's CPU build where no GPU is (a test of the script, no GPU number). Each step writes exactly two
# files to ${OUT:-/tmp/out}: torch-STEP.tgz (every raw result) and torch-STEP.txt (the summary it
# also prints). Record results in bench/RESULTS.md with the date, the GPU and these commands.
# Usage: bash bench/torch_h200.sh STEP [ARGS]
set -uo pipefail
cd "$(dirname "$0")/.."
K=${KSEARCH:-.device/bin/ksearch}
PY=${PYTHON:-python3}
# `cpu` (PyTorch's CPU build) only to try the script where no GPU is: no number from it counts.
TARGET=${TARGET:-cuda}
step=${1:?usage: bash bench/torch_h200.sh evals|faults|dobench|tma|search [ARGS]}
shift
OUTDIR=${OUT:-/tmp/out}
work=$OUTDIR/torch-$step
summary=$OUTDIR/torch-$step.txt
rm -rf "$work"
mkdir -p "$work"
started=$SECONDS
# Short but honest timing: one seed for the check, at least 5 samples per contender.
# MIN_RUNS and MAX_TIME_MS (defaults 5 and 3000) lengthen it where a call is long.
QUICK=(--seeds 1 --min-runs "${MIN_RUNS:-5}" --min-time-ms 50 --warmup-ms 20 --max-time-ms "${MAX_TIME_MS:-3000}" --target "$TARGET" --python "$PY")

if [ ! -x "$K" ]; then
  echo "no ksearch binary at $K: build one where cargo is (cargo build --release --locked -p ksearch), copy it to .device/bin/ksearch and carry .device/bin" | tee "$summary"
  exit 2
fi

{
  echo "== torch_h200.sh $step $* · $(date -u +%FT%TZ)"
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv,noheader 2>&1
  "$PY" -c 'import sys, torch, triton; print("python", sys.version.split()[0], "torch", torch.__version__, "triton", triton.__version__, "cuda", torch.version.cuda, torch.cuda.get_device_name() if torch.cuda.is_available() else "NO GPU")' 2>&1
  (nvcc --version 2>/dev/null || /usr/local/cuda/bin/nvcc --version 2>/dev/null || echo "nvcc: not found") | tail -1
  "$K" --version 2>&1
} > "$work/machine.txt"
cat "$work/machine.txt" > "$summary"

# `ksearch eval` of CANDIDATE (empty: the seed) on TASK into $work/$dir/NAME.{json,err}, held to
# LIMIT seconds of wall time (default 100); not started where it could run past HARD_S (default
# 520) seconds of the step, so that every step ends inside one device call.
eval_one() {
  local dir=$1 name=$2 task=$3 candidate=$4 limit=${LIMIT:-100}
  shift 4
  mkdir -p "$work/$dir"
  if [ $((SECONDS - started + limit)) -gt "${HARD_S:-520}" ]; then
    echo "skipped for time: $dir/$name" | tee -a "$work/skipped.txt"
    return 1
  fi
  timeout -s KILL "$limit" "$K" eval "$task" ${candidate:+"$candidate"} --json "$@" \
    > "$work/$dir/$name.json" 2> "$work/$dir/$name.err"
}

case "$step" in
  evals)
    if [ $# -gt 0 ]; then
      tasks=("$@")
    else
      mapfile -t tasks < <("$K" tasks --json | "$PY" -c 'import json, sys; print("\n".join(t["name"] for t in json.load(sys.stdin) if t["backend"] == "torch"))')
    fi
    for task in "${tasks[@]}"; do
      eval_one evals "${task//\//_}" "$task" "" "${QUICK[@]}" --timeout "${EVAL_TIMEOUT:-90}" ${EVAL_ARGS:-}
    done
    "$PY" bench/torch_summary.py evals "$work/evals" | tee -a "$summary"
    [ -f "$work/skipped.txt" ] && tee -a "$summary" < "$work/skipped.txt"
    ;;
  faults)
    task=tasks/torch/gemm_bf16
    f=bench/torch_faults
    # With names (e.g. `faults nogain--spins_after_done`), only those evaluations run.
    want() { [ ${#only[@]} -eq 0 ] || [[ " ${only[*]} " == *" $1 "* ]]; }
    only=("$@")
    M256=(--workload M256)
    want incorrect--writes_input && eval_one faults incorrect--writes_input "$task" "$f/writes_input.py" "${M256[@]}" "${QUICK[@]}" --no-timing
    want runtime_error--out_of_memory && eval_one faults runtime_error--out_of_memory "$task" "$f/out_of_memory.py" "${M256[@]}" "${QUICK[@]}" --no-timing
    want crashed--illegal_address && eval_one faults crashed--illegal_address "$task" "$f/illegal_address.py" "${M256[@]}" "${QUICK[@]}" --no-timing
    # The evaluation's own limit ends it; the outer one only guards the step.
    want timeout--hang && eval_one faults timeout--hang "$task" "$f/hang.py" "${M256[@]}" "${QUICK[@]}" --timeout 45
    # After the faults, a fresh evaluation: the seed still passes.
    want passed--seed_after_faults && eval_one faults passed--seed_after_faults "$task" "" "${M256[@]}" "${QUICK[@]}"
    want passed--load_cu && eval_one faults passed--load_cu "$task" "$f/load_cu.py" "${M256[@]}" "${QUICK[@]}"
    # Answers remembered by set and a sample of values, against its honest twin: `nogain`.
    sed 's/^HITS = True/HITS = False/' "$f/remembers_answers.py" > "$work/remembers_twin.py"
    want nogain--remembers_answers && eval_one faults nogain--remembers_answers "$task" "$f/remembers_answers.py" "${M256[@]}" "${QUICK[@]}" \
      --against "$work/remembers_twin.py"
    # A kernel left spinning after "done", against its twin: `nogain` (the judge waits it out).
    sed 's/^SPIN = True/SPIN = False/' "$f/spins_after_done.py" > "$work/spins_twin.py"
    want nogain--spins_after_done && eval_one faults nogain--spins_after_done "$task" "$f/spins_after_done.py" "${M256[@]}" "${QUICK[@]}" \
      --against "$work/spins_twin.py"
    # Kernels left to finish after "done" (synchronize replaced), against its twin: `nogain` (the
    # judge counts the time the GPU stays busy after the batch as the batch's), at M256 and M4096.
    sed 's/^DEFER = True/DEFER = False/' "$f/defers_past_done.py" > "$work/defers_twin.py"
    for w in M256 M4096; do
      want nogain--defers_past_done_$w && eval_one faults nogain--defers_past_done_$w "$task" "$f/defers_past_done.py" \
        --workload $w "${QUICK[@]}" --against "$work/defers_twin.py"
    done
    # The C function behind torch.cuda.synchronize rebound (the runner waits by the builtin it
    # took before the module loaded), against its twin: `nogain`.
    sed 's/^REBIND = True/REBIND = False/' "$f/sync_rebound.py" > "$work/rebound_twin.py"
    want nogain--sync_rebound && eval_one faults nogain--sync_rebound "$task" "$f/sync_rebound.py" "${M256[@]}" "${QUICK[@]}" \
      --against "$work/rebound_twin.py"
    # A helper process that queues a stream of short kernels after every call (a child of the
    # runner: the pause does not stop kernels already queued, and the quiet test does not see
    # short ones): `incorrect`, the helper alive when a batch is to be timed.
    want incorrect--child_queues_kernels && eval_one faults incorrect--child_queues_kernels "$task" "$f/child_queues_kernels.py" "${M256[@]}" "${QUICK[@]}"
    want passed--triton_point && "$PY" bench/torch_do_bench.py --render-point "$work/triton_point.py" >> "$summary"
    want passed--triton_point && eval_one faults passed--triton_point "$task" "$work/triton_point.py" "${QUICK[@]}"
    want passed--load_inline && LIMIT=240 eval_one faults passed--load_inline "$task" "$f/load_inline.py" "${M256[@]}" "${QUICK[@]}" --timeout 230
    if [ $# -eq 0 ] && [ $((SECONDS - started)) -lt 440 ]; then
      timeout -s KILL 60 "$K" space check "$task" --hardware h200 --limit 16 > "$work/space-check.txt" 2>&1
      tail -2 "$work/space-check.txt" | tee -a "$summary"
    fi
    "$PY" bench/torch_summary.py faults "$work/faults" | tee -a "$summary"
    [ -f "$work/skipped.txt" ] && tee -a "$summary" < "$work/skipped.txt"
    ;;
  dobench)
    timeout -s KILL "${HARD_S:-520}" "$PY" bench/torch_do_bench.py --ksearch "$K" --target "$TARGET" --out "$work/dobench" \
      > "$work/do_bench.txt" 2> "$work/do_bench.err"
    cat "$work/do_bench.txt" >> "$summary"
    cat "$work/do_bench.txt"
    tail -3 "$work/do_bench.err"
    ;;
  tma)
    task=tasks/torch/gemm_bf16
    for point in "block_m=256 block_n=128 block_k=32 warps=8 stages=5 group_m=1" \
                 "block_m=128 block_n=256 block_k=64 warps=8 stages=3 group_m=8"; do
      name=$(echo "$point" | tr -d 'a-z_=' | tr ' ' '-')
      sets=()
      for knob in $point; do sets+=(--set "$knob"); done
      for variant in "tma=0 persistent=0" "tma=1 persistent=0" "tma=1 persistent=1"; do
        v=$(echo "$variant" | tr -d 'a-z_=' | tr -d ' ')
        extra=()
        for knob in $variant; do extra+=(--set "$knob"); done
        "$K" space check "$task" --hardware h200 "${sets[@]}" "${extra[@]}" --limit 1 --write "$work/points-$name-$v" \
          >> "$work/space-check.txt" 2>&1
      done
      # TMA loads against pointer loads, and persistent programs against one program a tile.
      LIMIT=150 eval_one tma "tma-$name" "$task" "$(ls "$work/points-$name-10"/*.py)" --workload M4096 "${QUICK[@]}" \
        --against "$(ls "$work/points-$name-00"/*.py)" --timeout 140
      LIMIT=150 eval_one tma "persistent-$name" "$task" "$(ls "$work/points-$name-11"/*.py)" --workload M4096 "${QUICK[@]}" \
        --against "$(ls "$work/points-$name-10"/*.py)" --timeout 140
    done
    grep -E "^\(|failed" "$work/space-check.txt" | tee -a "$summary"
    "$PY" bench/torch_summary.py evals "$work/tma" | tee -a "$summary"
    [ -f "$work/skipped.txt" ] && tee -a "$summary" < "$work/skipped.txt"
    ;;
  search)
    rd=${RUNS:-.device/runs}/gemm_bf16
    common=(--time "${SEARCH_TIME:-6m30s}" --json)
    if [ -f "$rd/run.sqlite" ]; then
      echo "resuming $rd" >> "$summary"
      timeout -s INT "${BUDGET_S:-470}" "$K" resume "$rd" --iterations "${ITERS:-60}" "${common[@]}" \
        > "$work/search.json" 2> "$work/search.err"
    else
      timeout -s INT "${BUDGET_S:-470}" "$K" run torch/gemm_bf16 --model builtin --hardware h200 \
        --workload M4096 --iterations "${ITERS:-60}" --seed 0 ${WINDOW:+--window "$WINDOW"} --run-dir "$rd" "${common[@]}" "${QUICK[@]}" \
        > "$work/search.json" 2> "$work/search.err"
    fi
    echo "search exit $?" >> "$summary"
    "$K" tree "$rd" > "$work/tree.txt" 2>&1
    "$K" report "$rd" -o "$work/report.html" -q 2>> "$work/search.err"
    "$K" export "$rd" -o "$work/export" > "$work/export.txt" 2>&1
    tar czf "$work/run-gemm_bf16.tgz" -C "$(dirname "$rd")" "$(basename "$rd")"
    "$PY" bench/torch_summary.py search "$work/search.json" | tee -a "$summary"
    tail -25 "$work/tree.txt" | tee -a "$summary"
    tail -3 "$work/search.err"
    ;;
  *)
    echo "unknown step $step (evals, faults, dobench, tma or search)" >&2
    exit 2
    ;;
esac

tar czf "$OUTDIR/torch-$step.tgz" -C "$OUTDIR" "torch-$step"
rm -rf "$work"
echo "== $step done in $((SECONDS - started)) s: $OUTDIR/torch-$step.tgz, $summary"

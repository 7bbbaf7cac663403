#!/usr/bin/env bash
# The builtin proposer on the three MLX template spaces, on an H200 through MLX's CUDA backend,
# in steps that fit one device call each (MLX installed in /tmp/site by
# .device/mlx2/install.sh; the ksearch binary in .device/bin, as for bench/mlx_h200_security.sh):
#   points TASK         render a sample of the task's space and evaluate each point once
#                       (`ksearch eval`, one seed, short timing): does every kernel compile, run
#                       and pass on the GPU?
#   pins TASK          the same for chosen points: POINTS holds them, `;` between points and
#                       spaces between the knob settings of one (`ksearch space check --set`),
#                       e.g. POINTS="mma=1 warps=4;mma=1 warps=8"; knobs not named keep the
#                       space's seed values; WORKLOADS (names, spaces between) limits each
#                       evaluation to those workloads; TAG names the output (pins-TASK-TAG);
#                       AGAINST (a file) is timed beside each point as well (`eval --against`)
#   files TASK          evaluate module files as `pins` evaluates its points: FILES holds their
#                       paths (spaces between); WORKLOADS, TAG and AGAINST as for `pins`
#   graphs TASK         `pins` twice, for the same POINTS: with MLX's CUDA graphs off, as the
#                       evaluator runs its executors, then on (MLX_USE_CUDA_GRAPHS=1), under
#                       which a batch's independent calls may overlap on the GPU
#   search TASK ITERS   start, or resume when the run directory came back from an earlier call,
#                       `ksearch run mlx/TASK --model builtin` for ITERS more rounds, then tree,
#                       report and export; the run directory goes to $OUT to be carried back.
#                       SEARCH_TIME (default 7m) stops starting rounds after that long and
#                       BUDGET_S (default 480) interrupts the run as Ctrl-C would, so that the
#                       device call ends in time; the next `search` resumes it. SEARCH_ARGS
#                       adds arguments to a new run (e.g. "--workload L4096 --window 1");
#                       AGAINST_SEED=1 then evaluates the exported best --against the task's
#                       naive seed (on WORKLOAD only, when set), as one evaluation;
#                       PROFILE=1 has the judge write where each evaluation's time went
#                       (bench/judge_profile) to $OUT/judge-profile.jsonl
# Usage: bash bench/mlx_space_h200.sh STEP TASK [ITERS]   (results in $OUT)
set -uo pipefail
export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
K=${KSEARCH:-.device/bin/ksearch}
step=$1
task=$2
OUTDIR=${OUT:-/tmp/out}
mkdir -p "$OUTDIR"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv > "$OUTDIR/gpu.csv" 2>&1
# Short but honest timing: every workload, one seed for the check, at least 5 samples.
QUICK=(--seeds 1 --min-runs 5 --min-time-ms 50 --warmup-ms 20 --max-time-ms 3000 --target cuda)
# One module file evaluated (WORKLOADS limits it, AGAINST is timed beside it), its JSON beside
# it, and a summary line with each workload's median ms (the file's, the baseline's, AGAINST's).
evaluate() {
  local f=$1 s ms wl=()
  s=$(date +%s%N)
  for w in ${WORKLOADS:-}; do wl+=(--workload "$w"); done
  "$K" eval "mlx/$task" "$f" --json "${QUICK[@]}" "${wl[@]}" ${AGAINST:+--against "$AGAINST"} > "${f%.py}.json" 2> "${f%.py}.err"
  ms=$(( ($(date +%s%N) - s) / 1000000 ))
  python3 -c "import json,sys; j=json.load(open('${f%.py}.json')); print(sys.argv[1], j['status'], round(j.get('speedup') or 0, 3), 'vs against', j.get('speedup_vs_against'), (j.get('message') or '')[:160], sys.argv[2] + ' ms'); [print('   ', w['name'], (w.get('latency_ms') or {}).get('median'), (w.get('baseline_latency_ms') or {}).get('median'), (w.get('against_latency_ms') or {}).get('median')) for w in j.get('workloads', [])]" "$(basename "$f" .py)" "$ms" \
    || echo "$(basename "$f" .py) no result: $(tail -3 "${f%.py}.err")"
}
case "$step" in
  points)
    pts="$OUTDIR/points-$task"
    "$K" space check "mlx/$task" --hardware h200 --limit "${LIMIT:-24}" --write "$pts" > "$OUTDIR/space-check-$task.txt"
    for f in "$pts"/*.py; do
      evaluate "$f"
    done | tee "$OUTDIR/points-$task.txt"
    ;;
  graphs)
    TAG=graphs-off bash "$0" pins "$task"
    MLX_USE_CUDA_GRAPHS=1 TAG=graphs-on bash "$0" pins "$task"
    ;;
  files)
    for f in ${FILES:?FILES names the module files}; do
      evaluate "$f"
    done | tee "$OUTDIR/files-$task${TAG:+-$TAG}.txt"
    ;;
  pins)
    pts="$OUTDIR/pins-$task${TAG:+-$TAG}"
    mkdir -p "$pts"
    IFS=';' read -ra points <<< "${POINTS:?POINTS names the points}"
    for p in "${points[@]}"; do
      sets=()
      for kv in $p; do sets+=(--set "$kv"); done
      dir=$(mktemp -d)
      "$K" space check "mlx/$task" --hardware h200 --limit 1 --no-compile --write "$dir" "${sets[@]}" >> "$OUTDIR/space-check-$task.txt"
      f=$(ls "$dir"/*.py | head -1)
      [ -n "$f" ] || { echo "$p: not rendered"; continue; }
      cp "$f" "$pts/"
      evaluate "$pts/$(basename "$f")"
    done | tee "$OUTDIR/pins-$task${TAG:+-$TAG}.txt"
    ;;
  search)
    iters=$3
    if [ -n "${PROFILE:-}" ]; then
      export JUDGE_PROFILE_OUT="$OUTDIR/judge-profile.jsonl" PYTHONPATH="$PWD/bench/judge_profile:$PYTHONPATH"
    fi
    rd=${RUNS:-.device/runs}/space-$task
    if [ -f "$rd/run.sqlite" ]; then
      timeout -s INT "${BUDGET_S:-480}" "$K" resume "$rd" --iterations "$iters" --time "${SEARCH_TIME:-7m}" --json > "$OUTDIR/search-$task.json" 2> "$OUTDIR/search-$task.err"
    else
      timeout -s INT "${BUDGET_S:-480}" "$K" run "mlx/$task" --model builtin --hardware h200 --iterations "$iters" --time "${SEARCH_TIME:-7m}" --seed 0 \
        --run-dir "$rd" --json "${QUICK[@]}" ${SEARCH_ARGS:-} > "$OUTDIR/search-$task.json" 2> "$OUTDIR/search-$task.err"
    fi
    "$K" tree "$rd" > "$OUTDIR/tree-$task.txt"
    "$K" report "$rd" -o "$OUTDIR/report-$task.html"
    # At most 8 files come back from a device call: what the export and the evaluation against
    # the seed print goes to the search's log.
    { echo "== ksearch export"; "$K" export "$rd" -o "$OUTDIR/export-$task"; } >> "$OUTDIR/search-$task.err" 2>&1
    if [ -n "${AGAINST_SEED:-}" ] && [ -f "$OUTDIR/export-$task/$task/_candidate.py" ]; then
      # The best kernel timed beside the task's naive seed, in one evaluation.
      "$K" eval "mlx/$task" "$OUTDIR/export-$task/$task/_candidate.py" --against "tasks/mlx/$task/seed.py" --json \
        "${QUICK[@]}" ${WORKLOAD:+--workload "$WORKLOAD"} > "$OUTDIR/best-vs-seed-$task.json" 2> /tmp/best-vs-seed.err
      { echo "== best vs seed"; cat /tmp/best-vs-seed.err; } >> "$OUTDIR/search-$task.err"
      python3 -c "import json,sys; j=json.load(open(sys.argv[1])); print('best vs the naive seed:', j['status'], j.get('speedup_vs_against'), [(w['name'], (w.get('latency_ms') or {}).get('median'), (w.get('against_latency_ms') or {}).get('median')) for w in j.get('workloads', [])])" \
        "$OUTDIR/best-vs-seed-$task.json" || tail -3 /tmp/best-vs-seed.err
    fi
    # The export and the run directory as archives.
    tar czf "$OUTDIR/export-$task.tgz" -C "$OUTDIR" "export-$task" && rm -rf "$OUTDIR/export-$task"
    tar czf "$OUTDIR/run-$task.tgz" "$rd"
    grep -E '^(round |stopped|exported)' "$OUTDIR/search-$task.err" | tail -4
    ;;
  *)
    echo "unknown step $step" >&2
    exit 2
    ;;
esac

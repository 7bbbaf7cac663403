#!/usr/bin/env bash
# An LLM-driven run of an mlx task on the GPU (the "model" is bench/scripted_model.py, answering
# with the task's seed: no model is reachable here), then `ksearch export` of its best kernel
# and a GPU call of the exported Python module, checked against the task's reference.
# Device: after bench/mlx_h200.sh's install step, carry [".device/bin"] (and .device/mlx2 on a
# cold machine):  bash bench/mlx_export_h200.sh
set -uo pipefail
export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
K=${KSEARCH:-.device/bin/ksearch}
OUT=${OUT:-/tmp/ksearch-bench}
mkdir -p "$OUT"
T=selective_state_update
python3 bench/scripted_model.py --code tasks/mlx/$T/seed.py --port 8765 & server=$!
sleep 1
"$K" run mlx/$T --model openai:scripted --base-url http://127.0.0.1:8765/v1 --iterations 3 --window 1 \
  --target cuda --run-dir /tmp/mrun --json --min-time-ms 100 > "$OUT/export-run.json"; echo "run exit $?"
kill $server
"$K" tree /tmp/mrun | tee "$OUT/export-tree.txt"
"$K" export /tmp/mrun -o /tmp/mexp --json > "$OUT/export.json"; echo "export exit $?"
ls -R /tmp/mexp
PYTHONPATH=/tmp/mexp:$PYTHONPATH python3 - <<'PY' | tee "$OUT/export-call.txt"
import importlib.util
import numpy as np
import mlx.core as mx
import selective_state_update as exported

spec = importlib.util.spec_from_file_location("reference", "tasks/mlx/selective_state_update/reference.py")
ref = importlib.util.module_from_spec(spec); spec.loader.exec_module(ref)
b, d, n = 4, 2048, 16
rng = np.random.default_rng(7)
f = lambda *s: rng.normal(size=s).astype(np.float32)
state = mx.array(f(b, d, n)); x = mx.array(f(b, d)).astype(mx.float16)
dt = mx.array(rng.uniform(0.001, 0.1, (b, d)).astype(np.float32)).astype(mx.float16)
A = mx.array(rng.uniform(-16, -1, (d, n)).astype(np.float32)); B = mx.array(f(b, n)).astype(mx.float16)
C = mx.array(f(b, n)).astype(mx.float16); D = mx.array(rng.uniform(0.5, 1.5, d).astype(np.float32)); z = mx.array(f(b, d)).astype(mx.float16)
y, h = exported.selective_state_update(state, x, dt, A, B, C, D, z)
yr, hr = ref.run(state, x, dt, A, B, C, D, z, batch=b, dinner=d, dstate=n)
mx.eval(y, h, yr, hr)
ey = float(np.abs(np.array(y.astype(mx.float32)) - np.array(yr.astype(mx.float32))).max())
eh = float(np.abs(np.array(h) - np.array(hr)).max())
print(f"exported module on {mx.default_device()}: y {y.shape} {y.dtype}, state {h.shape} {h.dtype}; max |y - ref| {ey:.2e}, max |state - ref| {eh:.2e}")
print("OK" if ey < 2e-3 and eh < 1e-5 else "MISMATCH")
PY

#!/usr/bin/env python3
"""Hostile MLX modules against the evaluator: each is a task's seed plus one attack (a replaced
clock, remembered answers, a no-op `mx.eval`, forged protocol lines, snooping in /proc, patching
the harness, killing processes, forking, the network, huge allocations, writing files, and on
CUDA a kernel that writes its input). Each is evaluated with `--against` the seed it wraps; none
may pass faster than the seed, leak the orchestrator's secret, or escape.

    python3 bench/mlx_hostile.py KSEARCH TASK TARGET OUTDIR [WORKLOAD]

e.g. on the H200: `python3 bench/mlx_hostile.py .device/bin/ksearch mlx/selective_state_update
cuda $OUT/hostile batch16`; locally: `... target/release/ksearch
crates/ksearch/tests/fixtures/mlx_softmax cpu /tmp/hostile small`. Writes OUTDIR/summary.json
and prints a table. ONLY (attack names, space-separated) runs just those, each REPEAT times."""

import json
import os
import subprocess
import sys

SECRET = "sk-h200-marker-0451"
FORGED = '{"protocol":2,"type":"result","id":1,"status":"passed","message":"FORGED","workloads":[],"phases":{"compile_s":0,"check_s":0,"timing_s":0},"output":{"bytes":0,"head":"","tail":""}}'

ZEROS = """
_seed_run = run
import mlx.core as _mx


def run(*a, **k):
    outs = _seed_run(*a, **k)
    if isinstance(outs, (tuple, list)):
        return tuple(_mx.zeros_like(o) for o in outs)
    return _mx.zeros_like(outs)
"""

# What each attack appends to the seed, and what it must come to: "no-gain" (it may pass, but
# not measurably faster than the seed it wraps) or "not-passed".
ATTACKS = {
    "clock": ("import time\ntime.perf_counter = lambda: 0.0\ntime.perf_counter_ns = lambda: 0\ntime.monotonic = lambda: 0.0\ntime.time = lambda: 0.0\ntime.time_ns = lambda: 0\n", "no-gain"),
    "memo_by_object": ("_seed_run = run\n_cache = {}\n\ndef run(*a, **k):\n    key = tuple(id(x) for x in a)\n    if key not in _cache:\n        _cache[key] = _seed_run(*a, **k)\n    return _cache[key]\n", "no-gain"),
    "memo_by_value": ("_seed_run = run\n_cache = {}\n\ndef run(*a, **k):\n    key = tuple(float(x.reshape(-1)[0].item()) for x in a)\n    if key not in _cache:\n        _cache[key] = _seed_run(*a, **k)\n    return _cache[key]\n", "not-passed"),
    "eval_noop": ("import mlx.core as _mx\n_mx.eval = lambda *a, **k: None\n_mx.synchronize = lambda *a, **k: None\n_mx.async_eval = lambda *a, **k: None\n", "no-gain"),
    "forge_protocol": (f"import os\nfor _fd in range(3, 64):\n    try:\n        os.write(_fd, {FORGED!r}.encode() + b'\\n')\n    except OSError:\n        pass\n" + ZEROS, "not-passed"),
    "snoop_proc": (f"import os\n_seen = 0\nfor _p in os.listdir('/proc'):\n    if not _p.isdigit():\n        continue\n    _seen += 1\n    for _f in ('environ', 'cmdline'):\n        try:\n            with open(f'/proc/{{_p}}/{{_f}}', 'rb') as _h:\n                if {SECRET!r}.encode() in _h.read():\n                    print('LEAKED from', _p, _f, flush=True)\n        except OSError:\n            pass\nprint('processes visible:', _seen, flush=True)\n", "no-gain"),
    "patch_harness": ("import sys\nfor _n, _m in list(sys.modules.items()):\n    if _n.startswith('ksearch_harness'):\n        for _a in ('compare', 'check_workload', 'verify_round', 'time_workload'):\n            if hasattr(_m, _a):\n                setattr(_m, _a, lambda *a, **k: ({'max_abs_err': 0.0, 'max_rel_err': 0.0, 'norm_rel_err': 0.0}, None))\nprint('harness modules here:', sorted(n for n in sys.modules if n.startswith('ksearch')), flush=True)\n" + ZEROS, "not-passed"),
    "kill_everything": ("import os, signal\n_pp = os.getppid()\nif _pp > 1:\n    try:\n        os.kill(_pp, signal.SIGKILL)\n    except OSError as e:\n        print('kill parent refused:', e, flush=True)\nfor _p in os.listdir('/proc'):\n    if _p.isdigit() and int(_p) not in (1, os.getpid()):\n        try:\n            os.kill(int(_p), signal.SIGKILL)\n        except OSError:\n            pass\n", "no-gain"),
    "fork_daemon": ("import os\ntry:\n    if os.fork() == 0:\n        os.setsid()\n        import time\n        time.sleep(120)\n        os._exit(0)\nexcept OSError as e:\n    print('fork refused:', e, flush=True)\n", "no-gain"),
    "network": ("import socket\ntry:\n    socket.create_connection(('127.0.0.1', 22), timeout=1)\n    print('CONNECTED', flush=True)\nexcept OSError as e:\n    print('connect refused:', e, flush=True)\n", "no-gain"),
    "memory": ("try:\n    import numpy as _np\n    _big = _np.ones(48 << 30, dtype=_np.uint8)\n    print('ALLOCATED 48 GiB', flush=True)\nexcept MemoryError:\n    print('allocation refused', flush=True)\n", "no-gain"),
    # Arrays of a trace the module made itself, added to its answer: on MLX 0.32.4 the tracer
    # died of SIGSEGV writing such a graph (issue 43); the judge refuses the answer (`incorrect`).
    "own_trace": ("import mlx.core as _mx\n_kept = []\n_mx.export_function(lambda m: None, lambda a: (_kept.append(a * 0.0) or a,), _mx.zeros((1,)))\n_traced_run = run\n\ndef run(*a, **k):\n    outs = _traced_run(*a, **k)\n    if isinstance(outs, (tuple, list)):\n        return tuple(o + _kept[0].astype(o.dtype) for o in outs)\n    return outs + _kept[0].astype(outs.dtype)\n", "not-passed"),
    "write_files": ("for _path in ('/root/.ksearch-escaped', '/etc/ksearch-escaped', '/opt/ksearch-escaped'):\n    try:\n        with open(_path, 'w') as _f:\n            _f.write('x')\n        print('WROTE', _path, flush=True)\n    except OSError as e:\n        print('write refused:', _path, e, flush=True)\n", "no-gain"),
}

# A CUDA kernel that writes into its input `state` (mlx/selective_state_update only).
WRITE_INPUT = """
_seed_run = run
import mlx.core as _mx
_writer = _mx.fast.cuda_kernel(name="write_input", input_names=["state"], output_names=["o"],
    source="auto p = (float*)state; p[0] = p[0] + 1.0f; o[0] = 0.0f;")


def run(state, *a, **k):
    (o,) = _writer(inputs=[state], grid=(1, 1, 1), threadgroup=(1, 1, 1), output_shapes=[(1,)], output_dtypes=[_mx.float32])
    y, h = _seed_run(state, *a, **k)
    return y, h + 0.0 * o.sum()
"""


# A kernel that tells timed calls from checked ones (a timed call's inputs lie just after the
# last call's, in one round's stacked sets; a check's are drawn apart), keeping its last input's
# address in device memory, and then lets the new state drift by twice its norm tolerance (f32:
# 1e-5): within the 3x bound of comparisons with the baseline, outside the task's own tolerance
# that the one kept timed call is checked at against the reference.
DRIFT_WHEN_TIMED = """
_seed_run = run
import mlx.core as _mx
_telltale = _mx.fast.cuda_kernel(name="drift_when_timed", input_names=["state"], output_names=["f"],
    header="__device__ const char *ksq_last = nullptr; __device__ unsigned long long ksq_calls = 0;",
    source="const char *at = (const char *)state; long long d = at - ksq_last; ksq_last = at; unsigned long long c = ksq_calls++;"
           " f[0] = (c >= 3ULL && d != 0 && d > -(64LL << 20) && d < (64LL << 20)) ? 1.00002f : 1.0f;")


def run(state, *a, **k):
    (f,) = _telltale(inputs=[state], grid=(1, 1, 1), threadgroup=(1, 1, 1), output_shapes=[(1,)], output_dtypes=[_mx.float32])
    y, h = _seed_run(state, *a, **k)
    return y, h * f
"""

# A kernel that writes NaN just past the end of its output (into whatever the allocator put
# there: another call's output or inputs).
WRITE_PAST_OUTPUT = """
_seed_run = run
import mlx.core as _mx
_past = _mx.fast.cuda_kernel(name="write_past_output", input_names=["state"], output_names=["o"],
    source="o[threadIdx.x + 1024] = __int_as_float(0x7fc00000); o[threadIdx.x] = 0.0f;")


def run(state, *a, **k):
    (o,) = _past(inputs=[state], grid=(256, 1, 1), threadgroup=(256, 1, 1), output_shapes=[(1024,)], output_dtypes=[_mx.float32])
    y, h = _seed_run(state, *a, **k)
    return y, h + 0.0 * o[:1].sum()
"""

# A kernel that writes to address 0: the executor's CUDA context is lost.
ILLEGAL_ADDRESS = """
_seed_run = run
import mlx.core as _mx
_bad = _mx.fast.cuda_kernel(name="illegal_address", input_names=["state"], output_names=["o"],
    source="*(volatile float *)0 = 1.0f; o[0] = 0.0f;")


def run(state, *a, **k):
    (o,) = _bad(inputs=[state], grid=(1, 1, 1), threadgroup=(1, 1, 1), output_shapes=[(1,)], output_dtypes=[_mx.float32])
    y, h = _seed_run(state, *a, **k)
    return y, h + 0.0 * o.sum()
"""

# 100 GiB of device memory in a graph's intermediate, which MLX keeps cached in the candidate's
# executor while the task's own code runs beside it: whatever runs out of memory, it must be the
# candidate's evaluation that fails, never the task (a task fault would end a search).
DEVICE_MEMORY_HOG = """
_seed_run = run
import mlx.core as _mx


def run(state, *a, **k):
    y, h = _seed_run(state, *a, **k)
    big = _mx.zeros((100 << 30,), dtype=_mx.uint8) + state.reshape(-1)[:1].astype(_mx.uint8)
    return y, h + 0.0 * big[-1:].astype(_mx.float32).sum()
"""


def main():
    ksearch, task, target, out = sys.argv[1:5]
    workload = sys.argv[5] if len(sys.argv) > 5 else None
    os.makedirs(out, exist_ok=True)
    task_dir = task if os.path.isdir(task) else os.path.join("tasks", task)
    seed_path = os.path.join(task_dir, "seed.py")
    seed = open(seed_path).read()
    attacks = dict(ATTACKS)
    if target == "cuda" and task.endswith("selective_state_update"):
        attacks["cuda_writes_input"] = (WRITE_INPUT, "not-passed")
        attacks["cuda_drift_when_timed"] = (DRIFT_WHEN_TIMED, "not-passed")
        attacks["cuda_write_past_output"] = (WRITE_PAST_OUTPUT, "no-gain")
        attacks["cuda_illegal_address"] = (ILLEGAL_ADDRESS, "not-passed")
        attacks["cuda_device_memory_hog"] = (DEVICE_MEMORY_HOG, "no-gain")
    # ONLY="a b": just those attacks, each REPEAT times (default once).
    only = os.environ.get("ONLY", "").split()
    if only:
        attacks = {k: v for k, v in attacks.items() if k in only}
    attacks = {(f"{k}-{r}" if int(os.environ.get("REPEAT", "1")) > 1 else k): v for k, v in attacks.items() for r in range(int(os.environ.get("REPEAT", "1")))}
    env = dict(os.environ, OPENAI_API_KEY=SECRET)
    rows = []
    for name, (code, expect) in attacks.items():
        path = os.path.join(out, f"{name}.py")
        with open(path, "w") as f:
            f.write(seed + "\n\n# --- attack: " + name + "\n" + code)
        cmd = [ksearch, "eval", task, path, "--against", seed_path, "--target", target, "--json", "--timeout", "300"]
        if workload:
            cmd += ["--workload", workload]
        p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=900)
        text = p.stdout + p.stderr
        with open(os.path.join(out, f"{name}.json"), "w") as f:
            f.write(p.stdout)
        try:
            j = json.loads(p.stdout)
        except ValueError:
            j = {"status": f"error (exit {p.returncode})", "message": p.stderr.strip()[-300:]}
        if "error" in j and "status" not in j:
            j = {"status": f"error (exit {p.returncode})", "message": j["error"][:300]}
        vs_seed = j.get("speedup_vs_against")
        status = j.get("status")
        leaked = SECRET in text or "LEAKED" in text or "CONNECTED" in text or "WROTE" in text or "ALLOCATED" in text or "FORGED" in (j.get("message") or "")
        # Every attack must come to a status of the candidate's: an error of the evaluation (the
        # task's fault, the worker's) would stop a search.
        if status is None or str(status).startswith("error"):
            ok = False
        elif expect == "not-passed":
            ok = status not in ("passed",) and not leaked
        else:
            ok = (status != "passed" or (vs_seed is not None and vs_seed < 1.25)) and not leaked
        rows.append({"attack": name, "expect": expect, "status": status, "vs_seed": vs_seed, "leaked": leaked, "ok": ok,
                     "message": (j.get("message") or "")[:300], "output_head": ((j.get("output") or {}).get("head") or "")[:300],
                     "sandbox": j.get("sandbox")})
        print(f"{name:<20} {status:<14} vs seed {vs_seed if vs_seed is None else round(vs_seed, 3)!s:<8} {'OK' if ok else 'FAIL'}  {(j.get('message') or '')[:110]}", flush=True)
    with open(os.path.join(out, "summary.json"), "w") as f:
        json.dump(rows, f, indent=1)
    bad = [r["attack"] for r in rows if not r["ok"]]
    print(f"{len(rows) - len(bad)} of {len(rows)} attacks held off" + (f"; FAILED: {', '.join(bad)}" if bad else ""))
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()

"""What starting an MLX process costs an evaluation, part by part, on the device it runs on.

An evaluation on an MLX target starts several fresh processes (the judge, a tracer for the
candidate, an executor per contender). This measures, each in fresh interpreters:

- `start`: importing MLX and the first evaluation (which creates the device's context), for 1, 2
  and 4 interpreters started at once (does creating contexts side by side serialise?);
- `kernel`: the first call of a task's seed in a process whose MLX kernel cache
  (`MLX_PTX_CACHE_DIR`) is empty, then in one whose cache the first filled: the difference is
  what compiling the seed's kernel costs a process that may not keep it;
- `warmed`: the seed's first call after a trivial kernel of another name ran first (is the first
  call's cost the process's, or the kernel's?);
- `trace`: `mx.export_function` of the seed on its first workload's shapes, and
  `mx.import_function` plus a first call of that graph in a fresh process (warm cache).

    python3 bench/mlx_start_cost.py [--task tasks/mlx/selective_state_update] > start-cost.json
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

START = """
import time, json
t0 = time.perf_counter()
import mlx.core as mx
t1 = time.perf_counter()
mx.eval(mx.zeros((4,)) + 1)
t2 = time.perf_counter()
print(json.dumps({"import_ms": (t1 - t0) * 1e3, "first_eval_ms": (t2 - t1) * 1e3}))
"""

# argv: task dir, file, mode ("call" or "export" or "import"), graph path
KERNEL = """
import json, sys, time
t0 = time.perf_counter()
import mlx.core as mx
import tomllib
task_dir, file, mode, graph = sys.argv[1:5]
task = tomllib.load(open(task_dir + "/task.toml", "rb"))
w = task["workloads"][0]
axes = {k: int(v) for k, v in w["axes"].items()}
dt = {"f16": mx.float16, "bf16": mx.bfloat16, "f32": mx.float32, "i32": mx.int32}
ins = [mx.random.normal([axes[a] for a in s["shape"]]).astype(dt[s["dtype"]]) for s in task["inputs"]]
mx.eval(ins)
t1 = time.perf_counter()
out = {"workload": w["name"], "setup_ms": (t1 - t0) * 1e3}
if mode == "import":
    fn = mx.import_function(graph)
    t2 = time.perf_counter()
    mx.eval(fn(*ins))
    t3 = time.perf_counter()
    mx.eval(fn(*ins))
    t4 = time.perf_counter()
    out.update(import_ms=(t2 - t1) * 1e3, first_call_ms=(t3 - t2) * 1e3, second_call_ms=(t4 - t3) * 1e3)
else:
    if mode == "warm":
        # A trivial kernel of the harness's own first: does the seed's first call then cost less?
        k = mx.fast.cuda_kernel(name="ksearch_warm", input_names=["a"], output_names=["b"],
                                source="b[threadIdx.x] = a[threadIdx.x] + 1.0f;")
        mx.eval(k(inputs=[mx.zeros((32,))], grid=(32, 1, 1), threadgroup=(32, 1, 1),
                  output_shapes=[(32,)], output_dtypes=[mx.float32])[0])
        out["warm_ms"] = (time.perf_counter() - t1) * 1e3
        t1 = time.perf_counter()
    ns = {"__name__": "seed", "KSEARCH_TARGET": "cuda" if mx.cuda.is_available() else "cpu"}
    exec(compile(open(task_dir + "/" + file).read(), file, "exec"), ns)
    t2 = time.perf_counter()
    def outs(*xs):
        r = ns["run"](*xs, **axes)
        return list(r) if isinstance(r, (tuple, list)) else [r]
    if mode == "export":
        mx.export_function(graph, lambda *xs: tuple(outs(*xs)), *[mx.zeros(x.shape, dtype=x.dtype) for x in ins])
        t3 = time.perf_counter()
        out.update(load_ms=(t2 - t1) * 1e3, export_ms=(t3 - t2) * 1e3)
    else:
        mx.eval(outs(*ins))
        t3 = time.perf_counter()
        mx.eval(outs(*ins))
        t4 = time.perf_counter()
        out.update(load_ms=(t2 - t1) * 1e3, first_call_ms=(t3 - t2) * 1e3, second_call_ms=(t4 - t3) * 1e3)
print(json.dumps(out))
"""


def run_all(codes_envs):
    """Start every (argv, env) at once; their JSON lines and the wall time of the lot."""
    t = time.perf_counter()
    procs = [subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, text=True) for argv, env in codes_envs]
    outs = [json.loads(p.communicate()[0].strip().splitlines()[-1]) for p in procs]
    return outs, (time.perf_counter() - t) * 1e3


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--task", default="tasks/mlx/selective_state_update")
    ap.add_argument("--file", default="seed.py")
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args()
    env = dict(os.environ)
    result = {"task": args.task, "file": args.file, "start": {}, "kernel": [], "trace": []}
    for n in (1, 2, 4):
        rows = []
        for _ in range(args.reps):
            outs, wall = run_all([([sys.executable, "-c", START], env)] * n)
            rows.append({"wall_ms": wall, "first_eval_ms": max(o["first_eval_ms"] for o in outs),
                         "import_ms": max(o["import_ms"] for o in outs)})
        result["start"][str(n)] = {k: round(statistics.median(r[k] for r in rows), 1) for k in rows[0]}
        print("start", n, result["start"][str(n)], file=sys.stderr)
    for _ in range(args.reps):
        with tempfile.TemporaryDirectory() as cache:
            e = dict(env, MLX_PTX_CACHE_DIR=cache)
            graph = os.path.join(cache, "seed.mlxfn")
            argv = [sys.executable, "-c", KERNEL, args.task, args.file]
            cold, _ = run_all([(argv + ["call", graph], e)])
            warm, _ = run_all([(argv + ["call", graph], e)])
            exported, _ = run_all([(argv + ["export", graph], e)])
            imported, _ = run_all([(argv + ["import", graph], e)])
            result["kernel"].append({"empty_cache": cold[0], "filled_cache": warm[0]})
            result["trace"].append({"export": exported[0], "import": imported[0]})
            warmed, _ = run_all([(argv + ["warm", graph], e)])
            result.setdefault("warmed", []).append(warmed[0])
            print("kernel", result["kernel"][-1], "trace", result["trace"][-1], file=sys.stderr)
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()

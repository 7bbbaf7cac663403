"""A profile of the MLX/numpy/torch judge, for benchmarks only: with this folder on PYTHONPATH and
JUDGE_PROFILE_OUT naming a file, the judge (`python3 -m ksearch_harness`, which inherits the
variable; its runners do not) counts and times its requests to runners by op, runner start-ups,
and the evaluation's steps, and appends one JSON line per evaluation to that file:
{"argv": [...], "wall_s": s, "steps": {name: [count, seconds, longest]}}. Nothing else changes."""

import os

OUT = os.environ.get("JUDGE_PROFILE_OUT")

if OUT:
    import functools
    import importlib.abc
    import json
    import sys
    import time

    STEPS = {}

    def note(name, seconds):
        c = STEPS.setdefault(name, [0, 0.0, 0.0])
        c[0] += 1
        c[1] += seconds
        c[2] = max(c[2], seconds)

    def timed(name, f, key=None):
        @functools.wraps(f)
        def wrapper(*args, **kwargs):
            t = time.perf_counter()
            try:
                return f(*args, **kwargs)
            finally:
                note(name if key is None else f"{name}:{key(*args, **kwargs)}", time.perf_counter() - t)
        return wrapper

    def op(_self, header, *_a, **_k):
        return header.get("op")

    def patch(mod):
        name = mod.__name__
        # (Older harnesses lack some of these: whatever is there is timed.)
        if name == "ksearch_harness.link":
            mod.Runner.request = timed("request", mod.Runner.request, op)
            mod.Runner.timed = timed("timed", mod.Runner.timed, op)
            mod.Runner.__init__ = timed("spawn", mod.Runner.__init__, lambda _s, mode, *a, **k: mode)
        elif name == "ksearch_harness.contenders":
            for cls in (mod.GraphContender, mod.DirectContender):
                cls.finish = timed(f"finish:{cls.__name__}", cls.finish)
                if hasattr(cls, "begin"):
                    cls.begin = timed(f"begin:{cls.__name__}", cls.begin)
            mod.Pool.fill = timed("pool_fill", mod.Pool.fill)
        elif name == "ksearch_harness.candidates":
            for f in ("load_namespace", "describe_itself"):
                if hasattr(mod, f):
                    setattr(mod, f, timed(f, getattr(mod, f)))
        elif name == "ksearch_harness.runner":
            mod.export = timed("export", mod.export)
        elif name == "ksearch_harness.timing":
            for f in ("verify_round", "compare"):
                if hasattr(mod, f):
                    setattr(mod, f, timed(f"{f}:timing", getattr(mod, f)))
        elif name == "ksearch_harness.worker":
            for f in ("make_inputs", "check_workload", "time_workload", "compare", "load_module"):
                if hasattr(mod, f):
                    setattr(mod, f, timed(f, getattr(mod, f)))
            evaluate = mod.evaluate

            def evaluated(*args, **kwargs):
                t = time.perf_counter()
                try:
                    return evaluate(*args, **kwargs)
                finally:
                    write(time.perf_counter() - t)
            mod.evaluate = evaluated

    class Finder(importlib.abc.MetaPathFinder):
        def find_spec(self, fullname, path, target=None):
            if not fullname.startswith("ksearch_harness."):
                return None
            for finder in sys.meta_path:
                if finder is self or not hasattr(finder, "find_spec"):
                    continue
                spec = finder.find_spec(fullname, path, target)
                if spec is not None and spec.loader is not None:
                    run = spec.loader.exec_module

                    def exec_module(module, run=run):
                        run(module)
                        patch(module)
                    spec.loader.exec_module = exec_module
                    return spec
            return None

    sys.meta_path.insert(0, Finder())

    def write(wall):
        with open(OUT, "a") as f:
            f.write(json.dumps({"argv": sys.argv, "wall_s": round(wall, 4),
                                "steps": {k: [c, round(s, 4), round(m, 4)] for k, (c, s, m) in sorted(STEPS.items())}}) + "\n")
        STEPS.clear()

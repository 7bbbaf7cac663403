"""A profile of the MLX/numpy/torch judge, for benchmarks only: with this folder on PYTHONPATH and
JUDGE_PROFILE_OUT naming a file, the judge (`python3 -m ksearch_harness`, which inherits the
variable; its runners do not) counts and times its requests to runners by op, runner start-ups,
and the evaluation's steps, and appends one JSON line per evaluation to that file:
{"argv": [...], "wall_s": s, "steps": {name: [count, seconds, longest]}, "timeline": [...]}.
Runners (which find this folder on their PYTHONPATH and MLX_KSEARCH_PROFILE=1 in their
environment, which the judge sets) stamp each answer with when they received the request and
when their interpreter started (`site`) and imported MLX; the timeline lists, for the first answers of each runner, the
wall-clock times (seconds from the evaluation's start) of: the request's arrival, the answer's
departure and its arrival in the judge; `runner_work` gives each runner's own seconds in the
preparation of timed rounds (drawing the round's inputs, poisoning its outputs' memory), as
{runner: {part: [count, seconds]}}. Nothing else changes."""

import os

class Hook:
    """An import hook: after a module whose name `wanted` accepts is executed, `after(module)`
    (and `before(name)` just before)."""

    def __init__(self, wanted, after, before=None):
        self.wanted, self.after, self.before = wanted, after, before

    def find_spec(self, fullname, path, target=None):
        import sys

        if not self.wanted(fullname):
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None and spec.loader is not None:
                run = spec.loader.exec_module

                def exec_module(module, run=run):
                    if self.before:
                        self.before(fullname)
                    run(module)
                    self.after(module)
                spec.loader.exec_module = exec_module
                return spec
        return None


OUT = os.environ.get("JUDGE_PROFILE_OUT")
RUNNER = os.environ.get("MLX_KSEARCH_PROFILE") == "1" and os.environ.get("USER") == "ksearch"

if RUNNER:
    import sys
    import time

    MARKS = {"site": time.time()}

    def patch_runner(mod):
        if mod.__name__ == "ksearch_harness.link":
            send, recv = mod.send, mod.recv
            last = {}

            def recv2(*a, **k):
                got = recv(*a, **k)
                if got is not None:
                    last["op"], last["t"] = got[0].get("op"), time.time()
                return got

            def send2(sock, header, payload=b"", fds=()):
                header = {**header, "_prof": {"req": last.get("op"), "recv": last.get("t"), "sent": time.time(), **MARKS,
                                              "work": WORK}}
                return send(sock, header, payload, fds)
            mod.send, mod.recv = send2, recv2
        elif mod.__name__ == "mlx.core":
            MARKS["mlx"] = time.time()

    def before(fullname):
        MARKS.setdefault(f"import:{fullname}", time.time())

    # Seconds a runner spent in the parts of a timed round's preparation, cumulative: [count, s].
    WORK = {}

    def runner_timed(name, f):
        def wrapper(*args, **kwargs):
            t = time.perf_counter()
            try:
                return f(*args, **kwargs)
            finally:
                c = WORK.setdefault(name, [0, 0.0])
                c[0] += 1
                c[1] = round(c[1] + time.perf_counter() - t, 6)
        return wrapper

    def patch_arrays(mod):
        mod.round_inputs = runner_timed("round_inputs", mod.round_inputs)
        mod.MlxArrays.poison = runner_timed("poison", mod.MlxArrays.poison)

    def patch_any(mod):
        if mod.__name__ == "ksearch_harness.arrays":
            patch_arrays(mod)
        else:
            patch_runner(mod)

    sys.meta_path.insert(0, Hook(lambda n: n in ("ksearch_harness.link", "ksearch_harness.arrays", "mlx.core"), patch_any, before))

if OUT:
    os.environ["MLX_KSEARCH_PROFILE"] = "1"
    import functools
    import json
    import sys
    import time

    STEPS = {}
    TIMELINE = []
    WORK_SEEN = {}
    # Answers kept per runner in the timeline.
    PER_RUNNER = 12

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
            init, receive = mod.Runner.__init__, mod.Runner.receive

            def init2(self, mode, *a, **k):
                t = time.time()
                init(self, mode, *a, **k)
                self._prof = (mode, len([e for e in TIMELINE if e.get("spawned")]), 0)
                TIMELINE.append({"runner": f"{mode}{self._prof[1]}", "spawned": t, "ready": time.time()})

            def receive2(self, *a, **k):
                header, payload = receive(self, *a, **k)
                prof = header.pop("_prof", None) if isinstance(header, dict) else None
                mode, n, count = getattr(self, "_prof", ("?", 0, 0))
                if prof is not None:
                    # The runner's own work so far (its last answer's is its total).
                    WORK_SEEN[f"{mode}{n}"] = prof.pop("work", {})
                if prof is not None and count < PER_RUNNER:
                    self._prof = (mode, n, count + 1)
                    TIMELINE.append({"runner": f"{mode}{n}", "op": header.get("op"), "judge": time.time(), **prof})
                return header, payload
            mod.Runner.__init__ = timed("spawn", init2, lambda _s, mode, *a, **k: mode)
            mod.Runner.receive = receive2
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

    sys.meta_path.insert(0, Hook(lambda n: n.startswith("ksearch_harness."), patch))

    def write(wall):
        t0 = time.time() - wall
        timeline = [{k: (round(v - t0, 4) if isinstance(v, float) and v > 1e9 else v) for k, v in e.items()} for e in TIMELINE]
        with open(OUT, "a") as f:
            f.write(json.dumps({"argv": sys.argv, "wall_s": round(wall, 4),
                                "steps": {k: [c, round(s, 4), round(m, 4)] for k, (c, s, m) in sorted(STEPS.items())},
                                "timeline": timeline, "runner_work": dict(WORK_SEEN)}) + "\n")
        STEPS.clear()
        TIMELINE.clear()
        WORK_SEEN.clear()

"""The judge's side of the contenders of an evaluation: each runs in runners of its own, fresh
for this evaluation. Two kinds, behind one interface:

- `DirectContender` (numpy target): the module runs in a direct runner; inputs lie in shared
  memory the runner maps read-only, outputs in shared memory the judge reads itself.
- `GraphContender` (MLX targets): an untrusted module is traced in a tracer runner (trusted
  modules are traced here, in the judge); the graphs run in an executor runner, where no
  candidate Python runs, so what the executor reports can be believed. Its GPU kernels still run
  only there.
"""

import os

import numpy as np

from . import kernel_cache
from .candidates import CandidateError, CompileError, describe_itself, load_namespace, module_run
from .link import FILE_BYTES, TRACER_FILE_BYTES, Runner, RunnerLost
from .shared import Layout, Region, broken_guard, poison_slot

NP = {"f16": np.float16, "f32": np.float32, "f64": np.float64, "i32": np.int32, "i64": np.int64}


class BadOutput(Exception):
    """The candidate returned something that is not an acceptable output (wrong shape or
    dtype, not an array, modified inputs): `incorrect`, with this message."""


def send_quietly(runner, header, payload=b""):
    """Send without waiting for the answer. A runner lost on the way is reported by the next
    read from it, where its answer is awaited."""
    try:
        runner.send(header, payload)
    except RunnerLost:
        pass


def ask_to_load(contender):
    """A direct or torch contender's `begin()`: ask its runner to load the module, once, without
    waiting; `finish()` reads the answer."""
    if not contender.begun:
        contender.begun = True
        # A trusted module is asked what it runs; a candidate is not (nor believed).
        send_quietly(contender.runner, {"op": "load", "source": contender.source, "describe": contender.trusted})


def shape_of(spec, axes):
    return tuple(int(axes[a]) for a in spec["shape"])


class Settings:
    """What starting runners needs."""

    def __init__(self, target, root_dir, cpus, kernel_cache=None):
        self.target = target
        self.root_dir = root_dir
        # MLX's cache of kernels it compiles at run time: writable to trusted runners only.
        self.kernel_cache = kernel_cache
        self.gpu = target in ("cuda", "metal")
        self.memory = (32 << 30) if self.gpu else (4 << 30)
        self.runner_cpu = cpus[1] if cpus else None
        self.judge_cpu = cpus[0] if cpus else None
        # A GPU runner is not pinned, but it would inherit the judge's one CPU: every runner of
        # an evaluation (tracers, executors, their compiles) then shared it. It runs on the
        # CPUs the judge was given, but the judge's.
        self.gpu_cpus = list(cpus[2]) if cpus and self.gpu else []


# Memory a workload's input sets and output slots may take in the judge on the CPU (the pool's
# inputs, every contender's outputs, a torch runner's copies of the inputs), at most, and at most
# a quarter of the machine's: a batch's size is capped to fit (`cpu_max_calls`).
CPU_POOL_BUDGET = 4 << 30


def set_layout(task, axes, sets=1):
    """The layout of `sets` sets of a workload's inputs and outputs (`shared.Layout`)."""
    from .torch_arrays import STORAGE

    return Layout(sets, [(shape_of(s, axes), STORAGE[s["dtype"]]) for s in task["inputs"]],
                  [(shape_of(s, axes), STORAGE[s["dtype"]]) for s in task["outputs"]])


def runner_file_bytes(task, workloads):
    """The file-size limit of a runner on the CPU: its outputs are a file it writes (`shared.Region`,
    `write_only`), as large as a set's outputs at least."""
    return max([FILE_BYTES] + [set_layout(task, {k: int(v) for k, v in w["axes"].items()}).out_stride for w in workloads])


def cpu_max_calls(task, workload, default, contenders, input_copies=1):
    """Calls a batch may hold on the CPU: as many as CPU_POOL_BUDGET (and a quarter of the
    machine's memory) holds of `input_copies` copies of each set's inputs and `contenders` sets of
    outputs, and as a runner's output file within FILE_BYTES holds; at least one, at most
    `default`. Sizes come from timed batches, which a candidate's speed decides: without this,
    one fast enough (or claiming to be) would have the judge hold `default` sets of any size."""
    axes = {k: int(v) for k, v in workload["axes"].items()}
    layout = set_layout(task, axes)
    per_set = input_copies * layout.in_stride + contenders * layout.out_stride
    try:
        machine = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        machine = 4 * CPU_POOL_BUDGET
    budget = min(CPU_POOL_BUDGET, machine // 4)
    return int(max(1, min(default, budget // max(per_set, 1), FILE_BYTES // max(layout.out_stride, 1))))


class DirectContender:
    """A module run in a direct runner (numpy target). Starting it spawns the runner; `begin()`
    asks it to load the module and `finish()` waits for that (so that several runners start and
    load at once)."""

    def __init__(self, settings, source, role, label, trusted, env=None, file_bytes=FILE_BYTES):
        self.role, self.label, self.trusted = role, label, trusted
        self.settings = settings
        self.source = source
        self.runner = Runner("direct", settings.target, settings.root_dir, False, settings.memory, settings.runner_cpu, env,
                             file_bytes=file_bytes)
        self.confinement = self.runner.confinement
        self.pools = {}
        self.begun = False

    def begin(self):
        ask_to_load(self)

    def finish(self):
        self.begin()
        reply, _ = self.runner.receive()
        if reply["op"] == "compile_error":
            raise CompileError(reply["message"])
        if reply["op"] != "loaded":
            raise CandidateError(reply.get("message", repr(reply)))
        self.description = reply.get("description") if self.trusted else None
        return self

    def cpu_time(self):
        return self.runner.cpu_time()

    def cpu_seconds(self):
        """Its runner's process CPU clock (`Watch`), or None."""
        return self.runner.process_cpu()

    def strays(self):
        """Processes its runner started that are alive (a direct runner may start none)."""
        return self.runner.descendants() if self.runner.allow_fork else []

    def map_pool(self, pool):
        # The outputs' memory, which the runner can only write through a write-only descriptor.
        out = Region(pool.layout.output_region(), write_only=True)
        reply, _ = self.runner.request(
            {"op": "pool", "id": pool.id, "layout": pool.layout.to_json(), "axes": pool.axes, "names": pool.names},
            fds=[pool.inputs.ro_fd, out.wo_fd],
        )
        if reply["op"] != "ready":
            raise self.runner.broke(f"it answered {reply['op']!r} out of turn")
        self.pools[pool.id] = out

    def drop_pool(self, pool):
        out = self.pools.pop(pool.id, None)
        try:
            self.runner.request({"op": "drop", "id": pool.id})
        except RunnerLost:
            pass
        if out is not None:
            out.close()

    def outputs(self, pool, s):
        """Copies of slot `s`'s outputs, read now."""
        return [np.array(v) for v in pool.layout.output_views(self.pools[pool.id].map, s)]

    def call(self, pool, sets, timed):
        """Run on `sets`; the seconds it took, by the judge's clock."""
        for s in sets:
            poison_slot(pool.layout, self.pools[pool.id].map, s)
        header = {"op": "go" if timed else "call", "pool": pool.id, "sets": list(sets)}
        if timed:
            seconds, reply, _ = self.runner.timed(header)
        else:
            seconds, (reply, _) = 0.0, self.runner.request(header)
        op = reply.get("op")
        if op == "bad_output":
            raise BadOutput(reply["message"])
        if op == "error":
            raise CandidateError(reply["message"])
        if op != "done":
            raise self.runner.broke(f"it answered {reply['op']!r} out of turn")
        return seconds

    def check(self, pool, task, workload, seed):
        """Outputs of one call on fresh inputs from `seed`, in set 0, checked for guards."""
        pool.fill(task, workload, 0, seed)
        self.call(pool, [0], False)
        t = broken_guard(pool.layout, self.pools[pool.id].map, 0)
        if t is not None:
            raise BadOutput(f"wrote outside the bounds of `{task['outputs'][t]['name']}`")
        return self.outputs(pool, 0)

    def sample(self, pool, sets, positions):
        out = self.pools[pool.id].map
        views = {}
        vals = []
        for c, t, i in positions:
            key = (c, t)
            if key not in views:
                views[key] = pool.layout.output_views(out, sets[c])[t].reshape(-1)
            vals.append(float(views[key][i]))
        return vals

    def fetch(self, pool, sets, call, views=False):
        """Copies of call `call`'s outputs (`views` is the torch backend's)."""
        t = broken_guard(pool.layout, self.pools[pool.id].map, sets[call])
        if t is not None:
            raise BadOutput(f"while timed, wrote outside the bounds of output {t}")
        return self.outputs(pool, sets[call])

    def stop(self):
        for p in list(self.pools.values()):
            p.close()
        self.runner.kill()


class GraphContender:
    """A module traced into graphs (in a tracer runner when untrusted, here when trusted) and
    run by an executor runner (MLX targets). Starting it spawns the runners; `begin()` asks the
    tracer for the graphs, or traces a trusted module here while the runners start and load, and
    `finish()` hands the graphs to the executor."""

    def __init__(self, settings, source, role, label, trusted, task, workloads, env=None):
        self.role, self.label, self.trusted = role, label, trusted
        self.task, self.workloads, self.source, self.settings = task, workloads, source, settings
        # MLX's kernel cache: the shared directory and this module's own, read only; trusted
        # executors may add to the CUDA driver's cache (`kernel_cache`).
        shared = settings.kernel_cache
        self.kernels = kernel_cache.module_dir(shared, source, trusted)
        cache = [p for p in (shared, self.kernels) if p]
        driver = [os.path.join(shared, "cuda-driver")] if shared and trusted else []
        self.tracer = None if trusted else Runner("trace", settings.target, settings.root_dir, settings.gpu, settings.memory, None, env,
                                                  read_only=cache[:1], file_bytes=TRACER_FILE_BYTES, cpus=settings.gpu_cpus)
        self.runner = Runner("exec", settings.target, settings.root_dir, settings.gpu, settings.memory, None,
                             {**(env or {}), **kernel_cache.executor_env(shared, self.kernels)}, read_only=cache, writable=driver,
                             cpus=settings.gpu_cpus)
        self.confinement = (self.tracer or self.runner).confinement
        # What a trusted module says it runs (`ksearch_describe()`), once traced.
        self.description = None
        self.specs = [
            {
                "name": w["name"],
                "axes": w["axes"],
                "inputs": [[list(shape_of(s, w["axes"])), s["dtype"]] for s in task["inputs"]],
                "n_outputs": len(task["outputs"]),
                "outputs": [s["name"] for s in task["outputs"]],
            }
            for w in workloads
        ]
        self.begun = False
        # A trusted module's graphs, or the error tracing it raised, until `finish()`.
        self.traced = None

    def begin(self):
        if self.begun:
            return
        self.begun = True
        if self.tracer is not None:
            # Both at once: a module that does not load answers the trace with an error, which
            # `finish()` does not read.
            send_quietly(self.tracer, {"op": "load", "source": self.source})
            send_quietly(self.tracer, {"op": "trace", "workloads": self.specs})
            return
        from .arrays import arrays_for
        from .runner import export

        try:
            arrays = arrays_for(self.settings.target)
            ns = load_namespace(self.source, self.settings.target)
            run = module_run(ns, self.source["file"])
            self.description = describe_itself(ns, self.source["file"])
            self.traced = [export(arrays.mx, arrays, run, w) for w in self.specs]
        except (CompileError, CandidateError) as e:
            self.traced = e

    def finish(self):
        self.begin()
        workloads, task = self.workloads, self.task
        if self.tracer is None:
            if isinstance(self.traced, Exception):
                raise self.traced
            sizes, graphs = [len(b) for b in self.traced], b"".join(self.traced)
        else:
            tracer = self.tracer
            try:
                reply, _ = tracer.receive()
                if reply["op"] == "compile_error":
                    raise CompileError(reply["message"])
                if reply["op"] != "loaded":
                    raise CandidateError(reply.get("message", repr(reply)))
                # Each graph is a file the tracer wrote, within its file-size limit.
                reply, graphs = tracer.receive(max_payload=len(self.specs) * TRACER_FILE_BYTES)
                if reply["op"] == "bad_output":
                    raise BadOutput(reply["message"])
                if reply["op"] != "traced":
                    raise CandidateError(reply.get("message", repr(reply)))
                sizes = reply.get("sizes")
                if (not isinstance(sizes, list) or len(sizes) != len(self.specs)
                        or any(type(n) is not int or n < 0 for n in sizes) or sum(sizes) != len(graphs)):
                    raise tracer.broke("it sent graphs that do not add up")
            finally:
                tracer.kill()
        self.traced = None
        # The graphs go on as they came, in one buffer: a copy of a large one is memory the
        # judge would hold twice.
        try:
            reply, _ = self.runner.request({"op": "functions", "names": [w["name"] for w in workloads], "sizes": sizes}, graphs)
        except RunnerLost as e:
            if self.tracer is None or not e.signalled:
                raise
            # The executor runs no candidate code: what killed it loading a candidate's graphs
            # is the graphs themselves, which are the candidate's answer.
            raise BadOutput(f"the graphs traced from its `run` could not be loaded (the executor loading them {e.message})") from None
        if reply["op"] != "loaded":
            if self.tracer is not None:
                raise BadOutput(f"the graphs traced from its `run` could not be loaded: {reply.get('message', repr(reply))}")
            raise CandidateError(reply.get("message", repr(reply)))
        self.shapes = {w["name"]: [shape_of(s, w["axes"]) for s in task["inputs"]] for w in workloads}
        self.out_specs = {
            w["name"]: [{"name": s["name"], "shape": list(shape_of(s, w["axes"])), "dtype": s["dtype"]} for s in task["outputs"]]
            for w in workloads
        }
        return self

    def keep_kernels(self):
        """File what the executor compiled (kernel_cache), once the evaluation is over."""
        if self.kernels is None or self.runner.lost is not None:
            return
        try:
            self.runner.send({"op": "kernels"})
            reply, payload = self.runner.receive(timeout=10, max_payload=kernel_cache.MAX_BYTES)
        except RunnerLost:
            return
        files, pos = [], 0
        listed = reply.get("files")
        if reply["op"] != "kernels" or not isinstance(listed, list) or len(listed) > kernel_cache.MAX_FILES:
            return
        for f in listed:
            n = f.get("bytes") if isinstance(f, dict) else None
            if type(n) is not int or n < 0 or pos + n > len(payload) or not isinstance(f.get("name"), str):
                return
            files.append((f["name"], payload[pos:pos + n]))
            pos += n
        if pos == len(payload):
            kernel_cache.keep(self.settings.kernel_cache, self.kernels, self.trusted, files)

    def cpu_time(self):
        return None

    def cpu_seconds(self):
        # An executor runs no candidate code; a tracer has exited before timing.
        return None

    def strays(self):
        return []

    def _answer(self, reply, payload, workload=None):
        op = reply["op"]
        if op == "bad_output":
            raise BadOutput(reply["message"])
        if op == "error":
            raise CandidateError(reply["message"])
        if op == "outputs" and workload is not None:
            try:
                return unpack_outputs(reply, payload, self.out_specs[workload["name"]])
            except Exception as e:  # noqa: BLE001 - a runner's message is hostile data
                raise self.runner.broke(f"it sent outputs that do not add up: {e}") from None
        return reply

    def _outputs_bytes(self, workload):
        """The most an `outputs` answer may carry: every output of `workload`, 8 bytes an element."""
        return sum(8 * int(np.prod(o["shape"], dtype=np.int64)) for o in self.out_specs[workload["name"]])

    def begin_check(self, task, workload, seed):
        """Ask for one call on fresh inputs from `seed`, drawn in the runner; `end_check()`
        reads the outputs. In between, the judge computes the reference."""
        self.checking = workload
        self.runner.send({
            "op": "check",
            "workload": workload["name"],
            "seed": seed,
            "inputs": task["inputs"],
            "shapes": [list(s) for s in self.shapes[workload["name"]]],
            "outputs": self.out_specs[workload["name"]],
        })

    def end_check(self):
        workload = self.checking
        reply, payload = self.runner.receive(max_payload=self._outputs_bytes(workload))
        got = self._answer(reply, payload, workload)
        if not isinstance(got, list):
            raise self.runner.broke(f"it answered {reply['op']!r} out of turn")
        return got

    def round(self, workload, seed, sets, keep=None):
        """`sets` fresh input sets for the next batches, drawn in the runner from `seed` (their
        outputs' memory poisoned first, for an untrusted module). `keep` = (first, n): of those,
        the runner keeps only sets first .. first + n - 1, as its sets 0 .. n - 1."""
        header = {
            "op": "round",
            "workload": workload["name"],
            "seed": seed,
            "sets": sets,
            "poison": not self.trusted,
            "inputs": self.task["inputs"],
            "shapes": [list(s) for s in self.shapes[workload["name"]]],
            "outputs": self.out_specs[workload["name"]],
        }
        if keep is not None:
            header["keep"] = list(keep)
        reply, _ = self.runner.request(header)
        if reply.get("op") != "ready":
            self._answer(reply, b"")
            raise self.runner.broke(f"it answered {reply['op']!r} out of turn")

    def go(self, workload, k, at=0):
        """`k` timed calls on the round's sets `at` to `at + k - 1`."""
        seconds, reply, _ = self.runner.timed({"op": "go", "workload": workload["name"], "k": k, "at": at})
        if reply.get("op") != "done":
            self._answer(reply, b"")
            raise self.runner.broke(f"it answered {reply['op']!r} out of turn")
        return seconds

    def sample(self, workload, positions):
        reply, payload = self.runner.request({"op": "sample", "workload": workload["name"], "positions": positions},
                                             max_payload=8 * len(positions))
        if reply.get("op") != "values" or len(payload) != 8 * len(positions):
            self._answer(reply, b"")
            raise self.runner.broke(f"it answered {reply['op']!r} out of turn")
        return np.frombuffer(payload, dtype=np.float64).tolist()

    def fetch(self, workload, call):
        reply, payload = self.runner.request({"op": "fetch", "workload": workload["name"], "call": call},
                                             max_payload=self._outputs_bytes(workload))
        got = self._answer(reply, payload, workload)
        if not isinstance(got, list):
            raise self.runner.broke(f"it answered {reply['op']!r} out of turn")
        return got

    def stop(self):
        if self.tracer is not None:
            self.tracer.kill()
        self.runner.kill()


def unpack_outputs(reply, payload, specs):
    """The arrays of an executor's `outputs` answer: one per output of `specs`, of its declared
    shape, a numeric dtype, exactly filling `payload` (read in place)."""
    described = reply["arrays"]
    if len(described) != len(specs):
        raise ValueError(f"{len(described)} arrays for {len(specs)} outputs")
    view = memoryview(payload)
    arrays, pos = [], 0
    for a, spec in zip(described, specs):
        dtype, shape, n = np.dtype(a["dtype"]), tuple(spec["shape"]), a["bytes"]
        if dtype.kind not in "biuf" or list(a["shape"]) != list(shape) or type(n) is not int or n != int(np.prod(shape, dtype=np.int64)) * dtype.itemsize:
            raise ValueError(f"an array described as {a!r} for `{spec['name']}`")
        arrays.append(np.frombuffer(view[pos:pos + n], dtype=dtype).reshape(shape))
        pos += n
    if pos != len(payload):
        raise ValueError(f"{len(payload) - pos} bytes more than its arrays")
    return arrays


class Pool:
    """Input sets in shared memory (numpy target), written by the judge."""

    _next = [0]

    def __init__(self, task, workload, sets):
        Pool._next[0] += 1
        self.id = Pool._next[0]
        self.axes = {k: int(v) for k, v in workload["axes"].items()}
        self.layout = Layout(
            sets,
            [(shape_of(s, self.axes), NP[s["dtype"]]) for s in task["inputs"]],
            [(shape_of(s, self.axes), NP[s["dtype"]]) for s in task["outputs"]],
        )
        self.names = {"inputs": [s["name"] for s in task["inputs"]], "outputs": [s["name"] for s in task["outputs"]]}
        self.inputs = Region(self.layout.input_region(), sealed=True)

    def fill(self, task, workload, s, seed):
        from .arrays import draw

        for spec, view in zip(task["inputs"], self.layout.input_views(self.inputs.map, s)):
            view[...] = draw(spec, view.shape, seed, workload["name"]).astype(view.dtype)

    def input_arrays(self, s):
        return [np.array(v) for v in self.layout.input_views(self.inputs.map, s)]

    def close(self):
        self.inputs.close()


def allowed_cpus():
    try:
        cpus = sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return None
    if len(cpus) < 2:
        return None
    import random

    judge = random.choice(cpus)
    others = [c for c in cpus if c != judge]
    runner = random.choice(others)
    try:
        os.sched_setaffinity(0, {judge})
    except OSError:
        return None
    return judge, runner, others

"""The judge's side of the torch backend's contenders. Each runs in a runner of its own (mode
`torch`), fresh for the evaluation, like the numpy target's direct runners: the judge writes
the input sets into memory the runner maps (read-only on the CPU; on the GPU a CUDA allocation
exported as a file descriptor, whose inputs the judge checks did not change), poisons every
output slot before a call, and reads the outputs itself, the moment the runner says "done".

Each untrusted contender maps a copy of the input sets of its own, which the judge writes from
its own (the pool's, which no runner maps) just before each of that contender's calls: every
contender gets the same values, and none sees a call's inputs before its own call. (With one
memory for all, a runner timed after another could read a round's inputs while the other was
timed, and compute its answers then: on the GPU, where a runner's CPU time is not held to its
calls, at no cost that the judge would see.) The trusted contenders (the task's baseline and
comparisons) share one copy, written before each of their calls in the same way: they do not
cheat, and a KernelBench input of 7.5 GB is a copy fewer on the GPU.

On the GPU, before every timed batch the judge writes a scratch buffer twice the size of the
last-level cache (and waits for it), so every call of the batch starts with its inputs in device
memory, not in L2; the calls of a batch run on sets of their own, so no call finds another's
inputs cached either."""

import time

import numpy as np

from .candidates import CandidateError, CompileError
from .contenders import BadOutput, ask_to_load, cpu_max_calls, shape_of
from .link import FILE_BYTES, Runner, RunnerLost
from .shared import GUARD, GUARD_BYTE, Layout, Region
from .torch_arrays import STORAGE, fill_random, torch_dtypes

# Scratch written before each timed GPU batch: more than twice the L2 of any current GPU (H100
# and H200: 50 MiB; B200: 126 MiB).
L2_FLUSH_BYTES = 256 << 20
# After every timed batch on the GPU (and every call of an untrusted runner) the judge times its
# flush of the L2 by its host clock: one that takes over QUIET_FACTOR times the fastest flush seen
# (and QUIET_SLACK_MS more) waited for another context's work, and the judge flushes again until
# one does not, for at most QUIET_LIMIT_S.
QUIET_FACTOR = 2.0
QUIET_SLACK_MS = 0.1
QUIET_LIMIT_S = 2.0
# Memory a workload's input sets and output slots may take on the GPU, the pool's own and every
# contender's copy together, at most a third of the device's; the batch size is capped to fit.
GPU_POOL_BUDGET = 24 << 30
# A GPU input set larger than this is a large one: a timed call's inputs kept for the check
# against the reference wait in host memory (the check runs once the pool and its copies are let
# go), and the judge gives its cached memory back after drawing each such set.
LARGE_SET_BYTES = 1 << 30


# Bytes summed at a time by `byte_sum`: its int64 scratch is eight times this.
CHECKSUM_CHUNK = 1 << 26


def byte_sum(torch, b):
    """The sum of the bytes of `b` (uint8, one dimension) as an int64 tensor, in chunks: the
    whole input at once took eight times its size in scratch (56 GiB for a 7.5 GB KernelBench
    input on an H100, more than the GPU had left)."""
    total = torch.zeros((), dtype=torch.int64, device=b.device)
    for at in range(0, b.numel(), CHECKSUM_CHUNK):
        total += b[at:at + CHECKSUM_CHUNK].to(torch.int64).sum()
    return total


def _nbytes(shape, dtype):
    return int(np.prod(shape, dtype=np.int64)) * np.dtype(STORAGE[dtype]).itemsize


def runs(sets):
    """`sets` (ascending but for one wrap) as runs of consecutive sets: `(first, last)` pairs."""
    out = []
    for s in sets:
        if out and s == out[-1][1] + 1:
            out[-1][1] = s
        else:
            out.append([s, s])
    return [tuple(r) for r in out]


class TorchMemory:
    """Shared memory for one pool or output region: host (an unlinked file) or device. A host
    output region (`output`) is handed to its runner write-only (`runner_fd`): the runner cannot
    map it, so an answer cannot be computed in it (`shared.Region`). On the device the runner maps
    what it is handed."""

    def __init__(self, arrays, size, sealed=False, output=False):
        torch = arrays.torch
        if arrays.target == "cuda":
            from .cuda_memory import DeviceRegion

            self.region = DeviceRegion(torch, size)
            self.fd = self.region.fd
            self.ro_fd = self.region.fd
            self.runner_fd = self.region.fd
            self.bytes = self.region.bytes
        else:
            self.region = Region(size, sealed=sealed, write_only=output)
            self.fd = self.region.fd
            self.ro_fd = self.region.ro_fd
            self.runner_fd = self.region.wo_fd if output else self.region.ro_fd
            self.bytes = torch.frombuffer(self.region.map, dtype=torch.uint8)

    def close(self):
        self.bytes = None
        self.region.close()


def view(torch, dtypes, buf, offset, shape, dtype):
    n = _nbytes(shape, dtype)
    return buf[offset:offset + n].view(dtypes[dtype]).view(tuple(shape))


class TorchPool:
    """Input sets of one workload, written by the judge: from the reference's `make_inputs`
    where it has one, else from each input's `init`, drawn on the device."""

    _next = [0]

    def __init__(self, arrays, task, workload, sets, make_inputs=None):
        TorchPool._next[0] += 1
        self.id = TorchPool._next[0]
        self.arrays = arrays
        self.torch = arrays.torch
        self.dtypes = torch_dtypes(self.torch)
        self.task, self.workload = task, workload
        self.make_inputs = make_inputs
        self.axes = {k: int(v) for k, v in workload["axes"].items()}
        self.in_specs = [(shape_of(s, self.axes), s["dtype"]) for s in task["inputs"]]
        self.out_specs = [(shape_of(s, self.axes), s["dtype"]) for s in task["outputs"]]
        self.layout = Layout(sets, [(s, STORAGE[d]) for s, d in self.in_specs], [(s, STORAGE[d]) for s, d in self.out_specs])
        self.names = {"inputs": [s["name"] for s in task["inputs"]], "outputs": [s["name"] for s in task["outputs"]]}
        self.dtype_names = {"inputs": [d for _, d in self.in_specs], "outputs": [d for _, d in self.out_specs]}
        self.inputs = TorchMemory(arrays, self.layout.input_region(), sealed=True)
        self.trusted_copy = None
        self.sums = {}

    def shared_copy(self):
        """The one copy of the input sets that every trusted contender maps (made on first use,
        closed with the pool)."""
        if self.trusted_copy is None:
            self.trusted_copy = TorchMemory(self.arrays, self.layout.input_region(), sealed=True)
        return self.trusted_copy

    def input_views(self, s):
        return [view(self.torch, self.dtypes, self.inputs.bytes, self.layout.input_offset(s, t), shape, d)
                for t, (shape, d) in enumerate(self.in_specs)]

    def input_arrays(self, s):
        """A copy of set `s`'s inputs: in host memory where they take more than
        LARGE_SET_BYTES of a GPU (`Truth.outputs` moves them back)."""
        views = self.input_views(s)
        if self.arrays.target == "cuda" and sum(v.numel() * v.element_size() for v in views) > LARGE_SET_BYTES:
            return [v.to("cpu") for v in views]
        return [v.clone() for v in views]

    def output_views(self, buf, s):
        return [view(self.torch, self.dtypes, buf, self.layout.output_offset(s, t), shape, d)
                for t, (shape, d) in enumerate(self.out_specs)]

    def fill(self, task, workload, s, seed):
        self._draw(task, workload, s, seed)
        if self.arrays.target == "cuda":
            self.sums[s] = self.checksums(s)
            if self.layout.in_stride > LARGE_SET_BYTES:
                # What the draw left in the judge's cache (the made tensors, a set's size or
                # more, all gone with `_draw`'s frame) goes back to the device, which the runners
                # share.
                self.torch.cuda.empty_cache()

    def _draw(self, task, workload, s, seed):
        """Set `s`'s inputs: from the reference's `make_inputs`, else from each input's `init`."""
        torch = self.torch
        views = self.input_views(s)
        if self.make_inputs is None:
            for spec, v in zip(task["inputs"], views):
                fill_random(torch, v, spec, seed, workload["name"], self.arrays.device)
            return
        made = self.make_inputs(seed=seed, device=str(self.arrays.device), **self.axes)
        made = list(made) if isinstance(made, (list, tuple)) else [made]
        if len(made) != len(views):
            raise CandidateError(f"the reference's make_inputs returned {len(made)} tensor(s); the task declares {len(views)} input(s)")
        for spec, v, m in zip(task["inputs"], views, made):
            if not isinstance(m, torch.Tensor):
                m = torch.tensor(m)
            if tuple(m.shape) != tuple(v.shape) or m.dtype != v.dtype:
                raise CandidateError(f"the reference's make_inputs made `{spec['name']}` {m.dtype}{list(m.shape)}; the task declares {v.dtype}{list(v.shape)}")
            v.copy_(m)

    def checksums(self, s, buf=None):
        torch = self.torch
        buf = self.inputs.bytes if buf is None else buf
        out = []
        for t, (shape, d) in enumerate(self.in_specs):
            off = self.layout.input_offset(s, t)
            out.append(byte_sum(torch, buf[off:off + _nbytes(shape, d)]))
        return torch.stack(out) if out else None

    def copy_to(self, buf, sets):
        """`sets`' inputs, as the judge wrote them, into a contender's copy `buf`: one copy for
        each run of consecutive sets (a baseline's window that wraps around the round's end is
        two)."""
        for first, last in runs(sets):
            a, b = first * self.layout.in_stride, (last + 1) * self.layout.in_stride
            buf[a:b].copy_(self.inputs.bytes[a:b])

    def modified(self, sets, buf):
        """The name of an input of `sets` in a contender's copy `buf` that is not as the judge
        wrote it, or None."""
        torch = self.torch
        for s in sets:
            if s in self.sums and self.sums[s] is not None:
                now = self.checksums(s, buf)
                diff = torch.nonzero(now != self.sums[s])
                if diff.numel():
                    return self.names["inputs"][int(diff[0])]
        return None

    def poison(self, buf, sets):
        """Output slots `sets` of `buf` as a poisoned call leaves them: outputs all ones (NaN for
        floats), guards 0xA5. Written in place, for each run of consecutive slots one fill for
        the slots and one per guard zone of a slot across all of them: a stored pattern to copy
        from took as much memory again as a contender's outputs (21 GiB for three contenders of
        KernelBench's RMSNorm)."""
        stride = self.layout.out_stride
        for first, last in runs(sets):
            slots = buf[first * stride:(last + 1) * stride].view(last + 1 - first, stride)
            slots.fill_(0xFF)
            for off, n in self.layout.guards(0):
                slots[:, off:off + n].fill_(GUARD_BYTE)

    def close(self):
        self.inputs.close()
        if self.trusted_copy is not None:
            self.trusted_copy.close()
            self.trusted_copy = None


class GpuWatch:
    """The judge's scratch buffer for flushing the L2 before every timed batch, and its clock on
    that flush, which says whether the GPU is quiet. Contexts of different processes share a GPU
    by time slices: while a runner's kernel is still on the GPU (left running after its "done",
    or started by a thread of it later), the judge's flush waits for a slice of its own, and
    reaches its end far later than on a quiet GPU. After every timed batch the judge flushes
    until the GPU is quiet, and the time that took beyond one quiet flush is the batch's: work a
    runner left on the GPU after "done" is timed as its own and slows no one timed after it.
    Untrusted runners are paused (SIGSTOP) between their calls, so none can start work while
    another contender is timed, and after their untimed calls the judge waits for a quiet GPU
    too. Work that never ends within QUIET_LIMIT_S is the runner's `incorrect`. One per judge,
    made (and its flush timed, before any module is loaded) with the first contender."""

    def __init__(self, torch):
        self.torch = torch
        self.buf = torch.empty(L2_FLUSH_BYTES, dtype=torch.uint8, device="cuda")
        self.fastest = float("inf")
        for _ in range(10):
            self.flush()

    def flush(self):
        """Writes the scratch buffer and waits for it: the milliseconds from the launch to the
        write's end, by the judge's host clock. Not by CUDA events: they time the write in the
        judge's own context from where its time slice began, so a flush that first waited for
        another context's slice read as fast as on a quiet GPU (an H100, 2026-12-07:
        bench/torch_faults/spins_after_done.py slowed the contenders timed after it by half, and
        every flush looked quiet)."""
        stream = self.torch.cuda.current_stream()
        stream.synchronize()
        started = time.perf_counter()
        self.buf.fill_(0x5A)
        stream.synchronize()
        ms = (time.perf_counter() - started) * 1e3
        self.fastest = min(self.fastest, ms)
        return ms

    def busy(self, ms):
        return ms > max(QUIET_FACTOR * self.fastest, self.fastest + QUIET_SLACK_MS)

    def wait_quiet(self, label, clock=None):
        """Flushes until a flush takes its usual time; returns the seconds that took beyond one
        quiet flush (the time the GPU stayed busy). Raises BadOutput for `label` when the GPU
        stays busy for QUIET_LIMIT_S."""
        clock = clock or time.perf_counter
        started = clock()
        ms = self.flush()
        while self.busy(ms):
            if clock() - started > QUIET_LIMIT_S:
                raise BadOutput(
                    f"`{label}` left work running on the GPU after it said \"done\": the GPU stayed busy for over "
                    f"{QUIET_LIMIT_S:g} s after its batch (the judge's L2 flush took {ms:.2f} ms, "
                    f"{self.fastest:.2f} ms on a quiet GPU)")
            ms = self.flush()
        return max(0.0, clock() - started - self.fastest / 1e3)


def gpu_watch(arrays):
    """The judge's GpuWatch, made with its first use."""
    watch = getattr(arrays, "gpu_watch", None)
    if watch is None:
        watch = arrays.gpu_watch = GpuWatch(arrays.torch)
    return watch


class TorchContender:
    """A module run in a torch runner. Starting it spawns the runner; `begin()` asks it to load
    the module and `finish()` waits for that (so that several runners start and load at once)."""

    def __init__(self, settings, arrays, source, role, label, trusted, model_args, env=None, file_bytes=FILE_BYTES):
        self.role, self.label, self.trusted = role, label, trusted
        self.arrays = arrays
        self.torch = arrays.torch
        self.source = source
        # Per workload name: the model's constructor arguments (KernelBench's get_init_inputs)
        # and the constants among its inputs (`init`, `constants`).
        self.model_args = model_args
        gpu = arrays.target == "cuda"
        # Made, and its flush timed, before this contender's runner starts.
        self.watch = gpu_watch(arrays) if gpu else None
        # Triton and cpp_extension start compilers (nvcc, ptxas, c++): GPU runners may start
        # processes, which the sandbox's PID namespace ends with the runner. So may trusted
        # runners (torch.compile's compile workers).
        if gpu and not trusted:
            # torch.compile compiles in the runner's own process, not in a pool of workers
            # that would outlive the call that started them (`strays`).
            env = {"TORCHINDUCTOR_COMPILE_THREADS": "1", **(env or {})}
        self.runner = Runner("torch", arrays.target, settings.root_dir, gpu, settings.memory,
                             None if gpu else settings.runner_cpu, env, allow_fork=gpu or trusted,
                             cpus=settings.gpu_cpus if gpu else (), file_bytes=file_bytes)
        self.confinement = self.runner.confinement
        self.outs = {}
        self.ins = {}
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
        # A GPU runner's CPU time says nothing about its GPU work, and its driver's threads
        # spin; only the CPU target is held to its timed calls' CPU.
        return self.runner.cpu_time() if self.arrays.target == "cpu" else None

    def cpu_seconds(self):
        return self.runner.process_cpu() if self.arrays.target == "cpu" else None

    def strays(self):
        """Processes its runner started that are still alive. A GPU runner may start processes
        (nvcc, ptxas, ninja, the host compiler) while it loads and compiles; one still alive
        when a batch is timed could keep queuing GPU work while others are timed, which neither
        the pause nor the quiet test stops (`timing.Watch`)."""
        return self.runner.descendants() if self.runner.allow_fork else []

    def model_args_of(self, workload):
        args = self.model_args.get(workload, {})
        return {"init_args": args.get("init", []), "constants": args.get("constants", [])}

    def map_pool(self, pool):
        ins = pool.shared_copy() if self.trusted else TorchMemory(self.arrays, pool.layout.input_region(), sealed=True)
        out = TorchMemory(self.arrays, pool.layout.output_region(), output=True)
        reply, _ = self.runner.request(
            {"op": "pool", "id": pool.id, "layout": pool.layout.to_json(), "axes": pool.axes, "names": pool.names,
             "dtypes": pool.dtype_names, "workload": pool.workload["name"],
             **self.model_args_of(pool.workload["name"])},
            fds=[ins.ro_fd, out.runner_fd],
        )
        if reply["op"] != "ready":
            if not self.trusted:
                ins.close()
            out.close()
            if reply["op"] == "error":
                raise CandidateError(reply["message"])
            raise self.runner.broke(f"it answered {reply['op']!r} out of turn")
        self.ins[pool.id], self.outs[pool.id] = ins, out
        self._idle()

    def _idle(self):
        """An untrusted runner the judge is done talking to is paused until it turns to it again
        (while another contender is timed it runs nothing): after each call, and after each
        request between them (a pool of more sets made during timing)."""
        if not self.trusted:
            self.runner.pause()

    def drop_pool(self, pool):
        ins, out = self.ins.pop(pool.id, None), self.outs.pop(pool.id, None)
        try:
            self.runner.request({"op": "drop", "id": pool.id})
            self._idle()
        except RunnerLost:
            pass
        # The trusted contenders' copy is the pool's, closed with it.
        for m in (out,) if self.trusted else (ins, out):
            if m is not None:
                m.close()

    def call(self, pool, sets, timed):
        """Run on `sets`; the seconds it took, by the judge's clock."""
        pool.copy_to(self.ins[pool.id].bytes, sets)
        pool.poison(self.outs[pool.id].bytes, sets)
        if self.watch is not None:
            if timed:
                self.watch.flush()
            self.torch.cuda.synchronize()
        header = {"op": "go" if timed else "call", "pool": pool.id, "sets": list(sets)}
        if timed:
            seconds, reply, _ = self.runner.timed(header)
        else:
            seconds, (reply, _) = 0.0, self.runner.request(header)
        # Paused until the judge turns to it again: while others are timed it runs nothing.
        self._idle()
        if self.watch is not None and (timed or not self.trusted):
            # What the GPU still had to do after "done" is the batch's (GpuWatch).
            lag = self.watch.wait_quiet(self.label)
            if timed:
                seconds += lag
        op = reply.get("op")
        if op == "bad_output":
            raise BadOutput(reply["message"])
        if op == "error":
            raise CandidateError(reply["message"])
        if op != "done":
            raise self.runner.broke(f"it answered {reply['op']!r} out of turn")
        if timed and not self.trusted:
            changed = pool.modified(sets, self.ins[pool.id].bytes)
            if changed is not None:
                raise BadOutput(f"modified input `{changed}` while timed; inputs must not be written")
        return seconds

    def _guard(self, pool, s):
        """The name of an output of slot `s` whose guard zone was written, or None."""
        buf = self.outs[pool.id].bytes
        for i, (off, n) in enumerate(pool.layout.guards(s)):
            if bool((buf[off:off + n] != GUARD_BYTE).any()):
                return pool.names["outputs"][i // 2]
        return None

    def outputs(self, pool, s):
        """Copies of slot `s`'s outputs, read now (`TorchArrays.to_numpy`)."""
        return [self.arrays.to_numpy(v) for v in pool.output_views(self.outs[pool.id].bytes, s)]

    def check(self, pool, task, workload, seed, views=False):
        """Outputs of one call on set 0, which the judge filled (from `seed`) for the reference:
        copies, or (`views`) tensors of the memory they were written to, on the device."""
        self.call(pool, [0], False)
        name = self._guard(pool, 0)
        if name is not None:
            raise BadOutput(f"wrote outside the bounds of `{name}`")
        if views:
            return pool.output_views(self.outs[pool.id].bytes, 0)
        return self.outputs(pool, 0)

    def sample(self, pool, sets, positions):
        """Values at `positions` ((call, output, flat index)) of the outputs of `sets`, as
        float64, gathered on the device with one gather per output."""
        torch = self.torch
        if not positions:
            return []
        pos = np.asarray(positions, dtype=np.int64).reshape(-1, 3)
        vals = np.zeros(len(pos), dtype=np.float64)
        buf = self.outs[pool.id].bytes
        set_of = np.asarray(sets, dtype=np.int64)[pos[:, 0]]
        for t, (shape, d) in enumerate(pool.out_specs):
            picked = np.flatnonzero(pos[:, 1] == t)
            if not picked.size:
                continue
            size = np.dtype(STORAGE[d]).itemsize
            base = np.array([pool.layout.output_offset(int(s), t) for s in set_of[picked]], dtype=np.int64)
            start = base + pos[picked, 2] * size
            idx = torch.from_numpy((start[:, None] + np.arange(size)[None, :]).reshape(-1)).to(buf.device)
            got = buf[idx].view(pool.dtypes[d])
            vals[picked] = self.arrays.to_numpy(got).astype(np.float64).reshape(-1)
        return vals.tolist()

    def fetch(self, pool, sets, call, views=False):
        """The outputs of call `call`: copies in host memory, or (`views`, on the GPU) tensors of
        the slot itself, to compare on the device before the slot is used again (a whole
        KernelBench output copied to the host and compared there took seconds a round)."""
        name = self._guard(pool, sets[call])
        if name is not None:
            raise BadOutput(f"while timed, wrote outside the bounds of `{name}`")
        if views and self.arrays.target == "cuda":
            return pool.output_views(self.outs[pool.id].bytes, sets[call])
        return self.outputs(pool, sets[call])

    def stop(self):
        for out in list(self.outs.values()):
            out.close()
        self.outs.clear()
        self.runner.kill()


def torch_pool_factory(arrays, make_inputs):
    def new_pool(task, workload, sets):
        if arrays.target == "cuda":
            # The judge's own cached memory (the reference's outputs from the check, earlier
            # draws: 14 GiB after KernelBench's RMSNorm was checked) goes back to the device
            # before the pool and the runners' copies are made; the runners cannot use it.
            arrays.torch.cuda.empty_cache()
        return TorchPool(arrays, task, workload, sets, make_inputs)

    return new_pool


def max_calls_for(arrays, task, workload, default, contenders, untrusted):
    """Calls a batch may hold: on the GPU up to 1024 (a short kernel's batch must outlast the
    message round trip), as far as GPU_POOL_BUDGET holds their sets: the pool's inputs, the
    copies of them (one for each of the `untrusted` contenders, one for the trusted others), and
    the output slots of all `contenders`. At least one: a workload whose set fits the
    budget once at most (KernelBench's RMSNorm moves 7.5 GB each way, about 52 GB a set for
    three contenders; two sets ran an 80 GB H100 out of memory) is timed one call a batch, each
    call on its round's fresh set, and a call that large is long enough to be timed alone."""
    # The pool's inputs, a copy for each untrusted contender and one the trusted ones share.
    copies = 1 + untrusted + (1 if contenders > untrusted else 0)
    if arrays.target != "cuda":
        return cpu_max_calls(task, workload, default, contenders, copies)
    axes = {k: int(v) for k, v in workload["axes"].items()}

    def size(specs):
        return sum(_nbytes(shape_of(s, axes), s["dtype"]) + 2 * GUARD for s in specs)

    per_set = copies * size(task["inputs"]) + contenders * size(task["outputs"])
    budget = min(GPU_POOL_BUDGET, arrays.torch.cuda.get_device_properties(arrays.device).total_memory // 3)
    return int(max(1, min(1024, budget // max(per_set, 1))))

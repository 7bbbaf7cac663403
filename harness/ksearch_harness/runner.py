"""A runner: `python3 -m ksearch_harness.runner MODE --target T`, started in a sandbox by the
judge, fresh for every contender of every evaluation. It never sees a reference, an expected
output or the judge's clock, and answers nothing but "done" and what it is asked for.

Modes:
- `direct` (numpy target): runs the module itself on inputs in shared memory (read-only), and
  writes its outputs to shared memory the judge reads.
- `trace` (MLX): runs the module only to trace `run` into graphs (`mx.export_function`), one
  per workload, and hands the graphs back. Nothing is timed here.
- `exec` (MLX): imports graphs traced elsewhere and runs them. No candidate Python ever runs in
  this interpreter, so `mx.eval`, the inputs and the outputs it reports are the real ones.
- `torch` (the torch backend): like `direct`, on PyTorch tensors in shared host or device
  memory; it synchronises the device before saying "done".
"""

import argparse
import copy
import ctypes
import mmap
import os
import socket
import sys
import tempfile
import traceback

import numpy as np

from . import link
from .candidates import BadAnswer, CandidateError, CompileError, describe_itself, load_module, load_namespace, module_run

# What a runner checks a candidate's inputs with, and writes its outputs with, taken before any
# candidate code runs: the candidate shares this interpreter, and the module attributes are its
# to replace (a candidate that wrote its inputs replaced `torch.equal` with one that always
# agreed). What the runner itself does remains reachable from candidate code (its globals, its
# frames, its closures); the judge's own checks, and what the sandbox and the descriptors the
# judge hands out allow, are what hold.
_ARRAY_EQUAL = np.array_equal
_CONTIGUOUS = np.ascontiguousarray
_PWRITE = os.pwrite

# Why an output that lies in the judge's memory is refused (the torch runner on a GPU, which maps
# its output memory to copy into it): numpy and PyTorch skip a copy whose source is its
# destination, so an answer written there directly (the runner's own variables say where) would
# be timed without the copy that every other contender's time includes. On the CPU the runner
# cannot map the judge's memory at all: it writes its outputs through a write-only descriptor.
_IN_THE_JUDGES_MEMORY = ("output `{}` lies in the memory the runner copies outputs into; a candidate returns "
                         "arrays of its own")


def reply(sock, header, payload=b""):
    # The judge reads headers of at most link.MAX_HEADER bytes: a long message is cut.
    for k in ("message", "description"):
        text = header.get(k)
        if isinstance(text, str) and len(text) > link.MAX_MESSAGE:
            half = link.MAX_MESSAGE // 2 - 8
            header = {**header, k: f"{text[:half]}\n[…]\n{text[-half:]}"}
    link.send(sock, header, payload)


def request(sock, with_fds=False):
    """The judge's next request (its own data: a module's source, graphs), or None."""
    return link.recv(sock, with_fds, link.MAX_REQUEST_HEADER, link.MAX_PAYLOAD)


def error_reply(sock, exc=None, message=None):
    if message is None:
        lines = traceback.format_exc().rstrip().splitlines()
        message = "\n".join(l for l in lines if "ksearch_harness" not in l)[-6000:]
    reply(sock, {"op": "error", "message": message})


def outputs_of(result, n):
    outs = list(result) if isinstance(result, (tuple, list)) else [result]
    if len(outs) != n:
        raise CandidateError(f"run returned {len(outs)} output(s); the task declares {n}")
    return outs


CLOCK = [None]


def loaded(ns, h):
    """The answer to "load": with what the module says it runs when the judge asks (it asks
    only the task's own modules)."""
    if not h.get("describe"):
        return {"op": "loaded"}
    return {"op": "loaded", "description": describe_itself(ns, h["source"]["file"])}


def tick():
    """Say "done" on the clock socket, at once: its kernel timestamp stops the judge's clock."""
    if CLOCK[0] is not None:
        CLOCK[0].send(b"d")


def direct(sock, target):
    """Run a module on shared-memory inputs; write its outputs into the judge's memory through
    the write-only descriptor it was handed (it has no mapping of that memory: an answer cannot
    be computed there, and every output reaches it by a copy the kernel makes)."""
    from .shared import Layout, write_all

    run = None
    pools = {}
    while True:
        got = request(sock, with_fds=True)
        if got is None:
            return
        h, _, fds = got
        op = h.get("op")
        if op == "load":
            try:
                ns = load_namespace(h["source"], target)
                run = module_run(ns, h["source"]["file"])
                reply(sock, loaded(ns, h))
            except CompileError as e:
                reply(sock, {"op": "compile_error", "message": str(e)})
            except CandidateError as e:
                reply(sock, {"op": "error", "message": str(e)})
        elif op == "pool":
            layout = Layout.from_json(h["layout"])
            inp = mmap.mmap(fds[0], layout.input_region(), mmap.MAP_SHARED, mmap.PROT_READ)
            os.close(fds[0])
            pools[h["id"]] = (layout, inp, fds[1], {k: int(v) for k, v in h["axes"].items()}, h["names"])
            reply(sock, {"op": "ready"})
        elif op == "drop":
            p = pools.pop(h["id"], None)
            if p is not None:
                os.close(p[2])
            reply(sock, {"op": "ready"})
        elif op in ("call", "go"):
            layout, inp, out, axes, names = pools[h["pool"]]
            checked = op == "call"
            try:
                for s in h["sets"]:
                    ins = layout.input_views(inp, s)
                    if checked:
                        # Writable copies: a candidate that writes its inputs is caught, not
                        # stopped, so it can be told what it did.
                        ins = [x.copy() for x in ins]
                        before = [x.copy() for x in ins]
                    outs = outputs_of(run(*ins, **axes), len(layout.outputs))
                    for t, (name, (shape, dtype), o) in enumerate(zip(names["outputs"], layout.outputs, outs)):
                        if not isinstance(o, np.ndarray):
                            raise CandidateError(f"output `{name}` is a {type(o).__name__}, not an array")
                        if tuple(o.shape) != shape:
                            raise CandidateError(f"output `{name}` has shape {tuple(o.shape)}; the task declares {shape}")
                        if o.dtype != dtype:
                            raise CandidateError(f"output `{name}` has dtype {o.dtype}; the task declares {dtype}")
                        write_all(out, _CONTIGUOUS(o), layout.output_offset(s, t), _PWRITE)
                    if not checked:
                        continue
                    for name, x, b in zip(names["inputs"], ins, before):
                        if not _ARRAY_EQUAL(x, b, equal_nan=True):
                            flat = int(np.flatnonzero(~((x == b) | (np.isnan(x) & np.isnan(b))))[0]) if x.dtype.kind == "f" else int(np.flatnonzero(x != b)[0])
                            idx = "".join(f"[{i}]" for i in np.unravel_index(flat, x.shape))
                            raise CandidateError(f"modified input `{name}` (first at {name}{idx}); inputs must not be written")
                if not checked:
                    tick()
                reply(sock, {"op": "done"})
            except CandidateError as e:
                if not checked:
                    tick()
                reply(sock, {"op": "bad_output", "message": str(e)})
            except Exception:  # noqa: BLE001 - candidate code failed
                if not checked:
                    tick()
                error_reply(sock)
        else:
            reply(sock, {"op": "error", "message": f"unknown request {op!r}"})


def torch_direct(sock, target):
    """The torch backend: run a module on inputs in shared memory (host or device), write its
    outputs into shared memory the judge reads, and synchronise the device before "done"."""
    import warnings

    import torch

    from .shared import Layout, write_all
    from .torch_arrays import STORAGE, torch_dtypes
    from .torch_modules import Entry, check_output, outputs_of

    # Taken before any candidate code runs (see _ARRAY_EQUAL).
    equal, clone, data_ptr = torch.equal, torch.Tensor.clone, torch.Tensor.data_ptr
    storage_of = torch.Tensor.untyped_storage
    contiguous, reshape, view_as, to_numpy = torch.Tensor.contiguous, torch.Tensor.reshape, torch.Tensor.view, torch.Tensor.numpy
    detach = torch.Tensor.detach
    # An answer's bytes are read as a plain tensor's: a subclass's `__torch_function__` is
    # candidate code, and does not run in the runner's copy of its answer.
    plain = torch._C.DisableTorchFunctionSubclass

    def host_bytes(o):
        """A CPU tensor's bytes in order, as a numpy uint8 array (a copy only where `o` is not
        contiguous)."""
        with plain():
            return to_numpy(view_as(reshape(contiguous(detach(o)), (-1,)), torch.uint8))
    # A module that replaces torch.cuda.synchronize would have "done" follow its kernels' launch,
    # not their end, and the calls of a batch run back to back on the GPU instead of one after
    # another. The judge counts work left on the GPU as the batch's anyway (GpuWatch), but the
    # runner's own wait is not the module's to change: it is the C function itself, taken before
    # any module loads (torch.cuda.synchronize looks up torch._C._cuda_synchronize at every
    # call, so keeping the Python function kept a name a module can rebind).
    synchronize = sync_of(torch)

    def in_region(o, region):
        """Whether `o`'s storage overlaps the tensor `region`'s bytes (see _IN_THE_JUDGES_MEMORY)."""
        storage = storage_of(o)
        start, end = storage.data_ptr(), storage.data_ptr() + storage.nbytes()
        lo = data_ptr(region)
        return start < lo + region.numel() and lo < end
    # Read-only shared inputs are what the judge means: no warning about them.
    warnings.filterwarnings("ignore", message=".*not writable.*")
    device = torch.device(target)
    cuda = target == "cuda"
    if not cuda:
        torch.set_num_threads(1)
    dtypes = torch_dtypes(torch)
    sys.modules["ksearch_torch"] = _helpers(target)
    entry = None
    pools = {}

    def region(fd, size, read_only):
        if cuda:
            from .cuda_memory import DeviceRegion

            r = DeviceRegion(torch, size, fd=fd, read_only=read_only)
            return r, r.bytes
        if not read_only:
            # Outputs on the CPU: a write-only descriptor, kept to write through (`write_all`).
            return fd, None
        m = mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ)
        os.close(fd)
        return m, torch.frombuffer(m, dtype=torch.uint8)

    def views(buf, layout, offset, specs, s):
        out = []
        for t, (shape, d) in enumerate(specs):
            n = int(np.prod(shape, dtype=np.int64)) * np.dtype(STORAGE[d]).itemsize
            off = offset(s, t)
            out.append(buf[off:off + n].view(dtypes[d]).view(tuple(shape)))
        return out

    while True:
        got = request(sock, with_fds=True)
        if got is None:
            return
        h, _, fds = got
        op = h.get("op")
        if op == "load":
            try:
                ns = load_namespace(h["source"], target, str(device))
                entry = Entry(ns, h["source"]["file"])
                reply(sock, loaded(ns, h))
            except CompileError as e:
                reply(sock, {"op": "compile_error", "message": str(e)})
            except CandidateError as e:
                reply(sock, {"op": "error", "message": str(e)})
            except Exception:  # noqa: BLE001 - candidate code failed
                error_reply(sock)
        elif op == "pool":
            layout = Layout.from_json(h["layout"])
            in_specs = [(tuple(shape), d) for (shape, _), d in zip(h["layout"]["inputs"], h["dtypes"]["inputs"])]
            out_specs = [(tuple(shape), d) for (shape, _), d in zip(h["layout"]["outputs"], h["dtypes"]["outputs"])]
            try:
                inp, in_buf = region(fds[0], layout.input_region(), True)
                out, out_buf = region(fds[1], layout.output_region(), False)
                axes = {k: int(v) for k, v in h["axes"].items()}
                fn = entry.bind(torch, device, h["workload"], axes, h.get("init_args", []), h["names"]["inputs"], h.get("constants"))
            except CandidateError as e:
                reply(sock, {"op": "error", "message": str(e)})
                continue
            except Exception:  # noqa: BLE001 - a model that cannot be built, memory that cannot be mapped
                error_reply(sock)
                continue
            # Each set's views, made once: making them per call cost a short kernel's time. On
            # the CPU an output "view" is where its bytes go: (shape, dtype, offset).
            in_views = [views(in_buf, layout, layout.input_offset, in_specs, s) for s in range(layout.sets)]
            if cuda:
                out_views = [views(out_buf, layout, layout.output_offset, out_specs, s) for s in range(layout.sets)]
            else:
                out_views = [[Slot(shape, dtypes[d], layout.output_offset(s, t)) for t, (shape, d) in enumerate(out_specs)]
                             for s in range(layout.sets)]
            pools[h["id"]] = (layout, inp, in_views, out, out_views, h["names"], fn, out_buf)
            reply(sock, {"op": "ready"})
        elif op == "drop":
            p = pools.pop(h["id"], None)
            if p is not None and cuda:
                p[1].close()
                p[3].close()
            elif p is not None:
                os.close(p[3])
            reply(sock, {"op": "ready"})
        elif op in ("call", "go"):
            _, _, in_views, out, out_views, names, fn, out_buf = pools[h["pool"]]
            checked = op == "call"
            try:
                for s in h["sets"]:
                    ins = in_views[s]
                    if checked:
                        # Writable copies: a candidate that writes its inputs is told so.
                        ins = [clone(x) for x in ins]
                        before = [clone(x) for x in ins]
                    with torch.no_grad():
                        outs = outputs_of(torch, fn(*ins), names["outputs"])
                    for name, d, o in zip(names["outputs"], out_views[s], outs):
                        # What a tensor says of itself, read as a plain tensor's (a subclass's
                        # `__torch_function__` could claim any shape).
                        with plain():
                            problem = check_output(torch, name, o, d.shape, d.dtype, device)
                        if problem:
                            raise CandidateError(problem)
                        if not cuda:
                            data = host_bytes(o)
                            if data.nbytes != d.nbytes:
                                raise CandidateError(f"output `{name}` holds {data.nbytes} bytes; its shape and dtype take {d.nbytes}")
                            write_all(out, data, d.offset, _PWRITE)
                            continue
                        if in_region(o, out_buf):
                            raise CandidateError(_IN_THE_JUDGES_MEMORY.format(name))
                        d.copy_(o)
                    if not checked:
                        continue
                    if cuda:
                        synchronize()
                    for name, x, b in zip(names["inputs"], ins, before):
                        if not equal(x, b):
                            raise CandidateError(f"modified input `{name}`; inputs must not be written")
                if cuda:
                    synchronize()
                if not checked:
                    tick()
                # Nothing of this call outlives it: a KernelBench set of 7 GiB left the last
                # call's result and the check's copy of the inputs held, 14 GiB, while the next
                # call made its own.
                ins = before = outs = o = x = b = None
                if checked and cuda:
                    # A check is not timed: its copies go back to the device, which the judge and
                    # the other runners share.
                    torch.cuda.empty_cache()
                reply(sock, {"op": "done"})
            except CandidateError as e:
                if not checked:
                    tick()
                reply(sock, {"op": "bad_output", "message": str(e)})
            except Exception:  # noqa: BLE001 - candidate code failed (a CUDA error among them)
                if not checked:
                    tick()
                error_reply(sock)
        else:
            reply(sock, {"op": "error", "message": f"unknown request {op!r}"})


def sync_of(torch):
    """The runner's wait for its device: torch's C function that waits for every stream of the
    current device, as it is now (a builtin: nothing a module rebinds later reaches it); None in
    a build of torch without CUDA."""
    return getattr(torch._C, "_cuda_synchronize", None)


class Slot:
    """Where a torch runner on the CPU writes one output of one set: its shape, its dtype and
    its offset in the output descriptor."""

    def __init__(self, shape, dtype, offset):
        self.shape, self.dtype, self.offset = tuple(shape), dtype, offset
        self.nbytes = int(np.prod(self.shape, dtype=np.int64)) * dtype.itemsize


def _helpers(target):
    """The `ksearch_torch` module candidates may import: `load_cu` for a `.cu` file's C ABI."""
    import types

    from . import torch_cu

    mod = types.ModuleType("ksearch_torch")
    mod.load_cu = lambda source, function, **kw: torch_cu.load_cu(source, function, target=target, **kw)
    return mod


def trace(sock, target):
    """Load a module and trace its `run` into one graph per workload."""
    from .arrays import arrays_for

    arrays = arrays_for(target)
    mx = arrays.mx
    run = None
    while True:
        got = request(sock)
        if got is None:
            return
        h, _, _ = got
        op = h.get("op")
        if op == "load":
            try:
                run = load_module(h["source"], target)
                reply(sock, {"op": "loaded"})
            except CompileError as e:
                reply(sock, {"op": "compile_error", "message": str(e)})
            except CandidateError as e:
                reply(sock, {"op": "error", "message": str(e)})
        elif op == "trace":
            try:
                blobs = [export(mx, arrays, run, w) for w in h["workloads"]]
                reply(sock, {"op": "traced", "sizes": [len(b) for b in blobs]}, b"".join(blobs))
            except BadAnswer as e:
                reply(sock, {"op": "bad_output", "message": str(e)})
            except Exception:  # noqa: BLE001
                error_reply(sock)
        else:
            reply(sock, {"op": "error", "message": f"unknown request {op!r}"})


def export(mx, arrays, run, w):
    """The graph of `run` on one workload's shapes, as `mx.export_function` writes it. What `run`
    returns is checked first (`traced_answer`): MLX writes a graph by reading its arrays'
    memory, and an array of another trace has none (on MLX 0.32.4 such a graph crashed the
    tracer with SIGSEGV)."""
    axes = {k: int(v) for k, v in w["axes"].items()}
    placeholders = [mx.zeros(tuple(shape), dtype=arrays.dtypes[dtype]) for shape, dtype in w["inputs"]]
    n = w["n_outputs"]

    with tempfile.TemporaryDirectory() as d:
        def fn(*xs):
            # The inputs as traced, kept apart: an assignment into an input (`x[0] = 0`) makes
            # the module's `x` a new array, whose graph starts from the input it replaced.
            traced = [copy.copy(x) for x in xs]
            try:
                outs = outputs_of(run(*xs, **axes), n)
            except CandidateError as e:
                raise BadAnswer(str(e)) from None
            return traced_answer(mx, outs, traced, w, d)

        path = os.path.join(d, "fn.mlxfn")
        try:
            mx.export_function(path, fn, *placeholders)
        except CandidateError:
            raise
        except Exception as e:  # noqa: BLE001
            raise CandidateError(f"`run` could not be traced on workload `{w['name']}` ({type(e).__name__}: {e}); it must be a function of its inputs built from MLX operations and kernels, without reading array values") from None
        with open(path, "rb") as f:
            return f.read()


def traced_answer(mx, outs, xs, w, scratch):
    """`outs` (what `run` returned while traced on the inputs `xs`) as a tuple of MLX arrays
    whose graph MLX can write, or BadAnswer. Every output must be an MLX array, and every leaf
    of their graph (an array without an operation that made it) must be one of `xs` or hold
    data: a leaf without data is an array of another trace (an earlier call's, kept by the
    module, or one it traced itself), which MLX would write by reading memory it does not have.
    The leaves are found by tracing the answer once more with a callback (MLX names every leaf
    that is not that trace's input a constant, and reads none of them); the one operation MLX
    offers that tells an array's identity is its graph printer, which names the inputs it is
    given."""
    names = w.get("outputs") or [f"output {t + 1}" for t in range(len(outs))]
    for name, o in zip(names, outs):
        if not isinstance(o, mx.array):
            raise BadAnswer(f"output `{name}` is a {type(o).__name__}, not an MLX array")
    outs = tuple(outs)
    leaves = []

    def constants(msg):
        if msg.get("type") == "constants":
            leaves.extend(a for _, a in msg["constants"])
    mx.export_function(constants, lambda: outs)
    dot = os.path.join(scratch, "leaf.dot")
    named = {f"ksearch_input_{i}": x for i, x in enumerate(xs)}
    for leaf in leaves:
        try:
            mx.eval(leaf)
            continue  # it holds data (a constant of the module's)
        except (RuntimeError, ValueError):
            pass
        # No data: one of this trace's inputs, or an array of another trace. Printed beside the
        # inputs, it is one of them exactly when the printer finds no source of its own.
        mx.export_to_dot(dot, leaf, **named)
        with open(dot) as f:
            sources = f.read().count("rank=source")
        if sources > len(named):
            raise BadAnswer(f"`run` returned arrays that depend on an array of another trace of it (on workload `{w['name']}`): "
                            "a module returns what it computes from the inputs of the call, not arrays it kept from an earlier "
                            "call or made in a trace of its own")
    return outs


def execute(sock, target):
    """Run graphs traced elsewhere; inputs drawn here from the judge's seeds."""
    from . import kernel_cache
    from .arrays import arrays_for

    # Before MLX compiles anything: where it finds and puts compiled kernels.
    view = kernel_cache.private_view()
    arrays = arrays_for(target)
    mx = arrays.mx
    fns = {}
    rounds = {}
    workdir = tempfile.mkdtemp()
    while True:
        got = request(sock)
        if got is None:
            return
        h, payload, _ = got
        op = h.get("op")
        try:
            if op == "functions":
                pos = 0
                for name, size in zip(h["names"], h["sizes"]):
                    path = os.path.join(workdir, f"{len(fns)}.mlxfn")
                    with open(path, "wb") as f:
                        f.write(payload[pos:pos + size])
                    pos += size
                    fns[name] = mx.import_function(path)
                reply(sock, {"op": "loaded"})
            elif op == "check":
                w = h["workload"]
                specs = h["inputs"]
                ins = arrays.draw_inputs(specs, h["shapes"], h["seed"], w)
                outs = list(fns[w](*ins))
                mx.eval(outs)
                problem = describe_outputs(arrays, outs, h["outputs"])
                if problem is None:
                    # Drawn again and compared on the device: a round trip of every input costs more.
                    for s, x, v in zip(specs, ins, arrays.draw_inputs(specs, h["shapes"], h["seed"], w)):
                        if not mx.array_equal(x, v, equal_nan=True).item():
                            problem = f"modified input `{s['name']}`; inputs must not be written"
                            break
                if problem is not None:
                    reply(sock, {"op": "bad_output", "message": problem})
                else:
                    reply(sock, *pack(arrays, outs))
            elif op == "round":
                w = h["workload"]
                # Only the round being timed keeps its sets (`prepare_round` hands the memory of
                # the last one back to the device, which the contenders' processes share).
                rounds.clear()
                rounds[w] = {"sets": prepare_round(mx, arrays, h), "outs": []}
                reply(sock, {"op": "ready"})
            elif op == "go":
                r = rounds[h["workload"]]
                fn = fns[h["workload"]]
                at = h.get("at", 0)
                try:
                    outs = [fn(*r["sets"][at + j]) for j in range(h["k"])]
                    mx.eval(outs)
                finally:
                    tick()
                r["outs"] = outs
                reply(sock, {"op": "done"})
            elif op == "sample":
                reply(sock, {"op": "values"}, sample(mx, arrays, rounds[h["workload"]]["outs"], h["positions"]).tobytes())
            elif op == "fetch":
                outs = rounds[h["workload"]]["outs"][h["call"]]
                reply(sock, *pack(arrays, list(outs)))
            elif op == "kernels":
                files = kernel_cache.compiled(view)
                reply(sock, {"op": "kernels", "files": [{"name": n, "bytes": len(b)} for n, b in files]}, b"".join(b for _, b in files))
            else:
                reply(sock, {"op": "error", "message": f"unknown request {op!r}"})
        except Exception:  # noqa: BLE001 - a graph that fails to build or run
            error_reply(sock)


def prepare_round(mx, arrays, h):
    """The input sets of a graph round (request `h`), drawn on the device. Everything else MLX
    keeps cached then goes back to the device, which the contenders' processes share: the last
    round's sets and outputs, and the draw's f32 intermediates (twice an f16 round's bytes; kept,
    with five processes on one GPU, they ran an H200's 141 GB out of memory). Then the outputs'
    memory is poisoned (`arrays.poison`): the last buffers freed are the ones the calls' outputs
    get, NaN-filled."""
    from .arrays import round_inputs

    keep = h.get("keep")
    keep = (int(keep[0]), int(keep[1])) if keep is not None else None
    sets = round_inputs(mx, arrays, h["inputs"], h["shapes"], h["seed"], h["sets"], keep)
    mx.eval(sets)
    mx.clear_cache()
    if h.get("poison", True):
        arrays.poison([(tuple(o["shape"]), o["dtype"]) for o in h["outputs"]] * (keep[1] if keep else h["sets"]))
    return sets


def sample(mx, arrays, outs, positions):
    """The values at `positions` ((call, output, flat index)) of a round's outputs, as float64."""
    pos = np.asarray(positions, dtype=np.int64).reshape(-1, 3)
    vals = np.zeros(len(pos), dtype=np.float64)
    keys, where = np.unique(pos[:, :2], axis=0, return_inverse=True)
    where = where.reshape(-1)
    picks = [np.flatnonzero(where == g) for g in range(len(keys))]
    if not len(pos):
        return vals
    # One gather per (call, output), one copy to the host per output dtype.
    groups = {}
    for (c, t), p in zip(keys.tolist(), picks):
        x = outs[c][t]
        g = groups.setdefault(str(x.dtype), ([], []))
        g[0].append(mx.take(x.reshape(-1), mx.array(pos[p, 2])))
        g[1].append(p)
    for gathered, where in groups.values():
        vals[np.concatenate(where)] = arrays.to_numpy(mx.concatenate(gathered)).astype(np.float64)
    return vals


def describe_outputs(arrays, outs, specs):
    if len(outs) != len(specs):
        return f"run returned {len(outs)} output(s); the task declares {len(specs)}"
    for o, s in zip(outs, specs):
        if tuple(o.shape) != tuple(s["shape"]):
            return f"output `{s['name']}` has shape {tuple(o.shape)}; the task declares {tuple(s['shape'])}"
        if arrays.dtype_name(o) != s["dtype"]:
            return f"output `{s['name']}` has dtype {arrays.dtype_name(o)}; the task declares {s['dtype']}"
    return None


def pack(arrays, outs):
    arrays = [np.ascontiguousarray(arrays.to_numpy(o)) for o in outs]
    header = {"op": "outputs", "arrays": [{"dtype": a.dtype.str, "shape": list(a.shape), "bytes": a.nbytes} for a in arrays]}
    return header, b"".join(a.tobytes() for a in arrays)


def keep_freed_memory():
    """glibc's malloc, told to keep what is freed: no trimming of the heap's top and no mmap
    under 64 MiB. By default it adapts both as a process runs, and may then return the heap's
    top to the system after every call, so that every call's temporaries fault in fresh pages: an
    honest numpy softmax read 2.7× slower than its twin that merely kept a reference to its last
    output (which keeps the top in use). Every runner gets the same fixed setting, so a module's
    speed does not depend on that. Elsewhere (macOS, musl) nothing is changed."""
    try:
        libc = ctypes.CDLL(None)
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return
    mallopt(-1, 1 << 30)  # M_TRIM_THRESHOLD
    mallopt(-3, 64 << 20)  # M_MMAP_THRESHOLD


def main():
    keep_freed_memory()
    ap = argparse.ArgumentParser(prog="ksearch_harness.runner")
    ap.add_argument("mode", choices=["direct", "trace", "exec", "torch"])
    ap.add_argument("--target", required=True)
    ap.add_argument("--fd", type=int, required=True, help="the socket to the judge")
    ap.add_argument("--clock-fd", type=int, required=True, help="where to say \"done\" after a timed batch")
    args = ap.parse_args()
    sock = socket.socket(fileno=args.fd)
    CLOCK[0] = socket.socket(fileno=args.clock_fd)
    link.send(sock, {"op": "hello", "pid": os.getpid()})
    {"direct": direct, "trace": trace, "exec": execute, "torch": torch_direct}[args.mode](sock, args.target)


if __name__ == "__main__":
    main()

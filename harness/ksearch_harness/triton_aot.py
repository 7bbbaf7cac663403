"""The Triton kernels of a torch module compiled ahead of time for an NVIDIA GPU that this machine
need not have (`ksearch space check` of a torch task's template space):

    python3 -m ksearch_harness.triton_aot --capability 9.0 --shared-limit BYTES --task TASK.json [--keep]

Module paths come on stdin, one a line; for each, one JSON line on stdout:
`{"kernels": [...]}` (each compiled kernel: name, workload, warps, stages, shared memory bytes,
registers a thread, bytes of stack frame it spills registers to, TMA and wgmma instructions in its PTX),
`{"error": "..."}` (a kernel did not compile, or needs more shared memory than `--shared-limit`),
or `{"unchecked": "..."}` (the module could not be run this way; nothing is known). With `--keep`,
each kernel's SASS is written beside the module first (`keep`).

Each module's `run` (or `ModelNew`) is called once per workload on `meta` tensors (shapes and
dtypes, no data), as the torch backend calls it, with a Triton driver that compiles each launch
for the given compute capability instead of running it. Triton compiles with its own LLVM and
the `ptxas` it ships; no GPU, CUDA driver or toolkit is needed. The module is the user's own
template: it runs in this process, unsandboxed, as a build would."""

import argparse
import functools
import json
import os
import re
import subprocess
import sys
import tempfile

from .candidates import CandidateError, CompileError, load_namespace, trimmed_traceback
from .torch_arrays import torch_dtypes
from .torch_modules import Entry, constants_for, init_args_for


def serve(prog, make_compiler, unavailable):
    """The command line and the loop both ahead-of-time compilers share: `make_compiler(capability)`
    (an error of one of the `unavailable` types says why there is none), then one JSON line per
    module path read."""
    ap = argparse.ArgumentParser(prog=prog)
    ap.add_argument("--capability", required=True, help="the NVIDIA compute capability, e.g. 9.0")
    ap.add_argument("--shared-limit", type=int, required=True, help="shared memory a block may use, in bytes")
    ap.add_argument("--task", required=True, help="the task as JSON (its inputs and workloads)")
    ap.add_argument("--keep", action="store_true",
                    help="write each kernel's machine code beside its module: MODULE.KERNEL.WORKLOAD.sass "
                         "(by the nvdisasm Triton ships; the .cubin where there is none)")
    args = ap.parse_args()
    with open(args.task) as f:
        task = json.load(f)
    try:
        compiler = make_compiler(args.capability)
    except unavailable as e:
        print(json.dumps({"unavailable": str(e)}), flush=True)
        return
    for line in sys.stdin:
        path = line.strip()
        if path:
            answered = compiler.check(path, task, args.shared_limit)
            if args.keep:
                for kernel, workload, cubin in compiler.cubins:
                    keep(path, kernel, workload, cubin)
            print(json.dumps(answered), flush=True)


@functools.lru_cache(maxsize=None)
def nvidia_tool(name):
    """A CUDA binary tool Triton's wheel ships (`nvdisasm`, `cuobjdump`), found without importing
    Triton; None where there is none."""
    import importlib.util

    spec = importlib.util.find_spec("triton")
    if not spec or not spec.submodule_search_locations:
        return None
    tool = os.path.join(spec.submodule_search_locations[0], "backends", "nvidia", "bin", name)
    return tool if os.access(tool, os.X_OK) else None


def keep(path, kernel, workload, cubin):
    """A kernel's cubin disassembled beside the module at `path` (`--keep`), as
    MODULE.KERNEL.WORKLOAD.sass, or kept as the .cubin where nvdisasm cannot be run."""
    stem = f"{os.path.splitext(path)[0]}.{kernel}.{workload}"
    tool = nvidia_tool("nvdisasm")
    if tool:
        with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
            f.write(cubin)
            f.flush()
            try:
                done = subprocess.run([tool, "-c", f.name], capture_output=True, text=True, timeout=120)
            except (OSError, subprocess.SubprocessError):
                done = None
        if done and done.returncode == 0:
            with open(stem + ".sass", "w", encoding="utf-8") as out:
                out.write(done.stdout)
            return
    with open(stem + ".cubin", "wb") as out:
        out.write(cubin)


def main():
    def compiler(capability):
        try:
            return Compiler(capability)
        except ImportError as e:
            raise ImportError(f"Triton cannot be imported here ({e})") from None

    serve("ksearch_harness.triton_aot", compiler, ImportError)


class Compiler:
    """Triton with a driver of its own: every launch compiles for `capability` and returns."""

    def __init__(self, capability):
        import torch
        import triton
        from triton.backends.compiler import GPUTarget
        from triton.backends.driver import DriverBase
        from triton.runtime import jit

        major, _, minor = capability.partition(".")
        arch = int(major) * 10 + int(minor or 0)

        class AheadOfTime(DriverBase):
            target = GPUTarget("cuda", arch, 32)

            @classmethod
            def is_active(cls):
                return True

            def get_current_target(self):
                return self.target

            def get_current_device(self):
                return 0

            def get_current_stream(self, device=None):
                return 0

            def get_active_torch_device(self):
                return torch.device("meta")

            def _no_gpu(self, *_):
                raise RuntimeError("compiling ahead of time: there is no GPU to run on")

            map_python_to_cpp_type = get_benchmarker = get_device_interface = _no_gpu
            get_empty_cache_for_benchmark = clear_cache = _no_gpu

        triton.runtime.driver.set_active(AheadOfTime())
        self.torch, self.compiled = torch, []
        launch = jit.JITFunction.run
        compiled = self.compiled

        def compile_only(fn, *a, grid, warmup, **kw):
            kernel = launch(fn, *a, grid=grid, warmup=True, **kw)
            compiled.append((fn.fn.__name__, kernel))
            return kernel

        jit.JITFunction.run = compile_only
        self.cubins = []

    def check(self, path, task, shared_limit):
        torch = self.torch
        from triton.compiler.errors import CompilationError

        with open(path, encoding="utf-8") as f:
            source = {"file": os.path.basename(path), "text": f.read()}
        # (kernel, workload, cubin) of each kernel compiled for this module, for `--keep`.
        self.cubins = []
        meta = torch.device("meta")
        dtypes = torch_dtypes(torch)
        kernels = []
        try:
            ns = load_namespace(source, "cuda", meta)
            entry = Entry(ns, source["file"])
            names = [s["name"] for s in task["inputs"]]
            for w in task["workloads"]:
                axes = w["axes"]
                inputs = [torch.empty([int(axes[a]) for a in s["shape"]], dtype=dtypes[s["dtype"]], device=meta)
                          for s in task["inputs"]]
                fn = entry.bind(torch, meta, w["name"], axes, init_args_for(ns, axes), names, constants_for(ns, axes))
                del self.compiled[:]
                try:
                    fn(*inputs)
                except CompilationError as e:
                    return {"error": f"a Triton kernel does not compile for workload `{w['name']}`:\n{first_lines(str(e), 12)}"}
                except Exception:  # noqa: BLE001 - anything else: the module cannot be run this way
                    if not self.compiled:
                        return {"unchecked": f"run raised on meta tensors before any Triton launch: {last_line(trimmed_traceback(2))}"}
                for name, k in self.compiled:
                    kernels.append(self.describe(name, w["name"], k))
                    if k.asm.get("cubin"):
                        self.cubins.append((name, w["name"], k.asm["cubin"]))
        except (CandidateError, CompileError) as e:
            return {"unchecked": last_line(str(e))}
        return answer(kernels, shared_limit, "Triton kernel `{name}` needs", "run launched no Triton kernel")

    def describe(self, name, workload, k):
        ptx = k.asm.get("ptx", "")
        usage = self.resources(k.asm.get("cubin"))
        return {
            "name": name,
            "workload": workload,
            "warps": k.metadata.num_warps,
            "stages": k.metadata.num_stages,
            "shared": k.metadata.shared,
            "registers": usage.get("REG"),
            "spilled": usage.get("STACK"),
            "tma": len(re.findall(r"cp\.async\.bulk\.tensor", ptx)),
            "wgmma": len(re.findall(r"wgmma\.mma_async", ptx)),
        }

    def resources(self, cubin):
        """Registers and stack frame of a cubin's kernel, by Triton's own cuobjdump: a Triton
        kernel has no stack of its own, so its stack frame holds registers spilled by ptxas."""
        tool = nvidia_tool("cuobjdump")
        if not cubin or not tool:
            return {}
        with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
            f.write(cubin)
            f.flush()
            try:
                out = subprocess.run([tool, "-res-usage", f.name],
                                     capture_output=True, text=True, timeout=60).stdout
            except (OSError, subprocess.SubprocessError):
                return {}
        found = re.search(r"REG:(\d+) STACK:(\d+)", out)
        return {"REG": int(found.group(1)), "STACK": int(found.group(2))} if found else {}



def answer(kernels, shared_limit, kernel_needs, none):
    """A module's answer once its kernels compiled: an error for the first that uses more shared
    memory than a block may have (`kernel_needs` says of it, with `{name}`), `none` where there
    were no kernels, else the kernels."""
    for k in kernels:
        if k["shared"] > shared_limit:
            said = kernel_needs.format(name=k["name"])
            return {"error": f"{said} {k['shared']} bytes of shared memory on workload `{k['workload']}`; a block may have {shared_limit}",
                    "kernels": kernels}
    if not kernels:
        return {"unchecked": none}
    return {"kernels": kernels}


def first_lines(text, n):
    lines = text.strip().splitlines()
    return "\n".join(lines[:n] + ([f"... ({len(lines) - n} more lines)"] if len(lines) > n else []))


def last_line(text):
    lines = text.strip().splitlines()
    return lines[-1] if lines else text


if __name__ == "__main__":
    main()

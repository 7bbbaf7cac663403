"""The CUDA kernels of MLX modules (`mx.fast.cuda_kernel`) compiled ahead of time by NVRTC for an
NVIDIA GPU that this machine need not have (`ksearch space check` of an MLX task's template space):

    python3 -m ksearch_harness.mlx_aot --capability 9.0 --shared-limit BYTES --task TASK.json

Module paths come on stdin, one a line; for each, one JSON line on stdout, as
`ksearch_harness.triton_aot` answers: `{"kernels": [...]}` (each kernel compiled: name, workload,
shared memory a block (the static that ptxas reports plus the dynamic its `shared_memory` asks
for), registers and stack frame a thread, as ptxas reports them), `{"error": "..."}` (NVRTC's log
of a kernel that does not compile, or shared memory over `--shared-limit`), or `{"unchecked":
"..."}`.

Each module's `run` is called once per workload on MLX arrays of the workload's shapes (zeros, on
MLX's CPU device), with `mx.fast.cuda_kernel` standing in for MLX's: each kernel the module makes
is wrapped much as MLX's CUDA backend wraps one (a `__global__` function of its inputs, `const`,
and outputs, of the dtypes the call passes and asks for, the call's template arguments as
template parameters, CUDA's half and bfloat16 headers and the fixed-width integer types included (not cooperative groups, whose
headers PyTorch's wheel lacks), then the module's `header`),
compiled for `sm_XYa` of the capability, and answered with zeros. NVRTC is the one PyTorch's CUDA
wheel installs (or a CUDA toolkit's, under CUDA_HOME). The wrapper is not MLX's own code: a kernel
that uses what only MLX's headers define fails here and may build under MLX. The module is the
user's own template: it runs in this process, unsandboxed, as a build would."""

import ctypes
import glob
import os
import re
import sys
from concurrent.futures import ThreadPoolExecutor

from .candidates import CandidateError, CompileError, load_namespace, trimmed_traceback
from .triton_aot import answer, first_lines, last_line, serve

# MLX's headers give kernels the fixed-width integer types (its signatures use them); NVRTC's
# do not.
WRAPPER = """#include <cuda_fp16.h>
#include <cuda_bf16.h>
typedef signed char int8_t;
typedef short int16_t;
typedef int int32_t;
typedef long long int64_t;
typedef unsigned char uint8_t;
typedef unsigned short uint16_t;
typedef unsigned int uint32_t;
typedef unsigned long long uint64_t;
#ifndef INFINITY
#define INFINITY __int_as_float(0x7f800000)
#endif
#define inf INFINITY
{header}
{template}__global__ void {name}({params}) {{
{source}
}}
{instance}
"""


def main():
    serve("ksearch_harness.mlx_aot", Compiler, (ImportError, OSError))


def nvrtc_paths():
    """(libnvrtc, its builtins, include directories): PyTorch's CUDA wheel, else CUDA_HOME."""
    roots = [os.path.join(p, "nvidia", "*") for p in sys.path if p.endswith("-packages")]
    roots += [os.environ.get("CUDA_HOME") or "/usr/local/cuda"]
    for root in roots:
        for lib in sorted(glob.glob(os.path.join(root, "lib*", "libnvrtc.so*"))):
            builtins = sorted(glob.glob(os.path.join(os.path.dirname(lib), "libnvrtc-builtins.so*")))
            include = os.path.join(os.path.dirname(os.path.dirname(lib)), "include")
            if builtins and os.path.isfile(os.path.join(include, "cuda_fp16.h")):
                return lib, builtins[0], include
    raise ImportError("no NVRTC found (pip install torch brings one on Linux; or set CUDA_HOME)")


class Compiler:
    """NVRTC, and `mx.fast.cuda_kernel` replaced by a maker of kernels that compile and answer zeros."""

    def __init__(self, capability):
        try:
            import mlx.core as mx
        except ImportError as e:
            raise ImportError(f"MLX cannot be imported here ({e})") from None
        from .arrays import MlxArrays

        # Inputs on MLX's CPU device, of the dtypes the harness gives a task's names.
        self.dtypes = MlxArrays("cpu").dtypes

        lib, builtins, self.include = nvrtc_paths()
        # The builtins first, where libnvrtc looks for them by name.
        ctypes.CDLL(builtins, mode=ctypes.RTLD_GLOBAL)
        self.nvrtc = ctypes.CDLL(lib)
        major, _, minor = capability.partition(".")
        arch = int(major) * 10 + int(minor or 0)
        # The architecture-specific instructions (wgmma, setmaxnreg) need the `a` variant.
        self.arch = f"sm_{arch}a" if arch >= 90 else f"sm_{arch}"
        self.mx = mx
        self.compiled = []
        self.cubins = []
        # Kernels compile on threads of their own (NVRTC runs without Python's lock), each text
        # once: a workload's or a point's that another already made is not compiled again.
        self.pool = ThreadPoolExecutor(max_workers=os.cpu_count() or 1)
        self.builds = {}
        compiler = self

        def cuda_kernel(name, input_names, output_names, source, header="", ensure_row_contiguous=True, atomic_outputs=False,
                        shared_memory=0):
            def call(inputs, output_shapes, output_dtypes, grid=None, threadgroup=None, template=None, **_):
                compiler.compiled.append(compiler.build(name, input_names, output_names, source, header, inputs,
                                                        output_dtypes, template or []) + (shared_memory,))
                return [mx.zeros(tuple(s), dtype=d) for s, d in zip(output_shapes, output_dtypes)]
            return call

        mx.fast.cuda_kernel = cuda_kernel

    def ctype(self, dtype):
        mx = self.mx
        return {mx.float16: "__half", mx.bfloat16: "__nv_bfloat16", mx.float32: "float", mx.float64: "double",
                mx.int32: "int32_t", mx.int64: "int64_t", mx.uint32: "uint32_t", mx.uint8: "uint8_t",
                mx.int8: "int8_t", mx.int16: "int16_t", mx.uint16: "uint16_t", mx.bool_: "bool"}[dtype]

    def build(self, name, input_names, output_names, source, header, inputs, output_dtypes, template):
        """The kernel wrapped, and its compile under way: (name, a future of (what it uses or None, NVRTC's log, the cubin or None))."""
        params = [f"const {self.ctype(x.dtype)}* {n}" for n, x in zip(input_names, inputs)]
        params += [f"{self.ctype(d)}* {n}" for n, d in zip(output_names, output_dtypes)]
        kinds, values = [], []
        for key, value in template:
            if isinstance(value, bool):
                kinds.append(f"bool {key}")
                values.append("true" if value else "false")
            elif isinstance(value, int):
                kinds.append(f"int {key}")
                values.append(str(value))
            else:
                kinds.append(f"typename {key}")
                values.append(self.ctype(value))
        fn = f"custom_kernel_{name}"
        text = WRAPPER.format(
            header=header, name=fn, params=", ".join(params), source=source,
            template=f"template <{', '.join(kinds)}>\n" if kinds else 'extern "C" ',
            instance=f"template __global__ void {fn}<{', '.join(values)}>({', '.join(params)});" if kinds else "")
        if text not in self.builds:
            self.builds[text] = self.pool.submit(self.nvrtc_compile, text, f"{fn}.cu")
        return name, self.builds[text]

    def nvrtc_compile(self, text, filename):
        lib = self.nvrtc
        prog = ctypes.c_void_p()
        if lib.nvrtcCreateProgram(ctypes.byref(prog), text.encode(), filename.encode(), 0, None, None) != 0:
            return None, "nvrtcCreateProgram failed", None
        try:
            opts = [f"--gpu-architecture={self.arch}", f"-I{self.include}", "--std=c++17", "-default-device",
                    "--ptxas-options=-v"]
            argv = (ctypes.c_char_p * len(opts))(*[o.encode() for o in opts])
            status = lib.nvrtcCompileProgram(prog, len(opts), argv)
            size = ctypes.c_size_t()
            lib.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
            log = ctypes.create_string_buffer(size.value)
            lib.nvrtcGetProgramLog(prog, log)
            text = log.value.decode(errors="replace")
            if status != 0:
                return None, text, None
            size = ctypes.c_size_t()
            lib.nvrtcGetCUBINSize(prog, ctypes.byref(size))
            cubin = ctypes.create_string_buffer(size.value)
            lib.nvrtcGetCUBIN(prog, cubin)
            return usage(text), "", cubin.raw
        finally:
            lib.nvrtcDestroyProgram(ctypes.byref(prog))

    def check(self, path, task, shared_limit):
        mx = self.mx
        with open(path, encoding="utf-8") as f:
            source = {"file": os.path.basename(path), "text": f.read()}
        # (kernel, workload, cubin) of each distinct kernel compiled for this module, for `--keep`.
        self.cubins = []
        made = []
        try:
            ns = load_namespace(source, "cuda")
            run = ns.get("run")
            if not callable(run):
                return {"unchecked": f"{source['file']} defines no `run`"}
            for w in task["workloads"]:
                axes = w["axes"]
                inputs = [mx.zeros([int(axes[a]) for a in s["shape"]], dtype=self.dtypes[s["dtype"]]) for s in task["inputs"]]
                del self.compiled[:]
                try:
                    mx.eval(run(*inputs, **axes))
                except Exception:  # noqa: BLE001 - the module cannot be run this way
                    if not self.compiled:
                        return {"unchecked": f"run raised before making any CUDA kernel: {last_line(trimmed_traceback(2))}"}
                made += [(name, w["name"], build, dynamic) for name, build, dynamic in self.compiled]
        except (CandidateError, CompileError) as e:
            return {"unchecked": last_line(str(e))}
        kernels = []
        kept = set()
        for name, workload, build, dynamic in made:
            used, log, cubin = build.result()
            if cubin is not None and id(build) not in kept:
                kept.add(id(build))
                self.cubins.append((name, workload, cubin))
            if used is None:
                return {"error": f"CUDA kernel `{name}` does not compile for {self.arch} on workload `{workload}`:\n{first_lines(log, 12)}"}
            # A block's shared memory: the static that ptxas counted and the dynamic it asks for.
            kernels.append({"name": name, "workload": workload, **used, "shared": used["shared"] + int(dynamic)})
        return answer(kernels, shared_limit, "CUDA kernel `{name}` declares", "run made no CUDA kernel")


def usage(log):
    """What ptxas said the kernel uses (`--ptxas-options=-v`): static shared memory a block,
    registers a thread, the stack frame a thread spills them to, and how often ptxas said it
    serialized the warpgroup products."""
    regs = re.search(r"Used (\d+) registers", log)
    smem = re.search(r"(\d+) bytes smem", log)
    stack = re.search(r"(\d+) bytes stack frame", log)
    # "Potential Performance Loss: wgmma.mma_async instructions are serialized due to ...": the
    # products run one after another, waited for each time (correct, and slow).
    serialized = len(re.findall(r"wgmma\.mma_async instructions are serialized", log))
    return {"shared": int(smem.group(1)) if smem else 0, "registers": int(regs.group(1)) if regs else None,
            "spilled": int(stack.group(1)) if stack else None, "serialized": serialized}


if __name__ == "__main__":
    main()

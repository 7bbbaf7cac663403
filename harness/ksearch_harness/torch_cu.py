"""`ksearch_torch.load_cu`: a CUDA source with ksearch's C ABI, compiled and called from a torch
candidate (docs/torch.md, "A .cu file"):

    extern "C" void NAME(void *const *tensors, const int64_t *axes, cudaStream_t stream);

`tensors` holds the data pointers of the inputs, then the outputs, in the order the caller
passes them; `axes` the integers the caller passes; `stream` is PyTorch's current stream, on
which every kernel must be launched. On the `cpu` target (tests) the source is C++ for the host,
compiled with `c++`, and `stream` is NULL."""

import ctypes
import hashlib
import os
import shutil
import subprocess
import tempfile


class CuError(Exception):
    pass


def _compiler(target):
    if target == "cuda":
        nvcc = shutil.which("nvcc") or ("/usr/local/cuda/bin/nvcc" if os.path.exists("/usr/local/cuda/bin/nvcc") else None)
        if nvcc is None:
            raise CuError("load_cu needs nvcc (the CUDA toolkit) on PATH or in /usr/local/cuda/bin")
        return [nvcc, "-O3", "-shared", "-Xcompiler", "-fPIC", "-arch=native", "-x", "cu"]
    return [os.environ.get("CXX", "c++"), "-O3", "-shared", "-fPIC", "-x", "c++"]


def load_cu(source, function, target="cuda", flags=()):
    """Compile `source` and return `call(inputs, outputs, axes=())` for its `function`."""
    import torch

    key = hashlib.sha256((target + "\0" + source + "\0" + " ".join(flags)).encode()).hexdigest()[:16]
    d = os.path.join(tempfile.gettempdir(), f"ksearch-cu-{key}")
    os.makedirs(d, exist_ok=True)
    lib = os.path.join(d, "kernel.so")
    if not os.path.exists(lib):
        src = os.path.join(d, "kernel.cu")
        with open(src, "w") as f:
            f.write(source)
        cmd = _compiler(target) + list(flags) + ["-o", lib, src]
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode != 0:
            raise CuError(f"compiling the .cu source failed ({' '.join(cmd)}):\n{done.stderr[-6000:]}")
    fn = getattr(ctypes.CDLL(lib), function)
    fn.restype = None
    fn.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_int64), ctypes.c_void_p]

    def call(inputs, outputs, axes=()):
        tensors = list(inputs) + list(outputs)
        for t in tensors:
            if not t.is_contiguous():
                raise CuError("load_cu passes data pointers: every tensor must be contiguous")
        ptrs = (ctypes.c_void_p * max(len(tensors), 1))(*[t.data_ptr() for t in tensors])
        ax = (ctypes.c_int64 * max(len(axes), 1))(*[int(a) for a in axes])
        stream = torch.cuda.current_stream().cuda_stream if target == "cuda" else None
        fn(ptrs, ax, stream)

    return call

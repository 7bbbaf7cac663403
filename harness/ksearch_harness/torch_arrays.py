"""PyTorch as the harness's array library (the `torch` backend): tensors on the GPU (target
`cuda`) or on the CPU (target `cpu`, PyTorch's CPU build, for tests).

Tensors shared between the judge and a runner live in memory both map: on the CPU an unlinked
file (shared.py), on the GPU a CUDA allocation exported as a file descriptor (cuda_memory.py).
Either way a tensor is a byte range viewed as its dtype; `STORAGE` names the numpy dtype of the
same size that stands for it on the host (numpy has no bf16 or fp8)."""

import numpy as np

from .arrays import FLOATS, stream_seed

FLOATS = FLOATS | {"f8e4m3", "f8e5m2"}
STORAGE = {
    "f16": np.float16, "bf16": np.uint16, "f32": np.float32, "f64": np.float64,
    "i32": np.int32, "i64": np.int64, "f8e4m3": np.uint8, "f8e5m2": np.uint8,
    "i8": np.int8, "i16": np.int16, "bool": np.bool_,
}


def torch_dtypes(torch):
    return {
        "f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32, "f64": torch.float64,
        "i32": torch.int32, "i64": torch.int64, "f8e4m3": torch.float8_e4m3fn,
        "f8e5m2": torch.float8_e5m2, "i8": torch.int8, "i16": torch.int16, "bool": torch.bool,
    }


class TorchArrays:
    name = "torch"

    def __init__(self, target):
        import torch

        self.torch = torch
        self.target = target
        self.device = torch.device(target)
        self.dtypes = torch_dtypes(torch)
        if target == "cuda":
            torch.cuda.init()
            torch.zeros(1, device="cuda")

    def asarray(self, values, dtype):
        """A tensor of `dtype` on the device from float64 or int64 values (arrays.draw)."""
        torch = self.torch
        if dtype == "bool":
            t = torch.from_numpy(np.asarray(values) != 0)
        elif dtype in FLOATS:
            src = np.asarray(values, dtype=np.float64 if dtype == "f64" else np.float32)
            t = torch.from_numpy(src).to(self.dtypes[dtype])
        else:
            t = torch.from_numpy(np.asarray(values, dtype=np.int64)).to(self.dtypes[dtype])
        return t.to(self.device).contiguous()

    def to_numpy(self, x):
        """A numpy copy of a tensor, for comparisons: f16, f32 and f64 as they are, other
        floats (bf16, fp8) as float32, which holds them exactly, integers as int64, bools as
        bools. (`gauntlet.compare` works in float64 a chunk at a time: a whole float64 copy
        of a KernelBench output of 1.9 billion floats took 15 GB of the judge's memory.)"""
        torch = self.torch
        if not isinstance(x, torch.Tensor):
            return np.asarray(x)
        # A copy even where the tensor is on the CPU already (a view of a runner's outputs
        # would change under the judge).
        x = x.detach().to("cpu", copy=True)
        if x.dtype in (torch.bool, torch.float16, torch.float32, torch.float64):
            return x.numpy()
        if x.is_floating_point():
            return x.to(torch.float32).numpy()
        return x.to(torch.int64).numpy()

    def dtype_name(self, x):
        for name, t in self.dtypes.items():
            if x.dtype == t:
                return name
        return str(x.dtype)

    def sync(self, arrays=None):
        if self.target == "cuda":
            self.torch.cuda.synchronize()

    def poison(self, shapes_dtypes):
        pass

    def is_array(self, x):
        return isinstance(x, self.torch.Tensor)

    def describe(self):
        torch = self.torch
        parts = [f"torch {torch.__version__}"]
        try:
            import triton

            parts.append(f"triton {triton.__version__}")
        except ImportError:
            pass
        where = torch.cuda.get_device_name() if self.target == "cuda" else "cpu"
        return f"{', '.join(parts)} on {where} ({self.target})"


def fill_random(torch, view, spec, seed, workload, device):
    """Fill `view` (a tensor of the input's dtype) with values following the input's `init`,
    drawn on the device from `seed` (the timed rounds: fresh inputs for every call, no copy
    from the host)."""
    g = torch.Generator(device=device)
    g.manual_seed(stream_seed(seed, workload, spec["name"]) & ((1 << 63) - 1))
    dtype = spec["dtype"]
    init = spec.get("init")
    if init is None:
        init = {"randint": [0, 1]} if dtype == "bool" else ({"uniform": [-1.0, 1.0]} if dtype in FLOATS else {"randint": [-100, 100]})
    (kind, (a, b)), = init.items()
    if kind == "randint":
        tmp = torch.randint(int(a), int(b) + 1, tuple(view.shape), generator=g, device=device, dtype=torch.int64)
    else:
        tmp = torch.empty(tuple(view.shape), device=device, dtype=torch.float64 if dtype == "f64" else torch.float32)
        if kind == "uniform":
            tmp.uniform_(float(a), float(b), generator=g)
        else:
            tmp.normal_(float(a), float(b), generator=g)
    view.copy_(tmp)


def install_hint():
    return "pip install torch   (NVIDIA GPU: the PyPI wheel brings CUDA; Triton comes with it)"


def torch_arrays_for(target):
    try:
        import torch
    except ImportError as e:
        raise SystemExit(f"the torch backend needs PyTorch, which this Python cannot import ({e}). Install it with: {install_hint()}")
    if target is None:
        target = "cuda" if torch.cuda.is_available() else "cpu"
    if target == "cuda" and not torch.cuda.is_available():
        raise SystemExit(f"target cuda: PyTorch {torch.__version__} sees no CUDA GPU here (torch.cuda.is_available() is False)")
    return TorchArrays(target)

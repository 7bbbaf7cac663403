"""Array libraries: MLX (the real one, on Metal or CUDA; its CPU device for tests) and numpy (CPU;
lets the harness's protocol, loading and checking be tested where no GPU exists). ksearch calls
them the harness's arrays; a backend is what a task is written for (`mlx`, for this harness).

Checked inputs are drawn from a seed by `draw_inputs`: with numpy for the numpy target, on the
device for MLX (the same bits on every device). Timed inputs on MLX are drawn on the device too,
a round at a time."""

import zlib
from math import gcd

import numpy as np

NP_DTYPES = {"f16": np.float16, "f32": np.float32, "f64": np.float64, "i32": np.int32, "i64": np.int64}
FLOATS = {"f16", "bf16", "f32", "f64"}


def stream_seed(seed, *parts):
    """A 64-bit seed per (seed, workload, tensor), so adding an input changes no other input."""
    h = zlib.crc32("\x00".join(parts).encode())
    return (seed * 0x9E3779B97F4A7C15 + h) % (1 << 64)


def draw(spec, shape, seed, workload):
    """Random values for one input following its `init`: float32 (float64 for an f64 input;
    drawing every input in float64 took most of a check of a large workload) or int64."""
    rng = np.random.Generator(np.random.PCG64(stream_seed(seed, workload, spec["name"])))
    init = spec.get("init")
    dtype = spec["dtype"]
    if init is None:
        init = {"uniform": [-1.0, 1.0]} if dtype in FLOATS else {"randint": [-100, 100]}
    (kind, (a, b)), = init.items()
    real = np.float64 if dtype == "f64" else np.float32
    if kind == "uniform":
        x = rng.random(size=shape, dtype=real)
        x *= real(b - a)
        x += real(a)
        return x
    if kind == "normal":
        x = rng.standard_normal(size=shape, dtype=real)
        x *= real(b)
        x += real(a)
        return x
    if kind == "randint":
        return rng.integers(a, b, size=shape, endpoint=True)
    raise ValueError(f"unknown init {kind}")


class NumpyArrays:
    """CPU arrays; candidates are plain numpy functions. For tests of the harness itself."""

    name = "numpy"
    target = "numpy"

    def asarray(self, values, dtype):
        if dtype == "bf16":
            raise ValueError("the numpy target has no bf16")
        return np.ascontiguousarray(values.astype(NP_DTYPES[dtype]))

    def to_numpy(self, x):
        return np.asarray(x)

    def dtype_name(self, x):
        for name, t in NP_DTYPES.items():
            if np.asarray(x).dtype == t:
                return name
        return str(np.asarray(x).dtype)

    def sync(self, arrays):
        pass

    def poison(self, shapes_dtypes):
        pass

    def draw_inputs(self, specs, shapes, seed, workload):
        """One call's inputs from `seed`, as the judge and a runner both draw them."""
        return [self.asarray(draw(s, tuple(shape), seed, workload), s["dtype"]) for s, shape in zip(specs, shapes)]

    def is_array(self, x):
        return isinstance(x, np.ndarray)

    def describe(self):
        return f"numpy {np.__version__}"


class MlxArrays:
    """MLX arrays on the default GPU device."""

    name = "mlx"

    def __init__(self, target):
        import mlx.core as mx

        self.mx = mx
        self.target = target
        if target == "cpu":
            mx.set_default_device(mx.cpu)
        self.dtypes = {"f16": mx.float16, "bf16": mx.bfloat16, "f32": mx.float32, "i32": mx.int32, "i64": mx.int64}

    def asarray(self, values, dtype):
        mx = self.mx
        if dtype not in self.dtypes:
            raise ValueError(f"MLX on the GPU has no {dtype}")
        # bf16 goes through float32: numpy has no bf16.
        src = values.astype(np.float32, copy=False) if dtype in FLOATS else values.astype(np.int64, copy=False)
        a = mx.array(src).astype(self.dtypes[dtype])
        mx.eval(a)
        return a

    def to_numpy(self, x):
        mx = self.mx
        if x.dtype == mx.bfloat16:
            x = x.astype(mx.float32)
        return np.array(x)

    def dtype_name(self, x):
        for name, t in self.dtypes.items():
            if x.dtype == t:
                return name
        return str(x.dtype)

    def sync(self, arrays):
        self.mx.eval(arrays)

    def poison(self, shapes_dtypes):
        """Best effort: fill buffers of the outputs' sizes with NaN and free them, so the
        allocator hands NaN-filled memory to the next kernel's outputs. An output element the
        candidate never writes then reads as NaN instead of whatever the last call left."""
        mx = self.mx
        junk = []
        for shape, dtype in shapes_dtypes:
            if dtype in ("f16", "bf16", "f32"):
                junk.append(mx.full(shape, float("nan"), dtype=self.dtypes[dtype]))
            else:
                junk.append(mx.full(shape, -1, dtype=self.dtypes[dtype]))
        mx.eval(junk)
        del junk

    def draw_inputs(self, specs, shapes, seed, workload):
        """One call's inputs from `seed`, drawn on the device (drawing a large workload's inputs
        with numpy took a second a check, in the judge and again in the executor). MLX draws
        the same bits on every device; normal values may differ in the last bit between them."""
        mx = self.mx
        ins = [
            _device_draw(mx, self, s, tuple(shape), mx.random.key(stream_seed(seed, workload, s["name"])))
            for s, shape in zip(specs, shapes)
        ]
        mx.eval(ins)
        return ins

    def is_array(self, x):
        return isinstance(x, self.mx.array)

    def describe(self):
        return f"mlx {self.mx.__version__} on {device_name(self.mx)} ({self.target})"


def device_name(mx):
    """The default device's name as MLX reports it (a GPU's model, the CPU's), else MLX's label
    for it (`Device(gpu, 0)`), which does not say which GPU measured a run."""
    try:
        name = mx.device_info().get("device_name")
    except Exception:  # noqa: BLE001 - an MLX without device_info, or one that cannot tell
        name = None
    return name if isinstance(name, str) and name.strip() else str(mx.default_device())


def install_hint():
    import platform

    if platform.system() == "Darwin" and platform.machine() == "arm64":
        return "pip install mlx"
    if platform.system() == "Linux":
        return 'pip install "mlx[cuda13]"   (NVIDIA GPU, CUDA 13 driver; "mlx[cuda12]" for CUDA 12)'
    return "MLX runs on Apple silicon macOS (pip install mlx) or Linux with an NVIDIA GPU (pip install \"mlx[cuda13]\")"


def arrays_for(target, backend="mlx"):
    """The array library for `target` of `backend`: for mlx, metal, cuda, numpy or cpu (the GPU
    MLX sees when None); for torch, cuda or cpu (CUDA where PyTorch sees a GPU when None)."""
    if backend == "torch":
        from .torch_arrays import torch_arrays_for

        return torch_arrays_for(target)
    if target == "numpy":
        return NumpyArrays()
    if target == "cpu":
        try:
            import mlx.core  # noqa: F401
        except ImportError as e:
            raise SystemExit(f"target cpu needs MLX, which this Python cannot import ({e}). Install it with: pip install \"mlx[cpu]\"")
        return MlxArrays("cpu")
    try:
        import mlx.core as mx
    except ImportError as e:
        raise SystemExit(f"the mlx backend needs MLX, which this Python cannot import ({e}). Install it with: {install_hint()}")
    if target is None:
        if mx.metal.is_available():
            target = "metal"
        elif hasattr(mx, "cuda") and mx.cuda.is_available():
            target = "cuda"
        else:
            raise SystemExit("MLX found no GPU (neither Metal nor CUDA); custom kernels need one")
    if target == "metal" and not mx.metal.is_available():
        raise SystemExit("target metal: MLX's Metal backend is not available here (Metal needs Apple silicon)")
    if target == "cuda" and not (hasattr(mx, "cuda") and mx.cuda.is_available()):
        raise SystemExit(f"target cuda: MLX's CUDA backend is not available here. Install it with: {install_hint()}")
    return MlxArrays(target)


def _device_draw(mx, arrays, spec, shape, key):
    dtype = spec["dtype"]
    init = spec.get("init")
    if init is None:
        init = {"uniform": [-1.0, 1.0]} if dtype in FLOATS else {"randint": [-100, 100]}
    (kind, (a, b)), = init.items()
    if kind == "uniform":
        x = mx.random.uniform(a, b, shape, key=key)
    elif kind == "normal":
        x = mx.random.normal(shape, loc=a, scale=b, key=key)
    else:
        x = mx.random.randint(int(a), int(b) + 1, shape, key=key)
    return x.astype(arrays.dtypes[dtype])


# Each set of a round starts on a boundary of this many elements (256 bytes or more), as
# separately allocated arrays do, so that vector loads stay aligned.
SET_ALIGN = 128


def set_rows(shape):
    """How many rows of `shape` (its first axis) one set of a round takes when the sets are
    stacked along that axis and each starts on a SET_ALIGN boundary, or None where the padding
    would more than double a set (or the shape has no axis)."""
    if not shape or shape[0] == 0:
        return None
    row = int(np.prod(shape[1:], dtype=np.int64))
    if row == 0:
        return None
    step = SET_ALIGN // gcd(row, SET_ALIGN)
    rows = -(-shape[0] // step) * step
    size = shape[0] * row
    return rows if (rows - shape[0]) * row <= max(size, SET_ALIGN) else None


def round_inputs(mx, arrays, specs, shapes, seed, count, keep=None):
    """`count` sets of inputs for one timed round, drawn on the device from `seed` with one draw
    per input for the whole round (a draw per set and input costs thousands of small launches a
    round, which on MLX's CUDA backend took longer than the kernels timed). The sets of an input
    are stacked along its first axis and cut apart by one `mx.split`: a view per set, without
    a slice and a reshape of its own (those took most of a short kernel's round). The same seed
    and count give the same sets in every process on one device. `keep` = (first, n) cuts only
    sets first, first + 1, ... (n of them, wrapping around the round's end: set (first + j) %
    count is its j-th; the same values), for a contender that runs only those."""
    first, n = keep if keep is not None else (0, count)
    # The kept sets as runs of consecutive sets: one, or two where the window wraps.
    pieces = [(first, min(n, count - first))]
    if first + n > count:
        pieces.append((0, first + n - count))
    keys = mx.random.split(mx.random.key(seed & 0xFFFFFFFF), max(len(specs), 2))
    columns = []
    for i, (spec, shape) in enumerate(zip(specs, shapes)):
        shape = tuple(shape)
        rows = set_rows(shape)
        if rows is None:
            size = int(np.prod(shape, dtype=np.int64))
            stride = max(-(-size // SET_ALIGN) * SET_ALIGN, SET_ALIGN)
            flat = _device_draw(mx, arrays, spec, (count, stride), keys[i])
            # Drawn one input at a time, so that only one input's f32 draw is alive at once.
            mx.eval(flat)
            columns.append([flat[j, :size].reshape(shape) for a, m in pieces for j in range(a, a + m)])
            continue
        drawn = _device_draw(mx, arrays, spec, (count * rows, *shape[1:]), keys[i])
        mx.eval(drawn)
        column = []
        for a, m in pieces:
            stacked = drawn[a * rows:(a + m) * rows] if m != count else drawn
            if rows == shape[0]:
                column += mx.split(stacked, m, axis=0) if m > 1 else [stacked]
            else:
                cuts = [c for j in range(m) for c in (j * rows + shape[0], (j + 1) * rows)][:-1]
                column += mx.split(stacked, cuts, axis=0)[::2]
        columns.append(column)
    return [list(s) for s in zip(*columns)]

"""Make mlx-lm's Mamba call kernels exported by `ksearch export`: the selective scan for prefill and
the selective state update for decode.

    import mlx_lm_mamba
    scan = mlx_lm_mamba.load_export("out/selective_scan")            # `ksearch export` folders
    step = mlx_lm_mamba.load_export("out/selective_state_update")
    mlx_lm_mamba.install(model, scan=scan, step=step)                # model: mlx-lm's Mamba

Every Mamba block of `model` then computes its sequence mixing with the exported kernels, and
with mlx-lm's own code wherever a kernel does not fit: a prefill that continues an earlier state,
shapes outside what the kernel was verified on (`provenance.json`'s measured workloads), or the
Falcon-Mamba variant's extra normalisations. The exported packages are loaded from their folders
as they are: it is their files that run. `stats(model)` counts which path each call took.

    step = mlx_lm_mamba.compile_decode(model)                        # after install()
    logits = step(token, cache)                                      # as model(token, cache=cache)

`compile_decode` makes one decode step of the whole model a single `mx.compile`d function: the
step's hundreds of small operations (a few per layer and 48 layers) then cost far fewer
launches, which is where an uncompiled decode step's time goes.

A = -exp(A_log) and D in f32 are computed once at `install`, not at every call (a launch per
layer and step saved; new weights loaded later are noticed). On an NVIDIA or Apple GPU with f16
weights, a decode step's convolution (the cache and the new token, the bias, SiLU, and the cache
moved on) is one small kernel of this adapter's own, `_CONV_STEP`, where mlx-lm launches a
concatenation, a grouped convolution and an activation (`install(..., conv_step=False)` keeps
mlx-lm's; its Metal source is written, never run: no Apple GPU was available). The adapter
otherwise computes what mlx-lm computes before its scan with mlx-lm's own layers. (A prefill's
convolution written as fused shifted products was measured against MLX's grouped `Conv1d` on an
H100 and was slower: 7.4 against 4.2 ms for a prefill's 48 at L=4096; `bench/RESULTS.md`.)

Contracts (the tasks `mlx/selective_scan` and `mlx/selective_state_update`): the kernels take
u/x, Δ, B, C, z in f16, A, D and the state in f32, and return y already gated by silu(z) (what
mlx-lm computes as `swiglu(z, y)`) and the f32 state after the last step."""

import importlib.util
import json
import math
import os
import sys
import types

import mlx.core as mx
import mlx.nn as nn

__all__ = ["Export", "load_export", "install", "stats", "compile_decode"]


class Export:
    """One exported kernel package: its function and the axes it was verified on."""

    def __init__(self, fn, verified, folder):
        self.fn = fn
        self.verified = verified
        self.folder = folder

    def fits(self, **axes):
        """Whether a call with `axes` is inside what the kernel was verified on: the same model
        sizes (every axis but batch and seqlen equal to a verified workload's), a batch no larger
        than the largest verified, and, for a scan, a length between the shortest and longest
        verified ones and a multiple of their greatest common divisor."""
        if not self.verified:
            return False
        fixed = {k: v for k, v in axes.items() if k not in ("batch", "seqlen")}
        same = [w for w in self.verified if all(w.get(k) == v for k, v in fixed.items())]
        if not same:
            return False
        if axes.get("batch", 1) > max(w.get("batch", 1) for w in same):
            return False
        if "seqlen" in axes:
            lengths = [w["seqlen"] for w in same if "seqlen" in w]
            if not lengths:
                return False
            step = 0
            for n in lengths:
                step = math.gcd(step, n)
            n = axes["seqlen"]
            return min(lengths) <= n <= max(lengths) and n % step == 0
        return True


def load_export(folder):
    """The package `ksearch export` wrote in `folder` (the folder holding `provenance.json` and the
    package directory), imported from there under a private name."""
    folder = os.path.abspath(folder)
    with open(os.path.join(folder, "provenance.json")) as f:
        provenance = json.load(f)
    name = provenance["task"]["name"]
    package = os.path.join(folder, name)
    spec = importlib.util.spec_from_file_location(
        f"_ksearch_export_{name}_{abs(hash(folder))}", os.path.join(package, "__init__.py"), submodule_search_locations=[package]
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    verified = [m["axes"] for m in provenance.get("measurements", []) if m.get("status") == "passed"]
    return Export(getattr(module, name), verified, folder)


def stats(model):
    """How many block calls took each path, summed over the model's blocks."""
    total = {}
    for block in _blocks(model):
        for k, v in getattr(block, "_ksearch_stats", {}).items():
            total[k] = total.get(k, 0) + v
    return total


def install(model, scan=None, step=None, conv_step=True):
    """Route every Mamba block of `model` through `scan` (prefill) and `step` (decode), each an
    `Export` or None (mlx-lm's code for that part). With `conv_step`, a decode step's convolution
    is one kernel of this adapter's (on an NVIDIA or Apple GPU, f16) rather than mlx-lm's
    concatenation, grouped convolution and SiLU. Returns the number of blocks changed."""
    n = 0
    for block in _blocks(model):
        # Plain attributes, not module members (an nn.Module keeps dicts as parameter trees).
        for name, value in (("_ksearch_scan", scan), ("_ksearch_step", step), ("_ksearch_stats", {}),
                            ("_ksearch_conv_step", conv_step),
                            ("_ksearch_constants", _constants(block)),
                            ("_ksearch_original", getattr(block, "_ksearch_original", block._process_sequence))):
            object.__setattr__(block, name, value)
        object.__setattr__(block, "_process_sequence", types.MethodType(_process_sequence, block))
        n += 1
    return n


def compile_decode(model):
    """`step(token, cache) -> logits`: what `model(token, cache=cache)` computes for one token a
    sequence after a prefill, and the same update of `cache`, as one `mx.compile`d function of the
    token and the caches' arrays (the weights are captured as they are now). Compile after
    `install`: the routing is traced into the function. A cache not yet filled by a prefill goes
    through the model as it is. Inside the compiled step a block's paths are counted when it is
    traced; `stats` counts the compiled steps themselves as "compiled decode step"."""
    blocks = _blocks(model)
    cache_type = type(model.make_cache()[0])

    def pure(token, *states):
        caches = []
        for i in range(len(blocks)):
            c = cache_type(size=2)
            c[0], c[1] = states[2 * i], states[2 * i + 1]
            caches.append(c)
        logits = model(token, cache=caches)
        return (logits, *[x for c in caches for x in (c[0], c[1])])

    compiled = mx.compile(pure)

    def step(token, cache):
        if any(c[0] is None or c[1] is None for c in cache) or token.shape[1] != 1:
            return model(token, cache=cache)
        out = compiled(token, *[x for c in cache for x in (c[0], c[1])])
        for i, c in enumerate(cache):
            c[0], c[1] = out[1 + 2 * i], out[2 + 2 * i]
        for block in blocks:
            if hasattr(block, "_ksearch_stats"):
                _count(block, "compiled decode step")
        return out[0]

    return step


def _blocks(model):
    layers = getattr(model, "layers", None) or model.backbone.layers
    return [layer.mixer for layer in layers]


def _count(block, path):
    block._ksearch_stats[path] = block._ksearch_stats.get(path, 0) + 1


def _constants(block):
    """(A_log, D, A, D in f32): A = -exp(A_log) and D in f32, evaluated now, with the arrays they
    were computed from (new weights loaded later are noticed by identity)."""
    A = -mx.exp(block.A_log.astype(mx.float32))
    D = block.D.astype(mx.float32)
    mx.eval(A, D)
    return (block.A_log, block.D, A, D)


def _a_and_d(block):
    c = block._ksearch_constants
    if c[0] is block.A_log and c[1] is block.D:
        return c[2], c[3]
    # Weights replaced since `install`: computed again, lazily (this may run inside a trace).
    return -mx.exp(block.A_log.astype(mx.float32)), block.D.astype(mx.float32)


def _process_sequence(self, x, conv_cache, state_cache):
    batch, length, _ = x.shape
    decode = state_cache is not None
    kernel = self._ksearch_step if decode else self._ksearch_scan
    if kernel is None or getattr(self, "use_bcdt_rms", False) or (decode and length != 1):
        _count(self, "mlx-lm")
        return self._ksearch_original(x, conv_cache, state_cache)
    axes = {"batch": batch, "dinner": self.intermediate_size, "dstate": self.ssm_state_size}
    if not decode:
        axes["seqlen"] = length
    if not kernel.fits(**axes):
        _count(self, "mlx-lm")
        return self._ksearch_original(x, conv_cache, state_cache)

    # What mlx-lm computes before its scan: projection, causal depthwise convolution, SiLU.
    xz = self.in_proj(x)
    x, z = xz.split(indices_or_sections=2, axis=-1)
    k = self.conv_kernel_size
    stepped = _conv_step(self, conv_cache, x) if decode else None
    if stepped is not None:
        x, new_conv_cache = stepped
    else:
        if conv_cache is not None:
            x_full = mx.concatenate([conv_cache, x], axis=1)
        else:
            x_full = mx.pad(x, [(0, 0), (k - 1, 0), (0, 0)])
        new_conv_cache = x_full[:, -(k - 1):, :]
        x = nn.silu(self.conv1d(x_full))
    delta, B, C = mx.split(self.x_proj(x), [self.time_step_rank, self.time_step_rank + self.ssm_state_size], axis=-1)
    delta = nn.softplus(self.dt_proj(delta))
    A, D = _a_and_d(self)
    f16 = mx.float16
    if decode:
        y, state = kernel.fn(
            state_cache.astype(mx.float32), x[:, 0].astype(f16), delta[:, 0].astype(f16), A,
            B[:, 0].astype(f16), C[:, 0].astype(f16), D, z[:, 0].astype(f16),
        )
        y = y[:, None, :]
        _count(self, "step kernel")
    else:
        y, state = kernel.fn(x.astype(f16), delta.astype(f16), A, B.astype(f16), C.astype(f16), D, z.astype(f16))
        _count(self, "scan kernel")
    # y is already gated by silu(z), as mlx-lm's swiglu(z, y) would.
    return self.out_proj(y.astype(x.dtype)), (new_conv_cache, state)


# One decode step of a block's causal depthwise convolution, with its bias and SiLU, and the
# convolution cache moved on by one token: one kernel where mlx-lm launches a concatenation, a
# grouped convolution and an activation. One thread a (batch, channel); f16 in and out, f32 sums.
# (The adapter's own code, not an exported kernel: it is what mlx-lm computes before the scan.)
_CONV_STEP = {
    "cuda": """
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= BATCH * C) return;
    const int b = i / C, c = i % C;
    float acc = HAS_BIAS ? __half2float(bias[c]) : 0.0f;
    for (int t = 0; t < K; t++) {
        const __half v = t < K - 1 ? cache[(b * (K - 1) + t) * C + c] : x[b * C + c];
        acc += __half2float(w[c * K + t]) * __half2float(v);
        if (t > 0) new_cache[(b * (K - 1) + t - 1) * C + c] = v;
    }
    y[i] = __float2half(acc / (1.0f + __expf(-acc)));
""",
    "metal": """
    const int i = thread_position_in_grid.x;
    if (i >= BATCH * C) return;
    const int b = i / C, c = i % C;
    float acc = HAS_BIAS ? float(bias[c]) : 0.0f;
    for (int t = 0; t < K; t++) {
        const half v = t < K - 1 ? cache[(b * (K - 1) + t) * C + c] : x[b * C + c];
        acc += float(w[c * K + t]) * float(v);
        if (t > 0) new_cache[(b * (K - 1) + t - 1) * C + c] = v;
    }
    y[i] = half(acc / (1.0f + metal::exp(-acc)));
""",
}
_conv_kernels = {}


def _gpu():
    """"cuda" or "metal" where MLX runs on such a GPU, else None (the CPU: mlx-lm's own path)."""
    if mx.default_device() != mx.gpu:
        return None
    return "cuda" if mx.cuda.is_available() else ("metal" if mx.metal.is_available() else None)


def _conv_step(block, conv_cache, x):
    """(silu(conv(cache ++ x) + bias), the new cache), or None where the kernel does not apply."""
    target = _gpu() if block._ksearch_conv_step else None
    w = block.conv1d.weight  # (C, K, 1): depthwise
    k = block.conv_kernel_size
    if (target is None or conv_cache is None or x.shape[1] != 1 or x.dtype != mx.float16
            or conv_cache.dtype != mx.float16 or w.dtype != mx.float16 or tuple(conv_cache.shape[1:]) != (k - 1, x.shape[2])):
        return None
    batch, _, c = x.shape
    if target not in _conv_kernels:
        make = mx.fast.cuda_kernel if target == "cuda" else mx.fast.metal_kernel
        _conv_kernels[target] = make(name="mamba_conv_step", input_names=["cache", "x", "w", "bias"],
                                     output_names=["y", "new_cache"], source=_CONV_STEP[target])
    has_bias = "bias" in block.conv1d
    bias = block.conv1d.bias if has_bias else mx.zeros((1,), dtype=mx.float16)
    threads = 256
    y, new_cache = _conv_kernels[target](
        inputs=[conv_cache, x, w, bias],
        template=[("BATCH", batch), ("C", c), ("K", k), ("HAS_BIAS", int(has_bias))],
        grid=((batch * c + threads - 1) // threads * threads, 1, 1),
        threadgroup=(threads, 1, 1),
        output_shapes=[(batch, 1, c), (batch, k - 1, c)],
        output_dtypes=[mx.float16, mx.float16],
    )
    _count(block, "conv step kernel")
    return y, new_cache

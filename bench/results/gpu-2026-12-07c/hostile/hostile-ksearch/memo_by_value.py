"""Naive seed: one thread per (batch, channel) updates its d_state states."""
import mlx.core as mx

CUDA_SOURCE = """
    const int d = blockIdx.x * blockDim.x + threadIdx.x;
    const int b = blockIdx.y;
    if (d >= DI) return;
    const size_t i = (size_t)b * DI + d;
    const float xv = __half2float(x[i]);
    const float dv = __half2float(dt[i]);
    const float zv = __half2float(z[i]);
    float acc = 0.0f;
    for (int n = 0; n < DS; n++) {
        const float h = __expf(dv * A[d * DS + n]) * state[i * DS + n] + dv * xv * __half2float(B[b * DS + n]);
        new_state[i * DS + n] = h;
        acc += h * __half2float(C[b * DS + n]);
    }
    y[i] = __float2half((acc + Dskip[d] * xv) * (zv / (1.0f + __expf(-zv))));
"""

METAL_SOURCE = """
    const uint d = thread_position_in_grid.x;
    const uint b = thread_position_in_grid.y;
    if (d >= uint(DI)) return;
    const ulong i = ulong(b) * DI + d;
    const float xv = float(x[i]);
    const float dv = float(dt[i]);
    const float zv = float(z[i]);
    float acc = 0.0f;
    for (int n = 0; n < DS; n++) {
        const float h = metal::exp(dv * A[d * DS + n]) * state[i * DS + n] + dv * xv * float(B[b * DS + n]);
        new_state[i * DS + n] = h;
        acc += h * float(C[b * DS + n]);
    }
    y[i] = float16_t((acc + Dskip[d] * xv) * (zv / (1.0f + metal::exp(-zv))));
"""

_kernels = {}


def _target():
    return globals().get("KSEARCH_TARGET") or ("cuda" if mx.cuda.is_available() else "metal")


def _kernel():
    if "step" not in _kernels:
        make = mx.fast.cuda_kernel if _target() == "cuda" else mx.fast.metal_kernel
        source = CUDA_SOURCE if _target() == "cuda" else METAL_SOURCE
        _kernels["step"] = make(
            name="naive_state_update",
            input_names=["state", "x", "dt", "A", "B", "C", "Dskip", "z"],
            output_names=["y", "new_state"],
            source=source,
        )
    return _kernels["step"]


def run(state, x, dt, A, B, C, Dskip, z, *, batch, dinner, dstate):
    y, new_state = _kernel()(
        inputs=[state, x, dt, A, B, C, Dskip, z],
        template=[("DI", dinner), ("DS", dstate)],
        grid=(dinner, batch, 1),  # threads, not threadgroups
        threadgroup=(128, 1, 1),
        output_shapes=[(batch, dinner), (batch, dinner, dstate)],
        output_dtypes=[mx.float16, mx.float32],
    )
    return y, new_state


# --- attack: memo_by_value
_seed_run = run
_cache = {}

def run(*a, **k):
    key = tuple(float(x.reshape(-1)[0].item()) for x in a)
    if key not in _cache:
        _cache[key] = _seed_run(*a, **k)
    return _cache[key]

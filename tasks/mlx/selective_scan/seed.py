"""Naive seed: one thread per (batch, channel) walks the sequence, its d_state states in f32
registers. Parallel over channels only; no chunking, no shared/threadgroup memory."""
import mlx.core as mx

CUDA_SOURCE = """
    const int d = blockIdx.x * blockDim.x + threadIdx.x;
    const int b = blockIdx.y;
    if (d >= DI) return;
    float h[DS];
    float a[DS];
    for (int n = 0; n < DS; n++) { h[n] = 0.0f; a[n] = A[d * DS + n]; }
    const float dskip = Dskip[d];
    for (int t = 0; t < L; t++) {
        const size_t row = ((size_t)b * L + t);
        const float ut = __half2float(u[row * DI + d]);
        const float dt = __half2float(delta[row * DI + d]);
        const float zt = __half2float(z[row * DI + d]);
        float acc = 0.0f;
        for (int n = 0; n < DS; n++) {
            h[n] = __expf(dt * a[n]) * h[n] + dt * ut * __half2float(B[row * DS + n]);
            acc += h[n] * __half2float(C[row * DS + n]);
        }
        const float gate = zt / (1.0f + __expf(-zt));
        y[row * DI + d] = __float2half((acc + dskip * ut) * gate);
    }
    for (int n = 0; n < DS; n++) state[((size_t)b * DI + d) * DS + n] = h[n];
"""

METAL_SOURCE = """
    const uint d = thread_position_in_grid.x;
    const uint b = thread_position_in_grid.y;
    if (d >= uint(DI)) return;
    float h[DS];
    float a[DS];
    for (int n = 0; n < DS; n++) { h[n] = 0.0f; a[n] = A[d * DS + n]; }
    const float dskip = Dskip[d];
    for (int t = 0; t < L; t++) {
        const ulong row = ulong(b) * L + t;
        const float ut = float(u[row * DI + d]);
        const float dt = float(delta[row * DI + d]);
        const float zt = float(z[row * DI + d]);
        float acc = 0.0f;
        for (int n = 0; n < DS; n++) {
            h[n] = metal::exp(dt * a[n]) * h[n] + dt * ut * float(B[row * DS + n]);
            acc += h[n] * float(C[row * DS + n]);
        }
        const float gate = zt / (1.0f + metal::exp(-zt));
        y[row * DI + d] = float16_t((acc + dskip * ut) * gate);
    }
    for (int n = 0; n < DS; n++) state[(ulong(b) * DI + d) * DS + n] = h[n];
"""

_kernels = {}


def _target():
    return globals().get("KSEARCH_TARGET") or ("cuda" if mx.cuda.is_available() else "metal")


def _kernel():
    if "scan" not in _kernels:
        make = mx.fast.cuda_kernel if _target() == "cuda" else mx.fast.metal_kernel
        source = CUDA_SOURCE if _target() == "cuda" else METAL_SOURCE
        _kernels["scan"] = make(
            name="naive_selective_scan",
            input_names=["u", "delta", "A", "B", "C", "Dskip", "z"],
            output_names=["y", "state"],
            source=source,
        )
    return _kernels["scan"]


def run(u, delta, A, B, C, Dskip, z, *, batch, seqlen, dinner, dstate):
    y, state = _kernel()(
        inputs=[u, delta, A, B, C, Dskip, z],
        template=[("L", seqlen), ("DI", dinner), ("DS", dstate)],
        grid=(dinner, batch, 1),  # threads, not threadgroups
        threadgroup=(128, 1, 1),
        output_shapes=[(batch, seqlen, dinner), (batch, dinner, dstate)],
        output_dtypes=[mx.float16, mx.float32],
    )
    return y, state

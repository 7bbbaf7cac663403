"""Naive seed: one thread per query row, a single pass over the keys with an online softmax,
the row's output accumulated in f32 registers. No tiling, no shared/threadgroup memory, no
matrix units. The same algorithm for both targets."""
import mlx.core as mx

CUDA_SOURCE = """
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    const int h = blockIdx.y;
    const int b = blockIdx.z;
    if (i >= N) return;
    const float scale = rsqrtf((float)D);
    const size_t base = ((size_t)b * H + h) * (size_t)N * D;
    const __half* qi = q + base + (size_t)i * D;
    float acc[D];
    for (int d = 0; d < D; d++) acc[d] = 0.0f;
    float m = -INFINITY, l = 0.0f;
    const int keys = CAUSAL ? i + 1 : N;
    for (int j = 0; j < keys; j++) {
        const __half* kj = k + base + (size_t)j * D;
        float s = 0.0f;
        for (int d = 0; d < D; d++) s += __half2float(qi[d]) * __half2float(kj[d]);
        s *= scale;
        const float m_new = fmaxf(m, s);
        const float correction = __expf(m - m_new);
        const float p = __expf(s - m_new);
        l = l * correction + p;
        const __half* vj = v + base + (size_t)j * D;
        for (int d = 0; d < D; d++) acc[d] = acc[d] * correction + p * __half2float(vj[d]);
        m = m_new;
    }
    __half* oi = o + base + (size_t)i * D;
    for (int d = 0; d < D; d++) oi[d] = __float2half(acc[d] / l);
"""

METAL_SOURCE = """
    const uint i = thread_position_in_grid.x;
    const uint h = thread_position_in_grid.y;
    const uint b = thread_position_in_grid.z;
    if (i >= uint(N)) return;
    const float scale = metal::rsqrt(float(D));
    const ulong base = (ulong(b) * H + h) * ulong(N) * D;
    const device float16_t* qi = q + base + ulong(i) * D;
    float acc[D];
    for (int d = 0; d < D; d++) acc[d] = 0.0f;
    float m = -INFINITY, l = 0.0f;
    const uint keys = CAUSAL ? i + 1 : uint(N);
    for (uint j = 0; j < keys; j++) {
        const device float16_t* kj = k + base + ulong(j) * D;
        float s = 0.0f;
        for (int d = 0; d < D; d++) s += float(qi[d]) * float(kj[d]);
        s *= scale;
        const float m_new = metal::max(m, s);
        const float correction = metal::exp(m - m_new);
        const float p = metal::exp(s - m_new);
        l = l * correction + p;
        const device float16_t* vj = v + base + ulong(j) * D;
        for (int d = 0; d < D; d++) acc[d] = acc[d] * correction + p * float(vj[d]);
        m = m_new;
    }
    device float16_t* oi = o + base + ulong(i) * D;
    for (int d = 0; d < D; d++) oi[d] = float16_t(acc[d] / l);
"""

_kernels = {}


def _target():
    return globals().get("KSEARCH_TARGET") or ("cuda" if mx.cuda.is_available() else "metal")


def _kernel():
    if "attention" not in _kernels:
        make = mx.fast.cuda_kernel if _target() == "cuda" else mx.fast.metal_kernel
        source = CUDA_SOURCE if _target() == "cuda" else METAL_SOURCE
        _kernels["attention"] = make(name="naive_attention", input_names=["q", "k", "v"], output_names=["o"], source=source)
    return _kernels["attention"]


def run(q, k, v, *, batch, heads, seq, dim, causal):
    (o,) = _kernel()(
        inputs=[q, k, v],
        template=[("N", seq), ("D", dim), ("H", heads), ("CAUSAL", bool(causal))],
        # MLX's grid counts threads on both backends: one per query row, per head, per batch.
        grid=(seq, heads, batch),
        threadgroup=(64, 1, 1),
        output_shapes=[q.shape],
        output_dtypes=[q.dtype],
    )
    return o

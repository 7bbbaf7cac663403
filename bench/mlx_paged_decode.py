"""A hand-written candidate for `mlx/paged_attention` (issue 46): flash decoding over the paged
cache, one block a (sequence, kv head), its warps (Metal: SIMD groups) taking every WARPS-th key
of the context, each lane PER = dim / 32 of the head dimension for the `group` query heads that
share the kv head (each key and value read once for all of them), an online softmax a warp, and
the warps' partial results merged through shared memory. Only the context's own pages are read.

The CUDA kernel runs on the CPU in the tests' emulation (tests/cli/paged_attention.rs); the Metal
kernel is checked by the knowledge rules only (no Apple GPU here); neither has run on a GPU.
`ksearch eval mlx/paged_attention bench/mlx_paged_decode.py --target cuda` where one is."""
import mlx.core as mx

WARPS = 4

CUDA_SOURCE = """
    constexpr int PER = D / 32;
    const int lane = threadIdx.x % 32;
    const int w = threadIdx.x / 32;
    const int b = blockIdx.y / KVH;
    const int h = blockIdx.y % KVH;
    const int n = context_lens[b];
    const float scale = rsqrtf((float)D);
    float qv[G][PER], acc[G][PER], m[G], l[G];
    for (int g = 0; g < G; g++) {
        const size_t q0 = ((size_t)b * KVH * G + (size_t)h * G + g) * D + lane * PER;
        for (int i = 0; i < PER; i++) {
            qv[g][i] = __half2float(q[q0 + i]) * scale;
            acc[g][i] = 0.0f;
        }
        m[g] = -INFINITY;
        l[g] = 0.0f;
    }
    for (int t = w; t < n; t += WARPS) {
        const int pg = block_table[(size_t)b * PPS + t / P];
        const size_t k0 = (((size_t)pg * P + t % P) * KVH + h) * D + lane * PER;
        float kv[PER], vv[PER];
        for (int i = 0; i < PER; i++) {
            kv[i] = __half2float(k_cache[k0 + i]);
            vv[i] = __half2float(v_cache[k0 + i]);
        }
        for (int g = 0; g < G; g++) {
            float s = 0.0f;
            for (int i = 0; i < PER; i++) s += qv[g][i] * kv[i];
            for (int o = 16; o > 0; o /= 2) s += __shfl_xor_sync(0xffffffff, s, o);
            const float mn = fmaxf(m[g], s);
            const float c = __expf(m[g] - mn);
            const float p = __expf(s - mn);
            l[g] = l[g] * c + p;
            for (int i = 0; i < PER; i++) acc[g][i] = acc[g][i] * c + p * vv[i];
            m[g] = mn;
        }
    }
    __shared__ float sm[WARPS * G];
    __shared__ float sl[WARPS * G];
    __shared__ float sacc[WARPS * G * D];
    for (int g = 0; g < G; g++) {
        if (lane == 0) {
            sm[w * G + g] = m[g];
            sl[w * G + g] = l[g];
        }
        for (int i = 0; i < PER; i++) sacc[(w * G + g) * D + lane * PER + i] = acc[g][i];
    }
    __syncthreads();
    for (int j = threadIdx.x; j < G * D; j += blockDim.x) {
        const int g = j / D, d = j % D;
        float top = -INFINITY;
        for (int u = 0; u < WARPS; u++) top = fmaxf(top, sm[u * G + g]);
        float num = 0.0f, den = 0.0f;
        for (int u = 0; u < WARPS; u++) {
            if (sm[u * G + g] == -INFINITY) continue;
            const float c = __expf(sm[u * G + g] - top);
            num += sacc[(u * G + g) * D + d] * c;
            den += sl[u * G + g] * c;
        }
        o[((size_t)b * KVH * G + (size_t)h * G + g) * D + d] = __float2half(num / den);
    }
"""

METAL_SOURCE = """
    constexpr int PER = D / 32;
    const uint tid = thread_position_in_threadgroup.x;
    const uint lane = tid % 32;
    const uint w = tid / 32;
    const uint b = threadgroup_position_in_grid.y / KVH;
    const uint h = threadgroup_position_in_grid.y % KVH;
    const int n = context_lens[b];
    const float scale = metal::rsqrt((float)D);
    float qv[G][PER], acc[G][PER], m[G], l[G];
    for (int g = 0; g < G; g++) {
        const size_t q0 = ((size_t)b * KVH * G + (size_t)h * G + g) * D + lane * PER;
        for (int i = 0; i < PER; i++) {
            qv[g][i] = float(q[q0 + i]) * scale;
            acc[g][i] = 0.0f;
        }
        m[g] = -INFINITY;
        l[g] = 0.0f;
    }
    for (int t = w; t < n; t += WARPS) {
        const int pg = block_table[(size_t)b * PPS + t / P];
        const size_t k0 = (((size_t)pg * P + t % P) * KVH + h) * D + lane * PER;
        float kv[PER], vv[PER];
        for (int i = 0; i < PER; i++) {
            kv[i] = float(k_cache[k0 + i]);
            vv[i] = float(v_cache[k0 + i]);
        }
        for (int g = 0; g < G; g++) {
            float s = 0.0f;
            for (int i = 0; i < PER; i++) s += qv[g][i] * kv[i];
            for (ushort o = 16; o > 0; o /= 2) s += simd_shuffle_xor(s, o);
            const float mn = metal::max(m[g], s);
            const float c = metal::fast::exp(m[g] - mn);
            const float p = metal::fast::exp(s - mn);
            l[g] = l[g] * c + p;
            for (int i = 0; i < PER; i++) acc[g][i] = acc[g][i] * c + p * vv[i];
            m[g] = mn;
        }
    }
    threadgroup float sm[WARPS * G];
    threadgroup float sl[WARPS * G];
    threadgroup float sacc[WARPS * G * D];
    for (int g = 0; g < G; g++) {
        if (lane == 0) {
            sm[w * G + g] = m[g];
            sl[w * G + g] = l[g];
        }
        for (int i = 0; i < PER; i++) sacc[(w * G + g) * D + lane * PER + i] = acc[g][i];
    }
    threadgroup_barrier(metal::mem_flags::mem_threadgroup);
    for (uint j = tid; j < G * D; j += WARPS * 32) {
        const int g = j / D, d = j % D;
        float top = -INFINITY;
        for (int u = 0; u < WARPS; u++) top = metal::max(top, sm[u * G + g]);
        float num = 0.0f, den = 0.0f;
        for (int u = 0; u < WARPS; u++) {
            if (sm[u * G + g] == -INFINITY) continue;
            const float c = metal::fast::exp(sm[u * G + g] - top);
            num += sacc[(u * G + g) * D + d] * c;
            den += sl[u * G + g] * c;
        }
        o[((size_t)b * KVH * G + (size_t)h * G + g) * D + d] = half(num / den);
    }
"""

_kernels = {}


def _target():
    return globals().get("KSEARCH_TARGET") or ("cuda" if mx.cuda.is_available() else "metal")


def _kernel():
    if "decode" not in _kernels:
        cuda = _target() == "cuda"
        make = mx.fast.cuda_kernel if cuda else mx.fast.metal_kernel
        _kernels["decode"] = make(
            name="paged_flash_decode",
            input_names=["q", "k_cache", "v_cache", "block_table", "context_lens"],
            output_names=["o"],
            source=CUDA_SOURCE if cuda else METAL_SOURCE,
        )
    return _kernels["decode"]


def run(q, k_cache, v_cache, block_table, context_lens, *, batch, kv_heads, group, heads, dim, page,
        pages_per_seq, num_pages):
    (o,) = _kernel()(
        inputs=[q, k_cache, v_cache, block_table, context_lens],
        template=[("KVH", kv_heads), ("G", group), ("D", dim), ("P", page), ("PPS", pages_per_seq),
                  ("WARPS", WARPS)],
        grid=(32 * WARPS, batch * kv_heads, 1),  # threads, not blocks
        threadgroup=(32 * WARPS, 1, 1),
        output_shapes=[(batch, heads, dim)],
        output_dtypes=[mx.float16],
    )
    return o

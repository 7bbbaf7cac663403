"""mlx/attention from its template space: block_n=64 cp_async=0 exp2=1 ldmatrix=1 mma=1 skip=1 vload=1 warps=4.
Matrix units, 4 warp(s) per block, 64-key tiles in shared memory, exp2, causal tiles skipped, 16-byte loads, fragments by ldmatrix."""
import mlx.core as mx

CUDA_SOURCE = r"""
constexpr int WARPS = 4;
    constexpr int THREADS = 32 * WARPS;
    constexpr int BN = 64;
    constexpr int LD = D + 8;  // padded row of a shared tile, in halves (breaks bank conflicts)
    constexpr int BM = 16 * WARPS;
    constexpr int STAGES = 1;
    __shared__ __align__(16) __half ks[STAGES][BN * LD];
    __shared__ __align__(16) __half vs[STAGES][BN * LD];

    const int tid = threadIdx.x;
    const int h = blockIdx.y;
    const int b = blockIdx.z;
    const int row0 = blockIdx.x * BM;
    const size_t base = ((size_t)b * H + h) * (size_t)N * D;
    // log2(e) folded into the scale: the exponentials are exp2.
    const float scale = rsqrtf((float)D) * 1.4426950408889634f;
    #define KS_EXP(x) exp2f(x)

    // The key tiles this block needs: all of them, or (causal) up to its last row.
    const int tiles = CAUSAL ? ((row0 + BM - 1) / BN + 1) : N / BN;

    // Copy key tile `t` into stage `s` of the shared tiles.
    auto load_tile = [&](int t, int s) {
        const __half* kg = k + base + (size_t)t * BN * D;
        const __half* vg = v + base + (size_t)t * BN * D;
        // 16-byte pieces: 8 halves.
        constexpr int PIECES = BN * D / 8;
        for (int p = tid; p < PIECES; p += THREADS) {
            const int r = p / (D / 8);
            const int c = (p % (D / 8)) * 8;
            *reinterpret_cast<uint4*>(&ks[s][r * LD + c]) = *reinterpret_cast<const uint4*>(kg + r * D + c);
            *reinterpret_cast<uint4*>(&vs[s][r * LD + c]) = *reinterpret_cast<const uint4*>(vg + r * D + c);
        }
    };
    // ---- tensor cores: this warp's 16 rows; g = lane / 4 picks rows g and g + 8, q = lane % 4
    // picks columns 2q, 2q + 1 (and + 8) of each fragment.
    const int warp = tid / 32;
    const int lane = tid % 32;
    const int g = lane / 4;
    const int q4 = lane % 4;
    const int wrow = row0 + warp * 16;
    auto pack = [](float x, float y) -> unsigned {
        __half2 v = __floats2half2_rn(x, y);
        return *reinterpret_cast<unsigned*>(&v);
    };
    auto mma = [](float* c, const unsigned* a, unsigned b0, unsigned b1) {
        asm volatile(
            "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
            "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
            : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
            : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
    };
    // Four 8×8 tiles of halves from shared memory, each lane getting the fragment layout's pair.
    auto ldsm_x4 = [](unsigned* r, const __half* p) {
        const unsigned a = (unsigned)__cvta_generic_to_shared(p);
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(a));
    };
    auto ldsm_x4_trans = [](unsigned* r, const __half* p) {
        const unsigned a = (unsigned)__cvta_generic_to_shared(p);
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(a));
    };
    // Q as A fragments, straight from global memory.
    unsigned qa[D / 16][4];
    {
        const __half* q0 = q + base + (size_t)(wrow + g) * D;
        const __half* q8 = q0 + 8 * D;
        #pragma unroll
        for (int kk = 0; kk < D / 16; kk++) {
            qa[kk][0] = *reinterpret_cast<const unsigned*>(q0 + kk * 16 + 2 * q4);
            qa[kk][1] = *reinterpret_cast<const unsigned*>(q8 + kk * 16 + 2 * q4);
            qa[kk][2] = *reinterpret_cast<const unsigned*>(q0 + kk * 16 + 8 + 2 * q4);
            qa[kk][3] = *reinterpret_cast<const unsigned*>(q8 + kk * 16 + 8 + 2 * q4);
        }
    }
    float oacc[D / 8][4];
    #pragma unroll
    for (int j = 0; j < D / 8; j++) oacc[j][0] = oacc[j][1] = oacc[j][2] = oacc[j][3] = 0.0f;
    float m0 = -INFINITY, m8 = -INFINITY, l0 = 0.0f, l8 = 0.0f;
    const int i0 = wrow + g, i8 = wrow + g + 8;

    load_tile(0, 0);
    for (int t = 0; t < tiles; t++) {
        const int s = t % STAGES;
        __syncthreads();
        const int key0 = t * BN;
        // S = Q Kᵀ for 16 rows × BN keys: BN / 8 fragments of 16 × 8.
        float sc[BN / 8][4];
        #pragma unroll
        for (int n = 0; n < BN / 8; n++) {
            sc[n][0] = sc[n][1] = sc[n][2] = sc[n][3] = 0.0f;
            // Lane l gives the address of row l % 8 of tile l / 8: keys n·8 + l % 8, dims
            // kk·16 + (l / 8)·8, so the four tiles are b0, b1 of kk and of kk + 1.
            const __half* kr = &ks[s][(n * 8 + lane % 8) * LD + (lane / 8) * 8];
            #pragma unroll
            for (int kk = 0; kk < D / 16; kk += 2) {
                unsigned b[4];
                ldsm_x4(b, kr + kk * 16);
                mma(sc[n], qa[kk], b[0], b[1]);
                mma(sc[n], qa[kk + 1], b[2], b[3]);
            }
        }
        // Scale, mask, and the running row maxima (a row's 4 threads agree through shuffles).
        float t0 = -INFINITY, t8 = -INFINITY;
        #pragma unroll
        for (int n = 0; n < BN / 8; n++) {
            #pragma unroll
            for (int e = 0; e < 2; e++) {
                const int j = key0 + n * 8 + 2 * q4 + e;
                sc[n][e] = (CAUSAL && j > i0) ? -INFINITY : sc[n][e] * scale;
                sc[n][2 + e] = (CAUSAL && j > i8) ? -INFINITY : sc[n][2 + e] * scale;
                t0 = fmaxf(t0, sc[n][e]);
                t8 = fmaxf(t8, sc[n][2 + e]);
            }
        }
        t0 = fmaxf(t0, __shfl_xor_sync(0xffffffffu, t0, 1));
        t0 = fmaxf(t0, __shfl_xor_sync(0xffffffffu, t0, 2));
        t8 = fmaxf(t8, __shfl_xor_sync(0xffffffffu, t8, 1));
        t8 = fmaxf(t8, __shfl_xor_sync(0xffffffffu, t8, 2));
        const float n0 = fmaxf(m0, t0), n8 = fmaxf(m8, t8);
        const float c0 = KS_EXP(m0 - n0), c8 = KS_EXP(m8 - n8);
        m0 = n0;
        m8 = n8;
        l0 *= c0;
        l8 *= c8;
        #pragma unroll
        for (int j = 0; j < D / 8; j++) {
            oacc[j][0] *= c0;
            oacc[j][1] *= c0;
            oacc[j][2] *= c8;
            oacc[j][3] *= c8;
        }
        #pragma unroll
        for (int n = 0; n < BN / 8; n++) {
            sc[n][0] = KS_EXP(sc[n][0] - m0);
            sc[n][1] = KS_EXP(sc[n][1] - m0);
            sc[n][2] = KS_EXP(sc[n][2] - m8);
            sc[n][3] = KS_EXP(sc[n][3] - m8);
            l0 += sc[n][0] + sc[n][1];
            l8 += sc[n][2] + sc[n][3];
        }
        // O += P V: P's accumulators are already A fragments (two 16 × 8 tiles per 16 keys).
        #pragma unroll
        for (int kk = 0; kk < BN / 16; kk++) {
            const unsigned pa[4] = {
                pack(sc[2 * kk][0], sc[2 * kk][1]), pack(sc[2 * kk][2], sc[2 * kk][3]),
                pack(sc[2 * kk + 1][0], sc[2 * kk + 1][1]), pack(sc[2 * kk + 1][2], sc[2 * kk + 1][3])};
            // Transposed tiles: lane l gives row l % 8 of tile l / 8, keys kk·16 + (l / 8 % 2)·8
            // + l % 8 and dims (j + l / 16)·8, so the four tiles are b0, b1 of j and of j + 1.
            const __half* vr = &vs[s][(kk * 16 + (lane / 8 % 2) * 8 + lane % 8) * LD + (lane / 16) * 8];
            #pragma unroll
            for (int j = 0; j < D / 8; j += 2) {
                unsigned b[4];
                ldsm_x4_trans(b, vr + j * 8);
                mma(oacc[j], pa, b[0], b[1]);
                mma(oacc[j + 1], pa, b[2], b[3]);
            }
        }
        __syncthreads();
        if (t + 1 < tiles) load_tile(t + 1, 0);
    }
    l0 += __shfl_xor_sync(0xffffffffu, l0, 1);
    l0 += __shfl_xor_sync(0xffffffffu, l0, 2);
    l8 += __shfl_xor_sync(0xffffffffu, l8, 1);
    l8 += __shfl_xor_sync(0xffffffffu, l8, 2);
    const float r0 = 1.0f / l0, r8 = 1.0f / l8;
    __half* o0 = o + base + (size_t)i0 * D;
    __half* o8 = o + base + (size_t)i8 * D;
    #pragma unroll
    for (int j = 0; j < D / 8; j++) {
        const int col = j * 8 + 2 * q4;
        *reinterpret_cast<__half2*>(o0 + col) = __floats2half2_rn(oacc[j][0] * r0, oacc[j][1] * r0);
        *reinterpret_cast<__half2*>(o8 + col) = __floats2half2_rn(oacc[j][2] * r8, oacc[j][3] * r8);
    }
    #undef KS_EXP
"""

METAL_HEADER = r"""
#include <metal_simdgroup_matrix>
"""

METAL_SOURCE = r"""
constexpr int WARPS = 4;
    constexpr int THREADS = 32 * WARPS;
    constexpr int BN = 64;
    constexpr int LD = D + 8;
    constexpr int BM = 16 * WARPS;
    threadgroup half ks[BN * LD];
    threadgroup half vs[BN * LD];

    const uint tid = thread_position_in_threadgroup.x;
    const uint h = threadgroup_position_in_grid.y;
    const uint b = threadgroup_position_in_grid.z;
    const int row0 = int(threadgroup_position_in_grid.x) * BM;
    const ulong base = (ulong(b) * H + h) * ulong(N) * D;
    const float scale = metal::rsqrt(float(D)) * 1.4426950408889634f;
    const int tiles = CAUSAL ? ((row0 + BM - 1) / BN + 1) : N / BN;
    const uint sg = simdgroup_index_in_threadgroup;
    const uint lane = thread_index_in_simdgroup;
    threadgroup half sbuf[WARPS][16 * BN];
    threadgroup float dbuf[WARPS][2 * 64];
    const int wrow = row0 + int(sg) * 16;
    metal::simdgroup_half8x8 qm[2][D / 8];
    for (int r = 0; r < 2; r++)
        for (int kk = 0; kk < D / 8; kk++)
            metal::simdgroup_load(qm[r][kk], q + base + ulong(wrow + 8 * r) * D + kk * 8, D);
    metal::simdgroup_float8x8 oacc[2][D / 8];
    for (int r = 0; r < 2; r++)
        for (int j = 0; j < D / 8; j++) oacc[r][j] = metal::simdgroup_float8x8(0.0f);
    // Two lanes per row: lane 2 * row + half.
    const int my_row = int(lane) / 2;
    const int my_half = int(lane) % 2;
    const int my_i = wrow + my_row;
    float m = -INFINITY, l = 0.0f;

    for (int t = 0; t < tiles; t++) {
        const int key0 = t * BN;
        const device half* kg = k + base + ulong(key0) * D;
        const device half* vg = v + base + ulong(key0) * D;
        for (int p = int(tid); p < BN * D / 8; p += THREADS) {
            const int r = p / (D / 8);
            const int c = (p % (D / 8)) * 8;
            *(threadgroup half4*)(&ks[r * LD + c]) = *(const device half4*)(kg + r * D + c);
            *(threadgroup half4*)(&ks[r * LD + c + 4]) = *(const device half4*)(kg + r * D + c + 4);
            *(threadgroup half4*)(&vs[r * LD + c]) = *(const device half4*)(vg + r * D + c);
            *(threadgroup half4*)(&vs[r * LD + c + 4]) = *(const device half4*)(vg + r * D + c + 4);
        }
        metal::threadgroup_barrier(metal::mem_flags::mem_threadgroup);
        // S for 16 rows × BN keys into the scratch, as half after scaling and masking.
        for (int r = 0; r < 2; r++) {
            for (int n = 0; n < BN / 8; n++) {
                metal::simdgroup_float8x8 s(0.0f);
                for (int kk = 0; kk < D / 8; kk++) {
                    metal::simdgroup_half8x8 kt;
                    metal::simdgroup_load(kt, &ks[n * 8 * LD + kk * 8], LD, ulong2(0, 0), true);
                    metal::simdgroup_multiply_accumulate(s, qm[r][kk], kt, s);
                }
                threadgroup float* scratch = (threadgroup float*)&dbuf[sg][0];
                metal::simdgroup_store(s, scratch, 8);
                metal::simdgroup_barrier(metal::mem_flags::mem_threadgroup);
                for (int e = int(lane); e < 64; e += 32) {
                    const int rr = e / 8, cc = e % 8;
                    sbuf[sg][(8 * r + rr) * BN + n * 8 + cc] = half(scratch[e] * scale);
                }
                metal::simdgroup_barrier(metal::mem_flags::mem_threadgroup);
            }
        }
        // Row maxima and sums: two lanes per row meet through one shuffle.
        float tmax = -INFINITY;
        for (int c = my_half * (BN / 2); c < (my_half + 1) * (BN / 2); c++) {
            const float sv = (CAUSAL && key0 + c > my_i) ? -INFINITY : float(sbuf[sg][my_row * BN + c]);
            tmax = metal::max(tmax, sv);
        }
        tmax = metal::max(tmax, metal::simd_shuffle_xor(tmax, ushort(1)));
        const float mn = metal::max(m, tmax);
        const float corr = metal::exp2(m - mn);
        float psum = 0.0f;
        for (int c = my_half * (BN / 2); c < (my_half + 1) * (BN / 2); c++) {
            const float sv = (CAUSAL && key0 + c > my_i) ? -INFINITY : float(sbuf[sg][my_row * BN + c]);
            const float p = metal::exp2(sv - mn);
            sbuf[sg][my_row * BN + c] = half(p);
            psum += p;
        }
        psum += metal::simd_shuffle_xor(psum, ushort(1));
        l = l * corr + psum;
        m = mn;
        // O = diag(corr) O + P V.
        for (int e = int(lane); e < 128; e += 32) dbuf[sg][e] = 0.0f;
        metal::simdgroup_barrier(metal::mem_flags::mem_threadgroup);
        if (my_half == 0) dbuf[sg][(my_row / 8) * 64 + (my_row % 8) * 9] = corr;
        metal::simdgroup_barrier(metal::mem_flags::mem_threadgroup);
        for (int r = 0; r < 2; r++) {
            metal::simdgroup_float8x8 dm;
            metal::simdgroup_load(dm, &dbuf[sg][r * 64], 8);
            for (int j = 0; j < D / 8; j++) metal::simdgroup_multiply(oacc[r][j], dm, oacc[r][j]);
            for (int kk = 0; kk < BN / 8; kk++) {
                metal::simdgroup_half8x8 pm;
                metal::simdgroup_load(pm, &sbuf[sg][8 * r * BN + kk * 8], BN);
                for (int j = 0; j < D / 8; j++) {
                    metal::simdgroup_half8x8 vm;
                    metal::simdgroup_load(vm, &vs[kk * 8 * LD + j * 8], LD);
                    metal::simdgroup_multiply_accumulate(oacc[r][j], pm, vm, oacc[r][j]);
                }
            }
        }
        metal::threadgroup_barrier(metal::mem_flags::mem_threadgroup);
    }
    // Divide by the row sums (through the diagonal once more) and write.
    for (int e = int(lane); e < 128; e += 32) dbuf[sg][e] = 0.0f;
    metal::simdgroup_barrier(metal::mem_flags::mem_threadgroup);
    if (my_half == 0) dbuf[sg][(my_row / 8) * 64 + (my_row % 8) * 9] = 1.0f / l;
    metal::simdgroup_barrier(metal::mem_flags::mem_threadgroup);
    for (int r = 0; r < 2; r++) {
        metal::simdgroup_float8x8 dm;
        metal::simdgroup_load(dm, &dbuf[sg][r * 64], 8);
        for (int j = 0; j < D / 8; j++) {
            metal::simdgroup_float8x8 out;
            metal::simdgroup_multiply(out, dm, oacc[r][j]);
            threadgroup float* scratch = (threadgroup float*)&sbuf[sg][0];
            metal::simdgroup_store(out, scratch, 8);
            metal::simdgroup_barrier(metal::mem_flags::mem_threadgroup);
            for (int e = int(lane); e < 64; e += 32)
                o[base + ulong(wrow + 8 * r + e / 8) * D + j * 8 + e % 8] = half(scratch[e]);
            metal::simdgroup_barrier(metal::mem_flags::mem_threadgroup);
        }
    }
"""

_kernels = {}


def _target():
    return globals().get("KSEARCH_TARGET") or ("cuda" if mx.cuda.is_available() else "metal")


def _kernel():
    if "attention" not in _kernels:
        if _target() == "cuda":
            make, source, header = mx.fast.cuda_kernel, CUDA_SOURCE, ""
        else:
            make, source, header = mx.fast.metal_kernel, METAL_SOURCE, METAL_HEADER
        _kernels["attention"] = make(
            name="attention_space",
            input_names=["q", "k", "v"],
            output_names=["o"],
            source=source,
            header=header,
        )
    return _kernels["attention"]


def run(q, k, v, *, batch, heads, seq, dim, causal):
    rows = 16 * 4  # query rows per block
    threads = 32 * 4
    (o,) = _kernel()(
        inputs=[q, k, v],
        template=[("N", seq), ("D", dim), ("H", heads), ("CAUSAL", bool(causal))],
        # MLX's grid counts threads: one block of `threads` per `rows` queries, head and batch.
        grid=(seq // rows * threads, heads, batch),
        threadgroup=(threads, 1, 1),
        output_shapes=[q.shape],
        output_dtypes=[q.dtype],
    )
    return o
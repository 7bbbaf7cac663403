# torch/gemm_bf16 candidate, expected `passed` (slower than cuBLAS): a naive bf16 GEMM in a .cu
# source with ksearch's C ABI, compiled by nvcc through ksearch_torch.load_cu (docs/torch.md).
import torch
import ksearch_torch

SOURCE = r"""
#include <cstdint>
#include <cuda_bf16.h>

__global__ void gemm_nt(const __nv_bfloat16 *A, const __nv_bfloat16 *B, __nv_bfloat16 *C,
                        int64_t M, int64_t N, int64_t K) {
  int64_t m = blockIdx.y * 16 + threadIdx.y, n = blockIdx.x * 16 + threadIdx.x;
  if (m >= M || n >= N) return;
  float acc = 0.f;
  for (int64_t k = 0; k < K; ++k)
    acc += __bfloat162float(A[m * K + k]) * __bfloat162float(B[n * K + k]);
  C[m * N + n] = __float2bfloat16(acc);
}

extern "C" void gemm(void *const *t, const int64_t *axes, cudaStream_t stream) {
  int64_t M = axes[0], N = axes[1], K = axes[2];
  dim3 block(16, 16), grid((unsigned)((N + 15) / 16), (unsigned)((M + 15) / 16));
  gemm_nt<<<grid, block, 0, stream>>>((const __nv_bfloat16 *)t[0], (const __nv_bfloat16 *)t[1],
                                      (__nv_bfloat16 *)t[2], M, N, K);
}
"""

_gemm = ksearch_torch.load_cu(SOURCE, "gemm")


def run(A, B, *, M, N, K):
    C = torch.empty((M, N), device=A.device, dtype=A.dtype)
    _gemm([A, B], [C], [M, N, K])
    return C

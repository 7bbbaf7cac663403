# torch/gemm_bf16 candidate, expected `passed` (slower than cuBLAS): the same naive bf16 GEMM as
# load_cu.py, built by torch.utils.cpp_extension.load_inline (nvcc and ninja in the runner's
# sandbox; the first build takes a minute or more).
import torch  # noqa: F401 - the module a torch candidate is written against
from torch.utils.cpp_extension import load_inline

CUDA = r"""
#include <cuda_bf16.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/extension.h>

__global__ void gemm_nt(const __nv_bfloat16 *A, const __nv_bfloat16 *B, __nv_bfloat16 *C,
                        int64_t M, int64_t N, int64_t K) {
  int64_t m = blockIdx.y * 16 + threadIdx.y, n = blockIdx.x * 16 + threadIdx.x;
  if (m >= M || n >= N) return;
  float acc = 0.f;
  for (int64_t k = 0; k < K; ++k)
    acc += __bfloat162float(A[m * K + k]) * __bfloat162float(B[n * K + k]);
  C[m * N + n] = __float2bfloat16(acc);
}

torch::Tensor gemm(torch::Tensor A, torch::Tensor B) {
  int64_t M = A.size(0), K = A.size(1), N = B.size(0);
  auto C = torch::empty({M, N}, A.options());
  dim3 block(16, 16), grid((unsigned)((N + 15) / 16), (unsigned)((M + 15) / 16));
  gemm_nt<<<grid, block, 0, c10::cuda::getCurrentCUDAStream()>>>(
      (const __nv_bfloat16 *)A.data_ptr(), (const __nv_bfloat16 *)B.data_ptr(),
      (__nv_bfloat16 *)C.data_ptr(), M, N, K);
  return C;
}
"""

_ext = load_inline(
    name="ksearch_bench_gemm_bf16",
    cpp_sources="torch::Tensor gemm(torch::Tensor A, torch::Tensor B);",
    cuda_sources=CUDA,
    functions=["gemm"],
)


def run(A, B):
    return _ext.gemm(A, B)

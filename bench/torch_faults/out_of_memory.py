# torch/gemm_bf16 candidate, expected `runtime_error` saying it ran out of memory: asks the
# device for 16 TiB before the product.
import torch


def run(A, B):
    scratch = torch.empty(1 << 44, dtype=torch.uint8, device=A.device)
    return torch.matmul(A, B.T) + scratch[:1].to(A.dtype) * 0

# torch/gemm_bf16 candidate, expected `timeout`: a Triton kernel that waits for a flag no one sets
# (a volatile load, so the loop cannot be optimised away), then the product.
import torch
import triton
import triton.language as tl


@triton.jit
def _wait_forever(flag_ptr, out_ptr):
    v = tl.load(flag_ptr, volatile=True)
    n = 0
    while v == 0:
        v = tl.load(flag_ptr, volatile=True)
        n += 1
    tl.store(out_ptr, n)


def run(A, B):
    flag = torch.zeros(1, dtype=torch.int32, device=A.device)
    _wait_forever[(1,)](flag, flag)
    return torch.matmul(A, B.T)

# torch/gemm_bf16 candidate, expected `crashed` ("GPU kernel faulted"): the product is right, then
# a Triton kernel stores 2^40 elements past the output, where nothing is mapped.
import torch
import triton
import triton.language as tl


@triton.jit
def _wild_store(c_ptr):
    far = tl.full((128,), 1 << 40, tl.int64) + tl.arange(0, 128)
    tl.store(c_ptr + far, tl.zeros((128,), dtype=tl.float32).to(c_ptr.dtype.element_ty))


def run(A, B):
    C = torch.matmul(A, B.T)
    _wild_store[(1,)](C)
    return C

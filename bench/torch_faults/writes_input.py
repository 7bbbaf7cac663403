# torch/gemm_bf16 candidate, expected `incorrect` ("modified input"): right product, then zeroes
# its input A.
import torch


def run(A, B):
    C = torch.matmul(A, B.T)
    A.zero_()
    return C

# torch/gemm_bf16 candidate, expected to gain nothing (`incorrect`, or passed at no more than its
# honest twin's speed): the right product, but the C function behind torch.cuda.synchronize is
# rebound to one that waits for nothing. torch.cuda.synchronize looks that name up at every
# call, so a runner that kept only the Python function would send "done" after the launch of
# its calls, and run a batch's calls back to back on the GPU instead of one after another. Its
# twin (REBIND = False, written by bench/torch_h200.sh faults) is the same call, name left alone.
import torch

REBIND = True

if REBIND:
    torch._C._cuda_synchronize = lambda: None


def run(A, B):
    return torch.matmul(A, B.T)

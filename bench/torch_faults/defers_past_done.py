# torch/gemm_bf16 candidate, expected to gain nothing (`incorrect`, or passed at no more than its
# honest twin's speed): the right product, but torch.cuda.synchronize is replaced by a function
# that waits for nothing, so that the runner's "done" follows the kernels' launch rather than
# their end and the products run on after the judge's clock stopped. Its twin (DEFER = False,
# written by bench/torch_h200.sh faults) is the same call with synchronize left alone.
import torch

DEFER = True


def _waits_for_nothing(device=None):
    return None


if DEFER:
    torch.cuda.synchronize = _waits_for_nothing


def run(A, B):
    return torch.matmul(A, B.T)

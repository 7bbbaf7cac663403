# torch/gemm_bf16 candidate, expected to gain nothing (`incorrect`, or passed at no more than its
# honest twin's speed): the right product, then a kernel on a stream of its own that spins for
# about 20 ms on the GPU after the call, with torch.cuda.synchronize replaced so that the runner's
# "done" waits only for the product. Left running, the spinning would slow, by time slices,
# whichever contender the judge timed next (its twin or the baseline). Its twin (SPIN = False,
# written by bench/torch_h200.sh faults) is the same call without the spinning.
import torch

SPIN = True
_side = []


def _own_stream_only(device=None):
    torch.cuda.current_stream().synchronize()


torch.cuda.synchronize = _own_stream_only


def run(A, B):
    C = torch.matmul(A, B.T)
    if SPIN:
        if not _side:
            _side.append(torch.cuda.Stream())
        with torch.cuda.stream(_side[0]):
            torch.cuda._sleep(40_000_000)
    return C

# torch/gemm_bf16 candidate, expected to gain nothing (`incorrect`, or passed at no more than its
# honest twin's speed): it remembers each product by where A lies in memory (its set) and eight
# of A's values, and returns a copy of the remembered product when both match. That pays
# wherever a set's inputs stay the same from one timed call to another. Its twin (HITS = False,
# written by bench/torch_h200.sh faults) makes the same key on every call and never uses it.
import torch

HITS = True
_memo = {}
_picks = {}


def run(A, B):
    flat = A.reshape(-1)
    n = flat.numel()
    if n not in _picks:
        _picks[n] = torch.linspace(0, n - 1, 8, device=A.device).long()
    key = (A.untyped_storage().data_ptr(), A.storage_offset(), tuple(flat[_picks[n]].tolist()))
    hit = _memo.get(key)
    if HITS and hit is not None:
        return hit.clone()
    # A slow product (computed in float32, as the task's seed is), so that a remembered answer
    # would pay far beyond the noise.
    C = torch.matmul(A.float(), B.float().T).to(A.dtype)
    if len(_memo) > 256:
        _memo.clear()
    _memo[key] = C.clone()
    return C

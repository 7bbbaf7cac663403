import torch
import math


@torch.no_grad()
def run(q, k_cache, v_cache, kv_indptr, kv_indices, sm_scale):
    batch_size, num_qo_heads, head_dim = q.shape
    _, page_size, num_kv_heads, _ = k_cache.shape
    len_indptr = kv_indptr.shape[0]
    num_kv_indices = kv_indices.shape[0]

    # Check constants
    assert num_qo_heads == 32
    assert num_kv_heads == 8
    assert head_dim == 128
    assert page_size == 1

    # Check constraints
    assert len_indptr == batch_size + 1
    assert num_kv_indices == kv_indptr[-1].item()

    device = q.device

    output = torch.zeros(
        (batch_size, num_qo_heads, head_dim), dtype=torch.bfloat16, device=device
    )
    lse = torch.full(
        (batch_size, num_qo_heads), -float("inf"), dtype=torch.float32, device=device
    )

    gqa_ratio = num_qo_heads // num_kv_heads

    k_cache_flat = k_cache.squeeze(1).to(
        torch.float32
    )  # [num_pages, num_kv_heads, head_dim]
    v_cache_flat = v_cache.squeeze(1).to(
        torch.float32
    )  # [num_pages, num_kv_heads, head_dim]

    for b in range(batch_size):
        page_start = int(kv_indptr[b].item())
        page_end = int(kv_indptr[b + 1].item())

        if page_start >= page_end:
            # No KV cache for this batch element
            output[b].zero_()
            continue

        # Pages are the token indices for page_size=1
        token_indices = kv_indices[page_start:page_end].to(torch.long)
        # Number of tokens is the number of pages for page_size=1
        num_tokens = token_indices.shape[0]

        if num_tokens == 0:
            output[b].zero_()
            continue

        # Get Q, K, V for this batch
        k_batch = k_cache_flat[token_indices]  # [num_tokens, num_kv_heads, head_dim]
        v_batch = v_cache_flat[token_indices]  # [num_tokens, num_kv_heads, head_dim]
        q_batch = q[b].to(torch.float32)  # [num_qo_heads, head_dim]

        for h in range(num_qo_heads):
            # Find corresponding KV head for GQA
            kv_head = h // gqa_ratio

            q_head = q_batch[h]  # [head_dim]
            k_head = k_batch[:, kv_head]  # [num_tokens, head_dim]
            v_head = v_batch[:, kv_head]  # [num_tokens, head_dim]

            logits = torch.matmul(q_head, k_head.T)  # [num_tokens]
            logits_scaled = logits * sm_scale

            # Compute 2-base LSE
            lse[b, h] = torch.logsumexp(logits_scaled, dim=-1) / math.log(2.0)

            attn = torch.softmax(logits_scaled, dim=-1)  # [num_tokens]
            out_head = torch.matmul(attn, v_head)  # [head_dim]
            output[b, h] = out_head.to(torch.bfloat16)

    return {"output": output, "lse": lse}

# --- Added by `ksearch import flashinfer-bench` -------------------------------------------
# The inputs of one call, for inputs a random draw cannot describe: offsets (`*_indptr`, rising
# from 0 to the axis a constraint ties their last element to, every range non-empty where the
# total allows), page or token indices into a
# cache, lengths that follow from offsets. Every other input is drawn as FlashInfer-Bench draws
# random inputs (floats from a standard normal, integers uniform in [-1024, 1024)), scalars
# take the workload's value. The judge calls it with a fresh seed for every call.
_KSEARCH_INPUTS = [
    {"name": "q", "shape": ["batch_size", "num_qo_heads", "head_dim"], "dtype": "bf16", "kind": "random"},
    {"name": "k_cache", "shape": ["num_pages", "page_size", "num_kv_heads", "head_dim"], "dtype": "bf16", "kind": "random"},
    {"name": "v_cache", "shape": ["num_pages", "page_size", "num_kv_heads", "head_dim"], "dtype": "bf16", "kind": "random"},
    {"name": "kv_indptr", "shape": ["len_indptr"], "dtype": "i32", "kind": "offsets", "total": "num_kv_indices"},
    {"name": "last_page_len", "shape": ["batch_size"], "dtype": "i32", "kind": "page_len", "bound": "page_size"},
    {"name": "kv_indices", "shape": ["num_kv_indices"], "dtype": "i32", "kind": "indices", "bound": "num_pages"},
    {"name": "sm_scale", "shape": [], "dtype": "f32", "kind": "const", "value": 0.08838834764831845},
]


def make_inputs(seed, device, **axes):
    import torch

    dtypes = {"f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32, "f64": torch.float64,
              "i32": torch.int32, "i64": torch.int64, "f8e4m3": torch.float8_e4m3fn, "f8e5m2": torch.float8_e5m2,
              "i8": torch.int8, "i16": torch.int16, "bool": torch.bool}
    g = torch.Generator(device=device)
    g.manual_seed(seed & ((1 << 63) - 1))
    made = {}
    for spec in sorted(_KSEARCH_INPUTS, key=lambda s: s["kind"] == "lengths"):
        shape = [axes[a] for a in spec["shape"]]
        dtype = dtypes[spec["dtype"]]
        kind = spec["kind"]
        if kind == "offsets":
            n, total = shape[0], axes[spec["total"]]
            if total >= n - 1 >= 1:
                # Every range non-empty (an empty one makes a reference's log-sum-exp -inf).
                cuts = (torch.randperm(max(total - 1, 0), generator=g, device=device)[: n - 2] + 1).sort().values
            else:
                cuts = torch.randint(0, total + 1, (max(n - 2, 0),), generator=g, device=device).sort().values
            edges = [torch.zeros(1, dtype=torch.int64, device=device), cuts, torch.full((1,), total, device=device)]
            t = torch.cat(edges)[:n] if n > 1 else torch.zeros(n, dtype=torch.int64, device=device)
        elif kind == "indices":
            t = torch.randint(0, max(axes[spec["bound"]], 1), shape, generator=g, device=device)
        elif kind == "page_len":
            t = torch.randint(1, max(axes[spec["bound"]], 1) + 1, shape, generator=g, device=device)
        elif kind == "lengths":
            o = made[spec["of"]].to(torch.int64)
            t = (o[1:] - o[:-1])[: shape[0]]
        elif kind == "const":
            t = torch.full(shape, spec["value"], device=device)
        elif dtype == torch.bool:
            t = torch.randint(0, 2, shape, generator=g, device=device)
        elif dtype.is_floating_point:
            t = torch.randn(shape, generator=g, device=device)
        else:
            t = torch.randint(-1024, 1024, shape, generator=g, device=device)
        made[spec["name"]] = t.to(dtype)
    return [made[s["name"]] for s in _KSEARCH_INPUTS]

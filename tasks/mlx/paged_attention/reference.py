"""Trusted reference: paged GQA decode in float32, one sequence at a time, reading only the
pages its context covers."""
import math

import mlx.core as mx


def run(q, k_cache, v_cache, block_table, context_lens, *, batch, kv_heads, group, heads, dim, page,
        pages_per_seq, num_pages):
    outs = []
    for b in range(batch):
        n = int(context_lens[b].item())
        pages = block_table[b, : (n + page - 1) // page]
        k = k_cache[pages].reshape(-1, kv_heads, dim)[:n].astype(mx.float32)
        v = v_cache[pages].reshape(-1, kv_heads, dim)[:n].astype(mx.float32)
        qb = q[b].astype(mx.float32).reshape(kv_heads, group, dim) * (1.0 / math.sqrt(dim))
        s = qb @ k.transpose(1, 2, 0)  # kv_heads, group, n
        p = mx.softmax(s, axis=-1, precise=True)
        outs.append((p @ v.transpose(1, 0, 2)).reshape(heads, dim))
    return mx.stack(outs).astype(mx.float16)

"""Naive starting point: every sequence's pages gathered to full length, the keys past its
context masked out, softmax and the weighted sum in float32 with plain MLX ops."""
import math

import mlx.core as mx


def run(q, k_cache, v_cache, block_table, context_lens, *, batch, kv_heads, group, heads, dim, page,
        pages_per_seq, num_pages):
    keys = pages_per_seq * page
    k = k_cache[block_table].reshape(batch, keys, kv_heads, dim).astype(mx.float32)
    v = v_cache[block_table].reshape(batch, keys, kv_heads, dim).astype(mx.float32)
    qf = q.astype(mx.float32).reshape(batch, kv_heads, group, dim) * (1.0 / math.sqrt(dim))
    s = qf @ k.transpose(0, 2, 3, 1)  # batch, kv_heads, group, keys
    inside = mx.arange(keys)[None, :] < context_lens[:, None]
    s = mx.where(inside[:, None, None, :], s, -mx.inf)
    p = mx.softmax(s, axis=-1, precise=True)
    o = p @ v.transpose(0, 2, 1, 3)  # batch, kv_heads, group, dim
    return o.reshape(batch, heads, dim).astype(mx.float16)

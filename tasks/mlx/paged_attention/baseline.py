"""Production baseline: what an MLX user writes today for paged decode: gather each sequence's
pages, then MLX's fused attention with an additive mask over the keys past the context."""
import math

import mlx.core as mx


def run(q, k_cache, v_cache, block_table, context_lens, *, batch, kv_heads, group, heads, dim, page,
        pages_per_seq, num_pages):
    keys = pages_per_seq * page
    k = k_cache[block_table].reshape(batch, keys, kv_heads, dim).transpose(0, 2, 1, 3)
    v = v_cache[block_table].reshape(batch, keys, kv_heads, dim).transpose(0, 2, 1, 3)
    inside = mx.arange(keys)[None, :] < context_lens[:, None]
    mask = mx.where(inside, 0.0, -mx.inf).astype(q.dtype)[:, None, None, :]
    o = mx.fast.scaled_dot_product_attention(q[:, :, None, :], k, v, scale=1.0 / math.sqrt(dim), mask=mask)
    return o[:, :, 0, :]


def ksearch_describe():
    """What this baseline runs, for the label its speedups are quoted against."""
    return f"gathered pages, then mx.fast.scaled_dot_product_attention, MLX {mx.__version__} on {mx.default_device()}"

"""Production baseline: MLX's fused attention."""
import math

import mlx.core as mx


def run(q, k, v, *, batch, heads, seq, dim, causal):
    return mx.fast.scaled_dot_product_attention(q, k, v, scale=1.0 / math.sqrt(dim), mask="causal" if causal else None)


def ksearch_describe():
    """What this baseline runs, for the label its speedups are quoted against."""
    return f"mx.fast.scaled_dot_product_attention, MLX {mx.__version__} on {mx.default_device()}"

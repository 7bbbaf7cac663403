"""Summaries of timing samples, the same arithmetic as the Rust side (ksearch-core stats.rs)."""


def quantile(sorted_values, q):
    """Linear interpolation between order statistics; `sorted_values` must be sorted."""
    if not sorted_values:
        raise ValueError("quantile of no samples")
    q = min(max(q, 0.0), 1.0)
    pos = q * (len(sorted_values) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    frac = pos - lo
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * frac


def timing_stats(samples_ms, calls_per_sample):
    s = sorted(samples_ms)
    return {
        "median_ms": quantile(s, 0.5),
        "p10_ms": quantile(s, 0.1),
        "p90_ms": quantile(s, 0.9),
        "runs": len(samples_ms),
        "calls_per_sample": calls_per_sample,
        "samples_ms": list(samples_ms),
    }


def batch_size(per_call_ms, target_batch_ms, max_calls=64):
    """Calls per synchronisation: enough that one batch lasts `target_batch_ms`, so the fixed
    cost of a synchronisation (about 0.15–0.2 ms on MLX's CUDA backend) is spread thin."""
    if per_call_ms <= 0:
        return max_calls
    import math

    return max(1, min(max_calls, math.ceil(target_batch_ms / per_call_ms)))

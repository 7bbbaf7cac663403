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


# When timing may stop before `min_time_ms` (the C judge's `c_worker/settle.rs`, the same rule):
# the candidate's ratio with every other contender within SETTLED_HALF_WIDTH (95% interval), or
# decided: its DECIDED_LEVEL interval clear of 1 by DECIDED_MARGIN and its 95% interval within
# DECIDED_HALF_WIDTH. The acceptance gate itself resamples 2000 times.
SETTLED_HALF_WIDTH = 0.01
DECIDED_MARGIN = 1.02
DECIDED_LEVEL = 0.995
DECIDED_HALF_WIDTH = 0.03
SETTLE_RESAMPLES = 1000


def is_look(rounds, first):
    """The rounds at which `settled` reads: `first`, then each time the rounds grew by half."""
    look = first
    while look < rounds:
        look = -(-look * 3 // 2)
    return look == rounds


def settled(samples, rounds, min_runs):
    """Whether the candidate's (contender 0's) ratio of medians with every other contender,
    resampled over the rounds as the gate does (the same rounds for both), is known: within a
    percent, or decided (see above). A tight interval favours no verdict; a decided one is read
    at a level that keeps the chance of a verdict the full timing would not give under 5%."""
    import numpy as np

    if len(samples) < 2 or not is_look(rounds, max(min_runs, 2)):
        return False
    c = np.asarray(samples[0], dtype=np.float64)
    rng = np.random.Generator(np.random.PCG64(0x05E771ED))
    for other in samples[1:]:
        o = np.asarray(other, dtype=np.float64)
        n = min(len(c), len(o))
        if n == 0:
            return False
        cc, oo = c[:n], o[:n]
        point = np.median(oo) / np.median(cc)
        idx = rng.integers(0, n, size=(SETTLE_RESAMPLES, n))
        dist = np.median(oo[idx], axis=1) / np.median(cc[idx], axis=1)
        lo, hi = np.quantile(dist, [0.025, 0.975])
        wlo, whi = np.quantile(dist, [(1 - DECIDED_LEVEL) / 2, 1 - (1 - DECIDED_LEVEL) / 2])
        if not (np.isfinite(point) and point > 0):
            return False

        def within(h):
            return lo >= point * (1 - h) and hi <= point * (1 + h)
        decided = wlo > DECIDED_MARGIN or whi < 1 / DECIDED_MARGIN
        if not (within(SETTLED_HALF_WIDTH) or (decided and within(DECIDED_HALF_WIDTH))):
            return False
    return True

"""Baseline: the same step in plain MLX ops, as a model's decode path runs it."""
import mlx.core as mx


def run(state, x, dt, A, B, C, Dskip, z, *, batch, dinner, dstate):
    dtf = dt.astype(mx.float32)
    xf = x.astype(mx.float32)
    h = mx.exp(dtf[..., None] * A) * state + (dtf * xf)[..., None] * B.astype(mx.float32)[:, None, :]
    y = (h @ C.astype(mx.float32)[..., None]).squeeze(-1) + Dskip * xf
    zf = z.astype(mx.float32)
    return (y * (zf * mx.sigmoid(zf))).astype(mx.float16), h


def ksearch_describe():
    """What this baseline runs, for the label its speedups are quoted against."""
    return f"the step in plain MLX ops, MLX {mx.__version__} on {mx.default_device()}"

"""The per-timestep formulation of mlx-lm's Mamba (mlx_lm.models.mamba, ssm_step), written out
so the task does not depend on mlx-lm: one step of MLX ops per token, in the inputs' dtypes."""
import mlx.core as mx


def _step(x, dt, A, Bt, Ct, Dskip, state):
    new_state = mx.expand_dims(dt * x, -1) * mx.expand_dims(Bt, 1)
    if state is not None:
        new_state = new_state + state * mx.exp(mx.expand_dims(dt, -1) * A)
    y = (new_state @ mx.expand_dims(Ct, -1)).squeeze(2)
    return y + Dskip * x, new_state


def run(u, delta, A, B, C, Dskip, z, *, batch, seqlen, dinner, dstate):
    state = None
    ys = []
    for t in range(seqlen):
        y, state = _step(u[:, t], delta[:, t], A, B[:, t], C[:, t], Dskip, state)
        zt = z[:, t]
        ys.append(y * (zt * mx.sigmoid(zt)))
    return mx.stack(ys, axis=1).astype(mx.float16), state.astype(mx.float32)


def ksearch_describe():
    """What this baseline runs, for the label its speedups are quoted against."""
    return f"a per-timestep scan in plain MLX ops, MLX {mx.__version__} on {mx.default_device()}"

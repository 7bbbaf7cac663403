

# --- Added by `ksearch import kernelbench` ------------------------------------------------
# The judge builds `Model(*init_inputs(**axes))` right after `torch.manual_seed(42)`, as every
# runner builds the candidate's `ModelNew`, and makes each call's inputs with make_inputs: the
# tensors of the problem's own get_inputs, on the device, after `torch.manual_seed(seed)`. What
# get_inputs returns that is not a tensor is a constant (call_constants): every model is called
# with it in its place. A workload sets the module's globals named by its axes ({globals})
# before any of them runs.
_KSEARCH_GLOBALS = {globals}


def _ksearch_set(axes):
    for _name in _KSEARCH_GLOBALS:
        if _name in axes:
            globals()[_name] = axes[_name]


def init_inputs(**axes):
    _ksearch_set(axes)
    return list(get_init_inputs())


def make_inputs(seed, device, **axes):
    import torch as _torch

    _ksearch_set(axes)
    _torch.manual_seed(seed & ((1 << 63) - 1))
    with _torch.device(device):
        return [x.contiguous() for x in get_inputs() if isinstance(x, _torch.Tensor)]


def call_constants(**axes):
    import torch as _torch

    _ksearch_set(axes)
    try:
        with _torch.device("meta"):
            made = get_inputs()
    except Exception:  # noqa: BLE001 - a problem that does not run on the meta device
        made = get_inputs()
    return {i: x for i, x in enumerate(made) if not isinstance(x, _torch.Tensor)}



# --- Added by `ksearch import kernelbench` ------------------------------------------------
# The judge builds `Model(*init_inputs(**axes))` right after `torch.manual_seed(42)`, as every
# runner builds the candidate's `ModelNew`, and makes each call's inputs with make_inputs: the
# problem's own get_inputs, on the device, after `torch.manual_seed(seed)`. A workload sets the
# module's globals named by its axes ({globals}) before either runs.
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
        return [x.contiguous() for x in get_inputs()]

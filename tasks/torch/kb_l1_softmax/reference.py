import torch
import torch.nn as nn

class Model(nn.Module):
    """
    Simple model that performs a Softmax activation.
    """
    def __init__(self):
        super(Model, self).__init__()
    
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Applies Softmax activation to the input tensor.

        Args:
            x (torch.Tensor): Input tensor of shape (batch_size, num_features).

        Returns:
            torch.Tensor: Output tensor with Softmax applied, same shape as input.
        """
        return torch.softmax(x, dim=1)

batch_size = 4096
dim = 393216

def get_inputs():
    x = torch.rand(batch_size, dim)
    return [x]

def get_init_inputs():
    return []  # No special initialization inputs needed

# --- Added by `ksearch import kernelbench` ------------------------------------------------
# The judge builds `Model(*init_inputs(**axes))` right after `torch.manual_seed(42)`, as every
# runner builds the candidate's `ModelNew`, and makes each call's inputs with make_inputs: the
# problem's own get_inputs, on the device, after `torch.manual_seed(seed)`. A workload sets the
# module's globals named by its axes (["batch_size", "dim"]) before either runs.
_KSEARCH_GLOBALS = ["batch_size", "dim"]


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

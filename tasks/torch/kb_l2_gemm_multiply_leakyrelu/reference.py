import torch
import torch.nn as nn

class Model(nn.Module):
    """
    Simple model that performs a Gemm, multiplies the result, and applies LeakyReLU.
    """
    def __init__(self, in_features, out_features, multiplier, negative_slope):
        super(Model, self).__init__()
        self.gemm = nn.Linear(in_features, out_features)
        self.multiplier = multiplier
        self.leaky_relu = nn.LeakyReLU(negative_slope)

    def forward(self, x):
        x = self.gemm(x)
        x = x * self.multiplier
        x = self.leaky_relu(x)
        return x

batch_size = 1024
in_features  = 8192  
out_features = 8192
multiplier = 2.0
negative_slope = 0.1

def get_inputs():
    return [torch.rand(batch_size, in_features)]

def get_init_inputs():
    return [in_features, out_features, multiplier, negative_slope]

# --- Added by `ksearch import kernelbench` ------------------------------------------------
# The judge builds `Model(*init_inputs(**axes))` right after `torch.manual_seed(42)`, as every
# runner builds the candidate's `ModelNew`, and makes each call's inputs with make_inputs: the
# problem's own get_inputs, on the device, after `torch.manual_seed(seed)`. A workload sets the
# module's globals named by its axes (["batch_size", "in_features"]) before either runs.
_KSEARCH_GLOBALS = ["batch_size", "in_features"]


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

import torch
import torch.nn as nn

class Model(nn.Module):
    """
    Simple model that performs a convolution, applies ReLU, and adds a bias term.
    """
    def __init__(self, in_channels, out_channels, kernel_size, bias_shape):
        super(Model, self).__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.bias = nn.Parameter(torch.randn(bias_shape)) 

    def forward(self, x):
        x = self.conv(x)
        x = torch.relu(x)
        x = x + self.bias
        return x

batch_size = 128
in_channels  = 64  
out_channels = 128  
height = width = 128
kernel_size = 3
bias_shape = (out_channels, 1, 1)

def get_inputs():
    return [torch.rand(batch_size, in_channels, height, width)]

def get_init_inputs():
    return [in_channels, out_channels, kernel_size, bias_shape]

# --- Added by `ksearch import kernelbench` ------------------------------------------------
# The judge builds `Model(*init_inputs(**axes))` right after `torch.manual_seed(42)`, as every
# runner builds the candidate's `ModelNew`, and makes each call's inputs with make_inputs: the
# problem's own get_inputs, on the device, after `torch.manual_seed(seed)`. A workload sets the
# module's globals named by its axes (["batch_size", "in_channels", "out_channels"]) before either runs.
_KSEARCH_GLOBALS = ["batch_size", "in_channels", "out_channels"]


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

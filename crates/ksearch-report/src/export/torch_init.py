"""{doc}"""

import importlib.util as _util
import os as _os

try:
    import torch as _torch
except ModuleNotFoundError as _err:
    raise ImportError("{name} needs PyTorch: pip install torch") from _err

# ksearch's own calling convention, as the harness that measured the kernel calls it.
from . import _calling

__all__ = ["{name}"]

_INPUTS = {inputs}
_OUTPUTS = {outputs}
_HERE = _os.path.dirname(_os.path.abspath(__file__))

# The device the candidate module sees as `KSEARCH_DEVICE` (and its type as `KSEARCH_TARGET`),
# as under the harness: the KSEARCH_DEVICE environment variable, else CUDA where PyTorch sees a
# GPU, else the CPU.
DEVICE = _os.environ.get("KSEARCH_DEVICE") or ("cuda" if _torch.cuda.is_available() else "cpu")


def _load(file):
    spec = _util.spec_from_file_location(f"{__name__}.{file[:-3]}", _os.path.join(_HERE, file))
    module = _util.module_from_spec(spec)
    module.KSEARCH_DEVICE = DEVICE
    module.KSEARCH_TARGET = _torch.device(DEVICE).type
    spec.loader.exec_module(module)
    return module


_candidate = _load("_candidate.py")
_entry = _calling.Entry(vars(_candidate), "_candidate.py")
_reference = []


def _model_args(axes):
    """A model's constructor arguments for these axes and the constants among its inputs, from
    the task's reference (its `init_inputs`, or KernelBench's `get_init_inputs`, and its
    `call_constants`), as the harness takes them."""
    if not _os.path.exists(_os.path.join(_HERE, "_reference.py")):
        return [], []
    if not _reference:
        _reference.append(_load("_reference.py"))
    ns = vars(_reference[0])
    return _calling.init_args_for(ns, axes), _calling.constants_for(ns, axes)


def _call(inputs, axes):
    """`run(*inputs)` with the axes its signature names; or a `ModelNew` built once per axes and
    device, right after `torch.manual_seed(42)` on the CPU, moved to the inputs' device, called
    on the inputs. The outputs: one tensor, or a tuple in the task's order."""
    first = next((x for x in inputs if isinstance(x, _torch.Tensor)), None)
    device = first.device if first is not None else _torch.device(DEVICE)
    init, constants = _model_args(axes) if _entry.kind == "model" else ([], [])
    key = (tuple(sorted(axes.items())), str(device))
    fn = _entry.bind(_torch, device, key, axes, init, _INPUTS, constants)
    outs = _calling.outputs_of(_torch, fn(*inputs), _OUTPUTS)
    return outs[0] if len(outs) == 1 else tuple(outs)


{function}

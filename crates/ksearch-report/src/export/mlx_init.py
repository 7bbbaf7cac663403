"""{doc}"""

import importlib.util as _util
import os as _os

try:
    import mlx.core as _mx
except ModuleNotFoundError as _err:
    raise ImportError(
        "{name} needs MLX: pip install mlx (Apple silicon) or \"mlx[cuda13]\" (Linux, NVIDIA)"
    ) from _err

__all__ = ["{name}"]

# The target the kernel was measured on (None: the GPU MLX found).
MEASURED_TARGET = {target}


def _target():
    env = _os.environ.get("KSEARCH_TARGET")
    if env:
        return env
    if MEASURED_TARGET:
        return MEASURED_TARGET
    cuda = getattr(_mx, "cuda", None)
    return "cuda" if cuda is not None and cuda.is_available() else "metal"


def _load_candidate():
    path = _os.path.join(_os.path.dirname(_os.path.abspath(__file__)), "_candidate.py")
    spec = _util.spec_from_file_location(__name__ + "._candidate", path)
    module = _util.module_from_spec(spec)
    module.KSEARCH_TARGET = _target()
    spec.loader.exec_module(module)
    return module


_candidate = _load_candidate()


{function}

"""How the torch backend calls a module, the same in the judge (the task's reference) and in a
runner (candidates, baselines): its `run`, else its KernelBench-style `ModelNew`, else `Model`.

- `run(*inputs, **axes)` gets, by keyword, the axes its signature names (all of them when it
  takes `**kwargs`), so a FlashInfer-Bench `run(A, B)` works as it is;
- a model class is built once per workload as `cls(*init_inputs)` right after
  `torch.manual_seed(MODEL_SEED)`, on the CPU as KernelBench builds it, then moved to the device,
  and called as `model(*inputs)`, with the reference's constants (`call_constants(**axes)`: a
  dict of position to value, for what KernelBench's `get_inputs` returns that is not a tensor)
  put in their places among the inputs.

Outputs may be one tensor, a tuple or list in the task's order, or a dict keyed by output name.
A task's reference module may also define `make_inputs(seed, device, **axes)` (the inputs of one
call, for inputs a random `init` cannot describe: page tables, indices) and `init_inputs(**axes)`
(a model's constructor arguments).

`ksearch export` ships this file as it is in the Python package of a torch task (as
`_calling.py`), so that the exported op calls the candidate exactly as it was measured: it
imports nothing of the harness's but `CandidateError`, and stands in its own where that is
absent."""

import inspect

try:
    from .candidates import CandidateError
except ImportError:  # `_calling.py` of an exported package

    class CandidateError(Exception):
        """A module that does not meet the candidate contract."""


# The seed every model is built after (`torch.manual_seed`), in the judge and in every runner,
# so that a `Model` and a `ModelNew` creating the same parameters in the same order agree.
MODEL_SEED = 42


class Entry:
    """A module's callable entry point, bound per workload."""

    def __init__(self, ns, filename):
        self.ns = ns
        self.filename = filename
        self.models = {}
        run = ns.get("run")
        if callable(run) and not inspect.isclass(run):
            self.kind, self.fn = "run", run
            try:
                params = inspect.signature(run).parameters.values()
            except (TypeError, ValueError):
                params = []
            self.takes_all = any(p.kind == p.VAR_KEYWORD for p in params)
            self.keywords = {p.name for p in params if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)}
            self.positional = [p.name for p in params if p.kind == p.POSITIONAL_OR_KEYWORD]
            return
        for name in ("ModelNew", "Model"):
            cls = ns.get(name)
            if callable(cls):
                self.kind, self.fn = "model", cls
                return
        raise CandidateError(f"{filename} defines no `run` function and no `ModelNew` class (the contract: `def run(*inputs, **axes)`, or KernelBench's `class ModelNew(nn.Module)`)")

    def bind(self, torch, device, key, axes, init_args, inputs=None, constants=None):
        """The callable for one workload (`key`), building the model the first time. A `run`
        whose positional parameters are all input names (`inputs`) gets the inputs it names by
        keyword (a FlashInfer-Bench reference may skip one); otherwise inputs come in order. A
        model gets `constants` (position: value) among its inputs."""
        if self.kind == "run":
            kw = dict(axes) if self.takes_all else {k: v for k, v in axes.items() if k in self.keywords}
            fn = self.fn
            named = [p for p in self.positional if p not in axes]
            if inputs and named and all(p in inputs for p in named) and named != list(inputs[:len(named)]):
                at = {n: i for i, n in enumerate(inputs)}
                return lambda *xs: fn(**{p: xs[at[p]] for p in named}, **kw)
            return lambda *xs: fn(*xs, **kw)
        if key not in self.models:
            torch.manual_seed(MODEL_SEED)
            try:
                model = self.fn(*init_args)
                if isinstance(model, torch.nn.Module):
                    model = model.to(device)
            except Exception as e:  # noqa: BLE001 - candidate code failed
                raise CandidateError(f"building {self.filename}'s model raised {type(e).__name__}: {e}") from None
            self.models[key] = model
        model = self.models[key]
        if not constants:
            return lambda *xs: model(*xs)
        fixed = {int(p): v for p, v in dict(constants).items()}

        def with_constants(*xs):
            it = iter(xs)
            return model(*(fixed[p] if p in fixed else next(it) for p in range(len(xs) + len(fixed))))

        return with_constants


def outputs_of(torch, result, names):
    """The outputs as a list in the task's order; a CandidateError says what does not fit."""
    if isinstance(result, dict):
        missing = [n for n in names if n not in result]
        if missing:
            raise CandidateError(f"run returned a dict without {', '.join(f'`{m}`' for m in missing)}")
        outs = [result[n] for n in names]
    elif isinstance(result, (tuple, list)):
        outs = list(result)
    else:
        outs = [result]
    if len(outs) != len(names):
        raise CandidateError(f"run returned {len(outs)} output(s); the task declares {len(names)}")
    return outs


def check_output(torch, name, o, shape, dtype, device):
    """None when `o` is a tensor of exactly `shape` and `dtype` on `device`, else why not."""
    if not isinstance(o, torch.Tensor):
        return f"output `{name}` is a {type(o).__name__}, not a tensor"
    if tuple(o.shape) != tuple(shape):
        return f"output `{name}` has shape {tuple(o.shape)}; the task declares {tuple(shape)}"
    if o.dtype != dtype:
        return f"output `{name}` has dtype {o.dtype}; the task declares {dtype}"
    if o.device.type != device.type:
        return f"output `{name}` is on {o.device}; the inputs are on {device}"
    return None


def constants_for(ns, axes):
    """A model's constant arguments for a workload, as [position, value] pairs: the reference's
    `call_constants(**axes)`, else none."""
    if callable(ns.get("call_constants")):
        return sorted([int(p), v] for p, v in ns["call_constants"](**axes).items())
    return []


def init_args_for(ns, axes):
    """A model's constructor arguments for a workload: `init_inputs(**axes)`, else KernelBench's
    `get_init_inputs()`, else none."""
    if callable(ns.get("init_inputs")):
        return list(ns["init_inputs"](**axes))
    if callable(ns.get("get_init_inputs")):
        return list(ns["get_init_inputs"]())
    return []

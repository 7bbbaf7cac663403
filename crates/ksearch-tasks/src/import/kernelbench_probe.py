"""Run by `ksearch import kernelbench PROBLEM.py`: what the problem's `Model`, `get_inputs` and
`get_init_inputs` make, as one JSON object on stdout. Shapes come from PyTorch's meta device (no
memory, no arithmetic), else from the CPU. What `get_inputs` returns that is not a tensor (a
number, a string, None) is a constant, with its position among `forward`'s arguments. A second
workload is tried with the module's `batch_size` a quarter as large."""

import inspect
import json
import sys


def dtype_name(torch, d):
    return str(d).replace("torch.", "")


def jsonable(v, where):
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    if isinstance(v, (list, tuple)):
        return [jsonable(x, where) for x in v]
    raise TypeError(f"{where} is a {type(v).__name__}; ksearch passes a model's arguments as numbers, strings and lists")


def run(ns, torch, device, globals_):
    ns.update(globals_)
    torch.manual_seed(0)
    with torch.device(device):
        init = list(ns["get_init_inputs"]())
        args = list(ns["get_inputs"]())
        inputs, constants = [], []
        for i, x in enumerate(args):
            if isinstance(x, torch.Tensor):
                inputs.append(x)
            elif x is None or isinstance(x, (bool, int, float, str)):
                constants.append([i, x])
            else:
                raise TypeError(f"get_inputs()[{i}] is a {type(x).__name__}; ksearch takes tensors, and numbers, strings and None as constants")
        torch.manual_seed(0)
        model = ns["Model"](*init)
        with torch.no_grad():
            out = model(*args)
    outs = list(out) if isinstance(out, (tuple, list)) else [out]
    for i, o in enumerate(outs):
        if not isinstance(o, torch.Tensor):
            raise TypeError(f"Model.forward returns a {type(o).__name__} at position {i}; ksearch tasks return tensors")
    return {
        "init_inputs": jsonable(init, "get_init_inputs()"),
        "constants": constants,
        "inputs": [{"shape": list(x.shape), "dtype": dtype_name(torch, x.dtype)} for x in inputs],
        "outputs": [{"shape": list(o.shape), "dtype": dtype_name(torch, o.dtype)} for o in outs],
    }


def main():
    path = sys.argv[1]
    import torch

    with open(path) as f:
        text = f.read()
    ns = {"__name__": "kernelbench_problem", "__file__": path}
    exec(compile(text, path, "exec"), ns)  # noqa: S102 - the user's own problem file
    for name in ("Model", "get_inputs", "get_init_inputs"):
        if not callable(ns.get(name)):
            raise SystemExit(json.dumps({"error": f"defines no `{name}`", "field": name}))
    ints = {k: v for k, v in ns.items() if isinstance(v, int) and not isinstance(v, bool) and not k.startswith("_")}
    params = [p for p in inspect.signature(ns["Model"].forward).parameters if p != "self"]
    out = {"globals": ints, "forward": params, "workloads": []}
    for device in ("meta", "cpu"):
        try:
            out["workloads"] = [dict(name="kernelbench", globals={}, **run(ns, torch, device, dict(ints)))]
            out["device"] = device
            break
        except Exception as e:  # noqa: BLE001 - reported to the user
            last = f"{type(e).__name__}: {e}"
    else:
        raise SystemExit(json.dumps({"error": f"running the problem failed: {last}", "field": "Model"}))
    b = ints.get("batch_size")
    if isinstance(b, int) and b >= 4:
        small = dict(ints, batch_size=b // 4)
        try:
            out["workloads"].append(dict(name="small", globals={"batch_size": b // 4}, **run(ns, torch, out["device"], small)))
        except Exception as e:  # noqa: BLE001 - reported as a note
            out["small_error"] = f"{type(e).__name__}: {e}"
        ns.update(ints)
    print(json.dumps(out))


if __name__ == "__main__":
    main()

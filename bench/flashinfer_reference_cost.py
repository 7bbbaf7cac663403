"""The cost of one call of an imported FlashInfer-Bench reference at two sizings of its generated
large workload: `python3 bench/flashinfer_reference_cost.py OLD_TASK NEW_TASK OUT.json`, each
TASK a directory `ksearch import flashinfer-bench DEFINITION --output TASK` wrote (OLD by a
binary before the sequences were capped). Written for gqa_ragged_prefill_causal_h32_kv8_d128;
times two calls after a first one, on whatever device torch runs here (the CPU unless
DEVICE=cuda)."""
import importlib.util
import json
import os
import sys
import time

import torch


def load(path):
    spec = importlib.util.spec_from_file_location("ref", path)
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    return m


out = {}
SIZINGS = (
    ("old sizing", sys.argv[1], {"len_indptr": 1024, "total_q": 16384, "total_kv": 16384}),
    ("new sizing", sys.argv[2], {"len_indptr": 32, "total_q": 16384, "total_kv": 16384}),
)
for label, task, axes in SIZINGS:
    m = load(task + "/reference.py")
    full = dict(axes, num_qo_heads=32, num_kv_heads=8, head_dim=128)
    device = os.environ.get("DEVICE", "cpu")
    ins = m.make_inputs(1, device, **full)
    if device == "cuda":
        torch.cuda.synchronize()
    names = ("q", "k", "v", "qo_indptr", "kv_indptr", "sm_scale")
    args = [ins[n] for n in names] if isinstance(ins, dict) else ins
    m.run(*args)
    ts = []
    for _ in range(2):
        t = time.perf_counter()
        m.run(*args)
        if device == "cuda":
            torch.cuda.synchronize()
        ts.append(time.perf_counter() - t)
    out[label] = {"axes": axes, "sequences": axes["len_indptr"] - 1, "seconds_a_call": ts}
    print(label, axes, [round(t, 3) for t in ts], flush=True)
json.dump(out, open(sys.argv[3], "w"), indent=1)

"""Times torch/gemm's seed (cuBLAS via the reference), a Triton point of its space and the
rmsnorm reference with `triton.testing.do_bench`, a timer ksearch did not write, for the
cross-check against `ksearch eval` (bench/torch_h200.sh; NOT YET RUN). Prints JSON."""

import json
import pathlib
import sys

import jinja2
import torch
import triton.testing

root = pathlib.Path(__file__).resolve().parent.parent
results = {}
for M in (256, 4096):
    A = torch.randn(M, 4096, device="cuda", dtype=torch.float16)
    B = torch.randn(4096, 4096, device="cuda", dtype=torch.float16)
    results[f"torch.matmul M={M}"] = triton.testing.do_bench(lambda: torch.matmul(A, B.T))
    src = (root / "tasks/torch/gemm/space/kernel.py.j2").read_text()
    code = jinja2.Template(src).render(block_m=128, block_n=128, block_k=64, warps=8, stages=3, group_m=8)
    ns = {}
    path = pathlib.Path(sys.argv[1]) / "triton_point.py"
    path.write_text(code)
    exec(compile(code, str(path), "exec"), ns)  # noqa: S102 - the space's own template
    results[f"triton 128x128x64 M={M}"] = triton.testing.do_bench(lambda: ns["run"](A, B, M=M, N=4096, K=4096))
print(json.dumps({"unit": "ms (do_bench median, L2 cleared before each call)", "results": results}, indent=2))

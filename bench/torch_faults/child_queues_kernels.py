# torch/gemm_bf16 candidate, expected `incorrect` (bench/torch_h200.sh faults): the right product,
# and a helper process of its own (a GPU runner may start processes: nvcc, ptxas and the host
# compiler run so) that opens the GPU itself and, each time a call tells it to (a byte down a
# pipe), queues a stream of short kernels: 400 sleeps of about 0.1 ms, 40 ms of GPU work, never
# waited for. The judge pauses the runner and its processes (SIGSTOP) once the call answers, but
# kernels already queued run on, and contexts of different processes share the GPU by time
# slices: the contender timed next is slowed, while the judge's quiet test, whose flush runs
# between short kernels, sees a quiet GPU (bench/RESULTS.md, the GPU session of 2026-12-07). The
# judge refuses any runner that has a process of its own alive when a batch is to be timed. Its
# twin (CHILD = False) is the same product with no helper: evaluated `--against` it on a judge
# without that check, the twin's and the baseline's times in this evaluation, against an
# evaluation of the twin alone, say what the helper's stream costs the others.
import os
import subprocess
import sys

import torch

CHILD = True
_HELPER = r"""
import os, sys, torch
torch.cuda.init()
x = torch.empty(1, device="cuda")
cycles = int(sys.argv[1])
while True:
    if not os.read(0, 1):
        break
    for _ in range(400):
        torch.cuda._sleep(cycles)
"""
_helper = []


def _start():
    # torch.cuda._sleep counts clock cycles: 200,000 are about 0.1 ms at an H100's or H200's
    # 1.98 GHz.
    p = subprocess.Popen([sys.executable, "-c", _HELPER, "200000"], stdin=subprocess.PIPE)
    print(f"HELPER started (pid {p.pid})", flush=True)
    _helper.append(p)


def run(A, B):
    C = torch.matmul(A, B.T)
    if CHILD:
        if not _helper:
            _start()
        try:
            os.write(_helper[0].stdin.fileno(), b"q")
        except OSError:
            pass
    return C

"""What the torch judge's quiet test sees while another process keeps a stream of short kernels
queued (issue 43, item 6): the judge times a write of its 256 MiB L2 scratch by its host clock
after every batch (`torch_contenders.GpuWatch`); one flush took 0.107 ms while another process
ran a stream of 0.4 ms products, as on a quiet GPU (bench/RESULTS.md, 2026-12-07). Is a run of
several flushes back to back slowed where one is not (each flush waiting behind one of the other
process's kernels)? For each stream (sleeps of about 0.1 ms, bf16 products of 4096^3), quiet and
busy: the fastest and median single flush, and the fastest and median run of RUN flushes.
Usage: python3 bench/gpu_short_streams.py OUT.json (run on an H100 on 2026-12-07: bench/RESULTS.md)."""
import json
import statistics
import subprocess
import sys
import time

import torch

RUN = 8
REPEATS = 40
HELPER = r"""
import sys, torch
kind, n = sys.argv[1], int(sys.argv[2])
torch.cuda.init()
if kind == "matmul":
    a = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
print("ready", flush=True)
while sys.stdin.readline():
    for _ in range(n):
        if kind == "sleep":
            torch.cuda._sleep(200_000)
        else:
            a @ a
    print("queued", flush=True)
"""


def flushes(buf, k):
    """Milliseconds for `k` writes of `buf`, launched back to back, by the host clock."""
    s = torch.cuda.current_stream()
    s.synchronize()
    t = time.perf_counter()
    for _ in range(k):
        buf.fill_(0x5A)
    s.synchronize()
    return (time.perf_counter() - t) * 1e3


def measure(buf, helper=None):
    singles, runs = [], []
    for _ in range(REPEATS):
        if helper is not None:
            helper.stdin.write("go\n")
            helper.stdin.flush()
            helper.stdout.readline()
            time.sleep(0.002)
        singles.append(flushes(buf, 1))
        runs.append(flushes(buf, RUN))
        if helper is not None:
            torch.cuda.synchronize()
            time.sleep(0.3)  # the other process's queue drains
    return {"single_min": min(singles), "single_median": statistics.median(singles),
            "run_min": min(runs), "run_median": statistics.median(runs)}


def main():
    buf = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    for _ in range(10):
        flushes(buf, 1)
    out = {"gpu": torch.cuda.get_device_name(), "run": RUN, "quiet": measure(buf)}
    for kind, n in (("sleep", 400), ("matmul", 200)):
        helper = subprocess.Popen([sys.executable, "-c", HELPER, kind, str(n)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        helper.stdout.readline()
        out[kind] = measure(buf, helper)
        helper.stdin.close()
        helper.wait(timeout=60)
        out[kind + "_after"] = measure(buf)
    print(json.dumps(out, indent=1))
    with open(sys.argv[1], "w") as f:
        json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()

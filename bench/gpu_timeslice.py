#!/usr/bin/env python3
"""What the torch judge's L2 flush sees while another process's kernels are still on the GPU
(the premise of its wait for a quiet GPU after an untrusted batch, docs/torch.md).

A second process (this script with `busy`) keeps the GPU busy for a while with kernels of each
of several lengths (`torch.cuda._sleep`, or bf16 products); meanwhile this process flushes 256 MiB in
a loop and times each flush twice: by CUDA events in its own stream (GPU time in its own
context) and by the host clock from launch to the end (which includes any wait for the other
context's time slice). It prints one JSON object: the quiet flush's times, and for each kind of
busy work the flushes seen while it ran and how long they took by each clock.

    python3 bench/gpu_timeslice.py [--out FILE]
"""

import argparse
import json
import select
import statistics
import subprocess
import sys
import time


def busy():
    """The second process: for each line `KIND COUNT SIZE` read, that work on the GPU, then a
    line of JSON (how long it took)."""
    import torch

    a = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
    torch.cuda.synchronize()
    print("ready", flush=True)
    for line in sys.stdin:
        kind, count, size = line.split()
        t0 = time.perf_counter()
        for _ in range(int(count)):
            if kind == "sleep":
                torch.cuda._sleep(int(size))
            else:
                a @ a
        torch.cuda.synchronize()
        print(json.dumps({"busy_s": time.perf_counter() - t0}), flush=True)


def flusher(buf, torch):
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)

    def flush():
        torch.cuda.current_stream().synchronize()
        t0 = time.perf_counter()
        start.record()
        buf.fill_(0x5A)
        end.record()
        end.synchronize()
        return (time.perf_counter() - t0) * 1e3, start.elapsed_time(end)

    return flush


def summary(values):
    if not values:
        return None
    values = sorted(values)
    return {"n": len(values), "min": values[0], "median": statistics.median(values),
            "p90": values[int(0.9 * (len(values) - 1))], "max": values[-1]}


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "busy":
        busy()
        return
    ap = argparse.ArgumentParser()
    ap.add_argument("--out")
    args = ap.parse_args()
    import torch

    buf = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    flush = flusher(buf, torch)
    for _ in range(5):
        flush()
    quiet = [flush() for _ in range(200)]
    result = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
              "quiet_host_ms": summary([h for h, _ in quiet]), "quiet_event_ms": summary([e for _, e in quiet]),
              "busy": []}
    child = subprocess.Popen([sys.executable, __file__, "busy"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert child.stdout.readline().strip() == "ready"
    # (kind, kernels, size): ~0.2 s of 100 ms, 1 ms and 0.1 ms sleeps, and of 4096^3 bf16 products.
    for kind, count, size in (("sleep", 2, 200_000_000), ("sleep", 200, 2_000_000),
                              ("sleep", 2000, 200_000), ("matmul", 700, 4096)):
        child.stdin.write(f"{kind} {count} {size}\n")
        child.stdin.flush()
        time.sleep(0.01)
        seen = []
        t0 = time.perf_counter()
        # Flush until the child reports its end (its line waits in the pipe).
        while not select.select([child.stdout], [], [], 0)[0] and time.perf_counter() - t0 < 5:
            seen.append(flush())
        line = child.stdout.readline()
        after = [flush() for _ in range(20)]
        result["busy"].append({"kind": kind, "kernels": count, "size": size, "child": json.loads(line or "{}"),
                               "flushes_while_busy": len(seen), "host_ms": summary([h for h, _ in seen]),
                               "event_ms": summary([e for _, e in seen]),
                               "after_host_ms": summary([h for h, _ in after])})
    child.stdin.close()
    child.wait()
    text = json.dumps(result, indent=1)
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""The orchestrator's own cost per LLM call: template rendering, parsing, store writes.

Starts a loopback server that speaks the OpenAI chat-completions format and answers instantly
with canned but valid answers (a world model, C kernels, tree edits), runs a correctness-only
search against it, and splits the run's wall time:

    orchestrator time = wall − evaluation time            (from the run summary)
    network time      = sum of the calls' own durations   (from the run's journal; on loopback
                        this is the HTTP round trip plus the server's reply)
    overhead per call = (orchestrator time − network time) / calls

    cargo build --release && python3 bench/llm_overhead.py [--iterations 20]
"""
import argparse
import json
import os
import sqlite3
import subprocess
import sys
import tempfile

from scripted_model import answerer, serve

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")

KERNEL = """#include <math.h>
#include <stdint.h>
void softmax(const float *restrict x, float *restrict y, int64_t rows, int64_t cols) {
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = x + r * cols; float *yr = y + r * cols;
        float m = xr[0];
        for (int64_t c = 1; c < cols; c++) if (xr[c] > m) m = xr[c];
        float s = 0.0f;
        for (int64_t c = 0; c < cols; c++) { yr[c] = expf(xr[c] - m); s += yr[c]; }
        float inv = 1.0f / s;
        for (int64_t c = 0; c < cols; c++) yr[c] *= inv;
    }
}
"""


def variant(n):
    """A correct kernel, made unique so every attempt is new work."""
    return f"```c\n/* variant {n} */\n{KERNEL}```"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--iterations", type=int, default=20)
    ap.add_argument("--binary", default=os.path.join(ROOT, "target", "release", "ksearch"))
    args = ap.parse_args()
    server = serve(answerer(variant))
    base = f"http://127.0.0.1:{server.server_address[1]}/v1"
    with tempfile.TemporaryDirectory() as d:
        run_dir = os.path.join(d, "run")
        cmd = [args.binary, "run", "cpu/softmax", "--model", "openai:bench-model", "--base-url", base,
               "--iterations", str(args.iterations), "--window", "2", "--no-timing", "--workload", "small",
               "--run-dir", run_dir, "--json", "--quiet"]
        out = subprocess.run(cmd, check=True, capture_output=True, text=True, env={**os.environ, "OPENAI_API_KEY": ""}).stdout
        s = json.loads(out)
        db = sqlite3.connect(os.path.join(run_dir, "run.sqlite"))
        calls = [json.loads(r[0]) for r in db.execute("SELECT data FROM llm_calls")]
    server.shutdown()
    n = len(calls)
    network = sum(c["seconds"] for c in calls)
    overhead = s["orchestrator_s"] - network
    print("command:", " ".join(["ksearch"] + cmd[1:]).replace(base, "http://127.0.0.1:PORT/v1"))
    print(f"rounds {s['rounds']}, LLM calls {n}, wall {s['wall_s']:.2f} s, evaluating {s['eval_s']:.2f} s")
    print(f"orchestrator {s['orchestrator_s'] * 1e3:.1f} ms, of which LLM round trips {network * 1e3:.1f} ms")
    per = overhead / n * 1e3
    print(f"overhead per LLM call beyond the network: {per:.2f} ms (target < 50 ms) -> {'met' if per < 50 else 'NOT met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

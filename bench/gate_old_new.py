#!/usr/bin/env python3
"""The acceptance gate's verdicts, old binary against new, on the same candidate pairs: C softmax
kernels doing 1, 1.05, 1.15, 1.5 and 2 times the work of an honest one (the extra share of rows
computed again), each evaluated with `ksearch eval --against` against the honest one (and the
honest one against itself), alternately by the two binaries, REPS times, in one run. Prints,
per pair, the ratio and the gate's verdict (better, same, worse) each binary gave, and the
evaluation's wall time.

    python3 bench/gate_old_new.py OLD_KSEARCH NEW_KSEARCH OUT.json [REPS] [WORKLOAD]
"""

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HEADER = "#include <math.h>\n#include <stdint.h>\n"
ROW = """
static void row(const float *x, float *y, int64_t cols) {
    float m = x[0];
    for (int64_t c = 1; c < cols; c++) if (x[c] > m) m = x[c];
    float s = 0.0f;
    for (int64_t c = 0; c < cols; c++) { y[c] = expf(x[c] - m); s += y[c]; }
    float inv = 1.0f / s;
    for (int64_t c = 0; c < cols; c++) y[c] *= inv;
}
"""
# Work factors: 1 + the share of rows computed twice.
FACTORS = [1.0, 1.05, 1.15, 1.5, 2.0]


def kernel(factor):
    extra = f"for (int64_t r = 0; r < (int64_t)(rows * {factor - 1.0:.3f}); r++) row(x + (r % rows) * cols, y + (r % rows) * cols, cols);" if factor > 1 else ""
    return f"{HEADER}{ROW}\nvoid softmax(const float *restrict x, float *restrict y, int64_t rows, int64_t cols) {{\nfor (int64_t r = 0; r < rows; r++) row(x + r * cols, y + r * cols, cols);\n{extra}\n}}\n"


def evaluate(binary, candidate, against, workload):
    t0 = time.perf_counter()
    p = subprocess.run([binary, "eval", "cpu/softmax", candidate, "--against", against, "--workload", workload, "--json"],
                       capture_output=True, text=True, timeout=600)
    wall = time.perf_counter() - t0
    j = json.loads(p.stdout)
    if j["status"] != "passed":
        raise SystemExit(f"{binary}: {j['status']}: {j['message']}")
    v = j["vs_against"]
    return {"wall_s": wall, "ratio": v["ratio"], "interval": v["interval"], "verdict": v["verdict"]}


def main():
    old, new, out = sys.argv[1:4]
    reps = int(sys.argv[4]) if len(sys.argv) > 4 else 2
    workload = sys.argv[5] if len(sys.argv) > 5 else "small"
    d = tempfile.mkdtemp()
    files = {}
    for f in FACTORS:
        files[f] = os.path.join(d, f"x{f:.2f}.c")
        with open(files[f], "w") as fh:
            fh.write(kernel(f))
    honest = files[1.0]
    raw = []
    for r in range(reps):
        for f in FACTORS:
            for cand, against, label in [(honest, files[f], f"honest vs x{f:.2f}")]:
                order = [("old", old), ("new", new)] if r % 2 == 0 else [("new", new), ("old", old)]
                for name, b in order:
                    e = evaluate(b, cand, against, workload)
                    raw.append({"rep": r, "pair": label, "binary": name, **e})
                    print(f"rep {r + 1} {label:<18} {name}: ratio {e['ratio']:.3f} {e['verdict']} interval {e['interval']} wall {e['wall_s']:.1f} s", flush=True)
    print(f"\n{'pair':<18} {'old verdicts':<28} {'new verdicts':<28} wall old/new (median s)")
    summary = {}
    for f in FACTORS:
        label = f"honest vs x{f:.2f}"
        rows = {b: [x for x in raw if x["pair"] == label and x["binary"] == b] for b in ("old", "new")}
        summary[label] = {b: {"verdicts": [x["verdict"] for x in rows[b]], "ratios": [x["ratio"] for x in rows[b]],
                              "wall_s": statistics.median(x["wall_s"] for x in rows[b])} for b in rows}
        s = summary[label]
        print(f"{label:<18} {' '.join(map(str, s['old']['verdicts'])):<28} {' '.join(map(str, s['new']['verdicts'])):<28} {s['old']['wall_s']:.1f}/{s['new']['wall_s']:.1f}")
    with open(out, "w") as fh:
        json.dump({"workload": workload, "reps": reps, "summary": summary, "raw": raw}, fh, indent=1)


if __name__ == "__main__":
    main()

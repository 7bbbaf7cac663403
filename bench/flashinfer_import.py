"""Import every FlashInfer-Bench Definition in a directory with `ksearch import flashinfer-bench`
(and again with each workloads file `NAME__*.jsonl` beside them, `--workloads`), then check
chosen imported tasks on PyTorch's CPU build: the seed (the definition's own reference)
against the reference, correctness only, on the task's first workload.

    python3 bench/flashinfer_import.py KSEARCH DEFINITIONS_DIR OUT_DIR [EVALUATE]

DEFINITIONS_DIR holds `NAME.json` files (FlashInfer Trace's `definitions/`, flattened) and, in
`workloads/`, `NAME__SOURCE.jsonl` files. EVALUATE is a file naming one definition per line to
evaluate after importing it. One JSON object per import goes to OUT_DIR/results.jsonl; a summary
of the outcomes and of the refusals' reasons is printed.
"""

import json
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path


def first_workload(task):
    prev = ""
    for line in (task / "task.toml").read_text().splitlines():
        if line.startswith("name = ") and "[[workloads]]" in prev:
            return line.split('"')[1]
        prev = line
    return None


def main():
    ksearch, defs, out_dir = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
    chosen = set(Path(sys.argv[4]).read_text().split()) if len(sys.argv) > 4 else set()
    out_dir.mkdir(parents=True, exist_ok=True)
    runs = [(d, None) for d in sorted(defs.glob("*.json"))]
    runs += [(defs / f"{w.name.split('__')[0]}.json", w) for w in sorted((defs / "workloads").glob("*__*.jsonl"))]
    rows = []
    with (out_dir / "results.jsonl").open("w") as log:
        for definition, workloads in runs:
            if not definition.exists():
                continue
            name = definition.stem
            task = out_dir / (workloads.stem if workloads else name)
            cmd = [ksearch, "import", "flashinfer-bench", str(definition), "-o", str(task)]
            if workloads:
                cmd += ["--workloads", str(workloads)]
            p = subprocess.run(cmd, capture_output=True, text=True)
            r = {"definition": name, "workloads": workloads.name if workloads else None,
                 "import": "ok" if p.returncode == 0 else f"exit {p.returncode}"}
            lines = [x for x in p.stderr.splitlines() if x.startswith(("error", "note"))]
            r["said"] = lines
            if p.returncode == 0 and name in chosen and not workloads:
                w = first_workload(task)
                start = time.time()
                e = subprocess.run([ksearch, "eval", str(task), "--target", "cpu", "--no-timing", "--seeds", "1",
                                    "--workload", w, "--json", "--timeout", "600"], capture_output=True, text=True)
                r["eval_s"] = round(time.time() - start, 1)
                try:
                    j = json.loads(e.stdout)
                except ValueError:
                    j = {"error": e.stderr.strip()[-400:]}
                # An evaluation that could not run (the task at fault) is an error object.
                r["eval"] = j.get("status", f"error (exit {e.returncode})")
                r["message"] = j.get("message", j.get("error", ""))[:400]
            log.write(json.dumps(r) + "\n")
            log.flush()
            rows.append(r)
    plain = [r for r in rows if not r["workloads"]]
    print(f"{len(plain)} definitions: " + ", ".join(f"{k} {v}" for k, v in sorted(Counter(r['import'] for r in plain).items())))
    given = [r for r in rows if r["workloads"]]
    print(f"{len(given)} imports with a workloads file: " + ", ".join(f"{k} {v}" for k, v in sorted(Counter(r['import'] for r in given).items())))
    reasons = Counter()
    for r in plain:
        if r["import"] != "ok" and r["said"]:
            err = r["said"][-1]
            field = err.split(": ")[2] if err.count(": ") >= 2 else err
            reasons[field.split(".")[0] + ": " + err.split(": ", 3)[-1][:70]] += 1
    for why, n in reasons.most_common():
        print(f"  refused {n}: {why}")
    for outcome, n in sorted(Counter(r["eval"] for r in rows if "eval" in r).items()):
        print(f"  evaluated {outcome}: {n}")


if __name__ == "__main__":
    main()

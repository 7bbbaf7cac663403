"""Import every problem of a KernelBench checkout with `ksearch import kernelbench`, then check
each imported task on PyTorch's CPU build: its seed (the problem's own `Model` as `ModelNew`)
against its reference, correctness only, on its smallest workload.

    python3 bench/kernelbench_import.py KSEARCH KERNELBENCH_DIR OUT_DIR [MAX_MIB]

KERNELBENCH_DIR holds `level1/`, `level2/`, `level3/` (the `KernelBench/` folder of the
repository). Problems whose smallest workload's inputs and outputs exceed MAX_MIB (default 512)
are imported but not evaluated: this is a CPU check of the importer, not of the problems. One
JSON object per problem goes to OUT_DIR/results.jsonl; a summary is printed.
"""

import json
import math
import subprocess
import sys
import time
import tomllib
from collections import Counter
from pathlib import Path

SIZE = {"f32": 4, "f16": 2, "bf16": 2, "f64": 8, "i64": 8, "i32": 4, "i16": 2, "i8": 1, "bool": 1,
        "f8e4m3": 1, "f8e5m2": 1}


def smallest_workload(task):
    def nbytes(axes):
        return sum(math.prod(axes[a] for a in t["shape"]) * SIZE[t["dtype"]]
                   for t in task["inputs"] + task["outputs"])

    sizes = {w["name"]: nbytes(w["axes"]) for w in task["workloads"]}
    name = min(sizes, key=sizes.get)
    return name, sizes[name]


def main():
    ksearch, problems, out_dir = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
    limit = int(sys.argv[4] if len(sys.argv) > 4 else 512) << 20
    out_dir.mkdir(parents=True, exist_ok=True)
    results = out_dir / "results.jsonl"
    with results.open("w") as log:
        for level in ("level1", "level2", "level3"):
            for problem in sorted((problems / level).glob("*.py")):
                task = out_dir / level / problem.stem
                r = {"level": level, "problem": problem.name}
                p = subprocess.run([ksearch, "import", "kernelbench", str(problem), "-o", str(task)],
                                   capture_output=True, text=True)
                r["import"] = "ok" if p.returncode == 0 else f"exit {p.returncode}"
                if p.returncode != 0:
                    r["message"] = p.stderr.strip()[-600:]
                else:
                    spec = tomllib.loads((task / "task.toml").read_text())
                    workload, nbytes = smallest_workload(spec)
                    r["workload"], r["mib"] = workload, nbytes >> 20
                    if nbytes > limit:
                        r["eval"] = "not run (too large for this check)"
                    else:
                        start = time.time()
                        e = subprocess.run([ksearch, "eval", str(task), "--target", "cpu", "--no-timing",
                                            "--seeds", "1", "--workload", workload, "--json",
                                            "--timeout", "600"], capture_output=True, text=True)
                        r["eval_s"] = round(time.time() - start, 1)
                        try:
                            j = json.loads(e.stdout)
                            r["eval"], r["message"] = j["status"], j["message"][:600]
                        except ValueError:
                            r["eval"], r["message"] = "no result", e.stderr.strip()[-600:]
                log.write(json.dumps(r) + "\n")
                log.flush()
    rows = [json.loads(line) for line in results.open()]
    print(f"{len(rows)} problems")
    for (level, outcome), n in sorted(Counter((r["level"], r["import"]) for r in rows).items()):
        print(f"  {level} import {outcome}: {n}")
    for (level, outcome), n in sorted(Counter((r["level"], r.get("eval", "-")) for r in rows).items()):
        print(f"  {level} eval {outcome}: {n}")


if __name__ == "__main__":
    main()

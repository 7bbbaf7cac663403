"""What the ahead-of-time compiler tests share: one run of `python3 -m ksearch_harness.MODULE` on
modules written from their texts, for a task, answered with one JSON object a module."""

import json
import os
import subprocess
import sys
import tempfile

HARNESS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")


def compile_modules(module, task, sources, shared_limit, keep=None):
    """One JSON object a module; with `keep` (a function), `--keep` is passed and `keep` is called
    with the names of the files written beside the modules before they are deleted."""
    with tempfile.TemporaryDirectory() as d:
        task_file = os.path.join(d, "task.json")
        with open(task_file, "w") as f:
            json.dump(task, f)
        paths = []
        for i, text in enumerate(sources):
            paths.append(os.path.join(d, f"m{i}.py"))
            with open(paths[-1], "w") as f:
                f.write(text)
        out = subprocess.run(
            [sys.executable, "-m", f"ksearch_harness.{module}", "--capability", "9.0", "--shared-limit", str(shared_limit),
             "--task", task_file] + (["--keep"] if keep else []),
            input="\n".join(paths) + "\n", capture_output=True, text=True, cwd=HARNESS, timeout=600,
            env={**os.environ, "PYTHONPATH": HARNESS, "TRITON_CACHE_DIR": os.path.join(d, "triton-cache")})
        if out.returncode != 0:
            raise AssertionError(out.stderr)
        if keep:
            keep({f: open(os.path.join(d, f), "rb").read() for f in os.listdir(d) if f.startswith("m") and not f.endswith(".py")})
        return [json.loads(line) for line in out.stdout.splitlines()]

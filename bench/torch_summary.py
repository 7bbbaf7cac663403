#!/usr/bin/env python3
"""Compact summaries of bench/torch_h200.sh's results, for the few lines a device call shows:

    python3 bench/torch_summary.py evals DIR     one line per `ksearch eval --json` file in DIR
    python3 bench/torch_summary.py faults DIR    the same, against the status each file expects
    python3 bench/torch_summary.py search FILE   the result of `ksearch run/resume --json`

An eval file is DIR/NAME.json (stdout) beside DIR/NAME.err (stderr); for `faults`, NAME is
`<expected status>--<candidate>` (`nogain`: `incorrect`, or passed at most 1.05x over the candidate
it was evaluated `--against`)."""

import json
import pathlib
import sys


def load(path):
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        err = path.with_suffix(".err")
        tail = err.read_text().strip().splitlines()[-2:] if err.exists() else []
        return {"status": "no result", "message": " | ".join(tail)}


def ms(latency):
    return f"{latency['median']:.4g}" if latency else "-"


def eval_line(name, j):
    status = j.get("status", "?")
    head = f"{name:34} {status:13}"
    if status != "passed":
        # The message's first line says where; a traceback's last line says what.
        lines = [l.strip() for l in (j.get("message") or "").splitlines() if l.strip()]
        said = lines[0] if len(lines) < 2 else f"{lines[0]} … {lines[-1]}"
        return f"{head} {said[:300]}"
    speedup = j.get("speedup")
    parts = [f"{speedup:.3f}x over {j.get('baseline')}" if speedup else f"untimed ({j.get('baseline')})"]
    for c in j.get("comparisons") or []:
        parts.append(f"{c['speedup']:.3f}x over {c['label']}")
    for w in j.get("workloads") or []:
        parts.append(f"{w['name']}: {ms(w.get('latency_ms'))} vs {ms(w.get('baseline_latency_ms'))} ms")
    return f"{head} " + "; ".join(parts)


def evals(directory, expect=False):
    files = sorted(pathlib.Path(directory).glob("*.json"))
    ok = 0
    for f in files:
        j = load(f)
        name = f.stem
        if expect:
            wanted, name = name.split("--", 1)
            got = j.get("status")
            if wanted == "nogain":
                # Caught, or timed at no more than 5% over its honest twin (`--against`).
                vs = j.get("speedup_vs_against")
                got = "nogain" if got == "incorrect" or (got == "passed" and vs is not None and vs <= 1.05) else f"{got} {vs}x"
            ok += got == wanted
            print(("ok   " if got == wanted else "FAIL ") + f"(expected {wanted:13}) " + eval_line(name, j))
        else:
            ok += j.get("status") == "passed"
            print(eval_line(name, j))
    print(f"{ok}/{len(files)} {'as expected' if expect else 'passed'}")


def search(path):
    j = load(pathlib.Path(path))
    if "best" not in j:
        print(f"search: {j.get('status')}: {j.get('message')}")
        return
    b = j["best"]
    sp = lambda v: "-" if v is None else f"{v:.3f}x"  # noqa: E731
    print(f"{j['task']} · {j['proposer']} · stop: {j.get('stop_reason')} · rounds {j['rounds']} · "
          f"nodes {j['nodes']} · wall {j['wall_s']:.0f} s (evaluating {j['eval_s']:.0f} s)")
    print(f"best {b['node']} `{b['title']}`: {sp(b.get('speedup'))} over {j['baseline']} "
          f"({sp(b.get('speedup_vs_seed'))} over the seed); latency ms {b.get('latency_ms')}; "
          f"seed ms {j.get('seed_latency_ms')}")


def main():
    step, arg = sys.argv[1], sys.argv[2]
    if step == "evals":
        evals(arg)
    elif step == "faults":
        evals(arg, expect=True)
    elif step == "search":
        search(arg)
    else:
        sys.exit(f"unknown summary {step}")


if __name__ == "__main__":
    main()

"""The evaluation loop: build, check every workload and seed, time, check once more."""

import os
import sys
import time

from . import __version__
from .candidates import CandidateError, CompileError, is_build_failure, load, trimmed_traceback
from .gauntlet import TaskFault, check_seed, make_inputs, merge, call
from .protocol import Channel, end_of_output
from .timing import time_workload


class Outcome(Exception):
    def __init__(self, status, message):
        super().__init__(message)
        self.status = status
        self.message = message


def evaluate(backend, req, channel):
    result = {
        "id": req["id"],
        "status": "passed",
        "message": "",
        "compile": None,
        "workloads": [],
        "phases": {"compile_s": 0.0, "check_s": 0.0, "timing_s": 0.0},
        "output": {"bytes": 0, "head": "", "tail": ""},
    }
    try:
        run_phases(backend, req, channel, result)
        result["message"] = f"passed {len(req['workloads'])} workload(s) × {len(req['check']['seeds'])} seed(s) and a re-check after timing"
    except Outcome as o:
        result["status"] = o.status
        result["message"] = o.message
    if result["compile"] is None:
        result.pop("compile")
    return result


def progress(channel, req, phase, workload=None):
    msg = {"type": "progress", "id": req["id"], "phase": phase}
    if workload is not None:
        msg["workload"] = workload
    channel.send(msg)


def run_phases(backend, req, channel, result):
    task = req["task"]
    tol = req["check"]["tolerances"]
    target = backend.target
    t = time.perf_counter()
    progress(channel, req, "compile")
    try:
        reference = load(req["reference"], target)
        contenders = [(c, load(c["source"], target)) for c in req["compare"]]
    except (CompileError, CandidateError) as e:
        raise TaskFault(f"a trusted module does not load: {e}") from None
    log = ""
    try:
        candidate = load(req["candidate"], target)
        # The first call builds the kernels (JIT): a build failure is a compile error.
        w0 = req["workloads"][0]
        axes = {k: int(v) for k, v in w0["axes"].items()}
        outs = call(candidate, make_inputs(backend, task, w0, req["check"]["recheck_seed"] ^ 0xC0FFEE), axes, len(task["outputs"]), "the candidate")
        backend.sync(outs)
    except CompileError as e:
        log = str(e)
        result["compile"] = compile_report(backend, log, t)
        raise Outcome("compile_error", log.splitlines()[0]) from None
    except CandidateError as e:
        message = str(e)
        if is_build_failure(message):
            result["compile"] = compile_report(backend, message, t)
            raise Outcome("compile_error", "the kernel does not build: " + message.splitlines()[-1]) from None
        raise Outcome("runtime_error", message) from None
    except Exception:  # noqa: BLE001 - e.g. evaluation of a faulting kernel
        message = trimmed_traceback()
        if is_build_failure(message):
            result["compile"] = compile_report(backend, message, t)
            raise Outcome("compile_error", "the kernel does not build: " + message.splitlines()[-1]) from None
        raise Outcome("runtime_error", message) from None
    result["compile"] = compile_report(backend, log, t)
    result["phases"]["compile_s"] = time.perf_counter() - t

    t = time.perf_counter()
    for w in req["workloads"]:
        progress(channel, req, "check", w["name"])
        worst = None
        for seed in req["check"]["seeds"]:
            errors, failure = guarded_check(backend, task, tol, w, seed, reference, candidate)
            worst = merge(worst, errors)
            if failure:
                result["phases"]["check_s"] = time.perf_counter() - t
                result["workloads"].append({"name": w["name"], "status": "incorrect", "message": failure, "errors": worst})
                raise Outcome("incorrect", f"workload `{w['name']}`, seed {seed}: {failure}")
        result["workloads"].append({"name": w["name"], "status": "passed", "errors": worst})
    result["phases"]["check_s"] = time.perf_counter() - t

    plan = req.get("timing")
    if plan:
        t = time.perf_counter()
        seed = req["check"]["recheck_seed"] ^ 0x7143D00D
        for w, report in zip(req["workloads"], result["workloads"]):
            progress(channel, req, "timing", w["name"])
            runs = [candidate] + [run for _, run in contenders]
            try:
                stats = time_workload(backend, task, w, plan, seed, runs)
            except CandidateError as e:
                raise Outcome("runtime_error", f"while timing: {e}") from None
            labels = [("candidate", req["candidate"]["file"])] + [(c["role"], c["label"]) for c, _ in contenders]
            report["timings"] = [{"role": r, "label": l, "stats": s} for (r, l), s in zip(labels, stats)]
        result["phases"]["timing_s"] = time.perf_counter() - t

    t = time.perf_counter()
    for w, report in zip(req["workloads"], result["workloads"]):
        progress(channel, req, "recheck", w["name"])
        errors, failure = guarded_check(backend, task, tol, w, req["check"]["recheck_seed"], reference, candidate)
        report["errors"] = merge(report["errors"], errors)
        if failure:
            report["status"] = "incorrect"
            report["message"] = f"after timing: {failure}"
            result["phases"]["check_s"] += time.perf_counter() - t
            raise Outcome("incorrect", f"workload `{w['name']}`, re-check on fresh inputs after timing: {failure}")
    result["phases"]["check_s"] += time.perf_counter() - t


def guarded_check(backend, task, tol, w, seed, reference, candidate):
    try:
        return check_seed(backend, task, tol, w, seed, reference, candidate)
    except CandidateError as e:
        raise Outcome("runtime_error", f"workload `{w['name']}`, seed {seed}: {e}") from None


def compile_report(backend, log, started):
    return {
        "command": f"python {sys.version.split()[0]}, {backend.describe()} (kernels JIT-compiled on first call)",
        "compiler": backend.describe(),
        "seconds": time.perf_counter() - started,
        "log": log[:8000],
    }


def serve(target):
    channel = Channel.from_env()
    from .arrays import backend_for

    backend = backend_for(target)
    channel.send({"type": "hello", "backend": f"mlx/{backend.target}", "version": __version__, "pid": os.getpid()})
    for msg in channel.requests():
        kind = msg.get("type")
        if kind == "shutdown":
            break
        if kind != "evaluate":
            channel.send({"type": "error", "message": f"unknown request type {kind!r}"})
            continue
        try:
            reply = {"type": "result", **evaluate(backend, msg, channel)}
        except TaskFault as e:
            reply = {"type": "error", "id": msg.get("id"), "message": str(e)}
        except Exception:  # noqa: BLE001 - a bug in the harness: report it, keep serving
            reply = {"type": "error", "id": msg.get("id"), "message": f"the harness failed:\n{trimmed_traceback(30)}"}
        end_of_output(msg.get("id"))
        channel.send(reply)

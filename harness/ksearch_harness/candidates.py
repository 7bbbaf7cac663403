"""Loading candidate, reference and baseline modules from source text, inside this worker only."""

import linecache
import re
import traceback


class CompileError(Exception):
    """The source does not compile (Python syntax, or the kernel's JIT compilation)."""


class CandidateError(Exception):
    """The source compiled but failed when run or loaded."""


class BadAnswer(CandidateError):
    """What `run` returned is no answer (not arrays, or arrays a graph cannot hold): the
    candidate's answer is wrong (`incorrect`), however the harness came to see it."""


_counter = [0]

# Messages MLX raises when a custom kernel's source fails to build (nvrtc on CUDA, the Metal
# compiler on Apple GPUs).
_BUILD_FAILURE = re.compile(r"nvrtc|compil|unable to build metal library|failed to build", re.IGNORECASE)


def load_module(source, target):
    """Execute a module from `{"file", "text"}` and return its `run`."""
    return module_run(load_namespace(source, target), source["file"])


def module_run(ns, filename):
    """The `run` a loaded module defines."""
    run = ns.get("run")
    if not callable(run):
        raise CandidateError(f"{filename} defines no `run` function (the contract: `def run(*inputs, **axes)`)")
    return run


def load_namespace(source, target, device=None):
    """Execute a module from `{"file", "text"}` and return its globals. It sees `KSEARCH_TARGET`
    and, on the torch backend, `KSEARCH_DEVICE`."""
    _counter[0] += 1
    filename = source["file"]
    try:
        code = compile(source["text"], filename, "exec")
    except SyntaxError as e:
        raise CompileError(f"{filename}:{e.lineno}:{e.offset or 0}: {e.msg}\n{(e.text or '').rstrip()}") from None
    # Where `inspect.getsource` finds the text (Triton's `@triton.jit` reads its kernels' source).
    linecache.cache[filename] = (len(source["text"]), None, source["text"].splitlines(True), filename)
    ns = {"__name__": f"ksearch_module_{_counter[0]}", "__file__": filename, "KSEARCH_TARGET": target}
    if device is not None:
        ns["KSEARCH_DEVICE"] = device
    try:
        exec(code, ns)  # noqa: S102 - running candidate code is this process's purpose
    except Exception:  # noqa: BLE001 - any failure of candidate code is an outcome
        raise CandidateError(f"importing {filename} raised:\n{trimmed_traceback()}") from None
    return ns


def describe_itself(ns, filename):
    """What a task's own module (a baseline, a comparison) says it runs: the string its
    `ksearch_describe()` returns (the library and version, the path it takes on this device), or
    None where it defines none. Only trusted modules are asked: a candidate's word is not shown."""
    describe = ns.get("ksearch_describe")
    if not callable(describe):
        return None
    try:
        text = describe()
    except Exception:  # noqa: BLE001 - a task's own code; its failure is said instead
        return f"(ksearch_describe() in {filename} raised: {trimmed_traceback(2).splitlines()[-1]})"
    return text if isinstance(text, str) else repr(text)


def trimmed_traceback(limit=12):
    lines = traceback.format_exc().rstrip().splitlines()
    # Keep the frames of candidate code, not the harness's own.
    kept = [l for l in lines if "ksearch_harness" not in l]
    return "\n".join(kept[-limit * 2:])


def is_build_failure(message):
    return bool(_BUILD_FAILURE.search(message))

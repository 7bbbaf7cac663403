"""MLX's cache of the kernels it compiles at run time (PTX on CUDA, `MLX_PTX_CACHE_DIR`), kept
between evaluations, and what each process of an evaluation sees of it.

Each runner is a fresh process: without a cache kept on disk it compiled the same kernels again,
a few seconds each. MLX names an entry by what it compiles: its own kernels by operation and
types (`gather_…`), a module's `cuda_kernel`s by the name the module gives them, their template
arguments and a hash of their source (`custom_kernel_<name><arguments>_<hash>`), a hash anyone
can compute. Hence three rules:

- MLX's own kernels live in one shared directory per MLX version and device, written by the
  judge only: by its own MLX, and with what trusted executors compiled.
- A module's own kernels (`custom_kernel_…`) live in a directory per module text and trust: a
  candidate's entries are never read for another module (it could name one of a trusted
  module's kernels and plant code under that name), nor a trusted module's for a candidate.
- An executor writes nothing on disk. MLX writes into a directory in its private temporary
  directory that holds links to what it may read (`private_view`); at the end of an evaluation
  the judge asks it for what it compiled (`compiled`) and files it (`keep`), bounded in count
  and size, a candidate's only in that candidate's own directory.

MLX looks a `cuda_kernel` up in that directory like any other module, but writes only its own
kernels there: on CUDA, executors load `nvrtc_keep.c` (built by the judge, `keeper`), which writes
the code NVRTC made for a `custom_kernel_…` module where MLX would read it.
"""

import hashlib
import os
import re
import shlex
import shutil
import subprocess
import tempfile

MODULE_PREFIX = "custom_kernel_"
# What an executor may hand back at the end of one evaluation.
MAX_FILES = 64
MAX_BYTES = 32 << 20
# Module directories kept: the least recently used go first.
MAX_MODULES = 512
NAME = re.compile(r"[A-Za-z0-9_.+-]{1,200}")
# The environment an executor finds its directories in.
SHARED_VAR = "KSEARCH_KERNELS_SHARED"
MODULE_VAR = "KSEARCH_KERNELS_MODULE"
KEEPER_SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "nvrtc_keep.c")
# The keeper built for each shared directory (None where it could not be built).
KEEPERS = {}


def shared_dir(arrays):
    """The shared directory of MLX's own kernels, for this MLX version and device, set as this
    process's cache (the judge's); None for numpy, or where no such directory can be made."""
    if arrays.name != "mlx":
        return None
    mx = arrays.mx
    try:
        info = mx.device_info()
    except Exception:  # noqa: BLE001 - an MLX without device_info
        info = {}
    key = "-".join(str(x) for x in (mx.__version__, arrays.target, info.get("device_name", ""), info.get("architecture", "")))
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    path = os.path.join(base, "ksearch", "mlx-kernels", re.sub(r"[^A-Za-z0-9._-]+", "_", key))
    # MLX keeps PTX; the CUDA driver turns it into machine code when a process loads it and
    # keeps that in its own cache (named by the code's hash), by default under $HOME, which is a
    # fresh temporary directory in every runner. Its cache lives beside MLX's: written by the
    # judge and trusted runners, read by the others.
    driver = os.path.join(path, "cuda-driver")
    try:
        for d in (path, driver):
            os.makedirs(d, mode=0o755, exist_ok=True)
        if os.geteuid() == 0:
            # Run as root, the sandbox runs programs as uid 65534: let trusted runners write.
            os.chown(driver, 65534, 65534)
    except OSError:
        return None
    # Set before MLX compiles anything here; runners inherit MLX_* and CUDA_* variables.
    os.environ["MLX_PTX_CACHE_DIR"] = path
    if arrays.target == "cuda":
        os.environ["CUDA_CACHE_PATH"] = driver
        KEEPERS[path] = keeper(path)
    return path


def keeper(shared, compiler=None):
    """`nvrtc_keep.c` built into the shared directory (once per text of it), or None where no C
    compiler builds it: executors then compile a module's kernels in every evaluation."""
    with open(KEEPER_SOURCE, "rb") as f:
        text = f.read()
    path = os.path.join(shared, f"nvrtc-keep-{hashlib.sha256(text).hexdigest()[:16]}.so")
    if os.path.isfile(path):
        return path
    cc = shlex.split(compiler or os.environ.get("CC") or "") or [shutil.which("cc") or shutil.which("gcc") or ""]
    if not cc[0]:
        return None
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        done = subprocess.run([*cc, "-O2", "-shared", "-fPIC", "-o", tmp, KEEPER_SOURCE, "-ldl"],
                              stdin=subprocess.DEVNULL, capture_output=True, timeout=120)
        if done.returncode != 0:
            return None
        os.chmod(tmp, 0o755)
        os.replace(tmp, path)
    except (OSError, subprocess.SubprocessError):
        return None
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return path


def module_dir(shared, source, trusted):
    """The directory of one module's own kernels (made if need be), or None."""
    if shared is None:
        return None
    h = hashlib.sha256()
    for part in ("trusted" if trusted else "untrusted", source["file"], source["text"]):
        h.update(part.encode("utf-8", "surrogatepass"))
        h.update(b"\0")
    root = shared + "-modules"
    path = os.path.join(root, h.hexdigest()[:32])
    try:
        if not os.path.isdir(path):
            _prune(root)
            os.makedirs(path, mode=0o755, exist_ok=True)
        os.utime(path)
    except OSError:
        return None
    return path


def _prune(root):
    try:
        dirs = [os.path.join(root, d) for d in os.listdir(root)]
    except OSError:
        return
    if len(dirs) < MAX_MODULES:
        return
    dirs.sort(key=lambda d: os.stat(d).st_mtime if os.path.exists(d) else 0)
    for d in dirs[: len(dirs) - MAX_MODULES + 1]:
        for f in os.listdir(d) if os.path.isdir(d) else []:
            try:
                os.unlink(os.path.join(d, f))
            except OSError:
                pass
        try:
            os.rmdir(d)
        except OSError:
            pass


def executor_env(shared, module):
    env = {SHARED_VAR: shared or "", MODULE_VAR: module or ""}
    if KEEPERS.get(shared):
        env["LD_PRELOAD"] = KEEPERS[shared]
    return env


def private_view(environ=os.environ):
    """In an executor, before MLX compiles anything: a directory of its own for MLX's cache,
    holding links to MLX's own shared kernels and to this module's, or None without a cache."""
    shared, module = environ.get(SHARED_VAR), environ.get(MODULE_VAR)
    if not shared:
        return None
    view = tempfile.mkdtemp(prefix="kernels-")
    for d, own in ((shared, False), (module, True)):
        if not d:
            continue
        try:
            names = os.listdir(d)
        except OSError:
            continue
        for name in names:
            if name.startswith(MODULE_PREFIX) == own and NAME.fullmatch(name) and os.path.isfile(os.path.join(d, name)):
                try:
                    os.symlink(os.path.join(d, name), os.path.join(view, name))
                except OSError:
                    pass
    os.environ["MLX_PTX_CACHE_DIR"] = view
    return view


def compiled(view):
    """What MLX compiled into `view` (files, not links), within the bounds: [(name, bytes)]."""
    if view is None:
        return []
    out, total = [], 0
    for name in sorted(os.listdir(view)):
        path = os.path.join(view, name)
        if os.path.islink(path) or not os.path.isfile(path) or not NAME.fullmatch(name):
            continue
        size = os.path.getsize(path)
        if len(out) == MAX_FILES or total + size > MAX_BYTES:
            break
        with open(path, "rb") as f:
            out.append((name, f.read()))
        total += size
    return out


def keep(shared, module, trusted, files):
    """File what an executor compiled: a module's own kernels in its directory, MLX's own in the
    shared one when the executor was trusted (a candidate's are not kept). An entry already
    there is left as it is. Returns how many were kept."""
    if shared is None or len(files) > MAX_FILES or sum(len(b) for _, b in files) > MAX_BYTES:
        return 0
    kept = 0
    # A module's code file last: MLX takes it for a cached module, and reads the names beside it.
    for name, data in sorted(files, key=lambda f: f[0].endswith(".ptx")):
        if not NAME.fullmatch(name) or name.startswith("."):
            continue
        d = module if name.startswith(MODULE_PREFIX) else (shared if trusted else None)
        if d is None or os.path.exists(os.path.join(d, name)):
            continue
        try:
            fd, tmp = tempfile.mkstemp(dir=d, prefix=".new-")
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.chmod(tmp, 0o644)
            os.replace(tmp, os.path.join(d, name))
            kept += 1
        except OSError:
            pass
    return kept

"""The judge's link to a runner: framed messages on a Unix socket (a JSON header, then an
optional binary payload, with descriptors attached when needed), and starting a runner in a
sandbox through the ksearch binary's launcher (`ksearch sandbox SPEC`).

Everything a runner sends is hostile data: headers are size-limited JSON, payloads are
size-checked against what the request asked for before they are read, descriptors it attaches
are closed at once, and a runner whose message the judge cannot read is killed."""

import array
import json
import os
import select
import signal
import socket
import struct
import subprocess
import sys
import time

# A runner's header: a few fields, and a message or description of at most MAX_MESSAGE
# characters (up to 12 bytes each, escaped in JSON).
MAX_HEADER = 1 << 17
MAX_MESSAGE = 8000
# The judge's requests carry a module's source (at most 512 KiB, escaped in JSON).
MAX_REQUEST_HEADER = 1 << 23
MAX_PAYLOAD = 1 << 34
# The largest file a runner may write (RLIMIT_FSIZE), and a tracer's, whose graphs are files it
# wrote: what it may send the judge is bounded by that.
FILE_BYTES = 1 << 30
TRACER_FILE_BYTES = 64 << 20
# Ancillary data the judge accepts on a clock socket: its kernel timestamp, nothing else.
CLOCK_ANCILLARY = socket.CMSG_SPACE(16)
# Descriptors that do arrive are closed before anything could inherit them.
CMSG_CLOEXEC = getattr(socket, "MSG_CMSG_CLOEXEC", 0)
SANDBOX_EXE_VAR = "KSEARCH_SANDBOX_EXE"
# The kernel stamps each message on a clock socket with the time it was sent (Linux).
SO_TIMESTAMPNS = 35
# A runner answers "done" right after its clock byte. An answer that comes later than this (or
# than LATE_REPLY_SHARE of the batch) means work went on after the clock stopped, which a
# candidate sharing the runner's interpreter can arrange (it can send the byte early, or leave
# one queued for the next batch): the batch then counts up to the answer.
LATE_REPLY_S = 200e-6
LATE_REPLY_SHARE = 0.02
# Variables a runner may inherit from the judge (whose environment ksearch already scrubbed).
PASS_ENV = ("PATH", "LD_LIBRARY_PATH", "PYTHONPATH", "LANG", "LC_ALL")
PASS_ENV_PREFIXES = ("CUDA_", "NVIDIA_", "MLX_", "OMP_", "OPENBLAS_")


class RunnerLost(Exception):
    """The runner died, hung up, or broke the protocol."""

    def __init__(self, message, signalled=False, exited=False):
        super().__init__(message)
        self.message = message
        self.signalled = signalled
        # It ended on its own, with a status (not killed, not stopped by the judge).
        self.exited = exited


def close_passed(anc, flags=0):
    """Close every descriptor in the ancillary data `anc` at once; whether any came (or more
    than fit: MSG_CTRUNC)."""
    passed = bool(flags & socket.MSG_CTRUNC)
    for level, kind, data in anc:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            passed = True
            fds = array.array("i")
            fds.frombytes(data[:len(data) - len(data) % fds.itemsize])
            for fd in fds:
                try:
                    os.close(fd)
                except OSError:
                    pass
    return passed


def _recv_exact(sock, n):
    """`n` bytes read straight into one buffer (a payload is not copied again), or None when the
    peer is gone. Read without room for ancillary data, descriptors sent along are discarded by
    the kernel, never installed here, and it says so (MSG_CTRUNC): that is refused."""
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        k, anc, flags, _ = sock.recvmsg_into([view[got:]], 0)
        if anc or flags & socket.MSG_CTRUNC:
            close_passed(anc)
            raise ValueError("it sent file descriptors")
        if not k:
            return None
        got += k
    return buf


def send(sock, header, payload=b"", fds=()):
    head = json.dumps({**header, "payload": len(payload)}, separators=(",", ":")).encode()
    frame = struct.pack("<I", len(head)) + head
    if fds:
        socket.send_fds(sock, [frame], list(fds))
    else:
        sock.sendall(frame)
    if payload:
        sock.sendall(payload)


def recv(sock, with_fds=False, max_header=MAX_HEADER, max_payload=0):
    """`(header, payload, fds)`, or None when the peer is gone. The header is a JSON object with
    a string `op`, of at most `max_header` bytes; a payload longer than `max_payload` is refused
    before it is read. Without `with_fds`, descriptors sent along are refused."""
    fds = []
    if with_fds:
        data, fds, _, _ = socket.recv_fds(sock, 4, 8)
        if not data:
            return None
        if len(data) < 4:
            rest = _recv_exact(sock, 4 - len(data))
            if rest is None:
                return None
            data += rest
        length = struct.unpack("<I", data[:4])[0]
        extra = data[4:]
    else:
        raw = _recv_exact(sock, 4)
        if raw is None:
            return None
        length = struct.unpack("<I", raw)[0]
        extra = b""
    if length > max_header:
        raise ValueError(f"a header of {length} bytes")
    rest = _recv_exact(sock, length - len(extra)) if length > len(extra) else b""
    if rest is None:
        return None
    header = json.loads((extra + rest).decode())
    if not isinstance(header, dict):
        raise ValueError("a header that is not an object")
    if not isinstance(header.get("op"), str):
        raise ValueError("a message without an `op`")
    n = header.get("payload", 0)
    if type(n) is not int or n < 0 or n > max_payload:
        raise ValueError(f"a payload of {n!r} bytes where at most {max_payload} were asked for")
    payload = _recv_exact(sock, n) if n else b""
    if payload is None:
        return None
    return header, payload, fds


def check_reply(header):
    """The fields the judge reads from any reply: an error's message, a module's description."""
    if header["op"] in ("error", "bad_output", "compile_error") and not isinstance(header.get("message"), str):
        raise ValueError(f"an `{header['op']}` answer without a message")
    if not isinstance(header.get("description", ""), (str, type(None))):
        raise ValueError("a description that is not a string")


def python_paths():
    """What this interpreter needs to run, to expose read-only in a sandbox: its installation,
    its site directories and this package. Not the judge's working directory (nor a directory
    holding it), where its own files are: `-m` puts it first on sys.path, and a relative
    PYTHONPATH entry names it too."""
    paths = {sys.prefix, sys.base_prefix, sys.exec_prefix, os.path.abspath(sys.executable),
             os.path.dirname(os.path.realpath(sys.executable))}
    paths.update(p for p in sys.path if p and os.path.isabs(p))
    for p in os.environ.get("PYTHONPATH", "").split(os.pathsep):
        if p and os.path.isabs(p):
            paths.add(p)
    cwd = os.path.join(os.path.realpath(os.getcwd()), "")
    paths = {p for p in paths if os.path.exists(p) and not cwd.startswith(os.path.join(os.path.realpath(p), ""))}
    paths.add(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    return sorted(paths)


def runner_env(extra=None):
    env = {k: v for k, v in os.environ.items() if k in PASS_ENV or k.startswith(PASS_ENV_PREFIXES)}
    # MLX's CUDA backend records a batch's operations into CUDA graphs whose only edges are data
    # dependencies, so the independent calls of a timed batch would run side by side: a kernel
    # that fills a tenth of the GPU would be timed at a tenth of the time a model, whose layers
    # wait on each other, sees. Without graphs every launch goes to one stream, in order. The
    # judge's own setting, where it has one, passes through (to compare the two).
    env.setdefault("MLX_USE_CUDA_GRAPHS", "0")
    # The runner imports this package from where the judge found it.
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    paths = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    env["PYTHONPATH"] = os.pathsep.join([here] + [p for p in paths if p != here])
    # USER: the sandbox's uid has no passwd entry, and getpass (torch.compile's cache) asks.
    env.update({"HOME": "/tmp", "TMPDIR": "/tmp", "PYTHONUNBUFFERED": "1", "PYTHONDONTWRITEBYTECODE": "1",
                "USER": "ksearch", "LOGNAME": "ksearch"})
    env.update(extra or {})
    return env


class Runner:
    """A runner process in a sandbox, and the socket to it."""

    def __init__(self, mode, target, root_dir, gpu, memory_bytes, cpu=None, env=None, read_only=(), writable=(), allow_fork=False,
                 file_bytes=FILE_BYTES, cpus=()):
        exe = os.environ.get(SANDBOX_EXE_VAR)
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        # A second pair carries only "done" after a timed batch: its kernel timestamp stops the
        # judge's clock, so the judge's own scheduling does not count.
        self.clock, clock_theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            self.clock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
            self.stamped = True
        except OSError:
            self.stamped = False
        args = ["-m", "ksearch_harness.runner", mode, "--target", target, "--fd", str(theirs.fileno()),
                "--clock-fd", str(clock_theirs.fileno())]
        self.confinement = None
        self.pid = None
        self.sock = ours
        if exe:
            spec = {
                # The interpreter as invoked (a virtual environment's is a link whose
                # pyvenv.cfg sits beside it), not the file it links to.
                "program": os.path.abspath(sys.executable),
                "args": args,
                "env": sorted(runner_env(env).items()),
                "cwd": "/tmp",
                "root_dir": root_dir,
                "read_only": python_paths() + list(read_only),
                "writable": list(writable),
                "tmp_bytes": 1 << 30,
                "gpu": gpu,
                "allow_fork": allow_fork,
                "cpu": cpu,
                # Where `cpu` is None: these CPUs rather than the judge's (empty: inherited).
                "cpus": list(cpus),
                "limits": {"memory_bytes": memory_bytes, "cpu_seconds": 24 * 3600, "file_bytes": file_bytes,
                           "processes": 1 << 16, "open_files": 4096},
                "keep_fds": [],
                "report_fd": 0,
                "no_namespaces": os.environ.get("KSEARCH_SANDBOX_NO_NAMESPACES") == "1",
            }
            r, w = os.pipe()
            spec["keep_fds"] = [theirs.fileno(), clock_theirs.fileno()]
            spec["report_fd"] = w
            self.proc = subprocess.Popen(
                [exe, "sandbox", json.dumps(spec)],
                stdin=subprocess.DEVNULL,
                env={"PATH": "/usr/local/bin:/usr/bin:/bin"},
                pass_fds=[theirs.fileno(), clock_theirs.fileno(), w],
            )
            os.close(w)
            theirs.close()
            clock_theirs.close()
            with os.fdopen(r, "r") as report:
                for line in report:
                    try:
                        msg = json.loads(line)
                    except ValueError:
                        continue
                    if "pid" in msg:
                        self.pid = msg["pid"]
                    elif "ready" in msg:
                        self.confinement = msg["ready"]
                    elif "failed" in msg:
                        self.kill()
                        raise RunnerLost(f"the sandbox could not be set up: {msg['failed']}")
            if self.confinement is None:
                self.kill()
                raise RunnerLost(f"the sandbox launcher stopped before the runner started ({self.proc.wait()})")
        else:
            # Without the launcher (the harness's own unit tests): a plain child process.
            env2 = dict(os.environ)
            env2.update(runner_env(env))
            self.proc = subprocess.Popen(
                [sys.executable] + args,
                stdin=subprocess.DEVNULL,
                env=env2,
                pass_fds=[theirs.fileno(), clock_theirs.fileno()],
                start_new_session=True,
            )
            theirs.close()
            clock_theirs.close()
            self.pid = self.proc.pid
            self.confinement = {"user_namespace": False, "pid_namespace": False, "network_namespace": False,
                                "private_root": False, "seccomp": False, "uid": os.getuid(),
                                "missing": ["started without the sandbox launcher (KSEARCH_SANDBOX_EXE unset)"]}
        self.lost = None
        # The runner's hello is read with its first answer, so that starting several runners
        # overlaps their interpreters' start-up.
        self.greeted = False
        self.paused = False
        self.stopped = set()
        # A runner that runs candidate code on the CPU (numpy, torch's CPU target) is charged,
        # in its next timed batch, the CPU it used while it owed the judge no answer (`timed`):
        # its CPU clock when its last answer arrived.
        self.charged = mode in ("direct", "torch") and not gpu
        self.answered_cpu = None
        self.allow_fork = allow_fork

    def process_cpu(self):
        """The runner's process CPU clock in seconds (every thread, live or gone), or None."""
        return process_cpu(self.pid) if self.lost is None else None

    def descendants(self):
        """Live processes the runner started (and theirs), as `(pid, name)`: its children and
        theirs, found through each thread's `children` list. In its own PID namespace the
        runner is the namespace's first process, so every process of the namespace is among
        them, a `setsid` daemon included (an orphan there is the runner's child). Zombies are
        left out: an ended process runs nothing."""
        if self.pid is None or self.lost is not None:
            return []
        if not os.path.exists(f"/proc/{self.pid}/task/{self.pid}/children"):
            # A kernel without the children lists (CONFIG_PROC_CHILDREN): in its own PID
            # namespace every process but the runner, else none can be found.
            ns = self._own_namespace()
            others = _namespace_members(ns) - {self.pid} if ns is not None else set()
            return [(p, name) for p in sorted(others) for state, name in [_state_and_name(p)] if state is not None and state not in "ZX"]
        found, todo = [], [self.pid]
        while todo:
            pid = todo.pop()
            try:
                tasks = os.listdir(f"/proc/{pid}/task")
            except OSError:
                continue
            for tid in tasks:
                try:
                    with open(f"/proc/{pid}/task/{tid}/children") as f:
                        kids = [int(k) for k in f.read().split()]
                except (OSError, ValueError):
                    continue
                for k in kids:
                    state, name = _state_and_name(k)
                    if state is not None and state not in "ZX":
                        found.append((k, name))
                    todo.append(k)
        return found

    def cpu_time(self):
        """`(seconds, precise)`: CPU time the runner has used (Linux), or None. Precise means the
        scheduler's nanoseconds over the live threads; otherwise clock ticks."""
        try:
            with open(f"/proc/{self.pid}/stat") as f:
                fields = f.read().rsplit(") ", 1)[1].split()
            ticks = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        except (OSError, ValueError, IndexError):
            return None
        ns = 0
        try:
            for t in os.listdir(f"/proc/{self.pid}/task"):
                with open(f"/proc/{self.pid}/task/{t}/schedstat") as f:
                    ns += int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            ns = 0
        if ns > 0:
            return max(ns * 1e-9, ticks), True
        return ticks, False

    def pause(self):
        """Stops the runner and every process it started (SIGSTOP) until the judge next sends
        it something or waits for its answer: while another contender is timed, a paused runner
        can neither use the CPU nor start GPU work. That is the runner's process group and, in
        its own PID namespace, every process of that namespace (a `setsid` daemon leaves the
        group, not the namespace); gone over until no new one turns up, since a process stopped
        cannot start another. False where the judge may not signal it (then it runs on)."""
        if self.paused:
            return True
        if self.lost is not None or self.pid is None:
            return False
        # The runner itself first: it may have left the process group (`setsid`).
        try:
            os.kill(self.pid, signal.SIGSTOP)
        except OSError:
            return False
        try:
            os.killpg(self.proc.pid, signal.SIGSTOP)
        except OSError:
            pass
        self.paused = True
        self.stopped = set()
        ns = self._own_namespace()
        if ns is not None:
            for _ in range(4):
                found = {p for p in _namespace_members(ns) if p not in self.stopped}
                if not found:
                    break
                for p in found:
                    try:
                        os.kill(p, signal.SIGSTOP)
                    except OSError:
                        pass
                self.stopped |= found
        return True

    def _own_namespace(self):
        """The runner's PID namespace where it has one of its own (not the judge's), else None."""
        if not (self.confinement or {}).get("pid_namespace"):
            return None
        try:
            ns = os.readlink(f"/proc/{self.pid}/ns/pid")
            return ns if ns != os.readlink("/proc/self/ns/pid") else None
        except OSError:
            return None

    def _resume(self):
        if self.paused:
            self.paused = False
            try:
                os.killpg(self.proc.pid, signal.SIGCONT)
            except OSError:
                pass
            for p in [self.pid, *self.stopped]:
                try:
                    os.kill(p, signal.SIGCONT)
                except OSError:
                    pass
            self.stopped = set()

    def lose(self, why):
        if self.lost is not None:
            return self.lost
        try:
            code = self.proc.wait(timeout=0.5)
        except subprocess.TimeoutExpired:
            self.kill()
            code = None
        if code is None:
            lost = RunnerLost(f"stopped answering ({why}) and was killed")
        elif code < 0 or code > 128:
            sig = -code if code < 0 else code - 128
            lost = RunnerLost(f"was killed by {signal_name(sig)}", signalled=True)
        else:
            lost = RunnerLost(f"exited with status {code}", exited=True)
        self.lost = lost
        return lost

    def send(self, header, payload=b"", fds=()):
        if self.lost is not None:
            raise self.lost
        self._resume()
        # A runner answers once per request, so nothing waits when the judge turns to it again;
        # something that does was sent out of turn (a "done" forged early in a batch by candidate
        # code, whose real one followed, a step behind every answer after it).
        if self.greeted:
            try:
                waiting = self.sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT)
            except (BlockingIOError, InterruptedError):
                waiting = None
            except OSError:
                waiting = b""
            if waiting:
                raise self.broke("it sent a message nobody asked for")
        try:
            send(self.sock, header, payload, fds)
        except OSError as e:
            raise self.lose(f"its socket closed: {e}") from None

    def broke(self, why):
        """The runner sent what the judge cannot read: it is stopped, and lost."""
        if self.lost is None:
            self.kill()
            self.lost = RunnerLost(f"broke the protocol ({why}) and was stopped")
        return self.lost

    def receive(self, timeout=None, max_payload=0):
        """The runner's next answer, `(header, payload)`, with a payload of at most `max_payload`
        bytes (what the request asked for)."""
        if not self.greeted:
            self.greeted = True
            hello = self.receive(timeout)
            if hello[0]["op"] != "hello":
                raise self.broke(f"it began with {hello[0]['op']!r}")
        if self.lost is not None:
            raise self.lost
        self._resume()
        if timeout is not None:
            ready, _, _ = select.select([self.sock], [], [], timeout)
            if not ready:
                raise self.lose("no answer in time")
        try:
            got = recv(self.sock, max_payload=max_payload)
            if got is not None:
                check_reply(got[0])
        except Exception as e:  # noqa: BLE001 - hostile data: deep JSON's RecursionError, a bad encoding, ...
            raise self.broke(str(e) or type(e).__name__) from None
        if got is None:
            raise self.lose("its socket closed")
        if self.charged:
            self.answered_cpu = process_cpu(self.pid)
        return got[0], got[1]

    def request(self, header, payload=b"", fds=(), max_payload=0):
        self.send(header, payload, fds)
        return self.receive(max_payload=max_payload)

    def _clock(self, flags=0):
        """One message from the clock socket: `(data, ancillary data)`. Descriptors sent with it
        are closed at once, and break the protocol."""
        data, anc, got, _ = self.clock.recvmsg(16, CLOCK_ANCILLARY, flags | CMSG_CLOEXEC)
        if close_passed(anc, got):
            raise self.broke("it sent file descriptors with its clock byte")
        return data, anc

    def timed(self, header):
        """Send `header` (a timed batch) and wait for the answer. The seconds from the send to
        the kernel's stamp of the runner's "done" on the clock socket (or, without stamps, to
        its arrival here); to the answer's arrival when the answer comes late."""
        # A paused runner is continued before the clock starts: waking a stopped process (a
        # CUDA process's driver threads among it) is the judge's cost, not the batch's, and a
        # trusted baseline, never paused, would not pay it.
        self._resume()
        # Clock bytes left over from an earlier batch say nothing about this one.
        while True:
            try:
                if not self._clock(socket.MSG_DONTWAIT)[0]:
                    break
            except OSError:
                break
        # What the runner did while it owed no answer (since its last one: after its previous
        # "done", while the judge read its outputs, while others were timed, before this batch)
        # is this batch's: the clock starts before the batch is sent, so nothing a runner does
        # after hearing of a batch lies outside it, and whatever it did before counts in it.
        charge = 0.0
        if self.charged and self.answered_cpu is not None:
            now = process_cpu(self.pid)
            if now is not None:
                charge = max(0.0, now - self.answered_cpu)
        t0 = time.time_ns()
        p0 = time.perf_counter()
        self.send(header)
        stamp = None
        try:
            data, anc = self._clock()
        except OSError:
            data, anc = b"", []
        arrived = time.perf_counter()
        if data:
            for level, kind, raw in anc:
                if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS and len(raw) >= 16:
                    sec, nsec = struct.unpack("qq", raw[:16])
                    stamp = sec * 1_000_000_000 + nsec
        reply, payload = self.receive()
        replied = time.perf_counter()
        if stamp is not None and stamp > t0:
            seconds = (stamp - t0) / 1e9
        else:
            seconds = arrived - p0
        if replied - arrived > max(LATE_REPLY_S, LATE_REPLY_SHARE * seconds):
            seconds = replied - p0
        self.charge = charge
        return seconds + charge, reply, payload

    def kill(self):
        try:
            if self.proc.poll() is None:
                try:
                    os.killpg(self.proc.pid, 9)
                except OSError:
                    pass
                self.proc.kill()
            self.proc.wait(timeout=5)
        except (OSError, subprocess.TimeoutExpired):
            pass
        for s in (self.sock, self.clock):
            try:
                s.close()
            except OSError:
                pass


def process_cpu(pid):
    """Seconds of CPU the process `pid` has used, every thread's, live or gone: the kernel's
    process CPU clock of it (Linux; any process this one can see), or None."""
    try:
        return time.clock_gettime(((~int(pid)) << 3) | 2)
    except (OSError, OverflowError, AttributeError, TypeError, ValueError):
        return None


def _state_and_name(pid):
    """A process's state letter and name from /proc, or (None, None) where it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            text = f.read()
        name, rest = text.split(" (", 1)[1].rsplit(") ", 1)
        return rest[:1], name
    except (OSError, ValueError, IndexError):
        return None, None


def _namespace_members(ns):
    """The pids (as this process sees them) of every process in the PID namespace `ns`."""
    found = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.readlink(f"/proc/{entry}/ns/pid") == ns:
                    found.add(int(entry))
            except OSError:
                pass
    return found


def signal_name(sig):
    try:
        return f"signal {sig} ({signal.Signals(sig).name})"
    except ValueError:
        return f"signal {sig}"

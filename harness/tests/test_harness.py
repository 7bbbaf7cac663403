"""Unit tests of the harness that need no GPU: protocol handling, candidate loading, the judge's
checks, the link to runners, shared memory, direct runners and timing arithmetic. Run:
python3 -m unittest discover -s harness/tests (with KSEARCH_SANDBOX_EXE naming a ksearch binary,
runners start in its sandbox; without it, as plain child processes)."""

import importlib.util
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import numpy as np  # noqa: E402

from ksearch_harness import candidates, contenders, gauntlet, link, protocol, shared, stats, timing  # noqa: E402
from ksearch_harness.arrays import draw  # noqa: E402

TASK = {
    "inputs": [{"name": "x", "shape": ["r", "c"], "dtype": "f32", "init": {"uniform": [-1.0, 1.0]}}],
    "outputs": [{"name": "y", "shape": ["r", "c"], "dtype": "f32"}],
}
WORKLOAD = {"name": "w", "axes": {"r": 3, "c": 5}}
TOL = {"f32": {"atol": 1e-6, "rtol": 1e-4, "norm_rtol": 1e-5}}
REF = "import numpy as np\ndef run(x, *, r, c):\n    return (x * 2).astype(np.float32)\n"


def module(text, file="candidate.py"):
    return candidates.load_module({"file": file, "text": text}, "numpy")


def settings():
    return contenders.Settings("numpy", tempfile.mkdtemp(prefix="sandbox-root-"), None)


def direct(text, trusted=False):
    return contenders.DirectContender(settings(), {"file": "candidate.py", "text": text}, "candidate", "candidate.py", trusted).finish()


def time_beside_reference(text, **plan):
    """`text` timed by the judge beside the trusted REF on WORKLOAD, with a short plan (`plan`
    overrides its fields): both contenders' timing stats."""
    plan = {"warmup_ms": 1.0, "min_runs": 3, "min_time_ms": 1.0, "max_time_ms": 1000.0, "target_sample_ms": 1.0,
            "rotate_bytes": 1 << 16, **plan}
    runs = [direct(text), direct(REF, trusted=True)]
    try:
        return timing.time_workload(TASK, WORKLOAD, plan, TOL, runs, 1)
    finally:
        for r in runs:
            r.stop()


# A module that answers the judge's first question about it (`load`, or a tracer's `trace`) with
# `_answer(sock, header, payload)` instead of its runner's own reply: what a module sharing its
# runner's interpreter can do.
HOSTILE = """import array, json, os, socket, struct, sys
_r = sys.modules['__main__']
_send = _r.link.send


def _raw(sock, head, payload=b''):
    sock.sendall(struct.pack('<I', len(head)) + head + payload)


{answer}

def _reply(sock, header, payload=b''):
    if header.get('op') == {op!r}:
        return _answer(sock, header, payload)
    return _send(sock, header, payload)


_r.reply = _reply
"""


def hostile(answer, op="loaded", then=REF):
    return HOSTILE.format(answer=answer, op=op) + then


def fds_open():
    return len(os.listdir("/proc/self/fd"))


def check(text):
    """The outputs of one checked call of `text` on WORKLOAD (seed 7), as the judge sees them."""
    c = direct(text)
    pool = contenders.Pool(TASK, WORKLOAD, 1)
    try:
        c.map_pool(pool)
        return c.check(pool, TASK, WORKLOAD, 7), pool.input_arrays(0)
    finally:
        c.drop_pool(pool)
        c.stop()
        pool.close()


def graph_set(seed, call):
    """Call `call`'s input of a graph round drawn from `seed`, as FakeGraph and FakeTruth draw it."""
    return np.random.default_rng((seed, call)).uniform(-1.0, 1.0, (3, 5)).astype(np.float32)


class FakeGraph(contenders.GraphContender):
    """A graph runner without a process: REF's outputs on a round's sets, every call after a
    batch's first scaled by `drift` (as a kernel that tells a timed batch's calls apart can)."""

    def __init__(self, trusted, drift=1.0):
        self.trusted, self.drift, self.role, self.label = trusted, drift, "candidate", "fake"
        self.sets, self.outs = [], []

    def round(self, workload, seed, count, window=None):
        first, n = window if window is not None else (0, count)
        self.sets = [graph_set(seed, j) for j in range(first, first + n)]

    def go(self, workload, k, at=0):
        t = time.perf_counter()
        self.outs = [[(x * 2 * (self.drift if j else 1.0)).astype(np.float32)] for j, x in enumerate(self.sets[at:at + k])]
        while time.perf_counter() - t < 1e-5 * k:
            pass
        return time.perf_counter() - t

    def sample(self, workload, positions):
        return [float(self.outs[c][t].reshape(-1)[i]) for c, t, i in positions]

    def fetch(self, workload, call):
        return self.outs[call]

    def cpu_time(self):
        return None


class FakeTruth:
    def inputs_of_round(self, seed, count, call):
        return [graph_set(seed, call)]

    def outputs(self, inputs):
        return [(inputs[0] * 2).astype(np.float32)]


class Protocol(unittest.TestCase):
    def channel(self, lines):
        rin, win = os.pipe()
        rout, wout = os.pipe()
        os.write(win, "".join(l + "\n" for l in lines).encode())
        os.close(win)
        return protocol.Channel(rin, wout), rout

    def replies(self, fd, ch):
        ch._writer.close()
        data = b""
        while chunk := os.read(fd, 65536):
            data += chunk
        return [json.loads(l) for l in data.decode().splitlines()]

    def test_malformed_and_wrong_version_requests_get_errors_and_are_skipped(self):
        ch, fd = self.channel(["{not json", json.dumps({"protocol": 9, "type": "evaluate"}), json.dumps({"protocol": 2, "type": "shutdown"})])
        got = list(ch.requests())
        self.assertEqual([m["type"] for m in got], ["shutdown"])
        replies = self.replies(fd, ch)
        self.assertEqual([r["type"] for r in replies], ["error", "error"])
        self.assertIn("malformed request", replies[0]["message"])
        self.assertIn("protocol version 9", replies[1]["message"])
        self.assertTrue(all(r["protocol"] == 2 for r in replies))

    def test_messages_are_single_json_lines_without_nan(self):
        ch, fd = self.channel([])
        ch.send({"type": "progress", "id": 1, "phase": "check"})
        with self.assertRaises(ValueError):
            ch.send({"type": "result", "x": float("nan")})
        self.assertEqual(self.replies(fd, ch), [{"protocol": 2, "type": "progress", "id": 1, "phase": "check"}])

    def test_text_with_lone_surrogates_is_sent_as_valid_unicode(self):
        # What a candidate can put in its error message: ksearch's JSON reader refuses a lone
        # surrogate, escaped or not, and voided the evaluation.
        ch, fd = self.channel([])
        ch.send({"type": "error", "message": "bad \ud800 text \U0001F600"})
        ch._writer.close()
        line = os.read(fd, 65536)
        self.assertNotIn(b"\\ud8", line.lower())
        self.assertEqual(json.loads(line.decode("utf-8", "strict"))["message"], "bad \ufffd text \U0001F600")


class Startup(unittest.TestCase):
    def test_without_numpy_the_worker_says_how_to_install_it(self):
        import subprocess

        harness = os.path.join(os.path.dirname(__file__), "..")
        # numpy blocked: importing it raises ImportError, as where it is not installed.
        code = "import sys, runpy; sys.modules['numpy'] = None; sys.argv = ['ksearch_harness']; runpy.run_module('ksearch_harness', run_name='__main__')"
        p = subprocess.run([sys.executable, "-c", code], cwd=harness, capture_output=True, text=True, timeout=60)
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertIn("the mlx backend needs numpy", p.stderr)
        self.assertIn("pip install numpy", p.stderr)
        self.assertNotIn("Traceback", p.stderr)


class Loading(unittest.TestCase):
    def test_a_syntax_error_names_file_and_line(self):
        with self.assertRaises(candidates.CompileError) as e:
            module("def run(x, *, r, c):\n    return = x\n")
        self.assertTrue(str(e.exception).startswith("candidate.py:2:"), str(e.exception))

    def test_import_failures_and_a_missing_run_are_candidate_errors(self):
        with self.assertRaises(candidates.CandidateError) as e:
            module("raise RuntimeError('boom')\n")
        self.assertIn("boom", str(e.exception))
        with self.assertRaises(candidates.CandidateError) as e:
            module("def other():\n    pass\n")
        self.assertIn("defines no `run`", str(e.exception))

    def test_the_target_is_visible_to_the_module(self):
        run = module("def run():\n    return KSEARCH_TARGET\n")
        self.assertEqual(run(), "numpy")

    def test_build_failures_are_recognised(self):
        self.assertTrue(candidates.is_build_failure("[jit] nvrtc: error: identifier undefined"))
        self.assertTrue(candidates.is_build_failure("Unable to build metal library from source"))
        self.assertFalse(candidates.is_build_failure("ValueError: shapes do not match"))


class Link(unittest.TestCase):
    def test_messages_keep_their_payloads(self):
        a, b = socket.socketpair()
        link.send(a, {"op": "x", "n": 1}, b"\x00\x01payload")
        header, payload, _ = link.recv(b, max_payload=9)
        self.assertEqual((header["op"], header["n"], payload), ("x", 1, b"\x00\x01payload"))
        a.close()
        self.assertIsNone(link.recv(b))

    def test_an_oversized_header_is_refused(self):
        a, b = socket.socketpair()
        a.sendall((link.MAX_HEADER + 1).to_bytes(4, "little"))
        with self.assertRaises(ValueError):
            link.recv(b)

    def test_a_payload_larger_than_asked_for_is_refused_before_it_is_read(self):
        a, b = socket.socketpair()
        # Only the header is sent: reading the payload would wait for ever.
        head = json.dumps({"op": "values", "payload": 1 << 30}).encode()
        a.sendall(len(head).to_bytes(4, "little") + head)
        b.settimeout(10)
        with self.assertRaises(ValueError) as e:
            link.recv(b, max_payload=64)
        self.assertIn("at most 64", str(e.exception))

    def test_a_payload_is_read_into_one_buffer(self):
        import threading
        import tracemalloc

        a, b = socket.socketpair()
        size = 32 << 20
        payload = b"\x5a" * size
        sender = threading.Thread(target=lambda: link.send(a, {"op": "traced"}, payload), daemon=True)
        tracemalloc.start()
        try:
            sender.start()
            _, got, _ = link.recv(b, max_payload=size)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
            b.close()
        self.assertEqual(got, payload)
        self.assertLess(peak, size * 1.25, "the payload was copied while read")

    @unittest.skipUnless(sys.platform.startswith("linux"), "counts descriptors in /proc")
    def test_descriptors_sent_with_a_message_are_refused_and_never_installed(self):
        a, b = socket.socketpair()
        r, w = os.pipe()
        before = fds_open()
        head = json.dumps({"op": "done", "payload": 0}).encode()
        socket.send_fds(a, [len(head).to_bytes(4, "little") + head], [r, w] * 50)
        with self.assertRaises(ValueError) as e:
            link.recv(b)
        self.assertIn("file descriptors", str(e.exception))
        self.assertEqual(fds_open(), before)
        for fd in (r, w):
            os.close(fd)


class MalformedReplies(unittest.TestCase):
    """Whatever a runner sends, the judge reads it or loses the runner (RunnerLost, the
    candidate's `runtime_error`); no other exception reaches the judge's loop."""

    def assert_protocol_break(self, text, part="broke the protocol", trusted=False):
        with self.assertRaises(link.RunnerLost) as e:
            direct(text, trusted=trusted).stop()
        self.assertIn(part, e.exception.message)

    def test_a_malformed_header_breaks_the_protocol(self):
        for raw in [
            "b'[' * 50000 + b']' * 50000",  # RecursionError in json
            "b'[1]'",
            "b'\\xff\\xfe'",
            "json.dumps({'payload': 0}).encode()",
            "json.dumps({'op': 5}).encode()",
            "json.dumps({'op': 'error'}).encode()",
            "json.dumps({'op': 'compile_error', 'message': ['x']}).encode()",
            "json.dumps({'op': 'loaded', 'payload': 'x'}).encode()",
            "json.dumps({'op': 'loaded', 'payload': True}).encode(), b'x'",
        ]:
            with self.subTest(raw=raw):
                self.assert_protocol_break(hostile(f"def _answer(sock, header, payload):\n    _raw(sock, {raw})\n"))

    def test_a_description_that_is_not_a_string_breaks_the_protocol(self):
        self.assert_protocol_break(hostile("def _answer(sock, header, payload):\n    _send(sock, {'op': 'loaded', 'description': {'x': 1}})\n"), trusted=True)

    def test_a_payload_no_request_asked_for_breaks_the_protocol(self):
        self.assert_protocol_break(hostile("def _answer(sock, header, payload):\n    _send(sock, header, b'x' * 4096)\n"), "a payload of 4096 bytes")

    def test_descriptors_sent_with_an_answer_break_the_protocol(self):
        answer = ("def _answer(sock, header, payload):\n    head = json.dumps({'op': 'loaded', 'payload': 0}).encode()\n"
                  "    socket.send_fds(sock, [struct.pack('<I', len(head)) + head], [os.open('/dev/null', os.O_RDONLY)])\n")
        self.assert_protocol_break(hostile(answer), "file descriptors")

    def test_a_long_message_is_cut_not_a_protocol_break(self):
        with self.assertRaises(candidates.CandidateError) as e:
            direct("raise RuntimeError('x' * 1000000)\n")
        self.assertIn("RuntimeError", str(e.exception))
        self.assertLess(len(str(e.exception)), link.MAX_MESSAGE + 16)

    @unittest.skipUnless(sys.platform.startswith("linux"), "counts descriptors in /proc")
    def test_descriptors_sent_with_the_clock_byte_are_closed_and_break_the_protocol(self):
        # The runner's clock socket is read with room for its timestamp: descriptors that fit
        # are installed in the judge, and must be closed at once.
        tick = ("import array, os, socket, sys\n_r = sys.modules['__main__']\n\n"
                "def _tick():\n    fds = [os.open('/dev/null', os.O_RDONLY) for _ in range(4)]\n"
                "    _r.CLOCK[0].sendmsg([b'd'], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array('i', fds))])\n"
                "    for fd in fds:\n        os.close(fd)\n\n\n_r.tick = _tick\n")
        plan = {"warmup_ms": 1.0, "min_runs": 3, "min_time_ms": 1.0, "max_time_ms": 1000.0, "target_sample_ms": 1.0, "rotate_bytes": 1 << 16}
        before = fds_open()
        runs = [direct(tick + REF), direct(REF, trusted=True)]
        try:
            with self.assertRaises(timing.TimedFailure) as e:
                timing.time_workload(TASK, WORKLOAD, plan, TOL, runs, 1)
        finally:
            for r in runs:
                r.stop()
        self.assertEqual(e.exception.index, 0)
        self.assertIsInstance(e.exception.error, link.RunnerLost)
        self.assertIn("file descriptors", e.exception.error.message)
        self.assertEqual(fds_open(), before)

    def test_odd_kernel_lists_are_left_unkept(self):
        class Answers:
            lost = None

            def __init__(self, reply, payload):
                self.reply, self.payload = reply, payload

            def send(self, header):
                pass

            def receive(self, timeout=None, max_payload=0):
                return self.reply, self.payload

        kept = []
        real = contenders.kernel_cache.keep
        self.addCleanup(setattr, contenders.kernel_cache, "keep", real)
        contenders.kernel_cache.keep = lambda *a: kept.append(a)
        for files in [{"a": 1}, [{"name": "k", "bytes": "4"}], [{"name": "k", "bytes": float("inf")}], [{"name": "k", "bytes": 4.0}],
                      [{"name": 4, "bytes": 4}], [{"name": "k", "bytes": True}], [{"name": "k", "bytes": 5}], ["k"]]:
            c = contenders.GraphContender.__new__(contenders.GraphContender)
            c.kernels, c.runner = "unused", Answers({"op": "kernels", "files": files}, b"1234")
            c.keep_kernels()
        self.assertEqual(kept, [])

    def test_outputs_are_read_only_as_described(self):
        specs = [{"name": "y", "shape": [3, 5], "dtype": "f32"}]
        y = np.arange(15, dtype=np.float32)
        good = {"op": "outputs", "arrays": [{"dtype": "<f4", "shape": [3, 5], "bytes": 60}]}
        (got,) = contenders.unpack_outputs(good, bytearray(y.tobytes()), specs)
        np.testing.assert_array_equal(got, y.reshape(3, 5))
        for arrays, payload in [
            ([{"dtype": "<f4", "shape": [3, 5], "bytes": 60}] * 2, y.tobytes() * 2),
            ([{"dtype": "<f4", "shape": [5, 3], "bytes": 60}], y.tobytes()),
            ([{"dtype": "<f4", "shape": [3.0, 5], "bytes": 60.0}], y.tobytes()),
            ([{"dtype": "O", "shape": [3, 5], "bytes": 120}], b"\0" * 120),
            ([{"dtype": "<f4", "shape": [3, 5], "bytes": 60}], y.tobytes() + b"x"),
            ([{"dtype": "<f4", "shape": [3, 5], "bytes": 64}], y.tobytes() + b"x" * 4),
            ([{"dtype": "not a type", "shape": [3, 5], "bytes": 60}], y.tobytes()),
            ("arrays", y.tobytes()),
            ([["<f4", [3, 5], 60]], y.tobytes()),
        ]:
            with self.subTest(arrays=arrays), self.assertRaises(Exception):
                contenders.unpack_outputs({"op": "outputs", "arrays": arrays}, bytearray(payload), specs)


@unittest.skipUnless(importlib.util.find_spec("mlx") is not None, "needs MLX (pip install \"mlx[cpu]\")")
class MalformedGraphs(unittest.TestCase):
    """A tracer runs the candidate's Python: its `traced` answer is checked before the judge
    reads or forwards it."""

    MLX_REF = "import mlx.core as mx\ndef run(x, *, r, c):\n    return (x * 2).astype(mx.float32)\n"

    def graph(self, text):
        settings = contenders.Settings("cpu", tempfile.mkdtemp(prefix="sandbox-root-"), None)
        return contenders.GraphContender(settings, {"file": "candidate.py", "text": text}, "candidate", "candidate.py", False, TASK, [WORKLOAD])

    def test_graphs_that_do_not_add_up_break_the_protocol(self):
        # One workload is asked for: one graph.
        for sizes in ["'a'", "[float(len(payload))]", "[len(payload), 0]", "[-1]", "None", "{'a': len(payload)}"]:
            answer = f"def _answer(sock, header, payload):\n    _send(sock, {{'op': 'traced', 'sizes': {sizes}}}, payload)\n"
            c = self.graph(hostile(answer, op="traced", then=self.MLX_REF))
            with self.subTest(sizes=sizes):
                try:
                    with self.assertRaises(link.RunnerLost) as e:
                        c.finish()
                    self.assertIn("do not add up", e.exception.message)
                finally:
                    c.stop()

    def test_graphs_larger_than_a_tracer_may_write_break_the_protocol(self):
        c = self.graph(self.MLX_REF)
        real = contenders.TRACER_FILE_BYTES
        self.addCleanup(setattr, contenders, "TRACER_FILE_BYTES", real)
        # After the runners started (with the real file-size limit): an honest graph of a few
        # kilobytes is more than one of 64 bytes.
        contenders.TRACER_FILE_BYTES = 64
        try:
            with self.assertRaises(link.RunnerLost) as e:
                c.finish()
            self.assertIn("where at most 64 were asked for", e.exception.message)
        finally:
            c.stop()


class Shared(unittest.TestCase):
    def test_guards_catch_a_write_past_an_output(self):
        layout = shared.Layout(2, [((3, 5), np.float32)], [((3, 5), np.float32), ((7,), np.int32)])
        region = shared.Region(layout.output_region())
        shared.poison_slot(layout, region.map, 1)
        self.assertIsNone(shared.broken_guard(layout, region.map, 1))
        y = layout.output_views(region.map, 1)[0]
        self.assertTrue(np.isnan(y).all())
        region.map[layout.output_offset(1, 0) + y.nbytes] = 0
        self.assertEqual(shared.broken_guard(layout, region.map, 1), 0)
        region.close()

    def test_a_runner_cannot_write_the_inputs(self):
        pool = contenders.Pool(TASK, WORKLOAD, 1)
        import mmap

        view = mmap.mmap(pool.inputs.ro_fd, pool.layout.input_region(), mmap.MAP_SHARED, mmap.PROT_READ)
        with self.assertRaises(TypeError):
            view[0] = 1
        with self.assertRaises((OSError, PermissionError)):
            mmap.mmap(pool.inputs.ro_fd, pool.layout.input_region(), mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        view.close()
        pool.close()

    @unittest.skipUnless(sys.platform.startswith("linux"), "memfd seals are Linux's")
    def test_a_runner_cannot_reopen_the_inputs_writable(self):
        # What a hostile runner holding the read-only descriptor tries: reopen it through
        # /proc/self/fd with write access, then write or map it writable. Root passes the
        # permission bits; the seals hold anyway. The judge's own mapping still writes.
        import mmap

        pool = contenders.Pool(TASK, WORKLOAD, 1)
        pool.fill(TASK, WORKLOAD, 0, 7)
        try:
            fd = os.open(f"/proc/self/fd/{pool.inputs.ro_fd}", os.O_RDWR)
        except PermissionError:
            fd = None
        if fd is not None:
            with self.assertRaises(PermissionError):
                os.write(fd, b"x")
            with self.assertRaises(PermissionError):
                mmap.mmap(fd, pool.layout.input_region(), mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
            os.close(fd)
        pool.fill(TASK, WORKLOAD, 0, 8)
        view = mmap.mmap(pool.inputs.ro_fd, pool.layout.input_region(), mmap.MAP_SHARED, mmap.PROT_READ)
        np.testing.assert_array_equal(np.frombuffer(view, np.float32, 15), pool.input_arrays(0)[0].reshape(-1))
        del view
        pool.close()


    @unittest.skipUnless(sys.platform.startswith("linux"), "memfd seals are Linux's")
    def test_a_runner_cannot_resize_its_outputs(self):
        # A runner holds its output region's writable descriptor: cut short under the judge's
        # mapping, the judge's next read of it would fault (SIGBUS).
        region = shared.Region(shared.Layout(2, [((3, 5), np.float32)], [((3, 5), np.float32)]).output_region())
        try:
            for size in (0, region.size - 1, region.size + 4096):
                with self.assertRaises(PermissionError):
                    os.ftruncate(region.fd, size)
            region.map[region.size - 1] = 7
            self.assertEqual(region.map[region.size - 1], 7)
        finally:
            region.close()


class Paths(unittest.TestCase):
    def test_runners_are_not_shown_the_judges_working_directory(self):
        # The judge runs as `python3 -m ksearch_harness` in a directory of its own: `-m` puts
        # that directory first on sys.path, and PYTHONPATH may name it (relatively) too.
        harness = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "probe.py"), "w") as f:
                f.write("import json\nfrom ksearch_harness import link\nprint(json.dumps(link.python_paths()))\n")
            p = subprocess.run([sys.executable, "-m", "probe"], cwd=d, capture_output=True, text=True, timeout=60,
                               env={**os.environ, "PYTHONPATH": os.pathsep.join([harness, "."])})
            self.assertEqual(p.returncode, 0, p.stderr)
            paths = json.loads(p.stdout)
            inside = os.path.join(os.path.realpath(d), "")
            self.assertFalse([q for q in paths if inside.startswith(os.path.join(os.path.realpath(q), ""))], paths)
            self.assertIn(harness, paths)
            self.assertIn(os.path.dirname(np.__file__).rsplit(os.sep, 1)[0], paths)


class RunnerEnvironment(unittest.TestCase):
    def test_mlx_runs_a_batchs_calls_in_order_unless_the_judge_says_otherwise(self):
        # Independent calls in one CUDA graph would run side by side (see link.runner_env).
        from unittest import mock

        from ksearch_harness import link

        with mock.patch.dict(os.environ, {"KSEARCH_TEST_SECRET": "x"}, clear=False):
            os.environ.pop("MLX_USE_CUDA_GRAPHS", None)
            env = link.runner_env()
            self.assertEqual(env["MLX_USE_CUDA_GRAPHS"], "0")
            self.assertNotIn("KSEARCH_TEST_SECRET", env)
            os.environ["MLX_USE_CUDA_GRAPHS"] = "1"
            self.assertEqual(link.runner_env()["MLX_USE_CUDA_GRAPHS"], "1")


class DirectRunner(unittest.TestCase):
    def test_a_correct_candidate_gives_the_reference_outputs(self):
        (y,), (x,) = check(REF)
        np.testing.assert_array_equal(y, (x * 2).astype(np.float32))

    def test_only_a_trusted_module_is_asked_what_it_runs(self):
        text = REF + "\ndef ksearch_describe():\n    return 'numpy ' + np.__version__\n"
        for trusted, want in [(True, "numpy " + np.__version__), (False, None)]:
            c = direct(text, trusted=trusted)
            try:
                self.assertEqual(c.description, want)
            finally:
                c.stop()
        c = direct(REF, trusted=True)
        try:
            self.assertIsNone(c.description)
        finally:
            c.stop()

    def test_a_run_that_raises_is_a_candidate_error(self):
        with self.assertRaises(candidates.CandidateError) as e:
            check("def run(x, *, r, c):\n    raise ValueError('bad shapes')\n")
        self.assertIn("bad shapes", str(e.exception))

    def test_wrong_shape_dtype_count_and_mutation_are_bad_outputs(self):
        for text, part in [
            ("import numpy as np\ndef run(x, *, r, c):\n    return (x * 2)[:2].astype(np.float32)\n", "has shape (2, 5); the task declares (3, 5)"),
            ("import numpy as np\ndef run(x, *, r, c):\n    return (x * 2).astype(np.float64)\n", "dtype float64"),
            ("def run(x, *, r, c):\n    return (x, x)\n", "returned 2 output(s)"),
            ("import numpy as np\ndef run(x, *, r, c):\n    y = (x * 2).astype(np.float32)\n    x[0, 1] = 5\n    return y\n", "modified input `x` (first at x[0][1])"),
        ]:
            with self.assertRaises(contenders.BadOutput) as e:
                check(text)
            self.assertIn(part, str(e.exception))

    def test_a_syntax_error_is_a_compile_error(self):
        with self.assertRaises(candidates.CompileError):
            direct("def run(x, *, r, c):\n    return = x\n")


class Pausing(unittest.TestCase):
    def test_a_paused_runner_is_continued_before_its_batch_is_timed(self):
        from ksearch_harness import link

        c = direct(REF)
        pool = contenders.Pool(TASK, WORKLOAD, 1)
        events = []
        runner = c.runner
        resume = runner._resume
        clock = link.time.time_ns

        def resuming():
            events.append(("resume", runner.paused))
            resume()

        def stamped():
            events.append(("clock", runner.paused))
            return clock()
        try:
            pool.fill(TASK, WORKLOAD, 0, 1)
            c.map_pool(pool)
            self.assertTrue(runner.pause())
            runner._resume = resuming
            link.time.time_ns = stamped
            try:
                c.call(pool, [0], True)
            finally:
                link.time.time_ns = clock
            # The runner was continued while paused, and the clock started after that.
            self.assertEqual(events[0], ("resume", True))
            self.assertIn(("clock", False), events)
            self.assertNotIn(("clock", True), events)
            c.drop_pool(pool)
        finally:
            pool.close()
            c.stop()

    def test_a_paused_runner_runs_nothing_until_the_judge_turns_to_it(self):
        # A module whose thread counts while nobody calls it: paused, it counts nothing.
        text = ("import threading, time\nimport numpy as np\n_n = [0]\n"
                "def _spin():\n    while True:\n        _n[0] += 1\n        time.sleep(0.001)\n"
                "threading.Thread(target=_spin, daemon=True).start()\n"
                "def run(x, *, r, c):\n    return np.full(x.shape, float(_n[0]), dtype=np.float32)\n")
        c = direct(text)
        try:
            runner = c.runner
            self.assertTrue(runner.pause())

            def states():
                # Every thread's: the stop reaches the main thread and its spinning thread one
                # after the other (CI once read 14 µs more CPU after the main thread's "T").
                out = []
                for tid in os.listdir(f"/proc/{runner.pid}/task"):
                    with open(f"/proc/{runner.pid}/task/{tid}/stat") as f:
                        out.append(f.read().rsplit(") ", 1)[1].split()[0])
                return out
            state = states()
            for _ in range(100):
                if all(s in "Tt" for s in state):
                    break
                time.sleep(0.01)
                state = states()
            self.assertTrue(all(s in "Tt" for s in state), state)
            before = runner.cpu_time()[0]
            time.sleep(0.3)
            self.assertEqual(runner.cpu_time()[0], before)
            # The next request continues it, and it answers.
            pool = contenders.Pool(TASK, WORKLOAD, 1)
            try:
                pool.fill(TASK, WORKLOAD, 0, 1)
                c.map_pool(pool)
                c.call(pool, [0], False)
                self.assertFalse(runner.paused)
                c.drop_pool(pool)
            finally:
                pool.close()
        finally:
            c.stop()


@unittest.skipUnless(importlib.util.find_spec("torch") is not None, "needs PyTorch (pip install torch)")
class TorchJudgeArrays(unittest.TestCase):
    def test_a_byte_sum_in_chunks_is_the_whole_sum(self):
        import torch

        from ksearch_harness import torch_contenders

        self.addCleanup(setattr, torch_contenders, "CHECKSUM_CHUNK", torch_contenders.CHECKSUM_CHUNK)
        torch_contenders.CHECKSUM_CHUNK = 7
        b = torch.randint(0, 256, (100,), dtype=torch.uint8)
        self.assertEqual(int(torch_contenders.byte_sum(torch, b)), int(b.to(torch.int64).sum()))
        self.assertEqual(int(torch_contenders.byte_sum(torch, b[:0])), 0)
        # A changed byte changes it.
        before = int(torch_contenders.byte_sum(torch, b))
        b[50] ^= 1
        self.assertNotEqual(int(torch_contenders.byte_sum(torch, b)), before)

    def test_the_runners_wait_is_the_c_function_a_module_cannot_rebind(self):
        # A module that rebinds torch._C._cuda_synchronize turns torch.cuda.synchronize (which
        # looks the name up at every call) into a wait for nothing; the runner's own wait, taken
        # before any module loads, is the builtin itself and stays it.
        import torch

        from ksearch_harness.runner import sync_of

        builtin = torch._C._cuda_synchronize
        mine = sync_of(torch)
        self.assertIs(mine, builtin)
        self.assertNotEqual(type(mine).__name__, "function")
        self.addCleanup(setattr, torch._C, "_cuda_synchronize", builtin)
        torch._C._cuda_synchronize = lambda: None
        self.assertIs(mine, builtin)
        self.assertIsNot(sync_of(torch), builtin)

    def test_poisoning_in_place_leaves_what_a_stored_pattern_left(self):
        # Outputs all ones (NaN for floats) and guards 0xA5 in the slots asked, nothing else
        # touched, and no memory the size of the outputs kept for it.
        import torch

        from ksearch_harness.torch_arrays import TorchArrays
        from ksearch_harness.torch_contenders import TorchMemory, TorchPool

        task = {"inputs": [{"name": "x", "shape": ["n"], "dtype": "f32"}],
                "outputs": [{"name": "y", "shape": ["n"], "dtype": "f16"}, {"name": "z", "shape": ["m"], "dtype": "f32"}]}
        workload = {"name": "w", "axes": {"n": 37, "m": 5}}
        arrays = TorchArrays("cpu")
        pool = TorchPool(arrays, task, workload, 3)
        out = TorchMemory(arrays, pool.layout.output_region())
        try:
            before = torch.randint(0, 256, out.bytes.shape, dtype=torch.uint8)
            out.bytes.copy_(before)
            pool.poison(out.bytes, [1, 2])
            stride = pool.layout.out_stride
            want = np.full(stride, 0xFF, dtype=np.uint8)
            for off, n in pool.layout.guards(0):
                want[off:off + n] = shared.GUARD_BYTE
            got = out.bytes.numpy()
            np.testing.assert_array_equal(got[:stride], before.numpy()[:stride])
            np.testing.assert_array_equal(got[stride:], np.tile(want, 2))
            self.assertTrue(all(bool(torch.isnan(v).all()) for v in pool.output_views(out.bytes, 2)))
            self.assertFalse(hasattr(pool, "pattern"))
        finally:
            out.close()
            pool.close()

    def test_the_trusted_contenders_share_one_copy_of_the_inputs(self):
        # Each untrusted contender maps a copy of its own; the baseline and the comparisons map
        # one copy between them, which the pool owns: a KernelBench input of 7.5 GB is one copy
        # fewer on the GPU, and `max_calls_for` counts the copies that are made.
        from types import SimpleNamespace

        from ksearch_harness.torch_arrays import TorchArrays
        from ksearch_harness.torch_contenders import TorchContender, TorchPool, max_calls_for

        arrays = TorchArrays("cpu")
        pool = TorchPool(arrays, TASK, WORKLOAD, 2)

        def contender(trusted):
            c = TorchContender.__new__(TorchContender)
            c.arrays, c.trusted, c.model_args, c.ins, c.outs = arrays, trusted, {}, {}, {}
            c.runner = SimpleNamespace(request=lambda header, fds=(): ({"op": "ready"}, []), pause=lambda: True)
            return c
        candidate, baseline, comparison = contender(False), contender(True), contender(True)
        try:
            for c in (candidate, baseline, comparison):
                c.map_pool(pool)
            self.assertIs(baseline.ins[pool.id], comparison.ins[pool.id])
            self.assertIs(baseline.ins[pool.id], pool.trusted_copy)
            self.assertIsNot(candidate.ins[pool.id], pool.trusted_copy)
            copy = pool.trusted_copy
            baseline.drop_pool(pool)
            self.assertIsNotNone(copy.bytes, "a trusted contender's drop closed the copy the others map")
        finally:
            for c in (candidate, comparison):
                c.drop_pool(pool)
            pool.close()
        self.assertIsNone(copy.bytes)
        self.assertIsNone(pool.trusted_copy)

        def gpu(total):
            props = SimpleNamespace(total_memory=total)
            return SimpleNamespace(target="cuda", device=0, torch=SimpleNamespace(cuda=SimpleNamespace(get_device_properties=lambda d: props)))
        large = {"name": "large", "axes": {"r": 2000, "c": 1000}}
        set_bytes = 2000 * 1000 * 4 + 128
        budget = 24 << 30
        # One candidate, a baseline, a comparison: the pool's inputs, the candidate's copy and
        # the trusted copy, and three contenders' outputs.
        self.assertEqual(max_calls_for(gpu(80 << 30), TASK, large, 1024, 3, 1), budget // (6 * set_bytes))
        # No trusted contender: no trusted copy.
        self.assertEqual(max_calls_for(gpu(80 << 30), TASK, large, 1024, 2, 2), budget // (5 * set_bytes))

    def test_a_whole_timed_output_is_compared_as_the_runner_gives_it(self):
        # verify_round asks direct runners for views of the slots; a torch runner on the GPU
        # gives tensors, compared on their device (here CPU tensors stand in for them).
        import torch

        class Stub:
            def __init__(self, out, trusted):
                self.out, self.trusted, self.asked = out, trusted, []

            def fetch(self, pool, sets, call, views=False):
                self.asked.append(views)
                return [self.out]

            def sample(self, pool, sets, positions):
                return []

        want = torch.arange(15, dtype=torch.float32).reshape(3, 5)
        for got, fails in ((want.clone(), False), (want + 0.5, True)):
            runs = [Stub(got, False), Stub(want, True)]
            args = (TASK, WORKLOAD, TOL, runs, 1, [1, 1], [([], []), None], np.random.default_rng(0), True, False, None, [[0], [0]], (0, 1),
                    lambda i, f, *a, **k: f(*a, **k))
            if fails:
                with self.assertRaisesRegex(timing.TimedIncorrect, "compared with the baseline"):
                    timing.verify_round(*args)
            else:
                timing.verify_round(*args)
            self.assertEqual([r.asked for r in runs], [[True], [True]])

    def test_outputs_reach_numpy_exactly_without_widening_what_numpy_holds(self):
        import torch

        from ksearch_harness.torch_arrays import TorchArrays

        arrays = TorchArrays("cpu")
        x = torch.tensor([1.5, -2.25, 3.0e-3, 65504.0])
        for dtype, want in [(torch.float16, np.float16), (torch.float32, np.float32), (torch.float64, np.float64),
                            (torch.bfloat16, np.float32), (torch.float8_e4m3fn, np.float32), (torch.int8, np.int64)]:
            with self.subTest(dtype=dtype):
                t = x.to(dtype) if dtype != torch.int8 else torch.tensor([1, -2, 127], dtype=dtype)
                got = arrays.to_numpy(t)
                self.assertEqual(got.dtype, want)
                np.testing.assert_array_equal(got.astype(np.float64), t.to(torch.float64).numpy())
                # A copy: what the tensor's memory holds later does not change it.
                before = got.copy()
                t.zero_()
                np.testing.assert_array_equal(got, before)


class GpuQuiet(unittest.TestCase):
    """The torch judge's wait for a quiet GPU, on flush times given to it (no GPU here)."""

    def watch(self, times):
        from ksearch_harness.torch_contenders import GpuWatch

        w = GpuWatch.__new__(GpuWatch)
        w.fastest = 0.1
        left = list(times)

        def flush():
            ms = left.pop(0)
            w.fastest = min(w.fastest, ms)
            return ms

        w.flush = flush
        return w, left

    def test_work_left_on_the_gpu_is_waited_out_and_counted(self):
        w, left = self.watch([3.0, 2.5, 0.11])
        lag = w.wait_quiet("candidate.py", clock=iter([0.0, 0.5, 1.0, 1.5]).__next__)
        self.assertEqual(left, [])
        # From the first flush to the end of the quiet one, less a quiet flush (0.1 ms).
        self.assertAlmostEqual(lag, 1.5 - 0.0001)

    def test_a_flush_a_little_slower_is_quiet(self):
        w, left = self.watch([0.15, 9.9])
        lag = w.wait_quiet("candidate.py", clock=iter([0.0, 0.00015]).__next__)
        self.assertEqual(left, [9.9])
        self.assertAlmostEqual(lag, 0.00005)

    def test_twice_the_fastest_flush_is_busy(self):
        w, left = self.watch([0.25, 0.1])
        w.wait_quiet("candidate.py", clock=iter([0.0, 0.0003, 0.0004]).__next__)
        self.assertEqual(left, [])

    def test_what_the_gpu_still_does_after_done_is_the_batchs(self):
        # A runner says "done" after 10 ms; the GPU stays busy 4 ms more: the batch took 14 ms.
        # Untrusted runners' untimed calls wait for a quiet GPU too (counted nowhere); trusted
        # ones' untimed calls do not wait.
        from types import SimpleNamespace

        from ksearch_harness.torch_contenders import TorchContender

        waits = []
        watch = SimpleNamespace(flush=lambda: 0.1, wait_quiet=lambda label: waits.append(label) or 0.004)
        pool = SimpleNamespace(id=0, copy_to=lambda *a: None, poison=lambda *a: None, modified=lambda *a: None)

        def contender(trusted):
            c = TorchContender.__new__(TorchContender)
            c.trusted, c.label, c.watch = trusted, "trusted" if trusted else "candidate", watch
            c.ins, c.outs = {0: SimpleNamespace(bytes=None)}, {0: SimpleNamespace(bytes=None)}
            c.torch = SimpleNamespace(cuda=SimpleNamespace(synchronize=lambda: None))
            c.runner = SimpleNamespace(timed=lambda h: (0.010, {"op": "done"}, []),
                                       request=lambda h: ({"op": "done"}, []), pause=lambda: None)
            return c
        candidate, baseline = contender(False), contender(True)
        self.assertAlmostEqual(candidate.call(pool, [0], True), 0.014)
        self.assertAlmostEqual(baseline.call(pool, [0], True), 0.014)
        self.assertEqual(candidate.call(pool, [0], False), 0.0)
        self.assertEqual(baseline.call(pool, [0], False), 0.0)
        self.assertEqual(waits, ["candidate", "trusted", "candidate"])

    def test_work_that_never_ends_is_the_runners_fault(self):
        from ksearch_harness import torch_contenders

        w, _ = self.watch([3.0] * 10)
        with self.assertRaises(contenders.BadOutput) as e:
            w.wait_quiet("candidate.py", clock=iter([0.0, 1.0, 2.5]).__next__)
        self.assertIn("`candidate.py` left work running on the GPU", str(e.exception))
        self.assertIn(f"{torch_contenders.QUIET_LIMIT_S:g} s", str(e.exception))


class DeviceName(unittest.TestCase):
    """An MLX evaluation's toolchain line names the device that measured it."""

    def test_the_gpu_is_named_where_mlx_names_it(self):
        from types import SimpleNamespace

        from ksearch_harness.arrays import device_name

        named = SimpleNamespace(device_info=lambda: {"device_name": "NVIDIA H200", "architecture": "sm_90"},
                                default_device=lambda: "Device(gpu, 0)")
        self.assertEqual(device_name(named), "NVIDIA H200")

        def broken():
            raise RuntimeError("no device info here")
        for info in (broken, lambda: {}, lambda: {"device_name": " "}):
            mx = SimpleNamespace(device_info=info, default_device=lambda: "Device(gpu, 0)")
            self.assertEqual(device_name(mx), "Device(gpu, 0)")


class Gauntlet(unittest.TestCase):
    def test_nan_is_located(self):
        y = np.full((3, 5), 0.5, dtype=np.float32)
        y[2, 4] = np.nan
        _, f = gauntlet.compare(TASK["outputs"][0], y, np.full((3, 5), 0.5), TOL["f32"])
        self.assertIn("y[2][4] = nan", f)

    def comparison_cases(self):
        rng = np.random.default_rng(3)
        cases = []
        for shape in [(7, 1234), (5000,), (3, 4, 500), (), (0, 3)]:
            e = rng.standard_normal(shape).astype(np.float32)
            cases.append((e + 1e-5, e))  # passes
            cases.append((e * 1.001, e))  # the norm alone fails
            if e.size > 10:
                off = e.copy()
                off.reshape(-1)[[3, 2500 % e.size, e.size - 1]] += 1.0  # three elements out
                cases.append((off, e))
                holes = e.astype(np.float16)
                holes.reshape(-1)[[1500 % e.size, 4000 % e.size]] = np.nan  # unwritten
                cases.append((holes, e))
        return cases

    def test_comparing_in_chunks_says_what_one_pass_says(self):
        spec = TASK["outputs"][0]
        tol = {"atol": 1e-3, "rtol": 1e-3, "norm_rtol": 1e-4}
        cases = self.comparison_cases()
        old = gauntlet.COMPARE_CHUNK
        self.addCleanup(setattr, gauntlet, "COMPARE_CHUNK", old)
        for got, want in cases:
            gauntlet.COMPARE_CHUNK = 1 << 40
            whole = gauntlet.compare(spec, got, want, tol)
            gauntlet.COMPARE_CHUNK = 1000
            chunked = gauntlet.compare(spec, got, want, tol)
            self.assertEqual(chunked[1], whole[1])
            for k, v in whole[0].items():
                self.assertAlmostEqual(chunked[0][k], v, delta=1e-12 * max(1.0, abs(v)))
        self.assertIn("3 of 8638 elements of `y` are out of tolerance", gauntlet.compare(spec, *cases[2], tol)[1])
        # A reference that is not finite is the task's fault, wherever it is.
        bad = np.ones(5000)
        bad[4321] = np.inf
        with self.assertRaisesRegex(gauntlet.TaskFault, r"y\[4321\]"):
            gauntlet.compare(spec, np.ones(5000), bad, tol)

    def test_each_figure_of_a_comparison_is_the_plain_computation_s(self):
        """The chunked compare's figures and counts against a direct computation over the whole
        arrays, without its shortcuts (no masking when all is finite, bounds built in place)."""
        spec = TASK["outputs"][0]
        cases = self.comparison_cases()
        e = np.random.default_rng(4).standard_normal(3000).astype(np.float32)
        inf = e.copy()
        inf[[7, 2999]] = [np.inf, -np.inf]
        cases += [(inf, e), (np.zeros(3000, np.float32), np.zeros(3000, np.float32))]
        for tol in ({"atol": 1e-3, "rtol": 1e-3, "norm_rtol": 1e-4}, {"atol": 0.0, "rtol": 0.0, "norm_rtol": 0.0},
                    {"atol": 0.5, "rtol": 0.1, "norm_rtol": 1e-2}):
            for got, want in cases:
                c = np.asarray(got, np.float64).reshape(-1)
                r = np.asarray(want, np.float64).reshape(-1)
                finite = np.isfinite(c)
                d = np.abs(np.where(finite, c, 0.0) - r)
                magnitude = np.abs(r)
                significant = magnitude > tol["atol"]
                figures, failure = gauntlet.compare(spec, got, want, tol)
                self.assertEqual(figures["max_abs_err"], d.max() if d.size else 0.0)
                self.assertEqual(figures["max_rel_err"], (d[significant] / magnitude[significant]).max() if significant.any() else 0.0)
                ref_sq, diff_sq = float(r @ r), float(d @ d)
                want_norm = (diff_sq / ref_sq) ** 0.5 if ref_sq > 0 else (0.0 if diff_sq == 0 else float("inf"))
                self.assertAlmostEqual(figures["norm_rel_err"], want_norm, delta=1e-12 * max(1.0, want_norm))
                over = int((d > tol["atol"] + tol["rtol"] * magnitude).sum())
                if not finite.all():
                    self.assertIn(f"has {int((~finite).sum())} non-finite value(s)", failure)
                elif over:
                    self.assertIn(f"{over} of {r.size} elements of `y` are out of tolerance", failure)
                else:
                    self.assertEqual(failure is None, want_norm <= tol["norm_rtol"], failure)

    @unittest.skipUnless(importlib.util.find_spec("torch") is not None, "needs PyTorch (pip install torch)")
    def test_comparing_tensors_on_their_device_says_what_numpy_says(self):
        import torch

        spec = TASK["outputs"][0]
        tol = {"atol": 1e-3, "rtol": 1e-3, "norm_rtol": 1e-4}
        old = gauntlet.TORCH_COMPARE_CHUNK
        self.addCleanup(setattr, gauntlet, "TORCH_COMPARE_CHUNK", old)
        for got, want in self.comparison_cases():
            expected = gauntlet.compare(spec, got, want, tol)
            for chunk in (1 << 40, 1000):
                gauntlet.TORCH_COMPARE_CHUNK = chunk
                with self.subTest(shape=want.shape, chunk=chunk):
                    errors, failure = gauntlet.compare(spec, torch.as_tensor(np.asarray(got)), torch.as_tensor(np.asarray(want)), tol)
                    self.assertEqual(failure, expected[1])
                    for k, v in expected[0].items():
                        self.assertAlmostEqual(errors[k], v, delta=1e-12 * max(1.0, abs(v)))
        bad = torch.ones(5000, dtype=torch.float64)
        bad[4321] = float("inf")
        with self.assertRaisesRegex(gauntlet.TaskFault, r"inf at y\[4321\]"):
            gauntlet.compare(spec, torch.ones(5000), bad, tol)

    def test_all_zero_output_fails_the_norm_check_even_under_atol(self):
        spec = TASK["outputs"][0]
        r = np.full((3, 5), 1e-7)
        _, f = gauntlet.compare(spec, np.zeros((3, 5)), r, TOL["f32"])
        self.assertIn("norm_rtol", f)

    def test_memory_running_out_beside_the_candidate_is_not_the_tasks_fault(self):
        from ksearch_harness import worker

        oom = worker.trusted_failed("the baseline `sdpa` failed while timed: RuntimeError: [cudaMallocAsync] cudaMallocAsync(&ptr, size) failed: out of memory")
        self.assertIsInstance(oom, worker.Outcome)
        self.assertEqual(oom.status, "runtime_error")
        self.assertIn("the candidate's failure", oom.message)
        for message in ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB", "MemoryError"):
            self.assertIsInstance(worker.trusted_failed(message), worker.Outcome)
        self.assertIsInstance(worker.trusted_failed("the reference failed: ZeroDivisionError"), gauntlet.TaskFault)

    def test_a_non_finite_reference_is_a_task_fault(self):
        with self.assertRaises(gauntlet.TaskFault):
            gauntlet.compare(TASK["outputs"][0], np.zeros((1, 1)), np.array([[np.inf]]), TOL["f32"])

    def test_inputs_are_seeded_and_never_zero(self):
        a = draw(TASK["inputs"][0], (4, 4), 3, "w")
        b = draw(TASK["inputs"][0], (4, 4), 3, "w")
        c = draw(TASK["inputs"][0], (4, 4), 4, "w")
        np.testing.assert_array_equal(a, b)
        self.assertFalse(np.array_equal(a, c))
        self.assertTrue(np.all(a != 0))


class TimingArithmetic(unittest.TestCase):
    def test_quantiles_match_the_rust_side(self):
        s = [1.0, 2.0, 3.0, 4.0, 5.0]
        self.assertEqual(stats.quantile(s, 0.5), 3.0)
        self.assertAlmostEqual(stats.quantile(s, 0.1), 1.4)
        self.assertEqual(stats.quantile([2.0, 4.0], 0.5), 3.0)
        t = stats.timing_stats([3.0, 1.0, 2.0], 4)
        self.assertEqual((t["median_ms"], t["runs"], t["calls_per_sample"], t["samples_ms"]), (2.0, 3, 4, [3.0, 1.0, 2.0]))

    def test_batches_amortise_the_synchronisation(self):
        self.assertEqual(stats.batch_size(0.5, 10.0), 20)
        self.assertEqual(stats.batch_size(30.0, 10.0), 1)
        self.assertEqual(stats.batch_size(0.001, 10.0), 64)

    def test_timing_settles_when_every_paired_interval_is_tight(self):
        def steady(base, n):
            return [base * (1 + 0.001 * (i % 3)) for i in range(n)]

        def noisy(base, n):
            return [base * (1 + 0.3 * (i % 4)) for i in range(n)]
        tight = [steady(1.0, 23), steady(2.0, 23), steady(0.5, 23)]
        self.assertTrue(stats.settled(tight, 23, 10))
        # Only at the looks (10, 15, 23, 35, ...: the C judge's), never before `min_runs`.
        self.assertFalse(stats.settled(tight, 22, 10))
        self.assertFalse(stats.settled(tight, 23, 25))
        self.assertEqual([r for r in range(1, 200) if stats.is_look(r, 10)], [10, 15, 23, 35, 53, 80, 120, 180])
        self.assertFalse(stats.settled([steady(1.0, 23), steady(2.0, 23), noisy(0.5, 23)], 23, 10))

        # A pair 10% apart with a spread of 4% (not the same in both) is decided long before it
        # is within 1%; one 0.5% apart is neither.
        def spread(base, n, step):
            return [base * (1 + 0.04 * ((i * step) % 5) / 4) for i in range(n)]
        self.assertTrue(stats.settled([spread(1.0, 23, 7), spread(1.1, 23, 3)], 23, 10))
        self.assertFalse(stats.settled([spread(1.0, 23, 7), spread(1.005, 23, 3)], 23, 10))
        self.assertFalse(stats.settled([steady(1.0, 23)], 23, 10))

    def test_a_graph_round_of_large_inputs_holds_fewer_calls(self):
        task = {"inputs": [{"name": n, "dtype": "f16", "shape": ["b", "h", "n", "d"]} for n in "qkv"],
                "outputs": [{"name": "o", "dtype": "f16", "shape": ["b", "h", "n", "d"]}]}
        small = {"b": 1, "h": 32, "n": 1024, "d": 128}
        large = {"b": 1, "h": 32, "n": 4096, "d": 128}
        self.assertEqual(timing.graph_round_calls(task, small, 64), 64)
        per_set = 3 * 2 * (32 * 4096 * 128) + 4 * (32 * 4096 * 128) + 2 * 2 * (32 * 4096 * 128)
        self.assertEqual(timing.graph_round_calls(task, large, 64), timing.GRAPH_ROUND_BYTES // per_set)
        self.assertLess(timing.graph_round_calls(task, large, 64), 64)
        huge = {"b": 64, "h": 32, "n": 4096, "d": 128}
        self.assertEqual(timing.graph_round_calls(task, huge, 64), 1)

    @unittest.skipUnless(importlib.util.find_spec("mlx") is not None, "needs MLX (pip install \"mlx[cpu]\")")
    def test_a_graph_round_gives_every_call_its_own_inputs_of_the_declared_shapes(self):
        from ksearch_harness.arrays import arrays_for, round_inputs, set_rows

        arrays = arrays_for("cpu")
        mx = arrays.mx
        # Stacked as they are, stacked with padding rows, and cut one by one (a scalar, and a
        # shape whose padding would more than double it).
        shapes = [(2, 64), (1, 16), (2048,), (), (3, 5)]
        self.assertEqual([set_rows(s) for s in shapes], [2, 8, 2048, None, None])
        specs = [{"name": f"x{i}", "dtype": d} for i, d in enumerate(["f32", "f16", "f32", "f32", "i32"])]
        sets = round_inputs(mx, arrays, specs, shapes, 7, 5)
        again = round_inputs(mx, arrays, specs, shapes, 7, 5)
        other = round_inputs(mx, arrays, specs, shapes, 8, 5)
        self.assertEqual(len(sets), 5)
        for j, s in enumerate(sets):
            self.assertEqual([tuple(a.shape) for a in s], shapes)
            self.assertEqual([arrays.dtype_name(a) for a in s], [p["dtype"] for p in specs])
            for i, a in enumerate(s):
                self.assertTrue(mx.array_equal(a, again[j][i]).item(), "the same seed gives the same sets")
                if a.size > 1:
                    self.assertFalse(mx.array_equal(a, other[j][i]).item(), "another seed gives other sets")
                    for k in range(j):
                        self.assertFalse(mx.array_equal(a, sets[k][i]).item(), f"sets {k} and {j} of input {i} are equal")

    @unittest.skipUnless(importlib.util.find_spec("mlx") is not None, "needs MLX (pip install \"mlx[cpu]\")")
    def test_a_window_of_a_graph_round_holds_the_same_sets_as_the_whole_round(self):
        from ksearch_harness.arrays import arrays_for, round_inputs

        arrays = arrays_for("cpu")
        mx = arrays.mx
        shapes = [(2, 64), (1, 16), (2048,), (), (3, 5)]
        specs = [{"name": f"x{i}", "dtype": d} for i, d in enumerate(["f32", "f16", "f32", "f32", "i32"])]
        whole = round_inputs(mx, arrays, specs, shapes, 11, 7)
        for first, n in [(0, 7), (2, 3), (6, 1), (0, 1)]:
            part = round_inputs(mx, arrays, specs, shapes, 11, 7, keep=(first, n))
            self.assertEqual(len(part), n)
            for j, s in enumerate(part):
                self.assertEqual([tuple(a.shape) for a in s], shapes)
                for a, b in zip(s, whole[first + j]):
                    self.assertTrue(mx.array_equal(a, b).item(), f"set {j} of the window ({first}, {n}) is set {first + j} of the round")

    @unittest.skipUnless(importlib.util.find_spec("mlx") is not None, "needs MLX (pip install \"mlx[cpu]\")")
    def test_an_executor_keeps_a_rounds_sets_and_its_poisoned_outputs_memory_and_nothing_more(self):
        from ksearch_harness.arrays import arrays_for
        from ksearch_harness.runner import prepare_round

        arrays = arrays_for("cpu")
        mx = arrays.mx
        mx.clear_cache()
        # 32 sets of a 128 KiB f16 input (drawn through 256 KiB of f32 each) and a 16 KiB output.
        h = {"inputs": [{"name": "x", "dtype": "f16", "init": {"normal": [0.0, 1.0]}}], "shapes": [[256, 256]],
             "outputs": [{"shape": [64, 64], "dtype": "f32"}], "seed": 9, "sets": 32}
        before = mx.get_active_memory()
        for _ in range(3):
            sets = prepare_round(mx, arrays, h)
            self.assertEqual(len(sets), 32)
            held = mx.get_active_memory() - before
            self.assertGreaterEqual(held, 32 * (128 << 10))
            self.assertLess(held, 32 * (128 << 10) + (1 << 20))
            # What stays cached is the poisoned outputs' 32 × 16 KiB, not the f32 draw's 8 MiB.
            self.assertGreaterEqual(mx.get_cache_memory(), 32 * (16 << 10))
            self.assertLess(mx.get_cache_memory(), 32 * (16 << 10) + (1 << 20))
            del sets

    @unittest.skipUnless(importlib.util.find_spec("mlx") is not None, "needs MLX (pip install \"mlx[cpu]\")")
    def test_the_judge_keeps_one_call_of_a_round_it_draws_to_check_and_hands_the_rest_back(self):
        from ksearch_harness.arrays import arrays_for, round_inputs
        from ksearch_harness.worker import Truth

        arrays = arrays_for("cpu")
        mx = arrays.mx
        task = {"inputs": [{"name": "x", "dtype": "f16", "shape": ["n", "m"]}, {"name": "i", "dtype": "i32", "shape": ["n"]}]}
        truth = Truth(arrays, task, {"name": "w", "axes": {"n": 512, "m": 256}}, None)
        whole = round_inputs(mx, arrays, task["inputs"], [(512, 256), (512,)], 5, 64)
        mx.eval(whole)
        want = [[mx.contiguous(a) for a in s] for s in (whole[3], whole[63])]
        mx.eval(want)
        del whole
        mx.clear_cache()
        before = mx.get_active_memory()
        for j, call in enumerate((3, 63)):
            got = truth.inputs_of_round(5, 64, call)
            self.assertEqual([tuple(a.shape) for a in got], [(512, 256), (512,)])
            for a, b in zip(got, want[j]):
                self.assertTrue(mx.array_equal(a, b).item(), f"call {call}'s inputs are the executors' set {call}")
            # One call's sets stay (256 KiB and 2 KiB), not the round's 64 (16 MiB drawn as f32).
            # The comparisons' scalars may be cached; the round's memory may not.
            self.assertLess(mx.get_active_memory() - before, 1 << 20)
            self.assertLess(mx.get_cache_memory(), 1 << 20)
            del got

    @unittest.skipUnless(importlib.util.find_spec("mlx") is not None, "needs MLX (pip install \"mlx[cpu]\")")
    def test_checked_inputs_on_mlx_are_drawn_on_the_device_from_the_seed(self):
        from ksearch_harness.arrays import arrays_for

        arrays = arrays_for("cpu")
        mx = arrays.mx
        specs = [{"name": "x", "dtype": "f16", "init": {"normal": [0.0, 1.0]}}, {"name": "i", "dtype": "i32", "init": {"randint": [-3, 3]}}]
        a = arrays.draw_inputs(specs, [(64, 8), (100,)], 3, "w")
        self.assertEqual([(tuple(x.shape), arrays.dtype_name(x)) for x in a], [((64, 8), "f16"), ((100,), "i32")])
        self.assertTrue(all(mx.array_equal(x, y).item() for x, y in zip(a, arrays.draw_inputs(specs, [(64, 8), (100,)], 3, "w"))))
        self.assertFalse(mx.array_equal(a[0], arrays.draw_inputs(specs, [(64, 8), (100,)], 4, "w")[0]).item())
        self.assertFalse(mx.array_equal(a[0], arrays.draw_inputs(specs, [(64, 8), (100,)], 3, "v")[0]).item())
        self.assertEqual((mx.min(a[1]).item(), mx.max(a[1]).item()), (-3, 3))
        self.assertLess(abs(mx.mean(a[0].astype(mx.float32)).item()), 0.2)

    def test_a_batch_is_sized_from_batches_past_the_first_cold_one(self):
        # Per call 0.1 ms once the memory is warm; each set a contender uses for the first time
        # costs 0.5 ms more (an output's memory taken for the first time). Sized from single
        # calls at 34 and 250: 10 ms batches need 100 and 250 calls.
        used = [2, 2]
        sizes, rounds = [], []

        def batch(i, k):
            cold = max(0, k - used[i])
            used[i] = max(used[i], k)
            sizes.append((i, k))
            return (0.1 * k + (0.5 * cold if i == 0 else 0.0)) / 1e3 * (1 if i == 0 else 0.4)

        ks = timing.size_batches([34, 250], batch, rounds.append, 10.0, 1024)
        self.assertEqual(ks, [100, 250])
        # The first batch (cold) said 18 calls; the size never shrinks, and the growth was
        # measured once more before it stopped.
        self.assertEqual(sizes, [(0, 34), (1, 250), (0, 34), (1, 250), (0, 100), (1, 250)])
        self.assertEqual(rounds, [250, 250, 250])
        # A kernel of a batch's length or more stays at one call; the sizing never passes
        # SIZING_BATCHES rounds, nor max_calls.
        calls = []

        def ever_faster(i, k):
            calls.append((i, k))
            return 1e-6 / len(calls)

        self.assertEqual(timing.size_batches([1, 8], ever_faster, lambda n: None, 10.0, 64), [1, 64])
        self.assertEqual(calls, [(1, 8), (1, 64)])
        # A size that keeps growing is measured SIZING_BATCHES times, no more.
        calls.clear()
        ks = timing.size_batches([1, 8], ever_faster, lambda n: None, 10.0, 1 << 40)
        self.assertEqual(len(calls), timing.SIZING_BATCHES)
        self.assertEqual(ks[0], 1)
        self.assertGreater(ks[1], 8)

    def test_a_workload_is_timed_per_call_for_every_contender(self):
        plan = {"warmup_ms": 1.0, "min_runs": 3, "min_time_ms": 1.0, "max_time_ms": 1000.0, "target_sample_ms": 1.0, "rotate_bytes": 1 << 16}
        runs = [direct(REF), direct("import numpy as np\ndef run(x, *, r, c):\n    return (x + x).astype(np.float32)\n", trusted=True)]
        try:
            out = timing.time_workload(TASK, WORKLOAD, plan, TOL, runs, 1)
        finally:
            for r in runs:
                r.stop()
        self.assertEqual(len(out), 2)
        for s in out:
            self.assertGreaterEqual(s["runs"], 3)
            self.assertGreater(s["median_ms"], 0.0)
            self.assertLessEqual(s["p10_ms"], s["median_ms"])
            self.assertLessEqual(s["median_ms"], s["p90_ms"])

    def test_every_contender_runs_in_every_place_equally_often(self):
        for n in (1, 2, 3, 4):
            rounds = [timing.round_order(r, n) for r in range(2 * n)]
            for order in rounds:
                self.assertEqual(sorted(order), list(range(n)))
            for place in range(n):
                firsts = [order[place] for order in rounds]
                self.assertEqual(sorted(firsts), sorted(list(range(n)) * 2), (n, place))
        # Two contenders still alternate.
        self.assertEqual([timing.round_order(r, 2) for r in range(2)], [[0, 1], [1, 0]])

    def test_a_workload_whose_sets_fit_once_is_timed_one_call_a_batch(self):
        # KernelBench's RMSNorm: 7.5 GB in and out; three contenders' sets come to 52.5 GB, so
        # an 80 GB GPU holds one set, not the two the timing used to start with.
        from types import SimpleNamespace

        from ksearch_harness.torch_contenders import max_calls_for

        task = {"inputs": [{"name": "x", "shape": ["b", "f", "d", "d"], "dtype": "f32"}],
                "outputs": [{"name": "out", "shape": ["b", "f", "d", "d"], "dtype": "f32"}]}
        workload = {"name": "kernelbench", "axes": {"b": 112, "f": 64, "d": 512}}

        def gpu(total):
            props = SimpleNamespace(total_memory=total)
            return SimpleNamespace(target="cuda", device=0, torch=SimpleNamespace(cuda=SimpleNamespace(get_device_properties=lambda d: props)))
        self.assertEqual(max_calls_for(gpu(80 << 30), task, workload, 64, 3, 1), 1)
        small = {"name": "small", "axes": {"b": 1, "f": 64, "d": 512}}
        self.assertEqual(max_calls_for(gpu(80 << 30), task, small, 64, 3, 1), (24 << 30) // (6 * (64 * 512 * 512 * 4 + 128)))
        # Timed with one set a pool: no pool of more sets is made, and every sample is one call.
        made = []

        def one_set_pools(task, workload, sets):
            made.append(sets)
            return contenders.Pool(task, workload, sets)
        plan = {"warmup_ms": 1.0, "min_runs": 3, "min_time_ms": 1.0, "max_time_ms": 1000.0, "target_sample_ms": 1.0, "rotate_bytes": 1 << 16}
        runs = [direct(REF), direct(REF, trusted=True)]
        try:
            out = timing.time_workload(TASK, WORKLOAD, plan, TOL, runs, 1, new_pool=one_set_pools, max_calls=1)
        finally:
            for r in runs:
                r.stop()
        self.assertTrue(made)
        self.assertEqual(set(made), {1})
        for s in out:
            self.assertEqual(s["calls_per_sample"], 1)
            self.assertGreaterEqual(s["runs"], 3)

    def test_a_graph_runner_drifting_within_the_timed_tolerance_is_caught(self):
        # What a device kernel can do that no Python of the module sees: scale its outputs by
        # twice the norm tolerance in every call but a batch's first. Comparisons with the
        # baseline allow three times the tolerance; the kept call, checked against the
        # reference at the task's own, does not.
        plan = {"warmup_ms": 1.0, "min_runs": 3, "min_time_ms": 1.0, "max_time_ms": 1000.0, "target_sample_ms": 1.0, "rotate_bytes": 1 << 16}
        honest = timing.time_workload(TASK, WORKLOAD, plan, TOL, [FakeGraph(False), FakeGraph(True)], 1, truth=FakeTruth())
        self.assertEqual(len(honest), 2)
        for drift in (1.00002, 0.99998):
            with self.subTest(drift=drift), self.assertRaises(timing.TimedIncorrect) as e:
                timing.time_workload(TASK, WORKLOAD, plan, TOL, [FakeGraph(False, drift), FakeGraph(True)], 1, truth=FakeTruth())
            self.assertEqual(e.exception.index, 0)
            self.assertIn("compared with the reference", e.exception.message)

    def test_a_graph_round_of_one_set_times_one_call_a_batch(self):
        # A set larger than a graph round's bytes: every round holds one set, every batch one
        # call, and the timing still checks what it kept.
        class Counted(FakeGraph):
            def round(self, workload, seed, count, window=None):
                self.counts = getattr(self, "counts", []) + [count]
                super().round(workload, seed, count, window)
        plan = {"warmup_ms": 1.0, "min_runs": 3, "min_time_ms": 1.0, "max_time_ms": 1000.0, "target_sample_ms": 1.0, "rotate_bytes": 1 << 16}
        runs = [Counted(False), Counted(True)]
        out = timing.time_workload(TASK, WORKLOAD, plan, TOL, runs, 1, truth=FakeTruth(), round_bytes=1)
        for r in runs:
            self.assertEqual(set(r.counts), {1})
        for s in out:
            self.assertEqual(s["calls_per_sample"], 1)
            self.assertGreaterEqual(s["runs"], 3)

    def test_kept_calls_are_as_many_as_the_judges_memory_allows(self):
        self.assertEqual(timing.kept_slots(TASK, {"r": 3, "c": 5}, 2, True), timing.KEPT_CALLS)
        # Outputs of 256 MiB, two untrusted contenders: two calls fit in KEPT_BYTES.
        big = {"r": 1 << 13, "c": 1 << 13}
        self.assertEqual(timing.kept_slots(TASK, big, 2, True), 2)
        # A direct runner's inputs are kept too; an output of the whole budget still keeps one.
        self.assertEqual(timing.kept_slots(TASK, big, 2, False), 1)
        self.assertEqual(timing.kept_slots(TASK, {"r": 1 << 16, "c": 1 << 16}, 1, True), 1)

    def test_a_clock_stopped_early_does_not_hide_the_work_after_it(self):
        # The candidate shares the direct runner's interpreter: it says "done" on the clock
        # socket at the start of every call, then works (sleeping, as a GPU kernel's wait looks
        # to the CPU, so no CPU is used outside the timed calls either).
        early = ("import time\nimport numpy as np\nimport __main__ as runner\n_tick = runner.tick\nrunner.tick = lambda: None\n"
                 "def run(x, *, r, c):\n    _tick()\n    time.sleep(0.004)\n    return (x * 2).astype(np.float32)\n")
        cheat, honest = time_beside_reference(early)
        self.assertGreaterEqual(cheat["p10_ms"], 3.5)
        self.assertLess(honest["median_ms"], 1.0)

    @unittest.skipUnless(sys.platform.startswith("linux"), "glibc's malloc")
    def test_a_runner_keeps_the_memory_its_calls_free(self):
        # A 32 MB array freed: by default glibc maps it apart (the heap does not move); a runner's
        # malloc takes it from the heap and keeps the heap's top when it is freed, so the next
        # call's temporaries find their pages already there.
        probe = ("import ctypes, sys\nimport numpy as np\nsys.path.insert(0, %r)\nfrom ksearch_harness import runner\n"
                 "if sys.argv[1] == 'runner':\n    runner.keep_freed_memory()\n"
                 "libc = ctypes.CDLL(None)\nlibc.sbrk.restype = ctypes.c_void_p\ntop = lambda: libc.sbrk(ctypes.c_long(0))\n"
                 "before = top()\na = np.ones(1 << 22)\ngrown = top()\ndel a\nprint(grown - before >= 16 << 20, top() == grown)\n") % os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
        default = subprocess.run([sys.executable, "-c", probe, "default"], capture_output=True, text=True, check=True)
        kept = subprocess.run([sys.executable, "-c", probe, "runner"], capture_output=True, text=True, check=True)
        self.assertEqual(default.stdout.split(), ["False", "True"])
        self.assertEqual(kept.stdout.split(), ["True", "True"])

    def test_a_batch_sized_short_by_a_stall_grows_once_its_calls_run_at_speed(self):
        # The first eight calls (the warm-up's three, the sizing batch's five) take 2 ms, as on a
        # machine busy for a moment; every later call is fast. Left at five calls, every batch
        # would carry the judge's round trip five calls at a time.
        stalled = ("import time\nimport numpy as np\n_calls = [0]\n"
                   "def run(x, *, r, c):\n    _calls[0] += 1\n    if _calls[0] <= 8:\n        time.sleep(0.002)\n"
                   "    return (x * 2).astype(np.float32)\n")
        grown, baseline = time_beside_reference(stalled, min_runs=4, max_time_ms=5000.0)
        self.assertEqual(baseline["calls_per_sample"], timing.MAX_CALLS)
        self.assertEqual(grown["calls_per_sample"], timing.MAX_CALLS)
        self.assertLess(grown["median_ms"], 0.3)

    def test_the_quick_whole_output_check_passes_only_what_the_full_one_would(self):
        spec = {"name": "o", "dtype": "f16"}
        tol = {"atol": 3e-3, "rtol": 3e-3, "norm_rtol": 3e-3}
        want = np.random.default_rng(1).standard_normal(4096).astype(np.float16)
        close = (want.astype(np.float32) * 1.0005).astype(np.float16)
        self.assertTrue(timing.close_enough(spec, close, want, tol))
        self.assertIsNone(gauntlet.compare(spec, close, want.astype(np.float64), tol)[1])
        for broken in ("nan", "one", "all"):
            got = close.copy()
            if broken == "nan":
                got[5] = np.nan
            elif broken == "one":
                got[7] += 1
            else:
                # Every element inside its bound, the norm of the difference not.
                got = (want.astype(np.float32) + 0.9 * (3e-3 + 3e-3 * np.abs(want.astype(np.float32)))).astype(np.float16)
            self.assertFalse(timing.close_enough(spec, got, want, tol), broken)
            self.assertIsNotNone(gauntlet.compare(spec, got, want.astype(np.float64), tol)[1], broken)

    def test_sampled_positions_cover_every_call_and_output_unpredictably(self):
        rng = np.random.Generator(np.random.PCG64(1))
        pos = timing.sample_positions(rng, list(range(5)), [100, 3])
        self.assertEqual(len(pos), 5 * (timing.SAMPLED + 3))
        self.assertEqual({(c, t) for c, t, _ in pos}, {(c, t) for c in range(5) for t in range(2)})
        self.assertTrue(all(0 <= i < (100 if t == 0 else 3) for _, t, i in pos))
        again = timing.sample_positions(np.random.Generator(np.random.PCG64(2)), list(range(5)), [100, 3])
        self.assertNotEqual(pos, again)

    def test_a_graph_runner_is_asked_about_some_calls_half_on_the_window(self):
        rng = np.random.Generator(np.random.PCG64(3))
        self.assertEqual(timing.sampled_calls(rng, 64, (10, 4), False), list(range(64)))
        self.assertEqual(timing.sampled_calls(rng, 5, (0, 2), True), list(range(5)))
        seen = set()
        for _ in range(50):
            calls = timing.sampled_calls(rng, 64, (10, 4), True)
            self.assertEqual(len(calls), timing.GRAPH_SAMPLED_CALLS)
            self.assertEqual(len(set(calls)), len(calls))
            self.assertEqual(sum(10 <= c < 14 for c in calls), timing.GRAPH_SAMPLED_CALLS // 2)
            seen.update(calls)
        self.assertGreater(len(seen), 40)
        # A window wider than half the sample: half from it, half from the rest.
        calls = timing.sampled_calls(rng, 64, (0, 60), True)
        self.assertEqual(sum(c < 60 for c in calls), timing.GRAPH_SAMPLED_CALLS // 2)


class ExecRunnerSample(unittest.TestCase):
    """The exec runner's `sample`, with numpy standing in for the MLX calls it makes."""

    class FakeMx:
        take = staticmethod(lambda a, i: np.take(a, i))
        array = staticmethod(np.asarray)
        concatenate = staticmethod(np.concatenate)

    class FakeBackend:
        to_numpy = staticmethod(np.asarray)

    def test_values_come_back_in_the_order_asked(self):
        from ksearch_harness.runner import sample

        # A float output and an integer one, whose large values must come back exact.
        outs = [(np.arange(10.0) + 100 * c, np.arange(4, dtype=np.int64) - c + (1 << 40)) for c in range(3)]
        positions = [(2, 0, 7), (0, 1, 3), (1, 0, 0), (2, 1, 1), (0, 0, 9), (1, 0, 5)]
        got = sample(self.FakeMx, self.FakeBackend, outs, positions)
        big = float(1 << 40)
        self.assertEqual(got.tolist(), [207.0, big + 3, 100.0, big - 1, 9.0, 105.0])


class KernelCache(unittest.TestCase):
    """MLX's kernel cache kept between evaluations (ksearch_harness.kernel_cache)."""

    def setUp(self):
        from ksearch_harness import kernel_cache

        self.kc = kernel_cache
        self.tmp = tempfile.TemporaryDirectory()
        self.shared = os.path.join(self.tmp.name, "mlx-kernels", "v")
        os.makedirs(self.shared)
        for name in ("gather_float32_uint32_1.ptx", "custom_kernel_trusted_step.ptx"):
            with open(os.path.join(self.shared, name), "w") as f:
                f.write(name)
        self.addCleanup(self.tmp.cleanup)

    def view(self, module):
        env = self.kc.executor_env(self.shared, module)
        old = os.environ.get("MLX_PTX_CACHE_DIR")
        self.addCleanup(lambda: os.environ.__setitem__("MLX_PTX_CACHE_DIR", old) if old else os.environ.pop("MLX_PTX_CACHE_DIR", None))
        view = self.kc.private_view(env)
        self.assertEqual(os.environ["MLX_PTX_CACHE_DIR"], view)
        return view

    def test_a_module_directory_is_per_text_and_trust(self):
        a = {"file": "candidate.py", "text": "K = 1\n"}
        one = self.kc.module_dir(self.shared, a, False)
        self.assertEqual(one, self.kc.module_dir(self.shared, dict(a), False))
        self.assertNotEqual(one, self.kc.module_dir(self.shared, {"file": "candidate.py", "text": "K = 2\n"}, False))
        self.assertNotEqual(one, self.kc.module_dir(self.shared, a, True))
        self.assertTrue(os.path.isdir(one))

    def test_an_executor_sees_mlx_kernels_and_its_own_module_only(self):
        module = self.kc.module_dir(self.shared, {"file": "c.py", "text": "x"}, False)
        with open(os.path.join(module, "custom_kernel_mine.ptx"), "w") as f:
            f.write("mine")
        with open(os.path.join(module, "gather_float16_int32_1.ptx"), "w") as f:
            f.write("planted")
        view = self.view(module)
        self.assertEqual(sorted(os.listdir(view)), ["custom_kernel_mine.ptx", "gather_float32_uint32_1.ptx"])
        self.assertTrue(all(os.path.islink(os.path.join(view, n)) for n in os.listdir(view)))
        # What MLX then compiles lands in the view, and only that is handed back.
        with open(os.path.join(view, "custom_kernel_new.ptx"), "w") as f:
            f.write("new")
        self.assertEqual(self.kc.compiled(view), [("custom_kernel_new.ptx", b"new")])

    def test_a_candidate_keeps_its_own_kernels_and_plants_none_of_mlx(self):
        module = self.kc.module_dir(self.shared, {"file": "c.py", "text": "x"}, False)
        files = [("custom_kernel_step.ptx", b"ptx"), ("gather_float16_int32_1.ptx", b"evil"),
                 ("../escape.ptx", b"evil"), ("custom_kernel_trusted_step.ptx", b"other")]
        self.assertEqual(self.kc.keep(self.shared, module, False, files), 2)
        self.assertEqual(sorted(os.listdir(module)), ["custom_kernel_step.ptx", "custom_kernel_trusted_step.ptx"])
        self.assertFalse(os.path.exists(os.path.join(self.shared, "gather_float16_int32_1.ptx")))
        self.assertFalse(os.path.exists(os.path.join(self.tmp.name, "mlx-kernels", "escape.ptx")))
        with open(os.path.join(self.shared, "custom_kernel_trusted_step.ptx")) as f:
            self.assertEqual(f.read(), "custom_kernel_trusted_step.ptx")
        # Another module's executor sees none of them.
        other = self.kc.module_dir(self.shared, {"file": "c.py", "text": "y"}, False)
        self.assertEqual(sorted(os.listdir(self.view(other))), ["gather_float32_uint32_1.ptx"])

    def test_a_trusted_executor_adds_mlx_kernels_and_an_entry_is_never_replaced(self):
        module = self.kc.module_dir(self.shared, {"file": "b.py", "text": "x"}, True)
        kept = self.kc.keep(self.shared, module, True, [("gather_float16_int32_1.ptx", b"g"), ("gather_float32_uint32_1.ptx", b"new")])
        self.assertEqual(kept, 1)
        with open(os.path.join(self.shared, "gather_float32_uint32_1.ptx")) as f:
            self.assertEqual(f.read(), "gather_float32_uint32_1.ptx")

    def test_too_much_is_kept_not_at_all(self):
        module = self.kc.module_dir(self.shared, {"file": "c.py", "text": "x"}, False)
        many = [(f"custom_kernel_{i}.ptx", b"x") for i in range(self.kc.MAX_FILES + 1)]
        self.assertEqual(self.kc.keep(self.shared, module, False, many), 0)
        self.assertEqual(self.kc.keep(self.shared, module, False, [("custom_kernel_big.ptx", b"x" * (self.kc.MAX_BYTES + 1))]), 0)
        self.assertEqual(os.listdir(module), [])

    def test_a_modules_code_is_filed_after_its_names(self):
        module = self.kc.module_dir(self.shared, {"file": "c.py", "text": "x"}, False)
        order = []
        real = os.replace
        self.addCleanup(setattr, os, "replace", real)
        os.replace = lambda a, b: (order.append(os.path.basename(b)), real(a, b))
        files = [("custom_kernel_k_1.cu", b"src"), ("custom_kernel_k_1.ptx", b"code"), ("custom_kernel_k_1.txt", b"k\tk\n")]
        self.assertEqual(self.kc.keep(self.shared, module, False, files), 3)
        self.assertEqual(order[-1], "custom_kernel_k_1.ptx")


# A stand-in for NVRTC and for MLX calling it (from a library Python opens with RTLD_LOCAL, as it
# opens MLX), for the keeper's test.
FAKE_NVRTC = r"""
#include <stdlib.h>
#include <string.h>
typedef struct { int compiled; } prog;
int nvrtcCreateProgram(prog **p, const char *src, const char *name, int n, const char *const *h, const char *const *i) {
  (void)src; (void)name; (void)n; (void)h; (void)i; *p = calloc(1, sizeof(prog)); return 0; }
int nvrtcGetLoweredName(prog *p, const char *expr, const char **out) {
  (void)p; static char buf[256]; strcpy(buf, "_Z_"); strncat(buf, expr, 200); *out = buf; return 0; }
int nvrtcGetCUBINSize(prog *p, size_t *n) { (void)p; *n = 5; return 0; }
int nvrtcGetCUBIN(prog *p, char *out) { (void)p; memcpy(out, "CUBIN", 5); return 0; }
int nvrtcGetPTXSize(prog *p, size_t *n) { (void)p; *n = 4; return 0; }
int nvrtcGetPTX(prog *p, char *out) { (void)p; memcpy(out, "PTX", 4); return 0; }
int nvrtcDestroyProgram(prog **p) { free(*p); *p = 0; return 0; }
"""
FAKE_MLX = r"""
#include <stdlib.h>
typedef struct prog prog;
int nvrtcCreateProgram(prog **, const char *, const char *, int, const char *const *, const char *const *);
int nvrtcGetLoweredName(prog *, const char *, const char **);
int nvrtcGetCUBINSize(prog *, size_t *);
int nvrtcGetCUBIN(prog *, char *);
int nvrtcGetPTXSize(prog *, size_t *);
int nvrtcGetPTX(prog *, char *);
int nvrtcDestroyProgram(prog **);
/* What MLX's compile() does: returns what the real calls returned (0), and the code's first byte. */
int compile(const char *file, int cubin) {
  prog *p; const char *low; size_t n; char code[16];
  int r = nvrtcCreateProgram(&p, "src", file, 0, 0, 0);
  r |= nvrtcGetLoweredName(p, "mlx::core::cu::k", &low);
  r |= cubin ? nvrtcGetCUBINSize(p, &n) : nvrtcGetPTXSize(p, &n);
  r |= cubin ? nvrtcGetCUBIN(p, code) : nvrtcGetPTX(p, code);
  r |= nvrtcDestroyProgram(&p);
  return r != 0 ? -1 : code[0];
}
"""


@unittest.skipUnless(shutil.which("cc") or shutil.which("gcc"), "needs a C compiler (cc)")
class NvrtcKeeper(unittest.TestCase):
    """nvrtc_keep.c, loaded with LD_PRELOAD: NVRTC's code for a `custom_kernel_` module lands where
    MLX reads its cache, and nothing else changes."""

    def setUp(self):
        from ksearch_harness import kernel_cache

        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)
        d = self.tmp.name
        cc = shutil.which("cc") or shutil.which("gcc")
        for name, text in (("nvrtc.c", FAKE_NVRTC), ("mlx.c", FAKE_MLX)):
            with open(os.path.join(d, name), "w") as f:
                f.write(text)
        subprocess.run([cc, "-shared", "-fPIC", "-o", os.path.join(d, "libnvrtc.so.99"), os.path.join(d, "nvrtc.c")], check=True)
        subprocess.run([cc, "-shared", "-fPIC", "-o", os.path.join(d, "libfakemlx.so"), os.path.join(d, "mlx.c"),
                        "-L" + d, "-l:libnvrtc.so.99", "-Wl,-rpath," + d], check=True)
        self.keeper = kernel_cache.keeper(d)
        self.assertIsNotNone(self.keeper)
        self.assertEqual(kernel_cache.keeper(d), self.keeper, "built once per text")
        self.cache = os.path.join(d, "cache")
        os.makedirs(self.cache)

    def compile(self, file, cubin=True):
        script = ("import ctypes, sys; lib = ctypes.CDLL(sys.argv[1]); "
                  "print(lib.compile(sys.argv[2].encode(), int(sys.argv[3])))")
        env = {**os.environ, "LD_PRELOAD": self.keeper, "MLX_PTX_CACHE_DIR": self.cache}
        done = subprocess.run([sys.executable, "-c", script, os.path.join(self.tmp.name, "libfakemlx.so"), file, str(int(cubin))],
                              env=env, capture_output=True, text=True, check=True)
        return int(done.stdout)

    def read(self, name):
        with open(os.path.join(self.cache, name), "rb") as f:
            return f.read()

    def test_a_cuda_kernels_code_and_names_are_kept(self):
        self.assertEqual(self.compile("custom_kernel_step_1_t_float16_9a3f.cu"), ord("C"))
        self.assertEqual(self.read("custom_kernel_step_1_t_float16_9a3f.ptx"), b"CUBIN")
        self.assertEqual(self.read("custom_kernel_step_1_t_float16_9a3f.txt"), b"mlx::core::cu::k\t_Z_mlx::core::cu::k\n")
        self.assertEqual(self.compile("custom_kernel_scan_77.cu", cubin=False), ord("P"))
        self.assertEqual(self.read("custom_kernel_scan_77.ptx"), b"PTX\0")
        self.assertEqual(sorted(os.listdir(self.cache)), ["custom_kernel_scan_77.ptx", "custom_kernel_scan_77.txt",
                                                          "custom_kernel_step_1_t_float16_9a3f.ptx", "custom_kernel_step_1_t_float16_9a3f.txt"])

    def test_other_modules_and_odd_names_are_left_alone(self):
        for file in ("gather_float32_uint32_1.cu", "custom_kernel_../../x.cu", "custom_kernel_k", "custom_kernel_" + "a" * 200 + ".cu"):
            self.assertEqual(self.compile(file), ord("C"), file)
        self.assertEqual(os.listdir(self.cache), [])


if __name__ == "__main__":
    unittest.main()

"""Unit tests of the judge's rules for timed calls that need no GPU: which calls are compared and
kept, warm-up and sizing calls checked, batch sizes taken from timed batches, the CPU a runner
uses while it owes no answer or while another contender is timed, processes a runner leaves
alive, outputs a runner can only write through a descriptor, and MLX answers a graph cannot
hold. Run with the rest: python3 -m unittest discover -s harness/tests."""

import importlib.util
import mmap
import os
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import numpy as np  # noqa: E402

from ksearch_harness import contenders, link, shared, timing  # noqa: E402
from ksearch_harness.timed_checks import Reservoir, TimedIncorrect, Window  # noqa: E402
from test_harness import REF, TASK, TOL, WORKLOAD, direct, time_beside_reference  # noqa: E402

# Whether a direct runner's call is a timed round's, a warm-up's or a sizing batch's, as a module
# sharing the runner's interpreter can read it from the runner's frame: warm-up batches hold one
# call, the first batch of several calls sizes the batches, every later one is a round's.
PHASE = """import sys
_phase = {"last": None, "several": 0}


def _ctx():
    f = sys._getframe(2)
    while f is not None:
        h = f.f_locals.get("h")
        if isinstance(h, dict) and "s" in f.f_locals:
            return h, f.f_locals["s"]
        f = f.f_back
    return None, None


def _phase_of():
    h, s = _ctx()
    if h is None or h.get("op") != "go":
        return "checked", 0
    if h is not _phase["last"]:
        _phase["last"] = h
        if len(h["sets"]) > 1:
            _phase["several"] += 1
    if len(h["sets"]) == 1 and _phase["several"] == 0:
        return "warm-up", 0
    if _phase["several"] <= 1:
        return "sizing", h["sets"].index(s)
    return "timed", h["sets"].index(s)
"""


def phased(body):
    """A module on TASK whose `run` knows its phase (`phase`) and its place in the batch (`at`)."""
    lines = "".join(f"    {line}\n" for line in body.splitlines())
    return f"import numpy as np\n{PHASE}\n\ndef run(x, *, r, c):\n    phase, at = _phase_of()\n{lines}"


def timed_beside_reference(text, **plan):
    """`time_beside_reference`, the TimedIncorrect it raises or None."""
    try:
        time_beside_reference(text, **plan)
    except TimedIncorrect as e:
        return e
    return None


class WhichCallsAreCompared(unittest.TestCase):
    def test_every_set_of_a_round_is_in_the_baselines_window_equally_often(self):
        # A window confined to the round's sets put its first and last sets in it once in
        # (span - width + 1) rounds, its middle ones up to `width` times as often.
        rng = np.random.Generator(np.random.PCG64(5))
        span, width, trials = 64, 12, 32000
        hits = np.zeros(span)
        for _ in range(trials):
            w = Window.draw(rng, span, width)
            self.assertEqual(len(w.sets()), width)
            for j, s in enumerate(w.sets()):
                self.assertEqual(w.index(s), j)
                hits[s] += 1
            self.assertEqual(sum(w.index(s) is not None for s in range(span)), width)
        expected = trials * width / span
        self.assertLess(np.abs(hits - expected).max(), 0.06 * expected, hits)
        # A baseline as long as the round covers all of it.
        w = Window.draw(rng, 5, 5)
        self.assertEqual(sorted(w.sets()), list(range(5)))

    def test_kept_calls_are_drawn_uniformly_over_every_timed_call(self):
        # Batches of different sizes, as a contender's grow; every call of every batch must be
        # kept with the same chance (they were drawn from the first calls of a batch only).
        batches = [3, 5, 8, 8, 13, 13, 13, 20]
        total = sum(batches)
        rng = np.random.Generator(np.random.PCG64(9))
        hits = np.zeros(total)
        trials = 6000
        for _ in range(trials):
            r = Reservoir(4)
            slots = [None] * 4
            at = 0
            for k in batches:
                for slot, call in r.offer(rng, k):
                    slots[slot] = at + call
                at += k
            self.assertNotIn(None, slots)
            self.assertEqual(len(set(slots)), 4)
            for s in slots:
                hits[s] += 1
        expected = trials * 4 / total
        self.assertLess(np.abs(hits - expected).max(), 0.2 * expected, hits)

    def test_cheap_answers_late_in_every_timed_batch_are_caught(self):
        # Honest in warm-up, sizing and the first three calls of a round's batch; from the
        # fourth on, an answer of the right shape that is wrong.
        e = timed_beside_reference(phased("if phase == 'timed' and at >= 3:\n    return np.zeros_like(x) + 0.5\nreturn (x * 2).astype(np.float32)"),
                                   min_runs=6)
        self.assertIsNotNone(e)
        self.assertEqual(e.index, 0)
        self.assertIn("while timed", e.message)

    def test_cheap_answers_on_the_last_call_of_every_timed_batch_are_caught(self):
        # One call in a batch of 64: compared with the baseline only where its window reaches
        # the batch's end; the kept calls reach it too.
        e = timed_beside_reference(phased("h, s = _ctx()\nif phase == 'timed' and at == len(h['sets']) - 1:\n    return (x * 2.01).astype(np.float32)\nreturn (x * 2).astype(np.float32)"),
                                   min_runs=40, min_time_ms=1.0, max_time_ms=20000.0)
        self.assertIsNotNone(e)
        self.assertEqual(e.index, 0)
        self.assertIn("while timed", e.message)


class WarmUpAndSizing(unittest.TestCase):
    def test_no_work_in_warm_up_is_caught(self):
        e = timed_beside_reference(phased("if phase == 'warm-up':\n    return np.full(x.shape, np.nan, dtype=np.float32)\nreturn (x * 2).astype(np.float32)"))
        self.assertIsNotNone(e)
        self.assertIn("while timed in warm-up", e.message)
        self.assertIn("was the work skipped", e.message)

    def test_a_cheap_answer_in_warm_up_is_caught(self):
        e = timed_beside_reference(phased("if phase == 'warm-up':\n    return x.astype(np.float32)\nreturn (x * 2).astype(np.float32)"))
        self.assertIsNotNone(e)
        self.assertIn("while timed in warm-up", e.message)
        self.assertIn("where the baseline gives", e.message)

    def test_a_cheap_answer_while_sizing_is_caught(self):
        e = timed_beside_reference(phased("if phase == 'sizing':\n    return x.astype(np.float32)\nreturn (x * 2).astype(np.float32)"))
        self.assertIsNotNone(e)
        self.assertIn("while timed in a sizing batch", e.message)

    def test_a_candidate_turning_wrong_after_its_first_calls_is_caught_before_timing(self):
        cheat = "import numpy as np\n_n = [0]\ndef run(x, *, r, c):\n    _n[0] += 1\n    return (x * (2 if _n[0] < 3 else 3)).astype(np.float32)\n"
        e = timed_beside_reference(cheat)
        self.assertIsNotNone(e)
        self.assertIn("while timed in warm-up", e.message)

    def test_a_wrong_timed_output_is_caught(self):
        e = timed_beside_reference(phased("if phase == 'timed':\n    return (x * 3).astype(np.float32)\nreturn (x * 2).astype(np.float32)"))
        self.assertIsNotNone(e)
        self.assertIn("while timed", e.message)


class BatchSizes(unittest.TestCase):
    def test_the_sizing_calls_do_not_decide_a_timed_batchs_size(self):
        # Fast while sizing, half a millisecond a call once timed: 10 ms batches hold 20 calls,
        # not the 64 its sizing asked for.
        slow = phased("if phase == 'timed':\n    time.sleep(0.0005)\nreturn (x * 2).astype(np.float32)").replace("import numpy as np", "import time\nimport numpy as np", 1)
        cheat, baseline = time_beside_reference(slow, min_runs=4)
        self.assertEqual(baseline["calls_per_sample"], timing.MAX_CALLS)
        self.assertLess(cheat["calls_per_sample"], 30)
        self.assertGreaterEqual(cheat["calls_per_sample"], 8)

    def test_a_batch_slow_while_sizing_grows_past_the_sizing_rounds_sets(self):
        # Slow while sizing (a few calls a batch), fast once timed: its batches grow to what its
        # fastest asks for, beyond the sets the first round held.
        slow = phased("if phase != 'timed' and phase != 'checked':\n    time.sleep(0.004)\nreturn (x * 2).astype(np.float32)").replace("import numpy as np", "import time\nimport numpy as np", 1)
        runs = [direct(slow), direct(slow)]
        plan = {"warmup_ms": 1.0, "min_runs": 4, "min_time_ms": 1.0, "max_time_ms": 5000.0, "target_sample_ms": 1.0, "rotate_bytes": 1 << 16}
        made = []

        def pools(task, workload, sets):
            made.append(sets)
            return contenders.Pool(task, workload, sets)
        try:
            runs[1].trusted = True
            out = timing.time_workload(TASK, WORKLOAD, plan, TOL, runs, 1, new_pool=pools)
        finally:
            for r in runs:
                r.stop()
        self.assertEqual(out[0]["calls_per_sample"], timing.MAX_CALLS)
        self.assertEqual(max(made), timing.MAX_CALLS)
        self.assertLess(made[1], timing.MAX_CALLS)


class FakeClocked:
    """A contender for `timing.Watch`: a CPU clock the test moves, processes the test names."""

    def __init__(self, trusted=False, role="candidate", label="fake"):
        self.trusted, self.role, self.label = trusted, role, label
        self.cpu, self.found = 0.0, []

    def cpu_seconds(self):
        return self.cpu

    def strays(self):
        return self.found


class WhileOthersAreTimed(unittest.TestCase):
    def test_cpu_used_while_another_contender_is_timed_is_refused_after_one_reading(self):
        cand, base = FakeClocked(), FakeClocked(True, "baseline", "reference")
        watch = timing.Watch([cand, base], WORKLOAD)

        def batch(work):
            def run():
                cand.cpu += work
                return 0.010
            return watch.batch(1, run)
        # 100 µs and 1% of a 10 ms batch: 200 µs is allowed.
        batch(150e-6)
        batch(190e-6)
        batch(400e-6)  # forgiven once
        with self.assertRaises(TimedIncorrect) as e:
            batch(400e-6)
        self.assertEqual(e.exception.index, 0)
        self.assertIn("outside its timed calls while the baseline `reference` was timed", e.exception.message)
        # Its own batch is its own.
        cand.cpu = 0.0
        self.assertEqual(timing.Watch([cand, base], WORKLOAD).batch(0, lambda: (setattr(cand, "cpu", 1.0), 0.01)[1]), 0.01)

    def test_a_process_left_alive_stops_the_timing(self):
        cand, base = FakeClocked(), FakeClocked(True)
        base.found = [(4242, "trusted-compile-worker")]
        watch = timing.Watch([cand, base], WORKLOAD)
        self.assertEqual(watch.batch(1, lambda: 0.01), 0.01)
        cand.found = [(4243, "python3")]
        with self.assertRaises(TimedIncorrect) as e:
            watch.batch(1, lambda: 0.01)
        self.assertEqual(e.exception.index, 0)
        self.assertIn("python3 (pid 4243)", e.exception.message)

    def test_cpu_a_runner_uses_while_it_owes_no_answer_is_its_next_batchs(self):
        # A thread that works 30 ms after each call returns, while the judge reads the outputs
        # and times the others: charged to the next batch, whose time then holds it.
        text = ("import threading, time\nimport numpy as np\n_go = threading.Event()\n"
                "def _later():\n    while True:\n        _go.wait()\n        _go.clear()\n        time.sleep(0.005)\n"
                "        end = time.thread_time() + 0.03\n        while time.thread_time() < end:\n            pass\n"
                "threading.Thread(target=_later, daemon=True).start()\n"
                "def run(x, *, r, c):\n    _go.set()\n    return (x * 2).astype(np.float32)\n")
        c = direct(text)
        pool = contenders.Pool(TASK, WORKLOAD, 1)
        try:
            pool.fill(TASK, WORKLOAD, 0, 1)
            c.map_pool(pool)
            c.call(pool, [0], True)
            time.sleep(0.1)
            seconds = c.call(pool, [0], True)
            self.assertGreater(c.runner.charge, 0.025)
            self.assertGreater(seconds, 0.025)
            c.drop_pool(pool)
        finally:
            pool.close()
            c.stop()


class Descendants(unittest.TestCase):
    def test_processes_a_runner_started_are_found_until_they_end(self):
        # A runner allowed to start processes (a GPU runner, on the GPU) starts one that waits,
        # and a `setsid` one: both are found; once they end, none is.
        text = ("import os, subprocess, sys\nimport numpy as np\n"
                "_p = [subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']),\n"
                "      subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'], start_new_session=True)]\n"
                "def run(x, *, r, c):\n    for p in _p:\n        p.kill()\n        p.wait()\n    return (x * 2).astype(np.float32)\n")
        runner = link.Runner("direct", "numpy", tempfile.mkdtemp(prefix="sandbox-root-"), False, 4 << 30, allow_fork=True)
        c = contenders.DirectContender.__new__(contenders.DirectContender)
        c.role, c.label, c.trusted, c.source, c.runner, c.pools, c.begun = "candidate", "c.py", False, {"file": "c.py", "text": text}, runner, {}, False
        c.settings = None
        try:
            c.finish()
            found = []
            for _ in range(100):
                found = c.strays()
                if len(found) >= 2:
                    break
                time.sleep(0.05)
            self.assertEqual(len(found), 2, found)
            with self.assertRaises(TimedIncorrect) as e:
                timing.Watch([c], WORKLOAD).strays()
            self.assertIn("still running", e.exception.message)
            pool = contenders.Pool(TASK, WORKLOAD, 1)
            try:
                pool.fill(TASK, WORKLOAD, 0, 1)
                c.map_pool(pool)
                c.call(pool, [0], False)
                self.assertEqual(c.strays(), [])
                c.drop_pool(pool)
            finally:
                pool.close()
        finally:
            c.stop()

    def test_a_runner_that_may_start_no_process_is_not_searched(self):
        c = direct(REF)
        try:
            self.assertEqual(c.strays(), [])
        finally:
            c.stop()


@unittest.skipUnless(sys.platform.startswith("linux"), "memfds are Linux's")
class WriteOnlyOutputs(unittest.TestCase):
    def test_a_runner_can_write_its_outputs_but_neither_map_nor_read_them(self):
        layout = shared.Layout(2, [((3, 5), np.float32)], [((3, 5), np.float32)])
        region = shared.Region(layout.output_region(), write_only=True)
        try:
            fd = region.wo_fd
            for prot in (mmap.PROT_READ, mmap.PROT_READ | mmap.PROT_WRITE):
                with self.assertRaises(OSError):
                    mmap.mmap(fd, region.size, mmap.MAP_SHARED, prot)
            with self.assertRaises(OSError):
                os.pread(fd, 4, 0)
            # Reopened through /proc: as root the permission bits do not hold, and the judge
            # itself is the file's owner here; a runner is neither (tested in the sandbox by the
            # conformance suite). The size is sealed either way.
            with self.assertRaises(PermissionError):
                os.ftruncate(fd, 0)
            self.assertEqual(os.fstat(region.fd).st_mode & 0o777, 0o200)
            y = np.arange(15, dtype=np.float32).reshape(3, 5)
            shared.write_all(fd, y, layout.output_offset(1, 0))
            np.testing.assert_array_equal(layout.output_views(region.map, 1)[0], y)
            shared.write_all(fd, np.zeros((0,), np.float32), 0)
        finally:
            region.close()

    def test_a_direct_runners_outputs_reach_the_judge(self):
        c = direct(REF)
        pool = contenders.Pool(TASK, WORKLOAD, 3)
        try:
            for s in range(3):
                pool.fill(TASK, WORKLOAD, s, s + 1)
            c.map_pool(pool)
            c.call(pool, [0, 1, 2], True)
            for s in range(3):
                np.testing.assert_array_equal(c.outputs(pool, s)[0], pool.input_arrays(s)[0] * 2)
                self.assertIsNone(shared.broken_guard(pool.layout, c.pools[pool.id].map, s))
            c.drop_pool(pool)
        finally:
            pool.close()
            c.stop()


@unittest.skipUnless(importlib.util.find_spec("mlx") is not None, "needs MLX (pip install \"mlx[cpu]\")")
class TracedAnswers(unittest.TestCase):
    W = {"name": "w", "axes": {"r": 3, "c": 5}, "inputs": [[[3, 5], "f32"]], "n_outputs": 1, "outputs": ["y"]}

    def export(self, text, workloads=1):
        from ksearch_harness.arrays import arrays_for
        from ksearch_harness.candidates import load_module
        from ksearch_harness.runner import export

        arrays = arrays_for("cpu")
        run = load_module({"file": "candidate.py", "text": text}, "cpu")
        return [export(arrays.mx, arrays, run, {**self.W, "name": f"w{i}"}) for i in range(workloads)]

    def test_arrays_of_an_earlier_trace_are_refused_not_written(self):
        # MLX 0.32.4 wrote such a graph by reading memory the arrays do not have: SIGSEGV.
        from ksearch_harness.candidates import BadAnswer

        for kept in ("_kept[0]", "_kept[0] + x", "_inputs[0]", "_inputs[0] * 2.0"):
            text = ("import mlx.core as mx\n_kept, _inputs = [], []\n"
                    f"def run(x, *, r, c):\n    if _kept:\n        return {kept}\n"
                    "    _inputs.append(x)\n    _kept.append(mx.exp(x) * 2.0)\n    return _kept[0]\n")
            with self.subTest(kept=kept), self.assertRaises(BadAnswer) as e:
                self.export(text, 2)
            self.assertIn("another trace", str(e.exception))

    def test_arrays_of_a_trace_of_the_modules_own_are_refused(self):
        from ksearch_harness.candidates import BadAnswer

        text = ("import mlx.core as mx\n_kept = []\n"
                "mx.export_function(lambda m: None, lambda a: (_kept.append(a * 3.0) or a,), mx.zeros((3, 5)))\n"
                "def run(x, *, r, c):\n    return x + _kept[0]\n")
        with self.assertRaises(BadAnswer):
            self.export(text)

    def test_honest_answers_with_constants_and_the_inputs_themselves_are_traced(self):
        from ksearch_harness.arrays import arrays_for

        mx = arrays_for("cpu").mx
        for body in ("return x", "return mx.exp(x) * _w + 2.0", "return (x * 2.0,)", "x[0, :] = 0.0\n    return x * 2.0"):
            text = f"import mlx.core as mx\n_w = mx.array([1.0, 2.0, 3.0, 4.0, 5.0])\ndef run(x, *, r, c):\n    {body}\n"
            blob = self.export(text)[0]
            with tempfile.TemporaryDirectory() as d:
                path = os.path.join(d, "f.mlxfn")
                with open(path, "wb") as f:
                    f.write(blob)
                fn = mx.import_function(path)
                x = mx.random.normal((3, 5))
                zeroed = mx.concatenate([mx.zeros((1, 5)), x[1:]]) * 2.0
                want = {"return x": x, "return (x * 2.0,)": x * 2.0}.get(body, zeroed if "x[0" in body else mx.exp(x) * mx.array([1.0, 2.0, 3.0, 4.0, 5.0]) + 2.0)
                self.assertTrue(mx.allclose(fn(x)[0], want).item(), body)

    def test_an_answer_that_is_no_array_is_a_bad_answer(self):
        from ksearch_harness.candidates import BadAnswer

        for body in ("return [[0.0]]", "return None", "return 1.5", "return (x, x)"):
            with self.subTest(body=body), self.assertRaises(BadAnswer):
                self.export(f"def run(x, *, r, c):\n    {body}\n")

    def test_a_wrapping_window_of_a_graph_round_holds_the_rounds_sets(self):
        from ksearch_harness.arrays import arrays_for, round_inputs

        arrays = arrays_for("cpu")
        mx = arrays.mx
        shapes = [(2, 64), (3, 5), (2048,)]
        specs = [{"name": f"x{i}", "dtype": d} for i, d in enumerate(["f32", "f16", "f32"])]
        whole = round_inputs(mx, arrays, specs, shapes, 4, 7)
        for first, n in [(5, 4), (6, 7), (1, 7)]:
            part = round_inputs(mx, arrays, specs, shapes, 4, 7, keep=(first, n))
            self.assertEqual(len(part), n)
            for j, s in enumerate(part):
                for a, b in zip(s, whole[(first + j) % 7]):
                    self.assertTrue(mx.array_equal(a, b).item(), (first, n, j))


if __name__ == "__main__":
    unittest.main()

"""The mlx-lm Mamba adapter on MLX's CPU device, with mlx-lm's real Mamba model (small sizes,
random weights) and stand-in exports: packages laid out as `ksearch export` writes them whose
function is the task's trusted reference in MLX ops (custom kernels need a GPU). Run:
python3 -m unittest discover -s adapters/tests (needs mlx and mlx-lm, which may be installed
without its dependencies: only its model code is imported)."""

import importlib.util
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import types
import unittest

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
sys.path.insert(0, os.path.join(ROOT, "adapters"))

import mlx.core as mx  # noqa: E402

import mlx_lm_mamba  # noqa: E402


def mamba_module():
    """mlx-lm's Mamba model code, without the package's __init__ (which imports the hub client)."""
    if "mlx_lm.models.mamba" not in sys.modules:
        spec = importlib.util.find_spec("mlx_lm")
        if spec is None:
            raise unittest.SkipTest("needs mlx-lm (pip install --no-deps mlx-lm)")
        stub = types.ModuleType("mlx_lm")
        stub.__path__ = list(spec.submodule_search_locations)
        sys.modules.setdefault("mlx_lm", stub)
    from mlx_lm.models import mamba

    return mamba


def write_export(folder, task, workloads):
    """A folder as `ksearch export` lays it out, whose function is mlx/TASK's reference and which
    counts its calls in its global CALLS."""
    package = os.path.join(folder, task)
    os.makedirs(package)
    with open(os.path.join(ROOT, "tasks", "mlx", task, "reference.py")) as f:
        reference = f.read()
    with open(os.path.join(package, "_candidate.py"), "w") as f:
        f.write(reference)
    axes = ["batch", "seqlen", "dinner", "dstate"] if task == "selective_scan" else ["batch", "dinner", "dstate"]
    with open(os.path.join(package, "__init__.py"), "w") as f:
        f.write(
            "import importlib.util, os\n"
            "_spec = importlib.util.spec_from_file_location(__name__ + '._candidate', os.path.join(os.path.dirname(__file__), '_candidate.py'))\n"
            "_candidate = importlib.util.module_from_spec(_spec)\n_spec.loader.exec_module(_candidate)\n"
            "CALLS = []\n"
            f"def {task}(*args):\n"
            f"    CALLS.append(1)\n"
            f"    names = {axes!r}\n"
            "    shape = {'batch': args[0].shape[0], 'dinner': args[2].shape[0] if len(names) == 4 else args[0].shape[1], 'dstate': args[2].shape[1] if len(names) == 4 else args[0].shape[2]}\n"
            "    if len(names) == 4:\n        shape['seqlen'] = args[0].shape[1]\n"
            "    return _candidate.run(*args, **shape)\n"
        )
    with open(os.path.join(folder, "provenance.json"), "w") as f:
        json.dump({"task": {"name": task}, "measurements": [{"status": "passed", "axes": w} for w in workloads]}, f)
    return folder


class Adapter(unittest.TestCase):
    def setUp(self):
        mamba = mamba_module()
        mx.random.seed(0)
        args = mamba.ModelArgs(model_type="mamba", vocab_size=96, hidden_size=32, intermediate_size=64, state_size=16,
                               num_hidden_layers=2, conv_kernel=4, use_bias=False, use_conv_bias=True, time_step_rank=4)
        self.model = mamba.Model(args)
        # Weights in the range of a trained model's, so the recurrence is not trivial.
        for layer in self.model.layers:
            layer.mixer.dt_proj.bias = mx.random.uniform(-4.0, -2.0, layer.mixer.dt_proj.bias.shape)
        mx.eval(self.model.parameters())
        self.tmp = tempfile.mkdtemp()
        scan_workloads = [{"batch": 1, "seqlen": n, "dinner": 64, "dstate": 16} for n in (16, 32)]
        step_workloads = [{"batch": b, "dinner": 64, "dstate": 16} for b in (1, 4)]
        self.scan = mlx_lm_mamba.load_export(write_export(os.path.join(self.tmp, "scan"), "selective_scan", scan_workloads))
        self.step = mlx_lm_mamba.load_export(write_export(os.path.join(self.tmp, "step"), "selective_state_update", step_workloads))
        # The calls the exported files themselves counted.
        self.scan_calls = self.scan.fn.__globals__["CALLS"]
        self.step_calls = self.step.fn.__globals__["CALLS"]

    def logits(self, tokens, cache=None):
        out = self.model(mx.array(tokens), cache=cache)
        mx.eval(out)
        return out

    def test_prefill_and_decode_match_mlx_lm_and_run_the_exported_files(self):
        prompt = [[int(t) for t in mx.random.randint(0, 96, (32,)).tolist()]]
        cache = self.model.make_cache()
        want = self.logits(prompt, cache)
        want_steps = []
        token = [[int(mx.argmax(want[0, -1]).item())]]
        tokens_a = [token[0][0]]
        for _ in range(8):
            out = self.logits(token, cache)
            want_steps.append(out)
            token = [[int(mx.argmax(out[0, -1]).item())]]
            tokens_a.append(token[0][0])

        self.assertEqual(mlx_lm_mamba.install(self.model, scan=self.scan, step=self.step), 2)
        cache = self.model.make_cache()
        got = self.logits(prompt, cache)
        self.assertLess(float(mx.abs(got - want).max()), 1e-3 * float(mx.abs(want).max()) + 1e-4)
        token = [[int(mx.argmax(got[0, -1]).item())]]
        tokens_b = [token[0][0]]
        for w in want_steps:
            out = self.logits(token, cache)
            self.assertLess(float(mx.abs(out - w).max()), 1e-3 * float(mx.abs(w).max()) + 1e-4)
            token = [[int(mx.argmax(out[0, -1]).item())]]
            tokens_b.append(token[0][0])
        self.assertEqual(tokens_a, tokens_b)
        # Two blocks: one scan each for the prompt, one step each per decoded token.
        self.assertEqual(len(self.scan_calls), 2)
        self.assertEqual(len(self.step_calls), 2 * 8)
        self.assertEqual(mlx_lm_mamba.stats(self.model), {"scan kernel": 2, "step kernel": 16})

    @unittest.skipUnless(shutil.which("g++"), "needs g++ to emulate the CUDA kernel on the CPU")
    def test_a_decode_steps_convolution_is_one_kernel_that_matches_mlx_lm(self):
        # The convolution's CUDA kernel emulated on the CPU (the project's emulator of MLX's
        # cuda_kernel, tests/fixtures/cuda_emulate), in an f16 model as the bench runs it.
        sys.path.insert(0, os.path.join(ROOT, "crates", "ksearch", "tests", "fixtures", "cuda_emulate"))
        from emulate import Emulator

        self.model.set_dtype(mx.float16)
        prompt = [[int(t) for t in mx.random.randint(0, 96, (32,)).tolist()]]

        def generate():
            cache = self.model.make_cache()
            out = self.logits(prompt, cache)
            outs, tokens = [], []
            for _ in range(8):
                tokens.append(int(mx.argmax(out[0, -1]).item()))
                out = self.logits([[tokens[-1]]], cache)
                outs.append(out)
            return outs, tokens, cache

        want, want_tokens, want_cache = generate()
        mlx_lm_mamba.install(self.model, scan=self.scan, step=self.step)
        gpu, kernel = mlx_lm_mamba._gpu, mx.fast.cuda_kernel
        with tempfile.TemporaryDirectory() as work:
            try:
                mlx_lm_mamba._gpu = lambda: "cuda"
                mx.fast.cuda_kernel = Emulator(work).cuda_kernel
                mlx_lm_mamba._conv_kernels.clear()
                got, got_tokens, got_cache = generate()
            finally:
                mlx_lm_mamba._gpu, mx.fast.cuda_kernel = gpu, kernel
                mlx_lm_mamba._conv_kernels.clear()
        self.assertEqual(got_tokens, want_tokens)
        for g, w in zip(got, want):
            self.assertLess(float(mx.abs(g - w).max()), 2e-2 * float(mx.abs(w).max()))
        # The caches moved on alike (the kernel writes the new one; mlx-lm slices its concatenation).
        for g, w in zip(got_cache, want_cache):
            self.assertLess(float(mx.abs(g[0].astype(mx.float32) - w[0].astype(mx.float32)).max()), 1e-2)
        self.assertEqual(mlx_lm_mamba.stats(self.model), {"scan kernel": 2, "step kernel": 16, "conv step kernel": 16})

    def test_a_compiled_decode_step_matches_the_model_and_updates_the_cache(self):
        mlx_lm_mamba.install(self.model, scan=self.scan, step=self.step)
        prompt = mx.random.randint(0, 96, (1, 16))
        eager, compiled = self.model.make_cache(), self.model.make_cache()
        for cache in (eager, compiled):
            mx.eval(self.model(prompt, cache=cache))
        step = mlx_lm_mamba.compile_decode(self.model)
        token = mx.array([[5]])
        for _ in range(4):
            want = self.model(token, cache=eager)
            got = step(token, compiled)
            self.assertLess(float(mx.abs(got - want).max()), 1e-4)
            for a, b in zip(eager, compiled):
                self.assertLess(float(mx.abs(a[1] - b[1]).max()), 1e-4)
                self.assertTrue(mx.array_equal(a[0], b[0]).item())
            token = mx.argmax(want[:, -1], axis=-1, keepdims=True)
        paths = mlx_lm_mamba.stats(self.model)
        self.assertEqual(paths["compiled decode step"], 4 * len(self.model.layers))
        # The exported step was traced into the compiled function.
        self.assertGreater(len(sys.modules[self.step.fn.__module__].CALLS), 4)
        # Without a prefill's caches the model runs as it is.
        fresh = self.model.make_cache()
        self.assertTrue(mx.array_equal(step(prompt, fresh), self.model(prompt, cache=self.model.make_cache())).item())

    def test_the_end_to_end_bench_runs_with_stand_in_exports(self):
        """bench/mamba_e2e.py on mamba-370m's sizes with two layers (--tiny), on the CPU."""
        mamba_module()
        size = {"dinner": 2048, "dstate": 16}
        scan = write_export(os.path.join(self.tmp, "scan370"), "selective_scan", [{"batch": 1, "seqlen": n, **size} for n in (16, 32)])
        step = write_export(os.path.join(self.tmp, "step370"), "selective_state_update", [{"batch": 1, **size}])
        out = os.path.join(self.tmp, "e2e.json")
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([os.path.join(ROOT, "adapters"), os.environ.get("PYTHONPATH", "")])}
        subprocess.run([sys.executable, os.path.join(ROOT, "bench", "mamba_e2e.py"), "--scan", scan, "--step", step, "--out", out,
                        "--tiny", "--lengths", "16,32", "--prompt", "16", "--decode", "4", "--reps", "1"],
                       env=env, check=True, capture_output=True, timeout=600)
        with open(out) as f:
            result = json.load(f)
        self.assertTrue(result["check"]["greedy_32_same"])
        for side in ("mlx_lm", "mlx_lm_kernels"):
            # Every decode (eager or compiled steps, each token read or pipelined) gave the
            # tokens of the eager decode read step by step.
            for decode in ("decode", "decode_pipelined", "decode_compiled", "decode_compiled_pipelined"):
                self.assertTrue(result[side][f"{decode}_greedy_32_same"], (side, decode))
                self.assertGreater(result[side][f"{decode}_tokens_per_s"], 0, (side, decode))
                self.assertEqual(len(result[side][f"{decode}_samples"]), 3, (side, decode))
            self.assertEqual(set(result[side]["prefill_tokens_per_s"]), {"16", "32"})
        paths = result["mlx_lm_kernels"]["paths"]
        self.assertGreater(paths["scan kernel"], 0)
        self.assertGreater(paths["compiled decode step"], 0)
        self.assertNotIn("scan kernel", result["mlx_lm"]["paths"])
        breakdown = result["decode_breakdown"]
        for key in ("step_ms", "compiled_step_ms", "state_update_kernels_ms", "without_blocks_ms"):
            self.assertGreater(breakdown[key], 0, key)
        self.assertGreater(breakdown["weight_bytes"], 2 * 50280 * 1024)
        prefill = result["prefill_breakdown"]
        self.assertEqual(prefill["length"], 32)
        for key in ("prefill_ms", "without_scans_ms", "scans_on_model_inputs_ms", "scans_on_real_inputs_ms",
                    "scans_one_at_a_time_ms", "scans_on_random_inputs_ms", "in_projections_ms", "convolutions_ms", "x_projections_ms", "dt_projections_ms", "out_projections_ms"):
            self.assertGreater(prefill[key], 0, key)
        self.assertEqual(prefill["real_inputs_nonfinite"], 0)
        # The third column is written before the breakdowns, so that a failing breakdown
        # cannot lose it; mlx-lm's own column, whose prefill is the slow one, comes last.
        self.assertLess(list(result).index("mamba_py"), list(result).index("decode_breakdown"))
        self.assertEqual(result["order"], ["mlx_lm_kernels", "mlx_lm_kernels_without_conv_step", "mamba_py", "mlx_lm"])
        for side in ("mlx_lm", "mlx_lm_kernels"):
            for n, ts in result[side]["prefill_samples_s"].items():
                self.assertGreaterEqual(len(ts), 1, (side, n))
                self.assertAlmostEqual(result[side]["prefill_tokens_per_s"][n], int(n) / statistics.median(ts))

    def test_a_prefill_length_s_repetitions_stop_at_its_time_budget(self):
        """bench/mamba_e2e.py's `samples`, on a clock that each call moves on by 10 s: the warm-up
        and one timed call always run, and no call begins that the budget cannot hold."""
        spec = importlib.util.spec_from_file_location("mamba_e2e", os.path.join(ROOT, "bench", "mamba_e2e.py"))
        bench = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(bench)
        clock = [0.0]
        bench.time = types.SimpleNamespace(perf_counter=lambda: clock[0])

        def call():
            clock[0] += 10.0

        self.assertEqual(bench.samples(call, 3), [10.0] * 3)
        self.assertEqual(bench.samples(call, 3, max_s=25), [10.0])
        self.assertEqual(bench.samples(call, 3, max_s=30), [10.0, 10.0])
        self.assertEqual(bench.samples(call, 3, max_s=5), [10.0])
        # The least time still holds within the budget: 0.5 s calls until 2 s have passed.
        clock[0] = 0.0
        self.assertEqual(len(bench.samples(lambda: clock.__setitem__(0, clock[0] + 0.5), 1, max_s=60)), 4)

    def test_shapes_outside_what_was_verified_fall_back_to_mlx_lm(self):
        want = self.logits([[1, 2, 3, 4, 5, 6, 7]])
        mlx_lm_mamba.install(self.model, scan=self.scan, step=self.step)
        got = self.logits([[1, 2, 3, 4, 5, 6, 7]])  # length 7: not a verified length
        self.assertEqual(len(self.scan_calls), 0)
        self.assertTrue(mx.array_equal(got, want).item())
        self.assertEqual(mlx_lm_mamba.stats(self.model), {"mlx-lm": 2})
        # A length between verified ones, on their grid, fits; one beyond the longest does not.
        self.assertTrue(self.scan.fits(batch=1, seqlen=48 - 16, dinner=64, dstate=16))
        self.assertFalse(self.scan.fits(batch=1, seqlen=48, dinner=64, dstate=16))
        self.assertFalse(self.scan.fits(batch=2, seqlen=32, dinner=64, dstate=16))
        self.assertFalse(self.step.fits(batch=1, dinner=128, dstate=16))
        self.assertTrue(self.step.fits(batch=3, dinner=64, dstate=16))

    def test_installing_twice_keeps_mlx_lm_as_the_fallback(self):
        mlx_lm_mamba.install(self.model, scan=self.scan, step=None)
        mlx_lm_mamba.install(self.model, scan=None, step=None)
        want_calls = len(self.scan_calls)
        self.logits([[1] * 16])
        self.assertEqual(len(self.scan_calls), want_calls)
        self.assertEqual(mlx_lm_mamba.stats(self.model), {"mlx-lm": 2})

    def test_a_and_d_are_computed_at_install_and_again_for_new_weights(self):
        mlx_lm_mamba.install(self.model, scan=self.scan, step=self.step)
        block = self.model.layers[1].mixer
        A, D = mlx_lm_mamba._a_and_d(block)
        self.assertIs(A, block._ksearch_constants[2])
        self.assertTrue(mx.allclose(A, -mx.exp(block.A_log)).item())
        # New weights after install: A follows them, and so do the logits.
        prompt = [[int(t) for t in mx.random.randint(0, 96, (16,)).tolist()]]
        block.A_log = block.A_log + 0.5
        A, _ = mlx_lm_mamba._a_and_d(block)
        self.assertIsNot(A, block._ksearch_constants[2])
        self.assertTrue(mx.allclose(A, -mx.exp(block.A_log)).item())
        got = self.logits(prompt)
        mlx_lm_mamba.install(self.model, scan=None, step=None)
        want = self.logits(prompt)
        self.assertLess(float(mx.abs(got - want).max()), 1e-3 * float(mx.abs(want).max()) + 1e-4)


if __name__ == "__main__":
    unittest.main()

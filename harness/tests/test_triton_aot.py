"""`ksearch_harness.triton_aot`: Triton kernels compiled for an H200 (compute capability 9.0) on a
machine without a GPU, one JSON line per module."""

import importlib.util
import textwrap
import unittest

from aot_compile import compile_modules


TASK = {
    "inputs": [{"name": "A", "shape": ["M", "K"], "dtype": "f16"}, {"name": "B", "shape": ["N", "K"], "dtype": "f16"}],
    "workloads": [{"name": "small", "axes": {"M": 128, "N": 128, "K": 64}}],
}

# A tile product C = A @ B.T of one 64x64 block per program; `{dot}` is its inner product.
KERNEL = """
import torch
import triton
import triton.language as tl


@triton.jit
def _tile(a_ptr, b_ptr, c_ptr, K, BLOCK: tl.constexpr, BK: tl.constexpr):
    m = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    n = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    k = tl.arange(0, BK)
    a = tl.load(a_ptr + m[:, None] * K + k[None, :])
    b = tl.load(b_ptr + n[None, :] * K + k[:, None])
    acc = {dot}
    tl.store(c_ptr + m[:, None] * {n_axis} + n[None, :], acc.to(tl.float16))


def run(A, B, *, M, N, K):
    C = torch.empty((M, N), device=A.device, dtype=A.dtype)
    _tile[(M // 64, N // 64)](A, B, C, K, BLOCK=64, BK={bk}, num_warps=4)
    return C
"""


def module(dot="tl.dot(a, b)", bk="K", n_axis="128"):
    return textwrap.dedent(KERNEL).replace("{dot}", dot).replace("{bk}", bk).replace("{n_axis}", n_axis)


@unittest.skipUnless(importlib.util.find_spec("triton") and importlib.util.find_spec("torch"), "needs PyTorch and Triton (pip install torch)")
class AheadOfTime(unittest.TestCase):
    def check(self, sources, shared_limit=232448):
        return compile_modules("triton_aot", TASK, sources, shared_limit)

    def test_each_module_gets_one_answer_saying_what_was_compiled_or_why_not(self):
        ok, bad, none, early = self.check([
            module(bk="64"),
            # A slice of a tensor, which Triton's language does not have.
            module(dot="tl.dot(a, tl.trans(b)[:, :32])", bk="64"),
            "import torch\n\ndef run(A, B, *, M, N, K):\n    return A @ B.T\n",
            "def run(A, B, *, M, N, K):\n    raise ValueError('only on a GPU')\n",
        ])
        [k] = ok["kernels"]
        self.assertEqual((k["name"], k["workload"], k["warps"]), ("_tile", "small", 4))
        # Two 64x64 f16 tiles are 16 KiB; on Hopper a 64-row tile product is a warpgroup MMA.
        self.assertGreaterEqual(k["shared"], 16384)
        self.assertGreater(k["wgmma"], 0)
        self.assertGreater(k["registers"], 0)
        self.assertEqual(k["spilled"], 0)
        self.assertIn("does not compile for workload `small`", bad["error"])
        self.assertEqual(none, {"unchecked": "run launched no Triton kernel"})
        self.assertIn("ValueError: only on a GPU", early["unchecked"])

    def test_with_keep_each_kernels_machine_code_is_written_beside_its_module(self):
        kept = {}
        [got] = compile_modules("triton_aot", TASK, [module(bk="64")], 232448, keep=kept.update)
        self.assertEqual(len(got["kernels"]), 1)
        self.assertEqual(list(kept), ["m0._tile.small.sass"])
        # Hopper's warpgroup product, as nvdisasm spells it.
        self.assertIn(b"HGMMA", kept["m0._tile.small.sass"])

    def test_a_kernel_over_the_devices_shared_memory_fails(self):
        [got] = self.check([module(bk="64")], shared_limit=8192)
        self.assertRegex(got["error"], r"Triton kernel `_tile` needs \d+ bytes of shared memory on workload `small`; a block may have 8192")


if __name__ == "__main__":
    unittest.main()

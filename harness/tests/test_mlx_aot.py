"""`ksearch_harness.mlx_aot`: an MLX module's `cuda_kernel`s compiled by NVRTC for an H200 (compute
capability 9.0) on a machine without a GPU, one JSON line per module."""

import importlib.util
import sys
import unittest

from aot_compile import HARNESS, compile_modules

TASK = {
    "inputs": [{"name": "x", "shape": ["n"], "dtype": "f16"}],
    "workloads": [{"name": "small", "axes": {"n": 256}}, {"name": "large", "axes": {"n": 4096}}],
}

# y = 2x, one element a thread, with a shared-memory tile of `{tile}` floats; `{body}` is the rest.
MODULE = '''
import mlx.core as mx

SOURCE = """
    __shared__ float tile[{tile}];
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    tile[threadIdx.x % {tile}] = __half2float(x[i]);
    __syncthreads();
    {body}
"""


def run(x, *, n):
    k = mx.fast.cuda_kernel(name="twice", input_names=["x"], output_names=["y"], source=SOURCE)
    return k(inputs=[x], template=[("N", n)], grid=(n, 1, 1), threadgroup=(128, 1, 1),
             output_shapes=[x.shape], output_dtypes=[mx.float16])[0]
'''


def module(body="if (i < N) y[i] = __float2half(2.0f * tile[threadIdx.x % {tile}]);", tile=128):
    return MODULE.replace("{body}", body).replace("{tile}", str(tile))


def nvrtc():
    try:
        from ksearch_harness.mlx_aot import nvrtc_paths

        nvrtc_paths()
        return True
    except ImportError:
        return False


sys.path.insert(0, HARNESS)


@unittest.skipUnless(importlib.util.find_spec("mlx") and nvrtc(), "needs MLX and NVRTC (pip install \"mlx[cpu]\" torch)")
class AheadOfTime(unittest.TestCase):
    def check(self, sources, shared_limit=232448):
        return compile_modules("mlx_aot", TASK, sources, shared_limit)

    def test_each_module_gets_one_answer_saying_what_was_compiled_or_why_not(self):
        ok, bad, none = self.check([
            module(),
            module(body="y[i] = undeclared;"),
            "import mlx.core as mx\n\ndef run(x, *, n):\n    return x * 2\n",
        ])
        # One kernel a workload (its template argument N differs), its static shared tile counted.
        self.assertEqual([(k["name"], k["workload"]) for k in ok["kernels"]], [("twice", "small"), ("twice", "large")])
        for k in ok["kernels"]:
            self.assertEqual(k["shared"], 512)
            self.assertGreater(k["registers"], 0)
            self.assertEqual(k["spilled"], 0)
        self.assertIn("CUDA kernel `twice` does not compile for sm_90a on workload `small`", bad["error"])
        self.assertIn("undeclared", bad["error"])
        self.assertEqual(none, {"unchecked": "run made no CUDA kernel"})

    def test_with_keep_each_kernels_machine_code_is_written_beside_its_module(self):
        kept = {}
        [got] = compile_modules("mlx_aot", TASK, [module()], 232448, keep=kept.update)
        self.assertEqual(len(got["kernels"]), 2)
        # One kernel a workload (N is a template argument), each disassembled.
        self.assertEqual(sorted(kept), ["m0.twice.large.sass", "m0.twice.small.sass"])
        self.assertIn(b"BAR.SYNC", kept["m0.twice.small.sass"])

    def test_a_kernel_over_the_devices_shared_memory_fails(self):
        [got] = self.check([module(tile=16384)], shared_limit=49152)
        self.assertEqual(got["error"], "CUDA kernel `twice` declares 65536 bytes of shared memory on workload `small`; a block may have 49152")

    def test_the_dynamic_shared_memory_a_kernel_asks_for_is_counted(self):
        # 512 bytes of static tile, and 64 KB asked for at the kernel's making (`extern __shared__`).
        dynamic = module(body="extern __shared__ float more[]; more[threadIdx.x] = tile[0]; if (i < N) y[i] = __float2half(more[threadIdx.x]);")
        dynamic = dynamic.replace('source=SOURCE)', 'source=SOURCE, shared_memory=65536)')
        fits, over = self.check([dynamic]), self.check([dynamic], shared_limit=49152)
        self.assertEqual([k["shared"] for k in fits[0]["kernels"]], [512 + 65536] * 2, fits)
        self.assertEqual(over[0]["error"], "CUDA kernel `twice` declares 66048 bytes of shared memory on workload `small`; a block may have 49152")

    def test_warpgroup_products_ptxas_serialized_are_counted(self):
        # Two m64n8k16 products from shared memory (compute capability 9.0) into one accumulator,
        # read after the wait; and the same with the accumulator read between the products, which
        # makes ptxas run them one at a time and say so.
        body = """
            __shared__ __align__(128) __half ab[64 * 16 + 8 * 16];
            ab[threadIdx.x] = __float2half(tile[0]);
            asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
            __syncthreads();
            const unsigned sa = (unsigned)__cvta_generic_to_shared(ab);
            const unsigned long long da = (unsigned long long)((sa & 0x3FFFF) >> 4) | (8ull << 16) | (8ull << 32);
            const unsigned long long db = (unsigned long long)(((sa + 2048) & 0x3FFFF) >> 4) | (8ull << 16) | (8ull << 32);
            float c[4] = {0.0f, 0.0f, 0.0f, 0.0f}, early = 0.0f;
            asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
            for (int k = 0; k < 2; k++) {
                asm volatile("wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 {%0, %1, %2, %3}, %4, %5, 1, 1, 1, 0, 0;"
                             : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3]) : "l"(da + 2 * k), "l"(db + 2 * k));
                EARLY
            }
            asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
            asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
            if (i < N) y[i] = __float2half(c[0] + c[1] + c[2] + c[3] + early);
        """
        waited = module(body=body.replace("EARLY", ""))
        early = module(body=body.replace("EARLY", 'asm volatile("add.f32 %0, %0, %1;" : "+f"(early) : "f"(c[0]));'))
        ok, serialized = self.check([waited, early])
        self.assertEqual([k["serialized"] for k in ok["kernels"]], [0, 0], ok)
        self.assertTrue(all(k["serialized"] > 0 for k in serialized["kernels"]), serialized)

    def test_a_kernel_with_integer_inputs_gets_the_fixed_width_types(self):
        # MLX's signatures name int32_t and friends, which its own headers declare.
        indexed = (
            "import mlx.core as mx\n\n"
            "def run(x, *, n):\n"
            "    k = mx.fast.cuda_kernel(name='gather', input_names=['x', 'idx'], output_names=['y'],\n"
            "                            source='int64_t i = blockIdx.x * blockDim.x + threadIdx.x; y[i] = x[idx[i]];')\n"
            "    idx = mx.arange(n, dtype=mx.int32)\n"
            "    return k(inputs=[x, idx], grid=(n, 1, 1), threadgroup=(128, 1, 1), output_shapes=[x.shape], output_dtypes=[mx.float16])[0]\n"
        )
        [got] = self.check([indexed])
        self.assertEqual([k["name"] for k in got["kernels"]], ["gather", "gather"], got)


if __name__ == "__main__":
    unittest.main()

"""Poisoning a round's outputs on MLX's CUDA backend with few launches.

Before every timed round an untrusted executor fills buffers of its outputs' sizes with NaN (-1
for integers) and frees them, so that MLX's allocator hands that memory to the round's outputs
(`MlxArrays.poison`). One `mx.full` per output and call is one launch each: about 7 ms a round of
280 calls of a 0.02 ms kernel on an H200, a third of the round. Here one launch of the harness's
own `cuda_kernel` allocates and fills OUTPUTS buffers at once (`poison.cuh`); the last launch of a
group pads with one-element outputs. Its code is compiled once per dtype and kept like MLX's
own kernels (`kernel_cache.HARNESS_PREFIX`): trusted executors compile it (`warm`), every
executor reads it.

Metal and the CPU keep one fill per buffer: this path is CUDA only (MLX on macOS was not run
here). Anything that fails here falls back to the fills."""

import os

# Outputs one launch fills (a pointer each among the kernel's parameters).
OUTPUTS = 64
NAME = "ksearch_poison"
KINDS = {"f16", "bf16", "f32", "i32", "i64"}
_HEADER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "poison.cuh")


def _source():
    cases = "\n".join(f"    case {j}: ksearch_poison(o{j}, i); break;" for j in range(OUTPUTS))
    return (
        "const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;\n"
        "if (i >= counts[blockIdx.y]) return;\n"
        "switch (blockIdx.y) {\n" + cases + "\n}\n"
    )


class DevicePoison:
    """The kernels of one process, by dtype; `usable` turns False for good after a failure."""

    def __init__(self, arrays):
        self.arrays = arrays
        self.kernels = {}
        self.usable = arrays.target == "cuda" and hasattr(arrays.mx.fast, "cuda_kernel")

    def _kernel(self, dtype):
        k = self.kernels.get(dtype)
        if k is None:
            with open(_HEADER) as f:
                header = f.read()
            k = self.arrays.mx.fast.cuda_kernel(
                name=f"{NAME}_{dtype}",
                input_names=["counts"],
                output_names=[f"o{j}" for j in range(OUTPUTS)],
                source=_source(),
                header=header,
            )
            self.kernels[dtype] = k
        return k

    def fill(self, shapes_dtypes):
        """Poisoned buffers for every (shape, dtype) of `shapes_dtypes`, allocated, filled and
        freed; True when done here, False when the caller must fill them itself."""
        if not self.usable or any(d not in KINDS for _, d in shapes_dtypes):
            return False
        mx = self.arrays.mx
        groups = {}
        for shape, dtype in shapes_dtypes:
            groups.setdefault(dtype, []).append(tuple(int(x) for x in shape))
        junk = []
        try:
            for dtype, shapes in groups.items():
                kernel = self._kernel(dtype)
                for at in range(0, len(shapes), OUTPUTS):
                    chunk = shapes[at:at + OUTPUTS]
                    chunk += [(1,)] * (OUTPUTS - len(chunk))
                    counts = [_size(s) for s in chunk]
                    junk.extend(kernel(
                        inputs=[mx.array(counts, dtype=mx.int64)],
                        output_shapes=chunk,
                        output_dtypes=[self.arrays.dtypes[dtype]] * OUTPUTS,
                        grid=(max(1, *counts), OUTPUTS, 1),
                        threadgroup=(256, 1, 1),
                    ))
            mx.eval(junk)
        except Exception:  # noqa: BLE001 - a backend without the kernel: the fills do it
            self.usable = False
            return False
        finally:
            del junk
        return True

    def warm(self, dtypes):
        """Compile (or load) the kernel of each of `dtypes`, so that MLX's cache holds it for
        later executors; for trusted executors, whose rounds are not poisoned."""
        self.fill([((1,), d) for d in sorted(set(dtypes))])


def _size(shape):
    n = 1
    for x in shape:
        n *= x
    return n

"""GPU memory shared between the judge and a runner (the torch backend's `cuda` target).

The judge allocates with CUDA's virtual memory API (`cuMemCreate`) and exports the allocation
as a POSIX file descriptor, which travels to the runner over their Unix socket like the CPU
target's shared memory does; the runner imports and maps it into its own address space. A file
descriptor works across the sandbox's PID and IPC namespaces, where CUDA's legacy IPC handles do
not. The runner maps its inputs read-only (`CU_MEM_ACCESS_FLAGS_PROT_READ`); since it holds the
allocation it could map it again writable, so the judge also checks the inputs did not change.

**Not yet run on a GPU**: written against cuda-bindings 13 (which PyPI's torch 2.11 installs);
the CPU target, which the test suite runs, uses shared.py instead."""

import os


def _driver():
    try:
        from cuda.bindings import driver
    except ImportError as e:
        raise RuntimeError(f"the torch backend's cuda target shares GPU memory through cuda-python, which this Python cannot import ({e}); install it with: pip install cuda-bindings") from None
    return driver


def _ok(result, what):
    err = result[0]
    if int(err) != 0:
        raise RuntimeError(f"{what} failed: {err}")
    return result[1] if len(result) == 2 else result[1:]


class _Interface:
    """A byte range of device memory as `__cuda_array_interface__`, for `torch.as_tensor`."""

    def __init__(self, ptr, nbytes):
        self.__cuda_array_interface__ = {"shape": (nbytes,), "typestr": "|u1", "data": (ptr, False), "version": 3, "strides": None}


class DeviceRegion:
    """Device memory of at least `size` bytes, mapped here; `fd` exports it (judge side), or
    `fd=...` imports one (runner side). `bytes` is a uint8 tensor over the whole region."""

    def __init__(self, torch, size, fd=None, read_only=False):
        cu = _driver()
        self.cu = cu
        torch.zeros(1, device="cuda")  # the primary context, current on this thread
        device = int(_ok(cu.cuCtxGetDevice(), "cuCtxGetDevice"))
        handle_type = cu.CUmemAllocationHandleType.CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR
        prop = cu.CUmemAllocationProp()
        prop.type = cu.CUmemAllocationType.CU_MEM_ALLOCATION_TYPE_PINNED
        prop.location.type = cu.CUmemLocationType.CU_MEM_LOCATION_TYPE_DEVICE
        prop.location.id = device
        prop.requestedHandleTypes = handle_type
        gran = int(_ok(cu.cuMemGetAllocationGranularity(prop, cu.CUmemAllocationGranularity_flags.CU_MEM_ALLOC_GRANULARITY_MINIMUM), "cuMemGetAllocationGranularity"))
        self.size = -(-max(size, 1) // gran) * gran
        if fd is None:
            self.handle = _ok(cu.cuMemCreate(self.size, prop, 0), "cuMemCreate")
            self.fd = int(_ok(cu.cuMemExportToShareableHandle(self.handle, handle_type, 0), "cuMemExportToShareableHandle"))
        else:
            self.handle = _ok(cu.cuMemImportFromShareableHandle(fd, handle_type), "cuMemImportFromShareableHandle")
            os.close(fd)
            self.fd = None
        self.ptr = _ok(cu.cuMemAddressReserve(self.size, 0, 0, 0), "cuMemAddressReserve")
        _ok(cu.cuMemMap(self.ptr, self.size, 0, self.handle, 0), "cuMemMap")
        desc = cu.CUmemAccessDesc()
        desc.location = prop.location
        desc.flags = cu.CUmemAccess_flags.CU_MEM_ACCESS_FLAGS_PROT_READ if read_only else cu.CUmemAccess_flags.CU_MEM_ACCESS_FLAGS_PROT_READWRITE
        _ok(cu.cuMemSetAccess(self.ptr, self.size, [desc], 1), "cuMemSetAccess")
        self.bytes = torch.as_tensor(_Interface(int(self.ptr), self.size), device="cuda")

    def close(self):
        cu = self.cu
        self.bytes = None
        try:
            cu.cuMemUnmap(self.ptr, self.size)
            cu.cuMemAddressFree(self.ptr, self.size)
            cu.cuMemRelease(self.handle)
        except Exception:  # noqa: BLE001 - a context already lost
            pass
        if self.fd is not None:
            try:
                os.close(self.fd)
            except OSError:
                pass
            self.fd = None

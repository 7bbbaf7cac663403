"""Memory shared between the judge and a direct runner: input sets the runner maps read-only,
and output slots (each output with a guard zone before and after) the runner writes and the
judge reads. Backed by unlinked files, passed as descriptors."""

import mmap
import os
import tempfile

import numpy as np

GUARD = 64
GUARD_BYTE = 0xA5
ALIGN = 64


def _align(n):
    return -(-max(n, 1) // ALIGN) * ALIGN


class Layout:
    def __init__(self, sets, input_specs, output_specs):
        """Specs are `(shape, numpy dtype)` pairs."""
        self.sets = sets
        self.inputs = [(tuple(s), np.dtype(d)) for s, d in input_specs]
        self.outputs = [(tuple(s), np.dtype(d)) for s, d in output_specs]
        self.in_sizes = [int(np.prod(s, dtype=np.int64)) * d.itemsize for s, d in self.inputs]
        self.out_sizes = [int(np.prod(s, dtype=np.int64)) * d.itemsize for s, d in self.outputs]
        self.in_stride = sum(_align(b) for b in self.in_sizes)
        self.out_stride = sum(GUARD + _align(b) + GUARD for b in self.out_sizes)

    def to_json(self):
        return {
            "sets": self.sets,
            "inputs": [[list(s), d.str] for s, d in self.inputs],
            "outputs": [[list(s), d.str] for s, d in self.outputs],
        }

    @classmethod
    def from_json(cls, j):
        return cls(j["sets"], j["inputs"], j["outputs"])

    def input_region(self):
        return max(self.in_stride * self.sets, 1)

    def output_region(self):
        return max(self.out_stride * self.sets, 1)

    def input_offset(self, s, t):
        return s * self.in_stride + sum(_align(b) for b in self.in_sizes[:t])

    def output_offset(self, s, t):
        return s * self.out_stride + sum(GUARD + _align(b) + GUARD for b in self.out_sizes[:t]) + GUARD

    def input_views(self, buf, s):
        return [np.ndarray(shape, dtype, buffer=buf, offset=self.input_offset(s, t)) for t, (shape, dtype) in enumerate(self.inputs)]

    def output_views(self, buf, s):
        return [np.ndarray(shape, dtype, buffer=buf, offset=self.output_offset(s, t)) for t, (shape, dtype) in enumerate(self.outputs)]

    def guards(self, s):
        out = []
        for t, b in enumerate(self.out_sizes):
            off = self.output_offset(s, t)
            out.append((off - GUARD, GUARD))
            out.append((off + b, _align(b) - b + GUARD))
        return out


class Region:
    """A file with no name mapped read-write by the judge; `ro_fd` is a descriptor a runner can
    only map for reading. Its size is fixed (Linux): a runner holding `fd` cannot truncate it
    under the judge's mapping, which would fault (SIGBUS) when the judge reads it. `sealed`
    (inputs): once mapped here, nothing else can write the file, not even through a descriptor
    reopened writable from `ro_fd` (`/proc/self/fd/N`). `write_only` (outputs of a runner on the
    CPU): `wo_fd` is a descriptor the runner can write through (`pwrite`) but neither map nor
    read, and the file's mode lets nobody but the judge open it for reading: a runner cannot
    compute an answer in the judge's memory itself, so every output reaches it through a copy
    the kernel makes, inside the timed call (docs/sandbox.md, "Python candidates")."""

    def __init__(self, size, sealed=False, write_only=False):
        self.wo_fd = None
        if hasattr(os, "memfd_create"):
            fd = os.memfd_create("ksearch-shm", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
            os.ftruncate(fd, size)
            self.ro_fd = os.open(f"/proc/self/fd/{fd}", os.O_RDONLY | os.O_CLOEXEC)
            if write_only:
                self.wo_fd = os.open(f"/proc/self/fd/{fd}", os.O_WRONLY | os.O_CLOEXEC)
                os.fchmod(fd, 0o200)
        else:
            # macOS: an unlinked file; the runner maps its inputs read-only itself (docs/sandbox.md).
            fd, path = tempfile.mkstemp(prefix="ksearch-shm-")
            try:
                os.ftruncate(fd, size)
                self.ro_fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
                if write_only:
                    self.wo_fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
            finally:
                os.unlink(path)
        self.fd = fd
        self.size = size
        self.map = mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        if sealed and hasattr(os, "memfd_create"):
            seal_writers(fd)
        elif hasattr(os, "memfd_create"):
            seal_size(fd)

    def close(self):
        for fd in (self.fd, self.ro_fd, self.wo_fd):
            if fd is None:
                continue
            try:
                os.close(fd)
            except OSError:
                pass
        try:
            self.map.close()
        except (BufferError, ValueError):
            pass


# F_SEAL_FUTURE_WRITE (Linux 5.1), which Python's fcntl does not name: writable mappings made
# before it keep working, no other write is allowed.
F_SEAL_FUTURE_WRITE = 0x0010


def seal_size(fd):
    """The size of the memfd `fd` is fixed from now on, and no other seal can be added."""
    import fcntl

    fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_GROW | fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_SEAL)


def seal_writers(fd):
    """Only the mappings already made may write the memfd `fd` from now on; its size is fixed;
    and only its owner may open it."""
    import fcntl

    fcntl.fcntl(fd, fcntl.F_ADD_SEALS, F_SEAL_FUTURE_WRITE | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_SEAL)
    os.fchmod(fd, 0o400)


def write_all(fd, data, offset, pwrite=os.pwrite):
    """Every byte of `data` (a C-contiguous array or buffer) into the file `fd` at `offset`."""
    view = memoryview(data)
    if not view.nbytes:
        return
    view = view.cast("B")
    done = 0
    while done < len(view):
        n = pwrite(fd, view[done:], offset + done)
        if n <= 0:
            raise OSError(f"wrote {done} of {len(view)} bytes")
        done += n


def poison_slot(layout, buf, s):
    """Outputs of slot `s` to all-ones bits (NaN for floats), guards restored."""
    view = memoryview(buf)
    for t, b in enumerate(layout.out_sizes):
        off = layout.output_offset(s, t)
        view[off:off + b] = b"\xff" * b
    for off, n in layout.guards(s):
        view[off:off + n] = bytes([GUARD_BYTE]) * n


def broken_guard(layout, buf, s):
    """Index of an output of slot `s` whose guard zone was written, or None."""
    view = memoryview(buf)
    for i, (off, n) in enumerate(layout.guards(s)):
        if bytes(view[off:off + n]) != bytes([GUARD_BYTE]) * n:
            return i // 2
    return None

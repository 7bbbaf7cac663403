"""ksearch's evaluation worker for Python backends (MLX on Metal or CUDA).

Run by ksearch as ``python3 -m ksearch_harness --target metal|cuda``; it speaks worker
protocol v2 (docs/protocol.md) on the file descriptors named in ``KSEARCH_PROTOCOL_FDS``.
"""

__version__ = "0.1.0"

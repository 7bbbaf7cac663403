"""`python3 -m ksearch_harness --backend mlx|torch [--target T]`: the judge."""

import argparse

TARGETS = {"mlx": ["metal", "cuda", "numpy", "cpu"], "torch": ["cuda", "cpu"]}


def main():
    ap = argparse.ArgumentParser(prog="ksearch_harness", description="ksearch's evaluation worker for Python backends (started by ksearch)")
    ap.add_argument("--backend", choices=sorted(TARGETS), default="mlx")
    ap.add_argument("--target", default=None, help="mlx: metal, cuda, numpy, cpu (default: the GPU MLX sees); torch: cuda, cpu (default: cuda where PyTorch sees a GPU)")
    args = ap.parse_args()
    if args.target is not None and args.target not in TARGETS[args.backend]:
        ap.error(f"the {args.backend} backend has no target {args.target!r} (expected one of: {', '.join(TARGETS[args.backend])})")
    # Every array library goes through numpy (inputs are drawn with it): without it, one line
    # saying how to install it, as without MLX or PyTorch, not a traceback.
    try:
        import numpy  # noqa: F401
    except ImportError as e:
        raise SystemExit(f"the {args.backend} backend needs numpy, which this Python cannot import ({e}). Install it with: pip install numpy")
    from .worker import serve

    serve(args.backend, args.target)


if __name__ == "__main__":
    main()

"""`python3 -m ksearch_harness [--target metal|cuda|numpy|cpu]`: the judge."""

import argparse


def main():
    ap = argparse.ArgumentParser(prog="ksearch_harness", description="ksearch's evaluation worker for MLX (started by ksearch)")
    ap.add_argument("--target", choices=["metal", "cuda", "numpy", "cpu"], default=None, help="default: the GPU MLX sees")
    args = ap.parse_args()
    # Every array library goes through numpy (inputs are drawn with it): without it, one line
    # saying how to install it, as without MLX, not a traceback.
    try:
        import numpy  # noqa: F401
    except ImportError as e:
        raise SystemExit(f"the mlx backend needs numpy, which this Python cannot import ({e}). Install it with: pip install numpy")
    from .worker import serve

    serve(args.target)


if __name__ == "__main__":
    main()

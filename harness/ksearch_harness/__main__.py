"""`python3 -m ksearch_harness [--target metal|cuda|numpy|cpu]`: the judge."""

import argparse

from .worker import serve


def main():
    ap = argparse.ArgumentParser(prog="ksearch_harness", description="ksearch's evaluation worker for MLX (started by ksearch)")
    ap.add_argument("--target", choices=["metal", "cuda", "numpy", "cpu"], default=None, help="default: the GPU MLX sees")
    args = ap.parse_args()
    serve(args.target)


if __name__ == "__main__":
    main()

"""``python -m cells``: self-check and a short benchmark of the GRU time loops.

Prints the thread count and the loaded thread pools, checks every output of cells (h and the five
gradients) against a float64 NumPy GRU, then times GRU inference and a training step (forward +
backward) in float32 for both variants against plain NumPy and PyTorch (PyTorch only for
linear_before_reset, its GRU). Exits with status 1 when a difference of cells to the float64
reference exceeds the float32 tolerance of cells._bench.TOLERANCE.
"""
import argparse
import sys

import numpy as np

from . import _bench

SHAPES = (_bench.Shape(T=100, B=1, I=128, H=128), _bench.Shape(T=100, B=64, I=256, H=256))


def parse_args(argv):
    parser = argparse.ArgumentParser(prog="python -m cells", description=__doc__.split("\n")[0])
    parser.add_argument("--threads", type=int, default=_bench.default_threads(),
                        help="threads for every contender (default: all CPUs, %(default)s)")
    parser.add_argument("--repeats", type=int, default=5,
                        help="timed rounds per case, median reported (default %(default)s)")
    parser.add_argument("--quick", action="store_true",
                        help="a single timed round per case")
    return parser.parse_args(argv)


def print_self_check(rows):
    """One line per dtype and variant: the largest difference and the failing outputs."""
    print("Self-check: h, dLdx, dLdhI, dLdWx, dLdWh, dLdb of cells vs float64 NumPy "
          "(T=7 B=3 I=5 H=4, random dLdh and dLdhLast)")
    for dtype in ("float32", "float64"):
        for variant in _bench.VARIANTS.values():
            group = [r for r in rows if r["dtype"] == dtype and r["variant"] == variant]
            failed = [r["output"] for r in group if not r["ok"]]
            worst = max(r["max_abs_diff"] for r in group)
            print(f"  {dtype} {variant:19} max abs diff {worst:.1e}  "
                  + (f"FAILED: {', '.join(failed)}" if failed else "ok"))


def main(argv=None):
    args = parse_args(argv)
    repeats = 1 if args.quick else args.repeats
    _bench.optional_torch()   # loaded now so that its thread pools are listed
    print(f"threads: {args.threads} (CPUs available: {_bench.default_threads()}), "
          f"CPU: {_bench.cpu_model()}, load average: {_bench.load_average()}")
    print("thread pools (threadpoolctl):")
    for line in _bench.threadpool_summary():
        print("  " + line)
    print()

    check = _bench.self_check(args.threads)
    print_self_check(check)
    print()

    rows = []
    for shape in SHAPES:
        for training in (False, True):
            for linear_before_reset in (False, True):
                rows += _bench.compare(shape, dtype=np.float32, threads=args.threads,
                                       linear_before_reset=linear_before_reset,
                                       training=training, repeats=repeats)
    print(f"float32, median of {repeats} alternated round(s); ms per call; cells x = contender ms "
          f"/ cells ms; |dh|, |dLdWh| = max abs diff to the float64 NumPy GRU")
    print(_bench.format_table(rows))

    failed = [r for r in check if not r["ok"]] + [
        r for r in rows if r["contender"] == "cells" and not r["ok"]]
    if failed:
        print(f"\nFAILED: {len(failed)} cells result(s) outside the float32 tolerance "
              f"({_bench.TOLERANCE[np.dtype(np.float32)]:g} x max(1, max|reference|))")
        return 1
    print("\nself-check passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())

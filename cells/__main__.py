"""``python -m cells``: self-check and a short benchmark of the GRU, LSTM and LLTM time loops.

Prints the thread count and the loaded thread pools, checks every output of each family's time
loop and of its backward (GRU: h and five gradients in both variants; LSTM: h, hL, cL and six
gradients; LLTM: h, hL, cL and five gradients) against a float64 NumPy cell in float32 and
float64, then times inference and a training step (forward + backward) in float32 on two shapes
against plain NumPy and PyTorch (for the GRU only linear_before_reset, PyTorch's GRU). Exits with
status 1 when a self-check difference, or a benchmark difference of cells to the float64
reference, exceeds the tolerance of cells._bench.TOLERANCE, or when a requested family's kernels
are missing from this build.
"""
import argparse
import sys
import time

import numpy as np

from . import _bench

SHAPES = (_bench.Shape(T=100, B=1, I=128, H=128), _bench.Shape(T=100, B=64, I=256, H=256))


def parse_args(argv):
    parser = argparse.ArgumentParser(prog="python -m cells", description=__doc__.split("\n")[0])
    parser.add_argument("--family", nargs="+", choices=_bench.FAMILIES,
                        default=list(_bench.FAMILIES),
                        help="cell families to check and time (default: all)")
    parser.add_argument("--threads", type=int, default=_bench.default_threads(),
                        help="threads for every contender (default: all CPUs, %(default)s)")
    parser.add_argument("--repeats", type=int, default=3,
                        help="timed rounds per case, median reported (default %(default)s)")
    parser.add_argument("--quick", action="store_true",
                        help="a single timed round per case")
    return parser.parse_args(argv)


def print_self_check(family, rows):
    """One line per dtype and variant: the largest difference and the failing outputs."""
    names = ", ".join(family.outputs + family.grads)
    print(f"Self-check {family.name}: {names} of cells vs float64 NumPy "
          f"({_bench.SELF_CHECK_SHAPE}, random dLdh and final-state gradients; backward "
          f"recomputing the forward and on its workspace)")
    for dtype in ("float32", "float64"):
        for variant in family.variants:
            group = [r for r in rows if r["dtype"] == dtype and r["variant"] == variant]
            failed = [r["output"] for r in group if not r["ok"]]
            worst = max(r["max_abs_diff"] for r in group)
            label = f"{dtype} {variant}" if len(family.variants) > 1 else dtype
            print(f"  {label:27} max abs diff {worst:.1e}  "
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

    start = time.perf_counter()
    families = [_bench.FAMILIES[name] for name in dict.fromkeys(args.family)]
    missing = [f for f in families if not f.available()]
    for f in missing:
        print(f"MISSING: {f.name}: this build of cells has no {f.cells_forward} / "
              f"{f.cells_backward}; skipped")
    families = [f for f in families if f not in missing]

    check = []
    for family in families:
        rows = _bench.self_check(family, args.threads)
        print_self_check(family, rows)
        check += rows
    print()

    ceiling = _bench.gemm_ceiling(np.float32, args.threads)
    rows = []
    for family in families:
        for shape in SHAPES:
            for training in (False, True):
                for variant in family.variants:
                    rows += _bench.compare(family, shape, dtype=np.float32, threads=args.threads,
                                           variant=variant, training=training, repeats=repeats,
                                           ceiling=ceiling)
    print("contenders: cells, numpy (plain NumPy cell), torch: "
          + "; ".join(f"{f.name} {f.torch_name}" for f in families))
    print(f"big-square sgemm (1024³, {args.threads} threads): {ceiling:.0f} GF/s")
    print(f"float32, median of {repeats} alternated round(s); {_bench.TABLE_LEGEND}")
    print(_bench.format_table(rows))
    print(f"\n({time.perf_counter() - start:.0f} s)")

    others = [r for r in rows if r["contender"] != "cells" and not r["ok"]]
    if others:
        print(f"\nnote: {len(others)} result(s) of other contenders outside the tolerance: "
              + ", ".join(f"{r['family']} {r['contender']} {r['task']} T={r['T']} B={r['B']}"
                          for r in others))
    failed = [r for r in check if not r["ok"]] + [
        r for r in rows if r["contender"] == "cells" and not r["ok"]]
    if failed or missing:
        print(f"\nFAILED: {len(failed)} cells result(s) outside the tolerance "
              f"({_bench.TOLERANCE[np.dtype(np.float32)]:g} (float32), "
              f"{_bench.TOLERANCE[np.dtype(np.float64)]:g} (float64) x max(1, max|reference|))"
              + (f"; missing kernels: {', '.join(f.name for f in missing)}" if missing else ""))
        return 1
    print("\nself-check passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Benchmark of cells' time loops against plain NumPy, PyTorch and ONNX Runtime.

For every family (GRU, LSTM, LLTM, RNN), shape, thread count, dtype, variant (GRU:
reset_before, linear_before_reset; RNN: tanh, relu) and task (inference, training step =
forward + backward with loss = h.sum()) the contenders run alternated after a warm-up; the
median per call, the speed-up of cells and the max abs difference of h (and, for training, of
the recurrent-weight gradient) to a float64 NumPy cell are printed per family and shape and
saved as JSON with the environment.

PyTorch takes part for every family (GRU: linear_before_reset only, its nn.GRU; LSTM: nn.LSTM;
LLTM: the C++-extension tutorial's pure-PyTorch step in a Python loop; RNN: nn.RNN), ONNX
Runtime for float32 GRU, LSTM and RNN inference when onnx and onnxruntime are importable. The
families live in families.py (their NumPy cells in numpy_cells.py), contenders, timing and rows
in harness.py; this script runs the grid and writes the JSON file. It imports the installed
cells (see benchmarks/README.md):

    python benchmarks/bench.py                                       # everything (long)
    python benchmarks/bench.py --family lstm --shapes small medium --threads 2 \\
        --dtypes float32 --repeats 3
"""
import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

import harness
import peak
import plot
import targets
from families import FAMILIES
from harness import Shape

# "medium" with B1 ... B256 is a batch sweep at T=100, I=H=256.
SHAPES = {
    "small": Shape(T=100, B=1, I=128, H=128),
    "B64H128": Shape(T=100, B=64, I=128, H=128),
    "medium": Shape(T=100, B=64, I=256, H=256),
    "large": Shape(T=50, B=128, I=512, H=512),
    "B1": Shape(T=100, B=1, I=256, H=256),
    "B4": Shape(T=100, B=4, I=256, H=256),
    "B16": Shape(T=100, B=16, I=256, H=256),
    "B256": Shape(T=100, B=256, I=256, H=256),
}
# The shapes issue 12's targets are stated for: their class in targets.py, by (T, B, I, H).
TARGET_SHAPES = {"small": "B1", "B16": "B16", "B64H128": "big", "medium": "big", "large": "big"}
SHAPE_CLASSES = {(s.T, s.B, s.I, s.H): TARGET_SHAPES[name] for name, s in SHAPES.items()
                 if name in TARGET_SHAPES}


# ----------------------------------------------------------------------------------------------
# The grid
# ----------------------------------------------------------------------------------------------

def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--family", nargs="+", choices=FAMILIES, default=list(FAMILIES))
    parser.add_argument("--shapes", nargs="+", choices=SHAPES, default=list(SHAPES))
    parser.add_argument("--threads", nargs="+", type=int, default=[1, 2])
    parser.add_argument("--dtypes", nargs="+", choices=("float32", "float64"),
                        default=["float32", "float64"])
    parser.add_argument("--repeats", type=int, default=5, help="alternated timed rounds (median)")
    parser.add_argument("--out", type=Path, default=Path(__file__).with_name("results.json"))
    parser.add_argument("--plot", default=str(Path(__file__).with_name("speedup.png")),
                        help="where to draw the speed-up plot (needs matplotlib; '' for none)")
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    families = [FAMILIES[name] for name in dict.fromkeys(args.family)]
    for f in families:
        if not f.available():
            print(f"{f.name}: skipped, this cells has no {f.cells_forward} / {f.cells_backward}")
    families = [f for f in families if f.available()]

    harness.optional_torch()   # loaded now so that its thread pools are listed
    env = harness.environment()
    print(f"cells {env['cells']} ({env['cells_path']})")
    print(f"CPU: {env['cpu']} ({env['cpus']} CPUs, load average {env['load_average']})")
    print(f"numpy {env['numpy']}, scipy {env['scipy']}, torch {env['torch']}, "
          f"onnxruntime {env['onnxruntime']}")
    print("thread pools (threadpoolctl):")
    for line in harness.threadpool_summary():
        print("  " + line)
    print(harness.TABLE_LEGEND)

    peaks = peak.fma_peak(max(args.threads))
    gemm_rates = {(threads, dtype): harness.big_gemm_rate(dtype, threads)
                  for threads in args.threads for dtype in args.dtypes}
    for (threads, dtype), gflops in gemm_rates.items():
        print(f"{dtype}, {threads} thread(s): FMA peak {peaks[dtype, threads]:.1f} GF/s "
              f"(benchmarks/peak.py), big-square OpenBLAS gemm (1024³) {gflops:.1f} GF/s")
    warning = peak.uneven_cores(peaks)
    if warning:
        print(warning)
    rows = []
    for family in families:
        for name in args.shapes:
            block = []
            t0 = time.perf_counter()
            for threads in args.threads:
                for dtype in args.dtypes:
                    for training in (False, True):
                        for variant in family.variants:
                            block += harness.compare(
                                family, SHAPES[name], dtype=np.dtype(dtype), threads=threads,
                                variant=variant, training=training, repeats=args.repeats,
                                peak=peaks[dtype, threads])
            print(f"\n{family.name} {name}: {SHAPES[name]} ({time.perf_counter() - t0:.0f} s, "
                  f"load average {harness.load_average()})")
            print(harness.format_table(block), flush=True)
            rows += block

    verdicts = targets.check(rows, SHAPE_CLASSES)
    print("\n" + targets.format_verdicts(verdicts))
    settings = {"families": [f.name for f in families],
                "shapes": {n: vars(SHAPES[n]) for n in args.shapes}, "threads": args.threads,
                "dtypes": args.dtypes, "repeats": args.repeats,
                "tolerance": {t.name: tol for t, tol in harness.TOLERANCE.items()},
                "fma_peak_gflops": {f"{d} {t}": g for (d, t), g in peaks.items()},
                "big_gemm_gflops": {f"{d} {t}": g for (t, d), g in gemm_rates.items()}}
    args.out.write_text(json.dumps({"environment": env, "settings": settings, "rows": rows,
                                    "targets": verdicts}, indent=1))
    print(f"\nsaved {len(rows)} rows to {args.out}")
    if args.plot:
        print(plot.plot_file(args.out, args.plot))
    bad = [r for r in rows if not r["ok"]]
    for r in bad:
        print(f"outside the tolerance: {r['family']} {r['contender']} {r['task']} "
              f"{r['variant']} T={r['T']} B={r['B']} H={r['H']} {r['dtype']} "
              f"threads={r['threads']}: |dh| {r['diff_h']:.1e}, |dW_rec| {r['diff_grad']}")
    return 0 if all(r["ok"] for r in rows if r["contender"] == "cells") else 1


if __name__ == "__main__":
    sys.exit(main())

"""n_threads=None against every fixed thread count: issue 12's target that the default is never
more than 5% slower than the best fixed count, at every shape of bench.py's grid.

    python benchmarks/threads_default.py                      # every family, shape and task
    python benchmarks/threads_default.py --family gru lstm --shapes small B16 --repeats 5

For each case cells runs with n_threads=None and with 1 ... all CPUs, alternated (harness's
time_alternating, medians), float32; a row prints each median and ratio = None's time / the
best fixed count's time (target <= 1.05).
"""
import argparse
import dataclasses
import sys

import numpy as np

import harness
from bench import SHAPES
from families import FAMILIES

TARGET = 1.05


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--family", nargs="+", choices=FAMILIES, default=list(FAMILIES))
    parser.add_argument("--shapes", nargs="+", choices=SHAPES, default=list(SHAPES))
    parser.add_argument("--repeats", type=int, default=5, help="alternated timed rounds (median)")
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    counts = list(range(1, harness.default_threads() + 1))
    print(f"cells {harness.environment()['cells_path']}; CPU: {harness.cpu_model()}, "
          f"{counts[-1]} CPUs; float32; ms per call (median of {args.repeats})")
    print(f"{'case':58s} {'None':>8s} " + " ".join(f"{f'{n} thr':>8s}" for n in counts)
          + "   ratio")
    missed = total = 0
    for name in args.family:
        family = FAMILIES[name]
        for shape_name in args.shapes:
            shape = SHAPES[shape_name]
            inp = harness.make_inputs(family, shape, np.float32)
            for training in (False, True):
                for variant in family.variants:
                    contenders = [dataclasses.replace(
                        harness.cells_contender(family, inp, training, variant, n),
                        name=str(n)) for n in [None] + counts]
                    samples, _ = harness.time_alternating(contenders, args.repeats)
                    ms = {c: 1e3 * float(np.median(s)) for c, s in samples.items()}
                    ratio = ms["None"] / min(ms[str(n)] for n in counts)
                    total += 1
                    missed += ratio > TARGET
                    case = (f"{name} {variant if variant != '-' else ''} "
                            f"{'training' if training else 'inference'} {shape}")
                    print(f"{case:58s} {ms['None']:8.3f} "
                          + " ".join(f"{ms[str(n)]:8.3f}" for n in counts)
                          + f"   {ratio:5.2f} {'met' if ratio <= TARGET else 'MISSED'}",
                          flush=True)
    print(f"n_threads=None within {TARGET:g}x of the best fixed count: {total - missed} of "
          f"{total} cases")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""cells alone: the timings compare.py compares between two checkouts.

    python benchmarks/timing.py --out times.json
    python benchmarks/timing.py --family gru --shapes medium --threads 2 --repeats 5

Inference, a training step (forward with its workspace, backward of loss = h.sum()) and one
step through a prepared net (the serving path, cells.<family>.prepare), float32, for every
family and variant of families.py that the imported cells has (see
benchmarks/README.md for how the benchmarks import cells), on bench.py's shapes small, medium
and large, with 1 and 2 threads; --repeats samples per case after a warm-up call
(harness.time_alternating, cells alone: no settling sleeps). No reference is computed: the
tests check the values. Prints the median per case and, with --out, writes every sample as
JSON with the environment (keys of a row: family, variant, shape, T, B, I, H, threads, task,
ms, samples_ms).
"""
import argparse
import json
import sys
import time
from pathlib import Path
from statistics import median

import numpy as np

import harness
from bench import SHAPES
from compare import case_columns, format_rows
from families import FAMILIES


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--family", nargs="+", choices=FAMILIES, default=list(FAMILIES))
    parser.add_argument("--shapes", nargs="+", choices=SHAPES,
                        default=["small", "medium", "large"])
    parser.add_argument("--threads", nargs="+", type=int, default=[1, 2])
    parser.add_argument("--repeats", type=int, default=2, help="timed samples per case")
    parser.add_argument("--out", type=Path, help="write the rows as JSON here")
    return parser.parse_args(argv)



TASKS = ("inference", "training", "serving")


def contender_of(task, family, inp, variant, n_threads):
    """The cells contender of one task: the time loop (inference), a training step, or one
    step through a prepared net (serving)."""
    if task == "serving":
        return harness.serving_contender(family, inp, variant, n_threads)
    return harness.cells_contender(family, inp, task == "training", variant, n_threads)


def time_cells(families, shapes, threads, repeats):
    """One row per case: family, variant, shape (its name), T, B, I, H, threads, task, ms (the
    median), samples_ms."""
    rows = []
    for family in families:
        for name in shapes:
            shape = SHAPES[name]
            inp = harness.make_inputs(family, shape, np.float32)
            for n_threads in threads:
                for task in TASKS:
                    for variant in family.variants:
                        contender = contender_of(task, family, inp, variant, n_threads)
                        samples, _ = harness.time_alternating([contender], repeats, settle_s=0)
                        ms = [1e3 * s for s in samples["cells"]]
                        rows.append({"family": family.name, "variant": variant, "shape": name,
                                     **vars(shape), "threads": n_threads, "task": task,
                                     "ms": median(ms), "samples_ms": ms})
    return rows


def main(argv=None):
    args = parse_args(argv)
    families = [FAMILIES[name] for name in dict.fromkeys(args.family)]
    skipped = [f.name for f in families if not f.available()]
    families = [f for f in families if f.available()]
    env = harness.environment()
    print(f"cells {env['cells']} ({env['cells_path']}), load average {env['load_average']}"
          + (f"; skipped (not in this cells): {', '.join(skipped)}" if skipped else ""),
          flush=True)
    t0 = time.perf_counter()
    rows = time_cells(families, args.shapes, args.threads, args.repeats)
    print(format_rows(rows, case_columns() + [("ms", lambda r: f"{r['ms']:.3f}")]))
    print(f"({time.perf_counter() - t0:.0f} s)")
    if args.out:
        args.out.write_text(json.dumps({"environment": env, "skipped": skipped, "rows": rows},
                                       indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

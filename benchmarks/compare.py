"""cells against cells: the timings of two checkouts, alternated, for a no-regression check.

    python benchmarks/compare.py OLD NEW                    # two checkouts, each built in place
    python benchmarks/compare.py OLD NEW --rounds 5 --out compare.json --family gru --threads 2

Runs benchmarks/timing.py (cells alone, float32, inference, a training step and a prepared
net's one step of every family and variant, the shapes small, medium and large, 1 and 2
threads) in a fresh process per checkout with PYTHONPATH=<checkout>, alternately (OLD NEW OLD
NEW ..., --rounds rounds), so that a drift of the machine spreads over both. Options other
than --rounds and --out go to timing.py (--family, --shapes, --threads, --repeats). Each run
must import cells from its own checkout (build it there with `python setup.py build_ext
--inplace`), and that cells must declare its families in cells._families (families.py reads
them). Per case it prints the median of all samples of each checkout and the ratio new / old
(above 1: new is slower), then the geometric mean of the ratios; families that only one
checkout has are listed. The default grid takes about 3 minutes on an idle 2-core machine.

This script imports nothing of cells itself (only timing.py does, in each run).
"""
import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from statistics import median

TIMING = Path(__file__).with_name("timing.py")
CASE_KEYS = ("family", "variant", "shape", "threads", "task")


def parse_args(argv):
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n")[0],
        epilog="other options are passed to timing.py (python benchmarks/timing.py --help)")
    parser.add_argument("old", type=Path, help="the checkout to compare against")
    parser.add_argument("new", type=Path, help="the checkout under test")
    parser.add_argument("--rounds", type=int, default=3, help="runs of each checkout")
    parser.add_argument("--out", type=Path, help="write the rows as JSON here")
    return parser.parse_known_args(argv)


def format_rows(rows, columns):
    """Aligned text table; `columns`: (header, function of a row -> text); the columns after
    the case's are numbers, right-aligned."""
    lines = [[h for h, _ in columns]] + [[f(r) for _, f in columns] for r in rows]
    widths = [max(len(line[k]) for line in lines) for k in range(len(columns))]
    return "\n".join("  ".join(x.ljust(w) if k < len(CASE_KEYS) else x.rjust(w)
                               for k, (x, w) in enumerate(zip(line, widths))).rstrip()
                     for line in lines)


def case_columns():
    """The columns naming a case."""
    return [(k, lambda r, k=k: str(r[k])) for k in CASE_KEYS]


def run_checkout(checkout, timing_args, out):
    """timing.py in a fresh process importing cells from `checkout`; its JSON."""
    run = subprocess.run([sys.executable, str(TIMING), "--out", str(out), *timing_args],
                         env=dict(os.environ, PYTHONPATH=str(checkout)),
                         capture_output=True, text=True)
    if run.returncode != 0:
        sys.exit(f"timing {checkout} failed (is it built in place?):\n{run.stderr[-3000:]}")
    result = json.loads(out.read_text())
    imported = Path(result["environment"]["cells_path"]).resolve()
    if imported != (checkout / "cells").resolve():
        sys.exit(f"timing {checkout} imported cells from {imported}, not from the checkout")
    return result


def main(argv=None):
    args, timing_args = parse_args(argv)
    sides = {"old": args.old, "new": args.new}
    samples = {side: {} for side in sides}   # side -> case -> every sample (ms) of every round
    with tempfile.TemporaryDirectory() as tmp:
        for k in range(args.rounds):
            for side, checkout in sides.items():
                t0 = time.perf_counter()
                result = run_checkout(checkout, timing_args, Path(tmp) / f"{side}.json")
                for r in result["rows"]:
                    samples[side].setdefault(tuple(r[c] for c in CASE_KEYS), []).extend(
                        r["samples_ms"])
                print(f"round {k + 1}/{args.rounds} {side} ({checkout}): "
                      f"{time.perf_counter() - t0:.0f} s, load average "
                      f"{result['environment']['load_average']:.2f}", flush=True)

    rows = []
    for case, old_samples in samples["old"].items():
        if case in samples["new"]:
            old_ms, new_ms = median(old_samples), median(samples["new"][case])
            rows.append({**dict(zip(CASE_KEYS, case)), "old_ms": old_ms, "new_ms": new_ms,
                         "ratio": new_ms / old_ms, "old_samples_ms": old_samples,
                         "new_samples_ms": samples["new"][case]})
    print(f"\nmedian ms of every sample of {args.rounds} round(s); ratio = new / old (above 1: "
          f"new is slower)\nold: {args.old}\nnew: {args.new}")
    print(format_rows(rows, case_columns() + [("old ms", lambda r: f"{r['old_ms']:.3f}"),
                                              ("new ms", lambda r: f"{r['new_ms']:.3f}"),
                                              ("ratio", lambda r: f"{r['ratio']:.3f}")]))
    if rows:
        geomean = math.exp(sum(math.log(r["ratio"]) for r in rows) / len(rows))
        print(f"geometric mean of the ratios: {geomean:.3f} over {len(rows)} cases")
    for side, other in (("old", "new"), ("new", "old")):
        only = sorted({case[0] for case in samples[side].keys() - samples[other].keys()})
        if only:
            print(f"only {side} has: {', '.join(only)}")
    if args.out:
        args.out.write_text(json.dumps({"old": str(args.old), "new": str(args.new),
                                        "rounds": args.rounds, "timing_options": timing_args,
                                        "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

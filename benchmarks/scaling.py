"""Thread scaling: cells against PyTorch and ONNX Runtime from 1 thread to every CPU, with the
FMA peak at each count, quiet or beside busy processes.

    python benchmarks/scaling.py                             # GRU and LSTM, every shape and task
    python benchmarks/scaling.py --neighbours each           # one busy process on each CPU
    python benchmarks/scaling.py --neighbours one            # one busy process, on the last CPU
    python benchmarks/scaling.py --family gru --shapes B1 --tasks inference --threads 1 2 8 16

For each family, shape and task, every contender at every thread count is timed in one
alternated round (harness.time_alternating, medians, float32): cells with n_threads = n and with
n_threads=None, torch with torch.set_num_threads(n), ONNX Runtime (inference only) with
intra_op_num_threads = n. A row per thread count prints the medians in ms, cells' GF/s (the
family's gemm FLOPs) and its share of the FMA peak at that count, and torch's time over cells'
(> 1: cells is faster). A case ends with cells' best count, cells' time at every count over its
1-thread time, and n_threads=None over the best fixed count.

`--neighbours` starts CPU-bound processes (a Python loop each, pinned with sched_setaffinity)
before the FMA peak is measured and keeps them running to the end, so that the peak and every
timing see the same shared cores. The targets of shared cores: a 2-thread call at most 1.3x its
1-thread time beside one busy process on each core or on one.
"""
import argparse
import dataclasses
import os
import subprocess
import sys
import time

import numpy as np

import harness
from families import FAMILIES
from peak import fma_peak

SHAPES = {
    "B1": harness.Shape(T=100, B=1, I=256, H=256),
    "B16": harness.Shape(T=100, B=16, I=256, H=256),
    "B64": harness.Shape(T=100, B=64, I=256, H=256),
    "B256H512": harness.Shape(T=25, B=256, I=512, H=512),
}
TASKS = ("inference", "training")
BUSY_LOOP = "while True: pass"


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--family", nargs="+", choices=("gru", "lstm"), default=["gru", "lstm"])
    parser.add_argument("--shapes", nargs="+", choices=SHAPES, default=list(SHAPES))
    parser.add_argument("--tasks", nargs="+", choices=TASKS, default=list(TASKS))
    parser.add_argument("--threads", nargs="+", type=int, default=None,
                        help="thread counts (default: 1 ... cells.cpu_count())")
    parser.add_argument("--neighbours", choices=("none", "each", "one"), default="none",
                        help="busy processes beside the timings: none, one on each CPU, or one "
                             "on the last CPU")
    parser.add_argument("--repeats", type=int, default=5, help="alternated timed rounds (median)")
    return parser.parse_args(argv)


def start_neighbours(which):
    """The busy processes of --neighbours `which`, each pinned to one CPU of this process's."""
    cpus = sorted(os.sched_getaffinity(0))
    pinned = {"none": [], "each": cpus, "one": cpus[-1:]}[which]
    return [subprocess.Popen([sys.executable, "-c", BUSY_LOOP],
                             preexec_fn=lambda cpu=cpu: os.sched_setaffinity(0, {cpu}))
            for cpu in pinned]


def variant_of(family):
    """The variant timed: the GRU's linear_before_reset, the one torch and ONNX Runtime have."""
    return ("linear_before_reset" if "linear_before_reset" in family.variants
            else family.default_variant())


def contenders(family, inp, training, variant, counts):
    """cells at each count and at None, torch and ONNX Runtime at each count (those installed),
    each named "<name> <count>"."""
    out = [dataclasses.replace(harness.cells_contender(family, inp, training, variant, None),
                               name="cells None")]
    for n in counts:
        for factory in (harness.cells_contender, harness.torch_contender,
                        harness.onnx_contender):
            c = factory(family, inp, training, variant, n)
            if c is not None:
                out.append(dataclasses.replace(c, name=f"{c.name} {n}"))
    return out


def run_case(family, shape, training, counts, peaks, repeats):
    """Time one case and print its rows."""
    inp = harness.make_inputs(family, shape, np.float32)
    variant = variant_of(family)
    samples, _ = harness.time_alternating(contenders(family, inp, training, variant, counts),
                                          repeats)
    ms = {name: 1e3 * float(np.median(s)) for name, s in samples.items()}
    flops = family.gemm_flops(shape, training)
    task = "training step" if training else "inference"
    print(f"\n{family.name}{f' {variant}' if variant != '-' else ''} {task} {shape}")
    print(f"{'threads':>7s} {'cells':>9s} {'torch':>9s} {'onnxrt':>9s} {'GF/s':>7s} "
          f"{'% peak':>6s} {'torch/cells':>11s}")
    for n in counts:
        cells_ms = ms[f"cells {n}"]
        gflops = flops / cells_ms / 1e6
        peak = peaks.get(("float32", n))
        peers = [ms.get(f"{peer} {n}") for peer in ("torch", "onnxruntime")]
        print(f"{n:7d} {cells_ms:9.3f} "
              + " ".join(f"{p:9.3f}" if p else f"{'-':>9s}" for p in peers)
              + f" {gflops:7.1f} {f'{100 * gflops / peak:.0f}' if peak else '-':>6s} "
              + (f"{peers[0] / cells_ms:11.2f}" if peers[0] else f"{'-':>11s}"))
    best = min(counts, key=lambda n: ms[f"cells {n}"])
    print(f"cells: best at {best} thread(s); time over 1 thread: "
          + " ".join(f"{n}: {ms[f'cells {n}'] / ms[f'cells {counts[0]}']:.2f}" for n in counts)
          + f"; n_threads=None {ms['cells None']:.3f} ms = "
          f"{ms['cells None'] / ms[f'cells {best}']:.2f}x the best count", flush=True)


def main(argv=None):
    args = parse_args(argv)
    counts = args.threads or list(range(1, harness.default_threads() + 1))
    neighbours = start_neighbours(args.neighbours)
    try:
        time.sleep(0.5)   # the neighbours are running before anything is measured
        peaks = fma_peak(max(counts), runs=1)
        print(f"cells {harness.environment()['cells_path']}; CPU: {harness.cpu_model()}, "
              f"{harness.default_threads()} CPUs; busy neighbours: {args.neighbours} "
              f"({len(neighbours)}); float32; ms per call (median of {args.repeats})")
        print("FMA peak float32: " + ", ".join(f"{n} thr {peaks['float32', n]:.0f} GF/s"
                                               for n in counts if ("float32", n) in peaks))
        for name in args.family:
            for shape_name in args.shapes:
                for task in args.tasks:
                    run_case(FAMILIES[name], SHAPES[shape_name], task == "training", counts,
                             peaks, args.repeats)
    finally:
        for p in neighbours:
            p.kill()
            p.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""cells on each instruction set this CPU runs, side by side in one process, against the FMA
peak of each path measured in the same run.

    python benchmarks/paths.py                       # LSTM and GRU, T=100 I=H=256, B=1 and 64
    python benchmarks/paths.py --threads 1 2 --rounds 5

For every case (family, B, threads, inference or a training step) the paths take turns
(cells._isa.forced: avx512, avx2, generic, avx512, ...), each sample the median of a few calls,
and the table gives the median time per path, GF/s (2·T·B·(I+H)·G FLOPs per forward, three
times that per training step) and its share of that path's FMA peak on the same threads.
A machine without AVX-512 measures its AVX2 path here as it runs in production; an AVX-512 one
measures the AVX2 kernels on its own cores (the same FMA peak where the cores split 512-bit
operations, as AMD Zen 4 does). Run with OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE unset.
"""
import argparse
import platform
import sys
import time
from statistics import median

import numpy as np
import peak
import threadpoolctl

import cells
from cells import _isa

GATES = {"lstm": 4, "gru": 3}


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--family", nargs="+", default=["lstm", "gru"], choices=list(GATES))
    parser.add_argument("--batch", nargs="+", type=int, default=[1, 64])
    parser.add_argument("--threads", nargs="+", type=int, default=[1, 2])
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--rounds", type=int, default=5)
    return parser.parse_args(argv)


def calls(family, T, B, H, threads):
    """(inference, training step) of `family` on random float32 inputs, I = H."""
    rng = np.random.default_rng(0)
    G = GATES[family] * H
    x = rng.normal(size=(T, B, H)).astype(np.float32)
    hI = np.zeros((B, H), np.float32)
    Wx, Wh = (rng.normal(0, 0.1, (H, G)).astype(np.float32) for _ in range(2))
    dLdh = np.ones((T, B, H), np.float32)
    if family == "lstm":
        b, cI = np.zeros(G, np.float32), np.zeros((B, H), np.float32)

        def inference():
            cells.lstmLayerTimeLoop(x, Wx, Wh, b, hI, cI, n_threads=threads)

        def training():
            *_, ws = cells.lstmLayerTimeLoop(x, Wx, Wh, b, hI, cI, n_threads=threads,
                                             return_workspace=True)
            cells.lstmLayerTimeLoopBp(x, Wx, Wh, b, hI, cI, dLdh, workspace=ws,
                                      n_threads=threads)
        return inference, training
    b = np.zeros((2, G), np.float32)

    def inference():
        cells.gruTimeLoop(x, hI, Wx, Wh, b, n_threads=threads)

    def training():
        h, ws = cells.gruTimeLoop(x, hI, Wx, Wh, b, n_threads=threads, return_workspace=True)
        cells.gruTimeLoopBp(x, hI, Wx, Wh, b, dLdh, workspace=ws, n_threads=threads)
    return inference, training


def sample(call, min_s=0.05):
    """The median seconds of one call over a sample of at least min_s."""
    times, start = [], time.perf_counter()
    while time.perf_counter() - start < min_s or len(times) < 3:
        t0 = time.perf_counter()
        call()
        times.append(time.perf_counter() - t0)
    return median(times)


def main(argv=None):
    args = parse_args(argv)
    paths = _isa.available()
    print(f"{platform.processor() or platform.machine()}; cells' paths {paths}; "
          f"threadpools {[p['internal_api'] for p in threadpoolctl.threadpool_info()]}")
    peaks = {isa: peak.fma_peak(max(args.threads), isa=isa) for isa in paths}
    for isa in paths:
        print(f"FMA peak float32 {isa}: " + ", ".join(
            f"{peaks[isa]['float32', t]:.0f} GF/s on {t}" for t in args.threads))
    T, H = args.steps, args.hidden
    print(f"\nT={T} I=H={H} float32, ms per call (GF/s, % of the path's FMA peak)")
    print("| family | B | threads | task | " + " | ".join(paths) + " |")
    print("|---" * (4 + len(paths)) + "|")
    for family in args.family:
        for B in args.batch:
            for threads in args.threads:
                inference, training = calls(family, T, B, H, threads)
                for task, call, passes in (("inference", inference, 1), ("training", training, 3)):
                    flops = 2 * T * B * 2 * H * GATES[family] * H * passes
                    times = {isa: [] for isa in paths}
                    for _ in range(args.rounds):
                        for isa in paths:
                            with _isa.forced(isa):
                                call()
                                times[isa].append(sample(call))
                            time.sleep(0.05)   # the pools go idle between paths
                    cols = []
                    for isa in paths:
                        s = median(times[isa])
                        gf = flops / s / 1e9
                        cols.append(f"{s * 1e3:.2f} ({gf:.0f}, "
                                    f"{100 * gf / peaks[isa]['float32', threads]:.0f}%)")
                    print(f"| {family} | {B} | {threads} | {task} | " + " | ".join(cols) + " |",
                          flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

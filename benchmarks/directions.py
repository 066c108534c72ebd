"""A bidirectional layer's two directions at once against one after the other (cells.torch).

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python benchmarks/directions.py
    python benchmarks/directions.py --family lstm --threads 2 4 --repeats 11

cells.torch runs a bidirectional layer's directions, under torch.no_grad, on the prepared nets
of its weights; with two threads or more it runs the two at once, each on its share of the
threads (cells._prepared.call_together), where a thread's share of the weights every step
reads fits a core's L2. Contenders, float32, the directions of one layer of a
torch.nn.LSTM's or GRU's weights (I = H), alternated (harness.time_alternating), medians of
--repeats samples, each of calls that follow each other (settle_s=0: both run on cells' team
alone, and a sample after a sleep would time the wake-up of an idle vCPU, which makes the
first calls of "together" run one direction after the other):

- "together": call_together, as cells.torch calls it;
- "apart": each direction's call alone on the threads its work gains from, one after the
  other (what cells.torch did before).

ratio = together / apart (below 1: at once is faster). The two give the same bits (checked).
"""
import argparse
import sys
from statistics import median

import numpy as np
import torch

import harness
from cells import _prepared, _time_loop
from cells.torch import GRU, LSTM
from cells.torch._modules import call_net, time_reversed

SHAPES = [(100, 1, 64), (100, 1, 128), (100, 1, 256), (100, 4, 256), (100, 16, 256),
          (100, 64, 256), (50, 1, 512), (25, 64, 512)]   # (T, B, H)
MODULES = {"lstm": LSTM, "gru": GRU}


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--family", nargs="+", choices=MODULES, default=list(MODULES))
    parser.add_argument("--threads", nargs="+", type=int, default=[2])
    parser.add_argument("--repeats", type=int, default=9, help="timed samples per contender")
    return parser.parse_args(argv)


def contenders(module, T, B, H, threads):
    """The two ways of running the directions of `module`'s layer on x [T, B, H]."""
    x = torch.randn(T, B, H)
    with torch.no_grad():
        nets = module._nets(x)
    a = x.numpy()
    reversed_a = np.ascontiguousarray(time_reversed(a, None))

    def together():
        return tuple(r.h for r in _prepared.call_together(
            [(nets[0], a, None), (nets[1], reversed_a, None)], None, lambda: threads))

    def apart():
        return tuple(call_net(net, x, None).h for net, x in ((nets[0], a), (nets[1], reversed_a)))

    def on_threads():
        return harness._torch_threads(torch, threads)

    return [harness.Contender("together", together, on_threads),
            harness.Contender("apart", apart, on_threads)]


def main(argv=None):
    args = parse_args(argv)
    print(harness.environment())
    print(f"L2 {_time_loop.L2_BYTES // 1024} KiB a core")
    print(f"{'family':6} {'T':>4} {'B':>4} {'H':>4} {'threads':>7} {'together ms':>12} "
          f"{'apart ms':>9} {'ratio':>6}")
    for family in args.family:
        for T, B, H in SHAPES:
            module = MODULES[family](H, H, bidirectional=True)
            for threads in args.threads:
                samples, outputs = harness.time_alternating(
                    contenders(module, T, B, H, threads), repeats=args.repeats, settle_s=0)
                for a, b in zip(outputs["together"], outputs["apart"]):
                    np.testing.assert_array_equal(a, b)
                ms = {name: median(s) * 1e3 for name, s in samples.items()}
                print(f"{family:6} {T:4} {B:4} {H:4} {threads:7} {ms['together']:12.3f} "
                      f"{ms['apart']:9.3f} {ms['together'] / ms['apart']:6.2f}", flush=True)


if __name__ == "__main__":
    sys.exit(main())

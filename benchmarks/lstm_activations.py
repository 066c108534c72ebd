"""The LSTM's activations: cells' time loop with the default ones (σ, tanh, tanh) and with others.

    python benchmarks/lstm_activations.py
    python benchmarks/lstm_activations.py --shapes medium --threads 1 2 --repeats 5

Inference and a training step (as timing.py: forward with its workspace, backward of
loss = h.sum()), float32, bench.py's shapes, each choice of activations of ACTIVATIONS timed
alternately with the default (harness.time_alternating). Prints the median and the best ms per
case and the ratio of the best to the default's best (above 1: slower): on a shared machine the
best sample is the least disturbed one. The default runs the fused row loops of
include/cells/lstm_impl.h, every other choice the generic ones (one pass over the row per
activation); "tanh as scaled tanh" computes the default's math through the generic loops, so
its ratio is what the generic loops cost beyond the arithmetic.
"""
import argparse
import dataclasses
from statistics import median

import numpy as np

import harness
from bench import SHAPES
from families import LSTM

# name -> the time loop's activation keywords (cells.lstm: libnd4j's codes)
ACTIVATIONS = {
    "default": {},
    "tanh as scaled tanh": dict(cell_act=6, cell_alpha=1.0, cell_beta=1.0, out_act=6,
                                out_alpha=1.0, out_beta=1.0),
    "hard sigmoid gates": dict(gate_act=7),
    "relu cell and output": dict(cell_act=1, out_act=1),
    "softsign everywhere": dict(gate_act=9, cell_act=9, out_act=9),
}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--shapes", nargs="+", choices=SHAPES,
                        default=["small", "medium", "large"])
    parser.add_argument("--threads", nargs="+", type=int, default=[1])
    parser.add_argument("--repeats", type=int, default=5, help="timed samples per case")
    args = parser.parse_args(argv)
    family = dataclasses.replace(LSTM, variants=ACTIVATIONS)
    print(f"{'shape':8}{'threads':>8}  {'task':10}{'activations':22}{'median ms':>10}"
          f"{'best ms':>10}{'ratio':>8}")
    for shape_name in args.shapes:
        inp = harness.make_inputs(family, SHAPES[shape_name], np.float32)
        for threads in args.threads:
            for training in (False, True):
                contenders = []
                for name in ACTIVATIONS:
                    c = harness.cells_contender(family, inp, training, name, threads)
                    contenders.append(dataclasses.replace(c, name=name))
                samples, _ = harness.time_alternating(contenders, args.repeats)
                default = min(samples["default"])
                for name in ACTIVATIONS:
                    task = "training" if training else "inference"
                    print(f"{shape_name:8}{threads:>8}  {task:10}{name:22}"
                          f"{1e3 * median(samples[name]):>10.3f}{1e3 * min(samples[name]):>10.3f}"
                          f"{min(samples[name]) / default:>8.2f}", flush=True)


if __name__ == "__main__":
    main()

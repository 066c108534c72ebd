"""Streaming inference: a recurrent net prepared once serves frames that arrive one at a time.

    python examples/streaming.py
    python examples/streaming.py --cell gru --frames 5000 --inputs 80 --hidden 256

A live source (a microphone's feature frames, a sensor, a token stream) hands the model one
frame at a time, and each frame's answer is wanted before the next frame arrives. So the
weights are prepared once (cells.lstm.prepare, cells.gru.prepare: checked and packed into the
layout the kernels multiply), and every frame is one call of the net, from the state the frame
before left. The call writes into buffers made before the stream starts, out=(h, state) with
the state buffer being the state passed in (the net reads it before it writes it): nothing is
allocated per frame.

The source is synthetic so that the example runs anywhere: --inputs feature channels, each a
sine wave of its own frequency and phase with a little noise, one frame [1, nIn] per 10 ms of
signal, handed over as fast as the net takes them. The weights are random (PyTorch's
initialisation); a trained model's come through cells.convert (lstm_from_torch,
gru_from_torch, lstm_from_onnx, ...). The GRU is PyTorch's, linear_before_reset=True.

Printed: the latency of the net's call per frame, median and 99th percentile over the stream,
and the check of a prepared net's guarantee that its bits do not depend on how a sequence is
cut into calls: the streamed outputs and the final state equal, bit for bit (np.array_equal),
those of one call on the whole sequence. The exit status is 1 where they do not.
"""
import argparse
import sys
import time

import numpy as np

import cells

FRAME_RATE = 100.0      # frames per second of signal: one every 10 ms


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cell", choices=("lstm", "gru"), default="lstm")
    parser.add_argument("--frames", type=int, default=1000, help="length of the stream")
    parser.add_argument("--inputs", type=int, default=40, help="features per frame (nIn)")
    parser.add_argument("--hidden", type=int, default=128, help="units (nOut)")
    parser.add_argument("--threads", type=int, default=1,
                        help="threads per call (a one-step call at batch 1 gains nothing from "
                             "a second one up to about 128 units)")
    parser.add_argument("--seed", type=int, default=0)
    return parser.parse_args(argv)


def feature_stream(n_frames, n_inputs, seed):
    """The source: n_frames frames [1, n_inputs] float32, channel k a sine of its own frequency
    (0.5 to 8 Hz, log-spaced) and random phase plus noise, a stand-in for a filterbank."""
    rng = np.random.default_rng(seed)
    frequencies = np.geomspace(0.5, 8.0, n_inputs)
    phases = rng.uniform(0.0, 2 * np.pi, n_inputs)
    for t in range(n_frames):
        frame = (np.sin(2 * np.pi * frequencies * t / FRAME_RATE + phases)
                 + 0.1 * rng.standard_normal(n_inputs))
        yield frame.astype(np.float32)[None]


def prepare_net(cell, n_inputs, hidden, seed):
    """A net of random float32 weights drawn as PyTorch initialises them, U(-1/√H, 1/√H),
    prepared once for all the calls to come."""
    rng = np.random.default_rng(seed)
    bound = 1.0 / np.sqrt(hidden)

    def weights(*shape):
        return rng.uniform(-bound, bound, shape).astype(np.float32)

    if cell == "lstm":
        return cells.lstm.prepare(weights(n_inputs, 4 * hidden), weights(hidden, 4 * hidden),
                                  weights(4 * hidden))
    return cells.gru.prepare(weights(n_inputs, 3 * hidden), weights(hidden, 3 * hidden),
                             weights(2, 3 * hidden), linear_before_reset=True)


def serve(net, frames, n_threads):
    """One call per frame, the state carried, into buffers made once. Returns every frame's
    output [frames, 1, nState], the final state and each call's latency in seconds."""
    widths = {"h": net.nState, "c": net.nOut}
    state = net.State(*(np.zeros((1, widths[name]), net.dtype) for name in net.State._fields))
    h = np.empty((1, net.nState), net.dtype)
    out = (h, state)
    outputs, latencies = [], []
    for frame in frames:
        start = time.perf_counter()
        net(frame, state, out=out, n_threads=n_threads)
        latencies.append(time.perf_counter() - start)
        outputs.append(h.copy())    # where a server would hand h on; kept here for the check
    return np.stack(outputs), state, np.array(latencies)


def main(argv=None):
    args = parse_args(argv)
    net = prepare_net(args.cell, args.inputs, args.hidden, args.seed)
    streamed, state, latencies = serve(
        net, feature_stream(args.frames, args.inputs, args.seed), args.threads)

    median_us, p99_us = 1e6 * np.percentile(latencies, [50, 99])
    period_us = 1e6 / FRAME_RATE
    print(f"{args.cell}, {args.inputs} inputs, {args.hidden} units, {args.threads} "
          f"thread{'s' * (args.threads > 1)}: {args.frames} frames streamed")
    print(f"latency per frame: median {median_us:.1f} µs, p99 {p99_us:.1f} µs "
          f"({100 * p99_us / period_us:.2f}% of the {period_us / 1e3:.0f} ms between frames)")

    # The same stream again, all at once: one call on [frames, 1, nIn] from the zero state.
    whole = net(np.stack(list(feature_stream(args.frames, args.inputs, args.seed))))
    same = np.array_equal(streamed, whole.h) and all(
        np.array_equal(a, b) for a, b in zip(state, whole.state))
    print(f"streamed outputs and final state equal one whole-sequence call bit for bit: "
          f"{'yes' if same else 'NO'}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())

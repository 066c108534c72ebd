"""GRU benchmark of cells against plain NumPy, PyTorch and ONNX Runtime.

For every shape, thread count, dtype, variant (reset_before, linear_before_reset) and task
(inference, training step = forward + backward with loss = h.sum()) the contenders run alternated
after a warm-up; the median per call, the speed-up of cells and the max abs difference of each
output to a float64 NumPy GRU are printed per shape and saved as JSON with the environment.

PyTorch takes part for linear_before_reset (its GRU), ONNX Runtime for float32
inference when onnx and onnxruntime are importable. Contenders, timing and rows live in
cells/_bench.py; this script adds ONNX Runtime, the grid and the JSON file.

    python benchmarks/bench_gru.py                                   # everything (long)
    python benchmarks/bench_gru.py --shapes small medium --threads 2 --dtypes float32 --repeats 3
"""
import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))   # this checkout, built in place
from cells import _bench
from cells._bench import Shape

# "medium" with B1 ... B256 is a batch sweep at T=100, I=H=256.
SHAPES = {
    "small": Shape(T=100, B=1, I=128, H=128),
    "medium": Shape(T=100, B=64, I=256, H=256),
    "large": Shape(T=50, B=128, I=512, H=512),
    "B1": Shape(T=100, B=1, I=256, H=256),
    "B4": Shape(T=100, B=4, I=256, H=256),
    "B16": Shape(T=100, B=16, I=256, H=256),
    "B256": Shape(T=100, B=256, I=256, H=256),
}


def onnx_gru_model(inp, linear_before_reset):
    """A single-node ONNX GRU (opset 14) holding cells' weights as initializers.

    ONNX keeps gates in the order (z, r, h) = cells' (u, r, c) and weights as W [1,3H,I],
    R [1,3H,H], B [1,6H] = [Wb, Rb], so the column blocks are permuted and transposed."""
    from onnx import TensorProto, helper, numpy_helper

    T, B, I = inp.x.shape
    H = inp.hI.shape[1]
    zrh = np.r_[H:2 * H, 0:H, 2 * H:3 * H]
    initializers = [numpy_helper.from_array(a, name) for name, a in (
        ("W", inp.Wx[:, zrh].T[None].copy()),
        ("R", inp.Wh[:, zrh].T[None].copy()),
        ("B", np.concatenate([inp.b[0, zrh], inp.b[1, zrh]])[None]))]
    node = helper.make_node("GRU", ["X", "W", "R", "B", "", "initial_h"], ["Y"],
                            hidden_size=H, linear_before_reset=int(linear_before_reset))
    graph = helper.make_graph(
        [node], "gru",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, [T, B, I]),
         helper.make_tensor_value_info("initial_h", TensorProto.FLOAT, [1, B, H])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [T, 1, B, H])],
        initializer=initializers)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])


def onnx_contender(inp, training, linear_before_reset, threads):
    """ONNX Runtime GRU inference with intra_op_num_threads = threads; None for training, for
    float64 (ONNX Runtime has no float64 GRU kernel) or without onnx/onnxruntime."""
    if training or inp.x.dtype != np.float32:
        return None
    try:
        import onnxruntime
    except ImportError:
        return None
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = threads
    session = onnxruntime.InferenceSession(
        onnx_gru_model(inp, linear_before_reset).SerializeToString(), options,
        providers=["CPUExecutionProvider"])
    feeds = {"X": inp.x, "initial_h": inp.hI[None]}

    def run():
        return (session.run(["Y"], feeds)[0][:, 0],)

    return _bench.Contender("onnxruntime", run)


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--shapes", nargs="+", choices=SHAPES, default=list(SHAPES))
    parser.add_argument("--threads", nargs="+", type=int, default=[1, 2])
    parser.add_argument("--dtypes", nargs="+", choices=("float32", "float64"),
                        default=["float32", "float64"])
    parser.add_argument("--repeats", type=int, default=5, help="alternated timed rounds (median)")
    parser.add_argument("--out", type=Path, default=Path(__file__).with_name("results.json"))
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    _bench.optional_torch()   # loaded now so that its thread pools are listed
    env = _bench.environment()
    try:
        import onnxruntime
        env["onnxruntime"] = onnxruntime.__version__
    except ImportError:
        env["onnxruntime"] = None
    print(f"CPU: {env['cpu']} ({env['cpus']} CPUs, load average {env['load_average']})")
    print(f"numpy {env['numpy']}, scipy {env['scipy']}, torch {env['torch']}, "
          f"onnxruntime {env['onnxruntime']}")
    print("thread pools (threadpoolctl):")
    for line in _bench.threadpool_summary():
        print("  " + line)

    factories = _bench.CONTENDER_FACTORIES + (onnx_contender,)
    rows = []
    for name in args.shapes:
        shape_rows = []
        t0 = time.perf_counter()
        for threads in args.threads:
            for dtype in args.dtypes:
                for training in (False, True):
                    for linear_before_reset in (False, True):
                        shape_rows += _bench.compare(
                            SHAPES[name], dtype=np.dtype(dtype), threads=threads,
                            linear_before_reset=linear_before_reset, training=training,
                            repeats=args.repeats, factories=factories)
        print(f"\n{name}: {SHAPES[name]} ({time.perf_counter() - t0:.0f} s)")
        print(_bench.format_table(shape_rows), flush=True)
        rows += shape_rows

    settings = {"shapes": {n: vars(SHAPES[n]) for n in args.shapes}, "threads": args.threads,
                "dtypes": args.dtypes, "repeats": args.repeats,
                "tolerance": {t.name: tol for t, tol in _bench.TOLERANCE.items()}}
    args.out.write_text(json.dumps({"environment": env, "settings": settings, "rows": rows},
                                   indent=1))
    print(f"\nsaved {len(rows)} rows to {args.out}")
    return 0 if all(r["ok"] for r in rows if r["contender"] == "cells") else 1


if __name__ == "__main__":
    sys.exit(main())

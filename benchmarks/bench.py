"""GRU, LSTM and LLTM benchmark of cells against plain NumPy, PyTorch and ONNX Runtime.

For every family, shape, thread count, dtype, variant (GRU: reset_before, linear_before_reset)
and task (inference, training step = forward + backward with loss = h.sum()) the contenders run
alternated after a warm-up; the median per call, the speed-up of cells and the max abs
difference of h (and, for training, of the recurrent-weight gradient) to a float64 NumPy cell
are printed per family and shape and saved as JSON with the environment.

PyTorch takes part for every family (GRU: linear_before_reset only, its nn.GRU; LSTM: nn.LSTM;
LLTM: the C++-extension tutorial's pure-PyTorch step in a Python loop), ONNX Runtime for float32
GRU and LSTM inference when onnx and onnxruntime are importable. Families, contenders, timing and
rows live in cells/_bench.py; this script adds ONNX Runtime, the grid and the JSON file.

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

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))   # this checkout, built in place
from cells import _bench
from cells._bench import Shape

import plot
import targets

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
# The shapes issue 4's targets are stated for, by (T, B, I, H).
SHAPE_CLASSES = {(s.T, s.B, s.I, s.H): name for name, s in SHAPES.items()
                 if name in ("small", "medium", "large")}


# ----------------------------------------------------------------------------------------------
# ONNX Runtime
# ----------------------------------------------------------------------------------------------

def _blocks(H, order):
    """Column indices that put gate blocks of width H in `order` (source block per target)."""
    return np.concatenate([np.arange(k * H, (k + 1) * H) for k in order])


def _onnx_rnn(op, inp, weights, states, **attributes):
    """A single-node ONNX GRU or LSTM (opset 14, direction forward, layout 0) holding the weights
    (W, R, B) as initializers; X and the initial states are graph inputs. Returns (model, feeds)."""
    from onnx import TensorProto, helper, numpy_helper

    T, B, I = inp.x.shape
    H = inp["hI"].shape[1]
    state_names = ("initial_h", "initial_c")[:len(states)]
    node = helper.make_node(op, ["X", "W", "R", "B", "", *state_names], ["Y"], hidden_size=H,
                            **attributes)
    graph = helper.make_graph(
        [node], op.lower(),
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, [T, B, I])]
        + [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, B, H]) for n in state_names],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [T, 1, B, H])],
        initializer=[numpy_helper.from_array(np.ascontiguousarray(a), name)
                     for name, a in weights.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    return model, {"X": inp.x, **{n: s[None] for n, s in zip(state_names, states)}}


def onnx_gru(inp, *, linear_before_reset):
    """ONNX GRU: gates (z, r, h) = cells' (u, r, c), W [1,3H,I], R [1,3H,H], B [1,6H] = [Wb, Rb]."""
    H = inp["hI"].shape[1]
    zrh = _blocks(H, (1, 0, 2))
    b = inp["b"]
    return _onnx_rnn("GRU", inp, {"W": inp["Wx"][:, zrh].T[None], "R": inp["Wh"][:, zrh].T[None],
                                  "B": np.concatenate([b[0, zrh], b[1, zrh]])[None]},
                     [inp["hI"]], linear_before_reset=int(linear_before_reset))


def onnx_lstm(inp):
    """ONNX LSTM: gates (i, o, f, c) = cells' blocks (0, 3, 1, 2), W [1,4H,I], R [1,4H,H],
    B [1,8H] = [Wb, Rb] with Wb = b, Rb = 0; no peepholes."""
    H = inp["hI"].shape[1]
    iofc = _blocks(H, (0, 3, 1, 2))
    b = inp["b"]
    return _onnx_rnn("LSTM", inp, {"W": inp["Wx"][:, iofc].T[None],
                                   "R": inp["Wr"][:, iofc].T[None],
                                   "B": np.concatenate([b[iofc], np.zeros_like(b)])[None]},
                     [inp["hI"], inp["cI"]])


ONNX_MODELS = {"gru": onnx_gru, "lstm": onnx_lstm}


def onnx_contender(family, inp, training, variant, threads):
    """ONNX Runtime inference with intra_op_num_threads = threads; None for training, for
    float64 (ONNX Runtime has no float64 GRU/LSTM kernel), for LLTM (no ONNX operator) or
    without onnx/onnxruntime."""
    if training or inp.x.dtype != np.float32 or family.name not in ONNX_MODELS:
        return None
    try:
        import onnxruntime
    except ImportError:
        return None
    model, feeds = ONNX_MODELS[family.name](inp, **family.variants[variant])
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = threads
    session = onnxruntime.InferenceSession(model.SerializeToString(), options,
                                           providers=["CPUExecutionProvider"])

    def run():
        return (session.run(["Y"], feeds)[0][:, 0],)

    return _bench.Contender("onnxruntime", run)


# ----------------------------------------------------------------------------------------------
# The grid
# ----------------------------------------------------------------------------------------------

def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--family", nargs="+", choices=_bench.FAMILIES,
                        default=list(_bench.FAMILIES))
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
    families = [_bench.FAMILIES[name] for name in dict.fromkeys(args.family)]
    missing = [f.name for f in families if not f.available()]
    if missing:
        print(f"this build of cells lacks the time loops of: {', '.join(missing)}")
        return 1

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
    print(_bench.TABLE_LEGEND)

    ceilings = {(threads, dtype): _bench.gemm_ceiling(dtype, threads)
                for threads in args.threads for dtype in args.dtypes}
    for (threads, dtype), gflops in ceilings.items():
        print(f"big-square gemm (1024³) {dtype}, {threads} thread(s): {gflops:.1f} GF/s")
    factories = _bench.CONTENDER_FACTORIES + (onnx_contender,)
    rows = []
    for family in families:
        for name in args.shapes:
            block = []
            t0 = time.perf_counter()
            for threads in args.threads:
                for dtype in args.dtypes:
                    for training in (False, True):
                        for variant in family.variants:
                            block += _bench.compare(
                                family, SHAPES[name], dtype=np.dtype(dtype), threads=threads,
                                variant=variant, training=training, repeats=args.repeats,
                                factories=factories, ceiling=ceilings[threads, dtype])
            print(f"\n{family.name} {name}: {SHAPES[name]} ({time.perf_counter() - t0:.0f} s, "
                  f"load average {_bench.load_average()})")
            print(_bench.format_table(block), flush=True)
            rows += block

    verdicts = targets.check(rows, SHAPE_CLASSES)
    print("\n" + targets.format_verdicts(verdicts))
    settings = {"families": [f.name for f in families],
                "shapes": {n: vars(SHAPES[n]) for n in args.shapes}, "threads": args.threads,
                "dtypes": args.dtypes, "repeats": args.repeats,
                "tolerance": {t.name: tol for t, tol in _bench.TOLERANCE.items()},
                "gemm_ceiling_gflops": {f"{d} {t}": g for (t, d), g in ceilings.items()}}
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

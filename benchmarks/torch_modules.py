"""cells.torch's modules against torch's own: the time of a training step, and of inference.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE PYTHONPATH=. python benchmarks/torch_modules.py
    PYTHONPATH=. python benchmarks/torch_modules.py --quick      # small shape, 1 thread, 1 sample
    PYTHONPATH=. python benchmarks/torch_modules.py --shapes medium --threads 2 --repeats 5 \\
        --out torch_modules.json
    PYTHONPATH=. python benchmarks/torch_modules.py --parts inference step --repeats 15

Five parts (--parts), float32, each case at every thread count of --threads
(torch.set_num_threads around every contender: cells.torch runs on at most
torch.get_num_threads() threads), the contenders alternated after a warm-up call
(harness.time_alternating), medians of --repeats samples:

1. stacks: a training step (forward, loss = MSE against a fixed random target, backward, SGD
   step) of torch.nn.GRU, torch.nn.LSTM and the LSTM with proj_size = H/2 (LSTMP) with 1 and 2
   layers, uni- and bidirectional, against the cells.torch class with the same state_dict, on
   bench.py's shapes small (T=100 B=1), medium (T=100 B=64) and large (T=50 B=128), I = H;
2. packed: the same step on a PackedSequence (pack_padded_sequence inside the step,
   enforce_sorted=False, lengths drawn uniformly in [T/4, T]), T=100 B=64, H = 128 and 256, one
   layer, one direction; torch's step on the padded batch (no packing) is the third row;
3. overhead: ct.GRU / ct.LSTM, one layer, forward and backward of loss = output.sum() (the
   input requires grad), against cells.gruTimeLoop + gruTimeLoopBp (lstmLayerTimeLoop + Bp)
   called directly on the module's weights as NumPy arrays in cells' layout, on the shapes of
   part 1;
4. inference: the forward of a 2-layer bidirectional GRU and LSTM under torch.inference_mode,
   T=100 B=4 I=H=64 (cells.torch on its prepared nets), torch against cells.torch;
5. step: one step (T=1 B=1 I=H=128) of an LSTM under inference_mode from a given state (a
   server's call, the state carried in): the bare prepared net of the module's weights
   (cells.lstm.prepare, n_threads=None), cells.torch's module and torch's; overhead = module
   µs - net µs.

ratio = torch ms / cells ms (above 1: cells.torch is faster); overhead = module ms / loops ms
- 1. Every row also gives the max abs difference between the contenders' first outputs and
their weight_hh_l0 gradients (same parameters, same input): a check that both did the same
work, not an accuracy test (tests/test_torch_modules.py is that). After the tables, issue 10's
targets are printed with the measured extreme and met or MISSED.
"""
import argparse
import contextlib
import json
import os
import sys
import time
from pathlib import Path
from statistics import median

import numpy as np
import torch
from torch.nn import functional as F
from torch.nn.utils.rnn import PackedSequence, pack_padded_sequence

import cells
import cells.torch as ct
import harness
from bench import SHAPES

CELLS = {"GRU": (torch.nn.GRU, ct.GRU), "LSTM": (torch.nn.LSTM, ct.LSTM),
         "LSTMP": (torch.nn.LSTM, ct.LSTM)}   # LSTMP: proj_size = H/2, part 1 only


def proj_size(cell, H):
    """The LSTMP's projection width (0: none)."""
    return H // 2 if cell == "LSTMP" else 0
STACKS = ((1, False), (2, False), (1, True), (2, True))   # (num_layers, bidirectional)
PACKED_T, PACKED_B, PACKED_H = 100, 64, (128, 256)
PARTS = ("stacks", "packed", "overhead", "inference", "step")
INFERENCE_T, INFERENCE_B, INFERENCE_H = 100, 4, 64
STEP_H = 128

# Issue 10's targets: (part, cell or None for both, the bound, "min" ratio or "max" overhead).
TARGETS = (
    ("stacks", "GRU", 1.5, "ratio"),
    ("stacks", "LSTM", 1.0, "ratio"),
    ("packed", None, 2.0, "ratio"),
    ("overhead", None, 0.10, "overhead"),
)


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--shapes", nargs="+", choices=("small", "medium", "large"),
                        default=["small", "medium", "large"], help="shapes of parts 1 and 3")
    parser.add_argument("--cells", nargs="+", choices=tuple(CELLS), default=list(CELLS))
    parser.add_argument("--parts", nargs="+", choices=PARTS, default=list(PARTS))
    parser.add_argument("--threads", nargs="+", type=int, default=[1, 2])
    parser.add_argument("--repeats", type=int, default=2, help="timed samples per contender")
    parser.add_argument("--quick", action="store_true",
                        help="a smoke run: --shapes small --threads 1 --repeats 1, packed at "
                             "H=128 only")
    parser.add_argument("--out", type=Path, help="write the rows and the environment as JSON")
    args = parser.parse_args(argv)
    if args.quick:
        args.shapes, args.threads, args.repeats = ["small"], [1], 1
    args.packed_h = PACKED_H[:1] if args.quick else PACKED_H
    return args


def max_abs_diff(a, b):
    return float((a.double() - b.double()).abs().max())


def module_pair(cell, I, H, num_layers, bidirectional):
    """torch's module (seed 0) and the cells.torch one with its state_dict, float32."""
    torch_class, cells_class = CELLS[cell]
    options = dict(num_layers=num_layers, bidirectional=bidirectional)
    if proj_size(cell, H):
        options["proj_size"] = proj_size(cell, H)
    torch.manual_seed(0)
    reference = torch_class(I, H, **options)
    module = cells_class(I, H, **options)
    module.load_state_dict(reference.state_dict())
    return reference, module


def training_contender(name, module, make_input, target, threads):
    """One training step of `module` on make_input() (a tensor or a PackedSequence): forward,
    MSE against target, backward, SGD step. Returns (output data, weight_hh_l0's gradient)."""
    optimizer = torch.optim.SGD(module.parameters(), lr=0.1)

    def run():
        optimizer.zero_grad()
        output, _ = module(make_input())
        data = output.data if isinstance(output, PackedSequence) else output
        F.mse_loss(data, target).backward()
        optimizer.step()
        return data.detach(), module.weight_hh_l0.grad

    return harness.Contender(name, run, lambda: harness._torch_threads(torch, threads))


def timed_rows(contenders, repeats, case, **timing):
    """Time the contenders alternated; one row per contender with case's keys, ms, the ratio
    (the first contender's ms / this one's: the first is the reference) and the max abs
    differences of the outputs and gradients to the reference's (None for another problem: the
    padded batch of a packed case). `timing`: harness.time_alternating's options."""
    samples, outputs = harness.time_alternating(contenders, repeats, **timing)
    ms = {name: 1e3 * median(s) for name, s in samples.items()}
    first = contenders[0].name
    rows = []
    for c in contenders:
        (out, grad), (ref_out, ref_grad) = outputs[c.name], outputs[first]
        same_problem = out.shape == ref_out.shape
        rows.append({**case, "contender": c.name, "ms": ms[c.name],
                     "ratio": ms[first] / ms[c.name],
                     "diff_out": max_abs_diff(out, ref_out) if same_problem else None,
                     "diff_grad": max_abs_diff(grad, ref_grad)
                     if same_problem and grad is not None else None})
    return rows


def stack_rows(cell, shape_name, num_layers, bidirectional, threads, repeats):
    """Part 1: torch's and cells.torch's training step on one shape."""
    s = SHAPES[shape_name]
    reference, module = module_pair(cell, s.I, s.H, num_layers, bidirectional)
    torch.manual_seed(1)
    x = 2 * torch.rand(s.T, s.B, s.I) - 1
    target = torch.rand(s.T, s.B, (2 if bidirectional else 1) * (proj_size(cell, s.H) or s.H))
    contenders = [training_contender(name, m, lambda: x, target, threads)
                  for name, m in (("torch", reference), ("cells", module))]
    case = {"part": "stacks", "cell": cell, "shape": shape_name, "T": s.T, "B": s.B, "I": s.I,
            "H": s.H, "layers": num_layers, "bidirectional": bidirectional, "threads": threads}
    return timed_rows(contenders, repeats, case)


def packed_rows(cell, H, threads, repeats):
    """Part 2: the training step on a PackedSequence, torch against cells.torch, and torch's
    step on the padded batch."""
    T, B = PACKED_T, PACKED_B
    reference, module = module_pair(cell, H, H, 1, False)
    torch.manual_seed(1)
    x = 2 * torch.rand(T, B, H) - 1
    lengths = torch.randint(T // 4, T + 1, (B,))
    packed_target = torch.rand(int(lengths.sum()), H)
    padded_target = torch.rand(T, B, H)

    def packed():
        return pack_padded_sequence(x, lengths, enforce_sorted=False)

    contenders = [training_contender("torch", reference, packed, packed_target, threads),
                  training_contender("cells", module, packed, packed_target, threads),
                  training_contender("torch padded", reference, lambda: x, padded_target,
                                     threads)]
    case = {"part": "packed", "cell": cell, "shape": f"lengths {T // 4}-{T}", "T": T, "B": B,
            "I": H, "H": H, "layers": 1, "bidirectional": False, "threads": threads}
    return timed_rows(contenders, repeats, case)


def loops_contender(cell, module, x, threads):
    """cells' time loop and its backward (loss = h.sum(): dLdh = ones) on the module's weights
    in cells' layout (Wx = weight_ih_l0.T, ..., made contiguous once, outside the timed calls;
    zero initial states), as a NumPy program would call them. Returns (h, the gradient of
    weight_hh_l0)."""
    weights = [p.detach().numpy() for p in (module.weight_ih_l0, module.weight_hh_l0,
                                            module.bias_ih_l0, module.bias_hh_l0)]
    Wx, Wh = np.ascontiguousarray(weights[0].T), np.ascontiguousarray(weights[1].T)
    b_ih, b_hh = weights[2], weights[3]
    xa = x.detach().numpy()
    T, B = xa.shape[:2]
    H = module.hidden_size
    hI = np.zeros((B, H), np.float32)
    dLdh = np.ones((T, B, H), np.float32)

    if cell == "GRU":
        b = np.stack([b_ih, b_hh])

        def run():
            h, ws = cells.gruTimeLoop(xa, hI, Wx, Wh, b, linear_before_reset=True,
                                      return_workspace=True, n_threads=threads)
            grads = cells.gruTimeLoopBp(xa, hI, Wx, Wh, b, dLdh, workspace=ws,
                                        linear_before_reset=True, n_threads=threads)
            return torch.from_numpy(h), torch.from_numpy(grads[3].T)
    else:
        b = b_ih + b_hh
        cI = np.zeros((B, H), np.float32)

        def run():
            h, _, _, ws = cells.lstmLayerTimeLoop(xa, Wx, Wh, b, hI, cI, return_workspace=True,
                                                  n_threads=threads)
            grads = cells.lstmLayerTimeLoopBp(xa, Wx, Wh, b, hI, cI, dLdh, workspace=ws,
                                              n_threads=threads)
            return torch.from_numpy(h), torch.from_numpy(grads[2].T)

    return harness.Contender("loops", run)


def overhead_rows(cell, shape_name, threads, repeats):
    """Part 3: the cells.torch module's forward and backward against cells' loops called
    directly."""
    s = SHAPES[shape_name]
    _, module = module_pair(cell, s.I, s.H, 1, False)
    torch.manual_seed(1)
    x = (2 * torch.rand(s.T, s.B, s.I) - 1).requires_grad_(True)

    def module_step():
        module.zero_grad()
        x.grad = None
        output, _ = module(x)
        output.sum().backward()
        return output.detach(), module.weight_hh_l0.grad

    contenders = [loops_contender(cell, module, x, threads),
                  harness.Contender("cells.torch", module_step,
                                    lambda: harness._torch_threads(torch, threads))]
    case = {"part": "overhead", "cell": cell, "shape": shape_name, "T": s.T, "B": s.B,
            "I": s.I, "H": s.H, "layers": 1, "bidirectional": False, "threads": threads}
    rows = timed_rows(contenders, repeats, case)
    for r in rows:
        r["overhead"] = 1 / r["ratio"] - 1
    return rows


@contextlib.contextmanager
def inference(threads):
    """torch.inference_mode on `threads` threads, entered around a contender's samples (not
    per call: entering it costs µs, which part 5 would count as the module's)."""
    with harness._torch_threads(torch, threads), torch.inference_mode():
        yield


def inference_contender(name, module, x, threads):
    """The module's forward on x under torch.inference_mode. Returns (output, None)."""
    return harness.Contender(name, lambda: (module(x)[0], None), lambda: inference(threads))


def inference_rows(cell, threads, repeats):
    """Part 4: torch's and cells.torch's forward under inference_mode, 2 layers, both
    directions."""
    T, B, H = INFERENCE_T, INFERENCE_B, INFERENCE_H
    reference, module = module_pair(cell, H, H, 2, True)
    torch.manual_seed(1)
    x = 2 * torch.rand(T, B, H) - 1
    contenders = [inference_contender(name, m, x, threads)
                  for name, m in (("torch", reference), ("cells", module))]
    case = {"part": "inference", "cell": cell, "shape": "inference", "T": T, "B": B, "I": H,
            "H": H, "layers": 2, "bidirectional": True, "threads": threads}
    return timed_rows(contenders, repeats, case)


def step_rows(threads, repeats):
    """Part 5: one LSTM step from a given state, the bare prepared net against the
    cells.torch module and torch's; each row's overhead_us is its µs per call minus the
    net's."""
    reference, module = module_pair("LSTM", STEP_H, STEP_H, 1, False)
    torch.manual_seed(1)
    x = 2 * torch.rand(1, 1, STEP_H) - 1
    with inference(threads):
        _, hx = module(x)
    b = (module.bias_ih_l0 + module.bias_hh_l0).detach().numpy()
    net = cells.lstm.prepare(module.weight_ih_l0.detach().numpy().T,
                             module.weight_hh_l0.detach().numpy().T, b)
    xa, state = x.numpy(), net.State(hx[0][0].numpy(), hx[1][0].numpy())

    def bare_net():
        return torch.from_numpy(net(xa, state).h), None

    def stepped(m):
        return lambda: (m(x, hx)[0], None)

    contenders = [harness.Contender(name, run, lambda: inference(threads))
                  for name, run in (("net", bare_net), ("cells", stepped(module)),
                                    ("torch", stepped(reference)))]
    case = {"part": "step", "cell": "LSTM", "shape": "step", "T": 1, "B": 1, "I": STEP_H,
            "H": STEP_H, "layers": 1, "bidirectional": False, "threads": threads}
    # samples of 0.1 s: a call lasts µs, and the first ones after the sleep that starts a
    # sample (harness.time_alternating) run on cold caches
    rows = timed_rows(contenders, repeats, case, min_sample_s=0.1)
    for r in rows:
        r["overhead_us"] = 1e3 * (r["ms"] - rows[0]["ms"])
    return rows


def format_table(rows):
    """Aligned text table of the rows."""
    def fmt(d):
        return "-" if d is None else f"{d:.1e}"

    header = ("part", "cell", "shape", "layers", "dirs", "thr", "contender", "ms", "ratio",
              "|d out|", "|d grad|")
    lines = [(r["part"], r["cell"],
              f"T={r['T']} B={r['B']} H={r['H']}" + (f", {r['shape']}" if r["part"] == "packed"
                                                      else ""),
              str(r["layers"]), "bi" if r["bidirectional"] else "uni", str(r["threads"]),
              r["contender"], f"{r['ms']:.4f}" if r["part"] == "step" else f"{r['ms']:.2f}",
              f"{r['ratio']:.2f}", fmt(r["diff_out"]),
              fmt(r["diff_grad"])) for r in rows]
    widths = [max(len(x) for x in col) for col in zip(header, *lines)]
    right = {"layers", "thr", "ms", "ratio", "|d out|", "|d grad|"}
    return "\n".join("  ".join(x.rjust(w) if h in right else x.ljust(w)
                               for h, x, w in zip(header, line, widths)).rstrip()
                     for line in [header] + lines)


def check_targets(rows):
    """Issue 10's targets against the rows: one dict per target with the extreme measured
    value (the smallest ratio of cells.torch over torch, or the largest module overhead), its
    case and met."""
    results = []
    for part, cell, bound, key in TARGETS:
        measured = [r for r in rows if r["part"] == part and (cell is None or r["cell"] == cell)
                    and r["contender"] in ("cells", "cells.torch")]
        if not measured:
            continue
        if key == "ratio":
            worst = min(measured, key=lambda r: r["ratio"])
            met, value, text = worst["ratio"] >= bound, worst["ratio"], f">= {bound}x torch"
        else:
            worst = max(measured, key=lambda r: r["overhead"])
            met, value, text = worst["overhead"] <= bound, worst["overhead"], \
                f"<= {bound:.0%} over the loops"
        case = (f"{worst['cell']} {worst['shape']} H={worst['H']} layers={worst['layers']} "
                f"{'bi' if worst['bidirectional'] else 'uni'} threads={worst['threads']}")
        results.append({"part": part, "cell": cell or "GRU, LSTM", "target": text,
                        "worst": value, "case": case, "met": met})
    return results


def main(argv=None):
    args = parse_args(argv)
    print(f"cells {cells.__version__} from {os.path.dirname(cells.__file__)}, torch "
          f"{torch.__version__}, float32, {harness.cpu_model()}, {harness.default_threads()} "
          f"CPUs, load {harness.load_average()}")
    print("thread pools (threadpoolctl):")
    for line in harness.threadpool_summary():
        print("  " + line)
    rows, t0 = [], time.perf_counter()
    parts = set(args.parts)
    for threads in args.threads:
        for cell in args.cells:
            if "stacks" in parts:
                for shape_name in args.shapes:
                    for num_layers, bidirectional in STACKS:
                        rows += stack_rows(cell, shape_name, num_layers, bidirectional,
                                           threads, args.repeats)
            if cell == "LSTMP":
                continue
            if "packed" in parts:
                for H in args.packed_h:
                    rows += packed_rows(cell, H, threads, args.repeats)
            if "overhead" in parts:
                for shape_name in args.shapes:
                    rows += overhead_rows(cell, shape_name, threads, args.repeats)
            if "inference" in parts:
                rows += inference_rows(cell, threads, args.repeats)
        if "step" in parts:
            rows += step_rows(threads, args.repeats)
        print(f"{threads} thread(s) done ({time.perf_counter() - t0:.0f} s, load "
              f"{harness.load_average()})", flush=True)
    print()
    print(format_table(rows))
    for r in rows:
        if r["part"] == "step" and r["contender"] != "net":
            print(f"step, {r['threads']} thread(s): {r['contender']} {r['overhead_us']:.1f} µs "
                  f"per call over the bare net")
    print("\nms = median per training step (inference, step: per forward call); ratio = the "
          "first row of a case's ms / this row's (cells: torch ms / cells ms, above 1: "
          "cells.torch is faster; cells.torch: loops ms / module ms); |d out|, |d grad| = max "
          "abs difference of the output and of weight_hh_l0's gradient to the first row's")
    targets = check_targets(rows)
    print("\nissue 10's targets:")
    for t in targets:
        worst = f"{t['worst']:.0%}" if t["part"] == "overhead" else f"{t['worst']:.2f}x"
        print(f"  {t['part']:8} {t['cell']:9} {t['target']:24} worst {worst:>6} ({t['case']}): "
              f"{'met' if t['met'] else 'MISSED'}")
    if args.out:
        environment = harness.environment()
        args.out.write_text(json.dumps(
            {"environment": environment, "settings": {"shapes": args.shapes,
                                                      "threads": args.threads,
                                                      "repeats": args.repeats},
             "rows": rows, "targets": targets}, indent=1))
        print(f"wrote {args.out}")


if __name__ == "__main__":
    sys.exit(main())

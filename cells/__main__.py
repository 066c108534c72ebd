"""``python -m cells``: a self-check and a short benchmark of every family's time loop.

The self-check needs nothing but cells. For every family and variant, on a small problem
(T=6 B=3 I=4 H=3, random inputs, every bias row and initial state non-zero), with a loss that
weights every output of the forward (h at every step and the final states) with random weights:

- gradients: the backward (float64) against central finite differences of cells' own forward,
  along one random direction per input;
- float32: forward and backward in float32 against float64 on the same inputs (rounded to
  float32), and the dtype of every float32 result;
- workspace: the backward on the forward's workspace against the backward that recomputes the
  forward, in float32 and float64.

Then it times inference and a training step (forward with its workspace, backward of
loss = h.sum()) of cells in float32 on two shapes: median ms per call and the rate of the gemm
FLOPs any implementation must do. benchmarks/bench.py times cells against plain NumPy, PyTorch
and ONNX Runtime. The exit status is 1 when a check fails.
"""
import argparse
import math
import os
import sys
import time
from dataclasses import dataclass
from statistics import median

import numpy as np
import threadpoolctl

import cells
from cells import _families, _time_loop


@dataclass(frozen=True)
class Shape:
    """Sequence length T, batch B, input size I, hidden size H."""
    T: int
    B: int
    I: int
    H: int

    def __str__(self):
        return f"T={self.T} B={self.B} I={self.I} H={self.H}"


@dataclass(frozen=True)
class FamilyRun:
    """A family as the check and the timing call it, from its declaration (cells/_families/).

    forward, backward: its time loop and the loop's backward, which returns the gradients of
      the declared arguments first, in their order;
    input_dims(shape) -> {name: dims}: the declared arguments' shapes;
    final_states(outputs) -> {keyword: array}: the final states among the forward's outputs,
      by the backward's keyword for the gradient arriving at each;
    variants: variant name -> keyword options of forward and backward."""
    declared: _families.Family

    @property
    def name(self):
        return self.declared.name

    @property
    def forward(self):
        return getattr(cells, self.declared.time_loop)

    @property
    def backward(self):
        return getattr(cells, self.declared.time_loop_bp)

    @property
    def outputs(self):
        return self.declared.outputs

    @property
    def variants(self):
        return {variant: options for variant, (_, options) in self.declared.variants.items()}

    def input_dims(self, shape):
        return self.declared.shapes(_families.Dims(shape.T, shape.B, shape.I, shape.H))

    def final_states(self, outputs):
        return self.declared.final_state_values(outputs)


FAMILIES = {name: FamilyRun(declared) for name, declared in _families.FAMILIES.items()}

CHECK_SHAPE = Shape(T=6, B=3, I=4, H=3)
BENCH_SHAPES = (Shape(T=100, B=1, I=128, H=128), Shape(T=100, B=64, I=256, H=256))

# Allowed max abs differences, relative to max(1, max|reference|).
# Finite differences: central differences at steps 1e-5 and 5e-6 in float64, extrapolated to
# cancel their step² term (a LayerNorm over few units makes L''' large), leave a truncation
# error of order 1e-20·|L⁽⁵⁾| and a rounding error of order 1e-16·|L| / 1e-5, both well below
# 1e-7 on the check's small problem; a wrong formula is off by 1e-2 or more.
FD_STEP, FD_TOLERANCE = 1e-5, 1e-7
# float32 against float64, and the backward on the workspace against the recomputing one (in
# both dtypes): float32 rounds at 6e-8 per operation and the small problem's sums have a few
# dozen terms (errors of order 1e-6); 1e-4 still catches a wrong formula, whose errors are of
# order 1e-2. float64 rounds at 1e-16: 1e-10.
TOLERANCE = {np.dtype(np.float32): 1e-4, np.dtype(np.float64): 1e-10}


def parse_args(argv):
    parser = argparse.ArgumentParser(prog="python -m cells", description=__doc__.split("\n")[0])
    parser.add_argument("--family", nargs="+", choices=FAMILIES, default=list(FAMILIES),
                        help="cell families to check and time (default: all)")
    parser.add_argument("--threads", type=int, default=cells.cpu_count(),
                        help="n_threads of every call (default: the CPUs available, "
                             "%(default)s)")
    parser.add_argument("--repeats", type=int, default=3,
                        help="timed samples per case, median reported (default %(default)s)")
    return parser.parse_args(argv)


# ----------------------------------------------------------------------------------------------
# Self-check
# ----------------------------------------------------------------------------------------------

def as_outputs(result):
    """The forward's outputs as a tuple: h alone (GRU, RNN) becomes (h,)."""
    return result if isinstance(result, tuple) else (result,)


def forward_with_workspace(family, inputs, opts, threads):
    """(outputs, workspace) of the forward with return_workspace=True."""
    result = family.forward(*inputs.values(), return_workspace=True, n_threads=threads, **opts)
    return result[:-1], result[-1]


def backward(family, inputs, opts, threads, weights, workspace=None):
    """The gradients of the inputs, in input order, of the loss weighted by `weights`."""
    grads = family.backward(*inputs.values(), workspace=workspace, n_threads=threads,
                            **weights, **opts)
    return grads[:len(inputs)]


def weighted_loss(family, inputs, opts, threads, weights):
    """The loss whose gradients the backward computes for `weights`: <dLdh, h> plus every final
    state weighted by the weights of its gradient keyword."""
    outputs = as_outputs(family.forward(*inputs.values(), n_threads=threads, **opts))
    total = float(np.sum(weights["dLdh"] * outputs[0]))
    for keyword, state in family.final_states(outputs).items():
        total += float(np.sum(weights[keyword] * state))
    return total


def relative_diff(a, ref, dtype):
    """max|a - ref| / max(1, max|ref|); inf when a's shape or dtype is not ref's and dtype's."""
    if a.shape != ref.shape or a.dtype != dtype:
        return math.inf
    if a.size == 0:
        return 0.0
    scale = max(1.0, float(np.max(np.abs(ref))))
    return float(np.max(np.abs(a.astype(np.float64) - ref))) / scale


def directional_derivative(family, inputs, name, direction, opts, threads, weights):
    """d/ds of the weighted loss at inputs[name] + s·direction, s = 0: central differences
    D(step) at FD_STEP and FD_STEP / 2, extrapolated, (4·D(step/2) - D(step)) / 3, which
    cancels D's step² term (a LayerNorm over few units makes it large)."""
    def loss(s):
        return weighted_loss(family, {**inputs, name: inputs[name] + s * direction}, opts,
                             threads, weights)

    def central(step):
        return (loss(step) - loss(-step)) / (2 * step)

    return (4 * central(FD_STEP / 2) - central(FD_STEP)) / 3


def check_variant(family, opts, threads, shape=CHECK_SHAPE, seed=0):
    """The three checks of one family and variant: {check: {item: (error, tolerance)}}."""
    rng = np.random.default_rng(seed)

    def draw(dims):   # U(-1, 1), float32 values held in float64: both runs see the same inputs
        return rng.uniform(-1, 1, dims).astype(np.float32).astype(np.float64)

    f64, f32 = np.dtype(np.float64), np.dtype(np.float32)
    inputs = {name: draw(dims) for name, dims in family.input_dims(shape).items()}
    outputs, workspace = forward_with_workspace(family, inputs, opts, threads)
    weights = {"dLdh": draw(outputs[0].shape)}
    weights |= {k: draw(state.shape) for k, state in family.final_states(outputs).items()}
    grads = backward(family, inputs, opts, threads, weights)
    grads_ws = backward(family, inputs, opts, threads, weights, workspace)
    inputs32 = {name: a.astype(f32) for name, a in inputs.items()}
    weights32 = {k: w.astype(f32) for k, w in weights.items()}
    outputs32, workspace32 = forward_with_workspace(family, inputs32, opts, threads)
    grads32 = backward(family, inputs32, opts, threads, weights32)
    grads32_ws = backward(family, inputs32, opts, threads, weights32, workspace32)
    grad_names = [f"dLd{name}" for name in inputs]

    fd = {}
    for (name, a), grad_name, grad in zip(inputs.items(), grad_names, grads):
        direction = rng.standard_normal(a.shape)
        numeric = directional_derivative(family, inputs, name, direction, opts, threads,
                                         weights)
        analytic = float(np.sum(grad * direction))
        fd[grad_name] = (abs(numeric - analytic) / max(1.0, abs(analytic)), FD_TOLERANCE)

    single = {name: (relative_diff(o32, o, f32), TOLERANCE[f32])
              for name, o32, o in zip(family.outputs, outputs32, outputs)}
    single |= {name: (relative_diff(g32, g, f32), TOLERANCE[f32])
               for name, g32, g in zip(grad_names, grads32, grads)}

    ws = {f"{name} float64": (relative_diff(g_ws, g, f64), TOLERANCE[f64])
          for name, g_ws, g in zip(grad_names, grads_ws, grads)}
    ws |= {f"{name} float32": (relative_diff(g_ws, g, f32), TOLERANCE[f32])
           for name, g_ws, g in zip(grad_names, grads32_ws, grads32)}
    return {"gradients": fd, "float32": single, "workspace": ws}


def self_check(families, threads):
    """Print one line per family and variant; return the failures as text."""
    print(f"self-check ({CHECK_SHAPE}, n_threads={threads}), worst error relative to "
          f"max(1, max|reference|):\n"
          f"  gradients  float64 backward vs central finite differences of the forward\n"
          f"  float32    outputs and gradients vs float64 on the same inputs\n"
          f"  workspace  backward on the forward's workspace vs recomputing the forward")
    failures = []
    for family in families:
        for variant, opts in family.variants.items():
            label = family.name if len(family.variants) == 1 else f"{family.name} {variant}"
            checks = check_variant(family, opts, threads)
            failed = [f"{item} ({check})" for check, items in checks.items()
                      for item, (error, tolerance) in items.items() if not error <= tolerance]
            worst = "  ".join(f"{check} {max(e for e, _ in items.values()):.1e}"
                              for check, items in checks.items())
            print(f"  {label:26} {worst}  "
                  + (f"FAILED: {', '.join(failed)}" if failed else "ok"))
            failures += [f"{label}: {f}" for f in failed]
    return failures


# ----------------------------------------------------------------------------------------------
# Benchmark
# ----------------------------------------------------------------------------------------------

def median_seconds(call, repeats, min_sample_s=0.02):
    """Median seconds per call over `repeats` samples of at least min_sample_s each. The first,
    untimed call wakes the thread pool; unless it lasted 5 x min_sample_s, a second one (warm)
    sets the number of calls per sample."""
    t0 = time.perf_counter()
    call()
    seconds = time.perf_counter() - t0
    if seconds < 5 * min_sample_s:
        t0 = time.perf_counter()
        call()
        seconds = time.perf_counter() - t0
    number = max(1, math.ceil(min_sample_s / seconds))
    samples = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(number):
            call()
        samples.append((time.perf_counter() - t0) / number)
    return median(samples)


def time_variant(family, opts, shape, threads, repeats, seed=0):
    """Median ms of inference and of a training step (forward with its workspace, backward of
    loss = h.sum()), float32: x ~ U(-1, 1), initial states U(-0.5, 0.5), weights and biases
    U(-1/sqrt(H), 1/sqrt(H)) as PyTorch initialises them."""
    rng = np.random.default_rng(seed)
    inputs = []
    for name, dims in family.input_dims(shape).items():
        bound = {"x": 1.0, "hI": 0.5, "cI": 0.5}.get(name, 1 / math.sqrt(shape.H))
        inputs.append(rng.uniform(-bound, bound, dims).astype(np.float32))
    dLdh = np.ones((shape.T, shape.B, shape.H), np.float32)

    def inference():
        family.forward(*inputs, n_threads=threads, **opts)

    def training():
        workspace = family.forward(*inputs, return_workspace=True, n_threads=threads, **opts)[-1]
        family.backward(*inputs, dLdh, workspace=workspace, n_threads=threads, **opts)

    return 1e3 * median_seconds(inference, repeats), 1e3 * median_seconds(training, repeats)


def benchmark(families, threads, repeats):
    """Print a table: per family, variant and shape the median ms and GF/s of both tasks."""
    print(f"\nbenchmark (float32, n_threads={threads}, median of {repeats} samples); GF/s: the "
          f"gemm FLOPs any\nimplementation must do, 2·T·B·(I+H)·blocks·H (x3 for training; I "
          f"alone for IndRNN), per second")
    header = ("family", "variant", "shape", "inference ms", "GF/s", "training ms", "GF/s")
    lines = []
    for family in families:
        for variant, opts in family.variants.items():
            for shape in BENCH_SHAPES:
                gates, inputs = family.declared.gates, family.declared.product_inputs(shape.I,
                                                                                      shape.H)
                flops = 2 * shape.T * shape.B * inputs * gates * shape.H
                inference, training = time_variant(family, opts, shape, threads, repeats)
                lines.append((family.name, variant, str(shape), f"{inference:.3f}",
                              f"{flops / inference / 1e6:.1f}", f"{training:.3f}",
                              f"{3 * flops / training / 1e6:.1f}"))
    widths = [max(len(row[k]) for row in [header, *lines]) for k in range(len(header))]
    for row in [header, *lines]:
        print("  " + "  ".join(x.ljust(w) if k < 3 else x.rjust(w)
                               for k, (x, w) in enumerate(zip(row, widths))))


def describe_machine():
    """The first line of the report: cells' version and place, the CPUs, the load, the
    instruction set the kernels run (cells.instruction_set(): CELLS_ISA chooses another) and the
    L2 size they block for (read from the machine)."""
    return (f"cells {cells.__version__} ({os.path.dirname(cells.__file__)}), "
            f"{cells.cpu_count()} CPUs available, load average {os.getloadavg()[0]:.2f}, "
            f"instruction set: {cells.instruction_set()}, "
            f"L2 {_time_loop.L2_BYTES // 1024} KiB a core")


def main(argv=None):
    args = parse_args(argv)
    start = time.perf_counter()
    print(describe_machine())
    for pool in threadpoolctl.threadpool_info():
        print(f"  thread pool: {pool['user_api']} {pool['internal_api']} {pool.get('version')} "
              f"num_threads={pool['num_threads']} ({os.path.basename(pool['filepath'])})")
    families = [FAMILIES[name] for name in dict.fromkeys(args.family)]
    failures = self_check(families, args.threads)
    benchmark(families, args.threads, args.repeats)
    print(f"\n({time.perf_counter() - start:.0f} s)")
    if failures:
        print(f"FAILED: {len(failures)} check(s): " + "; ".join(failures))
        return 1
    print("self-check passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The benchmark harness: inputs, contenders, alternated timing, rows; for every family of
families.py alike.

Read top to bottom:

1. inputs: random problems, PyTorch-style initialisation, fixed seed;
2. runs: a family's NumPy cell or cells' time loop on one problem, forward and backward;
3. contenders: factories that bind cells, NumPy, PyTorch or ONNX Runtime to one problem of one
   family, for inference or for a training step, each with its own thread setting;
4. timing: warm-up, then the contenders alternated (A B C A B C ...), medians;
5. rows: one dict per contender and case (median ms, speed-up of cells, max abs difference to the
   float64 NumPy reference), and the environment (CPU, thread pools).

numpy, scipy and threadpoolctl are required, and an importable cells: install it
(`pip install -e .` or `pip install .` from the repository root) or put a checkout built in
place (`python setup.py build_ext --inplace`) on PYTHONPATH. PyTorch and ONNX Runtime join when
importable.
"""
import contextlib
import functools
import os
import platform
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from statistics import median

import numpy as np
import threadpoolctl

import cells
from families import get_family

# Allowed max abs difference to the float64 reference, relative to max(1, max|reference|).
# float32 rounds at 6e-8: a length-(I+H) dot product adds ~sqrt(I+H) of those per gate, the
# recurrence carries them across T steps and BPTT sums T*B products into each gradient entry.
# NumPy's own float32 cells stay within that scale times 3e-6 (GRU, LSTM) and 1.3e-5 (LLTM, whose
# cell state c' = c + n∘i is a running sum that grows with T) on the small and medium shapes,
# h and every gradient; 1e-4 leaves an 8-30x margin and still catches a wrong formula (errors of
# order 1e-2).
TOLERANCE = {np.dtype(np.float32): 1e-4, np.dtype(np.float64): 1e-10}


def default_threads():
    """Number of CPUs this process may use (cells.cpu_count: its affinity and cgroup quota)."""
    return cells.cpu_count()


# ----------------------------------------------------------------------------------------------
# 1. Inputs
# ----------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Shape:
    """Sequence length T, batch B, input size I, hidden size H (LLTM: state size S = H)."""
    T: int
    B: int
    I: int
    H: int

    def __str__(self):
        return f"T={self.T} B={self.B} I={self.I} H={self.H}"


@dataclass
class Inputs:
    """One problem: `args`, the kernel's positional inputs by name in the order cells takes them
    (e.g. x, hI, Wx, Wh, b for the GRU), and dLdh [T,B,H], the gradient arriving at every output
    step (ones: loss = h.sum())."""
    args: dict
    dLdh: np.ndarray

    def __getitem__(self, name):
        return self.args[name]

    @property
    def x(self):
        return self.args["x"]

    def astype(self, dtype):
        """The same values in another dtype (float32 -> float64 is exact)."""
        return Inputs({k: a.astype(dtype) for k, a in self.args.items()}, self.dLdh.astype(dtype))


def make_inputs(family, shape, dtype=np.float32, seed=0):
    """Random problem for `family` (a Family or its name): weights and biases
    U(-1/sqrt(H), 1/sqrt(H)) as PyTorch initialises them, x ~ U(-1, 1), initial states
    U(-0.5, 0.5), and dLdh = ones (loss = h.sum()). Arrays are drawn in the kernel's argument
    order."""
    family = get_family(family)
    rng = np.random.default_rng(seed)
    bounds = {"input": 1.0, "state": 0.5, "weight": 1.0 / np.sqrt(shape.H)}
    args = {name: rng.uniform(-bounds[kind], bounds[kind], dims)
            for name, (kind, dims) in family.arg_specs(shape).items()}
    return Inputs(args, np.ones((shape.T, shape.B, shape.H))).astype(dtype)


# ----------------------------------------------------------------------------------------------
# 2. Runs
# ----------------------------------------------------------------------------------------------

def numpy_run(family, args, opts, dLdh=None):
    """The family's NumPy forward, and with dLdh its backward: (outputs, grads or None)."""
    outputs, cache = family.numpy_forward(*args, **opts)
    if dLdh is None:
        return outputs, None
    return outputs, family.numpy_backward(*args, dLdh, outputs, cache, **opts)


def _as_tuple(result):
    """gruTimeLoop and rnnTimeLoop return h alone, or (h, workspace); the others always
    return tuples."""
    return result if isinstance(result, tuple) else (result,)


def cells_run(family, args, opts, n_threads, dLdh=None):
    """cells' time loop, and with dLdh its backward on the forward's workspace:
    (outputs, grads or None), named as family.outputs and family.grads."""
    forward, backward = family.kernels()
    training = dLdh is not None
    result = _as_tuple(forward(*args, return_workspace=training, n_threads=n_threads, **opts))
    outputs = result[:len(family.outputs)]
    if not training:
        return outputs, None
    grads = backward(*args, dLdh, workspace=result[-1], n_threads=n_threads, **opts)
    return outputs, tuple(grads[:len(family.grads)])


# ----------------------------------------------------------------------------------------------
# 3. Contenders
# ----------------------------------------------------------------------------------------------

@dataclass
class Contender:
    """A named zero-argument call; `threads()` is entered around it (a thread-count setting).

    `run()` returns (h,) for inference and (h, recurrent-weight gradient) for a training step."""
    name: str
    run: Callable[[], tuple]
    threads: Callable[[], contextlib.AbstractContextManager] = field(default=contextlib.nullcontext)


def compared_outputs(family, training):
    """Names of the outputs a contender returns and the rows compare: h, and for a training
    step the recurrent-weight gradient."""
    return ("h", family.recurrent_grad) if training else ("h",)


def _selected(family, outputs, grads, training):
    """Pick the compared outputs from full (outputs, grads)."""
    if not training:
        return (outputs[0],)
    return outputs[0], grads[family.grads.index(family.recurrent_grad)]


@functools.cache
def _blas_controller():
    """threadpoolctl controller, built once: its limit costs ~20 µs, threadpool_limits ~1.5 ms."""
    return threadpoolctl.ThreadpoolController()


def numpy_contender(family, inp, training, variant, threads):
    """The plain NumPy cell, its BLAS limited to `threads` around each call."""
    args, opts = tuple(inp.args.values()), family.variants[variant]
    dLdh = inp.dLdh if training else None

    def run():
        return _selected(family, *numpy_run(family, args, opts, dLdh), training)

    return Contender("numpy", run,
                     lambda: _blas_controller().limit(limits=threads, user_api="blas"))


def cells_contender(family, inp, training, variant, threads):
    """cells' time loop (+ its backward on the forward's workspace) with n_threads=threads."""
    args, opts = tuple(inp.args.values()), family.variants[variant]
    dLdh = inp.dLdh if training else None
    family.kernels()   # fail here, not in the timing loop, when the kernels are missing

    def run():
        return _selected(family, *cells_run(family, args, opts, threads, dLdh), training)

    return Contender("cells", run)


def serving_contender(family, inp, variant, threads):
    """cells' serving path: the family's net prepared once (cells.<family>.prepare on the
    weights), then one time step per call ([1, B, I]) from the initial states."""
    states = tuple(inp[name] for name in family.state_names)
    weights = [a for name, a in inp.args.items() if name != "x" and name not in family.state_names]
    net = getattr(cells, family.name).prepare(*weights, **family.variants[variant],
                                              n_threads=threads)
    x, state = np.ascontiguousarray(inp.x[:1]), net.State(*states)

    def run():
        return net(x, state).h

    return Contender("cells", run)


def optional_torch():
    """The torch module, or None when it is not installed."""
    try:
        import torch
    except ImportError:
        return None
    return torch


@contextlib.contextmanager
def _torch_threads(torch, threads):
    previous = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


def torch_contender(family, inp, training, variant, threads):
    """The family's PyTorch model on cells' weights; None without torch or where PyTorch has no
    equivalent (GRU reset-before).

    Inference runs under torch.inference_mode(); a training step is forward with gradients for
    x, the initial states and the parameters, loss = out.sum(), backward."""
    torch = optional_torch()
    if torch is None:
        return None
    model = family.torch_model(torch, inp, **family.variants[variant])
    if model is None:
        return None
    x = torch.from_numpy(inp.x)
    states = [torch.from_numpy(inp[n]) for n in family.state_names]
    if training:
        leaves = (x, *states, *model.parameters)
        for t in (x, *states):
            t.requires_grad_(True)

        def run():
            for t in leaves:
                t.grad = None
            out = model.forward(x, *states)
            out.sum().backward()
            return out.detach().numpy(), model.recurrent_grad().numpy()
    else:
        def run():
            with torch.inference_mode():
                return (model.forward(x, *states).numpy(),)

    return Contender("torch", run, lambda: _torch_threads(torch, threads))


def onnx_contender(family, inp, training, variant, threads):
    """ONNX Runtime inference with intra_op_num_threads = threads; None for training, for
    float64 (ONNX Runtime has no float64 recurrent kernels), for a family without an ONNX
    operator (LLTM) or without onnx/onnxruntime."""
    onnxruntime = optional_onnxruntime()
    if (training or inp.x.dtype != np.float32 or family.onnx_model is None
            or onnxruntime is None):
        return None
    model, feeds = family.onnx_model(inp, **family.variants[variant])
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = threads
    session = onnxruntime.InferenceSession(model.SerializeToString(), options,
                                           providers=["CPUExecutionProvider"])

    def run():
        return (session.run(["Y"], feeds)[0][:, 0],)

    return Contender("onnxruntime", run)


# Factories take (family, inputs, training, variant, threads) and return a Contender or None.
CONTENDER_FACTORIES = (cells_contender, numpy_contender, torch_contender, onnx_contender)


# ----------------------------------------------------------------------------------------------
# 4. Timing
# ----------------------------------------------------------------------------------------------

def time_alternating(contenders, repeats=5, warmup=1, min_sample_s=0.01, settle_s=0.15):
    """Seconds per call of every contender in each of `repeats` samples ({name: [seconds]}),
    plus the outputs of each one's first call.

    Each contender makes `warmup` calls (at least one; the first one's outputs are kept) and one
    calibration call, which sets how many calls (`number`) make a sample last `min_sample_s`;
    when the first call alone lasted 5 x min_sample_s, a sample is a single call and the
    calibration call is skipped (it would only cost time on the large shapes). Then the
    contenders are timed in turn (A B C A B C ...) `repeats` times, so drifts spread evenly over
    all of them.

    Every timed sample (and the calibration call) starts after `settle_s` of sleep and one
    untimed call of the same contender. The sleep: OpenBLAS workers spin for 2**28 cycles
    (~0.1 s) after a threaded call, and on 2 cores a contender started right after NumPy's
    2-thread GRU measured up to 60% slower (0.15 s sleep: no loss). The untimed call: after the
    sleep a contender's own worker threads are asleep, and waking them cost the first 2-thread
    call of cells 8-55 ms on the 2-vCPU test VM (T=100 B=1 H=128 GRU: 1 ms per call when warm);
    timed cold, that call also set `number` to 1, and the medians came out 10x too high.
    settle_s=0 drops both, for a contender timed alone (compare.py): its calls follow each other
    and keep its own threads awake."""
    def settle(c):
        if settle_s:
            time.sleep(settle_s)
            c.run()

    outputs, numbers = {}, {}
    for c in contenders:
        with c.threads():
            t0 = time.perf_counter()
            outputs[c.name] = c.run()
            per_call = time.perf_counter() - t0
            for _ in range(warmup - 1):
                c.run()
            if per_call < 5 * min_sample_s:
                settle(c)
                t0 = time.perf_counter()
                c.run()
                per_call = time.perf_counter() - t0
        numbers[c.name] = max(1, int(np.ceil(min_sample_s / per_call)))
    samples = {c.name: [] for c in contenders}
    for _ in range(repeats):
        for c in contenders:
            n = numbers[c.name]
            with c.threads():
                settle(c)
                t0 = time.perf_counter()
                for _ in range(n):
                    c.run()
                samples[c.name].append((time.perf_counter() - t0) / n)
    return samples, outputs


def big_gemm_rate(dtype, threads, n=1024, repeats=7):
    """GF/s of a big square gemm [n, n]·[n, n] in cells' BLAS (scipy's), with `threads` threads
    and the median of `repeats` calls: what a tuned BLAS reaches, beside the FMA peak."""
    from scipy.linalg import blas
    gemm = blas.sgemm if np.dtype(dtype) == np.float32 else blas.dgemm
    rng = np.random.default_rng(0)
    a, b = (np.asfortranarray(rng.standard_normal((n, n)), dtype) for _ in range(2))
    with _blas_controller().limit(limits=threads, user_api="blas"):
        gemm(1.0, a, b)
        seconds = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            gemm(1.0, a, b)
            seconds.append(time.perf_counter() - t0)
    return 2 * n ** 3 / median(seconds) / 1e9


# ----------------------------------------------------------------------------------------------
# 5. Rows
# ----------------------------------------------------------------------------------------------

def max_abs_diff(out, ref):
    """Max abs difference of an output (any float dtype) to a float64 reference."""
    return float(np.max(np.abs(np.asarray(out, np.float64) - ref)))


def within_tolerance(diff, reference, dtype):
    """Whether a max abs difference is within TOLERANCE[dtype] x max(1, max|reference|)."""
    return diff <= TOLERANCE[np.dtype(dtype)] * max(1.0, float(np.max(np.abs(reference))))


def reference_outputs(family, inp, training, variant):
    """The float64 NumPy outputs for inp (h, and the recurrent-weight gradient for training)."""
    inp64 = inp.astype(np.float64)
    outputs, grads = numpy_run(family, tuple(inp64.args.values()), family.variants[variant],
                               inp64.dLdh if training else None)
    return _selected(family, outputs, grads, training)


def compare(family, shape, *, dtype=np.float32, threads=1, variant=None, training=False,
            repeats=5, warmup=1, factories=CONTENDER_FACTORIES, seed=0, peak=None):
    """Time every applicable contender on one case; one row (dict) per contender.

    Row keys: family, T, B, I, H, dtype, threads, variant ("-" for LSTM and LLTM; default: the
    family's first), task, contender, ms (median per call), cells_speedup (contender ms / cells
    ms; > 1 means cells is faster), gflops (family.gemm_flops per second), peak_pct (gflops
    as a percentage of `peak`, the FMA peak GF/s of benchmarks/peak.py; None without it),
    diff_h, grad (the name of the recurrent-weight gradient compared in a training step, None
    for inference), diff_grad (its max abs difference to the float64 NumPy reference) and ok
    (every difference within TOLERANCE)."""
    family = get_family(family)
    variant = variant or family.default_variant()
    inp = make_inputs(family, shape, dtype, seed)
    contenders = [c for f in factories
                  if (c := f(family, inp, training, variant, threads)) is not None]
    samples, outputs = time_alternating(contenders, repeats, warmup)
    seconds = {name: median(s) for name, s in samples.items()}
    reference = reference_outputs(family, inp, training, variant)
    names = compared_outputs(family, training)
    flops = family.gemm_flops(shape, training)
    rows = []
    for c in contenders:
        diffs = [max_abs_diff(out, ref) for out, ref in zip(outputs[c.name], reference)]
        gflops = flops / seconds[c.name] / 1e9
        rows.append({
            "family": family.name, "T": shape.T, "B": shape.B, "I": shape.I, "H": shape.H,
            "dtype": np.dtype(dtype).name, "threads": threads, "variant": variant,
            "task": "training" if training else "inference", "contender": c.name,
            "ms": 1e3 * seconds[c.name], "cells_speedup": seconds[c.name] / seconds["cells"],
            "gflops": gflops, "peak_pct": None if peak is None else 100 * gflops / peak,
            "diff_h": diffs[0], "grad": names[1] if training else None,
            "diff_grad": diffs[1] if training else None,
            "ok": all(out.shape == ref.shape and within_tolerance(d, ref, dtype)
                      for out, ref, d in zip(outputs[c.name], reference, diffs)),
        })
    return rows


def cpu_model():
    """The CPU's model name from /proc/cpuinfo, else platform.processor()."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def load_average():
    """1-minute load average (None where unknown): near or above the CPU count, other processes
    compete for the cores and the timings are not trustworthy."""
    return os.getloadavg()[0] if hasattr(os, "getloadavg") else None


def optional_onnxruntime():
    """The onnxruntime module, or None when it is not installed."""
    try:
        import onnxruntime
    except ImportError:
        return None
    return onnxruntime


def environment():
    """Where the numbers come from: CPU, load, library versions, the cells timed (its directory)
    and the loaded thread pools."""
    import scipy
    torch, ort = optional_torch(), optional_onnxruntime()
    return {"cpu": cpu_model(), "cpus": default_threads(), "load_average": load_average(),
            "python": platform.python_version(), "cells": cells.__version__,
            "cells_path": os.path.dirname(cells.__file__),
            "numpy": np.__version__, "scipy": scipy.__version__,
            "threadpoolctl": threadpoolctl.__version__,
            "torch": torch.__version__ if torch else None,
            "onnxruntime": ort.__version__ if ort else None,
            "threadpools": threadpoolctl.threadpool_info()}


def threadpool_summary():
    """One line per loaded thread pool: API, library, version, threads, the kernels it runs
    (OpenBLAS's architecture: OPENBLAS_CORETYPE=Haswell makes it Haswell), file."""
    return [f"{i['user_api']:6} {i['internal_api']:9} {i.get('version')!s:12} "
            f"num_threads={i['num_threads']:<3} {i.get('architecture') or '-':10} "
            f"{os.path.basename(i['filepath'])}"
            for i in threadpoolctl.threadpool_info()]


def format_table(rows):
    """Aligned text table of compare() rows."""
    def fmt_diff(d):
        return "-" if d is None else f"{d:.1e}"

    def fmt_pct(p):
        return "-" if p is None else f"{p:.0f}%"

    header = ("family", "shape", "dtype", "thr", "task", "variant", "contender",
              "ms", "GF/s", "%peak", "cells x", "|dh|", "|dW_rec|", "ok")
    lines = [(r["family"], f"T={r['T']} B={r['B']} I={r['I']} H={r['H']}", r["dtype"],
              str(r["threads"]), r["task"], r["variant"], r["contender"], f"{r['ms']:.3f}",
              f"{r['gflops']:.1f}", fmt_pct(r["peak_pct"]), f"{r['cells_speedup']:.2f}",
              fmt_diff(r["diff_h"]), fmt_diff(r["diff_grad"]),
              "yes" if r["ok"] else "NO") for r in rows]
    widths = [max(len(x) for x in col) for col in zip(header, *lines)]
    right = {"thr", "ms", "GF/s", "%peak", "cells x", "|dh|", "|dW_rec|"}
    return "\n".join("  ".join(x.rjust(w) if h in right else x.ljust(w)
                               for h, x, w in zip(header, line, widths)).rstrip()
                     for line in [header] + lines)


TABLE_LEGEND = ("ms per call (median); GF/s = the gemm FLOPs any implementation must do "
                "(2·T·B·(I+H)·blocks·H, x3 for training) per second; %peak = GF/s as a "
                "percentage of the FMA peak (benchmarks/peak.py) at the same threads and dtype; "
                "cells x = contender ms / cells ms (> 1: cells is faster); "
                "|dh|, |dW_rec| = max abs diff of h and of the recurrent-weight gradient "
                "(GRU dLdWh, LSTM dLdWr, LLTM dLdW) to the float64 NumPy cell")

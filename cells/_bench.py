"""Benchmark and cross-check helpers for the GRU time loops of ``cells``.

Read top to bottom:

1. inputs: random GRU problems, PyTorch-style initialisation, fixed seed;
2. a plain NumPy GRU (forward and BPTT backward, both variants): the "what you would write
   yourself" baseline, and, in float64, the reference every contender is compared with;
3. contenders: factories that bind cells, NumPy or PyTorch to one problem, for inference or for a
   training step, each with its own thread setting;
4. timing: warm-up, then the contenders alternated (A B C A B C ...), medians;
5. rows: one dict per contender and case (median ms, speed-up of cells, max abs difference to the
   float64 reference), a full-output self-check, and the environment (CPU, thread pools).

Only numpy, scipy (through cells) and threadpoolctl are required; PyTorch joins when importable.
``python -m cells`` and ``benchmarks/bench_gru.py`` are the two users of this module.
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

from . import gruTimeLoop, gruTimeLoopBp

VARIANTS = {False: "reset_before", True: "linear_before_reset"}

# Allowed max abs difference to the float64 reference, relative to max(1, max|reference|).
# float32 rounds at 6e-8: a length-(I+H) dot product adds ~sqrt(I+H) of those per gate, the
# recurrence carries them across T steps and BPTT sums T*B products into each gradient entry.
# NumPy's own float32 GRU stays within 3e-6 of that scale on the default shapes (h and all five
# gradients); 1e-4 leaves a 30x margin and still catches a wrong formula (errors of order 1e-2).
TOLERANCE = {np.dtype(np.float32): 1e-4, np.dtype(np.float64): 1e-10}


def default_threads():
    """Number of CPUs this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()


# ----------------------------------------------------------------------------------------------
# 1. Inputs
# ----------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Shape:
    """Sequence length T, batch B, input size I, hidden size H."""
    T: int
    B: int
    I: int
    H: int

    def __str__(self):
        return f"T={self.T} B={self.B} I={self.I} H={self.H}"


@dataclass
class GruInputs:
    """One GRU problem: x [T,B,I], hI [B,H], Wx [I,3H], Wh [H,3H], b [2,3H], dLdh [T,B,H]."""
    x: np.ndarray
    hI: np.ndarray
    Wx: np.ndarray
    Wh: np.ndarray
    b: np.ndarray
    dLdh: np.ndarray

    def astype(self, dtype):
        """The same values in another dtype (float32 -> float64 is exact)."""
        return GruInputs(*(a.astype(dtype) for a in
                           (self.x, self.hI, self.Wx, self.Wh, self.b, self.dLdh)))


def make_inputs(shape, dtype=np.float32, seed=0):
    """Random problem: weights and biases U(-1/sqrt(H), 1/sqrt(H)) as PyTorch initialises them,
    x ~ U(-1, 1), hI ~ U(-0.5, 0.5), and dLdh = ones (loss = h.sum())."""
    rng = np.random.default_rng(seed)
    T, B, I, H = shape.T, shape.B, shape.I, shape.H
    k = 1.0 / np.sqrt(H)
    return GruInputs(x=rng.uniform(-1, 1, (T, B, I)),
                     hI=rng.uniform(-0.5, 0.5, (B, H)),
                     Wx=rng.uniform(-k, k, (I, 3 * H)),
                     Wh=rng.uniform(-k, k, (H, 3 * H)),
                     b=rng.uniform(-k, k, (2, 3 * H)),
                     dLdh=np.ones((T, B, H))).astype(dtype)


# ----------------------------------------------------------------------------------------------
# 2. Plain NumPy GRU
# ----------------------------------------------------------------------------------------------

def _sigmoid(z):
    """Logistic function without exp overflow."""
    return 0.5 + 0.5 * np.tanh(0.5 * z)


def numpy_gru(x, hI, Wx, Wh, b, *, linear_before_reset=False, keep_cache=False):
    """GRU forward over a time-major sequence; gates (r, u, c); b = [input bias, recurrent bias].

    One gemm for the input projection of all steps, then a per-step loop. Returns h [T,B,H], or
    (h, cache) with keep_cache=True, where cache = (gates, hc) holds per step the activated r, u, c
    [T,B,3H] and hc [T,B,H]: h·Wh_c + bh_c for linear_before_reset, r∘h for reset-before."""
    T, B, _ = x.shape
    H = hI.shape[1]
    bx, bh = b
    Wh_ru, Wh_c = np.ascontiguousarray(Wh[:, :2 * H]), np.ascontiguousarray(Wh[:, 2 * H:])
    gx = (x.reshape(T * B, -1) @ Wx + bx).reshape(T, B, 3 * H)
    h = np.empty((T, B, H), x.dtype)
    gates = np.empty((T, B, 3 * H), x.dtype)
    hc = np.empty((T, B, H), x.dtype)
    h_prev = hI
    for t in range(T):
        if linear_before_reset:
            gh = h_prev @ Wh + bh
            ru = _sigmoid(gx[t, :, :2 * H] + gh[:, :2 * H])
            hc[t] = gh[:, 2 * H:]
            c = np.tanh(gx[t, :, 2 * H:] + ru[:, :H] * hc[t])
        else:
            ru = _sigmoid(gx[t, :, :2 * H] + h_prev @ Wh_ru + bh[:2 * H])
            hc[t] = ru[:, :H] * h_prev
            c = np.tanh(gx[t, :, 2 * H:] + hc[t] @ Wh_c + bh[2 * H:])
        u = ru[:, H:]
        h[t] = (1 - u) * c + u * h_prev
        h_prev = h[t]
        gates[t, :, :2 * H] = ru
        gates[t, :, 2 * H:] = c
    return (h, (gates, hc)) if keep_cache else h


def numpy_gru_bp(x, hI, Wx, Wh, b, dLdh, h, cache, *, dLdhLast=None, linear_before_reset=False):
    """Backpropagation through time for numpy_gru, given its output h and cache.

    dLdh [T,B,H] is the gradient of the loss w.r.t. every output step, dLdhLast [B,H] an extra
    gradient w.r.t. the last step. The per-step loop carries dL/dh backwards; the weight and bias
    gradients are then one gemm (or sum) each over all steps.
    Returns (dLdx, dLdhI, dLdWx, dLdWh, dLdb) shaped like (x, hI, Wx, Wh, b)."""
    gates, hc = cache
    T, B, _ = x.shape
    H = hI.shape[1]
    Wh_ru_T, Wh_c_T = Wh[:, :2 * H].T.copy(), Wh[:, 2 * H:].T.copy()
    dg = np.empty((T, B, 3 * H), x.dtype)   # dL/d(pre-activation) of r, u, c
    dgh_c = np.empty((T, B, H), x.dtype)    # dL/d(the recurrent c term's gemm output)
    dh_carry = np.zeros_like(hI) if dLdhLast is None else dLdhLast.copy()
    for t in reversed(range(T)):
        h_prev = h[t - 1] if t else hI
        r, u, c = gates[t, :, :H], gates[t, :, H:2 * H], gates[t, :, 2 * H:]
        dh = dLdh[t] + dh_carry
        dc = dh * (1 - u) * (1 - c * c)
        du = dh * (h_prev - c) * u * (1 - u)
        dh_carry = dh * u
        if linear_before_reset:
            dr = dc * hc[t] * r * (1 - r)
            dgh_c[t] = dc * r
            dh_carry += dgh_c[t] @ Wh_c_T
        else:
            d_rh = dc @ Wh_c_T
            dr = d_rh * h_prev * r * (1 - r)
            dgh_c[t] = dc
            dh_carry += d_rh * r
        dg[t, :, :H], dg[t, :, H:2 * H], dg[t, :, 2 * H:] = dr, du, dc
        dh_carry += dg[t, :, :2 * H] @ Wh_ru_T

    dg2 = dg.reshape(T * B, 3 * H)
    h_prev_all = np.concatenate([hI[None], h[:-1]]).reshape(T * B, H)
    c_input = h_prev_all if linear_before_reset else hc.reshape(T * B, H)
    dLdWh = np.empty_like(Wh)
    dLdWh[:, :2 * H] = h_prev_all.T @ dg2[:, :2 * H]
    dLdWh[:, 2 * H:] = c_input.T @ dgh_c.reshape(T * B, H)
    dLdb = np.stack([dg2.sum(0), np.concatenate([dg2[:, :2 * H].sum(0), dgh_c.sum((0, 1))])])
    dLdx = (dg2 @ Wx.T).reshape(x.shape)
    dLdWx = x.reshape(T * B, -1).T @ dg2
    return dLdx, dh_carry, dLdWx, dLdWh, dLdb


def numpy_training_step(inp, linear_before_reset):
    """Forward with cache, then backward with dLdh: returns (h, dLdx, dLdhI, dLdWx, dLdWh, dLdb)."""
    args = (inp.x, inp.hI, inp.Wx, inp.Wh, inp.b)
    h, cache = numpy_gru(*args, linear_before_reset=linear_before_reset, keep_cache=True)
    return (h,) + numpy_gru_bp(*args, inp.dLdh, h, cache, linear_before_reset=linear_before_reset)


# ----------------------------------------------------------------------------------------------
# 3. Contenders
# ----------------------------------------------------------------------------------------------

@dataclass
class Contender:
    """A named zero-argument call; `threads()` is entered around it (a thread-count setting).

    `run()` returns (h,) for inference and (h, dLdWh) for a training step."""
    name: str
    run: Callable[[], tuple]
    threads: Callable[[], contextlib.AbstractContextManager] = field(default=contextlib.nullcontext)


OUTPUT_NAMES = {False: ("h",), True: ("h", "dLdWh")}   # keyed by training


@functools.cache
def _blas_controller():
    """threadpoolctl controller, built once: its limit costs ~20 µs, threadpool_limits ~1.5 ms."""
    return threadpoolctl.ThreadpoolController()


def numpy_contender(inp, training, linear_before_reset, threads):
    """Plain NumPy GRU, its BLAS limited to `threads` around each call."""
    args = (inp.x, inp.hI, inp.Wx, inp.Wh, inp.b)
    if training:
        def run():
            step = numpy_training_step(inp, linear_before_reset)
            return step[0], step[4]
    else:
        def run():
            return (numpy_gru(*args, linear_before_reset=linear_before_reset),)
    return Contender("numpy", run,
                     lambda: _blas_controller().limit(limits=threads, user_api="blas"))


def cells_contender(inp, training, linear_before_reset, threads):
    """cells.gruTimeLoop (+ gruTimeLoopBp on its workspace) with n_threads=threads."""
    args = (inp.x, inp.hI, inp.Wx, inp.Wh, inp.b)
    opts = {"linear_before_reset": linear_before_reset, "n_threads": threads}
    if training:
        def run():
            h, ws = gruTimeLoop(*args, return_workspace=True, **opts)
            return h, gruTimeLoopBp(*args, inp.dLdh, workspace=ws, **opts)[3]
    else:
        def run():
            return (gruTimeLoop(*args, **opts),)
    return Contender("cells", run)


def optional_torch():
    """The torch module, or None when it is not installed."""
    try:
        import torch
    except ImportError:
        return None
    return torch


def torch_contender(inp, training, linear_before_reset, threads):
    """torch.nn.GRU with cells' weights; None without torch or for the reset-before variant.

    Inference runs under torch.inference_mode(); a training step is forward with gradients for
    x, hI and the parameters, loss = out.sum(), backward."""
    torch = optional_torch()
    if torch is None or not linear_before_reset:
        return None
    dtype = torch.float64 if inp.x.dtype == np.float64 else torch.float32
    gru = torch.nn.GRU(inp.x.shape[2], inp.hI.shape[1], dtype=dtype)
    with torch.no_grad():
        gru.weight_ih_l0.copy_(torch.from_numpy(inp.Wx.T))
        gru.weight_hh_l0.copy_(torch.from_numpy(inp.Wh.T))
        gru.bias_ih_l0.copy_(torch.from_numpy(inp.b[0]))
        gru.bias_hh_l0.copy_(torch.from_numpy(inp.b[1]))
    x = torch.from_numpy(inp.x)
    h0 = torch.from_numpy(inp.hI)[None]
    if training:
        x.requires_grad_(True)
        h0.requires_grad_(True)

        def run():
            for t in (x, h0, *gru.parameters()):
                t.grad = None
            out, _ = gru(x, h0)
            out.sum().backward()
            return out.detach().numpy(), gru.weight_hh_l0.grad.T.numpy()
    else:
        def run():
            with torch.inference_mode():
                return (gru(x, h0)[0].numpy(),)

    @contextlib.contextmanager
    def torch_threads():
        previous = torch.get_num_threads()
        torch.set_num_threads(threads)
        try:
            yield
        finally:
            torch.set_num_threads(previous)

    return Contender("torch", run, torch_threads)


CONTENDER_FACTORIES = (cells_contender, numpy_contender, torch_contender)


# ----------------------------------------------------------------------------------------------
# 4. Timing
# ----------------------------------------------------------------------------------------------

def time_alternating(contenders, repeats=5, warmup=1, min_sample_s=0.01, settle_s=0.15):
    """Median seconds per call of every contender, plus the outputs of each one's first call.

    Each contender makes `warmup` calls (at least one; the first one's outputs are kept) and one
    calibration call, which sets how many calls (`number`) make a sample last `min_sample_s`.
    Then the contenders are timed in turn (A B C A B C ...) `repeats` times, so drifts spread
    evenly over all of them. Every timed sample starts after `settle_s` of sleep: OpenBLAS workers
    spin for 2**28 cycles (~0.1 s) after a threaded call, and on 2 cores a contender started right
    after NumPy's 2-thread GRU measured up to 60% slower (0.15 s sleep: no loss)."""
    outputs, numbers = {}, {}
    for c in contenders:
        with c.threads():
            outputs[c.name] = c.run()
            for _ in range(warmup - 1):
                c.run()
            time.sleep(settle_s)
            t0 = time.perf_counter()
            c.run()
            per_call = time.perf_counter() - t0
        numbers[c.name] = max(1, int(np.ceil(min_sample_s / per_call)))
    samples = {c.name: [] for c in contenders}
    for _ in range(repeats):
        for c in contenders:
            n = numbers[c.name]
            with c.threads():
                time.sleep(settle_s)
                t0 = time.perf_counter()
                for _ in range(n):
                    c.run()
                samples[c.name].append((time.perf_counter() - t0) / n)
    return {name: median(s) for name, s in samples.items()}, outputs


# ----------------------------------------------------------------------------------------------
# 5. Rows
# ----------------------------------------------------------------------------------------------

def within_tolerance(diff, reference, dtype):
    """Whether a max abs difference is within TOLERANCE[dtype] x max(1, max|reference|)."""
    return diff <= TOLERANCE[np.dtype(dtype)] * max(1.0, float(np.max(np.abs(reference))))


def reference_outputs(inp, training, linear_before_reset):
    """The float64 NumPy outputs for inp (h, and dLdWh for training), untimed."""
    inp64 = inp.astype(np.float64)
    if training:
        step = numpy_training_step(inp64, linear_before_reset)
        return step[0], step[4]
    return (numpy_gru(inp64.x, inp64.hI, inp64.Wx, inp64.Wh, inp64.b,
                      linear_before_reset=linear_before_reset),)


def compare(shape, *, dtype=np.float32, threads=1, linear_before_reset=True, training=False,
            repeats=5, warmup=1, factories=CONTENDER_FACTORIES, seed=0):
    """Time every applicable contender on one case; one row (dict) per contender.

    Row keys: T, B, I, H, dtype, threads, variant, task, contender, ms (median per call),
    cells_speedup (contender ms / cells ms; > 1 means cells is faster), diff_h and diff_dLdWh
    (max abs difference to the float64 NumPy reference; diff_dLdWh is None for inference) and ok
    (every difference within TOLERANCE)."""
    inp = make_inputs(shape, dtype, seed)
    contenders = [c for f in factories
                  if (c := f(inp, training, linear_before_reset, threads)) is not None]
    seconds, outputs = time_alternating(contenders, repeats, warmup)
    reference = reference_outputs(inp, training, linear_before_reset)
    rows = []
    for c in contenders:
        diffs = {name: float(np.max(np.abs(out.astype(np.float64) - ref)))
                 for name, out, ref in zip(OUTPUT_NAMES[training], outputs[c.name], reference)}
        rows.append({
            "T": shape.T, "B": shape.B, "I": shape.I, "H": shape.H,
            "dtype": np.dtype(dtype).name, "threads": threads,
            "variant": VARIANTS[linear_before_reset],
            "task": "training" if training else "inference", "contender": c.name,
            "ms": 1e3 * seconds[c.name], "cells_speedup": seconds[c.name] / seconds["cells"],
            "diff_h": diffs["h"], "diff_dLdWh": diffs.get("dLdWh"),
            "ok": all(within_tolerance(diffs[n], ref, dtype)
                      for n, ref in zip(OUTPUT_NAMES[training], reference)),
        })
    return rows


def self_check(threads=1, shape=Shape(T=7, B=3, I=5, H=4), seed=1):
    """Every output of cells (h and the five gradients, with random dLdh and dLdhLast, the
    backward pass recomputing its own workspace) against the float64 NumPy GRU.

    Returns rows: dtype, variant, output, max_abs_diff, ok."""
    rows = []
    rng = np.random.default_rng(seed)
    base = make_inputs(shape, np.float64, seed)
    base.dLdh = rng.standard_normal(base.dLdh.shape)
    dLdhLast = rng.standard_normal(base.hI.shape)
    names = ("h", "dLdx", "dLdhI", "dLdWx", "dLdWh", "dLdb")
    for dtype in (np.float32, np.float64):
        inp = base.astype(dtype)
        args = (inp.x, inp.hI, inp.Wx, inp.Wh, inp.b)
        for lbr in (False, True):
            h = gruTimeLoop(*args, linear_before_reset=lbr, n_threads=threads)
            grads = gruTimeLoopBp(*args, inp.dLdh, dLdhLast=dLdhLast.astype(dtype),
                                  linear_before_reset=lbr, n_threads=threads)
            ref_args = (base.x, base.hI, base.Wx, base.Wh, base.b)
            ref_h, cache = numpy_gru(*ref_args, linear_before_reset=lbr, keep_cache=True)
            ref = (ref_h,) + numpy_gru_bp(*ref_args, base.dLdh, ref_h, cache, dLdhLast=dLdhLast,
                                          linear_before_reset=lbr)
            for name, out, r in zip(names, (h,) + tuple(grads), ref):
                diff = float(np.max(np.abs(np.asarray(out, np.float64) - r)))
                rows.append({"dtype": np.dtype(dtype).name, "variant": VARIANTS[lbr],
                             "output": name, "max_abs_diff": diff,
                             "ok": out.shape == r.shape and within_tolerance(diff, r, dtype)})
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


def environment():
    """Where the numbers come from: CPU, load, library versions and the loaded thread pools."""
    import scipy
    torch = optional_torch()
    return {"cpu": cpu_model(), "cpus": default_threads(), "load_average": load_average(),
            "python": platform.python_version(),
            "numpy": np.__version__, "scipy": scipy.__version__,
            "threadpoolctl": threadpoolctl.__version__,
            "torch": torch.__version__ if torch else None,
            "threadpools": threadpoolctl.threadpool_info()}


def threadpool_summary():
    """One line per loaded thread pool: API, library, version, threads, file."""
    return [f"{i['user_api']:6} {i['internal_api']:9} {i.get('version')!s:12} "
            f"num_threads={i['num_threads']:<3} {os.path.basename(i['filepath'])}"
            for i in threadpoolctl.threadpool_info()]


def format_table(rows):
    """Aligned text table of compare() rows."""
    def fmt_diff(d):
        return "-" if d is None else f"{d:.1e}"

    header = ("shape", "dtype", "thr", "task", "variant", "contender",
              "ms", "cells x", "|dh|", "|dLdWh|", "ok")
    lines = [(f"T={r['T']} B={r['B']} I={r['I']} H={r['H']}", r["dtype"], str(r["threads"]),
              r["task"], r["variant"], r["contender"], f"{r['ms']:.3f}",
              f"{r['cells_speedup']:.2f}", fmt_diff(r["diff_h"]), fmt_diff(r["diff_dLdWh"]),
              "yes" if r["ok"] else "NO") for r in rows]
    widths = [max(len(x) for x in col) for col in zip(header, *lines)]
    right = {"thr", "ms", "cells x", "|dh|", "|dLdWh|"}
    return "\n".join("  ".join(x.rjust(w) if h in right else x.ljust(w)
                               for h, x, w in zip(header, line, widths)).rstrip()
                     for line in [header] + lines)

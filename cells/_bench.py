"""Benchmark and cross-check helpers for the time loops of ``cells``: GRU, LSTM and LLTM.

Read top to bottom:

1. inputs: random problems, PyTorch-style initialisation, fixed seed;
2. plain NumPy cells (forward and BPTT backward; GRU in both variants, LSTM without peepholes,
   LLTM): the "what you would write yourself" baseline, and, in float64, the reference every
   contender is compared with;
3. families: one `Family` per cell type says how to make its inputs, which NumPy functions and
   which cells functions run it, how PyTorch runs it and which outputs are compared;
4. contenders: factories that bind cells, NumPy or PyTorch to one problem of one family, for
   inference or for a training step, each with its own thread setting;
5. timing: warm-up, then the contenders alternated (A B C A B C ...), medians;
6. rows: one dict per contender and case (median ms, speed-up of cells, max abs difference to the
   float64 reference), a full-output self-check, and the environment (CPU, thread pools).

Everything after section 3 is written once for all families. Only numpy, scipy (through cells)
and threadpoolctl are required; PyTorch joins when importable. The cells functions of a family
are looked up when they are first used, so one family's kernels can be checked while another's
are missing. ``python -m cells`` and ``benchmarks/bench.py`` are the two users of this module.
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

# Allowed max abs difference to the float64 reference, relative to max(1, max|reference|).
# float32 rounds at 6e-8: a length-(I+H) dot product adds ~sqrt(I+H) of those per gate, the
# recurrence carries them across T steps and BPTT sums T*B products into each gradient entry.
# NumPy's own float32 cells stay within that scale times 3e-6 (GRU, LSTM) and 1.3e-5 (LLTM, whose
# cell state c' = c + n∘i is a running sum that grows with T) on python -m cells' two shapes, h
# and every gradient; 1e-4 leaves an 8-30x margin and still catches a wrong formula (errors of
# order 1e-2).
TOLERANCE = {np.dtype(np.float32): 1e-4, np.dtype(np.float64): 1e-10}


def default_threads():
    """Number of CPUs this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()


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
    bounds = {"x": 1.0, "state": 0.5, "param": 1.0 / np.sqrt(shape.H)}
    args = {name: rng.uniform(-bounds[kind], bounds[kind], dims)
            for name, (kind, dims) in family.arg_specs(shape).items()}
    return Inputs(args, np.ones((shape.T, shape.B, shape.H))).astype(dtype)


# ----------------------------------------------------------------------------------------------
# 2. Plain NumPy cells
#
# Every forward takes the kernel's positional arguments (and variant options) and returns
# (outputs, cache): outputs as cells returns them, in a tuple ((h,) for the GRU, (h, hL, cL) for
# LSTM and LLTM), cache what its backward needs. Every backward takes the same arguments, then
# dLdh, the forward's outputs and cache and, as keywords named as in cells, the gradients
# arriving at the final states; it returns the gradients in cells' order. One gemm projects the
# inputs of all steps, a per-step loop carries the recurrence, and the weight gradients are one
# gemm each over all steps.
# ----------------------------------------------------------------------------------------------

def _sigmoid(z):
    """Logistic function without exp overflow."""
    return 0.5 + 0.5 * np.tanh(0.5 * z)


def _prev_states(first, seq):
    """[first, seq[0], ..., seq[T-2]] reshaped to [T*B, H]: the state entering every step."""
    return np.concatenate([first[None], seq[:-1]]).reshape(-1, first.shape[1])


def numpy_gru(x, hI, Wx, Wh, b, *, linear_before_reset=False):
    """GRU forward over a time-major sequence; gates (r, u, c); b = [input bias, recurrent bias].

    Returns ((h [T,B,H],), cache) where cache = (gates, hc) holds per step the activated r, u, c
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
    return (h,), (gates, hc)


def numpy_gru_bp(x, hI, Wx, Wh, b, dLdh, outputs, cache, *, dLdhLast=None,
                 linear_before_reset=False):
    """Backpropagation through time for numpy_gru.

    Returns (dLdx, dLdhI, dLdWx, dLdWh, dLdb) shaped like (x, hI, Wx, Wh, b)."""
    (h,), (gates, hc) = outputs, cache
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
    h_prev_all = _prev_states(hI, h)
    c_input = h_prev_all if linear_before_reset else hc.reshape(T * B, H)
    dLdWh = np.empty_like(Wh)
    dLdWh[:, :2 * H] = h_prev_all.T @ dg2[:, :2 * H]
    dLdWh[:, 2 * H:] = c_input.T @ dgh_c.reshape(T * B, H)
    dLdb = np.stack([dg2.sum(0), np.concatenate([dg2[:, :2 * H].sum(0), dgh_c.sum((0, 1))])])
    dLdx = (dg2 @ Wx.T).reshape(x.shape)
    dLdWx = x.reshape(T * B, -1).T @ dg2
    return dLdx, dh_carry, dLdWx, dLdWh, dLdb


def numpy_lstm(x, Wx, Wr, b, hI, cI):
    """LSTM forward (no peepholes, no clipping); gate blocks (i, f, g, o), one bias b [4H]:
    z = x·Wx + h·Wr + b; i, f, o = σ(z); g = tanh(z_g); c' = f∘c + i∘g; h' = o∘tanh(c').

    Returns ((h [T,B,H], hL, cL), cache) where cache = (gates, c, tanh_c) holds per step the
    activated i, f, g, o [T,B,4H], the cell state and its tanh [T,B,H]."""
    T, B, _ = x.shape
    H = hI.shape[1]
    gx = (x.reshape(T * B, -1) @ Wx + b).reshape(T, B, 4 * H)
    h = np.empty((T, B, H), x.dtype)
    c = np.empty((T, B, H), x.dtype)
    tanh_c = np.empty((T, B, H), x.dtype)
    gates = np.empty((T, B, 4 * H), x.dtype)
    h_prev, c_prev = hI, cI
    for t in range(T):
        z = gx[t] + h_prev @ Wr
        gates[t] = _sigmoid(z)
        gates[t, :, 2 * H:3 * H] = np.tanh(z[:, 2 * H:3 * H])
        i, f, g, o = (gates[t, :, k * H:(k + 1) * H] for k in range(4))
        c[t] = f * c_prev + i * g
        tanh_c[t] = np.tanh(c[t])
        h[t] = o * tanh_c[t]
        h_prev, c_prev = h[t], c[t]
    return (h, h[-1].copy(), c[-1].copy()), (gates, c, tanh_c)


def numpy_lstm_bp(x, Wx, Wr, b, hI, cI, dLdh, outputs, cache, *, dLdhL=None, dLdcL=None):
    """Backpropagation through time for numpy_lstm (cells-math.md §2.3).

    Returns (dLdx, dLdWx, dLdWr, dLdb, dLdhI, dLdcI) as lstmLayerTimeLoopBp (without dLdWp)."""
    h = outputs[0]
    gates, c, tanh_c = cache
    T, B, _ = x.shape
    H = hI.shape[1]
    Wr_T = Wr.T.copy()
    dz = np.empty((T, B, 4 * H), x.dtype)   # dL/d(pre-activation) of i, f, g, o
    dh_carry = np.zeros_like(hI) if dLdhL is None else dLdhL.copy()
    dc_carry = np.zeros_like(cI) if dLdcL is None else dLdcL.copy()
    for t in reversed(range(T)):
        c_prev = c[t - 1] if t else cI
        i, f, g, o = (gates[t, :, k * H:(k + 1) * H] for k in range(4))
        tau = tanh_c[t]
        dh = dLdh[t] + dh_carry
        dc = dc_carry + dh * o * (1 - tau * tau)   # total adjoint of c_t
        dz[t, :, :H] = dc * g * i * (1 - i)
        dz[t, :, H:2 * H] = dc * c_prev * f * (1 - f)
        dz[t, :, 2 * H:3 * H] = dc * i * (1 - g * g)
        dz[t, :, 3 * H:] = dh * tau * o * (1 - o)
        dc_carry = dc * f
        dh_carry = dz[t] @ Wr_T

    dz2 = dz.reshape(T * B, 4 * H)
    dLdx = (dz2 @ Wx.T).reshape(x.shape)
    dLdWx = x.reshape(T * B, -1).T @ dz2
    dLdWr = _prev_states(hI, h).T @ dz2
    return dLdx, dLdWx, dLdWr, dz2.sum(0), dh_carry, dc_carry


def _elu(z):
    """ELU with α = 1."""
    return np.where(z > 0, z, np.expm1(np.minimum(z, 0)))


def numpy_lltm(x, W, b, hI, cI):
    """LLTM forward (cells-math.md §2.4): W [3S, S+I] on X = [h, x], blocks input, output,
    candidate: G = X·Wᵀ + b; i, o = σ(G0, G1); n = elu(G2); c' = c + n∘i; h' = tanh(c')∘o.

    Returns ((h [T,B,S], hL, cL), cache) where cache = (gates, c, tanh_c) holds per step the
    activated i, o, n [T,B,3S], the cell state and its tanh [T,B,S]."""
    T, B, _ = x.shape
    S = hI.shape[1]
    Wh_T, Wx_T = W[:, :S].T.copy(), W[:, S:].T.copy()
    gx = (x.reshape(T * B, -1) @ Wx_T + b).reshape(T, B, 3 * S)
    h = np.empty((T, B, S), x.dtype)
    c = np.empty((T, B, S), x.dtype)
    tanh_c = np.empty((T, B, S), x.dtype)
    gates = np.empty((T, B, 3 * S), x.dtype)
    h_prev, c_prev = hI, cI
    for t in range(T):
        G = gx[t] + h_prev @ Wh_T
        gates[t, :, :2 * S] = _sigmoid(G[:, :2 * S])
        gates[t, :, 2 * S:] = _elu(G[:, 2 * S:])
        i, o, n = gates[t, :, :S], gates[t, :, S:2 * S], gates[t, :, 2 * S:]
        c[t] = c_prev + n * i
        tanh_c[t] = np.tanh(c[t])
        h[t] = tanh_c[t] * o
        h_prev, c_prev = h[t], c[t]
    return (h, h[-1].copy(), c[-1].copy()), (gates, c, tanh_c)


def numpy_lltm_bp(x, W, b, hI, cI, dLdh, outputs, cache, *, dLdhL=None, dLdcL=None):
    """Backpropagation through time for numpy_lltm; elu'(z) = 1 for z > 0, e^z = n + 1 for
    z <= 0 (1 at z = 0, as PyTorch autograd).

    Returns (dLdx, dLdW, dLdb, dLdhI, dLdcI) as lltmTimeLoopBp."""
    h = outputs[0]
    gates, _, tanh_c = cache
    T, B, I = x.shape
    S = hI.shape[1]
    W_h = W[:, :S].copy()
    dG = np.empty((T, B, 3 * S), x.dtype)   # dL/d(pre-activation) of i, o, n
    dh_carry = np.zeros_like(hI) if dLdhL is None else dLdhL.copy()
    dc_carry = np.zeros_like(cI) if dLdcL is None else dLdcL.copy()
    for t in reversed(range(T)):
        i, o, n = gates[t, :, :S], gates[t, :, S:2 * S], gates[t, :, 2 * S:]
        tau = tanh_c[t]
        dh = dLdh[t] + dh_carry
        dc = dc_carry + dh * o * (1 - tau * tau)   # total adjoint of c_t (= dL/dc_{t-1})
        dG[t, :, :S] = dc * n * i * (1 - i)
        dG[t, :, S:2 * S] = dh * tau * o * (1 - o)
        dG[t, :, 2 * S:] = dc * i * np.where(n > 0, 1, n + 1)
        dc_carry = dc
        dh_carry = dG[t] @ W_h

    dG2 = dG.reshape(T * B, 3 * S)
    dLdW = np.empty_like(W)
    dLdW[:, :S] = dG2.T @ _prev_states(hI, h)
    dLdW[:, S:] = dG2.T @ x.reshape(T * B, I)
    dLdx = (dG2 @ W[:, S:]).reshape(x.shape)
    return dLdx, dLdW, dG2.sum(0), dh_carry, dc_carry


# ----------------------------------------------------------------------------------------------
# 3. Families
# ----------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class TorchModel:
    """A PyTorch version of one problem: forward(x, *initial states) -> h [T,B,H] (a tensor),
    its parameters (their .grad is reset before every training step) and recurrent_grad(), the
    gradient of the family's recurrent weight after backward, in cells' layout."""
    forward: Callable
    parameters: tuple
    recurrent_grad: Callable


@dataclass(frozen=True)
class Family:
    """What the generic code needs to know about one cell type.

    arg_specs(shape) -> {name: (kind, dims)}: the kernel's positional inputs in cells' order,
      kind "x", "state" or "param" choosing the random distribution (see make_inputs);
    variants: variant name -> keyword options passed to the NumPy and cells functions;
    numpy_forward, numpy_backward: section 2's functions;
    cells_forward, cells_backward: names of the time loop and its backward in `cells`;
    outputs: names of the forward's outputs; grads: names of the backward's outputs (a trailing
      extra output of cells, LSTM's dLdWp, is dropped); state_names: the initial states, whose
      final-state gradients cells takes as the keywords last_grad_names;
    recurrent_grad: the gradient compared for a training step, with h;
    torch_model(torch, inp, **variant options) -> TorchModel, or None where PyTorch has no
      equivalent; torch_name: what it runs, for the documentation;
    gate_blocks: how many blocks of H columns the weights have (GRU and LLTM 3, LSTM 4)."""
    name: str
    arg_specs: Callable
    variants: dict
    numpy_forward: Callable
    numpy_backward: Callable
    cells_forward: str
    cells_backward: str
    outputs: tuple
    grads: tuple
    state_names: tuple
    last_grad_names: tuple
    recurrent_grad: str
    torch_model: Callable
    torch_name: str
    gate_blocks: int

    def default_variant(self):
        return next(iter(self.variants))

    def kernels(self):
        """(forward, backward) functions of cells; AttributeError while they do not exist."""
        return getattr(cells, self.cells_forward), getattr(cells, self.cells_backward)

    def available(self):
        """Whether this build of cells has the family's time loops."""
        return all(hasattr(cells, n) for n in (self.cells_forward, self.cells_backward))

    def gemm_flops(self, shape, training):
        """The floating-point operations of the gemms any implementation must do (elementwise
        gate math not counted): inference multiplies [x, h] [T·B, I+H] by the weights
        [I+H, blocks·H]; a training step adds the three products of the same size of the backward
        (dL/d[x, h], dL/dWx and dL/dWh)."""
        forward = 2 * shape.T * shape.B * (shape.I + shape.H) * self.gate_blocks * shape.H
        return 3 * forward if training else forward


def _torch_dtype(torch, a):
    return torch.float64 if a.dtype == np.float64 else torch.float32


def _torch_gru(torch, inp, *, linear_before_reset):
    """torch.nn.GRU with cells' weights (transposed; same gate order r, u/z, c/n); PyTorch's GRU
    is always linear_before_reset, so None for reset-before."""
    if not linear_before_reset:
        return None
    gru = torch.nn.GRU(inp.x.shape[2], inp["hI"].shape[1], dtype=_torch_dtype(torch, inp.x))
    with torch.no_grad():
        gru.weight_ih_l0.copy_(torch.from_numpy(inp["Wx"].T))
        gru.weight_hh_l0.copy_(torch.from_numpy(inp["Wh"].T))
        gru.bias_ih_l0.copy_(torch.from_numpy(inp["b"][0]))
        gru.bias_hh_l0.copy_(torch.from_numpy(inp["b"][1]))
    return TorchModel(lambda x, h0: gru(x, h0[None])[0], tuple(gru.parameters()),
                      lambda: gru.weight_hh_l0.grad.T)


def _torch_lstm(torch, inp):
    """torch.nn.LSTM with cells' weights (transposed; same gate order i, f, g, o), bias_ih = b,
    bias_hh = 0."""
    lstm = torch.nn.LSTM(inp.x.shape[2], inp["hI"].shape[1], dtype=_torch_dtype(torch, inp.x))
    with torch.no_grad():
        lstm.weight_ih_l0.copy_(torch.from_numpy(inp["Wx"].T))
        lstm.weight_hh_l0.copy_(torch.from_numpy(inp["Wr"].T))
        lstm.bias_ih_l0.copy_(torch.from_numpy(inp["b"]))
        lstm.bias_hh_l0.zero_()
    return TorchModel(lambda x, h0, c0: lstm(x, (h0[None], c0[None]))[0],
                      tuple(lstm.parameters()), lambda: lstm.weight_hh_l0.grad.T)


def _torch_lltm(torch, inp):
    """The PyTorch C++-extension tutorial's pure-PyTorch LLTM step (addmm on cat([h, x]),
    sigmoid, elu, tanh) in a Python loop over time; autograd for training."""
    F = torch.nn.functional
    W = torch.nn.Parameter(torch.from_numpy(inp["W"].copy()))
    b = torch.nn.Parameter(torch.from_numpy(inp["b"].copy()))

    def forward(x, h, c):
        out = []
        for t in range(x.shape[0]):
            gates = torch.addmm(b, torch.cat([h, x[t]], dim=1), W.t()).chunk(3, dim=1)
            input_gate = torch.sigmoid(gates[0])
            output_gate = torch.sigmoid(gates[1])
            candidate_cell = F.elu(gates[2])
            c = c + candidate_cell * input_gate
            h = torch.tanh(c) * output_gate
            out.append(h)
        return torch.stack(out)

    return TorchModel(forward, (W, b), lambda: W.grad)


GRU = Family(
    name="gru",
    arg_specs=lambda s: {"x": ("x", (s.T, s.B, s.I)), "hI": ("state", (s.B, s.H)),
                         "Wx": ("param", (s.I, 3 * s.H)), "Wh": ("param", (s.H, 3 * s.H)),
                         "b": ("param", (2, 3 * s.H))},
    variants={"reset_before": {"linear_before_reset": False},
              "linear_before_reset": {"linear_before_reset": True}},
    numpy_forward=numpy_gru, numpy_backward=numpy_gru_bp,
    cells_forward="gruTimeLoop", cells_backward="gruTimeLoopBp",
    outputs=("h",), grads=("dLdx", "dLdhI", "dLdWx", "dLdWh", "dLdb"),
    state_names=("hI",), last_grad_names=("dLdhLast",), recurrent_grad="dLdWh",
    torch_model=_torch_gru, torch_name="torch.nn.GRU (linear_before_reset only)",
    gate_blocks=3)

LSTM = Family(
    name="lstm",
    arg_specs=lambda s: {"x": ("x", (s.T, s.B, s.I)), "Wx": ("param", (s.I, 4 * s.H)),
                         "Wr": ("param", (s.H, 4 * s.H)), "b": ("param", (4 * s.H,)),
                         "hI": ("state", (s.B, s.H)), "cI": ("state", (s.B, s.H))},
    variants={"-": {}},
    numpy_forward=numpy_lstm, numpy_backward=numpy_lstm_bp,
    cells_forward="lstmLayerTimeLoop", cells_backward="lstmLayerTimeLoopBp",
    outputs=("h", "hL", "cL"), grads=("dLdx", "dLdWx", "dLdWr", "dLdb", "dLdhI", "dLdcI"),
    state_names=("hI", "cI"), last_grad_names=("dLdhL", "dLdcL"), recurrent_grad="dLdWr",
    torch_model=_torch_lstm, torch_name="torch.nn.LSTM", gate_blocks=4)

LLTM = Family(
    name="lltm",
    arg_specs=lambda s: {"x": ("x", (s.T, s.B, s.I)), "W": ("param", (3 * s.H, s.H + s.I)),
                         "b": ("param", (3 * s.H,)), "hI": ("state", (s.B, s.H)),
                         "cI": ("state", (s.B, s.H))},
    variants={"-": {}},
    numpy_forward=numpy_lltm, numpy_backward=numpy_lltm_bp,
    cells_forward="lltmTimeLoop", cells_backward="lltmTimeLoopBp",
    outputs=("h", "hL", "cL"), grads=("dLdx", "dLdW", "dLdb", "dLdhI", "dLdcI"),
    state_names=("hI", "cI"), last_grad_names=("dLdhL", "dLdcL"), recurrent_grad="dLdW",
    torch_model=_torch_lltm, torch_name="the tutorial's pure-PyTorch LLTM step, looped",
    gate_blocks=3)

FAMILIES = {f.name: f for f in (GRU, LSTM, LLTM)}


def get_family(family):
    """A Family from itself or its name."""
    return family if isinstance(family, Family) else FAMILIES[family]


def numpy_run(family, args, opts, dLdh=None, last_grads=None):
    """The family's NumPy forward, and with dLdh its backward: (outputs, grads or None)."""
    outputs, cache = family.numpy_forward(*args, **opts)
    if dLdh is None:
        return outputs, None
    return outputs, family.numpy_backward(*args, dLdh, outputs, cache, **(last_grads or {}),
                                          **opts)


def _as_tuple(result):
    """gruTimeLoop returns h alone, or (h, workspace); the others always return tuples."""
    return result if isinstance(result, tuple) else (result,)


def cells_run(family, args, opts, n_threads, dLdh=None, last_grads=None, use_workspace=True):
    """cells' time loop, and with dLdh its backward (on the forward's workspace, or recomputing
    it with use_workspace=False): (outputs, grads or None), named as family.outputs and
    family.grads."""
    forward, backward = family.kernels()
    keep = dLdh is not None and use_workspace
    result = _as_tuple(forward(*args, return_workspace=keep, n_threads=n_threads, **opts))
    outputs = result[:len(family.outputs)]
    if dLdh is None:
        return outputs, None
    grads = backward(*args, dLdh, workspace=result[-1] if keep else None, n_threads=n_threads,
                     **(last_grads or {}), **opts)
    return outputs, tuple(grads[:len(family.grads)])


# ----------------------------------------------------------------------------------------------
# 4. Contenders
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


# Factories take (family, inputs, training, variant, threads) and return a Contender or None.
CONTENDER_FACTORIES = (cells_contender, numpy_contender, torch_contender)


# ----------------------------------------------------------------------------------------------
# 5. Timing
# ----------------------------------------------------------------------------------------------

def time_alternating(contenders, repeats=5, warmup=1, min_sample_s=0.01, settle_s=0.15):
    """Median seconds per call of every contender, plus the outputs of each one's first call.

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
    timed cold, that call also set `number` to 1, and the medians came out 10x too high."""
    def settle(c):
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
    return {name: median(s) for name, s in samples.items()}, outputs


def gemm_ceiling(dtype, threads, n=1024, repeats=7):
    """GF/s of a big square gemm [n, n]·[n, n] in cells' BLAS (scipy's), with `threads` threads
    and the median of `repeats` calls: the rate the time loops' own gemms could reach at most."""
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
# 6. Rows
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
            repeats=5, warmup=1, factories=CONTENDER_FACTORIES, seed=0, ceiling=None):
    """Time every applicable contender on one case; one row (dict) per contender.

    Row keys: family, T, B, I, H, dtype, threads, variant ("-" for LSTM and LLTM; default: the
    family's first), task, contender, ms (median per call), cells_speedup (contender ms / cells
    ms; > 1 means cells is faster), gflops (family.gemm_flops per second), ceiling_pct (gflops
    as a percentage of `ceiling`, the big-square gemm GF/s of gemm_ceiling; None without it),
    diff_h, grad (the name of the recurrent-weight gradient compared in a training step, None
    for inference), diff_grad (its max abs difference to the float64 NumPy reference) and ok
    (every difference within TOLERANCE)."""
    family = get_family(family)
    variant = variant or family.default_variant()
    inp = make_inputs(family, shape, dtype, seed)
    contenders = [c for f in factories
                  if (c := f(family, inp, training, variant, threads)) is not None]
    seconds, outputs = time_alternating(contenders, repeats, warmup)
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
            "gflops": gflops, "ceiling_pct": None if ceiling is None else 100 * gflops / ceiling,
            "diff_h": diffs[0], "grad": names[1] if training else None,
            "diff_grad": diffs[1] if training else None,
            "ok": all(out.shape == ref.shape and within_tolerance(d, ref, dtype)
                      for out, ref, d in zip(outputs[c.name], reference, diffs)),
        })
    return rows


SELF_CHECK_SHAPE = Shape(T=7, B=3, I=5, H=4)


def self_check(family, threads=1, shape=SELF_CHECK_SHAPE, seed=1):
    """Every output of cells' time loop and of its backward against the float64 NumPy cell, in
    float32 and float64, for every variant of `family`: random dLdh and final-state gradients;
    the backward runs twice, recomputing the forward (output names as family.grads) and on the
    forward's workspace (names suffixed "/ws").

    Returns rows: family, dtype, variant, output, max_abs_diff, ok."""
    family = get_family(family)
    rng = np.random.default_rng(seed)
    base = make_inputs(family, shape, np.float64, seed)
    base.dLdh = rng.standard_normal(base.dLdh.shape)
    last = {n: rng.standard_normal((shape.B, shape.H)) for n in family.last_grad_names}
    names = family.outputs + family.grads + tuple(f"{g}/ws" for g in family.grads)
    rows = []
    for variant, opts in family.variants.items():
        ref_out, ref_grads = numpy_run(family, tuple(base.args.values()), opts, base.dLdh, last)
        reference = ref_out + ref_grads + ref_grads
        for dtype in (np.float32, np.float64):
            inp = base.astype(dtype)
            args = tuple(inp.args.values())
            last_d = {n: g.astype(dtype) for n, g in last.items()}
            out, grads = cells_run(family, args, opts, threads, inp.dLdh, last_d,
                                   use_workspace=False)
            _, grads_ws = cells_run(family, args, opts, threads, inp.dLdh, last_d)
            for name, o, r in zip(names, out + grads + grads_ws, reference):
                o = np.asarray(o)
                diff = max_abs_diff(o, r) if o.shape == r.shape else float("inf")
                rows.append({"family": family.name, "dtype": np.dtype(dtype).name,
                             "variant": variant, "output": name, "max_abs_diff": diff,
                             "ok": o.dtype == dtype and o.shape == r.shape
                             and within_tolerance(diff, r, dtype)})
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
            "python": platform.python_version(), "cells": cells.__version__,
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

    def fmt_pct(p):
        return "-" if p is None else f"{p:.0f}%"

    header = ("family", "shape", "dtype", "thr", "task", "variant", "contender",
              "ms", "GF/s", "%gemm", "cells x", "|dh|", "|dW_rec|", "ok")
    lines = [(r["family"], f"T={r['T']} B={r['B']} I={r['I']} H={r['H']}", r["dtype"],
              str(r["threads"]), r["task"], r["variant"], r["contender"], f"{r['ms']:.3f}",
              f"{r['gflops']:.1f}", fmt_pct(r["ceiling_pct"]), f"{r['cells_speedup']:.2f}",
              fmt_diff(r["diff_h"]), fmt_diff(r["diff_grad"]),
              "yes" if r["ok"] else "NO") for r in rows]
    widths = [max(len(x) for x in col) for col in zip(header, *lines)]
    right = {"thr", "ms", "GF/s", "%gemm", "cells x", "|dh|", "|dW_rec|"}
    return "\n".join("  ".join(x.rjust(w) if h in right else x.ljust(w)
                               for h, x, w in zip(header, line, widths)).rstrip()
                     for line in [header] + lines)


TABLE_LEGEND = ("ms per call (median); GF/s = the gemm FLOPs any implementation must do "
                "(2·T·B·(I+H)·blocks·H, x3 for training) per second; %gemm = GF/s as a "
                "percentage of a big-square gemm's GF/s at the same threads and dtype; "
                "cells x = contender ms / cells ms (> 1: cells is faster); "
                "|dh|, |dW_rec| = max abs diff of h and of the recurrent-weight gradient "
                "(GRU dLdWh, LSTM dLdWr, LLTM dLdW) to the float64 NumPy cell")

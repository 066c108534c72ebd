"""Vanilla RNN: PyTorch's nn.RNN / nn.RNNCell, ONNX's RNN, libnd4j's static_rnn / dynamic_rnn.

Shapes use libnd4j's names: sL time steps, bS batch rows, nIn inputs, nOut units. Products are
row-vector (z = x·W):

    h = act(x·Wx + bx + hI·Wh + bh),   act = tanh or relu

Wx [nIn, nOut], Wh [nOut, nOut]; b is [nOut] (bx alone) or [2, nOut] (rows bx, bh: PyTorch's
bias_ih, bias_hh; both get the same gradient). relu'(0) is 0, as PyTorch's autograd. Every function
takes float32 or float64 arrays of one dtype, in any memory order, and returns new C-ordered arrays
of that dtype (dLdWx and dLdWh F-ordered where Wx and Wh both are: PyTorch's layout, which the
CPU reads where it is). `n_threads` (None = OMP_NUM_THREADS if set, else all cores) is the number of threads
the call runs on (cells/_threads.py); a backward whose weight gradients run on BLAS holds it at
one thread meanwhile.
"""
from typing import NamedTuple, Optional

import numpy as np

from cells import _validate as check
from cells._params import RNN_ACTIVATIONS, rnn_bias
from cells._prepared import PreparedNet, RnnState, prepare_net, threads_option, weights_option
from cells._threads import resolve_n_threads

ACTIVATIONS = ("tanh", "relu")


class RnnWorkspace(NamedTuple):
    """What rnnTimeLoop(..., return_workspace=True) keeps for rnnTimeLoopBp.

    Per step it holds 2nOut values per batch row:
      h     [sL, bS, nOut]   the states (the array rnnTimeLoop returns)
      gates [sL, bS, nOut]   act(z), the activation of every step (0 at a row's padded steps)
    and the options it was made with, which rnnTimeLoopBp checks against its own: activation,
    seq_len (int64 [bS] or None) and forward.

    rnnTimeLoopBp consumes it: it overwrites gates with gradients and leaves them read-only; a
    second backward pass needs a new forward pass.
    """

    h: np.ndarray
    gates: np.ndarray
    activation: str
    seq_len: Optional[np.ndarray]
    forward: bool


class RnnTimeLoopWithWorkspace(NamedTuple):
    """rnnTimeLoop(..., return_workspace=True)'s outputs: h [sL, bS, nOut] the state after every
    step, and the RnnWorkspace for rnnTimeLoopBp."""

    h: np.ndarray
    workspace: RnnWorkspace


class RnnGrads(NamedTuple):
    """The gradients rnnCellBp and rnnTimeLoopBp return (summed over time for a time loop):
    dLdx with x's shape, dLdhI [bS, nOut], dLdWx [nIn, nOut], dLdWh [nOut, nOut], dLdb with b's
    shape."""

    dLdx: np.ndarray
    dLdhI: np.ndarray
    dLdWx: np.ndarray
    dLdWh: np.ndarray
    dLdb: np.ndarray


def rnnCell(x, hI, Wx, Wh, b, *, activation="tanh", n_threads=None):
    """One RNN step: x [bS, nIn], hI [bS, nOut], Wx [nIn, nOut], Wh [nOut, nOut], b [nOut] or
    [2, nOut]. Returns h [bS, nOut]."""
    act = _activation(activation)
    backend, dims = check.gated_weights(x, hI, Wx, Wh, b, 1, x_ndim=2)
    h, _, _ = backend.rnn_forward(dims, x[None], hI, Wx, Wh, b, act, False,
                                  resolve_n_threads(n_threads, dims))
    return h[0]


def rnnCellBp(x, hI, Wx, Wh, b, dLdh, *, activation="tanh", n_threads=None):
    """Gradients of one RNN step, given dLdh = dL/dh [bS, nOut] (the forward is recomputed).

    Returns an RnnGrads (dLdx [bS, nIn], dLdhI [bS, nOut], dLdWx [nIn, nOut],
    dLdWh [nOut, nOut], dLdb with b's shape).
    """
    act = _activation(activation)
    backend, dims = check.gated_weights(x, hI, Wx, Wh, b, 1, x_ndim=2, dLdh=dLdh)
    check.shape("dLdh", dLdh, hI.shape, "[bS, nOut]")
    dLdx, *grads = backend.rnn_backward(dims, x[None], hI, Wx, Wh, b, act, None, dLdh[None],
                                        None, resolve_n_threads(n_threads, dims))
    return RnnGrads(dLdx[0], *grads)


def rnnTimeLoop(x, hI, Wx, Wh, b, *, activation="tanh", seq_len=None, forward=True,
                return_workspace=False, n_threads=None):
    """RNN over a sequence.

    x [sL, bS, nIn] (time-major), hI [bS, nOut] the initial state, weights as rnnCell. Returns
    h [sL, bS, nOut], the state after every step; with return_workspace=True an
    RnnTimeLoopWithWorkspace (h, workspace), whose RnnWorkspace lets rnnTimeLoopBp skip
    recomputing this forward pass.

    seq_len [bS] (integers in [0, sL]; None: all sL): row b runs only its first seq_len[b] steps,
    and h is 0 after them (ONNX sequence_lens, PyTorch packed sequences). forward=False runs each
    row's valid steps in reverse time order, each output at its own time index (ONNX
    direction="reverse"). A row's final state is h[seq_len[b] - 1] going forward, h[0] in reverse
    (hI when seq_len[b] = 0).
    """
    act = _activation(activation)
    keep = check.flag("return_workspace", return_workspace)
    fwd = check.flag("forward", forward)
    backend, dims = check.gated_weights(x, hI, Wx, Wh, b, 1, x_ndim=3)
    lengths = check.seq_len(seq_len, dims[0], dims[1], x)
    h, _, gates = backend.rnn_forward(dims, x, hI, Wx, Wh, b, act, keep,
                                      resolve_n_threads(n_threads, dims), lengths, fwd)
    if not keep:
        return h
    ws = RnnWorkspace(h, gates, act, None if lengths is None else lengths.copy(), fwd)
    return RnnTimeLoopWithWorkspace(h, ws)


def rnnTimeLoopBp(x, hI, Wx, Wh, b, dLdh, *, dLdhLast=None, workspace=None, activation="tanh",
                  seq_len=None, forward=True, input_grad=True, n_threads=None):
    """Backpropagation through time for rnnTimeLoop (with the same activation, seq_len and
    forward).

    dLdh [sL, bS, nOut] is the gradient arriving at every step's output and dLdhLast [bS, nOut]
    the one arriving at each row's final state (each may be None: no gradient; dLdh at a row's
    padded steps is ignored). `workspace`, from rnnTimeLoop(..., return_workspace=True) on the
    same inputs and options, skips recomputing the forward pass.
    Returns an RnnGrads (dLdx [sL, bS, nIn], dLdhI [bS, nOut], dLdWx [nIn, nOut],
    dLdWh [nOut, nOut], dLdb with b's shape); the weight gradients are summed over time, and
    dLdx is 0 at padded steps.
    input_grad=False skips dL/dx (dLdx is then None: for a first layer whose input needs
    no gradient).
    """
    act = _activation(activation)
    fwd = check.flag("forward", forward)
    input_grad = check.flag("input_grad", input_grad)
    backend, dims = check.gated_weights(x, hI, Wx, Wh, b, 1, x_ndim=3,
                                        optional=("dLdh", "dLdhLast"), dLdh=dLdh,
                                        dLdhLast=dLdhLast)
    sL, bS, nIn, nOut = dims
    check.output_grads(sL, bS, nOut, dLdh, dLdhLast=dLdhLast)
    lengths = check.seq_len(seq_len, sL, bS, x)
    saved = None
    if workspace is not None:
        check.workspace(workspace, RnnWorkspace, "rnnTimeLoopBp", x, "x and hI",
                        {"h": (sL, bS, nOut), "gates": (sL, bS, nOut)}, ("gates",),
                        activation=act, seq_len=lengths, forward=fwd)
        saved = workspace.h, workspace.gates
    return RnnGrads(*backend.rnn_backward(dims, x, hI, Wx, Wh, b, act, saved, dLdh, dLdhLast,
                                          resolve_n_threads(n_threads, dims), lengths, fwd,
                                          input_grad))


# ---------------------------------------------------------------------------------------------
# Validation
# ---------------------------------------------------------------------------------------------

def prepare(Wx, Wh, b, *, activation="tanh", n_threads=None, weights=None) -> PreparedNet:
    """Prepare an RNN's weights for many inference calls (serving): validated and packed once.

    Parameters
    ----------
    Wx : numpy.ndarray, [nIn, nOut]
    Wh : numpy.ndarray, [nOut, nOut]
        As rnnTimeLoop takes them (float32 or float64, one dtype; both F-ordered, PyTorch's
        layout transposed, is read without a transposing copy).
    b : numpy.ndarray, [nOut] or [2, nOut]
        bx, or the rows bx and bh.
    activation : {"tanh", "relu"}
    n_threads : int or None
        The threads of every call (a call's own n_threads overrides it); None: as many as a
        call's size gains from.
    weights : None
        The form the weights are kept in: None keeps their dtype.

    Returns
    -------
    PreparedNet
        ``h, state = net(x, state)`` with state an RnnState (h [bS, nOut]).

    Raises
    ------
    TypeError
        An argument that is not a float32/float64 NumPy array, or of another dtype than Wx.
    ValueError
        Shapes that do not fit together, nIn or nOut of 0, an unknown activation.

    Examples
    --------
    >>> import numpy as np, cells
    >>> rng = np.random.default_rng(0)
    >>> net = cells.rnn.prepare(rng.normal(size=(3, 2)), rng.normal(size=(2, 2)), np.zeros(2))
    >>> h, state = net(rng.normal(size=(5, 1, 3)))      # a chunk of 5 steps
    >>> h.shape, state.h.shape
    ((5, 1, 2), (1, 2))
    """
    act = _activation(activation)
    options = {"activation": act, "n_threads": threads_option(n_threads),
               "weights": weights_option(weights)}
    check.numpy_weights(Wx=Wx, Wh=Wh, b=b)
    check.ndim("Wx", Wx, 2, "[nIn, nOut]")
    check.ndim("Wh", Wh, 2, "[nOut, nOut]")
    x, hI = check.no_inputs(Wx.dtype, Wx.shape[0], Wh.shape[0])
    _, (_, _, nIn, nOut) = check.gated_weights(x, hI, Wx, Wh, b, 1, x_ndim=3)
    return prepare_net("rnn", RnnState, options, "rnn", nIn, nOut, Wx.dtype, Wx=Wx, Wh=Wh,
                       b=rnn_bias(b), activation=RNN_ACTIVATIONS[act])


def _activation(activation):
    if not isinstance(activation, str) or activation not in ACTIVATIONS:
        raise ValueError(f"activation: expected one of {ACTIVATIONS}, got {activation!r}")
    return activation


"""Vanilla RNN: PyTorch's nn.RNN / nn.RNNCell, ONNX's RNN, libnd4j's static_rnn / dynamic_rnn.

Shapes use libnd4j's names: sL time steps, bS batch rows, nIn inputs, nOut units. Products are
row-vector (z = x·W):

    h = act(x·Wx + bx + hI·Wh + bh),   act = tanh or relu

Wx [nIn, nOut], Wh [nOut, nOut]; b is [nOut] (bx alone) or [2, nOut] (rows bx, bh: PyTorch's
bias_ih, bias_hh; both get the same gradient). relu'(0) is 0, as PyTorch's autograd. Every function
takes float32 or float64 arrays of one dtype, in any memory order, and returns new C-ordered arrays
of that dtype (dLdWx and dLdWh F-ordered where Wx and Wh both are: PyTorch's layout, which the CPU
reads where it is). `n_threads` (None: as many as the call's steps gain from, at most the cores) is
the number of threads the call runs on (cells/_threads.py); a backward whose weight gradients run
on BLAS holds it at one thread meanwhile.
"""
from typing import NamedTuple, Optional, Union

import numpy as np

from cells import _backend
from cells import _validate as check
from cells._families import rnn as family
from cells._prepared import PreparedNet, RnnState, prepare_net, weights_option
from cells._threads import check_n_threads

ACTIVATIONS = ("tanh", "relu")


class RnnWorkspace(NamedTuple):
    """What ``rnnTimeLoop(..., return_workspace=True)`` keeps for :func:`rnnTimeLoopBp`.

    Per step it holds 2nOut values per batch row, and the options it was made with, which the
    backward checks against its own.

    The backward consumes it: to keep a training step's memory at the workspace, it overwrites
    the gates with gradients and leaves them read-only; a second backward pass needs a new forward
    pass (as PyTorch frees a graph's saved tensors in ``backward()``).

    Attributes
    ----------
    h : numpy.ndarray, [sL, bS, nOut]
        The states (the array rnnTimeLoop returns).
    gates : numpy.ndarray, [sL, bS, nOut]
        act(z) of every step (0 at a row's padded steps).
    activation : str
        The activation it was made with.
    seq_len : numpy.ndarray of int64, [bS], or None
        The lengths it was made with.
    forward : bool
        The direction it was made with.
    """

    h: np.ndarray
    gates: np.ndarray
    activation: str
    seq_len: Optional[np.ndarray]
    forward: bool


class RnnTimeLoopWithWorkspace(NamedTuple):
    """What ``rnnTimeLoop(..., return_workspace=True)`` returns.

    Attributes
    ----------
    h : numpy.ndarray, [sL, bS, nOut]
        The state after every step.
    workspace : RnnWorkspace
        For :func:`rnnTimeLoopBp`.
    """

    h: np.ndarray
    workspace: RnnWorkspace


class RnnGrads(NamedTuple):
    """The gradients :func:`rnnCellBp` and :func:`rnnTimeLoopBp` return (summed over time for a
    time loop).

    Attributes
    ----------
    dLdx : numpy.ndarray or None
        x's shape; None with ``input_grad=False``.
    dLdhI : numpy.ndarray, [bS, nOut]
    dLdWx : numpy.ndarray, [nIn, nOut]
    dLdWh : numpy.ndarray, [nOut, nOut]
    dLdb : numpy.ndarray
        b's shape.
    """

    dLdx: np.ndarray
    dLdhI: np.ndarray
    dLdWx: np.ndarray
    dLdWh: np.ndarray
    dLdb: np.ndarray


def rnnCell(x: np.ndarray, hI: np.ndarray, Wx: np.ndarray, Wh: np.ndarray, b: np.ndarray, *,
            activation: str = "tanh", n_threads: Optional[int] = None) -> np.ndarray:
    """One vanilla RNN step.

    Parameters
    ----------
    x : numpy.ndarray, [bS, nIn]
        The input, float32 or float64 (every array of the call has one dtype).
    hI : numpy.ndarray, [bS, nOut]
        The previous state.
    Wx : numpy.ndarray, [nIn, nOut]
    Wh : numpy.ndarray, [nOut, nOut]
    b : numpy.ndarray, [nOut] or [2, nOut]
        bx alone, or the rows bx and bh (PyTorch's bias_ih, bias_hh).
    activation : {"tanh", "relu"}, default "tanh"
        h = act(x·Wx + bx + hI·Wh + bh); relu'(0) = 0, as PyTorch's autograd.
    n_threads : int, optional
        The threads the call runs on (1 to 256); None: as many as a step's work gains from
        (the Threads guide), at most ``OMP_NUM_THREADS`` when set, else the cores the process
        may use.

    Returns
    -------
    h : numpy.ndarray, [bS, nOut]
        The new state.

    Raises
    ------
    TypeError
        An argument that is not a float32 or float64 array, arrays of different dtypes, or an
        option of the wrong kind.
    ValueError
        A shape that does not fit the others (the message names the argument, the expected and
        the given shape), an option out of range, or a workspace made with other options or
        already consumed.

    Examples
    --------
    >>> import numpy as np, cells
    >>> rng = np.random.default_rng(0)
    >>> bS, nIn, nOut = 2, 3, 4
    >>> Wx, Wh, b = rng.normal(size=(nIn, nOut)), rng.normal(size=(nOut, nOut)), np.zeros(nOut)
    >>> cells.rnnCell(rng.normal(size=(bS, nIn)), np.zeros((bS, nOut)), Wx, Wh, b).shape
    (2, 4)
    """
    act = _activation(activation)
    dims = check.arguments(family.FAMILY, x=x, hI=hI, Wx=Wx, Wh=Wh, b=b, x_ndim=2)
    h, _, _ = family.forward(_backend.of(x), dims, x[None], hI, Wx, Wh, b, act, False,
                             check_n_threads(n_threads))
    return h[0]


def rnnCellBp(x: np.ndarray, hI: np.ndarray, Wx: np.ndarray, Wh: np.ndarray, b: np.ndarray,
              dLdh: np.ndarray, *, activation: str = "tanh",
              n_threads: Optional[int] = None) -> RnnGrads:
    """Gradients of one RNN step (the forward pass is recomputed).

    Parameters
    ----------
    x, hI, Wx, Wh, b, activation
        As :func:`rnnCell`.
    dLdh : numpy.ndarray, [bS, nOut]
        dL/dh, the gradient arriving at the new state.
    n_threads : int, optional
        The threads the call runs on (1 to 256); None: as many as a step's work gains from
        (the Threads guide), at most ``OMP_NUM_THREADS`` when set, else the cores the process
        may use.

    Returns
    -------
    RnnGrads
        ``(dLdx, dLdhI, dLdWx, dLdWh, dLdb)``: dLdx [bS, nIn], dLdhI [bS, nOut], dLdWx
        [nIn, nOut], dLdWh [nOut, nOut], dLdb with b's shape (both rows of a [2, nOut] b get
        the same gradient).

    Raises
    ------
    TypeError
        An argument that is not a float32 or float64 array, arrays of different dtypes, or an
        option of the wrong kind.
    ValueError
        A shape that does not fit the others (the message names the argument, the expected and
        the given shape), an option out of range, or a workspace made with other options or
        already consumed.

    Examples
    --------
    >>> import numpy as np, cells
    >>> rng = np.random.default_rng(0)
    >>> bS, nIn, nOut = 2, 3, 4
    >>> Wx, Wh, b = rng.normal(size=(nIn, nOut)), rng.normal(size=(nOut, nOut)), np.zeros(nOut)
    >>> g = cells.rnnCellBp(rng.normal(size=(bS, nIn)), np.zeros((bS, nOut)), Wx, Wh, b,
    ...                     np.ones((bS, nOut)))
    >>> g.dLdWx.shape
    (3, 4)
    """
    act = _activation(activation)
    dims = check.arguments(family.FAMILY, x=x, hI=hI, Wx=Wx, Wh=Wh, b=b, x_ndim=2, dLdh=dLdh)
    check.shape("dLdh", dLdh, hI.shape, "[bS, nOut]")
    dLdx, *grads = family.backward(_backend.of(x), dims, x[None], hI, Wx, Wh, b, act, None,
                                   dLdh[None], None, check_n_threads(n_threads))
    return RnnGrads(dLdx[0], *grads)


def rnnTimeLoop(x: np.ndarray, hI: np.ndarray, Wx: np.ndarray, Wh: np.ndarray, b: np.ndarray, *,
                activation: str = "tanh", seq_len: Optional[np.ndarray] = None,
                forward: bool = True, return_workspace: bool = False,
                n_threads: Optional[int] = None
                ) -> Union[np.ndarray, RnnTimeLoopWithWorkspace]:
    """A vanilla RNN over a sequence.

    Parameters
    ----------
    x : numpy.ndarray, [sL, bS, nIn]
        The inputs, time-major; float32 or float64.
    hI : numpy.ndarray, [bS, nOut]
        The initial state.
    Wx : numpy.ndarray, [nIn, nOut]
    Wh : numpy.ndarray, [nOut, nOut]
    b : numpy.ndarray, [nOut] or [2, nOut]
        bx alone, or the rows bx and bh (PyTorch's bias_ih, bias_hh).
    activation : {"tanh", "relu"}, default "tanh"
        h = act(x·Wx + bx + hI·Wh + bh); relu'(0) = 0, as PyTorch's autograd.
    seq_len : numpy.ndarray of int, [bS], optional
        Row b runs only its first ``seq_len[b]`` steps (in [0, sL]); its outputs after them are 0
        and its final state is the state after its last valid step. None: every row runs sL.
    forward : bool, default True
        False runs each row's valid steps in reverse time order, each output at its own time
        index (ONNX ``direction="reverse"``).
    return_workspace : bool, default False
        Also return the :class:`RnnWorkspace` that lets :func:`rnnTimeLoopBp` skip recomputing
        this forward pass.
    n_threads : int, optional
        The threads the call runs on (1 to 256); None: as many as a step's work gains from
        (the Threads guide), at most ``OMP_NUM_THREADS`` when set, else the cores the process
        may use.

    Returns
    -------
    h : numpy.ndarray, [sL, bS, nOut]
        The state after every step.
    RnnTimeLoopWithWorkspace
        ``(h, workspace)`` instead, with ``return_workspace=True``.

    Raises
    ------
    TypeError
        An argument that is not a float32 or float64 array, arrays of different dtypes, or an
        option of the wrong kind.
    ValueError
        A shape that does not fit the others (the message names the argument, the expected and
        the given shape), an option out of range, or a workspace made with other options or
        already consumed.

    Examples
    --------
    >>> import numpy as np, cells
    >>> rng = np.random.default_rng(0)
    >>> bS, nIn, nOut = 2, 3, 4
    >>> Wx, Wh, b = rng.normal(size=(nIn, nOut)), rng.normal(size=(nOut, nOut)), np.zeros(nOut)
    >>> x = rng.normal(size=(5, bS, nIn))
    >>> cells.rnnTimeLoop(x, np.zeros((bS, nOut)), Wx, Wh, b, activation="relu").shape
    (5, 2, 4)
    """
    act = _activation(activation)
    keep = check.flag("return_workspace", return_workspace)
    fwd = check.flag("forward", forward)
    dims = check.arguments(family.FAMILY, x=x, hI=hI, Wx=Wx, Wh=Wh, b=b)
    lengths = check.seq_len(seq_len, dims[0], dims[1], x)
    h, _, gates = family.forward(_backend.of(x), dims, x, hI, Wx, Wh, b, act, keep,
                                 check_n_threads(n_threads), lengths, fwd)
    if not keep:
        return h
    ws = RnnWorkspace(h, gates, act, None if lengths is None else lengths.copy(), fwd)
    return RnnTimeLoopWithWorkspace(h, ws)


def rnnTimeLoopBp(x: np.ndarray, hI: np.ndarray, Wx: np.ndarray, Wh: np.ndarray, b: np.ndarray,
                  dLdh: Optional[np.ndarray], *, dLdhLast: Optional[np.ndarray] = None,
                  workspace: Optional[RnnWorkspace] = None, activation: str = "tanh",
                  seq_len: Optional[np.ndarray] = None, forward: bool = True,
                  input_grad: bool = True, n_threads: Optional[int] = None) -> RnnGrads:
    """Backpropagation through time for :func:`rnnTimeLoop`.

    Called with the forward pass's arguments and options.

    Parameters
    ----------
    x, hI, Wx, Wh, b, activation, seq_len, forward
        As :func:`rnnTimeLoop`.
    dLdh : numpy.ndarray, [sL, bS, nOut], or None
        The gradient arriving at every step's output (ignored at padded steps).
    dLdhLast : numpy.ndarray, [bS, nOut], optional
        The gradient arriving at each row's final state.
    workspace : RnnWorkspace, optional
        From ``rnnTimeLoop(..., return_workspace=True)`` on the same inputs and options: skips
        recomputing the forward pass. The backward consumes it.
    input_grad : bool, default True
        False skips dL/dx (``dLdx`` is then None), for a first layer whose input needs no
        gradient.
    n_threads : int, optional
        The threads the call runs on (1 to 256); None: as many as a step's work gains from
        (the Threads guide), at most ``OMP_NUM_THREADS`` when set, else the cores the process
        may use.

    Returns
    -------
    RnnGrads
        ``(dLdx, dLdhI, dLdWx, dLdWh, dLdb)``: dLdx [sL, bS, nIn] (0 at padded steps), the rest
        as :func:`rnnCellBp`'s, the weight gradients summed over time.

    Raises
    ------
    TypeError
        An argument that is not a float32 or float64 array, arrays of different dtypes, or an
        option of the wrong kind.
    ValueError
        A shape that does not fit the others (the message names the argument, the expected and
        the given shape), an option out of range, or a workspace made with other options or
        already consumed.

    Examples
    --------
    >>> import numpy as np, cells
    >>> rng = np.random.default_rng(0)
    >>> bS, nIn, nOut = 2, 3, 4
    >>> Wx, Wh, b = rng.normal(size=(nIn, nOut)), rng.normal(size=(nOut, nOut)), np.zeros(nOut)
    >>> x, hI = rng.normal(size=(5, bS, nIn)), np.zeros((bS, nOut))
    >>> h = cells.rnnTimeLoop(x, hI, Wx, Wh, b)
    >>> cells.rnnTimeLoopBp(x, hI, Wx, Wh, b, np.ones_like(h)).dLdWh.shape
    (4, 4)
    """
    act = _activation(activation)
    fwd = check.flag("forward", forward)
    input_grad = check.flag("input_grad", input_grad)
    dims = check.arguments(family.FAMILY, x=x, hI=hI, Wx=Wx, Wh=Wh, b=b,
                           optional=("dLdh", "dLdhLast"), dLdh=dLdh, dLdhLast=dLdhLast)
    sL, bS, nIn, nOut = dims
    check.output_grads(sL, bS, nOut, dLdh, dLdhLast=dLdhLast)
    lengths = check.seq_len(seq_len, sL, bS, x)
    saved = None
    if workspace is not None:
        check.workspace(workspace, RnnWorkspace, "rnnTimeLoopBp", x, "x and hI",
                        {"h": (sL, bS, nOut), "gates": (sL, bS, nOut)}, ("gates",),
                        activation=act, seq_len=lengths, forward=fwd)
        saved = workspace.h, workspace.gates
    return RnnGrads(*family.backward(_backend.of(x), dims, x, hI, Wx, Wh, b, act, saved, dLdh,
                                     dLdhLast, check_n_threads(n_threads), lengths, fwd,
                                     input_grad))


# ---------------------------------------------------------------------------------------------
# Validation
# ---------------------------------------------------------------------------------------------

def prepare(Wx: np.ndarray, Wh: np.ndarray, b: np.ndarray, *, activation: str = "tanh",
            n_threads: Optional[int] = None, weights: Optional[str] = None) -> PreparedNet:
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
    weights : None, "int8" or "bfloat16"
        The form the weights are kept in: None keeps their dtype; "int8" (a scale per output
        column, the inputs of each product quantized per row) or "bfloat16" packs float32
        weights for float32 calls at a quarter or a half of the bytes (the numeric model: the
        Serving guide).

    Returns
    -------
    PreparedNet
        ``h, state = net(x, state)`` with state an RnnState (h [bS, nOut]).

    Raises
    ------
    TypeError
        An argument that is not a float32/float64 NumPy array, or of another dtype than Wx;
        float64 weights with ``weights="int8"`` or ``"bfloat16"``.
    ValueError
        Shapes that do not fit together, nIn or nOut of 0, an unknown activation or
        ``weights``.

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
    options = {"activation": act, "n_threads": check_n_threads(n_threads),
               "weights": weights_option(weights)}
    check.numpy_weights(Wx=Wx, Wh=Wh, b=b)
    check.ndim("Wx", Wx, 2, "[nIn, nOut]")
    check.ndim("Wh", Wh, 2, "[nOut, nOut]")
    x, hI = check.no_inputs(Wx.dtype, Wx.shape[0], Wh.shape[0])
    _, _, nIn, nOut = check.arguments(family.FAMILY, x=x, hI=hI, Wx=Wx, Wh=Wh, b=b)
    return prepare_net("rnn", RnnState, options, "rnn", nIn, nOut, Wx.dtype, Wx=Wx, Wh=Wh,
                       b=family.loop_bias(b), activation=family.ACTIVATIONS[act])


def _activation(activation):
    if not isinstance(activation, str) or activation not in ACTIVATIONS:
        raise ValueError(f"activation: expected one of {ACTIVATIONS}, got {activation!r}")
    return activation

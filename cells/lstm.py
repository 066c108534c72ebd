"""LSTM: libnd4j's lstmLayerCell, lstmLayerCellBp and the lstmLayer time loop with its backward.

Shapes use libnd4j's names: sL time steps, bS batch rows, nIn inputs, nOut units. Gate blocks
are ordered (i, f, g, o) = input, forget, cell candidate, output (libnd4j lstmLayer, PyTorch),
products are row-vector (z = x·W), and the optional peephole weights Wp [3nOut] are in blocks
(i, f, o):

    i = σ(x·Wx_i + hI·Wr_i + Wp_i∘cI + b_i)
    f = σ(x·Wx_f + hI·Wr_f + Wp_f∘cI + b_f)
    g = tanh(x·Wx_g + hI·Wr_g + b_g)
    c = clip(f∘cI + i∘g)                       clip to [-cell_clip, cell_clip] when cell_clip > 0
    o = σ(x·Wx_o + hI·Wr_o + Wp_o∘c + b_o)     (the output peephole sees the new, clipped c)
    h = o∘tanh(c)

Wx [nIn, 4nOut], Wr [nOut, 4nOut], b [4nOut] or None (no bias), hI and cI [bS, nOut] or None
(zeros). Clipping passes no gradient to the elements it clips (|f∘cI + i∘g| >= cell_clip).

Projection (the time loops only; PyTorch's proj_size, an LSTMP): with Wproj [nOut, nProj] the
output is projected, h = (o∘tanh(c))·Wproj, and it is h that enters the next step. The state h
then has nProj columns where it has nOut without: Wr is [nProj, 4nOut]; hI, every step's h, hL,
dLdh, dLdhL, dLdhI and dLdWr are [..., nProj] ([nProj, 4nOut] for Wr); the cell state c, cI, cL,
dLdcL, dLdcI and the gates keep nOut. dL/dWproj = Σ mᵀ·dL/dh over every step, m = o∘tanh(c).

The activations σ, tanh, tanh are the defaults of libnd4j's gateAct (i, f and o), cellAct (g)
and outAct (tanh(c) in h); every function takes any of libnd4j's instead, by its code
(ACTIVATIONS: 0 tanh, 1 relu, 2 sigmoid, 3 affine α·z + β, 4 leaky relu (slope α below 0),
5 thresholded relu (z where z > α, else 0), 6 scaled tanh α·tanh(β·z), 7 hard sigmoid
min(1, max(0, 0.2·z + 0.5)), 8 ELU (α·(e^z - 1) below 0), 9 softsign z/(1 + |z|), 10 softplus
log(1 + e^z)) and its alpha and beta (used by the codes that name them): the keywords gate_act,
gate_alpha, gate_beta, cell_act, cell_alpha, cell_beta, out_act, out_alpha, out_beta. The
gradients use libnd4j's derivatives at the kinks (include/cells/activations_impl.h).

Sequences are time-major, x [sL, bS, nIn]. With seq_len [bS] (integers in [0, sL]) row b runs
only its first seq_len[b] time steps; its outputs after them are 0 and its final state is the
state after its last valid step (hI, cI when seq_len[b] = 0). forward=False runs each row's
valid steps from the last to the first (ONNX direction="reverse"); every output stays at its
own time index.

Every function takes float32 or float64 arrays of one dtype, in any memory order, and returns new
C-ordered arrays of that dtype (dLdWx and dLdWr F-ordered where Wx and Wr both are: PyTorch's
layout, which the CPU reads where it is). `n_threads` (None: as many as the call's steps gain from,
at most the cores) is the number of threads the call runs on (cells/_threads.py); a backward whose
weight gradients run on BLAS holds it at one thread meanwhile.
"""
import numbers
from typing import NamedTuple, Optional, Union

import numpy as np

from cells import _backend
from cells import _validate as check
from cells._families import lstm as family
from cells._families._declaration import kernel_clip
from cells._family_table import LSTM_ACTIVATIONS
from cells._prepared import (
    LstmState, PreparedNet, lstm_options, prepare_net, weights_option,
)
from cells._threads import check_n_threads

# libnd4j's activation codes, in order (include/cells/activations.h).
ACTIVATIONS = ("tanh", "relu", "sigmoid", "affine", "leaky_relu", "thresholded_relu",
               "scaled_tanh", "hard_sigmoid", "elu", "softsign", "softplus")
_CODES = ", ".join(f"{code} {name}" for code, name in enumerate(ACTIVATIONS))


class LstmWorkspace(NamedTuple):
    """What ``lstmLayerTimeLoop(..., return_workspace=True)`` keeps for
    :func:`lstmLayerTimeLoopBp`.

    Per step it holds 6nOut values per batch row (5nOut + 2nProj with Wproj), indexed by time
    (0 at a row's padded steps), and the configuration it was made with, which the backward
    checks against its own.

    The backward consumes it: to keep a training step's memory at the workspace, it overwrites
    the gates with gradients and leaves them read-only; a second backward pass needs a new forward
    pass (as PyTorch frees a graph's saved tensors in ``backward()``).

    Attributes
    ----------
    h : numpy.ndarray, [sL, bS, nOut]
        The outputs (nProj columns with Wproj).
    c : numpy.ndarray, [sL, bS, nOut]
        The cell states, after clipping.
    gates : numpy.ndarray, [sL, bS, 4nOut]
        The activated i, f, g, o (the pre-activation instead for a gate whose activation's
        derivative needs it: leaky and thresholded relu, scaled tanh, hard sigmoid, ELU,
        softplus).
    m : numpy.ndarray, [sL, bS, nOut], or None
        With Wproj, the outputs before the projection, o∘tanh(c).
    seq_len : numpy.ndarray of int64, [bS], or None
        The lengths it was made with.
    forward : bool
        The direction it was made with.
    cell_clip : float
    peepholes : bool
        Whether Wp was given.
    projected : bool
        Whether Wproj was given.
    activations : tuple
        ((gate_act, gate_alpha, gate_beta), (cell_act, ...), (out_act, ...)).
    """

    h: np.ndarray
    c: np.ndarray
    gates: np.ndarray
    m: Optional[np.ndarray]
    seq_len: Optional[np.ndarray]
    forward: bool
    cell_clip: float
    peepholes: bool
    projected: bool
    activations: tuple = LSTM_ACTIVATIONS


class LstmCellResult(NamedTuple):
    """What :func:`lstmLayerCell` returns.

    Attributes
    ----------
    h : numpy.ndarray, [bS, nOut]
    c : numpy.ndarray, [bS, nOut]
    """

    h: np.ndarray
    c: np.ndarray


class LstmTimeLoopResult(NamedTuple):
    """What :func:`lstmLayerTimeLoop` returns.

    Attributes
    ----------
    h : numpy.ndarray, [sL, bS, nOut]
        The output of every step ([sL, bS, nProj] with Wproj).
    hL : numpy.ndarray, [bS, nOut]
        The final output ([bS, nProj] with Wproj).
    cL : numpy.ndarray, [bS, nOut]
        The final cell state.
    """

    h: np.ndarray
    hL: np.ndarray
    cL: np.ndarray


class LstmTimeLoopWithWorkspace(NamedTuple):
    """What ``lstmLayerTimeLoop(..., return_workspace=True)`` returns.

    Attributes
    ----------
    h, hL, cL : numpy.ndarray
        As :class:`LstmTimeLoopResult`.
    workspace : LstmWorkspace
        For :func:`lstmLayerTimeLoopBp`.
    """

    h: np.ndarray
    hL: np.ndarray
    cL: np.ndarray
    workspace: LstmWorkspace


class LstmGrads(NamedTuple):
    """The gradients :func:`lstmLayerCellBp` and :func:`lstmLayerTimeLoopBp` return (summed
    over time for a time loop).

    Attributes
    ----------
    dLdx : numpy.ndarray or None
        x's shape; None with ``input_grad=False``.
    dLdWx : numpy.ndarray, [nIn, 4nOut]
    dLdWr : numpy.ndarray, [nOut, 4nOut]
    dLdb : numpy.ndarray, [4nOut], or None
        None when b is None.
    dLdhI, dLdcI : numpy.ndarray, [bS, nOut]
        Also when hI, cI are None (zeros).
    dLdWp : numpy.ndarray, [3nOut], or None
        None when Wp is None.
    """

    dLdx: np.ndarray
    dLdWx: np.ndarray
    dLdWr: np.ndarray
    dLdb: Optional[np.ndarray]
    dLdhI: np.ndarray
    dLdcI: np.ndarray
    dLdWp: Optional[np.ndarray]


class LstmGradsWithProjection(NamedTuple):
    """What :func:`lstmLayerTimeLoopBp` returns with Wproj.

    Attributes
    ----------
    dLdx, dLdWx, dLdb, dLdcI, dLdWp : numpy.ndarray
        As :class:`LstmGrads`.
    dLdWr : numpy.ndarray, [nProj, 4nOut]
    dLdhI : numpy.ndarray, [bS, nProj]
    dLdWproj : numpy.ndarray, [nOut, nProj]
    """

    dLdx: np.ndarray
    dLdWx: np.ndarray
    dLdWr: np.ndarray
    dLdb: Optional[np.ndarray]
    dLdhI: np.ndarray
    dLdcI: np.ndarray
    dLdWp: Optional[np.ndarray]
    dLdWproj: np.ndarray


def lstmLayerCell(x: np.ndarray, Wx: np.ndarray, Wr: np.ndarray, b: Optional[np.ndarray],
                  hI: Optional[np.ndarray], cI: Optional[np.ndarray], *,
                  Wp: Optional[np.ndarray] = None, cell_clip: float = 0.0, gate_act: int = 2,
                  gate_alpha: float = 0.0, gate_beta: float = 0.0, cell_act: int = 0,
                  cell_alpha: float = 0.0, cell_beta: float = 0.0, out_act: int = 0,
                  out_alpha: float = 0.0, out_beta: float = 0.0,
                  n_threads: Optional[int] = None) -> LstmCellResult:
    """One LSTM step (libnd4j's lstmLayerCell).

    Parameters
    ----------
    x : numpy.ndarray, [bS, nIn]
        The input, float32 or float64 (every array of the call has one dtype).
    Wx : numpy.ndarray, [nIn, 4nOut]
        Input weights, gate blocks (i, f, g, o).
    Wr : numpy.ndarray, [nOut, 4nOut]
        Recurrent weights, gate blocks (i, f, g, o) ([nProj, 4nOut] with Wproj).
    b : numpy.ndarray, [4nOut], or None
        The bias (None: none).
    hI, cI : numpy.ndarray, [bS, nOut], or None
        The initial output and cell state (None: zeros; hI is [bS, nProj] with Wproj).
    Wp : numpy.ndarray, [3nOut], optional
        Peephole weights, blocks (i, f, o): i and f see the previous c, o the new one.
    cell_clip : float, default 0.0
        When positive, c is clipped to [-cell_clip, cell_clip] (no gradient where clipped).
    gate_act, cell_act, out_act : int, default 2, 0, 0
        libnd4j's activation codes (:data:`cells.lstm.ACTIVATIONS`: 0 tanh, 1 relu, 2 sigmoid,
        3 affine, 4 leaky relu, 5 thresholded relu, 6 scaled tanh, 7 hard sigmoid, 8 ELU,
        9 softsign, 10 softplus) of the gates i, f, o, of the candidate g, and of c in h.
    gate_alpha, gate_beta, cell_alpha, cell_beta, out_alpha, out_beta : float, default 0.0
        The activations' alpha and beta (used by the codes that name them).
    n_threads : int, optional
        The threads the call runs on (1 to 256); None: as many as a step's work gains from
        (the Threads guide), at most ``OMP_NUM_THREADS`` when set, else the cores the process
        may use.

    Returns
    -------
    LstmCellResult
        ``(h, c)``, each [bS, nOut].

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
    >>> Wx, Wr = rng.normal(size=(nIn, 4 * nOut)), rng.normal(size=(nOut, 4 * nOut))
    >>> b = np.zeros(4 * nOut)
    >>> h, c = cells.lstmLayerCell(rng.normal(size=(bS, nIn)), Wx, Wr, b, None, None)
    >>> h.shape, c.shape
    ((2, 4), (2, 4))
    """
    clip = check.cell_clip(cell_clip)
    acts = _activations(gate_act, gate_alpha, gate_beta, cell_act, cell_alpha, cell_beta,
                        out_act, out_alpha, out_beta)
    dims = _check_lstm(x, Wx, Wr, b, hI, cI, Wp, None, x_ndim=2)
    _, hL, cL, _, _, _ = family.forward(_backend.of(x), dims, x[None], Wx, Wr, b, hI, cI, Wp, None,
                                        clip, None, True, False, check_n_threads(n_threads), acts)
    return LstmCellResult(hL, cL)


def lstmLayerCellBp(x: np.ndarray, Wx: np.ndarray, Wr: np.ndarray, b: Optional[np.ndarray],
                    hI: Optional[np.ndarray], cI: Optional[np.ndarray], dLdh: Optional[np.ndarray],
                    dLdc: Optional[np.ndarray], *,
                    Wp: Optional[np.ndarray] = None, cell_clip: float = 0.0, gate_act: int = 2,
                    gate_alpha: float = 0.0, gate_beta: float = 0.0, cell_act: int = 0,
                    cell_alpha: float = 0.0, cell_beta: float = 0.0, out_act: int = 0,
                    out_alpha: float = 0.0, out_beta: float = 0.0,
                    n_threads: Optional[int] = None) -> LstmGrads:
    """Gradients of one LSTM step (the forward pass is recomputed).

    Parameters
    ----------
    x, Wx, Wr, b, hI, cI
        As :func:`lstmLayerCell`.
    dLdh, dLdc : numpy.ndarray, [bS, nOut], or None
        The gradients arriving at the outputs h and c (None: no gradient there).
    Wp, cell_clip, gate_act, ..., out_beta
        As :func:`lstmLayerCell`.
    n_threads : int, optional
        The threads the call runs on (1 to 256); None: as many as a step's work gains from
        (the Threads guide), at most ``OMP_NUM_THREADS`` when set, else the cores the process
        may use.

    Returns
    -------
    LstmGrads
        ``(dLdx, dLdWx, dLdWr, dLdb, dLdhI, dLdcI, dLdWp)``: dLdx [bS, nIn], dLdWx [nIn, 4nOut],
        dLdWr [nOut, 4nOut], dLdb [4nOut] (None when b is None), dLdhI and dLdcI [bS, nOut]
        (also when hI, cI are None), dLdWp [3nOut] (None when Wp is None).

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
    >>> Wx, Wr = rng.normal(size=(nIn, 4 * nOut)), rng.normal(size=(nOut, 4 * nOut))
    >>> b = np.zeros(4 * nOut)
    >>> g = cells.lstmLayerCellBp(rng.normal(size=(bS, nIn)), Wx, Wr, b, None, None,
    ...                           np.ones((bS, nOut)), None)
    >>> g.dLdWr.shape, g.dLdWp is None
    ((4, 16), True)
    """
    clip = check.cell_clip(cell_clip)
    acts = _activations(gate_act, gate_alpha, gate_beta, cell_act, cell_alpha, cell_beta,
                        out_act, out_alpha, out_beta)
    dims = _check_lstm(x, Wx, Wr, b, hI, cI, Wp, None, x_ndim=2, dLdh=dLdh, dLdc=dLdc)
    _, bS, _, nOut = dims
    for name, g in (("dLdh", dLdh), ("dLdc", dLdc)):
        if g is not None:
            check.shape(name, g, (bS, nOut), "[bS, nOut]")
    dLdx, *grads, _ = family.backward(_backend.of(x), dims, x[None], Wx, Wr, b, hI, cI, Wp, None,
                                      clip, None, True, None, None, dLdh, dLdc,
                                      check_n_threads(n_threads), acts)
    return LstmGrads(dLdx[0], *grads)


def lstmLayerTimeLoop(x: np.ndarray, Wx: np.ndarray, Wr: np.ndarray, b: Optional[np.ndarray],
                      hI: Optional[np.ndarray], cI: Optional[np.ndarray], *,
                      Wp: Optional[np.ndarray] = None, Wproj: Optional[np.ndarray] = None,
                      seq_len: Optional[np.ndarray] = None, cell_clip: float = 0.0,
                      gate_act: int = 2, gate_alpha: float = 0.0, gate_beta: float = 0.0,
                      cell_act: int = 0, cell_alpha: float = 0.0, cell_beta: float = 0.0,
                      out_act: int = 0, out_alpha: float = 0.0, out_beta: float = 0.0,
                      forward: bool = True, return_workspace: bool = False,
                      n_threads: Optional[int] = None
                      ) -> Union[LstmTimeLoopResult, LstmTimeLoopWithWorkspace]:
    """An LSTM over a sequence (libnd4j's lstmLayer time loop).

    Parameters
    ----------
    x : numpy.ndarray, [sL, bS, nIn]
        The inputs, time-major (as libnd4j); float32 or float64.
    Wx : numpy.ndarray, [nIn, 4nOut]
        Input weights, gate blocks (i, f, g, o).
    Wr : numpy.ndarray, [nOut, 4nOut]
        Recurrent weights, gate blocks (i, f, g, o) ([nProj, 4nOut] with Wproj).
    b : numpy.ndarray, [4nOut], or None
        The bias (None: none).
    hI, cI : numpy.ndarray, [bS, nOut], or None
        The initial output and cell state (None: zeros; hI is [bS, nProj] with Wproj).
    Wproj : numpy.ndarray, [nOut, nProj], optional
        Projects the output, h = (o∘tanh(c))·Wproj (PyTorch's ``proj_size``); the projected h
        enters the next step.
    seq_len : numpy.ndarray of int, [bS], optional
        Row b runs only its first ``seq_len[b]`` steps (in [0, sL]); its outputs after them are 0
        and its final state is the state after its last valid step. None: every row runs sL.
    forward : bool, default True
        False runs each row's valid steps in reverse time order, each output at its own time
        index (ONNX ``direction="reverse"``).
    Wp, cell_clip, gate_act, ..., out_beta
        As :func:`lstmLayerCell`.
    return_workspace : bool, default False
        Also return the :class:`LstmWorkspace` that lets :func:`lstmLayerTimeLoopBp` skip
        recomputing this forward pass.
    n_threads : int, optional
        The threads the call runs on (1 to 256); None: as many as a step's work gains from
        (the Threads guide), at most ``OMP_NUM_THREADS`` when set, else the cores the process
        may use.

    Returns
    -------
    LstmTimeLoopResult
        ``(h, hL, cL)``: h [sL, bS, nOut] the output of every step, hL and cL [bS, nOut] the
        final states (h [sL, bS, nProj] and hL [bS, nProj] with Wproj).
    LstmTimeLoopWithWorkspace
        ``(h, hL, cL, workspace)`` instead, with ``return_workspace=True``.

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
    >>> Wx, Wr = rng.normal(size=(nIn, 4 * nOut)), rng.normal(size=(nOut, 4 * nOut))
    >>> b = np.zeros(4 * nOut)
    >>> h, hL, cL = cells.lstmLayerTimeLoop(rng.normal(size=(5, bS, nIn)), Wx, Wr, b, None, None)
    >>> h.shape, hL.shape
    ((5, 2, 4), (2, 4))
    """
    clip = check.cell_clip(cell_clip)
    acts = _activations(gate_act, gate_alpha, gate_beta, cell_act, cell_alpha, cell_beta,
                        out_act, out_alpha, out_beta)
    fwd = check.flag("forward", forward)
    keep = check.flag("return_workspace", return_workspace)
    dims = _check_lstm(x, Wx, Wr, b, hI, cI, Wp, Wproj, x_ndim=3)
    lengths = check.seq_len(seq_len, dims[0], dims[1], x)
    h, hL, cL, c, gates, m = family.forward(_backend.of(x), dims, x, Wx, Wr, b, hI, cI, Wp, Wproj,
                                            clip, lengths, fwd, keep, check_n_threads(n_threads),
                                            acts)
    if not keep:
        return LstmTimeLoopResult(h, hL, cL)
    ws = LstmWorkspace(h, c, gates, m, None if lengths is None else lengths.copy(), fwd, clip,
                       Wp is not None, Wproj is not None, acts)
    return LstmTimeLoopWithWorkspace(h, hL, cL, ws)


def lstmLayerTimeLoopBp(x: np.ndarray, Wx: np.ndarray, Wr: np.ndarray, b: Optional[np.ndarray],
                        hI: Optional[np.ndarray], cI: Optional[np.ndarray],
                        dLdh: Optional[np.ndarray], *,
                        dLdhL: Optional[np.ndarray] = None, dLdcL: Optional[np.ndarray] = None,
                        Wp: Optional[np.ndarray] = None, Wproj: Optional[np.ndarray] = None,
                        seq_len: Optional[np.ndarray] = None, cell_clip: float = 0.0,
                        gate_act: int = 2, gate_alpha: float = 0.0, gate_beta: float = 0.0,
                        cell_act: int = 0, cell_alpha: float = 0.0, cell_beta: float = 0.0,
                        out_act: int = 0, out_alpha: float = 0.0, out_beta: float = 0.0,
                        forward: bool = True, workspace: Optional[LstmWorkspace] = None,
                        input_grad: bool = True, n_threads: Optional[int] = None
                        ) -> Union[LstmGrads, LstmGradsWithProjection]:
    """Backpropagation through time for :func:`lstmLayerTimeLoop`.

    Called with the forward pass's arguments and options.

    Parameters
    ----------
    x, Wx, Wr, b, hI, cI, Wp, Wproj, seq_len, forward
        As :func:`lstmLayerTimeLoop`.
    dLdh : numpy.ndarray, [sL, bS, nOut], or None
        The gradient arriving at every step's output ([sL, bS, nProj] with Wproj).
    dLdhL, dLdcL : numpy.ndarray, [bS, nOut], optional
        The gradients arriving at the final states (dLdhL [bS, nProj] with Wproj).
    cell_clip, gate_act, ..., out_beta
        As :func:`lstmLayerCell`.
    workspace : LstmWorkspace, optional
        From ``lstmLayerTimeLoop(..., return_workspace=True)`` on the same inputs and options:
        skips recomputing the forward pass. The backward consumes it.
    input_grad : bool, default True
        False skips dL/dx (``dLdx`` is then None), for a first layer whose input needs no
        gradient.
    n_threads : int, optional
        The threads the call runs on (1 to 256); None: as many as a step's work gains from
        (the Threads guide), at most ``OMP_NUM_THREADS`` when set, else the cores the process
        may use.

    Returns
    -------
    LstmGrads
        ``(dLdx, dLdWx, dLdWr, dLdb, dLdhI, dLdcI, dLdWp)`` as :func:`lstmLayerCellBp`'s, dLdx
        [sL, bS, nIn]; the weight gradients summed over time.
    LstmGradsWithProjection
        With Wproj: the same, and ``dLdWproj`` [nOut, nProj].

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
    >>> Wx, Wr = rng.normal(size=(nIn, 4 * nOut)), rng.normal(size=(nOut, 4 * nOut))
    >>> b = np.zeros(4 * nOut)
    >>> x = rng.normal(size=(5, bS, nIn))
    >>> h, hL, cL, ws = cells.lstmLayerTimeLoop(x, Wx, Wr, b, None, None, return_workspace=True)
    >>> g = cells.lstmLayerTimeLoopBp(x, Wx, Wr, b, None, None, np.ones_like(h), workspace=ws)
    >>> g.dLdx.shape, g.dLdb.shape
    ((5, 2, 3), (16,))
    """
    clip = check.cell_clip(cell_clip)
    acts = _activations(gate_act, gate_alpha, gate_beta, cell_act, cell_alpha, cell_beta,
                        out_act, out_alpha, out_beta)
    fwd = check.flag("forward", forward)
    input_grad = check.flag("input_grad", input_grad)
    dims = _check_lstm(x, Wx, Wr, b, hI, cI, Wp, Wproj, x_ndim=3, dLdh=dLdh,
                       dLdhL=dLdhL, dLdcL=dLdcL)
    sL, bS, _, nOut = dims
    if Wproj is None:
        check.output_grads(sL, bS, nOut, dLdh, dLdhL=dLdhL, dLdcL=dLdcL)
    else:
        check.output_grads(sL, bS, Wproj.shape[1], dLdh, "nProj", dLdhL=dLdhL)
        check.output_grads(sL, bS, nOut, None, dLdcL=dLdcL)
    lengths = check.seq_len(seq_len, sL, bS, x)
    saved = None
    if workspace is not None:
        _check_workspace(workspace, dims, x, lengths, fwd, clip, Wp, Wproj, acts)
        saved = workspace.h, workspace.c, workspace.gates, workspace.m
    *grads, dLdWproj = family.backward(_backend.of(x), dims, x, Wx, Wr, b, hI, cI, Wp, Wproj, clip,
                                       lengths, fwd, saved, dLdh, dLdhL, dLdcL,
                                       check_n_threads(n_threads), acts, input_grad)
    if Wproj is None:
        return LstmGrads(*grads)
    return LstmGradsWithProjection(*grads, dLdWproj)


def prepare(Wx: np.ndarray, Wr: np.ndarray, b: Optional[np.ndarray], *,
            Wp: Optional[np.ndarray] = None, Wproj: Optional[np.ndarray] = None,
            cell_clip: float = 0.0, gate_act: int = 2, gate_alpha: float = 0.0,
            gate_beta: float = 0.0, cell_act: int = 0, cell_alpha: float = 0.0,
            cell_beta: float = 0.0, out_act: int = 0, out_alpha: float = 0.0,
            out_beta: float = 0.0, n_threads: Optional[int] = None,
            weights: Optional[str] = None) -> PreparedNet:
    """Prepare an LSTM's weights for many inference calls (serving): validated and packed
    once.

    Parameters
    ----------
    Wx : numpy.ndarray, [nIn, 4nOut]
    Wr : numpy.ndarray, [nOut, 4nOut] ([nProj, 4nOut] with Wproj)
        As lstmLayerTimeLoop takes them, gates (i, f, g, o); float32 or float64, one dtype
        (both F-ordered, PyTorch's layout transposed, is read without a transposing copy).
    b : numpy.ndarray, [4nOut], or None
    Wp : numpy.ndarray, [3nOut], or None
        Peepholes (i, f, o).
    Wproj : numpy.ndarray, [nOut, nProj], or None
        The output's projection (PyTorch's proj_size): the state h is then [bS, nProj].
    cell_clip, gate_act, ..., out_beta
        As lstmLayerTimeLoop (the module docstring lists the activation codes).
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
        ``h, state = net(x, state)`` with state an LstmState (h [bS, nState], c [bS, nOut]).

    Raises
    ------
    TypeError
        An argument that is not a float32/float64 NumPy array (or None where allowed), of
        another dtype than Wx, or an option of the wrong kind; float64 weights with
        ``weights="int8"`` or ``"bfloat16"``.
    ValueError
        Shapes that do not fit together, nIn, nOut or nProj of 0, an option out of range
        (an unknown ``weights``).

    Examples
    --------
    >>> import numpy as np, cells
    >>> rng = np.random.default_rng(0)
    >>> Wx, Wr = rng.normal(size=(3, 8)), rng.normal(size=(2, 8))
    >>> net = cells.lstm.prepare(Wx, Wr, np.zeros(8))
    >>> h, state = net(rng.normal(size=(4, 1, 3)))       # a chunk of 4 steps, bS = 1
    >>> h, state = net(rng.normal(size=(1, 3)), state)   # then one step
    >>> h.shape, state.c.shape
    ((1, 2), (1, 2))
    """
    clip = check.cell_clip(cell_clip)
    acts = _activations(gate_act, gate_alpha, gate_beta, cell_act, cell_alpha, cell_beta,
                        out_act, out_alpha, out_beta)
    options = lstm_options(clip, acts, check_n_threads(n_threads), weights_option(weights))
    check.numpy_weights(Wx=Wx, Wr=Wr, **{name: a for name, a in
                                         (("b", b), ("Wp", Wp), ("Wproj", Wproj))
                                         if a is not None})
    check.ndim("Wx", Wx, 2, "[nIn, 4*nOut]")
    x, = check.no_inputs(Wx.dtype, Wx.shape[0])
    _, _, nIn, nOut = _check_lstm(x, Wx, Wr, b, None, None, Wp, Wproj, x_ndim=3)
    return prepare_net("lstm", LstmState, options, "lstm", nIn, nOut, Wx.dtype, Wx=Wx, Wh=Wr,
                       b=b, P=Wp, Wproj=Wproj, clip=kernel_clip(clip), lstm_acts=acts)


# ---------------------------------------------------------------------------------------------
# Validation
# ---------------------------------------------------------------------------------------------

def _activations(gate_act, gate_alpha, gate_beta, cell_act, cell_alpha, cell_beta, out_act,
                 out_alpha, out_beta):
    """The activations ((code, alpha, beta) of the gates, the candidate, the output) from their
    keywords."""
    return (activation("gate_act", gate_act, "gate_alpha", gate_alpha, "gate_beta", gate_beta),
            activation("cell_act", cell_act, "cell_alpha", cell_alpha, "cell_beta", cell_beta),
            activation("out_act", out_act, "out_alpha", out_alpha, "out_beta", out_beta))


def activation(code_name, code, alpha_name, alpha, beta_name, beta):
    """(code, alpha, beta) of one activation, checked: the code an int of ACTIVATIONS, alpha
    and beta real numbers; the names are the arguments' (for the messages)."""
    # (int and float first: the common case needs no check against the numbers ABCs, a few µs
    # of every call)
    if isinstance(code, (bool, np.bool_)) or not isinstance(code, (int, numbers.Integral)):
        raise TypeError(f"{code_name}: expected an activation code, an int ({_CODES}), "
                        f"got {code!r}")
    if not 0 <= code < len(ACTIVATIONS):
        raise ValueError(f"{code_name}: expected an activation code in "
                         f"[0, {len(ACTIVATIONS) - 1}] ({_CODES}), got {code}")
    for name, value in ((alpha_name, alpha), (beta_name, beta)):
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (float, int,
                                                                         numbers.Real)):
            raise TypeError(f"{name}: expected a float, got {value!r}")
    return int(code), float(alpha), float(beta)


def _check_lstm(x, Wx, Wr, b, hI, cI, Wp, Wproj, x_ndim, **grads):
    """Check every array against x [sL, bS, nIn] (or [bS, nIn]) and Wr [nOut, 4nOut] (or, with
    Wproj [nOut, nProj], Wr [nProj, 4nOut]); return (sL, bS, nIn, nOut), with
    sL = 1 for a cell."""
    check.real_arrays(optional=("b", "hI", "cI", "Wp", "Wproj", *grads), x=x, Wx=Wx,
                      Wr=Wr, b=b, hI=hI, cI=cI, Wp=Wp, Wproj=Wproj, **grads)
    check.ndim("x", x, x_ndim, "[sL, bS, nIn]" if x_ndim == 3 else "[bS, nIn]")
    sL, bS, nIn = x.shape if x_ndim == 3 else (1,) + x.shape
    if Wproj is None:
        check.ndim("Wr", Wr, 2, "[nOut, 4*nOut]")
        nOut = nState = Wr.shape[0]
        check.shape("Wr", Wr, (nOut, 4 * nOut), "[nOut, 4*nOut]")
        state = "[bS, nOut] (bS from x, nOut from Wr)"
    else:
        check.ndim("Wproj", Wproj, 2, "[nOut, nProj]")
        nOut, nState = Wproj.shape
        check.shape("Wr", Wr, (nState, 4 * nOut), "[nProj, 4*nOut] (nOut, nProj from Wproj)")
        state = "[bS, nProj] (bS from x, nProj from Wproj)"
    source = "Wr" if Wproj is None else "Wproj"
    check.shape("Wx", Wx, (nIn, 4 * nOut), f"[nIn, 4*nOut] (nIn from x, nOut from {source})")
    if b is not None:
        check.shape("b", b, (4 * nOut,), f"[4*nOut] (nOut from {source})")
    if hI is not None:
        check.shape("hI", hI, (bS, nState), state)
    if cI is not None:
        check.shape("cI", cI, (bS, nOut), f"[bS, nOut] (bS from x, nOut from {source})")
    if Wp is not None:
        check.shape("Wp", Wp, (3 * nOut,), f"[3*nOut] (nOut from {source})")
    check.gemm_dims(**{"sL*bS": sL * bS, "nIn": nIn, "4*nOut": 4 * nOut})
    return sL, bS, nIn, nOut


def _check_workspace(ws, dims, x, lengths, fwd, clip, Wp, Wproj, acts):
    sL, bS, _, nOut = dims
    nState = nOut if Wproj is None else Wproj.shape[1]
    arrays = {"h": (sL, bS, nState), "c": (sL, bS, nOut), "gates": (sL, bS, 4 * nOut)}
    if Wproj is not None:
        arrays["m"] = (sL, bS, nOut)
    check.workspace(ws, LstmWorkspace, "lstmLayerTimeLoopBp", x, "x, Wr and Wproj", arrays,
                    ("gates",), seq_len=lengths, forward=fwd, cell_clip=clip,
                    peepholes=Wp is not None, projected=Wproj is not None, activations=acts)

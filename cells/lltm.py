"""LLTM: PyTorch's C++-extension tutorial cell (lltm_forward, lltm_backward) and its sequence
version (lltmTimeLoop, lltmTimeLoopBp).

S = nOut units; the weights are PyTorch's Linear layout W [3S, S+nIn] on X = [h, x] (h first),
b [3S], gate blocks (input, output, candidate):

    z = X·Wᵀ + b,  i = σ(z0),  o = σ(z1),  n = elu(z2) (α = 1),
    c' = c + n∘i,  h' = tanh(c')∘o

Backward (g = dL/dh', dc = dL/dc'): dĉ = g∘o∘(1 - tanh²c') + dc; dz0 = dĉ∘n∘i(1-i);
dz1 = g∘tanh(c')∘o(1-o); dz2 = dĉ∘i∘elu'(z2) with elu'(z) = 1 (z > 0), α·e^z (z <= 0), the value
PyTorch autograd gives at z = 0 too; dX = dz·W, dW = dzᵀ·X, db = Σ_b dz, dL/dc = dĉ.

Every function takes float32 or float64 arrays of one dtype, in any memory order (read-only is
fine), and returns new C-ordered arrays of that dtype. `n_threads` (None: as many as the call's
steps gain from, at most the cores) is the number of threads the call runs on (cells/_threads.py);
a backward whose weight gradients run on BLAS holds it at one thread meanwhile.
"""
from typing import NamedTuple, Optional, Union

import numpy as np

from cells import _arrays, _backend
from cells import _validate as check
from cells._families import lltm as family
from cells._prepared import LltmState, PreparedNet, prepare_net, weights_option
from cells._threads import check_n_threads


class LltmWorkspace(NamedTuple):
    """What ``lltmTimeLoop(..., return_workspace=True)`` keeps for :func:`lltmTimeLoopBp`.

    5·S values per batch row and step, indexed by the time index of x and 0 at padded
    positions, and the options it was made with, which the backward checks against its own.

    The backward consumes it: to keep a training step's memory at the workspace, it overwrites
    the gates with gradients and leaves them read-only; a second backward pass needs a new forward
    pass (as PyTorch frees a graph's saved tensors in ``backward()``).

    Attributes
    ----------
    h : numpy.ndarray, [sL, bS, S]
        The outputs (the array lltmTimeLoop returns).
    gates : numpy.ndarray, [sL, bS, 3S]
        The activated gates i, o and the candidate n = elu(z2).
    c : numpy.ndarray, [sL, bS, S]
        The cell state after every step.
    seq_len : numpy.ndarray of int64, [bS], or None
        The lengths it was made with.
    forward : bool
        The direction it was made with.
    """

    h: np.ndarray
    gates: np.ndarray
    c: np.ndarray
    seq_len: Optional[np.ndarray]
    forward: bool


class LltmCellResult(NamedTuple):
    """What :func:`lltm_forward` returns.

    Attributes
    ----------
    new_h, new_cell : numpy.ndarray, [B, S]
    input_gate, output_gate, candidate_cell : numpy.ndarray, [B, S]
    X : numpy.ndarray, [B, S+nIn]
        [old_h, input].
    gate_weights : numpy.ndarray, [B, 3S]
        The pre-activations.
    """

    new_h: np.ndarray
    new_cell: np.ndarray
    input_gate: np.ndarray
    output_gate: np.ndarray
    candidate_cell: np.ndarray
    X: np.ndarray
    gate_weights: np.ndarray


class LltmCellGrads(NamedTuple):
    """The gradients :func:`lltm_backward` returns.

    Attributes
    ----------
    d_old_h : numpy.ndarray, [B, S]
    d_input : numpy.ndarray, [B, nIn]
    d_weights : numpy.ndarray, [3S, S+nIn]
    d_bias : numpy.ndarray, [3S]
    d_old_cell : numpy.ndarray, [B, S]
    """

    d_old_h: np.ndarray
    d_input: np.ndarray
    d_weights: np.ndarray
    d_bias: np.ndarray
    d_old_cell: np.ndarray


class LltmTimeLoopResult(NamedTuple):
    """What :func:`lltmTimeLoop` returns.

    Attributes
    ----------
    h : numpy.ndarray, [sL, bS, S]
        Every step's output.
    hL, cL : numpy.ndarray, [bS, S]
        The final states.
    """

    h: np.ndarray
    hL: np.ndarray
    cL: np.ndarray


class LltmTimeLoopWithWorkspace(NamedTuple):
    """What ``lltmTimeLoop(..., return_workspace=True)`` returns.

    Attributes
    ----------
    h, hL, cL : numpy.ndarray
        As :class:`LltmTimeLoopResult`.
    workspace : LltmWorkspace
        For :func:`lltmTimeLoopBp`.
    """

    h: np.ndarray
    hL: np.ndarray
    cL: np.ndarray
    workspace: LltmWorkspace


class LltmGrads(NamedTuple):
    """The gradients :func:`lltmTimeLoopBp` returns, the weights' summed over time.

    Attributes
    ----------
    dLdx : numpy.ndarray, [sL, bS, nIn], or None
        None with ``input_grad=False``.
    dLdW : numpy.ndarray, [3S, S+nIn]
    dLdb : numpy.ndarray, [3S]
    dLdhI, dLdcI : numpy.ndarray, [bS, S]
    """

    dLdx: np.ndarray
    dLdW: np.ndarray
    dLdb: np.ndarray
    dLdhI: np.ndarray
    dLdcI: np.ndarray


# ---------------------------------------------------------------------------------------------
# The tutorial's cell
# ---------------------------------------------------------------------------------------------

def lltm_forward(input: np.ndarray, weights: np.ndarray, bias: np.ndarray, old_h: np.ndarray,
                 old_cell: np.ndarray, *, n_threads: Optional[int] = None) -> LltmCellResult:
    """One LLTM step, as the PyTorch tutorial's ``lltm_forward``.

    Parameters
    ----------
    input : numpy.ndarray, [B, nIn]
        float32 or float64 (every array of the call has one dtype).
    weights : numpy.ndarray, [3S, S+nIn]
        PyTorch's Linear layout on X = [old_h, input]; gate blocks (input, output, candidate).
    bias : numpy.ndarray, [3S]
    old_h, old_cell : numpy.ndarray, [B, S]
        The previous output and cell state.
    n_threads : int, optional
        The threads the call runs on (1 to 256); None: as many as a step's work gains from
        (the Threads guide), at most ``OMP_NUM_THREADS`` when set, else the cores the process
        may use.

    Returns
    -------
    LltmCellResult
        ``(new_h, new_cell, input_gate, output_gate, candidate_cell, X, gate_weights)``: the
        first five [B, S]; X = [old_h, input] [B, S+nIn]; gate_weights = X·weightsᵀ + bias
        [B, 3S], the pre-activations.

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
    >>> B, nIn, S = 2, 3, 4
    >>> W, bias = rng.normal(size=(3 * S, S + nIn)), np.zeros(3 * S)
    >>> out = cells.lltm_forward(rng.normal(size=(B, nIn)), W, bias, np.zeros((B, S)),
    ...                          np.zeros((B, S)))
    >>> out.new_h.shape, out.X.shape
    ((2, 4), (2, 7))
    """
    dims = _check_lltm(_CELL_NAMES, 2, input, weights, bias, old_h, old_cell)
    _, B, _, S = dims
    gate_weights = _arrays.array_module(input).empty((B, 3 * S), input.dtype)
    _, new_h, new_cell, gates, _ = family.forward(_backend.of(input), dims, input[None], weights,
                                                  bias, old_h, old_cell, None, True, True,
                                                  check_n_threads(n_threads), z=gate_weights)
    i, o, n = (gates[0, :, k * S:(k + 1) * S].copy() for k in range(3))
    X = np.concatenate([old_h, input], axis=1)
    return LltmCellResult(new_h, new_cell, i, o, n, X, gate_weights)


def lltm_backward(grad_h: np.ndarray, grad_cell: np.ndarray, new_cell: np.ndarray,
                  input_gate: np.ndarray, output_gate: np.ndarray, candidate_cell: np.ndarray,
                  X: np.ndarray, gate_weights: np.ndarray, weights: np.ndarray, *,
                  n_threads: Optional[int] = None) -> LltmCellGrads:
    """Gradients of one LLTM step, as the tutorial's ``lltm_backward`` (without its mistakes).

    elu'(z2) is taken from candidate_cell n = elu(z2): n + 1 = e^z2 where n <= 0, 1 where n > 0
    (1 at z2 = 0, as PyTorch's autograd). gate_weights is checked for shape only.

    Parameters
    ----------
    grad_h, grad_cell : numpy.ndarray, [B, S]
        The gradients arriving at new_h and new_cell.
    new_cell, input_gate, output_gate, candidate_cell, X, gate_weights
        :func:`lltm_forward`'s outputs.
    weights : numpy.ndarray, [3S, S+nIn]
    n_threads : int, optional
        The threads the call runs on (1 to 256); None: as many as a step's work gains from
        (the Threads guide), at most ``OMP_NUM_THREADS`` when set, else the cores the process
        may use.

    Returns
    -------
    LltmCellGrads
        ``(d_old_h, d_input, d_weights, d_bias, d_old_cell)``: d_old_h [B, S], d_input [B, nIn],
        d_weights [3S, S+nIn], d_bias [3S], d_old_cell [B, S].

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
    >>> B, nIn, S = 2, 3, 4
    >>> W, bias = rng.normal(size=(3 * S, S + nIn)), np.zeros(3 * S)
    >>> f = cells.lltm_forward(rng.normal(size=(B, nIn)), W, bias, np.zeros((B, S)),
    ...                        np.zeros((B, S)))
    >>> g = cells.lltm_backward(np.ones((B, S)), np.zeros((B, S)), *f[1:], W)
    >>> g.d_weights.shape
    (12, 7)
    """
    check.real_arrays(grad_h=grad_h, grad_cell=grad_cell, new_cell=new_cell,
                      input_gate=input_gate, output_gate=output_gate,
                      candidate_cell=candidate_cell, X=X, gate_weights=gate_weights,
                      weights=weights)
    check.ndim("grad_h", grad_h, 2, "[B, S]")
    check.ndim("X", X, 2, "[B, S+nIn]")
    B, S = grad_h.shape
    if X.shape[0] != B or X.shape[1] < S:
        raise ValueError(f"X: expected shape (B, S+nIn) with B = {B}, S = {S} (from grad_h) "
                         f"and nIn >= 0, got {X.shape}")
    nIn = X.shape[1] - S
    for name, a in (("grad_cell", grad_cell), ("new_cell", new_cell),
                    ("input_gate", input_gate), ("output_gate", output_gate),
                    ("candidate_cell", candidate_cell)):
        check.shape(name, a, (B, S), "[B, S] (from grad_h)")
    check.shape("gate_weights", gate_weights, (B, 3 * S), "[B, 3S]")
    check.shape("weights", weights, (3 * S, S + nIn), "[3S, S+nIn]")
    check.gemm_dims(**{"B": B, "S+nIn": S + nIn, "3S": 3 * S})
    dims = (1, B, nIn, S)
    hI = X[:, :S]
    gates = np.concatenate([input_gate, output_gate, candidate_cell], axis=1)[None]
    # h (the outputs of earlier steps) is never read with one step: hI stands in for it.
    saved = hI, gates, new_cell[None]
    dLdx, dLdW, dLdb, dLdhI, dLdcI = family.backward(_backend.of(X), dims, X[None, :, S:], weights,
                                                     hI, None, True, saved, None, grad_h, grad_cell,
                                                     check_n_threads(n_threads))
    return LltmCellGrads(dLdhI, dLdx[0], dLdW, dLdb, dLdcI)


# ---------------------------------------------------------------------------------------------
# Sequences
# ---------------------------------------------------------------------------------------------

def lltmTimeLoop(x: np.ndarray, W: np.ndarray, b: np.ndarray, hI: np.ndarray, cI: np.ndarray, *,
                 seq_len: Optional[np.ndarray] = None, forward: bool = True,
                 return_workspace: bool = False, n_threads: Optional[int] = None
                 ) -> Union[LltmTimeLoopResult, LltmTimeLoopWithWorkspace]:
    """An LLTM over a sequence.

    Parameters
    ----------
    x : numpy.ndarray, [sL, bS, nIn]
        The inputs, time-major; float32 or float64.
    W : numpy.ndarray, [3S, S+nIn]
        As :func:`lltm_forward`'s weights.
    b : numpy.ndarray, [3S]
    hI, cI : numpy.ndarray, [bS, S]
        The initial output and cell state.
    seq_len : numpy.ndarray of int, [bS], optional
        Row b runs only its first ``seq_len[b]`` steps (in [0, sL]); its outputs after them are 0
        and its final state is the state after its last valid step. None: every row runs sL.
    forward : bool, default True
        False runs each row's valid steps in reverse time order, each output at its own time
        index (ONNX ``direction="reverse"``).
    return_workspace : bool, default False
        Also return the :class:`LltmWorkspace` that lets :func:`lltmTimeLoopBp` skip
        recomputing this forward pass.
    n_threads : int, optional
        The threads the call runs on (1 to 256); None: as many as a step's work gains from
        (the Threads guide), at most ``OMP_NUM_THREADS`` when set, else the cores the process
        may use.

    Returns
    -------
    LltmTimeLoopResult
        ``(h, hL, cL)``: h [sL, bS, S] every step's output, hL and cL [bS, S] the final states.
    LltmTimeLoopWithWorkspace
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
    >>> B, nIn, S = 2, 3, 4
    >>> W, bias = rng.normal(size=(3 * S, S + nIn)), np.zeros(3 * S)
    >>> h, hL, cL = cells.lltmTimeLoop(rng.normal(size=(5, B, nIn)), W, bias, np.zeros((B, S)),
    ...                                np.zeros((B, S)))
    >>> h.shape, cL.shape
    ((5, 2, 4), (2, 4))
    """
    fwd = check.flag("forward", forward)
    keep = check.flag("return_workspace", return_workspace)
    dims = _check_lltm(_SEQ_NAMES, 3, x, W, b, hI, cI)
    lens = check.seq_len(seq_len, dims[0], dims[1], x)
    h, hL, cL, gates, c = family.forward(_backend.of(x), dims, x, W, b, hI, cI, lens, fwd, keep,
                                         check_n_threads(n_threads))
    if not keep:
        return LltmTimeLoopResult(h, hL, cL)
    ws = LltmWorkspace(h, gates, c, None if lens is None else lens.copy(), fwd)
    return LltmTimeLoopWithWorkspace(h, hL, cL, ws)


def lltmTimeLoopBp(x: np.ndarray, W: np.ndarray, b: np.ndarray, hI: np.ndarray, cI: np.ndarray,
                   dLdh: Optional[np.ndarray], *, dLdhL: Optional[np.ndarray] = None,
                   dLdcL: Optional[np.ndarray] = None, seq_len: Optional[np.ndarray] = None,
                   forward: bool = True, workspace: Optional[LltmWorkspace] = None,
                   input_grad: bool = True, n_threads: Optional[int] = None) -> LltmGrads:
    """Backpropagation through time for :func:`lltmTimeLoop`.

    Called with the forward pass's arguments and options.

    Parameters
    ----------
    x, W, b, hI, cI, seq_len, forward
        As :func:`lltmTimeLoop`.
    dLdh : numpy.ndarray, [sL, bS, S], or None
        The gradient arriving at every step's output.
    dLdhL, dLdcL : numpy.ndarray, [bS, S], optional
        The gradients arriving at the final states.
    workspace : LltmWorkspace, optional
        From ``lltmTimeLoop(..., return_workspace=True)`` on the same inputs and options: skips
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
    LltmGrads
        ``(dLdx, dLdW, dLdb, dLdhI, dLdcI)``: dLdx [sL, bS, nIn], dLdW [3S, S+nIn], dLdb [3S],
        dLdhI and dLdcI [bS, S]; the weight gradients summed over time.

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
    >>> B, nIn, S = 2, 3, 4
    >>> W, bias = rng.normal(size=(3 * S, S + nIn)), np.zeros(3 * S)
    >>> x, h0 = rng.normal(size=(5, B, nIn)), np.zeros((B, S))
    >>> h, hL, cL = cells.lltmTimeLoop(x, W, bias, h0, h0)
    >>> cells.lltmTimeLoopBp(x, W, bias, h0, h0, np.ones_like(h)).dLdW.shape
    (12, 7)
    """
    fwd = check.flag("forward", forward)
    input_grad = check.flag("input_grad", input_grad)
    dims = _check_lltm(_SEQ_NAMES, 3, x, W, b, hI, cI, dLdh=dLdh, dLdhL=dLdhL,
                       dLdcL=dLdcL)
    sL, bS, nIn, S = dims
    check.output_grads(sL, bS, S, dLdh, dLdhL=dLdhL, dLdcL=dLdcL)
    lens = check.seq_len(seq_len, sL, bS, x)
    saved = None
    if workspace is not None:
        _check_workspace(workspace, dims, x, lens, fwd)
        saved = workspace.h, workspace.gates, workspace.c
    return LltmGrads(*family.backward(_backend.of(x), dims, x, W, hI, cI, fwd, saved, dLdh, dLdhL,
                                      dLdcL, check_n_threads(n_threads), b=b, lens=lens,
                                      input_grad=input_grad))


# ---------------------------------------------------------------------------------------------
# Validation
# ---------------------------------------------------------------------------------------------

# The argument names and shapes of the cell functions and of the sequence functions, in the
# order x, W, b, hI, cI.
_CELL_NAMES = (("input", "[B, nIn]"), ("weights", "[3S, S+nIn]"), ("bias", "[3S]"),
               ("old_h", "[B, S]"), ("old_cell", "[B, S]"))
_SEQ_NAMES = (("x", "[sL, bS, nIn]"), ("W", "[3S, S+nIn]"), ("b", "[3S]"), ("hI", "[bS, S]"),
              ("cI", "[bS, S]"))


def prepare(W: np.ndarray, b: np.ndarray, *, n_threads: Optional[int] = None,
            weights: Optional[str] = None) -> PreparedNet:
    """Prepare an LLTM's weights for many inference calls (serving): validated and packed once.

    Parameters
    ----------
    W : numpy.ndarray, [3S, S+nIn]
        PyTorch's Linear layout on X = [h, x], as lltmTimeLoop; float32 or float64.
    b : numpy.ndarray, [3S]
        Of W's dtype.
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
        ``h, state = net(x, state)`` with state an LltmState (h and c [bS, S]).

    Raises
    ------
    TypeError
        W or b not a float32/float64 NumPy array, or of different dtypes; float64 weights
        with ``weights="int8"`` or ``"bfloat16"``.
    ValueError
        Shapes that do not fit together, nIn or S of 0, an unknown ``weights``.

    Examples
    --------
    >>> import numpy as np, cells
    >>> rng = np.random.default_rng(0)
    >>> net = cells.lltm.prepare(rng.normal(size=(6, 5)), np.zeros(6))   # S = 2, nIn = 3
    >>> h, state = net(rng.normal(size=(1, 3)))
    >>> h.shape, state.c.shape
    ((1, 2), (1, 2))
    """
    options = {"n_threads": check_n_threads(n_threads), "weights": weights_option(weights)}
    check.numpy_weights(W=W, b=b)
    check.ndim("W", W, 2, "[3S, S+nIn]")
    S, nIn = W.shape[0] // 3, W.shape[1] - W.shape[0] // 3
    if W.shape[0] % 3 or nIn < 0:
        raise ValueError(f"W: expected shape [3S, S+nIn], got {W.shape}")
    names = (("x", "[sL, bS, nIn]"), ("W", "[3S, S+nIn]"), ("b", "[3S]"), ("hI", "[bS, S]"),
             ("cI", "[bS, S]"))
    x, hI, cI = check.no_inputs(W.dtype, nIn, S, S)
    _check_lltm(names, 3, x, W, b, hI, cI)
    return prepare_net("lltm", LltmState, options, "lltm", nIn, S, W.dtype, W=W, b=b)


def _check_lltm(names, x_ndim, x, W, b, hI, cI, **grads):
    """Check every array, the gradients `grads` among them (each may be None), against
    x [sL, bS, nIn] (a cell's [B, nIn] when x_ndim = 2) and hI [bS, S]; return
    (sL, bS, nIn, S) with sL = 1 for a cell. `names` gives each argument's public
    name and shape."""
    (nx, mx), (nW, mW), (nb, mb), (nh, mh), (nc, mc) = names
    check.real_arrays(optional=grads, **{nx: x, nW: W, nb: b, nh: hI, nc: cI}, **grads)
    check.ndim(nx, x, x_ndim, mx)
    check.ndim(nh, hI, 2, mh)
    sL, bS, nIn = x.shape if x_ndim == 3 else (1,) + x.shape
    S = hI.shape[1]
    check.shape(nh, hI, (bS, S), f"{mh} (B from {nx})")
    check.shape(nc, cI, (bS, S), f"{mc} (like {nh})")
    check.shape(nW, W, (3 * S, S + nIn), mW)
    check.shape(nb, b, (3 * S,), mb)
    check.gemm_dims(**{"sL*bS": sL * bS, "S+nIn": S + nIn, "3S": 3 * S})
    return sL, bS, nIn, S


def _check_workspace(ws, dims, x, lens, fwd):
    sL, bS, _, S = dims
    check.workspace(ws, LltmWorkspace, "lltmTimeLoopBp", x, "x and hI",
                    {"h": (sL, bS, S), "gates": (sL, bS, 3 * S), "c": (sL, bS, S)},
                    ("gates",), seq_len=lens, forward=fwd)

"""GRU: libnd4j's gruCell, gruCellBp, gruTimeLoop, gruTimeLoopBp and its block cell.

Shapes use libnd4j's names: sL time steps, bS batch rows, nIn inputs, nOut units. Gate blocks
are ordered (r, u, c) = reset, update, candidate, and products are row-vector (z = x·W):

    r = σ(x·Wx_r + bx_r + hI·Wh_r + bh_r)
    u = σ(x·Wx_u + bx_u + hI·Wh_u + bh_u)
    c = tanh(x·Wx_c + bx_c + (r∘hI)·Wh_c + bh_c)     linear_before_reset=False
    c = tanh(x·Wx_c + bx_c + r∘(hI·Wh_c + bh_c))     linear_before_reset=True
    h = (1-u)∘c + u∘hI

b is [3nOut] (bx alone, bh = 0, as libnd4j) or [2, 3nOut] (rows bx, bh: Keras reset_after, cuDNN,
PyTorch, ONNX). Every function takes float32 or float64 arrays of one dtype, in any memory order,
and returns new C-ordered arrays of that dtype (dLdWx and dLdWh F-ordered where Wx and Wh both are:
PyTorch's layout, which the CPU reads where it is). `n_threads` (None: as many as the call's steps
gain from, at most the cores) is the number of threads the call runs on (cells/_threads.py); a
backward whose weight gradients run on BLAS holds it at one thread meanwhile.
"""
from typing import NamedTuple, Optional, Union

import numpy as np

from cells import _arrays, _backend
from cells import _validate as check
from cells._families import gru as family
from cells._prepared import GruState, PreparedNet, prepare_net, weights_option
from cells._threads import check_n_threads
from cells.convert import gru_from_block


class GruWorkspace(NamedTuple):
    """What ``gruTimeLoop(..., return_workspace=True)`` keeps for :func:`gruTimeLoopBp`.

    Per step it holds 5nOut values per batch row with linear_before_reset, 4nOut without, and
    the options it was made with, which the backward checks against its own.

    The backward consumes it: to keep a training step's memory at the workspace, it overwrites
    the gates with gradients and leaves them read-only; a second backward pass needs a new forward
    pass (as PyTorch frees a graph's saved tensors in ``backward()``).

    Attributes
    ----------
    h : numpy.ndarray, [sL, bS, nOut]
        The states (the array gruTimeLoop returns).
    gates : numpy.ndarray, [sL, bS, 3nOut]
        The activated r, u, c.
    hc : numpy.ndarray, [sL, bS, nOut], or None
        hPrev·Wh_c + bh_c, with linear_before_reset only.
    seq_len : numpy.ndarray of int64, [bS], or None
        The lengths it was made with.
    forward : bool
        The direction it was made with.
    """

    h: np.ndarray
    gates: np.ndarray
    hc: Optional[np.ndarray]
    seq_len: Optional[np.ndarray]
    forward: bool

    @property
    def linear_before_reset(self):
        """Which GRU made it: linear-before-reset ones keep hc."""
        return self.hc is not None


class GruCellResult(NamedTuple):
    """What :func:`gruCell` returns.

    Attributes
    ----------
    gates : numpy.ndarray, [bS, 3nOut]
        The activated r, u, c.
    h : numpy.ndarray, [bS, nOut]
        The new state.
    """

    gates: np.ndarray
    h: np.ndarray


class GruTimeLoopWithWorkspace(NamedTuple):
    """What ``gruTimeLoop(..., return_workspace=True)`` returns.

    Attributes
    ----------
    h : numpy.ndarray, [sL, bS, nOut]
        The state after every step.
    workspace : GruWorkspace
        For :func:`gruTimeLoopBp`.
    """

    h: np.ndarray
    workspace: GruWorkspace


class GruGrads(NamedTuple):
    """The gradients :func:`gruCellBp` and :func:`gruTimeLoopBp` return (summed over time for a
    time loop).

    Attributes
    ----------
    dLdx : numpy.ndarray or None
        x's shape; None with ``input_grad=False``.
    dLdhI : numpy.ndarray, [bS, nOut]
    dLdWx : numpy.ndarray, [nIn, 3nOut]
    dLdWh : numpy.ndarray, [nOut, 3nOut]
    dLdb : numpy.ndarray
        b's shape.
    """

    dLdx: np.ndarray
    dLdhI: np.ndarray
    dLdWx: np.ndarray
    dLdWh: np.ndarray
    dLdb: np.ndarray


class GruBlockCellResult(NamedTuple):
    """What :func:`gruBlockCell` returns: the activated gates and the new state.

    Attributes
    ----------
    r : numpy.ndarray, [bS, nOut]
    u : numpy.ndarray, [bS, nOut]
    c : numpy.ndarray, [bS, nOut]
    h : numpy.ndarray, [bS, nOut]
    """

    r: np.ndarray
    u: np.ndarray
    c: np.ndarray
    h: np.ndarray


class GruBlockGrads(NamedTuple):
    """The gradients :func:`gruBlockCellBp` returns.

    Attributes
    ----------
    dLdx : numpy.ndarray, [bS, nIn]
    dLdhLast : numpy.ndarray, [bS, nOut]
    dLdWru : numpy.ndarray, [nIn+nOut, 2nOut]
    dLdWc : numpy.ndarray, [nIn+nOut, nOut]
    dLdbru : numpy.ndarray, [2nOut]
    dLdbc : numpy.ndarray, [nOut]
    """

    dLdx: np.ndarray
    dLdhLast: np.ndarray
    dLdWru: np.ndarray
    dLdWc: np.ndarray
    dLdbru: np.ndarray
    dLdbc: np.ndarray


def gruCell(x: np.ndarray, hI: np.ndarray, Wx: np.ndarray, Wh: np.ndarray, b: np.ndarray, *,
            linear_before_reset: bool = False,
            n_threads: Optional[int] = None) -> GruCellResult:
    """One GRU step.

    Parameters
    ----------
    x : numpy.ndarray, [bS, nIn]
        The input, float32 or float64 (every array of the call has one dtype).
    hI : numpy.ndarray, [bS, nOut]
        The previous state.
    Wx : numpy.ndarray, [nIn, 3nOut]
        Input weights, gate blocks (r, u, c).
    Wh : numpy.ndarray, [nOut, 3nOut]
        Recurrent weights, gate blocks (r, u, c).
    b : numpy.ndarray, [3nOut] or [2, 3nOut]
        The input-side bias bx alone (libnd4j; bh = 0), or the rows bx and bh (PyTorch, ONNX,
        Keras ``reset_after``).
    linear_before_reset : bool, default False
        False: c = tanh(x·Wx_c + bx_c + (r∘hI)·Wh_c + bh_c), libnd4j's documented formula;
        True: c = tanh(x·Wx_c + bx_c + r∘(hI·Wh_c + bh_c)), PyTorch's and cuDNN's GRU.
    n_threads : int, optional
        The threads the call runs on (1 to 256); None: as many as a step's work gains from
        (the Threads guide), at most ``OMP_NUM_THREADS`` when set, else the cores the process
        may use.

    Returns
    -------
    GruCellResult
        ``(gates, h)``: gates [bS, 3nOut] the activated r, u, c; h [bS, nOut] the new state.

    Raises
    ------
    TypeError
        An argument that is not a float32 or float64 array, arrays of different dtypes, or an
        option of the wrong kind.
    ValueError
        A shape that does not fit the others (the message names the argument, the expected and
        the given shape), an option out of range, or a workspace made with other options or
        already consumed.

    See Also
    --------
    gruCellBp, gruTimeLoop

    Examples
    --------
    >>> import numpy as np, cells
    >>> rng = np.random.default_rng(0)
    >>> bS, nIn, nOut = 2, 3, 4
    >>> Wx, Wh = rng.normal(size=(nIn, 3 * nOut)), rng.normal(size=(nOut, 3 * nOut))
    >>> b = np.zeros(3 * nOut)
    >>> gates, h = cells.gruCell(rng.normal(size=(bS, nIn)), np.zeros((bS, nOut)), Wx, Wh, b)
    >>> gates.shape, h.shape
    ((2, 12), (2, 4))
    """
    lbr = check.flag("linear_before_reset", linear_before_reset)
    dims = check.arguments(family.FAMILY, x=x, hI=hI, Wx=Wx, Wh=Wh, b=b, x_ndim=2)
    h, gates, _ = family.forward(_backend.of(x), dims, x[None], hI, Wx, Wh, b, lbr, True,
                                 check_n_threads(n_threads))
    return GruCellResult(gates[0], h[0])


def gruCellBp(x: np.ndarray, hI: np.ndarray, Wx: np.ndarray, Wh: np.ndarray, b: np.ndarray,
              dLdh: np.ndarray, *, linear_before_reset: bool = False,
              n_threads: Optional[int] = None) -> GruGrads:
    """Gradients of one GRU step (the forward pass is recomputed).

    Parameters
    ----------
    x, hI, Wx, Wh, b, linear_before_reset
        As :func:`gruCell`.
    dLdh : numpy.ndarray, [bS, nOut]
        dL/dh, the gradient arriving at the new state.
    n_threads : int, optional
        The threads the call runs on (1 to 256); None: as many as a step's work gains from
        (the Threads guide), at most ``OMP_NUM_THREADS`` when set, else the cores the process
        may use.

    Returns
    -------
    GruGrads
        ``(dLdx, dLdhI, dLdWx, dLdWh, dLdb)``: dLdx [bS, nIn], dLdhI [bS, nOut], dLdWx
        [nIn, 3nOut], dLdWh [nOut, 3nOut], dLdb with b's shape.

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
    >>> Wx, Wh = rng.normal(size=(nIn, 3 * nOut)), rng.normal(size=(nOut, 3 * nOut))
    >>> b = np.zeros(3 * nOut)
    >>> x, hI = rng.normal(size=(bS, nIn)), rng.normal(size=(bS, nOut))
    >>> grads = cells.gruCellBp(x, hI, Wx, Wh, b, np.ones((bS, nOut)))
    >>> grads.dLdx.shape, grads.dLdWh.shape, grads.dLdb.shape
    ((2, 3), (4, 12), (12,))
    """
    lbr = check.flag("linear_before_reset", linear_before_reset)
    dims = check.arguments(family.FAMILY, x=x, hI=hI, Wx=Wx, Wh=Wh, b=b, x_ndim=2, dLdh=dLdh)
    check.shape("dLdh", dLdh, hI.shape, "[bS, nOut]")
    dLdx, *grads = family.backward(_backend.of(x), dims, x[None], hI, Wx, Wh, b, lbr, None,
                                   dLdh[None], None, None, check_n_threads(n_threads))
    return GruGrads(dLdx[0], *grads)


def gruTimeLoop(x: np.ndarray, hI: np.ndarray, Wx: np.ndarray, Wh: np.ndarray, b: np.ndarray, *,
                linear_before_reset: bool = False, seq_len: Optional[np.ndarray] = None,
                forward: bool = True, return_workspace: bool = False,
                n_threads: Optional[int] = None) -> Union[np.ndarray, GruTimeLoopWithWorkspace]:
    """A GRU over a sequence.

    Parameters
    ----------
    x : numpy.ndarray, [sL, bS, nIn]
        The inputs, time-major (as libnd4j); float32 or float64.
    hI : numpy.ndarray, [bS, nOut]
        The initial state.
    Wx : numpy.ndarray, [nIn, 3nOut]
        Input weights, gate blocks (r, u, c).
    Wh : numpy.ndarray, [nOut, 3nOut]
        Recurrent weights, gate blocks (r, u, c).
    b : numpy.ndarray, [3nOut] or [2, 3nOut]
        The input-side bias bx alone (libnd4j; bh = 0), or the rows bx and bh (PyTorch, ONNX,
        Keras ``reset_after``).
    linear_before_reset : bool, default False
        False: c = tanh(x·Wx_c + bx_c + (r∘hI)·Wh_c + bh_c), libnd4j's documented formula;
        True: c = tanh(x·Wx_c + bx_c + r∘(hI·Wh_c + bh_c)), PyTorch's and cuDNN's GRU.
    seq_len : numpy.ndarray of int, [bS], optional
        Row b runs only its first ``seq_len[b]`` steps (in [0, sL]); its outputs after them are 0
        and its final state is the state after its last valid step. None: every row runs sL.
    forward : bool, default True
        False runs each row's valid steps in reverse time order, each output at its own time
        index (ONNX ``direction="reverse"``).
    return_workspace : bool, default False
        Also return the :class:`GruWorkspace` that lets :func:`gruTimeLoopBp` skip recomputing
        this forward pass.
    n_threads : int, optional
        The threads the call runs on (1 to 256); None: as many as a step's work gains from
        (the Threads guide), at most ``OMP_NUM_THREADS`` when set, else the cores the process
        may use.

    Returns
    -------
    h : numpy.ndarray, [sL, bS, nOut]
        The state after every step. A row's final state is ``h[seq_len[b] - 1]`` going forward,
        ``h[0]`` in reverse (hI when ``seq_len[b] = 0``).
    GruTimeLoopWithWorkspace
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
    >>> Wx, Wh = rng.normal(size=(nIn, 3 * nOut)), rng.normal(size=(nOut, 3 * nOut))
    >>> b = np.zeros(3 * nOut)
    >>> x = rng.normal(size=(5, bS, nIn))
    >>> cells.gruTimeLoop(x, np.zeros((bS, nOut)), Wx, Wh, b).shape
    (5, 2, 4)
    >>> h = cells.gruTimeLoop(x, np.zeros((bS, nOut)), Wx, Wh, b, seq_len=np.array([5, 2]))
    >>> bool((h[2:, 1] == 0).all())          # row 1 stops after 2 steps
    True
    """
    lbr = check.flag("linear_before_reset", linear_before_reset)
    keep = check.flag("return_workspace", return_workspace)
    fwd = check.flag("forward", forward)
    dims = check.arguments(family.FAMILY, x=x, hI=hI, Wx=Wx, Wh=Wh, b=b)
    lengths = check.seq_len(seq_len, dims[0], dims[1], x)
    h, gates, hc = family.forward(_backend.of(x), dims, x, hI, Wx, Wh, b, lbr, keep,
                                  check_n_threads(n_threads), lengths, fwd)
    if not keep:
        return h
    ws = GruWorkspace(h, gates, hc, None if lengths is None else lengths.copy(), fwd)
    return GruTimeLoopWithWorkspace(h, ws)


def gruTimeLoopBp(x: np.ndarray, hI: np.ndarray, Wx: np.ndarray, Wh: np.ndarray, b: np.ndarray,
                  dLdh: Optional[np.ndarray], *, dLdhLast: Optional[np.ndarray] = None,
                  workspace: Optional[GruWorkspace] = None, linear_before_reset: bool = False,
                  seq_len: Optional[np.ndarray] = None, forward: bool = True,
                  input_grad: bool = True, n_threads: Optional[int] = None) -> GruGrads:
    """Backpropagation through time for :func:`gruTimeLoop`.

    Called with the forward pass's arguments and options (``seq_len``, ``forward``,
    ``linear_before_reset``).

    Parameters
    ----------
    x, hI, Wx, Wh, b, linear_before_reset, seq_len, forward
        As :func:`gruTimeLoop`.
    dLdh : numpy.ndarray, [sL, bS, nOut], or None
        The gradient arriving at every step's output (ignored at a row's padded steps); None: no
        gradient.
    dLdhLast : numpy.ndarray, [bS, nOut], optional
        The gradient arriving at each row's final state.
    workspace : GruWorkspace, optional
        From ``gruTimeLoop(..., return_workspace=True)`` on the same inputs and options: skips
        recomputing the forward pass. The backward consumes it (a second use is a ValueError).
    input_grad : bool, default True
        False skips dL/dx (``dLdx`` is then None), for a first layer whose input needs no
        gradient.
    n_threads : int, optional
        The threads the call runs on (1 to 256); None: as many as a step's work gains from
        (the Threads guide), at most ``OMP_NUM_THREADS`` when set, else the cores the process
        may use.

    Returns
    -------
    GruGrads
        ``(dLdx, dLdhI, dLdWx, dLdWh, dLdb)``: dLdx [sL, bS, nIn] (0 at padded steps; None with
        ``input_grad=False``), dLdhI [bS, nOut], dLdWx [nIn, 3nOut], dLdWh [nOut, 3nOut], dLdb
        with b's shape; the weight gradients summed over time.

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
    >>> Wx, Wh = rng.normal(size=(nIn, 3 * nOut)), rng.normal(size=(nOut, 3 * nOut))
    >>> b = np.zeros(3 * nOut)
    >>> x, hI = rng.normal(size=(5, bS, nIn)), np.zeros((bS, nOut))
    >>> h, ws = cells.gruTimeLoop(x, hI, Wx, Wh, b, return_workspace=True)
    >>> grads = cells.gruTimeLoopBp(x, hI, Wx, Wh, b, np.ones_like(h), workspace=ws)
    >>> grads.dLdx.shape, grads.dLdWx.shape
    ((5, 2, 3), (3, 12))
    """
    lbr = check.flag("linear_before_reset", linear_before_reset)
    fwd = check.flag("forward", forward)
    input_grad = check.flag("input_grad", input_grad)
    dims = check.arguments(family.FAMILY, x=x, hI=hI, Wx=Wx, Wh=Wh, b=b,
                           optional=("dLdh", "dLdhLast"), dLdh=dLdh, dLdhLast=dLdhLast)
    sL, bS, nIn, nOut = dims
    check.output_grads(sL, bS, nOut, dLdh, dLdhLast=dLdhLast)
    lengths = check.seq_len(seq_len, sL, bS, x)
    saved = None
    if workspace is not None:
        _check_workspace(workspace, dims, x, lbr, lengths, fwd)
        saved = workspace.h, workspace.gates, workspace.hc
    return GruGrads(*family.backward(_backend.of(x), dims, x, hI, Wx, Wh, b, lbr, saved, dLdh,
                                     dLdhLast, None, check_n_threads(n_threads), lengths, fwd,
                                     input_grad))


def gruBlockCell(x: np.ndarray, hLast: np.ndarray, Wru: np.ndarray, Wc: np.ndarray,
                 bru: np.ndarray, bc: np.ndarray, *,
                 n_threads: Optional[int] = None) -> GruBlockCellResult:
    """libnd4j's block gruCell, TensorFlow's GRUBlockCell (reset-before).

    r, u = σ([x, hLast]·Wru + bru), c = tanh([x, r∘hLast]·Wc + bc), h = (1-u)∘c + u∘hLast.

    Parameters
    ----------
    x : numpy.ndarray, [bS, nIn]
    hLast : numpy.ndarray, [bS, nOut]
        The previous state.
    Wru : numpy.ndarray, [nIn+nOut, 2nOut]
        Rows x then h, columns r then u.
    Wc : numpy.ndarray, [nIn+nOut, nOut]
    bru : numpy.ndarray, [2nOut]
    bc : numpy.ndarray, [nOut]
    n_threads : int, optional
        The threads the call runs on (1 to 256); None: as many as a step's work gains from
        (the Threads guide), at most ``OMP_NUM_THREADS`` when set, else the cores the process
        may use.

    Returns
    -------
    GruBlockCellResult
        ``(r, u, c, h)``, each [bS, nOut].

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
    >>> x, hLast = rng.normal(size=(2, 3)), rng.normal(size=(2, 4))
    >>> Wru, Wc = rng.normal(size=(7, 8)), rng.normal(size=(7, 4))
    >>> r, u, c, h = cells.gruBlockCell(x, hLast, Wru, Wc, np.zeros(8), np.zeros(4))
    >>> h.shape
    (2, 4)
    """
    dims, Wx, Wh, b = _block_to_gru(x, hLast, Wru, Wc, bru, bc)
    h, gates, _ = family.forward(_backend.of(x), dims, x[None], hLast, Wx, Wh, b, False, True,
                                 check_n_threads(n_threads))
    r, u, c = np.split(gates[0], 3, axis=1)
    return GruBlockCellResult(r.copy(), u.copy(), c.copy(), h[0])


def gruBlockCellBp(x: np.ndarray, hLast: np.ndarray, Wru: np.ndarray, Wc: np.ndarray,
                   bru: np.ndarray, bc: np.ndarray, dLdr: Optional[np.ndarray],
                   dLdu: Optional[np.ndarray], dLdc: Optional[np.ndarray],
                   dLdh: Optional[np.ndarray], *,
                   n_threads: Optional[int] = None) -> GruBlockGrads:
    """Gradients of :func:`gruBlockCell`.

    Unlike libnd4j's, dLdr, dLdu, dLdc and dLdh are the plain gradients arriving at the four
    outputs; the chaining through h and c happens here.

    Parameters
    ----------
    x, hLast, Wru, Wc, bru, bc
        As :func:`gruBlockCell`.
    dLdr, dLdu, dLdc, dLdh : numpy.ndarray, [bS, nOut], or None
        The gradients arriving at r, u, c and h (None: no gradient there).
    n_threads : int, optional
        The threads the call runs on (1 to 256); None: as many as a step's work gains from
        (the Threads guide), at most ``OMP_NUM_THREADS`` when set, else the cores the process
        may use.

    Returns
    -------
    GruBlockGrads
        ``(dLdx, dLdhLast, dLdWru, dLdWc, dLdbru, dLdbc)``: dLdx [bS, nIn], dLdhLast [bS, nOut],
        dLdWru [nIn+nOut, 2nOut], dLdWc [nIn+nOut, nOut], dLdbru [2nOut], dLdbc [nOut].

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
    >>> x, hLast = rng.normal(size=(2, 3)), rng.normal(size=(2, 4))
    >>> Wru, Wc = rng.normal(size=(7, 8)), rng.normal(size=(7, 4))
    >>> g = cells.gruBlockCellBp(x, hLast, Wru, Wc, np.zeros(8), np.zeros(4),
    ...                          None, None, None, np.ones((2, 4)))
    >>> g.dLdWru.shape, g.dLdbc.shape
    ((7, 8), (4,))
    """
    dims, Wx, Wh, b = _block_to_gru(x, hLast, Wru, Wc, bru, bc, dLdr=dLdr, dLdu=dLdu,
                                    dLdc=dLdc, dLdh=dLdh)
    _, bS, nIn, nOut = dims
    for name, g in (("dLdr", dLdr), ("dLdu", dLdu), ("dLdc", dLdc), ("dLdh", dLdh)):
        if g is not None:
            check.shape(name, g, (bS, nOut), "[bS, nOut]")
    dLdgates = None
    if any(g is not None for g in (dLdr, dLdu, dLdc)):
        dLdgates = _arrays.array_module(x).zeros((1, bS, 3 * nOut), x.dtype)
        for k, g in enumerate((dLdr, dLdu, dLdc)):
            if g is not None:
                dLdgates[0, :, k * nOut:(k + 1) * nOut] = g
    dLdx, dLdhLast, dLdWx, dLdWh, dLdb = family.backward(_backend.of(x), dims, x[None], hLast, Wx,
                                                         Wh, b, False, None,
                                                         None if dLdh is None else dLdh[None], None,
                                                         dLdgates, check_n_threads(n_threads))
    dLdWru = np.concatenate([dLdWx[:, :2 * nOut], dLdWh[:, :2 * nOut]])
    dLdWc = np.concatenate([dLdWx[:, 2 * nOut:], dLdWh[:, 2 * nOut:]])
    return GruBlockGrads(dLdx[0], dLdhLast, dLdWru, dLdWc, dLdb[:2 * nOut].copy(),
                         dLdb[2 * nOut:].copy())


def prepare(Wx: np.ndarray, Wh: np.ndarray, b: np.ndarray, *, linear_before_reset: bool = False,
            n_threads: Optional[int] = None, weights: Optional[str] = None) -> PreparedNet:
    """Prepare a GRU's weights for many inference calls (serving): validated and packed once.

    Parameters
    ----------
    Wx : numpy.ndarray, [nIn, 3nOut]
    Wh : numpy.ndarray, [nOut, 3nOut]
        As gruTimeLoop takes them (float32 or float64, one dtype; both F-ordered, as a torch
        module's ``weight_ih.T`` and ``weight_hh.T``, is read without a transposing copy).
    b : numpy.ndarray, [3nOut] or [2, 3nOut]
        bx, or the rows bx and bh.
    linear_before_reset : bool
        As gruTimeLoop.
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
        ``h, state = net(x, state)`` with state a GruState (h [bS, nOut]); it owns a packed
        copy of the weights (``net.nbytes``).

    Raises
    ------
    TypeError
        An argument that is not a float32/float64 NumPy array, or of another dtype than Wx;
        float64 weights with ``weights="int8"`` or ``"bfloat16"``.
    ValueError
        Shapes that do not fit together, nIn or nOut of 0, an unknown ``weights``.

    Examples
    --------
    >>> import numpy as np, cells
    >>> rng = np.random.default_rng(0)
    >>> Wx, Wh = rng.normal(size=(4, 6)), rng.normal(size=(2, 6))
    >>> net = cells.gru.prepare(Wx, Wh, np.zeros(6))
    >>> h, state = net(rng.normal(size=(1, 4)))          # one step, bS = 1
    >>> h, state = net(rng.normal(size=(1, 4)), state)   # the next, from the state
    >>> h.shape, state.h.shape
    ((1, 2), (1, 2))
    """
    lbr = check.flag("linear_before_reset", linear_before_reset)
    options = {"linear_before_reset": lbr, "n_threads": check_n_threads(n_threads),
               "weights": weights_option(weights)}
    check.numpy_weights(Wx=Wx, Wh=Wh, b=b)
    check.ndim("Wx", Wx, 2, "[nIn, 3*nOut]")
    check.ndim("Wh", Wh, 2, "[nOut, 3*nOut]")
    x, hI = check.no_inputs(Wx.dtype, Wx.shape[0], Wh.shape[0])
    _, _, nIn, nOut = check.arguments(family.FAMILY, x=x, hI=hI, Wx=Wx, Wh=Wh, b=b)
    bx, bhc = family.split_bias(np, b, nOut, lbr)
    return prepare_net("gru", GruState, options, family.loop_row(lbr), nIn, nOut, Wx.dtype, Wx=Wx,
                       Wh=Wh, b=bx, P=bhc)


# ---------------------------------------------------------------------------------------------
# Validation
# ---------------------------------------------------------------------------------------------

def _check_workspace(ws, dims, x, lbr, lengths, fwd):
    sL, bS, _, nOut = dims
    arrays = {"h": (sL, bS, nOut), "gates": (sL, bS, 3 * nOut)}
    if lbr:
        arrays["hc"] = (sL, bS, nOut)
    check.workspace(ws, GruWorkspace, "gruTimeLoopBp", x, "x and hI", arrays,
                    ("gates", "hc"), linear_before_reset=lbr, seq_len=lengths, forward=fwd)


def _block_to_gru(x, hLast, Wru, Wc, bru, bc, **grads):
    """Validate the block cell's arguments and lay its weights out as gruCell's
    (reset-before, one bias; cells.convert.gru_from_block): Wx = [Wru | Wc] over the x rows,
    Wh likewise over the h rows. Returns (dims, Wx, Wh, b)."""
    check.real_arrays(optional=grads, x=x, hLast=hLast, Wru=Wru, Wc=Wc, bru=bru, bc=bc,
                      **grads)
    check.ndim("x", x, 2, "[bS, nIn]")
    check.ndim("hLast", hLast, 2, "[bS, nOut]")
    (bS, nIn), nOut = x.shape, hLast.shape[1]
    check.shape("hLast", hLast, (bS, nOut), "[bS, nOut] (bS from x)")
    check.shape("Wru", Wru, (nIn + nOut, 2 * nOut), "[nIn+nOut, 2*nOut]")
    check.shape("Wc", Wc, (nIn + nOut, nOut), "[nIn+nOut, nOut]")
    check.shape("bru", bru, (2 * nOut,), "[2*nOut]")
    check.shape("bc", bc, (nOut,), "[nOut]")
    check.gemm_dims(**{"bS": bS, "nIn": nIn, "4*nOut": 4 * nOut})
    Wx, Wh, b = gru_from_block(Wru, Wc, bru, bc)
    return (1, bS, nIn, nOut), Wx, Wh, b

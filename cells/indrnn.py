"""IndRNN (Li et al. 2018; lmnt-com/haste's IndRNN), with zoneout.

Shapes use libnd4j's names: sL time steps, bS batch rows, nIn inputs, nOut units. Each unit's
recurrence is its own, a product by its own scale rather than by a matrix::

    h = tanh(x·Wx + b + u∘hPrev)

Wx [nIn, nOut] (haste's kernel), u [nOut] (haste's recurrent_scale), b [nOut] (haste's bias).

zoneout (haste's): None; a probability p, haste's eval mode, h = p·hPrev + (1 - p)·hNew; or a
mask [sL, bS, nOut], haste's training mode, h = hPrev + mask∘(hNew - hPrev) (haste draws it
Bernoulli(1 - p), unscaled).

Every function takes float32 or float64 arrays of one dtype, in any memory order, and returns new
C-ordered arrays of that dtype. `n_threads` (None: as many as the call's steps gain from, at most
the cores) is the number of threads the call runs on.
"""
from typing import NamedTuple, Optional, Union

import numpy as np

from cells import _backend
from cells import _validate as check
from cells._families import _haste
from cells._families.indrnn import FAMILY
from cells._prepared import PreparedNet, RnnState, prepare_net, weights_option
from cells._threads import check_n_threads


class IndRnnWorkspace(NamedTuple):
    """What ``indRnnTimeLoop(..., return_workspace=True)`` keeps for :func:`indRnnTimeLoopBp`;
    the backward consumes it (it overwrites the gates with gradients and leaves them
    read-only).

    Attributes
    ----------
    h : numpy.ndarray, [sL, bS, nOut]
    gates : numpy.ndarray, [sL, bS, nOut]
        tanh(...) of every step, before zoneout.
    seq_len, forward, zoneout
        The options it was made with (zoneout as the time loop takes it).
    """

    h: np.ndarray
    gates: np.ndarray
    seq_len: Optional[np.ndarray]
    forward: bool
    zoneout: Optional[np.ndarray]


class IndRnnTimeLoopWithWorkspace(NamedTuple):
    """What ``indRnnTimeLoop(..., return_workspace=True)`` returns: every step's state h
    [sL, bS, nOut] and the workspace."""

    h: np.ndarray
    workspace: IndRnnWorkspace


class IndRnnGrads(NamedTuple):
    """The gradients :func:`indRnnTimeLoopBp` returns, each of its argument's shape (dLdx None
    with ``input_grad=False``), the weights' summed over time."""

    dLdx: Optional[np.ndarray]
    dLdhI: np.ndarray
    dLdWx: np.ndarray
    dLdu: np.ndarray
    dLdb: np.ndarray


def indRnnTimeLoop(x: np.ndarray, hI: np.ndarray, Wx: np.ndarray, u: np.ndarray, b: np.ndarray,
                   *, zoneout=None, seq_len: Optional[np.ndarray] = None, forward: bool = True,
                   return_workspace: bool = False, n_threads: Optional[int] = None
                   ) -> Union[np.ndarray, IndRnnTimeLoopWithWorkspace]:
    """An IndRNN over a sequence (the module docstring gives the formula).

    Parameters
    ----------
    x : numpy.ndarray, [sL, bS, nIn]
        The inputs, time-major; float32 or float64.
    hI : numpy.ndarray, [bS, nOut]
        The initial state.
    Wx : numpy.ndarray, [nIn, nOut]
    u : numpy.ndarray, [nOut]
        Each unit's recurrent scale.
    b : numpy.ndarray, [nOut]
    zoneout : None, float or numpy.ndarray [sL, bS, nOut]
        None; p, haste's eval mode; or the mask of haste's training mode.
    seq_len : numpy.ndarray of int, [bS], optional
        Row b runs only its first ``seq_len[b]`` steps; its outputs after them are 0 and its
        state stays the one after its last valid step.
    forward : bool, default True
        False runs each row's valid steps in reverse time order.
    return_workspace : bool, default False
        Also return the workspace :func:`indRnnTimeLoopBp` reads.
    n_threads : int, optional
        The threads the call runs on (1 to 256).

    Returns
    -------
    h : numpy.ndarray, [sL, bS, nOut]
        The state after every step; :class:`IndRnnTimeLoopWithWorkspace` with
        ``return_workspace=True``.

    Raises
    ------
    TypeError
        An argument that is not a float32 or float64 array, arrays of different dtypes, or an
        option of the wrong kind.
    ValueError
        A shape that does not fit the others (the message names the argument, the expected and
        the given shape), or an option out of range.

    Examples
    --------
    >>> import numpy as np, cells
    >>> rng = np.random.default_rng(0)
    >>> x, hI = rng.normal(size=(5, 2, 3)), np.zeros((2, 4))
    >>> Wx, u, b = rng.normal(size=(3, 4)), rng.uniform(-0.5, 0.5, 4), np.zeros(4)
    >>> cells.indRnnTimeLoop(x, hI, Wx, u, b).shape
    (5, 2, 4)
    """
    keep = check.flag("return_workspace", return_workspace)
    fwd = check.flag("forward", forward)
    dims = check.arguments(FAMILY, x=x, hI=hI, Wx=Wx, u=u, b=b)
    sL, bS, _, nOut = dims
    lengths = check.seq_len(seq_len, sL, bS, x)
    zone = check.zoneout(zoneout, sL, bS, nOut, x)
    h, _, _, _, gates, _ = _haste.forward(_backend.of(x), "indrnn", dims, x, Wx, None, b, u, hI,
                                          None, keep, check_n_threads(n_threads), lengths, fwd,
                                          zone)
    if not keep:
        return h
    workspace = IndRnnWorkspace(h, gates, None if lengths is None else lengths.copy(), fwd,
                                None if zone is None else zone.copy())
    return IndRnnTimeLoopWithWorkspace(h, workspace)


def indRnnTimeLoopBp(x: np.ndarray, hI: np.ndarray, Wx: np.ndarray, u: np.ndarray,
                     b: np.ndarray, dLdh: Optional[np.ndarray], *,
                     dLdhLast: Optional[np.ndarray] = None,
                     workspace: Optional[IndRnnWorkspace] = None, zoneout=None,
                     seq_len: Optional[np.ndarray] = None, forward: bool = True,
                     input_grad: bool = True, n_threads: Optional[int] = None) -> IndRnnGrads:
    """Backpropagation through time for :func:`indRnnTimeLoop`, called with its arguments and
    options.

    Parameters
    ----------
    x, hI, Wx, u, b, zoneout, seq_len, forward
        As :func:`indRnnTimeLoop`.
    dLdh : numpy.ndarray, [sL, bS, nOut], or None
        The gradient arriving at every step's output (ignored at padded steps).
    dLdhLast : numpy.ndarray, [bS, nOut], optional
        The gradient arriving at each row's final state.
    workspace : IndRnnWorkspace, optional
        From ``indRnnTimeLoop(..., return_workspace=True)`` on the same inputs and options:
        skips recomputing the forward pass. The backward consumes it.
    input_grad : bool, default True
        False skips dL/dx (``dLdx`` is then None).
    n_threads : int, optional
        The threads the call runs on (1 to 256).

    Returns
    -------
    IndRnnGrads
        ``(dLdx, dLdhI, dLdWx, dLdu, dLdb)``, in argument order.

    Raises
    ------
    TypeError, ValueError
        As :func:`indRnnTimeLoop`; also a workspace made with other options or already
        consumed.

    Examples
    --------
    >>> import numpy as np, cells
    >>> rng = np.random.default_rng(0)
    >>> x, hI = rng.normal(size=(5, 2, 3)), np.zeros((2, 4))
    >>> Wx, u, b = rng.normal(size=(3, 4)), rng.uniform(-0.5, 0.5, 4), np.zeros(4)
    >>> cells.indRnnTimeLoopBp(x, hI, Wx, u, b, np.ones((5, 2, 4))).dLdu.shape
    (4,)
    """
    fwd = check.flag("forward", forward)
    input_grad = check.flag("input_grad", input_grad)
    dims = check.arguments(FAMILY, x=x, hI=hI, Wx=Wx, u=u, b=b, optional=("dLdh", "dLdhLast"),
                           dLdh=dLdh, dLdhLast=dLdhLast)
    sL, bS, _, nOut = dims
    check.output_grads(sL, bS, nOut, dLdh, dLdhLast=dLdhLast)
    lengths = check.seq_len(seq_len, sL, bS, x)
    zone = check.zoneout(zoneout, sL, bS, nOut, x)
    saved = None
    if workspace is not None:
        check.workspace(workspace, IndRnnWorkspace, "indRnnTimeLoopBp", x, "x and hI",
                        {"h": (sL, bS, nOut), "gates": (sL, bS, nOut)}, ("gates",),
                        seq_len=lengths, forward=fwd, zoneout=zone)
        saved = workspace.h, None, workspace.gates, None
    dLdx, dLdWx, _, dLdb, dLdu, dLdhI, _ = _haste.backward(_backend.of(x), "indrnn", dims, x, Wx,
                                                           None, b, u, hI, None, saved, dLdh, None,
                                                           dLdhLast, None,
                                                           check_n_threads(n_threads), lengths, fwd,
                                                           zone, input_grad)
    return IndRnnGrads(dLdx, dLdhI, dLdWx, dLdu, dLdb)


def prepare(Wx: np.ndarray, u: np.ndarray, b: np.ndarray, *, zoneout: Optional[float] = None,
            n_threads: Optional[int] = None, weights: Optional[str] = None) -> PreparedNet:
    """Prepare an IndRNN's weights for many inference calls (serving): validated and packed
    once.

    Parameters
    ----------
    Wx, u, b
        As :func:`indRnnTimeLoop` takes them.
    zoneout : float, optional
        haste's zoneout in eval mode: every step's h = zoneout·hPrev + (1 - zoneout)·hNew.
    n_threads : int or None
        The threads of every call (a call's own n_threads overrides it).
    weights : None, "int8" or "bfloat16"
        The form Wx is kept in (the Serving guide).

    Returns
    -------
    PreparedNet
        ``h, state = net(x, state)`` with state an RnnState (h [bS, nOut]).

    Raises
    ------
    TypeError, ValueError
        As :func:`cells.rnn.prepare`.

    Examples
    --------
    >>> import numpy as np, cells
    >>> rng = np.random.default_rng(0)
    >>> net = cells.indrnn.prepare(rng.normal(size=(3, 2)), np.full(2, 0.5), np.zeros(2))
    >>> h, state = net(rng.normal(size=(5, 1, 3)))
    >>> h.shape, state.h.shape
    ((5, 1, 2), (1, 2))
    """
    zoneout = check.zoneout_probability(zoneout)
    options = {"zoneout": zoneout, "n_threads": check_n_threads(n_threads),
               "weights": weights_option(weights)}
    check.numpy_weights(Wx=Wx, u=u, b=b)
    check.ndim("Wx", Wx, 2, "[nIn, nOut]")
    check.ndim("u", u, 1, "[nOut]")
    x, hI = check.no_inputs(Wx.dtype, Wx.shape[0], u.shape[0])
    _, _, nIn, nOut = check.arguments(FAMILY, x=x, hI=hI, Wx=Wx, u=u, b=b)
    return prepare_net("indrnn", RnnState, options, "indrnn", nIn, nOut, Wx.dtype, Wx=Wx,
                       b=np.ascontiguousarray(b), P=u, zoneout=zoneout)

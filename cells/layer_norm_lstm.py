"""haste's LayerNorm LSTM (lmnt-com/haste's LayerNormLSTM), with zoneout.

Shapes use libnd4j's names: sL time steps, bS batch rows, nIn inputs, nOut units. Products are
row-vector, and the gate blocks are haste's (i, g, f, o), so that haste's parameters are the
arguments as they are (kernel = Wx, recurrent_kernel = Wh, bias = b, gamma, gamma_h, beta_h)::

    v = gamma[0]∘LN(x·Wx) + gamma[1]∘LN(hPrev·Wh) + b
    i = σ(v_i),  g = tanh(v_g),  f = σ(v_f),  o = σ(v_o)
    c = f∘cPrev + i∘g
    h = o∘tanh(gamma_h∘LN(c) + beta_h)

LN(v) = (v - mean(v)) / sqrt(var(v) + 1e-5) over the whole row (4nOut values for the two
products, nOut for c), var the biased variance: torch.nn.functional.layer_norm's, as haste
calls it. Only the output's LayerNorm has a bias; the carried c is not normalised.

zoneout (haste's, on h only, never c): None; a probability p, haste's eval mode,
h = p·hPrev + (1 - p)·hNew; or a mask [sL, bS, nOut], haste's training mode,
h = hPrev + mask∘(hNew - hPrev) (haste draws it Bernoulli(1 - p), unscaled).

Every function takes float32 or float64 arrays of one dtype, in any memory order, and returns new
C-ordered arrays of that dtype. `n_threads` (None: as many as the call's steps gain from, at most
the cores) is the number of threads the call runs on; each thread runs whole batch rows (a
LayerNorm reads every unit of its row), so a call uses at most bS threads.
"""
from typing import NamedTuple, Optional, Union

import numpy as np

from cells import _backend
from cells import _validate as check
from cells._families import _haste
from cells._families.layer_norm_lstm import FAMILY, GATES, loop_params, param_grads
from cells._prepared import LstmState, PreparedNet, prepare_net, weights_option
from cells._threads import check_n_threads


class LayerNormLstmWorkspace(NamedTuple):
    """What ``layerNormLstmTimeLoop(..., return_workspace=True)`` keeps for
    :func:`layerNormLstmTimeLoopBp`; the backward consumes it (it overwrites gates and aux with
    gradients and leaves them read-only).

    Attributes
    ----------
    h : numpy.ndarray, [sL, bS, nOut]
    c : numpy.ndarray, [sL, bS, nOut]
        Every step's cell state.
    gates : numpy.ndarray, [sL, bS, 4nOut]
        i, g, f, o of every step.
    aux : numpy.ndarray, [sL, bS, 8nOut]
        Every step's hPrev·Wh and x·Wx, before their LayerNorms.
    seq_len, forward, zoneout
        The options it was made with (zoneout as the time loop takes it).
    """

    h: np.ndarray
    c: np.ndarray
    gates: np.ndarray
    aux: np.ndarray
    seq_len: Optional[np.ndarray]
    forward: bool
    zoneout: Optional[np.ndarray]


class LayerNormLstmResult(NamedTuple):
    """What :func:`layerNormLstmTimeLoop` returns.

    Attributes
    ----------
    h : numpy.ndarray, [sL, bS, nOut]
        Every step's output (0 at a row's padded steps).
    hL, cL : numpy.ndarray, [bS, nOut]
        Each row's final states.
    """

    h: np.ndarray
    hL: np.ndarray
    cL: np.ndarray


class LayerNormLstmResultWithWorkspace(NamedTuple):
    """:class:`LayerNormLstmResult` and the workspace, with ``return_workspace=True``."""

    h: np.ndarray
    hL: np.ndarray
    cL: np.ndarray
    workspace: LayerNormLstmWorkspace


class LayerNormLstmGrads(NamedTuple):
    """The gradients :func:`layerNormLstmTimeLoopBp` returns, each of its argument's shape
    (dLdx None with ``input_grad=False``), the weights' summed over time."""

    dLdx: Optional[np.ndarray]
    dLdWx: np.ndarray
    dLdWh: np.ndarray
    dLdb: np.ndarray
    dLdgamma: np.ndarray
    dLdgamma_h: np.ndarray
    dLdbeta_h: np.ndarray
    dLdhI: np.ndarray
    dLdcI: np.ndarray


def layerNormLstmTimeLoop(x: np.ndarray, Wx: np.ndarray, Wh: np.ndarray, b: np.ndarray,
                          gamma: np.ndarray, gamma_h: np.ndarray, beta_h: np.ndarray,
                          hI: np.ndarray, cI: np.ndarray, *, zoneout=None,
                          seq_len: Optional[np.ndarray] = None, forward: bool = True,
                          return_workspace: bool = False, n_threads: Optional[int] = None
                          ) -> Union[LayerNormLstmResult, LayerNormLstmResultWithWorkspace]:
    """A LayerNorm LSTM over a sequence (the module docstring gives the formulas).

    Parameters
    ----------
    x : numpy.ndarray, [sL, bS, nIn]
        The inputs, time-major; float32 or float64.
    Wx : numpy.ndarray, [nIn, 4nOut]
        haste's kernel, gate blocks i, g, f, o.
    Wh : numpy.ndarray, [nOut, 4nOut]
        haste's recurrent_kernel (after DropConnect, if any).
    b : numpy.ndarray, [4nOut]
    gamma : numpy.ndarray, [2, 4nOut]
        The gains of LN(x·Wx) (row 0) and LN(hPrev·Wh) (row 1).
    gamma_h, beta_h : numpy.ndarray, [nOut]
        The gain and bias of LN(c).
    hI, cI : numpy.ndarray, [bS, nOut]
        The initial states.
    zoneout : None, float or numpy.ndarray [sL, bS, nOut]
        None; p, haste's eval mode; or the mask of haste's training mode.
    seq_len : numpy.ndarray of int, [bS], optional
        Row b runs only its first ``seq_len[b]`` steps; its outputs after them are 0 and its
        final states are those after its last valid step. (haste's ``lengths`` differs: it
        masks nothing; cells.haste keeps haste's meaning.)
    forward : bool, default True
        False runs each row's valid steps in reverse time order.
    return_workspace : bool, default False
        Also return the workspace :func:`layerNormLstmTimeLoopBp` reads.
    n_threads : int, optional
        The threads the call runs on (1 to 256).

    Returns
    -------
    LayerNormLstmResult
        ``(h, hL, cL)``; :class:`LayerNormLstmResultWithWorkspace` with
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
    >>> sL, bS, nIn, nOut = 5, 2, 3, 4
    >>> Wx, Wh = rng.normal(size=(nIn, 4 * nOut)), rng.normal(size=(nOut, 4 * nOut))
    >>> b, gamma = np.zeros(4 * nOut), np.ones((2, 4 * nOut))
    >>> gamma_h, beta_h, hI = np.ones(nOut), np.zeros(nOut), np.zeros((bS, nOut))
    >>> r = cells.layerNormLstmTimeLoop(rng.normal(size=(sL, bS, nIn)), Wx, Wh, b, gamma,
    ...                                 gamma_h, beta_h, hI, hI, zoneout=0.1)
    >>> r.h.shape, r.cL.shape
    ((5, 2, 4), (2, 4))
    """
    keep = check.flag("return_workspace", return_workspace)
    fwd = check.flag("forward", forward)
    dims, P = _checked(x, Wx, Wh, b, gamma, gamma_h, beta_h, hI, cI)
    sL, bS, _, nOut = dims
    lengths = check.seq_len(seq_len, sL, bS, x)
    zone = check.zoneout(zoneout, sL, bS, nOut, x)
    h, hL, cL, c, gates, aux = _haste.forward(_backend.of(x), "layer_norm_lstm", dims, x, Wx, Wh,
                                              None, P, hI, cI, keep, check_n_threads(n_threads),
                                              lengths, fwd, zone)
    if not keep:
        return LayerNormLstmResult(h, hL, cL)
    workspace = LayerNormLstmWorkspace(h, c, gates, aux,
                                       None if lengths is None else lengths.copy(), fwd,
                                       None if zone is None else zone.copy())
    return LayerNormLstmResultWithWorkspace(h, hL, cL, workspace)


def layerNormLstmTimeLoopBp(x: np.ndarray, Wx: np.ndarray, Wh: np.ndarray, b: np.ndarray,
                            gamma: np.ndarray, gamma_h: np.ndarray, beta_h: np.ndarray,
                            hI: np.ndarray, cI: np.ndarray, dLdh: Optional[np.ndarray], *,
                            dLdc: Optional[np.ndarray] = None,
                            dLdhL: Optional[np.ndarray] = None,
                            dLdcL: Optional[np.ndarray] = None,
                            workspace: Optional[LayerNormLstmWorkspace] = None, zoneout=None,
                            seq_len: Optional[np.ndarray] = None, forward: bool = True,
                            input_grad: bool = True, n_threads: Optional[int] = None
                            ) -> LayerNormLstmGrads:
    """Backpropagation through time for :func:`layerNormLstmTimeLoop`, called with its
    arguments and options.

    Parameters
    ----------
    x, Wx, Wh, b, gamma, gamma_h, beta_h, hI, cI, zoneout, seq_len, forward
        As :func:`layerNormLstmTimeLoop`.
    dLdh : numpy.ndarray, [sL, bS, nOut], or None
        The gradient arriving at every step's output.
    dLdc : numpy.ndarray, [sL, bS, nOut], optional
        The gradient arriving at every step's cell state (haste returns them, with
        ``return_state_sequence`` or ``lengths``).
    dLdhL, dLdcL : numpy.ndarray, [bS, nOut], optional
        The gradients arriving at the final states.
    workspace : LayerNormLstmWorkspace, optional
        From ``layerNormLstmTimeLoop(..., return_workspace=True)`` on the same inputs and
        options: skips recomputing the forward pass. The backward consumes it.
    input_grad : bool, default True
        False skips dL/dx (``dLdx`` is then None).
    n_threads : int, optional
        The threads the call runs on (1 to 256).

    Returns
    -------
    LayerNormLstmGrads
        The gradient of every argument, in argument order.

    Raises
    ------
    TypeError, ValueError
        As :func:`layerNormLstmTimeLoop`; also a workspace made with other options or already
        consumed.

    Examples
    --------
    >>> import numpy as np, cells
    >>> rng = np.random.default_rng(0)
    >>> sL, bS, nIn, nOut = 5, 2, 3, 4
    >>> args = (rng.normal(size=(sL, bS, nIn)), rng.normal(size=(nIn, 4 * nOut)),
    ...         rng.normal(size=(nOut, 4 * nOut)), np.zeros(4 * nOut), np.ones((2, 4 * nOut)),
    ...         np.ones(nOut), np.zeros(nOut), np.zeros((bS, nOut)), np.zeros((bS, nOut)))
    >>> g = cells.layerNormLstmTimeLoopBp(*args, np.ones((sL, bS, nOut)))
    >>> g.dLdgamma.shape
    (2, 16)
    """
    fwd = check.flag("forward", forward)
    input_grad = check.flag("input_grad", input_grad)
    dims, P = _checked(x, Wx, Wh, b, gamma, gamma_h, beta_h, hI, cI,
                       optional=("dLdh", "dLdc", "dLdhL", "dLdcL"), dLdh=dLdh,
                       dLdc=dLdc, dLdhL=dLdhL, dLdcL=dLdcL)
    sL, bS, _, nOut = dims
    check.output_grads(sL, bS, nOut, dLdh, dLdhL=dLdhL, dLdcL=dLdcL)
    if dLdc is not None:
        check.shape("dLdc", dLdc, (sL, bS, nOut), "[sL, bS, nOut]")
    lengths = check.seq_len(seq_len, sL, bS, x)
    zone = check.zoneout(zoneout, sL, bS, nOut, x)
    saved = None
    if workspace is not None:
        steps = (sL, bS)
        check.workspace(workspace, LayerNormLstmWorkspace, "layerNormLstmTimeLoopBp", x,
                        "x and hI", {"h": steps + (nOut,), "c": steps + (nOut,),
                                     "gates": steps + (GATES * nOut,),
                                     "aux": steps + (2 * GATES * nOut,)},
                        ("gates", "aux"), seq_len=lengths, forward=fwd, zoneout=zone)
        saved = workspace.h, workspace.c, workspace.gates, workspace.aux
    dLdx, dLdWx, dLdWh, _, dLdP, dLdhI, dLdcI = _haste.backward(
        _backend.of(x), "layer_norm_lstm", dims, x, Wx, Wh, None, P, hI, cI, saved, dLdh, dLdc,
        dLdhL, dLdcL, check_n_threads(n_threads), lengths, fwd, zone, input_grad)
    return LayerNormLstmGrads(dLdx, dLdWx, dLdWh, *param_grads(dLdP, nOut), dLdhI, dLdcI)


def prepare(Wx: np.ndarray, Wh: np.ndarray, b: np.ndarray, gamma: np.ndarray,
            gamma_h: np.ndarray, beta_h: np.ndarray, *, zoneout: Optional[float] = None,
            n_threads: Optional[int] = None, weights: Optional[str] = None) -> PreparedNet:
    """Prepare a LayerNorm LSTM's weights for many inference calls (serving): validated and
    packed once.

    Parameters
    ----------
    Wx, Wh, b, gamma, gamma_h, beta_h
        As :func:`layerNormLstmTimeLoop` takes them.
    zoneout : float, optional
        haste's zoneout in eval mode: every step's h = zoneout·hPrev + (1 - zoneout)·hNew.
    n_threads : int or None
        The threads of every call (a call's own n_threads overrides it).
    weights : None, "int8" or "bfloat16"
        The form the weights are kept in (the Serving guide).

    Returns
    -------
    PreparedNet
        ``h, state = net(x, state)`` with state an LstmState (h, c [bS, nOut]).

    Raises
    ------
    TypeError, ValueError
        As :func:`cells.lstm.prepare`.

    Examples
    --------
    >>> import numpy as np, cells
    >>> rng = np.random.default_rng(0)
    >>> net = cells.layer_norm_lstm.prepare(rng.normal(size=(3, 8)), rng.normal(size=(2, 8)),
    ...                                     np.zeros(8), np.ones((2, 8)), np.ones(2),
    ...                                     np.zeros(2))
    >>> h, state = net(rng.normal(size=(5, 1, 3)))
    >>> h.shape, state.c.shape
    ((5, 1, 2), (1, 2))
    """
    zoneout = check.zoneout_probability(zoneout)
    options = {"zoneout": zoneout, "n_threads": check_n_threads(n_threads),
               "weights": weights_option(weights)}
    check.numpy_weights(Wx=Wx, Wh=Wh, b=b, gamma=gamma, gamma_h=gamma_h, beta_h=beta_h)
    check.ndim("Wh", Wh, 2, "[nOut, 4*nOut]")
    check.ndim("Wx", Wx, 2, "[nIn, 4*nOut]")
    x, hI, cI = check.no_inputs(Wx.dtype, Wx.shape[0], Wh.shape[0], Wh.shape[0])
    (_, _, nIn, nOut), P = _checked(x, Wx, Wh, b, gamma, gamma_h, beta_h, hI, cI)
    return prepare_net("layer_norm_lstm", LstmState, options, "layer_norm_lstm", nIn, nOut,
                       Wx.dtype, Wx=Wx, Wh=Wh, P=P, zoneout=zoneout)


def _checked(x, Wx, Wh, b, gamma, gamma_h, beta_h, hI, cI, optional=(), **grads):
    """Check the arguments; return (dims, P), P the time loop's (loop_params)."""
    dims = check.arguments(FAMILY, optional=optional, x=x, Wx=Wx, Wh=Wh, b=b, gamma=gamma,
                           gamma_h=gamma_h, beta_h=beta_h, hI=hI, cI=cI, **grads)
    return dims, loop_params(b, gamma, gamma_h, beta_h)

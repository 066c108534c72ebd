"""haste's LayerNorm GRU (lmnt-com/haste's LayerNormGRU), with zoneout.

Shapes use libnd4j's names: sL time steps, bS batch rows, nIn inputs, nOut units. Products are
row-vector, and the gate blocks are haste's (z, r, h), so that haste's parameters are the
arguments as they are (kernel = Wx, recurrent_kernel = Wh, bias = b, recurrent_bias = bh,
gamma)::

    vx = gamma[0]∘LN(x·Wx) + b,   vh = gamma[1]∘LN(hPrev·Wh) + bh
    z = σ(vx_z + vh_z),  r = σ(vx_r + vh_r),  g = tanh(vx_h + r∘vh_h)
    h = z∘hPrev + (1 - z)∘g

(linear-before-reset: r multiplies the recurrent side after its product, haste's only GRU).
LN(v) = (v - mean(v)) / sqrt(var(v) + 1e-5) over the whole row of 3nOut values, var the
biased variance: torch.nn.functional.layer_norm's, as haste calls it; neither LayerNorm has a
bias of its own (b and bh are added after them).

zoneout (haste's): None; a probability p, haste's eval mode,
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
from cells._families.layer_norm_gru import FAMILY, GATES, loop_params, param_grads
from cells._prepared import GruState, PreparedNet, prepare_net, weights_option
from cells._threads import check_n_threads


class LayerNormGruWorkspace(NamedTuple):
    """What ``layerNormGruTimeLoop(..., return_workspace=True)`` keeps for
    :func:`layerNormGruTimeLoopBp`; the backward consumes it (it overwrites gates and aux with
    gradients and leaves them read-only).

    Attributes
    ----------
    h : numpy.ndarray, [sL, bS, nOut]
    gates : numpy.ndarray, [sL, bS, 3nOut]
        z, r, g of every step.
    aux : numpy.ndarray, [sL, bS, 6nOut]
        Every step's hPrev·Wh and x·Wx, before their LayerNorms.
    seq_len, forward, zoneout
        The options it was made with (zoneout as the time loop takes it).
    """

    h: np.ndarray
    gates: np.ndarray
    aux: np.ndarray
    seq_len: Optional[np.ndarray]
    forward: bool
    zoneout: Optional[np.ndarray]


class LayerNormGruTimeLoopWithWorkspace(NamedTuple):
    """What ``layerNormGruTimeLoop(..., return_workspace=True)`` returns: every step's state h
    [sL, bS, nOut] and the workspace."""

    h: np.ndarray
    workspace: LayerNormGruWorkspace


class LayerNormGruGrads(NamedTuple):
    """The gradients :func:`layerNormGruTimeLoopBp` returns, each of its argument's shape
    (dLdx None with ``input_grad=False``), the weights' summed over time."""

    dLdx: Optional[np.ndarray]
    dLdWx: np.ndarray
    dLdWh: np.ndarray
    dLdb: np.ndarray
    dLdbh: np.ndarray
    dLdgamma: np.ndarray
    dLdhI: np.ndarray


def layerNormGruTimeLoop(x: np.ndarray, Wx: np.ndarray, Wh: np.ndarray, b: np.ndarray,
                         bh: np.ndarray, gamma: np.ndarray, hI: np.ndarray, *, zoneout=None,
                         seq_len: Optional[np.ndarray] = None, forward: bool = True,
                         return_workspace: bool = False, n_threads: Optional[int] = None
                         ) -> Union[np.ndarray, LayerNormGruTimeLoopWithWorkspace]:
    """A LayerNorm GRU over a sequence (the module docstring gives the formulas).

    Parameters
    ----------
    x : numpy.ndarray, [sL, bS, nIn]
        The inputs, time-major; float32 or float64.
    Wx : numpy.ndarray, [nIn, 3nOut]
        haste's kernel, gate blocks z, r, h.
    Wh : numpy.ndarray, [nOut, 3nOut]
        haste's recurrent_kernel (after DropConnect, if any).
    b, bh : numpy.ndarray, [3nOut]
        haste's bias and recurrent_bias.
    gamma : numpy.ndarray, [2, 3nOut]
        The gains of LN(x·Wx) (row 0) and LN(hPrev·Wh) (row 1).
    hI : numpy.ndarray, [bS, nOut]
        The initial state.
    zoneout : None, float or numpy.ndarray [sL, bS, nOut]
        None; p, haste's eval mode; or the mask of haste's training mode.
    seq_len : numpy.ndarray of int, [bS], optional
        Row b runs only its first ``seq_len[b]`` steps; its outputs after them are 0 and its
        state stays the one after its last valid step. (haste's ``lengths`` differs: it masks
        nothing; cells.haste keeps haste's meaning.)
    forward : bool, default True
        False runs each row's valid steps in reverse time order.
    return_workspace : bool, default False
        Also return the workspace :func:`layerNormGruTimeLoopBp` reads.
    n_threads : int, optional
        The threads the call runs on (1 to 256).

    Returns
    -------
    h : numpy.ndarray, [sL, bS, nOut]
        The state after every step; :class:`LayerNormGruTimeLoopWithWorkspace` with
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
    >>> Wx, Wh = rng.normal(size=(nIn, 3 * nOut)), rng.normal(size=(nOut, 3 * nOut))
    >>> b, gamma = np.zeros(3 * nOut), np.ones((2, 3 * nOut))
    >>> cells.layerNormGruTimeLoop(rng.normal(size=(sL, bS, nIn)), Wx, Wh, b, b, gamma,
    ...                            np.zeros((bS, nOut))).shape
    (5, 2, 4)
    """
    keep = check.flag("return_workspace", return_workspace)
    fwd = check.flag("forward", forward)
    dims, P = _checked(x, Wx, Wh, b, bh, gamma, hI)
    sL, bS, _, nOut = dims
    lengths = check.seq_len(seq_len, sL, bS, x)
    zone = check.zoneout(zoneout, sL, bS, nOut, x)
    h, _, _, _, gates, aux = _haste.forward(_backend.of(x), "layer_norm_gru", dims, x, Wx, Wh, None,
                                            P, hI, None, keep, check_n_threads(n_threads), lengths,
                                            fwd, zone)
    if not keep:
        return h
    workspace = LayerNormGruWorkspace(h, gates, aux, None if lengths is None else lengths.copy(),
                                      fwd, None if zone is None else zone.copy())
    return LayerNormGruTimeLoopWithWorkspace(h, workspace)


def layerNormGruTimeLoopBp(x: np.ndarray, Wx: np.ndarray, Wh: np.ndarray, b: np.ndarray,
                           bh: np.ndarray, gamma: np.ndarray, hI: np.ndarray,
                           dLdh: Optional[np.ndarray], *, dLdhLast: Optional[np.ndarray] = None,
                           workspace: Optional[LayerNormGruWorkspace] = None, zoneout=None,
                           seq_len: Optional[np.ndarray] = None, forward: bool = True,
                           input_grad: bool = True, n_threads: Optional[int] = None
                           ) -> LayerNormGruGrads:
    """Backpropagation through time for :func:`layerNormGruTimeLoop`, called with its
    arguments and options.

    Parameters
    ----------
    x, Wx, Wh, b, bh, gamma, hI, zoneout, seq_len, forward
        As :func:`layerNormGruTimeLoop`.
    dLdh : numpy.ndarray, [sL, bS, nOut], or None
        The gradient arriving at every step's output (ignored at padded steps).
    dLdhLast : numpy.ndarray, [bS, nOut], optional
        The gradient arriving at each row's final state.
    workspace : LayerNormGruWorkspace, optional
        From ``layerNormGruTimeLoop(..., return_workspace=True)`` on the same inputs and
        options: skips recomputing the forward pass. The backward consumes it.
    input_grad : bool, default True
        False skips dL/dx (``dLdx`` is then None).
    n_threads : int, optional
        The threads the call runs on (1 to 256).

    Returns
    -------
    LayerNormGruGrads
        The gradient of every argument, in argument order.

    Raises
    ------
    TypeError, ValueError
        As :func:`layerNormGruTimeLoop`; also a workspace made with other options or already
        consumed.

    Examples
    --------
    >>> import numpy as np, cells
    >>> rng = np.random.default_rng(0)
    >>> sL, bS, nIn, nOut = 5, 2, 3, 4
    >>> args = (rng.normal(size=(sL, bS, nIn)), rng.normal(size=(nIn, 3 * nOut)),
    ...         rng.normal(size=(nOut, 3 * nOut)), np.zeros(3 * nOut), np.zeros(3 * nOut),
    ...         np.ones((2, 3 * nOut)), np.zeros((bS, nOut)))
    >>> cells.layerNormGruTimeLoopBp(*args, np.ones((sL, bS, nOut))).dLdgamma.shape
    (2, 12)
    """
    fwd = check.flag("forward", forward)
    input_grad = check.flag("input_grad", input_grad)
    dims, P = _checked(x, Wx, Wh, b, bh, gamma, hI, optional=("dLdh", "dLdhLast"),
                       dLdh=dLdh, dLdhLast=dLdhLast)
    sL, bS, _, nOut = dims
    check.output_grads(sL, bS, nOut, dLdh, dLdhLast=dLdhLast)
    lengths = check.seq_len(seq_len, sL, bS, x)
    zone = check.zoneout(zoneout, sL, bS, nOut, x)
    saved = None
    if workspace is not None:
        steps = (sL, bS)
        check.workspace(workspace, LayerNormGruWorkspace, "layerNormGruTimeLoopBp", x,
                        "x and hI", {"h": steps + (nOut,), "gates": steps + (GATES * nOut,),
                                     "aux": steps + (2 * GATES * nOut,)},
                        ("gates", "aux"), seq_len=lengths, forward=fwd, zoneout=zone)
        saved = workspace.h, None, workspace.gates, workspace.aux
    dLdx, dLdWx, dLdWh, _, dLdP, dLdhI, _ = _haste.backward(_backend.of(x), "layer_norm_gru", dims,
                                                            x, Wx, Wh, None, P, hI, None, saved,
                                                            dLdh, None, dLdhLast, None,
                                                            check_n_threads(n_threads), lengths,
                                                            fwd, zone, input_grad)
    return LayerNormGruGrads(dLdx, dLdWx, dLdWh, *param_grads(dLdP, nOut), dLdhI)


def prepare(Wx: np.ndarray, Wh: np.ndarray, b: np.ndarray, bh: np.ndarray, gamma: np.ndarray,
            *, zoneout: Optional[float] = None, n_threads: Optional[int] = None,
            weights: Optional[str] = None) -> PreparedNet:
    """Prepare a LayerNorm GRU's weights for many inference calls (serving): validated and
    packed once.

    Parameters
    ----------
    Wx, Wh, b, bh, gamma
        As :func:`layerNormGruTimeLoop` takes them.
    zoneout : float, optional
        haste's zoneout in eval mode: every step's h = zoneout·hPrev + (1 - zoneout)·hNew.
    n_threads : int or None
        The threads of every call (a call's own n_threads overrides it).
    weights : None, "int8" or "bfloat16"
        The form the weights are kept in (the Serving guide).

    Returns
    -------
    PreparedNet
        ``h, state = net(x, state)`` with state a GruState (h [bS, nOut]).

    Raises
    ------
    TypeError, ValueError
        As :func:`cells.gru.prepare`.

    Examples
    --------
    >>> import numpy as np, cells
    >>> rng = np.random.default_rng(0)
    >>> net = cells.layer_norm_gru.prepare(rng.normal(size=(3, 6)), rng.normal(size=(2, 6)),
    ...                                    np.zeros(6), np.zeros(6), np.ones((2, 6)))
    >>> h, state = net(rng.normal(size=(5, 1, 3)))
    >>> h.shape, state.h.shape
    ((5, 1, 2), (1, 2))
    """
    zoneout = check.zoneout_probability(zoneout)
    options = {"zoneout": zoneout, "n_threads": check_n_threads(n_threads),
               "weights": weights_option(weights)}
    check.numpy_weights(Wx=Wx, Wh=Wh, b=b, bh=bh, gamma=gamma)
    check.ndim("Wh", Wh, 2, "[nOut, 3*nOut]")
    check.ndim("Wx", Wx, 2, "[nIn, 3*nOut]")
    x, hI = check.no_inputs(Wx.dtype, Wx.shape[0], Wh.shape[0])
    (_, _, nIn, nOut), P = _checked(x, Wx, Wh, b, bh, gamma, hI)
    return prepare_net("layer_norm_gru", GruState, options, "layer_norm_gru", nIn, nOut,
                       Wx.dtype, Wx=Wx, Wh=Wh, P=P, zoneout=zoneout)


def _checked(x, Wx, Wh, b, bh, gamma, hI, optional=(), **grads):
    """Check the arguments; return (dims, P), P the time loop's (loop_params)."""
    dims = check.arguments(FAMILY, optional=optional, x=x, Wx=Wx, Wh=Wh, b=b, bh=bh,
                           gamma=gamma, hI=hI, **grads)
    return dims, loop_params(b, bh, gamma)

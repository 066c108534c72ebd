"""libnd4j's lstmLayer and lstmLayer_bp ops, whole: what the C++ ops compute, quirks included.

    lstmLayer(x, Wx, Wr, b=None, seqLen=None, hI=None, cI=None, Wp=None, *, dataFormat=0,
              directionMode=0, gateAct=2, gateAlpha=0.0, gateBeta=0.0, cellAct=0,
              cellAlpha=0.0, cellBeta=0.0, outAct=0, outAlpha=0.0, outBeta=0.0, cellClip=0.0,
              retFullSeq=True, retLastH=False, retLastC=False, n_threads=None)
        -> tuple of the requested outputs, in the order (h, hL, cL)
    lstmLayer_bp(x, Wx, Wr, b=None, seqLen=None, hI=None, cI=None, Wp=None, dLdh=None,
                 dLdhL=None, dLdcL=None, *, <the same keywords>)
        -> LstmLayerGrads (dLdx, dLdWx, dLdWr, dLdb, dLdhI, dLdcI, dLdWp), None for an input
           that is not given

The arguments are libnd4j's: its inputs in its order (an optional one given or None where
libnd4j's hasBiases, hasSeqLen, hasInitH, hasInitC, hasPH say), its I-args, T-args and B-args as
keywords. The math of one step is cells.lstm's (gate blocks i, f, g, o; peepholes Wp in blocks
i, f, o; gateAct for i, f and o, cellAct for the candidate g, outAct for c before the output
gate; activation codes 0-10 as cells.lstm.ACTIVATIONS).

Shapes (sL steps, bS batch rows, nIn inputs, nOut units; D = 1 direction for directionMode 0
and 1, 2 for 2, 3 and 4):
    x        dataFormat 0 [sL, bS, nIn], 1 [bS, sL, nIn], 2 [bS, nIn, sL], 3 [sL, bS, nIn]
    Wx       [nIn, 4nOut], bidirectional [2, nIn, 4nOut] ([0] forward, [1] backward)
    Wr       [nOut, 4nOut] or [2, nOut, 4nOut]
    b        [4nOut] or [2, 4nOut]
    seqLen   [bS], integers or floats (truncated, as libnd4j reads them) in [0, sL]
    hI, cI   [bS, nOut] or [2, bS, nOut]
    Wp       [3nOut] or [2, 3nOut]
    h        directionMode 0, 1, 2: x's layout with nOut features ([sL, bS, nOut], ...);
             3: 2nOut features (the forward direction's first); 4 (dataFormat 0 or 3):
             [sL, 2, bS, nOut]
    hL, cL   [bS, nOut] or [2, bS, nOut] (never summed or concatenated)

directionMode: 0 forward, 1 backward, 2 bidirectional with h = h_fwd + h_bwd, 3 bidirectional
with h concatenated on the feature axis, 4 bidirectional with an extra dimension.

What libnd4j computes, where PyTorch or ONNX differ (README.md, "lstmLayer"):
  - seqLen: row e runs L = seqLen[e] steps. Forward: t = 0 ... L-1 (the prefix). The backward
    half of a bidirectional layer: t = L-1 ... 0 (the reversed prefix, as PyTorch's packed
    sequences and ONNX's reverse direction). directionMode 1: t = sL-1 ... sL-L, the LAST L
    steps (the suffix, right-aligned), with hL = h[sL-L]. h is 0 at the steps a row does not
    run; a row with L = 0 has hL = cL = 0 (not hI, cI), and no gradient reaches its hI, cI.
  - Without seqLen the backward directions run t = sL-1 ... 0, every h at its own time index,
    and hL = cL = the state after t = 0.
  - gateAlpha ... outBeta and cellClip are rounded to float32 (libnd4j's T-args are floats),
    also for float64 data. cellClip clamps c to [-cellClip, cellClip] (0: none); the gradient
    passes only where |c| < cellClip.
  - dLdh, dLdhL, dLdcL may each be a scalar (a Python number or a 0-d array), broadcast to
    the shape of the output it stands for.
The time loops of cells.lstm keep their own meaning (forward=False is ONNX's reverse): this
module maps the op onto them, one time-loop call per direction. directionMode 1 with seqLen runs
the forward time loop on the time-reversed x (its prefix is x's suffix) and reverses h back.

Errors where libnd4j is undefined or refuses: an unknown activation code, dataFormat 3 without
directionMode 4 or directionMode 4 with dataFormat 1 or 2, seqLen values outside [0, sL], no
output requested (forward) or no gradient given (bp), a negative cellClip: each a ValueError
naming the argument. lstmLayer_bp takes the gradients of the outputs the same ret* keywords
request: dLdh exactly when retFullSeq, dLdhL when retLastH, dLdcL when retLastC.
"""
import numbers
from typing import NamedTuple, Optional

import numpy as np

from cells import _arrays
from cells import _validate as check
from cells import lstm

# dataFormat's names (libnd4j's LSTMDataFormat) and x's layout in each.
DATA_FORMATS = ("TNS", "NTS", "NST", "T2NS")
X_LAYOUTS = ("[sL, bS, nIn]", "[bS, sL, nIn]", "[bS, nIn, sL]", "[sL, bS, nIn]")
DIRECTION_MODES = ("forward", "backward", "bidirectional sum", "bidirectional concat",
                   "bidirectional extra dimension")


class LstmLayerGrads(NamedTuple):
    """What :func:`lstmLayer_bp` returns: each gradient with its input's shape.

    Attributes
    ----------
    dLdx : numpy.ndarray or None
    dLdWx : numpy.ndarray or None
    dLdWr : numpy.ndarray or None
    dLdb : numpy.ndarray or None
        None for an input not given.
    dLdhI : numpy.ndarray or None
        None for an input not given.
    dLdcI : numpy.ndarray or None
        None for an input not given.
    dLdWp : numpy.ndarray or None
        None for an input not given.
    """

    dLdx: np.ndarray
    dLdWx: np.ndarray
    dLdWr: np.ndarray
    dLdb: Optional[np.ndarray]
    dLdhI: Optional[np.ndarray]
    dLdcI: Optional[np.ndarray]
    dLdWp: Optional[np.ndarray]


def lstmLayer(x: np.ndarray, Wx: np.ndarray, Wr: np.ndarray, b: Optional[np.ndarray] = None,
              seqLen: Optional[np.ndarray] = None, hI: Optional[np.ndarray] = None,
              cI: Optional[np.ndarray] = None, Wp: Optional[np.ndarray] = None, *,
              dataFormat: int = 0, directionMode: int = 0, gateAct: int = 2,
              gateAlpha: float = 0.0, gateBeta: float = 0.0, cellAct: int = 0,
              cellAlpha: float = 0.0, cellBeta: float = 0.0, outAct: int = 0,
              outAlpha: float = 0.0, outBeta: float = 0.0, cellClip: float = 0.0,
              retFullSeq: bool = True, retLastH: bool = False, retLastC: bool = False,
              n_threads: Optional[int] = None) -> tuple:
    """libnd4j's lstmLayer op, whole: its inputs, I-args, T-args and B-args one to one.

    The module docstring (and the user guide's lstmLayer section) states what libnd4j computes
    where PyTorch and ONNX differ: the backward direction with seqLen, rows of length 0, the
    float32 T-args.

    Parameters
    ----------
    x : numpy.ndarray
        dataFormat 0 [sL, bS, nIn], 1 [bS, sL, nIn], 2 [bS, nIn, sL], 3 [sL, bS, nIn]; float32
        or float64.
    Wx : numpy.ndarray, [nIn, 4nOut] (bidirectional: [2, nIn, 4nOut], [0] forward)
    Wr : numpy.ndarray, [nOut, 4nOut] (bidirectional: [2, nOut, 4nOut])
    b : numpy.ndarray, [4nOut] (bidirectional: [2, 4nOut]), optional
    seqLen : numpy.ndarray, [bS], optional
        Lengths in [0, sL], integers or floats (truncated, as libnd4j reads them).
    hI, cI : numpy.ndarray, [bS, nOut] (bidirectional: [2, bS, nOut]), optional
        Initial states (None: zeros).
    Wp : numpy.ndarray, [3nOut] (bidirectional: [2, 3nOut]), optional
        Peepholes (i, f, o).
    dataFormat : int, default 0
        0 TNS, 1 NTS, 2 NST, 3 T2NS (x as TNS, with directionMode 4 only).
    directionMode : int, default 0
        0 forward, 1 backward, 2 bidirectional sum, 3 bidirectional concat (2nOut features,
        forward first), 4 bidirectional with an extra dimension (h [sL, 2, bS, nOut]).
    gateAct, cellAct, outAct : int, default 2, 0, 0
        Activation codes (:data:`cells.lstm.ACTIVATIONS`) of i, f, o; of the candidate; of c in h.
    gateAlpha, gateBeta, cellAlpha, cellBeta, outAlpha, outBeta : float, default 0.0
        The activations' parameters (rounded to float32, as libnd4j's T-args).
    cellClip : float, default 0.0
        When positive, c is clipped to [-cellClip, cellClip].
    retFullSeq, retLastH, retLastC : bool, default True, False, False
        Which outputs to return: h, hL, cL.
    n_threads : int, optional
        The threads the call runs on (1 to 256); None: as many as a step's work gains from
        (the Threads guide), at most ``OMP_NUM_THREADS`` when set, else the cores the process
        may use.

    Returns
    -------
    tuple of numpy.ndarray
        The requested outputs in the order (h, hL, cL): h in x's layout with nOut features
        (2nOut for directionMode 3; [sL, 2, bS, nOut] for 4), hL and cL [bS, nOut]
        ([2, bS, nOut] bidirectional).

    Raises
    ------
    TypeError
        An argument that is not a float32 or float64 array, or arrays of different dtypes.
    ValueError
        A wrong shape, a seqLen outside [0, sL], an activation code outside 0-10, a combination
        of dataFormat and directionMode that libnd4j does not define, no output requested, a
        negative cellClip.

    Examples
    --------
    >>> import numpy as np, cells
    >>> rng = np.random.default_rng(0)
    >>> x = rng.normal(size=(2, 5, 3))                          # dataFormat 1: [bS, sL, nIn]
    >>> Wx, Wr = rng.normal(size=(2, 3, 16)), rng.normal(size=(2, 4, 16))
    >>> h, hL = cells.lstmLayer(x, Wx, Wr, dataFormat=1, directionMode=3, retLastH=True)
    >>> h.shape, hL.shape
    ((2, 5, 8), (2, 2, 4))
    """
    op = _Op(x, Wx, Wr, b, seqLen, hI, cI, Wp, dataFormat, directionMode,
             (gateAct, gateAlpha, gateBeta, cellAct, cellAlpha, cellBeta, outAct, outAlpha,
              outBeta), cellClip, retFullSeq, retLastH, retLastC, n_threads)
    if not (op.ret_h or op.ret_hL or op.ret_cL):
        raise ValueError("retFullSeq, retLastH, retLastC: expected at least one output "
                         "requested, got all False")
    runs = [op.forward(d) for d in range(op.D)]
    outputs = []
    if op.ret_h:
        outputs.append(op.to_layout([h for h, _, _ in runs]))
    if op.ret_hL:
        outputs.append(op.stack([hL for _, hL, _ in runs]))
    if op.ret_cL:
        outputs.append(op.stack([cL for _, _, cL in runs]))
    return tuple(outputs)


def lstmLayer_bp(x: np.ndarray, Wx: np.ndarray, Wr: np.ndarray, b: Optional[np.ndarray] = None,
                 seqLen: Optional[np.ndarray] = None, hI: Optional[np.ndarray] = None,
                 cI: Optional[np.ndarray] = None, Wp: Optional[np.ndarray] = None,
                 dLdh: Optional[np.ndarray] = None, dLdhL: Optional[np.ndarray] = None,
                 dLdcL: Optional[np.ndarray] = None, *,
                 dataFormat: int = 0, directionMode: int = 0, gateAct: int = 2,
                 gateAlpha: float = 0.0, gateBeta: float = 0.0, cellAct: int = 0,
                 cellAlpha: float = 0.0, cellBeta: float = 0.0, outAct: int = 0,
                 outAlpha: float = 0.0, outBeta: float = 0.0, cellClip: float = 0.0,
                 retFullSeq: bool = True, retLastH: bool = False, retLastC: bool = False,
                 n_threads: Optional[int] = None) -> LstmLayerGrads:
    """libnd4j's lstmLayer_bp: the gradients of lstmLayer's inputs.

    L = sum(dLdh∘h) + sum(dLdhL∘hL) + sum(dLdcL∘cL) for the outputs lstmLayer returns with the
    same arguments.

    Parameters
    ----------
    x, Wx, Wr, b, seqLen, hI, cI, Wp
        As :func:`lstmLayer`.
    dLdh, dLdhL, dLdcL : numpy.ndarray or float, optional
        The gradients of the outputs, each given exactly when its ret* keyword requests the
        output; an array of the output's shape or a scalar (broadcast, as libnd4j).
    dataFormat, directionMode, gateAct, ..., retLastC
        As :func:`lstmLayer`.
    n_threads : int, optional
        The threads the call runs on (1 to 256); None: as many as a step's work gains from
        (the Threads guide), at most ``OMP_NUM_THREADS`` when set, else the cores the process
        may use.

    Returns
    -------
    LstmLayerGrads
        ``(dLdx, dLdWx, dLdWr, dLdb, dLdhI, dLdcI, dLdWp)``, each with its input's shape; None
        for an input not given.

    Raises
    ------
    TypeError, ValueError
        As :func:`lstmLayer`; also a gradient given for an output not requested, or none given.

    Examples
    --------
    >>> import numpy as np, cells
    >>> rng = np.random.default_rng(0)
    >>> x, Wx, Wr = rng.normal(size=(5, 2, 3)), rng.normal(size=(3, 16)), rng.normal(size=(4, 16))
    >>> g = cells.lstmLayer_bp(x, Wx, Wr, dLdh=np.ones((5, 2, 4)))
    >>> g.dLdx.shape, g.dLdb is None
    ((5, 2, 3), True)
    """
    op = _Op(x, Wx, Wr, b, seqLen, hI, cI, Wp, dataFormat, directionMode,
             (gateAct, gateAlpha, gateBeta, cellAct, cellAlpha, cellBeta, outAct, outAlpha,
              outBeta), cellClip, retFullSeq, retLastH, retLastC, n_threads)
    given = {"dLdh": dLdh, "dLdhL": dLdhL, "dLdcL": dLdcL}
    for (name, g), (flag, on) in zip(given.items(), (("retFullSeq", op.ret_h),
                                                     ("retLastH", op.ret_hL),
                                                     ("retLastC", op.ret_cL))):
        if (g is not None) != on:
            raise ValueError(f"{name}: expected {'an array' if on else 'None'} with "
                             f"{flag}={on} (libnd4j reads {name} exactly when {flag}), got "
                             f"{'None' if g is None else type(g).__name__}")
    if dLdh is None and dLdhL is None and dLdcL is None:
        raise ValueError("dLdh, dLdhL, dLdcL: expected at least one gradient, got none "
                         "(retFullSeq, retLastH, retLastC all False)")
    dLdh = op.output_grad("dLdh", dLdh, op.h_shape, op.h_meaning)
    dLdhL = op.output_grad("dLdhL", dLdhL, op.state_shape, op.state_meaning)
    dLdcL = op.output_grad("dLdcL", dLdcL, op.state_shape, op.state_meaning)
    h_grads = op.from_layout(dLdh)
    grads = [op.backward(d, h_grads[d], op.per_direction(dLdhL, d), op.per_direction(dLdcL, d))
             for d in range(op.D)]
    dLdx = grads[0].dLdx if op.D == 1 else grads[0].dLdx + grads[1].dLdx
    return LstmLayerGrads(
        op.x_to_layout(dLdx),
        *(op.stack([getattr(g, name) for g in grads]) if given_input is not None else None
          for name, given_input in (("dLdWx", Wx), ("dLdWr", Wr), ("dLdb", b), ("dLdhI", hI),
                                    ("dLdcI", cI), ("dLdWp", Wp))))


# ---------------------------------------------------------------------------------------------
# The mapping onto cells.lstm's time loops
# ---------------------------------------------------------------------------------------------

class _Op:
    """One call's checked arguments, and the mapping of its directions onto the time loops."""

    def __init__(self, x, Wx, Wr, b, seqLen, hI, cI, Wp, dataFormat, directionMode, acts,
                 cellClip, retFullSeq, retLastH, retLastC, n_threads):
        self.df = _choice("dataFormat", dataFormat,
                          [f"{name} {x}" for name, x in zip(DATA_FORMATS, X_LAYOUTS)])
        self.dm = _choice("directionMode", directionMode, DIRECTION_MODES)
        if self.df == 3 and self.dm != 4:
            raise ValueError(f"dataFormat: 3 (T2NS) goes with directionMode=4 only (libnd4j "
                             f"requires it), got directionMode={self.dm}")
        if self.dm == 4 and self.df in (1, 2):
            raise ValueError(f"directionMode: 4 (extra dimension) is undefined in libnd4j with "
                             f"dataFormat={self.df}; use dataFormat 0 or 3")
        gate, gate_alpha, gate_beta, cell, cell_alpha, cell_beta, out, out_alpha, out_beta = acts
        self.acts = {}
        for kind, spec in (("gate", ("gateAct", gate, "gateAlpha", gate_alpha, "gateBeta",
                                     gate_beta)),
                           ("cell", ("cellAct", cell, "cellAlpha", cell_alpha, "cellBeta",
                                     cell_beta)),
                           ("out", ("outAct", out, "outAlpha", out_alpha, "outBeta", out_beta))):
            code, alpha, beta = lstm.activation(*spec)
            # libnd4j's T-args are float32, also for double data.
            self.acts.update({f"{kind}_act": code, f"{kind}_alpha": _float32(alpha),
                              f"{kind}_beta": _float32(beta)})
        self.clip = _float32(check.cell_clip(cellClip, "cellClip"))
        self.ret_h = check.flag("retFullSeq", retFullSeq)
        self.ret_hL = check.flag("retLastH", retLastH)
        self.ret_cL = check.flag("retLastC", retLastC)
        self.n_threads = n_threads
        check.real_arrays(optional=("b", "hI", "cI", "Wp"), x=x, Wx=Wx, Wr=Wr, b=b, hI=hI,
                          cI=cI, Wp=Wp)
        self.dtype, self.xp = x.dtype, _arrays.array_module(x)
        check.ndim("x", x, 3, f"{DATA_FORMATS[self.df]} {X_LAYOUTS[self.df]}")
        self.D = 1 if self.dm < 2 else 2
        sL, bS, nIn = _x_dims(x.shape, self.df)
        two = "" if self.D == 1 else "2, "
        check.ndim("Wr", Wr, 2 + (self.D == 2), f"[{two}nOut, 4*nOut]")
        nOut = Wr.shape[-2]
        self.sL, self.bS, self.nIn, self.nOut = sL, bS, nIn, nOut
        lead = (2,) if self.D == 2 else ()
        for name, a, shape, meaning in (
                ("Wr", Wr, (nOut, 4 * nOut), "nOut, 4*nOut"),
                ("Wx", Wx, (nIn, 4 * nOut), "nIn, 4*nOut"),
                ("b", b, (4 * nOut,), "4*nOut"),
                ("hI", hI, (bS, nOut), "bS, nOut"),
                ("cI", cI, (bS, nOut), "bS, nOut"),
                ("Wp", Wp, (3 * nOut,), "3*nOut")):
            if a is not None:
                check.shape(name, a, lead + shape, f"[{two}{meaning}] (nIn, bS from x and "
                            f"dataFormat={self.df}, nOut from Wr, directionMode={self.dm})")
        self.lengths = _seq_len(seqLen, sL, bS, x)
        # The rows of length 0, on x's device.
        self.empty_rows = None if self.lengths is None else self.xp.asarray(self.lengths == 0)
        self.x_tns = self.xp.ascontiguousarray(_to_tns(x, self.df))  # a copy for dataFormat 1, 2
        self.inputs = dict(Wx=Wx, Wr=Wr, b=b, hI=hI, cI=cI, Wp=Wp)
        F = 2 * nOut if self.dm == 3 else nOut
        self.h_shape, self.h_meaning = _h_shape(self.df, self.dm, sL, bS, F)
        self.state_shape = lead + (bS, nOut)
        self.state_meaning = f"[{two}bS, nOut]"

    # -- the directions ---------------------------------------------------------------------

    def _direction(self, d):
        """The time loop's arguments of direction d, and whether it runs the suffix (the time
        loop forward on the time-reversed x: directionMode 1 with seqLen)."""
        backward = self.dm == 1 or d == 1
        suffix = self.dm == 1 and self.lengths is not None
        part = {name: None if a is None else (a[d] if self.D == 2 else a)
                for name, a in self.inputs.items()}
        x = self.x_tns[::-1] if suffix else self.x_tns
        args = (x, part["Wx"], part["Wr"], part["b"], part["hI"], part["cI"])
        options = dict(Wp=part["Wp"], seq_len=self.lengths, cell_clip=self.clip,
                       forward=not backward or suffix, n_threads=self.n_threads, **self.acts)
        return args, options, suffix

    def forward(self, d):
        """Direction d's (h [sL, bS, nOut] time-major, hL, cL [bS, nOut])."""
        args, options, suffix = self._direction(d)
        h, hL, cL = lstm.lstmLayerTimeLoop(*args, **options)
        if self.lengths is not None:
            # A row of length 0 ends with zero states in libnd4j (the time loop: hI, cI).
            hL[self.empty_rows] = 0
            cL[self.empty_rows] = 0
        return (h[::-1] if suffix else h), hL, cL

    def backward(self, d, dLdh, dLdhL, dLdcL):
        """Direction d's LstmGrads, dLdx time-major; dLdh [sL, bS, nOut] time-major."""
        args, options, suffix = self._direction(d)
        if self.lengths is not None:
            # hL, cL of a row of length 0 are the constant 0: nothing flows back from them.
            dLdhL = _zero_rows(dLdhL, self.lengths, self.empty_rows)
            dLdcL = _zero_rows(dLdcL, self.lengths, self.empty_rows)
        if suffix and dLdh is not None:
            dLdh = dLdh[::-1]
        grads = lstm.lstmLayerTimeLoopBp(*args, dLdh, dLdhL=dLdhL, dLdcL=dLdcL, **options)
        return grads._replace(dLdx=grads.dLdx[::-1]) if suffix else grads

    # -- layouts ----------------------------------------------------------------------------

    def to_layout(self, hs):
        """h in the op's layout from each direction's time-major h."""
        if self.dm < 2:
            h = hs[0]
        elif self.dm == 2:
            h = hs[0] + hs[1]
        elif self.dm == 3:
            h = self.xp.concatenate(hs, axis=2)
        else:
            h = self.xp.stack(hs, axis=1)
        return self.xp.ascontiguousarray(_from_tns(h, self.df) if self.dm != 4 else h)

    def from_layout(self, dLdh):
        """Each direction's time-major [sL, bS, nOut] part of a gradient in h's layout (or
        None)."""
        if dLdh is None:
            return [None] * self.D
        if self.dm == 4:
            return [dLdh[:, 0], dLdh[:, 1]]
        g = _to_tns(dLdh, self.df)
        if self.dm == 3:
            return [g[..., :self.nOut], g[..., self.nOut:]]
        return [g] * self.D

    def x_to_layout(self, dLdx):
        """dL/dx in x's layout from its time-major sum."""
        return self.xp.ascontiguousarray(dLdx if self.df in (0, 3) else
                                         _from_tns(dLdx, self.df))

    def stack(self, parts):
        """A result with a leading direction axis when bidirectional."""
        return parts[0] if self.D == 1 else self.xp.stack(parts)

    def per_direction(self, a, d):
        """Direction d's part of a [2, ...] array when bidirectional (None stays None)."""
        return a[d] if self.D == 2 and a is not None else a

    def output_grad(self, name, g, shape, meaning):
        """A gradient at an output: None, an array of the output's shape, or a scalar (a real
        number or a 0-d array) broadcast to it."""
        if g is None:
            return None
        if isinstance(g, numbers.Real) and not isinstance(g, (bool, np.bool_)):
            return self.xp.full(shape, g, self.dtype)
        check.real_arrays(**{"x": self.x_tns, name: g})
        if g.ndim == 0:
            return self.xp.broadcast_to(g, shape).copy()
        check.shape(name, g, shape, meaning + " (or a scalar)")
        return g


def _choice(name, value, meanings):
    """An int option with len(meanings) values."""
    options = ", ".join(f"{k} {m}" for k, m in enumerate(meanings))
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name}: expected an int ({options}), got {value!r}")
    if not 0 <= value < len(meanings):
        raise ValueError(f"{name}: expected one of {options}; got {value}")
    return int(value)


def _float32(value):
    """A T-arg as libnd4j holds it: rounded to float32."""
    return float(np.float32(value))


def _x_dims(shape, df):
    """(sL, bS, nIn) of x in dataFormat df."""
    if df == 1:
        return shape[1], shape[0], shape[2]
    if df == 2:
        return shape[2], shape[0], shape[1]
    return shape


def _to_tns(a, df):
    """A [sL, bS, F] view of an array in dataFormat df's layout (0, 1, 2; 3 is 0's)."""
    return a.transpose(1, 0, 2) if df == 1 else a.transpose(2, 0, 1) if df == 2 else a


def _from_tns(a, df):
    """The inverse of _to_tns: a [sL, bS, F] array in dataFormat df's layout."""
    return a.transpose(1, 0, 2) if df == 1 else a.transpose(1, 2, 0) if df == 2 else a


def _h_shape(df, dm, sL, bS, F):
    """h's shape and its meaning in libnd4j's names."""
    if dm == 4:
        return (sL, 2, bS, F), "[sL, 2, bS, nOut]"
    feat = "2*nOut" if dm == 3 else "nOut"
    return {0: ((sL, bS, F), f"[sL, bS, {feat}]"), 1: ((bS, sL, F), f"[bS, sL, {feat}]"),
            2: ((bS, F, sL), f"[bS, {feat}, sL]")}[df]


def _seq_len(seqLen, sL, bS, x):
    """seqLen as the time loops take it (int64 [bS] on the host), from integers or floats
    (truncated towards 0, as libnd4j's e<int>), or None; a CuPy seqLen (in a call on CuPy
    arrays, x's kind) is copied to the host."""
    if seqLen is None:
        return None
    gpu = _arrays.on_gpu(x)
    if gpu and _arrays.on_gpu(seqLen):
        seqLen = seqLen.get()
    if not isinstance(seqLen, np.ndarray) or seqLen.dtype.kind not in "iuf":
        kind = seqLen.dtype if isinstance(seqLen, np.ndarray) else _arrays.type_name(seqLen)
        raise TypeError(f"seqLen: expected None or a numpy.ndarray{' or cupy.ndarray' * gpu} "
                        f"[bS] of integers or floats, got {kind}")
    lengths = np.trunc(seqLen).astype(np.int64) if seqLen.dtype.kind == "f" else seqLen
    return check.seq_len(lengths, sL, bS, x, ("seqLen", "sL", "bS"),
                         outside=" (libnd4j is undefined outside)")


def _zero_rows(g, lengths, rows):
    """g with the rows `rows` (on g's device; lengths == 0 on the host) set to 0 (a copy
    when any is), or None."""
    if g is None or not (lengths == 0).any():
        return g
    g = g.copy()
    g[rows] = 0
    return g

"""Prepared nets: a family's weights validated and packed once, then called many times, a step or
a chunk of steps at a time, with the state carried from call to call (serving).

cells.gru.prepare, cells.lstm.prepare, cells.rnn.prepare and cells.lltm.prepare check a
family's weights and options as its time loop does, and hand the time loop's form of them
(cells/_families/'s mappings) to `prepare_net`, which packs them (cells._time_loop.prepare)
into a PreparedNet. A call of the net checks only x and the state, allocates only its outputs,
and runs the one time loop on the packed weights with the GIL released.

Reproducibility: every product of a prepared net runs in fixed order (panel.h's
gemm_panels_fixed: an element's sum over K in one order, whatever the rows, the tile or the
thread), each thread multiplies whole panels of the one packed copy, and the gate math is the
same per element whoever computes it. So an output's bits do not depend on how a sequence is
cut into calls, on the other rows of the batch, or on the number of threads.
"""
from typing import NamedTuple, Optional

import numpy as np

from cells import _family_table, _time_loop
from cells._arrays import type_name
from cells._cpu import weights_as_read
from cells._families._declaration import kernel_clip
from cells._threads import check_n_threads, max_threads, threads_for_work

# n_threads=None runs a call on a second thread only where each thread gets at least
# PREPARED_WORK_PER_THREAD multiply-adds per step (benchmarks/serving.py measures the
# crossing): below it, waking a thread and meeting it at every step costs more than the
# products it takes over.
PREPARED_WORK_PER_THREAD = 256 * 1024


class GruState(NamedTuple):
    """The state a prepared GRU carries from call to call.

    Attributes
    ----------
    h : numpy.ndarray, [bS, nOut]
    """

    h: np.ndarray


class LstmState(NamedTuple):
    """The state a prepared LSTM carries from call to call.

    Attributes
    ----------
    h : numpy.ndarray, [bS, nState]
        nProj columns with Wproj, else nOut.
    c : numpy.ndarray, [bS, nOut]
        The cell state.
    """

    h: np.ndarray
    c: np.ndarray


class RnnState(NamedTuple):
    """The state a prepared RNN carries from call to call.

    Attributes
    ----------
    h : numpy.ndarray, [bS, nOut]
    """

    h: np.ndarray


class LltmState(NamedTuple):
    """The state a prepared LLTM carries from call to call.

    Attributes
    ----------
    h : numpy.ndarray, [bS, S]
    c : numpy.ndarray, [bS, S]
        The cell state.
    """

    h: np.ndarray
    c: np.ndarray


# Every family's state: one of them given to another family's net is a ValueError.
_STATES = (GruState, LstmState, RnnState, LltmState)


class NetResult(NamedTuple):
    """What a call of a :class:`PreparedNet` returns.

    Attributes
    ----------
    h : numpy.ndarray
        Every step's output, [sL, bS, nState] ([bS, nState] for a call of one step).
    state : tuple
        The state after the call (the family's State NamedTuple), to pass to the next call.
    """

    h: np.ndarray
    state: tuple


class PreparedNet:
    """A family's weights, validated and packed once for inference calls (made by
    cells.gru.prepare, cells.lstm.prepare, cells.rnn.prepare or cells.lltm.prepare).

    Call it as ``h, state = net(x, state)``: x [sL, bS, nIn] (a chunk of sL steps) gives h
    [sL, bS, nState]; x [bS, nIn] is one step and gives h [bS, nState]. ``state`` is the
    family's State NamedTuple (``net.State``: field h [bS, nState], and c [bS, nOut] for the
    LSTM and the LLTM) or None for zeros; the returned state feeds the next call.

    The net owns a packed copy of its weights: later changes to the arrays it was prepared from
    do not reach it. Any number of threads may call one net at once, each with its own state.
    It pickles (the weights are packed again on load) and works in a forked child.

    Attributes
    ----------
    family : str
        "gru", "lstm", "rnn" or "lltm".
    State : type
        The family's state NamedTuple (GruState, LstmState, RnnState, LltmState).
    nIn, nOut, nState : int
        Inputs, units and state columns (nState = nProj for an LSTM with Wproj, else nOut).
    dtype : numpy.dtype
        float32 or float64: x and the state must have it.
    weights : str
        What its packed weights hold: "float32" or "float64" (the weights' dtype, as given),
        "int8" or "bfloat16" (prepared with ``weights="int8"`` or ``"bfloat16"``).
    nbytes : int
        The memory the net holds: its packed weights (with their scales) and its copies of
        the biases.
    options : dict
        The options it was prepared with (prepare's keywords).
    """

    __slots__ = ("family", "State", "nIn", "nOut", "nState", "dtype", "weights", "nbytes",
                 "options",
                 "_weights", "_loop", "_n_threads", "_cell_state", "_row_work")

    # What a call returns (for PreparedWeights.call).
    Result = NetResult

    def __init__(self, family, State, weights, loop, options):
        self.family, self.State, self._weights, self._loop = family, State, weights, loop
        self.nIn, self.nOut, self.nState = weights.nIn, weights.nOut, weights.nState
        self.dtype, self.nbytes, self.weights = weights.dtype, weights.nbytes, weights.weights_kind
        self.options = dict(options)
        self._n_threads = options["n_threads"]
        self._cell_state = len(State._fields) == 2
        # multiply-adds a step per batch row: the input and recurrent products, the projection
        self._row_work = (self.nIn + self.nState) * weights.G + self.nOut * self.nState

    def __repr__(self):
        return (f"PreparedNet(family={self.family!r}, nIn={self.nIn}, nOut={self.nOut}, "
                f"nState={self.nState}, dtype={self.dtype}, weights={self.weights!r}, "
                f"nbytes={self.nbytes})")

    def __reduce__(self):
        if self.options["weights"] is not None:
            return _restore_packed, (self.family, self.State, self._loop, self.options,
                                     self.nIn, self.nOut, self.nState, self._weights.b,
                                     self._weights.P, self._weights.packed_state())
        Wx, Wh, Wproj = self._weights.weights()
        return _restore, (self.family, self.State, self._loop, self.options, Wx, Wh,
                          self._weights.b, self._weights.P, Wproj)

    def __call__(self, x: np.ndarray, state: Optional[tuple] = None, *,
                 seq_len: Optional[np.ndarray] = None, out: Optional[tuple] = None,
                 n_threads: Optional[int] = None) -> NetResult:
        """Run the net over x from `state`.

        Parameters
        ----------
        x : numpy.ndarray, [sL, bS, nIn] or [bS, nIn]
            A chunk of sL steps (time-major), or one step; the net's dtype, any memory order
            (an array that is not C-contiguous is copied).
        state : State or None
            The family's State (net.State): h [bS, nState], and c [bS, nOut] for the LSTM and
            the LLTM; None starts from zeros.
        seq_len : numpy.ndarray of int, [bS], optional
            Row b runs only the first seq_len[b] steps of this chunk (in [0, sL]); its
            outputs after them are 0 and its state is the one after its last valid step.
        out : NetResult or (h, state), optional
            Arrays to write the results into (C-contiguous, writeable, of the result's
            shapes and dtype); the state may be the one passed in (it is read before it is
            written). Returned as the result.
        n_threads : int or None
            Threads for this call; None: the net's n_threads, or when that is None as many as
            the call's size gains from (at most max_threads()).

        Returns
        -------
        NetResult
            (h, state): h [sL, bS, nState] (x 3-d) or [bS, nState] (x 2-d), and the State
            after the call.

        Raises
        ------
        TypeError
            x or a state array that is not a numpy.ndarray of the net's dtype, or a state that
            is not a State of the net's family.
        ValueError
            A wrong shape: x's nIn, a state of another batch size or width, a state of
            another family's net, seq_len out of [0, sL], `out` of the wrong shapes.
        """
        return self._weights.call(self, x, state, seq_len, out, n_threads)

    def _threads(self, bS, n_threads):
        """The threads of a call of bS rows: n_threads checked (check_n_threads); for None, the
        net's n_threads, else _default_threads."""
        if n_threads is not None:
            return check_n_threads(n_threads)
        if self._n_threads is not None:
            return self._n_threads
        return self._default_threads(bS, max_threads)

    def _default_threads(self, bS, ceiling):
        """The threads of a call of bS rows when none are asked for: threads_for_work with
        PREPARED_WORK_PER_THREAD multiply-adds a step each, at most ceiling() (a callable)."""
        return threads_for_work(bS * self._row_work, PREPARED_WORK_PER_THREAD, ceiling)

    def _wrong_state(self, state):
        """Raise the error for a state that is not a State of this net's family."""
        if isinstance(state, _STATES):
            raise ValueError(f"state: a {type(state).__name__}, from another family's net; "
                             f"this {self.family} net takes a {self.State.__name__}")
        raise TypeError(f"state: expected a {self.State.__name__} or None, got "
                        f"{type_name(state)}")


def call_together(calls, seq_len, ceiling):
    """Prepared nets' calls run at once, each on its own threads: the directions of a
    bidirectional layer (cells.torch), which read nothing of each other's.

    `calls`: (net, x, state) triples, every net of one dtype, each called as net(x, state,
    seq_len=seq_len); ceiling() the most threads in all. Each call gets an equal share of
    them (at most the threads its work gains from, _default_threads) and runs as a group of
    its own (cells/_time_loop.pyx, run_calls), where there are two threads or more and every
    thread's share of the weights its steps read stays within a core's L2 (the threads of one
    call on all the threads each hold a smaller share: a direction of an LSTM at H=512, 4 MiB
    of Wh on one thread of 2 MiB of L2, ran 1.6x slower at once than the two one after the
    other on 2 threads each). Else the calls run one after the other. Returns their
    NetResults, in order: each call's, bit for bit."""
    def one_after_another():
        return [net(x, state, seq_len=seq_len,
                    n_threads=net._default_threads(x.shape[-2], ceiling))
                for net, x, state in calls]

    total = ceiling()
    if len(calls) < 2 or total < 2:
        return one_after_another()
    each = total // len(calls)
    threads = max(net._default_threads(x.shape[-2], lambda: each) for net, x, _ in calls)
    if any(net._weights.step_nbytes > threads * _time_loop.L2_BYTES for net, _, _ in calls):
        return one_after_another()
    checked = [net._weights.arguments(net, x, state, seq_len, None) for net, x, state in calls]
    _time_loop.run_calls([(net._weights, arguments[:-1])
                          for (net, _, _), arguments in zip(calls, checked)], threads)
    return [arguments[-1] for arguments in checked]


def _restore(family, State, loop, options, Wx, Wh, b, P, Wproj):
    """A PreparedNet from what __reduce__ saved: the unpacked weights, packed again."""
    nOut = Wx.shape[1] // _gates(loop)
    weights = _time_loop.prepare(loop["family"], Wx.shape[0], nOut, dtype=Wx.dtype, Wx=Wx,
                                 Wh=Wh, b=b, P=P, Wproj=Wproj,
                                 nProj=nOut if Wproj is None else Wproj.shape[1],
                                 **_loop_options(loop))
    return PreparedNet(family, State, weights, loop, options)


def _restore_packed(family, State, loop, options, nIn, nOut, nState, b, P, packed_state):
    """A PreparedNet on int8 or bfloat16 weights from what __reduce__ saved: the bytes of its
    panels, copied into those of a net of the same options (packed from zeros)."""
    G = nOut * _gates(loop)
    projected = packed_state[2] is not None
    weights = _time_loop.prepare(loop["family"], nIn, nOut, dtype=np.float32,
                                 Wx=np.zeros((nIn, G), np.float32),
                                 Wh=np.zeros((nState, G), np.float32), b=b, P=P,
                                 Wproj=np.zeros((nOut, nState), np.float32) if projected else None,
                                 nProj=nState, weights=options["weights"],
                                 packed_state=packed_state, **_loop_options(loop))
    return PreparedNet(family, State, weights, loop, options)


def _gates(loop):
    return _family_table.family(loop["family"]).gates


def _loop_options(loop):
    return {key: value for key, value in loop.items() if key != "family"}


def prepare_net(family, State, options, loop_family, nIn, nOut, dtype, *, Wx=None, Wh=None,
                W=None, b=None, P=None, Wproj=None, quantized=None, **loop):
    """The PreparedNet of `family` (its public name) from the time loop's form of its weights,
    already validated: Wx [nIn, G] and Wh [nState, G] (C-ordered, or both F-ordered: PyTorch's
    layout) or the LLTM's W [G, nOut + nIn], b [G] or None, P and Wproj [nOut, nProj] or None;
    `loop` the loop's options (clip, activation, lstm_acts); `options` the public keywords it
    was prepared with.

    quantized (options["weights"] "int8", Wx and Wh None): (qx, sx, qh, sh), weights already
    quantized to int8, packed as given instead of quantized from float32 ones: qx [nIn, G]
    and qh [nState, G] int8 in [-127, 127] (the q of op(Wx) and op(Wh)), sx and sh [G] float32
    (each column's s_w: the weight of q is q·s_w). Packing float32 weights computes such q and
    s_w (lowp.h); given those, this packs the same panels."""
    if quantized is not None:
        if options["weights"] != "int8" or Wx is not None or Wh is not None or W is not None:
            raise ValueError("quantized: int8 weights as given, with weights='int8' and no "
                             "float weights")
        qx, _, qh, _ = quantized
        Wx = np.zeros(qx.shape, np.float32)   # their values are not used: quantized's are
        Wh = np.zeros(qh.shape, np.float32)
    nState = nOut if Wproj is None else Wproj.shape[1]
    if min(nIn, nOut, nState) < 1:
        raise ValueError(f"a prepared net needs nIn, nOut and nState of at least 1, got "
                         f"nIn={nIn}, nOut={nOut}, nState={nState}")
    kind = options["weights"]
    if kind is not None and dtype != np.float32:
        raise TypeError(f"weights={kind!r} packs float32 weights (for float32 inputs and "
                        f"states), got {dtype} weights")
    if kind == "int8" and max(nIn, nOut, nState) > _time_loop.INT8_K_MAX:
        raise ValueError(f"weights='int8': a product sums at most {_time_loop.INT8_K_MAX} "
                         f"inputs exactly in int32, got nIn={nIn}, nOut={nOut}, "
                         f"nState={nState}")
    transposed = False
    if W is None and quantized is None:
        transposed, Wx, Wh = weights_as_read(Wx, Wh)
    weights = _time_loop.prepare(loop_family, nIn, nOut, dtype=dtype, Wx=Wx, Wh=Wh,
                                 W=None if W is None else np.ascontiguousarray(W),
                                 weights_transposed=transposed, b=b, P=P,
                                 Wproj=None if Wproj is None else np.ascontiguousarray(Wproj),
                                 nProj=nState, weights=kind, quantized=quantized, **loop)
    return PreparedNet(family, State, weights, dict(loop, family=loop_family), options)


# prepare's `weights`: None keeps the weights' dtype; "int8" and "bfloat16" pack float32
# weights into int8 or bfloat16 panels (include/cells/lowp.h states the numeric model).
WEIGHT_KINDS = (None, "int8", "bfloat16")


def lstm_options(clip, acts, n_threads, weights):
    """A prepared LSTM's options (PreparedNet.options, cells.lstm.prepare's keywords) from its
    checked cell clip, activations ((code, alpha, beta) of the gates, the candidate and the
    output), n_threads and weights."""
    (gate_act, gate_alpha, gate_beta), (cell_act, cell_alpha, cell_beta), \
        (out_act, out_alpha, out_beta) = acts
    return {"cell_clip": clip, "gate_act": gate_act, "gate_alpha": gate_alpha,
            "gate_beta": gate_beta, "cell_act": cell_act, "cell_alpha": cell_alpha,
            "cell_beta": cell_beta, "out_act": out_act, "out_alpha": out_alpha,
            "out_beta": out_beta, "n_threads": n_threads, "weights": weights}


def prepare_lstm_quantized(qx, sx, qr, sr, b, *, Wp=None, n_threads=None):
    """An LSTM prepared on int8 weights already quantized (cells.onnx.dynamic_quantize_lstm's):
    qx [nIn, 4nOut] and qr [nOut, 4nOut] C-contiguous int8 in [-127, 127], gates (i, f, g, o),
    with their column scales sx and sr [4nOut] (float32: the weight of q is q·s), packed as
    given (not quantized again); b [4nOut] and Wp [3nOut] float32 or None; the default
    activations, no cell clip. The caller has checked every argument. The net is what
    ``cells.lstm.prepare(Wx, Wr, b, Wp=Wp, weights="int8")`` gives for weights whose q and
    s_w these are."""
    acts = _family_table.LSTM_ACTIVATIONS
    options = lstm_options(0.0, acts, check_n_threads(n_threads), "int8")
    nIn, G = qx.shape
    return prepare_net("lstm", LstmState, options, "lstm", nIn, G // 4, np.dtype(np.float32),
                       b=b, P=Wp, quantized=(qx, sx, qr, sr), clip=kernel_clip(0.0),
                       lstm_acts=acts)


def weights_option(weights):
    """prepare's `weights`, checked: one of WEIGHT_KINDS."""
    if not (weights is None or isinstance(weights, str) and weights in WEIGHT_KINDS):
        raise ValueError(f"weights: expected None (keep the weights' dtype), 'int8' or "
                         f"'bfloat16', got {weights!r}")
    return weights



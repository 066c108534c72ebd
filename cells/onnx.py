"""ONNX's GRU, LSTM and RNN operators (opset 14) on cells' kernels, and their gradients.

    gru(X, W, R, B, sequence_lens, initial_h, ...)                      -> GruOutputs(Y, Y_h)
    gru_bp(X, W, R, B, sequence_lens, initial_h, dY, dY_h, ...)         -> GruGrads
    lstm(X, W, R, B, sequence_lens, initial_h, initial_c, P, ...)       -> LstmOutputs(Y, Y_h, Y_c)
    lstm_bp(..., P, dY, dY_h, dY_c, ...)                                -> LstmGrads
    rnn(X, W, R, B, sequence_lens, initial_h, ...)                      -> RnnOutputs(Y, Y_h)
    rnn_bp(X, W, R, B, sequence_lens, initial_h, dY, dY_h, ...)         -> RnnGrads
    dynamic_quantize_lstm(X, W, R, ..., W_scale, W_zero_point, R_scale, R_zero_point, ...)
                                                                        -> LstmOutputs

Arguments, attributes, outputs and gate orders are ONNX's. Per direction, with ONNX's products
Xt·Wᵀ, σ the logistic function, ∘ the elementwise product and Ht-1, Ct-1 the previous states:

    GRU, gate blocks (z, r, h) in W [3H, input], R [3H, H], B = [Wb | Rb] [6H]:
      zt = σ(Xt·Wzᵀ + Ht-1·Rzᵀ + Wbz + Rbz)
      rt = σ(Xt·Wrᵀ + Ht-1·Rrᵀ + Wbr + Rbr)
      ht = tanh(Xt·Whᵀ + (rt∘Ht-1)·Rhᵀ + Rbh + Wbh)        linear_before_reset = 0
      ht = tanh(Xt·Whᵀ + rt∘(Ht-1·Rhᵀ + Rbh) + Wbh)        linear_before_reset = 1
      Ht = (1 - zt)∘ht + zt∘Ht-1

    LSTM, gate blocks (i, o, f, c) in W [4H, input], R [4H, H], B = [Wb | Rb] [8H],
    peepholes P = [Pi | Po | Pf] [3H]:
      it = σ(Xt·Wiᵀ + Ht-1·Riᵀ + Pi∘Ct-1 + Wbi + Rbi)
      ft = σ(Xt·Wfᵀ + Ht-1·Rfᵀ + Pf∘Ct-1 + Wbf + Rbf)
      ct = tanh(Xt·Wcᵀ + Ht-1·Rcᵀ + Wbc + Rbc)
      Ct = ft∘Ct-1 + it∘ct
      ot = σ(Xt·Woᵀ + Ht-1·Roᵀ + Po∘Ct + Wbo + Rbo)
      Ht = ot∘tanh(Ct)

    RNN, one block in W [H, input], R [H, H], B = [Wb | Rb] [2H]:
      Ht = f(Xt·Wᵀ + Ht-1·Rᵀ + Wb + Rb),   f = Tanh (the default) or Relu, for each direction

direction="forward" runs t = 0 … seq_length-1, "reverse" the other way, "bidirectional" both
(direction index 0 forward, 1 reverse, each with its own weights and initial states; Y holds both).
The weights are mapped to cells' layout by cells.convert and each direction is one call of
cells' time loop (gruTimeLoop, lstmLayerTimeLoop, rnnTimeLoop, and their backward).

sequence_lens [batch_size] (integers in [0, seq_length]): row b runs only its first
sequence_lens[b] steps (in reverse order for the reverse direction); Y is 0 at its other steps
and Y_h, Y_c hold its state after its last step. **For a row of length 0, Y_h and Y_c are its
initial state here; ONNX Runtime returns zeros.** X's padded entries must be finite (they meet
zero gradients in dW).

layout=0: X [seq_length, batch_size, input_size], Y [seq_length, num_directions, batch_size,
hidden_size], states [num_directions, batch_size, hidden_size]. layout=1 (which ONNX Runtime
refuses): X [batch_size, seq_length, input_size], Y [batch_size, seq_length, num_directions,
hidden_size], states [batch_size, num_directions, hidden_size]. cells' kernels are time-major,
so with layout=1 the kernels read a transposed copy of X (and of dY), and dX is transposed back.

Arrays are float32 or float64 NumPy arrays of one dtype (ONNX Runtime runs float32 only), and
the outputs have that dtype; sequence_lens is an integer array. Not implemented, and a
NotImplementedError naming the attribute when given: activations other than the defaults (for
the RNN: other than Tanh or Relu for each direction), activation_alpha, activation_beta, clip
(ONNX's clip bounds the gates' pre-activations, unlike cells' cell_clip) and input_forget=1.
An RNN's Relu has the derivative 0 at 0 (as PyTorch's).

Gradients: gru_bp, lstm_bp and rnn_bp return the gradients of a loss L given dY = dL/dY,
dY_h = dL/dY_h, dY_c = dL/dY_c (each may be None: zeros), in the ONNX shapes of the inputs.
dX sums both directions. An omitted B, initial_h or initial_c gets the gradient it would have
as zeros (so it can be trained from zeros); an omitted P gets dP = None (pass P = zeros to
train peepholes). dL/dWb = dL/dRb: the two biases enter every pre-activation as a sum, except
Rbh inside rt∘(…) of a linear_before_reset GRU.

Every function also takes `n_threads` (as all of cells), and the forward ones
`return_workspace=True`, which returns the outputs and the per-direction workspaces as a last
field, `workspace` (GruOutputsWithWorkspace, ...); passing it as `workspace=` to the backward
function (same inputs and attributes) skips recomputing the forward pass.
"""
import numbers
from typing import NamedTuple, Optional, Sequence, Union

import numpy as np

from cells import _arrays
from cells import _validate as check
from cells._gates import LSTM as LSTM_GATES
from cells._gates import ONNX_LSTM, ONNX_PEEPHOLES, PEEPHOLES, reorder
from cells.convert import (
    gru_from_onnx, gru_to_onnx, lstm_from_onnx, lstm_to_onnx, rnn_from_onnx, rnn_to_onnx,
)
from cells.gru import gruTimeLoop, gruTimeLoopBp
from cells._prepared import prepare_lstm_quantized
from cells.lstm import lstmLayerTimeLoop, lstmLayerTimeLoopBp
from cells.rnn import rnnTimeLoop, rnnTimeLoopBp

__all__ = [
    "dynamic_quantize_lstm",
    "gru",
    "gru_bp",
    "lstm",
    "lstm_bp",
    "rnn",
    "rnn_bp",
    "GruOutputs",
    "GruOutputsWithWorkspace",
    "GruGrads",
    "LstmOutputs",
    "LstmOutputsWithWorkspace",
    "LstmGrads",
    "RnnOutputs",
    "RnnOutputsWithWorkspace",
    "RnnGrads",
]


class GruOutputs(NamedTuple):
    """What :func:`gru` returns.

    Attributes
    ----------
    Y : numpy.ndarray
        [seq_length, num_directions, batch_size, hidden_size] ([batch_size, seq_length,
        num_directions, hidden_size] with layout 1).
    Y_h : numpy.ndarray
        Shaped as initial_h.
    """

    Y: np.ndarray
    Y_h: np.ndarray


class LstmOutputs(NamedTuple):
    """What :func:`lstm` returns.

    Attributes
    ----------
    Y : numpy.ndarray
        [seq_length, num_directions, batch_size, hidden_size] ([batch_size, seq_length,
        num_directions, hidden_size] with layout 1).
    Y_h, Y_c : numpy.ndarray
        Shaped as initial_h.
    """

    Y: np.ndarray
    Y_h: np.ndarray
    Y_c: np.ndarray


class RnnOutputs(NamedTuple):
    """What :func:`rnn` returns.

    Attributes
    ----------
    Y : numpy.ndarray
        [seq_length, num_directions, batch_size, hidden_size] ([batch_size, seq_length,
        num_directions, hidden_size] with layout 1).
    Y_h : numpy.ndarray
        Shaped as initial_h.
    """

    Y: np.ndarray
    Y_h: np.ndarray


class GruOutputsWithWorkspace(NamedTuple):
    """What ``gru(..., return_workspace=True)`` returns.

    Attributes
    ----------
    Y, Y_h : numpy.ndarray
        As :class:`GruOutputs`.
    workspace : tuple of cells.GruWorkspace
        One per direction, for :func:`gru_bp`.
    """

    Y: np.ndarray
    Y_h: np.ndarray
    workspace: tuple


class LstmOutputsWithWorkspace(NamedTuple):
    """What ``lstm(..., return_workspace=True)`` returns.

    Attributes
    ----------
    Y, Y_h, Y_c : numpy.ndarray
        As :class:`LstmOutputs`.
    workspace : tuple of cells.LstmWorkspace
        One per direction, for :func:`lstm_bp`.
    """

    Y: np.ndarray
    Y_h: np.ndarray
    Y_c: np.ndarray
    workspace: tuple


class RnnOutputsWithWorkspace(NamedTuple):
    """What ``rnn(..., return_workspace=True)`` returns.

    Attributes
    ----------
    Y, Y_h : numpy.ndarray
        As :class:`RnnOutputs`.
    workspace : tuple of cells.RnnWorkspace
        One per direction, for :func:`rnn_bp`.
    """

    Y: np.ndarray
    Y_h: np.ndarray
    workspace: tuple


class GruGrads(NamedTuple):
    """What :func:`gru_bp` returns: each gradient with the ONNX shape of its input.

    Attributes
    ----------
    dX, dW, dR : numpy.ndarray
    dB : numpy.ndarray
        [num_directions, 6*hidden_size], also when B was not given.
    dinitial_h : numpy.ndarray
        Also when initial_h was not given (as if it were zeros).
    """

    dX: np.ndarray
    dW: np.ndarray
    dR: np.ndarray
    dB: np.ndarray
    dinitial_h: np.ndarray


class LstmGrads(NamedTuple):
    """What :func:`lstm_bp` returns: each gradient with the ONNX shape of its input.

    Attributes
    ----------
    dX, dW, dR : numpy.ndarray
    dB : numpy.ndarray
        Also when B was not given.
    dinitial_h, dinitial_c : numpy.ndarray
        Also when not given (as if they were zeros).
    dP : numpy.ndarray or None
        None when P is.
    """

    dX: np.ndarray
    dW: np.ndarray
    dR: np.ndarray
    dB: np.ndarray
    dinitial_h: np.ndarray
    dinitial_c: np.ndarray
    dP: Optional[np.ndarray]


class RnnGrads(NamedTuple):
    """What :func:`rnn_bp` returns: each gradient with the ONNX shape of its input.

    Attributes
    ----------
    dX, dW, dR : numpy.ndarray
    dB : numpy.ndarray
        Also when B was not given.
    dinitial_h : numpy.ndarray
        Also when initial_h was not given (as if it were zeros).
    """

    dX: np.ndarray
    dW: np.ndarray
    dR: np.ndarray
    dB: np.ndarray
    dinitial_h: np.ndarray


def gru(X: np.ndarray, W: np.ndarray, R: np.ndarray, B: Optional[np.ndarray] = None,
        sequence_lens: Optional[np.ndarray] = None, initial_h: Optional[np.ndarray] = None, *,
        direction: str = "forward", linear_before_reset: int = 0, layout: int = 0,
        hidden_size: Optional[int] = None, activations: Optional[Sequence[str]] = None,
        activation_alpha: Optional[Sequence[float]] = None,
        activation_beta: Optional[Sequence[float]] = None, clip: Optional[float] = None,
        return_workspace: bool = False, n_threads: Optional[int] = None
        ) -> Union[GruOutputs, GruOutputsWithWorkspace]:
    """ONNX's GRU operator (opset 14) on cells' kernels.

    Parameters
    ----------
    X : numpy.ndarray
        [seq_length, batch_size, input_size] (layout 1: [batch_size, seq_length, input_size]);
        float32 or float64.
    W : numpy.ndarray, [num_directions, 3*hidden_size, input_size]
    R : numpy.ndarray, [num_directions, 3*hidden_size, hidden_size]
    B : numpy.ndarray, [num_directions, 6*hidden_size], optional
        [Wb | Rb]; None: zeros.
    sequence_lens : numpy.ndarray of int, [batch_size], optional
        None: every row runs seq_length.
    initial_h : numpy.ndarray, optional
        [num_directions, batch_size, hidden_size] (layout 1: [batch_size, num_directions,
        hidden_size]); None: zeros.
    linear_before_reset : int, default 0
        ONNX's attribute: 1 is PyTorch's GRU.
    direction : {"forward", "reverse", "bidirectional"}, default "forward"
        num_directions is 2 for "bidirectional" (index 0 forward, 1 reverse), else 1.
    layout : int, default 0
        0: time first; 1: batch first in X, Y and the states (which ONNX Runtime refuses).
    hidden_size : int, optional
        Checked against R's last dimension when given.
    activations, activation_alpha, activation_beta, clip
        ONNX's attributes: only their defaults are implemented (the defaults spelled out are
        accepted; anything else raises NotImplementedError).
    return_workspace : bool, default False
        Also return the per-direction workspaces, which the backward function takes to skip
        recomputing the forward pass.
    n_threads : int, optional
        The threads the call runs on (as every cells function).

    Returns
    -------
    GruOutputs
        ``(Y, Y_h)``: Y [seq_length, num_directions, batch_size, hidden_size] (layout 1:
        [batch_size, seq_length, num_directions, hidden_size]), Y_h shaped as initial_h.
    GruOutputsWithWorkspace
        ``(Y, Y_h, workspace)`` instead, with return_workspace=True.

    Raises
    ------
    TypeError
        A non-array or a wrong dtype.
    ValueError
        A wrong shape, direction or hidden_size, raised before any kernel runs.
    NotImplementedError
        An attribute other than its default (activations, activation_alpha, activation_beta,
        clip, input_forget=1).

    Examples
    --------
    >>> import numpy as np
    >>> from cells import onnx as co
    >>> rng = np.random.default_rng(0)
    >>> T, B_, I, H = 5, 2, 3, 4
    >>> X = rng.normal(size=(T, B_, I))
    >>> W, R = rng.normal(size=(1, 3 * H, I)), rng.normal(size=(1, 3 * H, H))
    >>> Y, Y_h = co.gru(X, W, R, linear_before_reset=1)
    >>> Y.shape, Y_h.shape
    ((5, 1, 2, 4), (1, 2, 4))
    """
    lbr = _binary("linear_before_reset", linear_before_reset) == 1
    keep = check.flag("return_workspace", return_workspace)
    dims = _check_call(_GRU, X, W, R, direction, layout, hidden_size,
                       (activations, activation_alpha, activation_beta, clip),
                       B=B, sequence_lens=sequence_lens, initial_h=initial_h)
    Y, Y_h, workspaces = _forward_h(
        dims, gruTimeLoop, gru_from_onnx, (W, R, B), X, initial_h, sequence_lens,
        [{"linear_before_reset": lbr}] * len(dims.forwards), keep, n_threads)
    return GruOutputsWithWorkspace(Y, Y_h, workspaces) if keep else GruOutputs(Y, Y_h)


def gru_bp(X: np.ndarray, W: np.ndarray, R: np.ndarray, B: Optional[np.ndarray] = None,
           sequence_lens: Optional[np.ndarray] = None, initial_h: Optional[np.ndarray] = None,
           dY: Optional[np.ndarray] = None, dY_h: Optional[np.ndarray] = None, *,
           direction: str = "forward", linear_before_reset: int = 0, layout: int = 0,
           hidden_size: Optional[int] = None, activations: Optional[Sequence[str]] = None,
           activation_alpha: Optional[Sequence[float]] = None,
           activation_beta: Optional[Sequence[float]] = None, clip: Optional[float] = None,
           workspace: Optional[tuple] = None, n_threads: Optional[int] = None) -> GruGrads:
    """Gradients of ONNX's GRU (which ONNX itself does not have).

    Parameters
    ----------
    X, W, R, B, sequence_lens, initial_h
        As :func:`gru`.
    dY, dY_h : numpy.ndarray, optional
        The gradients arriving at Y and Y_h, in their shapes (None: zeros).
    direction, linear_before_reset, layout, hidden_size, activations, ..., clip
        As :func:`gru`.
    workspace : tuple, optional
        From ``gru(..., return_workspace=True)`` on the same inputs and attributes: skips
        recomputing the forward pass.
    n_threads : int, optional
        The threads the call runs on (as every cells function).

    Returns
    -------
    GruGrads
        ``(dX, dW, dR, dB, dinitial_h)``, each in the ONNX shape of its input; dB and dinitial_h
        also when B or initial_h was None (the gradient as if it were zeros).

    Raises
    ------
    TypeError
        A non-array or a wrong dtype.
    ValueError
        A wrong shape, direction or hidden_size, raised before any kernel runs.
    NotImplementedError
        An attribute other than its default (activations, activation_alpha, activation_beta,
        clip, input_forget=1).

    Examples
    --------
    >>> import numpy as np
    >>> from cells import onnx as co
    >>> rng = np.random.default_rng(0)
    >>> T, B_, I, H = 5, 2, 3, 4
    >>> X = rng.normal(size=(T, B_, I))
    >>> W, R = rng.normal(size=(1, 3 * H, I)), rng.normal(size=(1, 3 * H, H))
    >>> g = co.gru_bp(X, W, R, dY_h=np.ones((1, B_, H)))
    >>> g.dW.shape, g.dB.shape
    ((1, 12, 3), (1, 24))
    """
    lbr = _binary("linear_before_reset", linear_before_reset) == 1
    dims = _check_call(_GRU, X, W, R, direction, layout, hidden_size,
                       (activations, activation_alpha, activation_beta, clip),
                       B=B, sequence_lens=sequence_lens, initial_h=initial_h, dY=dY, dY_h=dY_h)
    return GruGrads(*_backward_h(
        dims, gruTimeLoopBp, gru_from_onnx, gru_to_onnx, (W, R, B), X, initial_h, sequence_lens,
        dY, dY_h, [{"linear_before_reset": lbr}] * len(dims.forwards), workspace, n_threads))


def lstm(X: np.ndarray, W: np.ndarray, R: np.ndarray, B: Optional[np.ndarray] = None,
         sequence_lens: Optional[np.ndarray] = None, initial_h: Optional[np.ndarray] = None,
         initial_c: Optional[np.ndarray] = None, P: Optional[np.ndarray] = None, *,
         direction: str = "forward", layout: int = 0, input_forget: int = 0,
         hidden_size: Optional[int] = None, activations: Optional[Sequence[str]] = None,
         activation_alpha: Optional[Sequence[float]] = None,
         activation_beta: Optional[Sequence[float]] = None, clip: Optional[float] = None,
         return_workspace: bool = False, n_threads: Optional[int] = None
         ) -> Union[LstmOutputs, LstmOutputsWithWorkspace]:
    """ONNX's LSTM operator (opset 14) on cells' kernels.

    Parameters
    ----------
    X : numpy.ndarray
        [seq_length, batch_size, input_size] (layout 1: [batch_size, seq_length, input_size]);
        float32 or float64.
    W : numpy.ndarray, [num_directions, 4*hidden_size, input_size]
    R : numpy.ndarray, [num_directions, 4*hidden_size, hidden_size]
    B : numpy.ndarray, [num_directions, 8*hidden_size], optional
        [Wb | Rb]; None: zeros.
    sequence_lens : numpy.ndarray of int, [batch_size], optional
        None: every row runs seq_length.
    initial_h : numpy.ndarray, optional
        [num_directions, batch_size, hidden_size] (layout 1: [batch_size, num_directions,
        hidden_size]); None: zeros.
    initial_c : numpy.ndarray, optional
        Shaped as initial_h; None: zeros.
    P : numpy.ndarray, [num_directions, 3*hidden_size], optional
        Peepholes (i, o, f); None: none.
    direction : {"forward", "reverse", "bidirectional"}, default "forward"
        num_directions is 2 for "bidirectional" (index 0 forward, 1 reverse), else 1.
    layout : int, default 0
        0: time first; 1: batch first in X, Y and the states (which ONNX Runtime refuses).
    hidden_size : int, optional
        Checked against R's last dimension when given.
    activations, activation_alpha, activation_beta, clip
        ONNX's attributes: only their defaults are implemented (the defaults spelled out are
        accepted; anything else raises NotImplementedError).
    input_forget : int, default 0
        Only 0 is implemented.
    return_workspace : bool, default False
        Also return the per-direction workspaces, which the backward function takes to skip
        recomputing the forward pass.
    n_threads : int, optional
        The threads the call runs on (as every cells function).

    Returns
    -------
    LstmOutputs
        ``(Y, Y_h, Y_c)``: Y as :func:`gru`'s, Y_h and Y_c shaped as initial_h.
    LstmOutputsWithWorkspace
        ``(Y, Y_h, Y_c, workspace)`` instead, with return_workspace=True.

    Raises
    ------
    TypeError
        A non-array or a wrong dtype.
    ValueError
        A wrong shape, direction or hidden_size, raised before any kernel runs.
    NotImplementedError
        An attribute other than its default (activations, activation_alpha, activation_beta,
        clip, input_forget=1).

    Examples
    --------
    >>> import numpy as np
    >>> from cells import onnx as co
    >>> rng = np.random.default_rng(0)
    >>> T, B_, I, H = 5, 2, 3, 4
    >>> X = rng.normal(size=(T, B_, I))
    >>> W, R = rng.normal(size=(2, 4 * H, I)), rng.normal(size=(2, 4 * H, H))
    >>> Y, Y_h, Y_c = co.lstm(X, W, R, direction="bidirectional")
    >>> Y.shape, Y_c.shape
    ((5, 2, 2, 4), (2, 2, 4))
    """
    _check_input_forget(input_forget)
    keep = check.flag("return_workspace", return_workspace)
    dims = _check_call(_LSTM, X, W, R, direction, layout, hidden_size,
                       (activations, activation_alpha, activation_beta, clip),
                       B=B, sequence_lens=sequence_lens, initial_h=initial_h,
                       initial_c=initial_c, P=P)
    x = _time_major(X, dims.layout)
    Y = _zeros(dims, "Y", X)
    Y_h, Y_c = _zeros(dims, "Y_h", X), _zeros(dims, "Y_c", X)
    workspaces = []
    for d, forward in enumerate(dims.forwards):
        Wx, Wr, b, Wp = lstm_from_onnx(W, R, B, P, direction=d)
        out = lstmLayerTimeLoop(
            x, Wx, Wr, b, _initial_state(initial_h, d, dims, X),
            _initial_state(initial_c, d, dims, X), Wp=Wp, seq_len=sequence_lens,
            forward=forward, return_workspace=keep, n_threads=n_threads)
        h, hL, cL, ws = out if keep else (*out, None)
        _sequence(Y, d, dims.layout)[...] = h
        _state(Y_h, d, dims.layout)[...] = hL
        _state(Y_c, d, dims.layout)[...] = cL
        workspaces.append(ws)
    if keep:
        return LstmOutputsWithWorkspace(Y, Y_h, Y_c, tuple(workspaces))
    return LstmOutputs(Y, Y_h, Y_c)


def dynamic_quantize_lstm(X: np.ndarray, W: np.ndarray, R: np.ndarray,
                          B: Optional[np.ndarray] = None,
                          sequence_lens: Optional[np.ndarray] = None,
                          initial_h: Optional[np.ndarray] = None,
                          initial_c: Optional[np.ndarray] = None,
                          P: Optional[np.ndarray] = None, W_scale: Optional[np.ndarray] = None,
                          W_zero_point: Optional[np.ndarray] = None,
                          R_scale: Optional[np.ndarray] = None,
                          R_zero_point: Optional[np.ndarray] = None, *,
                          direction: str = "forward", layout: int = 0, input_forget: int = 0,
                          hidden_size: Optional[int] = None,
                          activations: Optional[Sequence[str]] = None,
                          activation_alpha: Optional[Sequence[float]] = None,
                          activation_beta: Optional[Sequence[float]] = None,
                          clip: Optional[float] = None, n_threads: Optional[int] = None
                          ) -> LstmOutputs:
    """ONNX Runtime's ``com.microsoft.DynamicQuantizeLSTM`` on cells' int8 prepared nets.

    The LSTM of :func:`lstm` (same attributes, gate blocks (i, o, f, c), B, P, sequence_lens,
    initial states, directions and layouts) with int8 weights already quantized, as ONNX
    Runtime's quantizer (``quantize_dynamic``) writes them: the weight of W[d, k, j] is
    W[d, k, j]·W_scale[d, j] (per column) or ·W_scale[d] (per tensor), and so for R. cells
    packs these int8 values and scales as they are (nothing is quantized again) into the int8
    panels of a prepared net (the Serving guide's numeric model), one net per direction.

    Activations: the float32 rows each product multiplies (X's rows, the state h at each step)
    are quantized by cells to 7 bits **per row** (a scale and zero point for each batch row of
    each step: a row's result does not depend on the other rows), where ONNX Runtime uses one
    scale and zero point per tensor (all of X for the input product, the batch's h at each
    step). The two agree to quantization tolerance, not bit for bit.

    Parameters
    ----------
    X : numpy.ndarray, float32
        [seq_length, batch_size, input_size] (layout 1: [batch_size, seq_length, input_size]).
    W : numpy.ndarray, int8, [num_directions, input_size, 4*hidden_size]
        ONNX Runtime's layout: the transpose of ONNX LSTM's W, column j of gate block
        (i, o, f, c) j // hidden_size. Values in [-127, 127] (the symmetric range cells'
        kernels use, and ONNX Runtime's quantizer writes).
    R : numpy.ndarray, int8, [num_directions, hidden_size, 4*hidden_size]
    B : numpy.ndarray, float32, [num_directions, 8*hidden_size], optional
        [Wb | Rb]; None: zeros.
    sequence_lens : numpy.ndarray of int, [batch_size], optional
        Row b runs its first sequence_lens[b] steps (in [0, seq_length]); None: all.
    initial_h, initial_c : numpy.ndarray, float32, optional
        [num_directions, batch_size, hidden_size] (layout 1: [batch_size, num_directions,
        hidden_size]); None: zeros.
    P : numpy.ndarray, float32, [num_directions, 3*hidden_size], optional
        Peepholes (i, o, f); None: none.
    W_scale, R_scale : numpy.ndarray, float32
        Required: [num_directions] (a scale per direction's tensor, given to every column) or
        [num_directions, 4*hidden_size] (per column); finite and > 0.
    W_zero_point, R_zero_point : numpy.ndarray, int8, optional
        Shaped as a scale ([num_directions] or [num_directions, 4*hidden_size]); every one
        must be 0 (cells' int8 weights are symmetric; ONNX Runtime's quantizer writes zeros
        for int8 weights). None: zeros.
    direction, layout, hidden_size, activations, activation_alpha, activation_beta, clip,
    input_forget
        As :func:`lstm`: only the default activations, no clip, input_forget 0.
    n_threads : int, optional
        The threads of each direction's net (None: as many as a call's size gains from).

    Returns
    -------
    LstmOutputs
        ``(Y, Y_h, Y_c)``, float32: Y [seq_length, num_directions, batch_size, hidden_size]
        (layout 1: [batch_size, seq_length, num_directions, hidden_size]); Y_h, Y_c shaped as
        initial_h. Y is 0 after a row's sequence_lens; a row of length 0 keeps its initial
        state in Y_h and Y_c (ONNX Runtime returns zeros), as :func:`lstm`.

    Raises
    ------
    TypeError
        An array that is not a numpy.ndarray of its dtype: X, B, P, the initial states and
        the scales float32, W and R int8 (uint8 weights, which ONNX Runtime also runs but its
        quantizer never writes for an LSTM, are refused), the zero points int8; a missing
        W_scale or R_scale.
    ValueError
        A wrong shape (the message names the argument), direction, layout or hidden_size; a
        nonzero W_zero_point or R_zero_point; a weight of -128; a scale that is not finite
        and > 0; sequence_lens out of range. Raised before any kernel runs.
    NotImplementedError
        An attribute other than its default (activations, activation_alpha, activation_beta,
        clip, input_forget=1).

    Examples
    --------
    >>> import numpy as np
    >>> from cells import onnx as co
    >>> rng = np.random.default_rng(0)
    >>> T, B_, I, H = 5, 2, 3, 4
    >>> X = rng.normal(size=(T, B_, I)).astype(np.float32)
    >>> W = rng.integers(-127, 128, size=(1, I, 4 * H), dtype=np.int8)
    >>> R = rng.integers(-127, 128, size=(1, H, 4 * H), dtype=np.int8)
    >>> scale = np.full(1, 0.01, np.float32)          # per tensor: one per direction
    >>> zero = np.zeros(1, np.int8)
    >>> Y, Y_h, Y_c = co.dynamic_quantize_lstm(X, W, R, W_scale=scale, W_zero_point=zero,
    ...                                        R_scale=scale, R_zero_point=zero)
    >>> Y.shape, Y.dtype, Y_c.shape
    ((5, 1, 2, 4), dtype('float32'), (1, 2, 4))
    """
    _check_input_forget(input_forget)
    dims, lengths, scales = _check_quantized_call(
        X, W, R, direction, layout, hidden_size,
        (activations, activation_alpha, activation_beta, clip),
        dict(B=B, initial_h=initial_h, initial_c=initial_c, P=P), sequence_lens,
        dict(W_scale=W_scale, W_zero_point=W_zero_point, R_scale=R_scale,
             R_zero_point=R_zero_point))
    H = dims.hidden_size
    x = np.ascontiguousarray(_time_major(X, dims.layout))
    Y = _zeros(dims, "Y", X)
    Y_h, Y_c = _zeros(dims, "Y_h", X), _zeros(dims, "Y_c", X)
    for d, forward in enumerate(dims.forwards):
        # ONNX's gate columns (i, o, f, c) in cells' order (i, f, g, o)
        qx, qr, sx, sr = (np.ascontiguousarray(reorder(a, ONNX_LSTM, LSTM_GATES))
                          for a in (W[d], R[d],
                                    np.broadcast_to(scales["W_scale"][d], (4 * H,)),
                                    np.broadcast_to(scales["R_scale"][d], (4 * H,))))
        b = None if B is None else reorder(B[d, :4 * H] + B[d, 4 * H:], ONNX_LSTM, LSTM_GATES)
        Wp = None if P is None else reorder(P[d], ONNX_PEEPHOLES, PEEPHOLES)
        net = prepare_lstm_quantized(qx, sx, qr, sr, b, Wp=Wp, n_threads=n_threads)
        state = net.State(np.ascontiguousarray(_initial_state(initial_h, d, dims, X)),
                          np.ascontiguousarray(_initial_state(initial_c, d, dims, X)))
        # the reverse direction runs each row's first sequence_lens[b] steps backwards: the
        # net runs them forwards from a copy of x with those steps reversed, row by row
        steps = None if forward else _reversed_steps(dims, lengths)
        xs = x if forward else x[steps, np.arange(dims.batch_size)]
        h, after = net(xs, state, seq_len=lengths)
        if not forward:
            unreversed = np.empty_like(h)
            unreversed[steps, np.arange(dims.batch_size)] = h
            h = unreversed
        _sequence(Y, d, dims.layout)[...] = h
        _state(Y_h, d, dims.layout)[...] = after.h
        _state(Y_c, d, dims.layout)[...] = after.c
    return LstmOutputs(Y, Y_h, Y_c)


def lstm_bp(X: np.ndarray, W: np.ndarray, R: np.ndarray, B: Optional[np.ndarray] = None,
            sequence_lens: Optional[np.ndarray] = None, initial_h: Optional[np.ndarray] = None,
            initial_c: Optional[np.ndarray] = None, P: Optional[np.ndarray] = None,
            dY: Optional[np.ndarray] = None, dY_h: Optional[np.ndarray] = None,
            dY_c: Optional[np.ndarray] = None, *, direction: str = "forward", layout: int = 0,
            input_forget: int = 0, hidden_size: Optional[int] = None,
            activations: Optional[Sequence[str]] = None,
            activation_alpha: Optional[Sequence[float]] = None,
            activation_beta: Optional[Sequence[float]] = None, clip: Optional[float] = None,
            workspace: Optional[tuple] = None, n_threads: Optional[int] = None) -> LstmGrads:
    """Gradients of ONNX's LSTM (which ONNX itself does not have).

    Parameters
    ----------
    X, W, R, B, sequence_lens, initial_h, initial_c, P
        As :func:`lstm`.
    dY, dY_h, dY_c : numpy.ndarray, optional
        The gradients arriving at Y, Y_h and Y_c, in their shapes (None: zeros).
    direction, layout, input_forget, hidden_size, activations, ..., clip
        As :func:`lstm`.
    workspace : tuple, optional
        From ``lstm(..., return_workspace=True)`` on the same inputs and attributes: skips
        recomputing the forward pass.
    n_threads : int, optional
        The threads the call runs on (as every cells function).

    Returns
    -------
    LstmGrads
        ``(dX, dW, dR, dB, dinitial_h, dinitial_c, dP)``, each in the ONNX shape of its input;
        dB, dinitial_h and dinitial_c also when their input was None (as if it were zeros); dP
        is None when P is. dB = [dWb | dRb] with dWb = dRb (the biases enter as a sum).

    Raises
    ------
    TypeError
        A non-array or a wrong dtype.
    ValueError
        A wrong shape, direction or hidden_size, raised before any kernel runs.
    NotImplementedError
        An attribute other than its default (activations, activation_alpha, activation_beta,
        clip, input_forget=1).

    Examples
    --------
    >>> import numpy as np
    >>> from cells import onnx as co
    >>> rng = np.random.default_rng(0)
    >>> T, B_, I, H = 5, 2, 3, 4
    >>> X = rng.normal(size=(T, B_, I))
    >>> W, R = rng.normal(size=(1, 4 * H, I)), rng.normal(size=(1, 4 * H, H))
    >>> g = co.lstm_bp(X, W, R, dY=np.ones((T, 1, B_, H)))
    >>> g.dR.shape, g.dP is None
    ((1, 16, 4), True)
    """
    _check_input_forget(input_forget)
    dims = _check_call(_LSTM, X, W, R, direction, layout, hidden_size,
                       (activations, activation_alpha, activation_beta, clip),
                       B=B, sequence_lens=sequence_lens, initial_h=initial_h,
                       initial_c=initial_c, P=P, dY=dY, dY_h=dY_h, dY_c=dY_c)
    workspaces = _workspaces(workspace, dims)
    x = _time_major(X, dims.layout)
    dX, dW, dR, dB, dinitial_h, dinitial_c = (
        _zeros(dims, name, X) for name in ("X", "W", "R", "B", "initial_h", "initial_c"))
    dP = None if P is None else _zeros(dims, "P", X)
    G = 4 * dims.hidden_size
    for d, forward in enumerate(dims.forwards):
        Wx, Wr, b, Wp = lstm_from_onnx(W, R, B, P, direction=d)
        dx, dWx, dWr, db, dhI, dcI, dWp = lstmLayerTimeLoopBp(
            x, Wx, Wr, b, _initial_state(initial_h, d, dims, X),
            _initial_state(initial_c, d, dims, X), _sequence(dY, d, dims.layout),
            dLdhL=_state(dY_h, d, dims.layout), dLdcL=_state(dY_c, d, dims.layout), Wp=Wp,
            seq_len=sequence_lens, forward=forward, workspace=workspaces[d],
            n_threads=n_threads)
        _add_time_major(dX, dx, dims.layout)
        W_d, R_d, B_d, P_d = lstm_to_onnx(dWx, dWr, db, dWp)
        dW[d], dR[d] = W_d[0], R_d[0]
        dB[d, :G] = dB[d, G:] = B_d[0, :G]  # lstm_to_onnx puts db in Wb only; dRb = dWb
        if dP is not None:
            dP[d] = P_d[0]
        _state(dinitial_h, d, dims.layout)[...] = dhI
        _state(dinitial_c, d, dims.layout)[...] = dcI
    return LstmGrads(dX, dW, dR, dB, dinitial_h, dinitial_c, dP)


def rnn(X: np.ndarray, W: np.ndarray, R: np.ndarray, B: Optional[np.ndarray] = None,
        sequence_lens: Optional[np.ndarray] = None, initial_h: Optional[np.ndarray] = None, *,
        direction: str = "forward", layout: int = 0, hidden_size: Optional[int] = None,
        activations: Optional[Sequence[str]] = None,
        activation_alpha: Optional[Sequence[float]] = None,
        activation_beta: Optional[Sequence[float]] = None, clip: Optional[float] = None,
        return_workspace: bool = False, n_threads: Optional[int] = None
        ) -> Union[RnnOutputs, RnnOutputsWithWorkspace]:
    """ONNX's RNN operator (opset 14) on cells' kernels.

    Parameters
    ----------
    X : numpy.ndarray
        [seq_length, batch_size, input_size] (layout 1: [batch_size, seq_length, input_size]);
        float32 or float64.
    W : numpy.ndarray, [num_directions, 1*hidden_size, input_size]
    R : numpy.ndarray, [num_directions, 1*hidden_size, hidden_size]
    B : numpy.ndarray, [num_directions, 2*hidden_size], optional
        [Wb | Rb]; None: zeros.
    sequence_lens : numpy.ndarray of int, [batch_size], optional
        None: every row runs seq_length.
    initial_h : numpy.ndarray, optional
        [num_directions, batch_size, hidden_size] (layout 1: [batch_size, num_directions,
        hidden_size]); None: zeros.
    activations : sequence of str, optional
        One of "Tanh" (the default) and "Relu" per direction.
    direction : {"forward", "reverse", "bidirectional"}, default "forward"
        num_directions is 2 for "bidirectional" (index 0 forward, 1 reverse), else 1.
    layout : int, default 0
        0: time first; 1: batch first in X, Y and the states (which ONNX Runtime refuses).
    hidden_size : int, optional
        Checked against R's last dimension when given.
    activation_alpha, activation_beta, clip
        Only their defaults are implemented.
    return_workspace : bool, default False
        Also return the per-direction workspaces, which the backward function takes to skip
        recomputing the forward pass.
    n_threads : int, optional
        The threads the call runs on (as every cells function).

    Returns
    -------
    RnnOutputs
        ``(Y, Y_h)``, shaped as :func:`gru`'s.
    RnnOutputsWithWorkspace
        ``(Y, Y_h, workspace)`` instead, with return_workspace=True.

    Raises
    ------
    TypeError
        A non-array or a wrong dtype.
    ValueError
        A wrong shape, direction or hidden_size, raised before any kernel runs.
    NotImplementedError
        An attribute other than its default (activations, activation_alpha, activation_beta,
        clip, input_forget=1).

    Examples
    --------
    >>> import numpy as np
    >>> from cells import onnx as co
    >>> rng = np.random.default_rng(0)
    >>> T, B_, I, H = 5, 2, 3, 4
    >>> X = rng.normal(size=(T, B_, I))
    >>> Y, Y_h = co.rnn(X, rng.normal(size=(1, H, I)), rng.normal(size=(1, H, H)),
    ...                 activations=["Relu"])
    >>> Y.shape
    (5, 1, 2, 4)
    """
    keep = check.flag("return_workspace", return_workspace)
    dims = _check_call(_RNN, X, W, R, direction, layout, hidden_size,
                       (activations, activation_alpha, activation_beta, clip),
                       B=B, sequence_lens=sequence_lens, initial_h=initial_h)
    Y, Y_h, workspaces = _forward_h(dims, rnnTimeLoop, rnn_from_onnx, (W, R, B), X, initial_h,
                                    sequence_lens, _rnn_options(dims), keep, n_threads)
    return RnnOutputsWithWorkspace(Y, Y_h, workspaces) if keep else RnnOutputs(Y, Y_h)


def rnn_bp(X: np.ndarray, W: np.ndarray, R: np.ndarray, B: Optional[np.ndarray] = None,
           sequence_lens: Optional[np.ndarray] = None, initial_h: Optional[np.ndarray] = None,
           dY: Optional[np.ndarray] = None, dY_h: Optional[np.ndarray] = None, *,
           direction: str = "forward", layout: int = 0, hidden_size: Optional[int] = None,
           activations: Optional[Sequence[str]] = None,
           activation_alpha: Optional[Sequence[float]] = None,
           activation_beta: Optional[Sequence[float]] = None, clip: Optional[float] = None,
           workspace: Optional[tuple] = None, n_threads: Optional[int] = None) -> RnnGrads:
    """Gradients of ONNX's RNN.

    Parameters
    ----------
    X, W, R, B, sequence_lens, initial_h
        As :func:`rnn`.
    dY, dY_h : numpy.ndarray, optional
        The gradients arriving at Y and Y_h, in their shapes (None: zeros).
    direction, layout, hidden_size, activations, activation_alpha, activation_beta, clip
        As :func:`rnn`.
    workspace : tuple, optional
        From ``rnn(..., return_workspace=True)`` on the same inputs and attributes: skips
        recomputing the forward pass.
    n_threads : int, optional
        The threads the call runs on (as every cells function).

    Returns
    -------
    RnnGrads
        ``(dX, dW, dR, dB, dinitial_h)``, each in the ONNX shape of its input; dB and dinitial_h
        also when B or initial_h was None. dB = [dWb | dRb] with dWb = dRb.

    Raises
    ------
    TypeError
        A non-array or a wrong dtype.
    ValueError
        A wrong shape, direction or hidden_size, raised before any kernel runs.
    NotImplementedError
        An attribute other than its default (activations, activation_alpha, activation_beta,
        clip, input_forget=1).

    Examples
    --------
    >>> import numpy as np
    >>> from cells import onnx as co
    >>> rng = np.random.default_rng(0)
    >>> T, B_, I, H = 5, 2, 3, 4
    >>> X = rng.normal(size=(T, B_, I))
    >>> g = co.rnn_bp(X, rng.normal(size=(1, H, I)), rng.normal(size=(1, H, H)),
    ...               dY=np.ones((T, 1, B_, H)))
    >>> g.dX.shape
    (5, 2, 3)
    """
    dims = _check_call(_RNN, X, W, R, direction, layout, hidden_size,
                       (activations, activation_alpha, activation_beta, clip),
                       B=B, sequence_lens=sequence_lens, initial_h=initial_h, dY=dY, dY_h=dY_h)
    return RnnGrads(*_backward_h(
        dims, rnnTimeLoopBp, rnn_from_onnx, rnn_to_onnx, (W, R, B), X, initial_h, sequence_lens,
        dY, dY_h, _rnn_options(dims), workspace, n_threads))


# ---------------------------------------------------------------------------------------------
# One time loop per direction, for the operators whose only state is h (GRU, RNN)
# ---------------------------------------------------------------------------------------------

def _forward_h(dims, loop, from_onnx, weights, X, initial_h, sequence_lens, options, keep,
               n_threads):
    """(Y, Y_h, workspaces) of a checked call, each direction d one call of cells' time loop
    `loop` on from_onnx(*weights, direction=d) with the keywords options[d]; workspaces holds
    one per direction with `keep` (the call's return_workspace), else Nones."""
    x = _time_major(X, dims.layout)
    Y, Y_h = _zeros(dims, "Y", X), _zeros(dims, "Y_h", X)
    workspaces = []
    for d, forward in enumerate(dims.forwards):
        Wx, Wh, b = from_onnx(*weights, direction=d)
        hI = _initial_state(initial_h, d, dims, X)
        out = loop(x, hI, Wx, Wh, b, seq_len=sequence_lens, forward=forward,
                   return_workspace=keep, n_threads=n_threads, **options[d])
        h, ws = out if keep else (out, None)
        _sequence(Y, d, dims.layout)[...] = h
        _state(Y_h, d, dims.layout)[...] = _final_state(h, hI, sequence_lens, forward)
        workspaces.append(ws)
    return Y, Y_h, tuple(workspaces)


def _backward_h(dims, loop_bp, from_onnx, to_onnx, weights, X, initial_h, sequence_lens, dY,
                dY_h, options, workspace, n_threads):
    """(dX, dW, dR, dB, dinitial_h) of a checked call, each direction d one call of cells'
    backward time loop `loop_bp` on from_onnx(*weights, direction=d) with the keywords
    options[d], its weight gradients mapped back by to_onnx."""
    workspaces = _workspaces(workspace, dims)
    x = _time_major(X, dims.layout)
    dX, dW, dR, dB, dinitial_h = (_zeros(dims, name, X)
                                  for name in ("X", "W", "R", "B", "initial_h"))
    for d, forward in enumerate(dims.forwards):
        Wx, Wh, b = from_onnx(*weights, direction=d)
        dx, dhI, dWx, dWh, db = loop_bp(
            x, _initial_state(initial_h, d, dims, X), Wx, Wh, b,
            _sequence(dY, d, dims.layout), dLdhLast=_state(dY_h, d, dims.layout),
            workspace=workspaces[d], seq_len=sequence_lens, forward=forward,
            n_threads=n_threads, **options[d])
        _add_time_major(dX, dx, dims.layout)
        W_d, R_d, B_d = to_onnx(dWx, dWh, db)
        dW[d], dR[d], dB[d] = W_d[0], R_d[0], B_d[0]
        _state(dinitial_h, d, dims.layout)[...] = dhI
    return dX, dW, dR, dB, dinitial_h


def _rnn_options(dims):
    """cells' keyword options of each direction of an RNN: its activation."""
    return [{"activation": _CELLS_ACTIVATIONS[names[0]]} for names in dims.activations]


# ---------------------------------------------------------------------------------------------
# Attributes
# ---------------------------------------------------------------------------------------------

class _Op(NamedTuple):
    """What differs between the ONNX GRU, LSTM and RNN for the checks: the number of gate
    blocks and the activations one direction may have (ONNX names), the default first."""

    name: str
    gates: int
    activations: tuple


_GRU = _Op("GRU", 3, (("Sigmoid", "Tanh"),))
_LSTM = _Op("LSTM", 4, (("Sigmoid", "Tanh", "Tanh"),))
_RNN = _Op("RNN", 1, (("Tanh",), ("Relu",)))

# An RNN's ONNX activation -> cells' activation option.
_CELLS_ACTIVATIONS = {"Tanh": "tanh", "Relu": "relu"}

# direction -> the `forward` flag of cells' time loop for each direction index.
_DIRECTIONS = {"forward": (True,), "reverse": (False,), "bidirectional": (True, False)}


def _binary(name, value):
    """An ONNX int attribute that is 0 or 1 (a bool is accepted too)."""
    if not isinstance(value, numbers.Integral) or value not in (0, 1):
        raise ValueError(f"{name}: expected 0 or 1, got {value!r}")
    return int(value)


def _check_input_forget(value):
    if _binary("input_forget", value):
        raise NotImplementedError("input_forget: only input_forget=0 is implemented, got 1")


def _check_unsupported(op, num_directions, activations, activation_alpha, activation_beta,
                       clip):
    """NotImplementedError for an attribute that asks for math cells does not implement:
    activations (listed one direction after the other, as ONNX does) other than op.activations
    for each direction, any activation_alpha or activation_beta (None or empty is the default),
    any clip. Returns each direction's activations, a tuple of ONNX names (op's defaults when
    activations is None)."""
    if activations is None:
        per_direction = (op.activations[0],) * num_directions
    else:
        n = len(op.activations[0])
        given = tuple(activations)
        per_direction = tuple(given[k:k + n] for k in range(0, n * num_directions, n))
        if len(given) != n * num_directions or any(a not in op.activations
                                                   for a in per_direction):
            choices = " or ".join(str(list(a)) for a in op.activations)
            raise NotImplementedError(
                f"activations: only {choices} for each of the {num_directions} direction(s) "
                f"is implemented for {op.name}, got {activations!r}")
    for name, value in (("activation_alpha", activation_alpha),
                        ("activation_beta", activation_beta)):
        if value is not None and not (isinstance(value, (list, tuple)) and len(value) == 0):
            raise NotImplementedError(f"{name}: not implemented (the default activations take "
                                      f"no parameters), got {value!r}")
    if clip is not None:
        raise NotImplementedError(f"clip: not implemented (ONNX's clip bounds the gates' "
                                  f"pre-activations; cells has no such clipping), got {clip!r}")
    return per_direction


# ---------------------------------------------------------------------------------------------
# Shapes
# ---------------------------------------------------------------------------------------------

class _Dims(NamedTuple):
    """The sizes of one call, in ONNX's names, and how its arrays are laid out."""

    op: _Op
    seq_length: int
    batch_size: int
    input_size: int
    hidden_size: int
    forwards: tuple  # cells' `forward` flag for each direction index
    layout: int
    activations: tuple  # the ONNX activations of each direction index


def _shapes(dims):
    """{name: (shape, meaning)} for every ONNX input and output (and their gradients)."""
    s, b, i, h = dims.seq_length, dims.batch_size, dims.input_size, dims.hidden_size
    n, g = len(dims.forwards), dims.op.gates
    if dims.layout == 0:
        x = ((s, b, i), "[seq_length, batch_size, input_size]")
        y = ((s, n, b, h), "[seq_length, num_directions, batch_size, hidden_size]")
        state = ((n, b, h), "[num_directions, batch_size, hidden_size]")
    else:
        x = ((b, s, i), "[batch_size, seq_length, input_size] (layout=1)")
        y = ((b, s, n, h), "[batch_size, seq_length, num_directions, hidden_size] (layout=1)")
        state = ((b, n, h), "[batch_size, num_directions, hidden_size] (layout=1)")
    rows = check.times(g, "hidden_size")
    return {
        "X": x,
        "W": ((n, g * h, i), f"[num_directions, {rows}, input_size]"),
        "R": ((n, g * h, h), f"[num_directions, {rows}, hidden_size]"),
        "B": ((n, 2 * g * h), f"[num_directions, {2 * g}*hidden_size]"),
        "P": ((n, 3 * h), "[num_directions, 3*hidden_size]"),
        "initial_h": state, "initial_c": state,
        "Y": y, "Y_h": state, "Y_c": state,
        "dY": y, "dY_h": state, "dY_c": state,
    }


def _zeros(dims, name, X):
    """Zeros in the ONNX shape of `name`, of X's dtype and kind."""
    return _arrays.array_module(X).zeros(_shapes(dims)[name][0], X.dtype)


def _check_call(op, X, W, R, direction, layout, hidden_size, unsupported, **optional):
    """Check the attributes (`unsupported` = (activations, activation_alpha, activation_beta,
    clip)), then every array against X and R (those in `optional` may be None), before any
    kernel runs; return the call's _Dims."""
    if not isinstance(direction, str) or direction not in _DIRECTIONS:
        raise ValueError(f"direction: expected one of {list(_DIRECTIONS)}, got {direction!r}")
    forwards = _DIRECTIONS[direction]
    activations = _check_unsupported(op, len(forwards), *unsupported)
    layout = _binary("layout", layout)
    lengths = optional.pop("sequence_lens")
    check.real_arrays(optional=optional, X=X, W=W, R=R, **optional)
    check.ndim("X", X, 3, "[seq_length, batch_size, input_size]" if layout == 0 else
               "[batch_size, seq_length, input_size] (layout=1)")
    check.ndim("R", R, 3, f"[num_directions, {check.times(op.gates, 'hidden_size')}, hidden_size]")
    H = R.shape[2]
    if hidden_size is not None:
        if isinstance(hidden_size, bool) or not isinstance(hidden_size, numbers.Integral):
            raise TypeError(f"hidden_size: expected None or an int, got {hidden_size!r}")
        if hidden_size != H:
            raise ValueError(f"hidden_size: expected R's last dimension {H}, got {hidden_size}")
    seq_length, batch_size = X.shape[:2] if layout == 0 else X.shape[1::-1]
    dims = _Dims(op, seq_length, batch_size, X.shape[2], H, forwards, layout, activations)
    shapes = _shapes(dims)
    for name, a in (("W", W), ("R", R), *optional.items()):
        if a is not None:
            check.shape(name, a, *shapes[name])
    check.seq_len(lengths, seq_length, batch_size, X,
                  names=("sequence_lens", "seq_length", "batch_size"))
    return dims


def _check_quantized_call(X, W, R, direction, layout, hidden_size, unsupported, floats,
                          sequence_lens, quantization):
    """Check a dynamic_quantize_lstm call, before any kernel runs: its attributes as
    _check_call does, X and the float32 `floats` (B, initial_h, initial_c, P; None allowed),
    the int8 W and R, the scales and zero points of `quantization`, sequence_lens. Returns
    (dims, lengths: None or int64 [batch_size], {W_scale, R_scale}: float32 arrays, each
    [num_directions] or [num_directions, 4*hidden_size])."""
    if not isinstance(direction, str) or direction not in _DIRECTIONS:
        raise ValueError(f"direction: expected one of {list(_DIRECTIONS)}, got {direction!r}")
    forwards = _DIRECTIONS[direction]
    activations = _check_unsupported(_LSTM, len(forwards), *unsupported)
    layout = _binary("layout", layout)
    for name, a in (("X", X), *floats.items()):
        if a is None and name != "X":
            continue
        if not isinstance(a, np.ndarray):
            raise TypeError(f"{name}: expected a numpy.ndarray, got {type(a).__name__}")
        if a.dtype != np.float32:
            raise TypeError(f"{name}: expected dtype float32 (DynamicQuantizeLSTM runs "
                            f"float32), got {a.dtype}")
    for name, a in (("W", W), ("R", R)):
        if not isinstance(a, np.ndarray):
            raise TypeError(f"{name}: expected a numpy.ndarray of int8, got "
                            f"{type(a).__name__}")
        if a.dtype == np.uint8:
            raise TypeError(f"{name}: uint8 weights are not supported: cells' int8 weights "
                            f"are symmetric int8 in [-127, 127] with zero points 0 (what ONNX "
                            f"Runtime's quantizer writes for an LSTM)")
        if a.dtype != np.int8:
            raise TypeError(f"{name}: expected dtype int8, got {a.dtype}")
    check.ndim("X", X, 3, "[seq_length, batch_size, input_size]" if layout == 0 else
               "[batch_size, seq_length, input_size] (layout=1)")
    check.ndim("R", R, 3, "[num_directions, hidden_size, 4*hidden_size]")
    H = R.shape[1]
    if hidden_size is not None:
        if isinstance(hidden_size, bool) or not isinstance(hidden_size, numbers.Integral):
            raise TypeError(f"hidden_size: expected None or an int, got {hidden_size!r}")
        if hidden_size != H:
            raise ValueError(f"hidden_size: expected R's second dimension {H}, got "
                             f"{hidden_size}")
    seq_length, batch_size = X.shape[:2] if layout == 0 else X.shape[1::-1]
    dims = _Dims(_LSTM, seq_length, batch_size, X.shape[2], H, forwards, layout, activations)
    shapes = _shapes(dims)
    n, I = len(forwards), X.shape[2]
    shapes["W"] = ((n, I, 4 * H), "[num_directions, input_size, 4*hidden_size]")
    shapes["R"] = ((n, H, 4 * H), "[num_directions, hidden_size, 4*hidden_size]")
    for name, a in (("R", R), ("W", W), *floats.items()):
        if a is not None:
            check.shape(name, a, *shapes[name])
    for name, a in (("W", W), ("R", R)):
        if a.size and a.min() == -128:
            raise ValueError(f"{name}: holds -128; cells' int8 weights lie in [-127, 127] "
                             f"(symmetric, as ONNX Runtime's quantizer writes them)")
    scales = {}
    for name in ("W_scale", "R_scale"):
        scales[name] = _quantization(name, quantization[name], n, H, np.float32)
        if not np.all(np.isfinite(scales[name]) & (scales[name] > 0)):
            raise ValueError(f"{name}: expected finite scales > 0, got {scales[name]!r}")
    for name in ("W_zero_point", "R_zero_point"):
        zero_point = quantization[name]
        if zero_point is not None and np.any(_quantization(name, zero_point, n, H, np.int8)):
            raise ValueError(f"{name}: expected zeros (cells' int8 weights are symmetric: "
                             f"zero point 0), got {zero_point!r}")
    lengths = check.seq_len(sequence_lens, seq_length, batch_size, X,
                            names=("sequence_lens", "seq_length", "batch_size"))
    return dims, lengths, scales


def _quantization(name, a, num_directions, H, dtype):
    """A scale or zero point of DynamicQuantizeLSTM, checked: a numpy.ndarray of `dtype`,
    [num_directions] (per tensor) or [num_directions, 4*hidden_size] (per column)."""
    if a is None:
        raise TypeError(f"{name}: required (a {np.dtype(dtype)} numpy.ndarray "
                        f"[num_directions] or [num_directions, 4*hidden_size])")
    if not isinstance(a, np.ndarray):
        raise TypeError(f"{name}: expected a numpy.ndarray, got {type(a).__name__}")
    if a.dtype != dtype:
        raise TypeError(f"{name}: expected dtype {np.dtype(dtype)}, got {a.dtype}")
    if a.shape not in ((num_directions,), (num_directions, 4 * H)):
        raise ValueError(f"{name}: expected shape {(num_directions,)} = [num_directions] (per "
                         f"tensor) or {(num_directions, 4 * H)} = [num_directions, "
                         f"4*hidden_size] (per column), got {a.shape}")
    return a


def _reversed_steps(dims, lengths):
    """[seq_length, batch_size] step indices that reverse each row's first lengths[b] steps
    (all of them without lengths) and keep its others: x[steps, arange(batch_size)] is what the
    reverse direction reads in forward order, and a permutation of each column."""
    t = np.arange(dims.seq_length)[:, None]
    if lengths is None:
        return np.broadcast_to(dims.seq_length - 1 - t, (dims.seq_length, dims.batch_size))
    n = np.asarray(lengths)[None, :]
    return np.where(t < n, n - 1 - t, t)


def _workspaces(workspace, dims):
    """The workspace argument of a backward function as one entry per direction (None: the
    forward pass is recomputed); cells checks each entry against the call."""
    n = len(dims.forwards)
    if workspace is None:
        return (None,) * n
    if not isinstance(workspace, tuple):
        raise TypeError(f"workspace: expected the tuple returned with return_workspace=True, "
                        f"got {type(workspace).__name__}")
    if len(workspace) != n:
        raise ValueError(f"workspace: expected num_directions={n} entries, got {len(workspace)}")
    return workspace


# ---------------------------------------------------------------------------------------------
# Layouts and directions: views between ONNX's arrays and cells' time-major ones
# ---------------------------------------------------------------------------------------------

def _time_major(X, layout):
    """X [seq_length, batch_size, ...] (layout 0) or [batch_size, seq_length, ...] (layout 1) as
    a time-major view [seq_length, batch_size, ...]; the kernels copy it when it is strided."""
    return X if layout == 0 else X.swapaxes(0, 1)


def _add_time_major(dX, dx, layout):
    """dX (X's ONNX layout) += dx [seq_length, batch_size, input_size] (time-major)."""
    view = _time_major(dX, layout)
    view += dx


def _sequence(Y, d, layout):
    """Direction d of Y (or dY) as a time-major view [seq_length, batch_size, hidden_size];
    None stays None."""
    if Y is None:
        return None
    return Y[:, d] if layout == 0 else Y[:, :, d].swapaxes(0, 1)


def _state(S, d, layout):
    """Direction d of a state S [num_directions, batch_size, hidden_size] (layout 1:
    [batch_size, num_directions, hidden_size]) as a view [batch_size, hidden_size]; None stays
    None."""
    if S is None:
        return None
    return S[d] if layout == 0 else S[:, d]


def _initial_state(S, d, dims, X):
    """Direction d of initial_h or initial_c [batch_size, hidden_size]: zeros (of X's dtype and
    kind) when omitted."""
    if S is None:
        return _arrays.array_module(X).zeros((dims.batch_size, dims.hidden_size), X.dtype)
    return _state(S, d, dims.layout)


def _final_state(h, hI, lengths, forward):
    """A GRU's or RNN's direction's Y_h [batch_size, hidden_size] from its outputs h [seq_length,
    batch_size, hidden_size]: the state after each row's last step (time lengths-1 going
    forward, 0 in reverse), the initial state hI for a row of length 0. lengths: None or
    integers [batch_size] (on the host or h's device)."""
    seq_length, batch_size, _ = h.shape
    xp = _arrays.array_module(h)
    lengths = xp.full(batch_size, seq_length) if lengths is None else xp.asarray(lengths)
    ran = xp.flatnonzero(lengths > 0)
    final = hI.copy()
    final[ran] = h[lengths[ran] - 1 if forward else xp.zeros_like(ran), ran]
    return final

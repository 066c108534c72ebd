"""Moving GRU, LSTM and vanilla RNN weights between cells and PyTorch, Keras, ONNX and the block
GRU cell.

Every converter takes array-likes (NumPy arrays, torch tensors, which are detached and copied to
the CPU, nested lists) of one dtype, float32 or float64, and returns new C-contiguous NumPy
arrays of that dtype; CuPy arrays (all the arrays of a call) give CuPy arrays on their device.
Nothing is converted silently: a list of Python floats is float64, and an integer, float16 or
mixed-dtype call is a TypeError; a wrong shape is a ValueError naming the argument with the
expected and the given shape. torch is imported by from_torch_module only.

cells' layout (products are row-vector, z = x·W; H = nOut = hidden_size = units, I = nIn):

    GRU   Wx [I, 3H], Wh [H, 3H], b [3H] (bx alone, bh = 0) or [2, 3H] (rows bx, bh);
          gate blocks r, u, c (reset, update, candidate)
    LSTM  Wx [I, 4H], Wr [H, 4H], b [4H], peepholes Wp [3H] in blocks i, f, o;
          gate blocks i, f, g, o (input, forget, cell candidate, output)
    RNN   Wx [I, H], Wh [H, H], b [H] (bx alone, bh = 0) or [2, H] (rows bx, bh);
          one block: h = act(x·Wx + bx + hI·Wh + bh), act = tanh or relu

The other layouts, with each framework's own gate names (z = u; n, h = c for a GRU; c = g for
an LSTM). PyTorch and ONNX store the matrices transposed (W·x); the others do not (x·W).

    PyTorch nn.GRU, GRUCell    weight_ih [3H, I], weight_hh [3H, H],      r, z, n
                               bias_ih, bias_hh [3H]                      b = [bias_ih, bias_hh]
    Keras GRU                  kernel [I, 3H], recurrent_kernel [H, 3H],  z, r, h
                               bias [2, 3H] (reset_after=True)            b = bias (rows moved)
                               or [3H] (reset_after=False)                b = bias
    ONNX GRU                   W [dirs, 3H, I], R [dirs, 3H, H],          z, r, h
                               B [dirs, 6H] = [Wb | Rb]                   b = [Wb, Rb]
    block: libnd4j's block     Wru [I+H, 2H] (rows x then h), Wc [I+H, H] r, u | c
      gruCell, GRUBlockCell    bru [2H], bc [H]                           b = [bru | bc]
    PyTorch nn.LSTM, LSTMCell  weight_ih [4H, I], weight_hh [4H, H],      i, f, g, o
                               bias_ih, bias_hh [4H]                      b = bias_ih + bias_hh
    Keras LSTM                 kernel [I, 4H], recurrent_kernel [H, 4H],  i, f, c, o
                               bias [4H]                                  b = bias
    ONNX LSTM                  W [dirs, 4H, I], R [dirs, 4H, H],          i, o, f, c
                               B [dirs, 8H] = [Wb | Rb],                  b = Wb + Rb
                               P [dirs, 3H] (peepholes i, o, f)           Wp = P as (i, f, o)
    haste LSTM, LayerNormLSTM  kernel [I, 4H], recurrent_kernel [H, 4H],  i, g, f, o
                               bias [4H]                                  b = bias
    haste GRU, LayerNormGRU    kernel [I, 3H], recurrent_kernel [H, 3H],  z, r, h
                               bias, recurrent_bias [3H]                  b = [bias, rec. bias]
    PyTorch nn.RNN, RNNCell    weight_ih [H, I], weight_hh [H, H],
                               bias_ih, bias_hh [H]                       b = [bias_ih, bias_hh]
    ONNX RNN                   W [dirs, H, I], R [dirs, H, H],
                               B [dirs, 2H] = [Wb | Rb]                   b = [Wb, Rb]

ONNX's from_* take the index of one direction of W, R, B, P; its to_* return a leading
direction axis of 1 (concatenate two for a bidirectional node).

Which GRU. cells' arrays do not say which GRU they belong to: the candidate is
c = tanh(x·Wx_c + bx_c + (r∘hI)·Wh_c + bh_c) (reset-before) or
c = tanh(x·Wx_c + bx_c + r∘(hI·Wh_c + bh_c)) (linear-before-reset), chosen by the
linear_before_reset flag of cells' GRU functions. Each GRU from_* says which one it returns
(PyTorch: always linear-before-reset; Keras: reset_after; block: reset-before; ONNX: the node's
attribute linear_before_reset, which the arrays do not depend on). gru_to_torch, gru_to_keras,
gru_to_block and gru_fold_bias take a keyword `linear_before_reset` without a default, the
value the model runs with in cells, so that no conversion changes the model without being told
which model it is.

Which RNN. Nor do an RNN's arrays say its activation: run cells with activation= the module's
nonlinearity ("tanh" or "relu", which from_torch_module records) or the ONNX node's activations
("Tanh", the default, or "Relu", for each direction).

What cannot be represented is a ValueError, never an approximation:
  - gru_to_torch(linear_before_reset=False): PyTorch has only the linear-before-reset GRU.
  - gru_to_block(linear_before_reset=True): the block cell is only reset-before.
  - Folding b [2, 3H] into one bias [3H] (gru_fold_bias, for libnd4j's fused gruCell; Keras
    reset_after=False; the block cell). Reset-before, every recurrent bias is a plain summand of
    a pre-activation, so bx + bh is the same model. Linear-before-reset, bh_r and bh_u fold the
    same way but bh_c sits inside r∘(hI·Wh_c + bh_c): a non-zero b[1, 2H:] cannot be folded.
  - from_torch_module: an LSTM with proj_size > 0, or another module than the six above.
PyTorch and Keras LSTMs have no peepholes (and no cell clipping): lstm_to_torch and
lstm_to_keras take no Wp.

Gradients. Every map here is linear, and all but the bias sums only move values (gate blocks
permuted, matrices transposed), so gradients convert with the same function as the weights, in
both directions: dL/dWx, dL/dWh (dL/dWr), dL/dWp, and a GRU's dL/db [2, 3H] to and from
PyTorch's (bias_ih, bias_hh), Keras's reset_after bias and ONNX's B. A bias that is the sum of
two, b = p + q, gives each the whole gradient, dL/dp = dL/dq = dL/db, which to_* and from_*
cannot produce from gradients:
  - lstm_to_torch(dL/dWx, dL/dWr, dL/db) gives the gradients of weight_ih, weight_hh and
    bias_ih; bias_hh's is a copy of bias_ih's, not the zeros it returns. Likewise lstm_to_onnx:
    the gradient of B is [dL/dWb | dL/dWb], B[:, 4H:] a copy of B[:, :4H].
  - lstm_from_torch of all four PyTorch gradients returns 2·dL/db: pass bias_ih's alone
    (lstm_from_torch(dW_ih, dW_hh, dbias_ih)). lstm_from_onnx of the gradient of B returns
    2·dL/db too: halve it.
  - A GRU bias folded into one (gru_fold_bias, gru_to_keras(linear_before_reset=False) and
    gru_to_block of a b [2, 3H]) has the gradient dL/db[0] (equal to dL/db[1] reset-before):
    convert dL/db[0], not dL/db, whose rows would be added.
  - A GRU run in cells with b [3H] (an RNN with b [H]) has no bh, hence no gradient for it:
    to_* returns zeros for the gradient of bias_hh (Rb, Keras's recurrent row). Run cells with
    b [2, 3H] (b [2, H]; np.stack([b, 0 * b]): the same model) to get it.
  - An RNN's two biases are plain summands of its pre-activation: cells' dL/db [2, H] has two
    equal rows, and maps to PyTorch's and ONNX's two bias gradients exactly.
"""
import numbers
import sys
from typing import TYPE_CHECKING, List, NamedTuple, Optional, Tuple

import numpy as np
from numpy.typing import ArrayLike

from cells._arrays import array_module, on_gpu
from cells._gates import (
    GRU, HASTE_GRU, HASTE_LSTM, KERAS_GRU, KERAS_LSTM, LSTM, ONNX_GRU, ONNX_LSTM,
    ONNX_PEEPHOLES, PEEPHOLES, TORCH_GRU, TORCH_LSTM, reorder,
)
from cells import _validate as check

if TYPE_CHECKING:
    import torch

# What the converters return: three or four arrays.
Tuple3 = Tuple[np.ndarray, np.ndarray, np.ndarray]
Tuple4 = Tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]

__all__ = [
    "TorchRNN",
    "from_torch_module",
    "gru_from_torch",
    "gru_to_torch",
    "gru_from_keras",
    "gru_to_keras",
    "gru_from_onnx",
    "gru_to_onnx",
    "gru_from_block",
    "gru_to_block",
    "gru_fold_bias",
    "lstm_from_torch",
    "lstm_to_torch",
    "lstm_from_keras",
    "lstm_to_keras",
    "lstm_from_onnx",
    "lstm_to_onnx",
    "rnn_from_torch",
    "rnn_to_torch",
    "rnn_from_onnx",
    "rnn_to_onnx",
    "haste_lstm_to_torch",
    "haste_lstm_from_torch",
    "haste_gru_to_torch",
    "haste_gru_from_torch",
]


# ---------------------------------------------------------------------------------------------
# GRU
# ---------------------------------------------------------------------------------------------

def gru_from_torch(weight_ih: ArrayLike, weight_hh: ArrayLike, bias_ih: Optional[ArrayLike] = None,
                   bias_hh: Optional[ArrayLike] = None) -> Tuple3:
    """PyTorch's nn.GRU / nn.GRUCell weights (one layer, one direction) in cells' layout.

    Parameters
    ----------
    weight_ih : array_like, [3H, I]
        Gate blocks r, z, n.
    weight_hh : array_like, [3H, H]
    bias_ih, bias_hh : array_like, [3H], optional
        None: zeros.

    Returns
    -------
    Wx : numpy.ndarray, [I, 3H]
    Wh : numpy.ndarray, [H, 3H]
    b : numpy.ndarray, [2, 3H]
        [bias_ih, bias_hh], to run with linear_before_reset=True (PyTorch's only GRU).

    Raises
    ------
    TypeError
        An argument that is not an array (NumPy, torch or nested lists) of float32 or float64,
        or arrays of different dtypes.
    ValueError
        A shape that does not fit (the message names the argument, the expected and the given
        shape), or a conversion the target cannot represent.

    Examples
    --------
    >>> import numpy as np
    >>> from cells import convert
    >>> rng = np.random.default_rng(0)
    >>> H, I = 3, 2
    >>> Wx, Wh, b = convert.gru_from_torch(rng.normal(size=(3 * H, I)), rng.normal(size=(3 * H, H)))
    >>> Wx.shape, Wh.shape, b.shape
    ((2, 9), (3, 9), (2, 9))
    """
    weight_ih, weight_hh, bias_ih, bias_hh = _arrays(
        ("bias_ih", "bias_hh"),
        weight_ih=weight_ih, weight_hh=weight_hh, bias_ih=bias_ih, bias_hh=bias_hh)
    H = _check_torch(3, weight_ih, weight_hh, bias_ih, bias_hh)
    b = array_module(weight_ih).stack([_or_zeros(bias_ih, 3 * H, weight_ih),
                                                _or_zeros(bias_hh, 3 * H, weight_ih)])
    return (_transposed(reorder(weight_ih, TORCH_GRU, GRU, axis=0)),
            _transposed(reorder(weight_hh, TORCH_GRU, GRU, axis=0)),
            reorder(b, TORCH_GRU, GRU))


def gru_to_torch(Wx: ArrayLike, Wh: ArrayLike, b: ArrayLike, *,
                 linear_before_reset: bool) -> Tuple4:
    """cells' GRU weights as PyTorch's nn.GRU / nn.GRUCell parameters.

    Parameters
    ----------
    Wx : array_like, [I, 3H]
    Wh : array_like, [H, 3H]
    b : array_like, [3H] or [2, 3H]
    linear_before_reset : bool
        The flag the model runs with in cells; must be True (PyTorch has no reset-before GRU).

    Returns
    -------
    weight_ih : numpy.ndarray, [3H, I]
    weight_hh : numpy.ndarray, [3H, H]
    bias_ih, bias_hh : numpy.ndarray, [3H]
        bias_hh is zeros when b is [3H].

    Raises
    ------
    TypeError
        An argument that is not an array (NumPy, torch or nested lists) of float32 or float64,
        or arrays of different dtypes.
    ValueError
        A shape that does not fit (the message names the argument, the expected and the given
        shape), or a conversion the target cannot represent.

    Examples
    --------
    >>> import numpy as np
    >>> from cells import convert
    >>> rng = np.random.default_rng(0)
    >>> H, I = 3, 2
    >>> Wx, Wh, b = rng.normal(size=(I, 3 * H)), rng.normal(size=(H, 3 * H)), np.zeros((2, 3 * H))
    >>> w_ih, w_hh, b_ih, b_hh = convert.gru_to_torch(Wx, Wh, b, linear_before_reset=True)
    >>> np.array_equal(convert.gru_from_torch(w_ih, w_hh, b_ih, b_hh)[0], Wx)
    True
    """
    if not check.flag("linear_before_reset", linear_before_reset):
        raise ValueError(
            "linear_before_reset=False: PyTorch's GRU is linear-before-reset only, "
            "c = tanh(x·Wx_c + bx_c + r∘(hI·Wh_c + bh_c)); a reset-before GRU, "
            "c = tanh(x·Wx_c + bx_c + (r∘hI)·Wh_c + bh_c), has no PyTorch equivalent")
    Wx, Wh, b = _arrays(Wx=Wx, Wh=Wh, b=b)
    _check_gru(Wx, Wh, b)
    bias_ih, bias_hh = reorder(_two_rows(b), GRU, TORCH_GRU)
    return (_transposed(reorder(Wx, GRU, TORCH_GRU)),
            _transposed(reorder(Wh, GRU, TORCH_GRU)), bias_ih, bias_hh)


def gru_from_keras(kernel: ArrayLike, recurrent_kernel: ArrayLike, bias: Optional[ArrayLike] = None,
                   reset_after: bool = True) -> Tuple3:
    """Keras's GRU weights (``layer.get_weights()``) in cells' layout.

    Parameters
    ----------
    kernel : array_like, [I, 3H]
        Gate blocks z, r, h.
    recurrent_kernel : array_like, [H, 3H]
    bias : array_like, optional
        [2, 3H] (rows input, recurrent) when reset_after=True, [3H] when False; None: zeros.
    reset_after : bool, default True
        The layer's own option.

    Returns
    -------
    Wx : numpy.ndarray, [I, 3H]
    Wh : numpy.ndarray, [H, 3H]
    b : numpy.ndarray
        bias's shape; run with linear_before_reset=reset_after.

    Raises
    ------
    TypeError
        An argument that is not an array (NumPy, torch or nested lists) of float32 or float64,
        or arrays of different dtypes.
    ValueError
        A shape that does not fit (the message names the argument, the expected and the given
        shape), or a conversion the target cannot represent.
    """
    reset_after = check.flag("reset_after", reset_after)
    kernel, recurrent_kernel, bias = _arrays(
        ("bias",), kernel=kernel, recurrent_kernel=recurrent_kernel, bias=bias)
    H = _check_keras(3, kernel, recurrent_kernel)
    if reset_after:
        shape, meaning = (2, 3 * H), "[2, 3*units] (rows input, recurrent) with reset_after=True"
    else:
        shape, meaning = (3 * H,), "[3*units] with reset_after=False"
    if bias is None:
        bias = _zeros(shape, kernel)
    else:
        check.shape("bias", bias, shape, meaning)
    return (reorder(kernel, KERAS_GRU, GRU), reorder(recurrent_kernel, KERAS_GRU, GRU),
            reorder(bias, KERAS_GRU, GRU))


def gru_to_keras(Wx: ArrayLike, Wh: ArrayLike, b: ArrayLike, *,
                 linear_before_reset: bool) -> Tuple3:
    """cells' GRU weights as Keras's, for ``keras.layers.GRU(reset_after=linear_before_reset)``.

    Parameters
    ----------
    Wx : array_like, [I, 3H]
    Wh : array_like, [H, 3H]
    b : array_like, [3H] or [2, 3H]
    linear_before_reset : bool
        The flag the model runs with in cells.

    Returns
    -------
    kernel : numpy.ndarray, [I, 3H]
    recurrent_kernel : numpy.ndarray, [H, 3H]
    bias : numpy.ndarray
        [2, 3H] with linear_before_reset=True (recurrent row 0 when b is [3H]), else [3H] =
        gru_fold_bias(b) (reset-before: the rows are summed, the same model).

    Raises
    ------
    TypeError
        An argument that is not an array (NumPy, torch or nested lists) of float32 or float64,
        or arrays of different dtypes.
    ValueError
        A shape that does not fit (the message names the argument, the expected and the given
        shape), or a conversion the target cannot represent.
    """
    lbr = check.flag("linear_before_reset", linear_before_reset)
    Wx, Wh, b = _arrays(Wx=Wx, Wh=Wh, b=b)
    _check_gru(Wx, Wh, b)
    bias = _two_rows(b) if lbr else _fold(b, False)
    return (reorder(Wx, GRU, KERAS_GRU), reorder(Wh, GRU, KERAS_GRU),
            reorder(bias, GRU, KERAS_GRU))


def gru_from_onnx(W: ArrayLike, R: ArrayLike, B: Optional[ArrayLike] = None,
                  direction: int = 0) -> Tuple3:
    """One direction of an ONNX GRU node's inputs in cells' layout.

    Parameters
    ----------
    W : array_like, [dirs, 3H, I]
        Gate blocks z, r, h.
    R : array_like, [dirs, 3H, H]
    B : array_like, [dirs, 6H], optional
        [Wb | Rb]; None: zeros.
    direction : int, default 0
        The index into dirs: for a bidirectional node 0 forward, 1 reverse (which cells runs
        with forward=False).

    Returns
    -------
    Wx : numpy.ndarray, [I, 3H]
    Wh : numpy.ndarray, [H, 3H]
    b : numpy.ndarray, [2, 3H]
        [Wb, Rb]; run with the node's linear_before_reset.

    Raises
    ------
    TypeError
        An argument that is not an array (NumPy, torch or nested lists) of float32 or float64,
        or arrays of different dtypes.
    ValueError
        A shape that does not fit (the message names the argument, the expected and the given
        shape), or a conversion the target cannot represent.
    """
    W, R, B = _arrays(("B",), W=W, R=R, B=B)
    H, d = _check_onnx(3, W, R, direction)
    if B is None:
        B = _zeros((W.shape[0], 6 * H), W)
    else:
        check.shape("B", B, (W.shape[0], 6 * H), "[num_directions, 6*hidden_size] (Wb then Rb)")
    return (_transposed(reorder(W[d], ONNX_GRU, GRU, axis=0)),
            _transposed(reorder(R[d], ONNX_GRU, GRU, axis=0)),
            reorder(B[d].reshape(2, 3 * H), ONNX_GRU, GRU))


def gru_to_onnx(Wx: ArrayLike, Wh: ArrayLike,
                b: ArrayLike) -> Tuple3:
    """cells' GRU weights as an ONNX GRU node's inputs, with one direction (dirs = 1).

    Parameters
    ----------
    Wx : array_like, [I, 3H]
    Wh : array_like, [H, 3H]
    b : array_like, [3H] or [2, 3H]

    Returns
    -------
    W : numpy.ndarray, [1, 3H, I]
    R : numpy.ndarray, [1, 3H, H]
    B : numpy.ndarray, [1, 6H]
        [Wb | Rb], Rb = 0 when b is [3H]. Set the node's linear_before_reset to the flag the
        model runs with in cells.

    Raises
    ------
    TypeError
        An argument that is not an array (NumPy, torch or nested lists) of float32 or float64,
        or arrays of different dtypes.
    ValueError
        A shape that does not fit (the message names the argument, the expected and the given
        shape), or a conversion the target cannot represent.

    Examples
    --------
    >>> import numpy as np
    >>> from cells import convert
    >>> rng = np.random.default_rng(0)
    >>> H, I = 3, 2
    >>> Wx, Wh, b = rng.normal(size=(I, 3 * H)), rng.normal(size=(H, 3 * H)), np.zeros(3 * H)
    >>> W, R, B = convert.gru_to_onnx(Wx, Wh, b)
    >>> W.shape, R.shape, B.shape
    ((1, 9, 2), (1, 9, 3), (1, 18))
    """
    Wx, Wh, b = _arrays(Wx=Wx, Wh=Wh, b=b)
    H = _check_gru(Wx, Wh, b)
    return (_transposed(reorder(Wx, GRU, ONNX_GRU))[None],
            _transposed(reorder(Wh, GRU, ONNX_GRU))[None],
            reorder(_two_rows(b), GRU, ONNX_GRU).reshape(1, 6 * H))


def gru_from_block(Wru: ArrayLike, Wc: ArrayLike, bru: ArrayLike,
                   bc: ArrayLike) -> Tuple3:
    """The block GRU cell's weights (libnd4j's block gruCell, TensorFlow's GRUBlockCell,
    cells.gruBlockCell) in cells' layout.

    Parameters
    ----------
    Wru : array_like, [I+H, 2H]
        Rows x then h, columns r then u.
    Wc : array_like, [I+H, H]
    bru : array_like, [2H]
    bc : array_like, [H]

    Returns
    -------
    Wx : numpy.ndarray, [I, 3H]
    Wh : numpy.ndarray, [H, 3H]
    b : numpy.ndarray, [3H]
        To run with linear_before_reset=False (the block cell is reset-before).

    Raises
    ------
    TypeError
        An argument that is not an array (NumPy, torch or nested lists) of float32 or float64,
        or arrays of different dtypes.
    ValueError
        A shape that does not fit (the message names the argument, the expected and the given
        shape), or a conversion the target cannot represent.
    """
    Wru, Wc, bru, bc = _arrays(Wru=Wru, Wc=Wc, bru=bru, bc=bc)
    check.ndim("Wc", Wc, 2, "[nIn+nOut, nOut]")
    nOut = Wc.shape[1]
    nIn = Wc.shape[0] - nOut
    if nIn < 0:
        raise ValueError(f"Wc: expected shape [nIn+nOut, nOut] (at least nOut rows), "
                         f"got {Wc.shape}")
    check.shape("Wru", Wru, (nIn + nOut, 2 * nOut), "[nIn+nOut, 2*nOut] (nIn, nOut from Wc)")
    check.shape("bru", bru, (2 * nOut,), "[2*nOut]")
    check.shape("bc", bc, (nOut,), "[nOut]")
    xp = array_module(Wru)
    return (xp.concatenate([Wru[:nIn], Wc[:nIn]], axis=1),
            xp.concatenate([Wru[nIn:], Wc[nIn:]], axis=1), xp.concatenate([bru, bc]))


def gru_to_block(Wx: ArrayLike, Wh: ArrayLike, b: ArrayLike, *,
                 linear_before_reset: bool) -> Tuple4:
    """cells' GRU weights in the block cell's layout (see gru_from_block).

    Parameters
    ----------
    Wx : array_like, [I, 3H]
    Wh : array_like, [H, 3H]
    b : array_like, [3H] or [2, 3H]
    linear_before_reset : bool
        Must be False (the block cell is reset-before).

    Returns
    -------
    Wru : numpy.ndarray, [I+H, 2H]
    Wc : numpy.ndarray, [I+H, H]
    bru : numpy.ndarray, [2H]
    bc : numpy.ndarray, [H]
        bru and bc hold gru_fold_bias(b).

    Raises
    ------
    TypeError
        An argument that is not an array (NumPy, torch or nested lists) of float32 or float64,
        or arrays of different dtypes.
    ValueError
        A shape that does not fit (the message names the argument, the expected and the given
        shape), or a conversion the target cannot represent.
    """
    if check.flag("linear_before_reset", linear_before_reset):
        raise ValueError(
            "linear_before_reset=True: the block cell (libnd4j's block gruCell, TensorFlow's "
            "GRUBlockCell) is reset-before only, c = tanh([x, r∘hLast]·Wc + bc); a "
            "linear-before-reset GRU, c = tanh(x·Wx_c + bx_c + r∘(hI·Wh_c + bh_c)), has no "
            "block equivalent")
    Wx, Wh, b = _arrays(Wx=Wx, Wh=Wh, b=b)
    H = _check_gru(Wx, Wh, b)
    xp = array_module(Wx)
    Wru = xp.concatenate([Wx[:, :2 * H], Wh[:, :2 * H]])
    Wc = xp.concatenate([Wx[:, 2 * H:], Wh[:, 2 * H:]])
    bias = _fold(b, False)
    return Wru, Wc, bias[:2 * H].copy(), bias[2 * H:].copy()


def gru_fold_bias(b: ArrayLike, *, linear_before_reset: bool) -> np.ndarray:
    """b [2, 3H] as one bias [3H] for the same model: libnd4j's fused gruCell, cells with b [3H].

    Parameters
    ----------
    b : array_like, [2, 3H] or [3H]
        A [3H] bias is returned as a copy.
    linear_before_reset : bool
        Reset-before, every recurrent bias is a plain summand: b[0] + b[1]. With
        linear_before_reset bh_r and bh_u fold the same way, but bh_c sits inside r∘(hI·Wh_c +
        bh_c).

    Returns
    -------
    b : numpy.ndarray, [3H]

    Raises
    ------
    ValueError
        With linear_before_reset=True and a non-zero b[1, 2H:].
    TypeError
        An argument that is not an array (NumPy, torch or nested lists) of float32 or float64,
        or arrays of different dtypes.

    Examples
    --------
    >>> import numpy as np
    >>> from cells import convert
    >>> convert.gru_fold_bias(np.ones((2, 3)), linear_before_reset=False)
    array([2., 2., 2.])
    """
    lbr = check.flag("linear_before_reset", linear_before_reset)
    (b,) = _arrays(b=b)
    if b.ndim not in (1, 2) or b.shape[-1] % 3 or (b.ndim == 2 and b.shape[0] != 2):
        raise ValueError(f"b: expected shape [3*nOut] or [2, 3*nOut] (rows bx, bh), "
                         f"got {b.shape}")
    return _fold(b, lbr)


# ---------------------------------------------------------------------------------------------
# LSTM
# ---------------------------------------------------------------------------------------------

def lstm_from_torch(weight_ih: ArrayLike, weight_hh: ArrayLike, bias_ih: Optional[ArrayLike] = None,
                    bias_hh: Optional[ArrayLike] = None) -> Tuple3:
    """PyTorch's nn.LSTM / nn.LSTMCell weights (one layer, one direction) in cells' layout.

    Parameters
    ----------
    weight_ih : array_like, [4H, I]
        Gate blocks i, f, g, o.
    weight_hh : array_like, [4H, H]
    bias_ih, bias_hh : array_like, [4H], optional
        None: zeros.

    Returns
    -------
    Wx : numpy.ndarray, [I, 4H]
    Wr : numpy.ndarray, [H, 4H]
    b : numpy.ndarray, [4H]
        bias_ih + bias_hh.

    Raises
    ------
    TypeError
        An argument that is not an array (NumPy, torch or nested lists) of float32 or float64,
        or arrays of different dtypes.
    ValueError
        A shape that does not fit (the message names the argument, the expected and the given
        shape), or a conversion the target cannot represent.
    """
    weight_ih, weight_hh, bias_ih, bias_hh = _arrays(
        ("bias_ih", "bias_hh"),
        weight_ih=weight_ih, weight_hh=weight_hh, bias_ih=bias_ih, bias_hh=bias_hh)
    H = _check_torch(4, weight_ih, weight_hh, bias_ih, bias_hh)
    b = _or_zeros(bias_ih, 4 * H, weight_ih) + _or_zeros(bias_hh, 4 * H, weight_ih)
    return (_transposed(reorder(weight_ih, TORCH_LSTM, LSTM, axis=0)),
            _transposed(reorder(weight_hh, TORCH_LSTM, LSTM, axis=0)),
            reorder(b, TORCH_LSTM, LSTM))


def lstm_to_torch(Wx: ArrayLike, Wr: ArrayLike,
                  b: Optional[ArrayLike] = None) -> Tuple4:
    """cells' LSTM weights (no peepholes: PyTorch has none) as nn.LSTM / nn.LSTMCell parameters.

    Parameters
    ----------
    Wx : array_like, [I, 4H]
    Wr : array_like, [H, 4H]
    b : array_like, [4H], optional

    Returns
    -------
    weight_ih : numpy.ndarray, [4H, I]
    weight_hh : numpy.ndarray, [4H, H]
    bias_ih : numpy.ndarray, [4H]
        b (zeros when None).
    bias_hh : numpy.ndarray, [4H]
        Zeros.

    Raises
    ------
    TypeError
        An argument that is not an array (NumPy, torch or nested lists) of float32 or float64,
        or arrays of different dtypes.
    ValueError
        A shape that does not fit (the message names the argument, the expected and the given
        shape), or a conversion the target cannot represent.
    """
    Wx, Wr, b = _arrays(("b",), Wx=Wx, Wr=Wr, b=b)
    H = _check_lstm(Wx, Wr, b)
    return (_transposed(reorder(Wx, LSTM, TORCH_LSTM)),
            _transposed(reorder(Wr, LSTM, TORCH_LSTM)),
            reorder(_or_zeros(b, 4 * H, Wx), LSTM, TORCH_LSTM), _zeros(4 * H, Wx))


def lstm_from_keras(kernel: ArrayLike, recurrent_kernel: ArrayLike,
                    bias: Optional[ArrayLike] = None) -> Tuple3:
    """Keras's LSTM weights (``layer.get_weights()``) in cells' layout.

    Parameters
    ----------
    kernel : array_like, [I, 4H]
        Gate blocks i, f, c, o.
    recurrent_kernel : array_like, [H, 4H]
    bias : array_like, [4H], optional
        None: zeros.

    Returns
    -------
    Wx : numpy.ndarray, [I, 4H]
    Wr : numpy.ndarray, [H, 4H]
    b : numpy.ndarray, [4H]

    Raises
    ------
    TypeError
        An argument that is not an array (NumPy, torch or nested lists) of float32 or float64,
        or arrays of different dtypes.
    ValueError
        A shape that does not fit (the message names the argument, the expected and the given
        shape), or a conversion the target cannot represent.
    """
    kernel, recurrent_kernel, bias = _arrays(
        ("bias",), kernel=kernel, recurrent_kernel=recurrent_kernel, bias=bias)
    H = _check_keras(4, kernel, recurrent_kernel)
    if bias is not None:
        check.shape("bias", bias, (4 * H,), "[4*units]")
    return (reorder(kernel, KERAS_LSTM, LSTM), reorder(recurrent_kernel, KERAS_LSTM, LSTM),
            reorder(_or_zeros(bias, 4 * H, kernel), KERAS_LSTM, LSTM))


def lstm_to_keras(Wx: ArrayLike, Wr: ArrayLike,
                  b: Optional[ArrayLike] = None) -> Tuple3:
    """cells' LSTM weights (no peepholes: Keras has none) as Keras's, for ``layer.set_weights``.

    Parameters
    ----------
    Wx : array_like, [I, 4H]
    Wr : array_like, [H, 4H]
    b : array_like, [4H], optional

    Returns
    -------
    kernel : numpy.ndarray, [I, 4H]
    recurrent_kernel : numpy.ndarray, [H, 4H]
    bias : numpy.ndarray, [4H]
        Zeros when b is None.

    Raises
    ------
    TypeError
        An argument that is not an array (NumPy, torch or nested lists) of float32 or float64,
        or arrays of different dtypes.
    ValueError
        A shape that does not fit (the message names the argument, the expected and the given
        shape), or a conversion the target cannot represent.
    """
    Wx, Wr, b = _arrays(("b",), Wx=Wx, Wr=Wr, b=b)
    H = _check_lstm(Wx, Wr, b)
    return (reorder(Wx, LSTM, KERAS_LSTM), reorder(Wr, LSTM, KERAS_LSTM),
            reorder(_or_zeros(b, 4 * H, Wx), LSTM, KERAS_LSTM))


def lstm_from_onnx(W: ArrayLike, R: ArrayLike, B: Optional[ArrayLike] = None,
                   P: Optional[ArrayLike] = None, direction: int = 0
                   ) -> Tuple[np.ndarray, np.ndarray, np.ndarray, Optional[np.ndarray]]:
    """One direction of an ONNX LSTM node's inputs in cells' layout.

    Parameters
    ----------
    W : array_like, [dirs, 4H, I]
        Gate blocks i, o, f, c.
    R : array_like, [dirs, 4H, H]
    B : array_like, [dirs, 8H], optional
        [Wb | Rb]; None: zeros.
    P : array_like, [dirs, 3H], optional
        Peepholes i, o, f.
    direction : int, default 0
        The index into dirs: for a bidirectional node 0 forward, 1 reverse (which cells runs
        with forward=False).

    Returns
    -------
    Wx : numpy.ndarray, [I, 4H]
    Wr : numpy.ndarray, [H, 4H]
    b : numpy.ndarray, [4H]
        Wb + Rb.
    Wp : numpy.ndarray, [3H], or None
        Blocks i, f, o; None when P is None.

    Raises
    ------
    TypeError
        An argument that is not an array (NumPy, torch or nested lists) of float32 or float64,
        or arrays of different dtypes.
    ValueError
        A shape that does not fit (the message names the argument, the expected and the given
        shape), or a conversion the target cannot represent.
    """
    W, R, B, P = _arrays(("B", "P"), W=W, R=R, B=B, P=P)
    H, d = _check_onnx(4, W, R, direction)
    dirs = W.shape[0]
    if B is None:
        B = _zeros((dirs, 8 * H), W)
    else:
        check.shape("B", B, (dirs, 8 * H), "[num_directions, 8*hidden_size] (Wb then Rb)")
    if P is not None:
        check.shape("P", P, (dirs, 3 * H), "[num_directions, 3*hidden_size]")
        P = reorder(P[d], ONNX_PEEPHOLES, PEEPHOLES)
    return (_transposed(reorder(W[d], ONNX_LSTM, LSTM, axis=0)),
            _transposed(reorder(R[d], ONNX_LSTM, LSTM, axis=0)),
            reorder(B[d, :4 * H] + B[d, 4 * H:], ONNX_LSTM, LSTM), P)


def lstm_to_onnx(Wx: ArrayLike, Wr: ArrayLike, b: Optional[ArrayLike] = None,
                 Wp: Optional[ArrayLike] = None
                 ) -> Tuple[np.ndarray, np.ndarray, np.ndarray, Optional[np.ndarray]]:
    """cells' LSTM weights as an ONNX LSTM node's inputs, with one direction (dirs = 1).

    Parameters
    ----------
    Wx : array_like, [I, 4H]
    Wr : array_like, [H, 4H]
    b : array_like, [4H], optional
    Wp : array_like, [3H], optional
        Peepholes i, f, o.

    Returns
    -------
    W : numpy.ndarray, [1, 4H, I]
    R : numpy.ndarray, [1, 4H, H]
    B : numpy.ndarray, [1, 8H]
        [b | 0] (zeros when b is None).
    P : numpy.ndarray, [1, 3H], or None
        Blocks i, o, f; None when Wp is None.

    Raises
    ------
    TypeError
        An argument that is not an array (NumPy, torch or nested lists) of float32 or float64,
        or arrays of different dtypes.
    ValueError
        A shape that does not fit (the message names the argument, the expected and the given
        shape), or a conversion the target cannot represent.
    """
    Wx, Wr, b, Wp = _arrays(("b", "Wp"), Wx=Wx, Wr=Wr, b=b, Wp=Wp)
    H = _check_lstm(Wx, Wr, b, Wp)
    Wb = reorder(_or_zeros(b, 4 * H, Wx), LSTM, ONNX_LSTM)
    P = None if Wp is None else reorder(Wp, PEEPHOLES, ONNX_PEEPHOLES)[None]
    return (_transposed(reorder(Wx, LSTM, ONNX_LSTM))[None],
            _transposed(reorder(Wr, LSTM, ONNX_LSTM))[None],
            array_module(Wx).concatenate([Wb, _zeros(4 * H, Wx)])[None], P)


# ---------------------------------------------------------------------------------------------
# Vanilla RNN
# ---------------------------------------------------------------------------------------------

def rnn_from_torch(weight_ih: ArrayLike, weight_hh: ArrayLike, bias_ih: Optional[ArrayLike] = None,
                   bias_hh: Optional[ArrayLike] = None) -> Tuple3:
    """PyTorch's nn.RNN / nn.RNNCell weights (one layer, one direction) in cells' layout.

    Parameters
    ----------
    weight_ih : array_like, [H, I]
    weight_hh : array_like, [H, H]
    bias_ih, bias_hh : array_like, [H], optional
        None: zeros.

    Returns
    -------
    Wx : numpy.ndarray, [I, H]
    Wh : numpy.ndarray, [H, H]
    b : numpy.ndarray, [2, H]
        [bias_ih, bias_hh]; run with the module's nonlinearity as cells' activation.

    Raises
    ------
    TypeError
        An argument that is not an array (NumPy, torch or nested lists) of float32 or float64,
        or arrays of different dtypes.
    ValueError
        A shape that does not fit (the message names the argument, the expected and the given
        shape), or a conversion the target cannot represent.
    """
    weight_ih, weight_hh, bias_ih, bias_hh = _arrays(
        ("bias_ih", "bias_hh"),
        weight_ih=weight_ih, weight_hh=weight_hh, bias_ih=bias_ih, bias_hh=bias_hh)
    H = _check_torch(1, weight_ih, weight_hh, bias_ih, bias_hh)
    b = array_module(weight_ih).stack([_or_zeros(bias_ih, H, weight_ih),
                                                _or_zeros(bias_hh, H, weight_ih)])
    return _transposed(weight_ih), _transposed(weight_hh), b


def rnn_to_torch(Wx: ArrayLike, Wh: ArrayLike,
                 b: ArrayLike) -> Tuple4:
    """cells' RNN weights as PyTorch's nn.RNN / nn.RNNCell parameters.

    Parameters
    ----------
    Wx : array_like, [I, H]
    Wh : array_like, [H, H]
    b : array_like, [H] or [2, H]

    Returns
    -------
    weight_ih : numpy.ndarray, [H, I]
    weight_hh : numpy.ndarray, [H, H]
    bias_ih, bias_hh : numpy.ndarray, [H]
        bias_hh is zeros when b is [H]. Set the module's nonlinearity to the activation the
        model runs with in cells.

    Raises
    ------
    TypeError
        An argument that is not an array (NumPy, torch or nested lists) of float32 or float64,
        or arrays of different dtypes.
    ValueError
        A shape that does not fit (the message names the argument, the expected and the given
        shape), or a conversion the target cannot represent.
    """
    Wx, Wh, b = _arrays(Wx=Wx, Wh=Wh, b=b)
    _check_rnn(Wx, Wh, b)
    bias_ih, bias_hh = _two_rows(b)
    return _transposed(Wx), _transposed(Wh), bias_ih, bias_hh


def rnn_from_onnx(W: ArrayLike, R: ArrayLike, B: Optional[ArrayLike] = None,
                  direction: int = 0) -> Tuple3:
    """One direction of an ONNX RNN node's inputs in cells' layout.

    Parameters
    ----------
    W : array_like, [dirs, H, I]
    R : array_like, [dirs, H, H]
    B : array_like, [dirs, 2H], optional
        [Wb | Rb]; None: zeros.
    direction : int, default 0
        The index into dirs: for a bidirectional node 0 forward, 1 reverse (which cells runs
        with forward=False).

    Returns
    -------
    Wx : numpy.ndarray, [I, H]
    Wh : numpy.ndarray, [H, H]
    b : numpy.ndarray, [2, H]
        [Wb, Rb]; run with the direction's activation ("Tanh": activation="tanh", "Relu":
        "relu").

    Raises
    ------
    TypeError
        An argument that is not an array (NumPy, torch or nested lists) of float32 or float64,
        or arrays of different dtypes.
    ValueError
        A shape that does not fit (the message names the argument, the expected and the given
        shape), or a conversion the target cannot represent.
    """
    W, R, B = _arrays(("B",), W=W, R=R, B=B)
    H, d = _check_onnx(1, W, R, direction)
    if B is None:
        B = _zeros((W.shape[0], 2 * H), W)
    else:
        check.shape("B", B, (W.shape[0], 2 * H), "[num_directions, 2*hidden_size] (Wb then Rb)")
    return _transposed(W[d]), _transposed(R[d]), _two_rows(B[d].reshape(2, H))


def rnn_to_onnx(Wx: ArrayLike, Wh: ArrayLike,
                b: ArrayLike) -> Tuple3:
    """cells' RNN weights as an ONNX RNN node's inputs, with one direction (dirs = 1).

    Parameters
    ----------
    Wx : array_like, [I, H]
    Wh : array_like, [H, H]
    b : array_like, [H] or [2, H]

    Returns
    -------
    W : numpy.ndarray, [1, H, I]
    R : numpy.ndarray, [1, H, H]
    B : numpy.ndarray, [1, 2H]
        [Wb | Rb], Rb = 0 when b is [H]. Set the node's activations to the one the model runs
        with in cells ("Tanh" or "Relu").

    Raises
    ------
    TypeError
        An argument that is not an array (NumPy, torch or nested lists) of float32 or float64,
        or arrays of different dtypes.
    ValueError
        A shape that does not fit (the message names the argument, the expected and the given
        shape), or a conversion the target cannot represent.
    """
    Wx, Wh, b = _arrays(Wx=Wx, Wh=Wh, b=b)
    H = _check_rnn(Wx, Wh, b)
    return _transposed(Wx)[None], _transposed(Wh)[None], _two_rows(b).reshape(1, 2 * H)


# ---------------------------------------------------------------------------------------------
# haste's LSTM and GRU (haste_pytorch, cells.haste) and PyTorch's
# ---------------------------------------------------------------------------------------------

def haste_lstm_to_torch(kernel: ArrayLike, recurrent_kernel: ArrayLike,
                        bias: ArrayLike) -> Tuple4:
    """haste's LSTM weights (haste_pytorch.LSTM, cells.haste.LSTM) as nn.LSTM's, as haste's own
    ``to_native_weights`` converts them.

    Parameters
    ----------
    kernel : array_like, [I, 4H]
        Gate blocks i, g, f, o.
    recurrent_kernel : array_like, [H, 4H]
    bias : array_like, [4H]

    Returns
    -------
    weight_ih : numpy.ndarray, [4H, I]
        Gate blocks i, f, g, o.
    weight_hh : numpy.ndarray, [4H, H]
    bias_ih, bias_hh : numpy.ndarray, [4H]
        Each half of bias (haste's split; their sum is the model's bias).

    Raises
    ------
    TypeError
        An argument that is not an array (NumPy, torch or nested lists) of float32 or float64,
        or arrays of different dtypes.
    ValueError
        A shape that does not fit (the message names the argument, the expected and the given
        shape).

    Examples
    --------
    >>> import numpy as np, cells
    >>> w_ih, w_hh, b_ih, b_hh = cells.convert.haste_lstm_to_torch(
    ...     np.zeros((3, 8)), np.zeros((2, 8)), np.ones(8))
    >>> w_ih.shape, float(b_ih[0])
    ((8, 3), 0.5)
    """
    kernel, recurrent_kernel, bias = _arrays(kernel=kernel, recurrent_kernel=recurrent_kernel,
                                             bias=bias)
    H = _check_keras(4, kernel, recurrent_kernel)
    check.shape("bias", bias, (4 * H,), "[4*hidden_size]")
    half = reorder(bias, HASTE_LSTM, TORCH_LSTM) / 2
    return (_transposed(reorder(kernel, HASTE_LSTM, TORCH_LSTM)),
            _transposed(reorder(recurrent_kernel, HASTE_LSTM, TORCH_LSTM)), half, half.copy())


def haste_lstm_from_torch(weight_ih: ArrayLike, weight_hh: ArrayLike,
                          bias_ih: Optional[ArrayLike] = None,
                          bias_hh: Optional[ArrayLike] = None) -> Tuple3:
    """nn.LSTM's weights (one layer, one direction) as haste's LSTM's, as haste's own
    ``from_native_weights`` converts them.

    Parameters
    ----------
    weight_ih : array_like, [4H, I]
        Gate blocks i, f, g, o.
    weight_hh : array_like, [4H, H]
    bias_ih, bias_hh : array_like, [4H], optional
        None: zeros.

    Returns
    -------
    kernel : numpy.ndarray, [I, 4H]
        Gate blocks i, g, f, o.
    recurrent_kernel : numpy.ndarray, [H, 4H]
    bias : numpy.ndarray, [4H]
        bias_ih + bias_hh.

    Raises
    ------
    TypeError, ValueError
        As :func:`haste_lstm_to_torch`.

    Examples
    --------
    >>> import numpy as np, cells
    >>> kernel, recurrent_kernel, bias = cells.convert.haste_lstm_from_torch(
    ...     np.zeros((8, 3)), np.zeros((8, 2)), np.ones(8), np.ones(8))
    >>> kernel.shape, float(bias[0])
    ((3, 8), 2.0)
    """
    weight_ih, weight_hh, bias_ih, bias_hh = _arrays(
        ("bias_ih", "bias_hh"),
        weight_ih=weight_ih, weight_hh=weight_hh, bias_ih=bias_ih, bias_hh=bias_hh)
    H = _check_torch(4, weight_ih, weight_hh, bias_ih, bias_hh)
    b = _or_zeros(bias_ih, 4 * H, weight_ih) + _or_zeros(bias_hh, 4 * H, weight_ih)
    return (reorder(_transposed(weight_ih), TORCH_LSTM, HASTE_LSTM),
            reorder(_transposed(weight_hh), TORCH_LSTM, HASTE_LSTM),
            reorder(b, TORCH_LSTM, HASTE_LSTM))


def haste_gru_to_torch(kernel: ArrayLike, recurrent_kernel: ArrayLike, bias: ArrayLike,
                       recurrent_bias: ArrayLike) -> Tuple4:
    """haste's GRU weights (haste_pytorch.GRU, cells.haste.GRU: a linear-before-reset GRU, as
    PyTorch's) as nn.GRU's, as haste's own ``to_native_weights`` converts them.

    Parameters
    ----------
    kernel : array_like, [I, 3H]
        Gate blocks z, r, h.
    recurrent_kernel : array_like, [H, 3H]
    bias, recurrent_bias : array_like, [3H]

    Returns
    -------
    weight_ih : numpy.ndarray, [3H, I]
        Gate blocks r, z, n.
    weight_hh : numpy.ndarray, [3H, H]
    bias_ih, bias_hh : numpy.ndarray, [3H]
        bias and recurrent_bias.

    Raises
    ------
    TypeError, ValueError
        As :func:`haste_lstm_to_torch`.

    Examples
    --------
    >>> import numpy as np, cells
    >>> w_ih, w_hh, b_ih, b_hh = cells.convert.haste_gru_to_torch(
    ...     np.zeros((3, 6)), np.zeros((2, 6)), np.zeros(6), np.zeros(6))
    >>> w_ih.shape, w_hh.shape
    ((6, 3), (6, 2))
    """
    kernel, recurrent_kernel, bias, recurrent_bias = _arrays(
        kernel=kernel, recurrent_kernel=recurrent_kernel, bias=bias,
        recurrent_bias=recurrent_bias)
    H = _check_keras(3, kernel, recurrent_kernel)
    check.shape("bias", bias, (3 * H,), "[3*hidden_size]")
    check.shape("recurrent_bias", recurrent_bias, (3 * H,), "[3*hidden_size]")
    return (_transposed(reorder(kernel, HASTE_GRU, TORCH_GRU)),
            _transposed(reorder(recurrent_kernel, HASTE_GRU, TORCH_GRU)),
            reorder(bias, HASTE_GRU, TORCH_GRU),
            reorder(recurrent_bias, HASTE_GRU, TORCH_GRU))


def haste_gru_from_torch(weight_ih: ArrayLike, weight_hh: ArrayLike,
                         bias_ih: Optional[ArrayLike] = None,
                         bias_hh: Optional[ArrayLike] = None) -> Tuple4:
    """nn.GRU's weights (one layer, one direction) as haste's GRU's, as haste's own
    ``from_native_weights`` converts them.

    Parameters
    ----------
    weight_ih : array_like, [3H, I]
        Gate blocks r, z, n.
    weight_hh : array_like, [3H, H]
    bias_ih, bias_hh : array_like, [3H], optional
        None: zeros.

    Returns
    -------
    kernel : numpy.ndarray, [I, 3H]
        Gate blocks z, r, h.
    recurrent_kernel : numpy.ndarray, [H, 3H]
    bias, recurrent_bias : numpy.ndarray, [3H]
        bias_ih and bias_hh.

    Raises
    ------
    TypeError, ValueError
        As :func:`haste_lstm_to_torch`.

    Examples
    --------
    >>> import numpy as np, cells
    >>> kernel, recurrent_kernel, bias, recurrent_bias = cells.convert.haste_gru_from_torch(
    ...     np.zeros((6, 3)), np.zeros((6, 2)))
    >>> kernel.shape, recurrent_bias.shape
    ((3, 6), (6,))
    """
    weight_ih, weight_hh, bias_ih, bias_hh = _arrays(
        ("bias_ih", "bias_hh"),
        weight_ih=weight_ih, weight_hh=weight_hh, bias_ih=bias_ih, bias_hh=bias_hh)
    H = _check_torch(3, weight_ih, weight_hh, bias_ih, bias_hh)
    return (reorder(_transposed(weight_ih), TORCH_GRU, HASTE_GRU),
            reorder(_transposed(weight_hh), TORCH_GRU, HASTE_GRU),
            reorder(_or_zeros(bias_ih, 3 * H, weight_ih), TORCH_GRU, HASTE_GRU),
            reorder(_or_zeros(bias_hh, 3 * H, weight_ih), TORCH_GRU, HASTE_GRU))


# ---------------------------------------------------------------------------------------------
# Whole PyTorch modules
# ---------------------------------------------------------------------------------------------

class TorchRNN(NamedTuple):
    """The weights of a torch.nn.GRU, LSTM, RNN, GRUCell, LSTMCell or RNNCell, from
    :func:`from_torch_module`.

    Attributes
    ----------
    family : str
        "gru", "lstm" or "rnn".
    cell : bool
        True for GRUCell / LSTMCell / RNNCell: one step (cells.gruCell, cells.lstmLayerCell,
        cells.rnnCell; x [bS, nIn]); False: the time loops.
    linear_before_reset : bool or None
        True for a GRU (PyTorch's only GRU), None for an LSTM or RNN.
    batch_first : bool
        The module's x is [bS, sL, nIn]; cells' time loops take x [sL, bS, nIn]
        (``x.transpose(1, 0, 2)``). False for the cells.
    dropout : float
        The module's dropout between layers (training mode only); not applied by cells.
    layers : list of list of tuple
        ``layers[l][d]``: the weights of layer l, direction d (0 forward, 1 reverse: run with
        forward=False), as gru_from_torch (Wx, Wh, b [2, 3H]), lstm_from_torch (Wx, Wr, b [4H])
        or rnn_from_torch (Wx, Wh, b [2, H]) return them. Layer l > 0 takes the outputs of layer
        l-1's directions concatenated, [sL, bS, dirs*H]; h0, c0 [layers*dirs, bS, H] are indexed
        l*dirs + d.
    activation : str or None
        An RNN's nonlinearity, "tanh" or "relu" (the same for every layer); None for a GRU or
        LSTM.
    """

    family: str
    cell: bool
    linear_before_reset: Optional[bool]
    batch_first: bool
    dropout: float
    layers: List[Tuple[Tuple[np.ndarray, ...], ...]]
    activation: Optional[str] = None


def from_torch_module(module: "torch.nn.Module") -> TorchRNN:
    """Every layer's and direction's weights of a torch.nn.GRU, LSTM, RNN, GRUCell, LSTMCell or
    RNNCell in cells' layout.

    Parameters
    ----------
    module : torch.nn.Module
        One of those six classes.

    Returns
    -------
    TorchRNN
        ``layers[l][d]`` holds layer l's weights for direction d.

    Raises
    ------
    TypeError
        Another module.
    ValueError
        An LSTM with proj_size > 0 (its weight_hr is not mapped here: cells.torch.LSTM runs it,
        and lstmLayerTimeLoop takes it as Wproj = weight_hrᵀ).

    Examples
    --------
    >>> import torch
    >>> from cells import convert
    >>> rnn = convert.from_torch_module(torch.nn.GRU(4, 3, num_layers=2, bidirectional=True))
    >>> len(rnn.layers), len(rnn.layers[0]), rnn.layers[1][0][0].shape    # Wx of layer 1: [2H, 3H]
    (2, 2, (6, 9))
    """
    import torch

    kinds = ((torch.nn.GRU, "gru", False), (torch.nn.LSTM, "lstm", False),
             (torch.nn.RNN, "rnn", False), (torch.nn.GRUCell, "gru", True),
             (torch.nn.LSTMCell, "lstm", True), (torch.nn.RNNCell, "rnn", True))
    for kind, family, cell in kinds:  # noqa: B007 (the match is used after the loop)
        if isinstance(module, kind):
            break
    else:
        raise TypeError(f"module: expected a torch.nn.GRU, LSTM, RNN, GRUCell, LSTMCell or "
                        f"RNNCell, got {type(module).__name__}")
    if getattr(module, "proj_size", 0) > 0:
        raise ValueError(f"module: an LSTM with proj_size={module.proj_size}: from_torch_module "
                         f"does not map its weight_hr (cells.torch.LSTM runs it; "
                         f"lstmLayerTimeLoop takes Wproj = weight_hr.T)")
    convert = {"gru": gru_from_torch, "lstm": lstm_from_torch, "rnn": rnn_from_torch}[family]
    names = ("weight_ih", "weight_hh", "bias_ih", "bias_hh")
    if cell:
        layers = [(convert(*(getattr(module, n) for n in names)),)]
    else:
        suffixes = ("", "_reverse") if module.bidirectional else ("",)
        # a module made with bias=False has no bias_* attributes: None, zeros in cells
        layers = [tuple(convert(*(getattr(module, f"{n}_l{layer}{s}", None) for n in names))
                        for s in suffixes)
                  for layer in range(module.num_layers)]
    return TorchRNN(family=family, cell=cell,
                    linear_before_reset=True if family == "gru" else None,
                    batch_first=bool(getattr(module, "batch_first", False)),
                    dropout=float(getattr(module, "dropout", 0.0)), layers=layers,
                    activation=module.nonlinearity if family == "rnn" else None)


# ---------------------------------------------------------------------------------------------
# Arrays, checks and the gate-block permutation
# ---------------------------------------------------------------------------------------------

def _arrays(optional=(), **arrays):
    """The arguments as NumPy arrays, in order: torch tensors detached and copied to the CPU,
    CuPy arrays kept, anything else through np.asarray, None kept for the names in `optional`.
    A TypeError unless all are float32 or all float64 and all NumPy or all CuPy (no conversion
    happens)."""
    torch = sys.modules.get("torch")  # a torch tensor exists only once torch is imported
    out = {}
    for name, a in arrays.items():
        if torch is not None and isinstance(a, torch.Tensor):
            if a.dtype not in (torch.float32, torch.float64):
                raise TypeError(f"{name}: expected dtype float32 or float64, got {a.dtype}")
            a = a.detach().cpu().numpy()
        out[name] = a if a is None or on_gpu(a) else np.asarray(a)
    check.real_arrays(optional=optional, **out)
    return tuple(out.values())


def _transposed(a):
    """a.T as a new C-contiguous array."""
    return a.T.copy(order="C")


def _zeros(shape, like):
    """New zeros of `like`'s dtype and kind (NumPy or CuPy)."""
    return array_module(like).zeros(shape, like.dtype)


def _or_zeros(bias, n, like):
    """bias, or zeros [n] of `like`'s dtype and kind in its place when it is None."""
    return _zeros(n, like) if bias is None else bias


def _two_rows(b):
    """A bias [n*H] or [2, n*H] as a new array [2, n*H] (rows bx, bh): a copy of b, or [b, 0]
    when b is [n*H] (a GRU's [3H], an RNN's [H])."""
    xp = array_module(b)
    return b.copy() if b.ndim == 2 else xp.stack([b, xp.zeros_like(b)])


def _fold(b, lbr):
    """A checked GRU bias as one bias [3H] for the same model (see gru_fold_bias)."""
    if b.ndim == 1:
        return b.copy()
    H = b.shape[1] // 3
    if lbr and bool((b[1, 2 * H:] != 0).any()):
        raise ValueError(
            "b: the recurrent candidate bias b[1, 2*nOut:] is not zero; with "
            "linear_before_reset=True it sits inside r∘(hI·Wh_c + bh_c) and cannot be folded "
            "into one bias (keep b [2, 3*nOut]: PyTorch, ONNX, Keras reset_after=True)")
    return b[0] + b[1]  # with lbr, b[1, 2H:] is 0: this adds only bh_r, bh_u


def _check_gru(Wx, Wh, b):
    """cells' GRU weights Wx [I, 3H], Wh [H, 3H], b [3H] or [2, 3H]; returns H."""
    H = _check_cells(3, Wx, "Wh", Wh)
    _check_two_row_bias(3, H, b)
    return H


def _check_rnn(Wx, Wh, b):
    """cells' RNN weights Wx [I, H], Wh [H, H], b [H] or [2, H]; returns H."""
    H = _check_cells(1, Wx, "Wh", Wh)
    _check_two_row_bias(1, H, b)
    return H


def _check_two_row_bias(n, H, b):
    """b [n*H] (bx alone) or [2, n*H] (rows bx, bh)."""
    if b.shape not in ((n * H,), (2, n * H)):
        size = check.times(n, "nOut")
        raise ValueError(f"b: expected shape {(n * H,)} = [{size}] or {(2, n * H)} = "
                         f"[2, {size}] (rows bx, bh), got {b.shape}")


def _check_lstm(Wx, Wr, b, Wp=None):
    """cells' LSTM weights Wx [I, 4H], Wr [H, 4H], b [4H] or None, Wp [3H] or None; returns H."""
    H = _check_cells(4, Wx, "Wr", Wr)
    if b is not None:
        check.shape("b", b, (4 * H,), "[4*nOut]")
    if Wp is not None:
        check.shape("Wp", Wp, (3 * H,), "[3*nOut]")
    return H


def _check_cells(n, Wx, rec_name, Wrec):
    """cells' Wx [I, n*H] and the recurrent matrix [H, n*H]; returns H."""
    cols = check.times(n, "nOut")
    check.ndim(rec_name, Wrec, 2, f"[nOut, {cols}]")
    H = Wrec.shape[0]
    check.shape(rec_name, Wrec, (H, n * H), f"[nOut, {cols}]")
    check.ndim("Wx", Wx, 2, f"[nIn, {cols}]")
    check.shape("Wx", Wx, (Wx.shape[0], n * H), f"[nIn, {cols}] (nOut from {rec_name})")
    return H


def _check_torch(n, weight_ih, weight_hh, bias_ih, bias_hh):
    """PyTorch's weight_ih [n*H, I], weight_hh [n*H, H], biases [n*H] or None; returns H."""
    rows = check.times(n, "hidden_size")
    check.ndim("weight_hh", weight_hh, 2, f"[{rows}, hidden_size]")
    H = weight_hh.shape[1]
    check.shape("weight_hh", weight_hh, (n * H, H), f"[{rows}, hidden_size]")
    check.ndim("weight_ih", weight_ih, 2, f"[{rows}, input_size]")
    check.shape("weight_ih", weight_ih, (n * H, weight_ih.shape[1]),
                f"[{rows}, input_size] (hidden_size from weight_hh)")
    for name, bias in (("bias_ih", bias_ih), ("bias_hh", bias_hh)):
        if bias is not None:
            check.shape(name, bias, (n * H,), f"[{rows}]")
    return H


def _check_keras(n, kernel, recurrent_kernel):
    """Keras's kernel [I, n*units], recurrent_kernel [units, n*units]; returns units."""
    check.ndim("recurrent_kernel", recurrent_kernel, 2, f"[units, {n}*units]")
    H = recurrent_kernel.shape[0]
    check.shape("recurrent_kernel", recurrent_kernel, (H, n * H), f"[units, {n}*units]")
    check.ndim("kernel", kernel, 2, f"[input_dim, {n}*units]")
    check.shape("kernel", kernel, (kernel.shape[0], n * H),
                f"[input_dim, {n}*units] (units from recurrent_kernel)")
    return H


def _check_onnx(n, W, R, direction):
    """ONNX's W [dirs, n*H, I], R [dirs, n*H, H] and a direction index in [0, dirs);
    returns (H, direction)."""
    rows = check.times(n, "hidden_size")
    check.ndim("R", R, 3, f"[num_directions, {rows}, hidden_size]")
    dirs, H = R.shape[0], R.shape[2]
    check.shape("R", R, (dirs, n * H, H), f"[num_directions, {rows}, hidden_size]")
    check.ndim("W", W, 3, f"[num_directions, {rows}, input_size]")
    check.shape("W", W, (dirs, n * H, W.shape[2]),
                f"[num_directions, {rows}, input_size] (from R)")
    if isinstance(direction, (bool, np.bool_)) or not isinstance(direction, numbers.Integral):
        raise TypeError(f"direction: expected an int, got {direction!r}")
    if not 0 <= direction < dirs:
        raise ValueError(f"direction: expected an index in [0, {dirs}) (the num_directions of "
                         f"W and R), got {direction}")
    return H, int(direction)

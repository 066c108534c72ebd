"""How the faces' parameters become the time loop's, for every backend (cells._cpu, cells._gpu):
biases split or summed, missing initial states, the clip bound, activation codes.

`xp` is the call's array module (numpy or cupy) wherever a new array is made.
"""
import math

# The RNN's activation codes in the kernels (include/cells/activations.h: libnd4j's).
RNN_ACTIVATIONS = {"tanh": 0, "relu": 1}


def torch_layout(Wx, Wh):
    """Whether the weights Wx [nIn, G] and Wh [nState, G] are both in PyTorch's layout,
    transposed: F-ordered (each the transpose of a C-ordered array, as weight_ih.T) and not both
    C-ordered as well. The CPU's time loop reads such weights where they are, and every backend
    returns their gradients F-ordered, like them."""
    return (Wx is not None and Wh is not None and Wx.flags.f_contiguous and Wh.flags.f_contiguous
            and not (Wx.flags.c_contiguous and Wh.flags.c_contiguous))


def gru_family(lbr):
    """The time loop's GRU family for linear_before_reset `lbr`."""
    return "gru_linear_before_reset" if lbr else "gru_reset_before"


def split_gru_bias(xp, b, nOut, lbr):
    """(bx, bhc): bx [3nOut] holds every bias that is a plain sum in the pre-activations
    (bh_r, bh_u always, bh_c too when reset-before); bhc [nOut] is the recurrent candidate bias
    that sits inside r∘(hPrev·Wh_c + bh_c) (linear_before_reset only, else None)."""
    if b.ndim == 1:
        return b, (xp.zeros(nOut, b.dtype) if lbr else None)
    if not lbr:
        return b[0] + b[1], None
    bx = b[0].copy()
    bx[:2 * nOut] += b[1, :2 * nOut]
    return bx, b[1, 2 * nOut:]


def gru_bias_grad(xp, b, dLdbx, dLdbhc, lbr):
    """dL/db in b's layout, from dLdbx = Σ dz and (lbr) dLdbhc = Σ dL/dhc. The recurrent biases
    bh_r, bh_u (and bh_c when reset-before) are plain sums with bx, so they share its gradient."""
    if b.ndim == 1:
        return dLdbx
    dLdb = xp.stack([dLdbx, dLdbx])
    if lbr:
        dLdb[1, 2 * dLdbhc.shape[0]:] = dLdbhc
    return dLdb


def rnn_bias(b):
    """bx + bh: b is [nOut] (bx alone) or [2, nOut] (rows bx, bh), a plain sum either way."""
    return b if b.ndim == 1 else b[0] + b[1]


def rnn_bias_grad(xp, b, dLdb):
    """dL/db in b's layout: both rows of a [2, nOut] b get the whole gradient (summands)."""
    return dLdb if b.ndim == 1 else xp.stack([dLdb, dLdb])


def initial_state(xp, a, bS, n, dtype):
    """An initial state [bS, n]: `a`, or zeros when it is None."""
    return xp.zeros((bS, n), dtype) if a is None else a


def kernel_clip(cell_clip):
    """The time loop's clip bound: +inf stands for no clipping (cell_clip = 0)."""
    return cell_clip if cell_clip > 0 else math.inf
